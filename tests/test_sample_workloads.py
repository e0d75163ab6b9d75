"""On the bundled sample day, the CLI shows the split the product exists to show."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

BEDROCK_FOCUS = Path(__file__).resolve().parents[1] / "sample_logs" / "billing" / "bedrock_focus.csv"


def _workloads(db) -> dict[str, dict]:
    out = subprocess.run([sys.executable, "-m", "phaselens", "workloads", "--db", str(db), "--format", "json"],
                         check=True, capture_output=True, text=True)
    return {w["workload"]: w for w in json.loads(out.stdout)}


def test_tab_completion_is_prefill_bound_and_agents_decode_bound(demo_store):
    w = _workloads(demo_store)
    assert set(w) >= {"tab_completion", "inline_edit", "chat", "agent", "indexing"}
    tab, agent = w["tab_completion"], w["agent"]
    assert tab["dominant_latency_phase"] == "prefill" and tab["prefill_time_share"] > 0.5
    assert tab["shape_class"] == "short_prompt_short_output"
    assert agent["dominant_latency_phase"] == "decode" and agent["decode_time_share"] > 0.5
    assert agent["shape_class"] == "large_context_long_output"
    for row in (tab, agent):
        # the diagnosis cites the numbers behind it, and the lever is one sentence
        assert re.search(r"\d+%", row["diagnosis"]) and re.search(r"\d[\d,.]* (ms|s|tokens|output tokens)", row["diagnosis"])
        assert row["lever"] and row["lever"].count(". ") == 0
    # the shares are the ones the time columns give
    assert abs(tab["prefill_time_share"] - tab["prefill_time_s"] / (tab["prefill_time_s"] + tab["decode_time_s"])) < 1e-9


def test_self_hosted_cost_is_the_deployments_gpu_hours(demo_store):
    w = _workloads(demo_store)
    # sample_logs/phaselens.toml: 2 GPUs x $1.10/h over the 24 h the tab completion deployment ran
    assert abs(float(w["tab_completion"]["cost_usd"]) - 2 * 1.10 * 24) < 1e-6


def test_explain_names_the_phase_and_the_lever(demo_store):
    out = subprocess.run([sys.executable, "-m", "phaselens", "explain", "agent", "--db", str(demo_store)],
                         check=True, capture_output=True, text=True).stdout
    assert "Dominant phase for time: decode" in out and "Lever:" in out and "Why:" in out
    bad = subprocess.run([sys.executable, "-m", "phaselens", "explain", "nope", "--db", str(demo_store)],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "known workloads" in bad.stderr and "tab_completion" in bad.stderr


def test_workloads_run_on_the_providers_that_bill_them(demo_store):
    w = _workloads(demo_store)
    assert w["inline_edit"]["models"] == "aws.bedrock/claude-sonnet-4"
    assert w["chat"]["models"] == "azure.ai.openai/gpt-4.1-mini, openai/gpt-4o"
    assert w["agent"]["models"] == "anthropic/claude-sonnet-4, openai/o4-mini"
    # Bedrock bills the inline edits at the list price phaselens knows: the workload's cost is the FOCUS bill
    with BEDROCK_FOCUS.open(newline="") as f:
        bill = sum(Decimal(row["BilledCost"]) for row in csv.DictReader(f))
    assert bill > 0 and Decimal(w["inline_edit"]["cost_usd"]) == bill
