"""The workload page's routing what-if panel shows the numbers `phaselens whatif` prints (one read model)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from phaselens.app.ui import millis, pct, seconds, usd
from phaselens.cli import app
from tests.app.stores import SAMPLE_CONFIG
from tests.app.test_pages import render

TARGETS = ["azure.ai.openai/gpt-4.1-mini", "openai/gpt-4o"]


def test_whatif_panel_agrees_with_the_cli(sample_db, monkeypatch):
    at = render(sample_db, "workload", monkeypatch, {"detail": ["tab_completion"]})
    assert not at.exception
    picker = next(m for m in at.multiselect if m.label == "Move it to")
    assert set(TARGETS) <= set(picker.options)
    picker.set_value(TARGETS).run()
    assert not at.exception
    table = next(df.value for df in at.dataframe if "goodput" in df.value.columns)

    args = ["whatif", "tab_completion", *[a for t in TARGETS for a in ("--to", t)], "--format", "json",
            "--db", str(sample_db), "--config", str(SAMPLE_CONFIG)]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    cli = json.loads(out.output)
    shown = table.set_index("option")
    assert list(shown.index) == ["today: vllm/qwen2.5-coder-7b", *TARGETS]
    for t in cli["targets"]:
        row, p = shown.loc[t["target"]], t["predicted"]
        assert row["TTFT p50"] == seconds(p["ttft_p50_s"]) and row["TTFT p95"] == seconds(p["ttft_p95_s"])
        assert row["ITL p50"] == millis(p["itl_p50_s"]) and row["ITL p95"] == millis(p["itl_p95_s"])
        assert row["cost per day"] == usd(p["cost_per_day_usd"]) and row["goodput"] == pct(p["goodput_share"])
        assert row["Δ cost per day"] == usd(t["delta"]["cost_per_day_usd"])
        assert row["latency basis"] == t["basis"]["latency_model"]
    today = shown.loc["today: vllm/qwen2.5-coder-7b"]
    assert today["TTFT p95"] == seconds(cli["today"]["ttft_p95_s"])
    assert today["cost per day"] == usd(cli["today"]["cost_per_day_usd"])
