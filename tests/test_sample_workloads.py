"""On the bundled sample day, the CLI shows the split the product exists to show."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

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
    assert "Dominant phase for time: decode" in out and "Lever (time):" in out and "Why (time):" in out
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


def test_every_workload_has_a_lever_for_time_and_one_for_money(demo_store):
    w = _workloads(demo_store)
    for name, row in w.items():
        for key in ("latency_diagnosis", "latency_lever", "cost_diagnosis", "cost_lever"):
            assert isinstance(row[key], str) and row[key], (name, key)
        # the money diagnosis cites its numbers: a share and dollars
        assert re.search(r"\d+% of spend", row["cost_diagnosis"]) and "$" in row["cost_diagnosis"], name
        assert re.search(r"\$\d[\d,]*\.\d\d a day", row["cost_lever"]), (name, row["cost_lever"])
        # advice never promises a saving that rounds to nothing
        assert "$0.00" not in row["cost_lever"], (name, row["cost_lever"])
    # indexing spends about two cents a day: its money lever says so instead of "saves about $0.00 a day"
    indexing = w["indexing"]
    assert Decimal(indexing["cost_usd_best"]) < Decimal("0.05")
    assert indexing["cost_lever"].startswith("No money lever is worth pulling"), indexing["cost_lever"]
    assert "latency lever" in indexing["cost_lever"]
    agent = w["agent"]
    # the agent's money is on the input side (cache writes), though decode dominates its time
    assert agent["dominant_latency_phase"] == "decode" and agent["dominant_cost_phase"] == "prefill"
    assert agent["cost_cause"] in {"cache_writes", "uncached_prefix"}
    assert re.search(r"cach", agent["cost_lever"], re.I)
    assert agent["cost_lever"] != agent["latency_lever"]
    # the dollar figure is the cache-write spend per day over the agent's days with calls
    per_day = float(re.search(r"\$([\d,]+\.\d\d) a day", agent["cost_lever"]).group(1).replace(",", ""))
    expected = float(agent["cache_write_cost_usd"]) / agent["days"]
    assert per_day == pytest.approx(expected, abs=0.006) and per_day > 0


def test_a_caching_note_says_why_achieved_is_above_possible(demo_store):
    con = duckdb.connect(str(demo_store), read_only=True)
    try:
        rows = con.execute("SELECT workload, achieved_share, possible_share, comparable_calls, reads_reported_calls, note "
                           "FROM caching_opportunity WHERE level = 'workload' AND lifetime_s = 300").fetchall()
    finally:
        con.close()
    above = [r for r in rows if r[1] is not None and r[2] is not None and r[1] > r[2]]
    assert {r[0] for r in above} >= {"agent"}
    for name, achieved, possible, comparable, reporting, note in above:
        assert f"above the {100 * possible:.1f}% possible, because possible is measured only on the " \
               f"{comparable:,} of {reporting:,} reporting calls" in note, (name, note)
    for r in rows:
        # dollars to the cent: no four-decimal amounts
        assert not re.search(r"\$\d+\.\d{3}", r[5]), r


def test_reconciliation_explanations_give_money_to_the_cent(demo_store):
    con = duckdb.connect(str(demo_store), read_only=True)
    try:
        notes = [r[0] for r in con.execute("SELECT explanation FROM reconciliation WHERE explanation LIKE '%$%'").fetchall()]
    finally:
        con.close()
    assert len(notes) > 5
    for note in notes:
        # amounts to the cent; only a price per million tokens ('$0.3713/M') keeps more digits
        assert not re.search(r"\$[\d,]*\.\d{3,}(?!\d*/M)", note), note
        assert "$0.00 of the bill" not in note, note
    # the sample day has an untraced remainder below half a cent: said as such, not as $0.00 or $0.001382
    assert any("under $0.01 of the bill stays untraced" in n for n in notes)


def test_explain_gives_both_levers(demo_store):
    out = subprocess.run([sys.executable, "-m", "phaselens", "explain", "agent", "--db", str(demo_store)],
                         check=True, capture_output=True, text=True).stdout
    assert "Lever (time):" in out and "Lever (money):" in out and "cache" in out.split("Lever (money):")[1]


def test_ingest_of_the_sample_folder_skips_code_and_docs_with_a_count(tmp_path):
    root = Path(__file__).resolve().parents[1] / "sample_logs"
    out = subprocess.run([sys.executable, "-m", "phaselens", "ingest", "--db", str(tmp_path / "s.duckdb"), str(root)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    skipped = sum(1 for f in root.rglob("*") if f.is_file() and f.suffix in (".py", ".md", ".toml")
                  and not any(p.startswith(".") for p in f.relative_to(root).parts))
    assert skipped and f"{skipped:,} code, docs or config file(s) in the folders were not read" in out.stderr
    assert " 0 failed" in out.stderr and "records stored" in out.stderr
    assert ".py " not in out.stdout and "failed" not in out.stdout.split("status")[-1].split()


def test_money_in_every_built_text_is_written_by_one_macro():
    """The money rule of the build's texts lives in pipeline/sql/text_macros.sql alone, and reads as the
    surfaces read money: to the cent, half up, thousands separators, 'under $0.01' for a non-zero crumb."""
    import duckdb

    from phaselens.pipeline.store import sql_text

    sql_dir = Path(__file__).resolve().parents[1] / "pipeline" / "sql"
    writers = [p.name for p in sql_dir.rglob("*.sql") if "'$%,.2f'" in p.read_text() or "$%,.2f" in p.read_text()]
    assert writers == ["text_macros.sql"]
    con = duckdb.connect()
    con.execute(sql_text("text_macros"))
    got = [con.execute("SELECT pl_usd_text(?::DECIMAL(38, 12))", [v]).fetchone()[0]
           for v in ("1234.5", "0.005", "0.0049", "0", "-0.004", "-12.345", None)]
    assert got == ["$1,234.50", "$0.01", "under $0.01", "$0.00", "under $0.01", "-$12.35", "unknown"]
    assert con.execute("SELECT pl_usd_text(2.675::DOUBLE)").fetchone()[0] == "$2.68"  # half up, not to even
