"""The CLI is legible: JSON numbers are numbers (money one documented form), tables survive newlines, shortened
paths keep the file name, an empty input is said plainly, `report` defaults to the last complete UTC day, every
option's help says its default, and a configuration error points at the doc of the section at fault."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import click
import pytest
import typer
from typer.testing import CliRunner

from phaselens.cli import app
from phaselens.output import Format, is_money, render
from tests.app.stores import SAMPLE_CONFIG, build_sample_store, sample_inputs

runner = CliRunner()
COUNT_KEYS = ("tokens", "calls", "records", "accepted", "rejected", "skipped", "duplicates", "token_delta", "lines")


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    if not sample_inputs():
        pytest.skip("sample_logs/traces is empty")
    return build_sample_store(tmp_path_factory.mktemp("cli-sample"))


def _walk(v, key: str, found: list) -> None:
    if isinstance(v, dict):
        for k, x in v.items():
            _walk(x, f"{key}.{k}" if is_money(key) else str(k), found)
    elif isinstance(v, list):
        for x in v:
            _walk(x, key, found)
    else:
        found.append((key, v))


@pytest.mark.parametrize("args", [
    ["workloads"], ["reconcile"], ["loads"], ["loads", "--gaps"],
    ["explain", "agent"], ["whatif", "tab_completion", "--to", "openai/gpt-4o", "--config", str(SAMPLE_CONFIG)],
])
def test_json_numbers_are_numbers_and_money_is_an_exact_decimal_string(sample, args):
    out = runner.invoke(app, [*args, "--db", str(sample), "--format", "json"])
    assert out.exit_code == 0, out.output
    values: list = []
    _walk(json.loads(out.stdout), "", values)
    assert values, "the command printed figures"
    for key, v in values:
        name = key.rsplit(".", 1)[-1]
        if isinstance(v, str):
            try:
                Decimal(v)
            except ArithmeticError:
                continue  # text
            if v.strip().lstrip("-").replace(".", "", 1).isdigit():
                assert is_money(key), f"{args[0]}: {key} = {v!r} is a number written as a string"
        if is_money(key) and v is not None:
            assert isinstance(v, str), f"{args[0]}: money {key} = {v!r} is not a decimal string"
            Decimal(v)  # exact decimal text
        elif name.endswith(COUNT_KEYS) and not name.endswith(("_share", "_s", "_per_token")) and v is not None:
            assert isinstance(v, int) and not isinstance(v, bool), f"{args[0]}: count {key} = {v!r} is not an integer"


def test_table_keeps_one_line_per_row_and_the_file_name():
    path = "/very/long/folder/that/goes/on/and/on/traces/editor-tab.jsonl.gz"
    table = render(["source", "raw", "file", "cost_usd"],
                   [("otlp", 'line one\nline two\r\n\tend', path, Decimal("1234.565")),
                    ("otlp", "plain", "short.jsonl", Decimal("-0.115"))], Format.table, max_width=32)
    lines = table.splitlines()
    assert len(lines) == 4, table  # header, rule, two rows
    assert "line one\\nline two\\r\\n\\tend" in lines[2]
    assert "editor-tab.jsonl.gz" in lines[2] and "…" in lines[2]
    assert "$1,234.57" in lines[2] and "-$0.12" in lines[3]


def test_rejects_table_survives_control_characters_in_raw(tmp_path):
    """A real reject whose raw text holds a CR and a tab (JSON whitespace, cut at the CR by the reader): one
    table line per reject, the characters shown as escapes."""
    folder = tmp_path / "in"
    folder.mkdir()
    line = (Path(__file__).resolve().parents[1] / "sample_logs" / "billing" / "openai_usage.jsonl").read_text()
    line = line.splitlines()[0]
    bad = line.replace('"input_tokens":', '"input_tokens":\r\t"many",\n"x":', 1)
    assert bad != line
    (folder / "openai_usage.jsonl").write_text(line + "\n" + bad + "\n")
    db = tmp_path / "s.duckdb"
    assert runner.invoke(app, ["ingest", str(folder), "--db", str(db)]).exit_code == 0
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        raws = [r for (r,) in con.execute("SELECT raw FROM rejects").fetchall()]
    assert raws and any(any(c in r for c in "\r\n\t") for r in raws), raws
    out = runner.invoke(app, ["rejects", "--db", str(db)])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert len(lines) == 2 + len(raws), out.stdout
    assert "\t" not in out.stdout and "\\t" in out.stdout


def test_an_empty_folder_is_said_plainly(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    out = runner.invoke(app, ["ingest", str(empty), "--db", str(tmp_path / "s.duckdb")])
    assert out.exit_code == 1
    assert "no data file found" in out.stderr and "it is empty" in out.stderr
    code = tmp_path / "code"
    code.mkdir()
    (code / "tool.py").write_text("print(1)\n")
    (code / "README.md").write_text("# x\n")
    out = runner.invoke(app, ["ingest", str(code), "--db", str(tmp_path / "s.duckdb")])
    assert out.exit_code == 1
    assert "holds only 2 code, docs or config file(s)" in out.stderr


def test_report_defaults_to_the_last_complete_utc_day(sample, tmp_path):
    import duckdb

    with duckdb.connect(str(sample), read_only=True) as con:
        first, last = con.execute("SELECT min(started_at), max(started_at) FROM requests").fetchone()
    assert first.date() < last.date(), "the sample runs past midnight into a partial day"
    out = runner.invoke(app, ["report", "--db", str(sample), "--out", str(tmp_path / "r"), "--format", "json"])
    assert out.exit_code == 0, out.output
    want = (last.date() - timedelta(days=1)).isoformat()
    assert f"period: {want} (the last complete UTC day" in out.stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert want in json.dumps(report.get("period", report))


def test_every_option_says_its_default():
    root = typer.main.get_command(app)
    missing = []
    for name, cmd in root.commands.items():
        for p in cmd.params:
            if not isinstance(p, click.Option) or p.name == "help":
                continue
            shown = p.show_default is not False and p.default not in (None, False, ()) and not p.is_flag
            if not shown and "default" not in (p.help or "").lower():
                missing.append(f"{name} {p.opts[0]}")
    assert missing == []


@pytest.mark.parametrize(("text", "doc"), [
    ("[latency]\nbogus = 1\n", "docs/latency.md"),
    ("colour = 1\n", "docs/config.md"),
    ('[[prices]]\nprovider = "openai"\nmodel = "m"\ninput_per_mtok = 1\nbogus = 2\n', "docs/pricebook.md"),
])
def test_a_configuration_error_points_at_the_doc_of_its_section(tmp_path, text, doc):
    cfg = tmp_path / "phaselens.toml"
    cfg.write_text(text)
    out = runner.invoke(app, ["build", "--db", str(tmp_path / "s.duckdb"), "--config", str(cfg)])
    assert out.exit_code != 0
    assert doc in out.stderr, out.stderr
