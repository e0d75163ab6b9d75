"""Rules that live once: the default workload rule and the relation-exists check (pipeline/store.py).

The default workload (feature tag, else service, else `unassigned`; blank counts as missing) is written in
`models.vocabulary.default_workload_sql`; SQL files name it `default_workload(hint, service)` and `sql_text`
writes it out, so the build, the caching stage, `invoice_costs` and the `requests` view agree, before a build
and after it.
"""

from __future__ import annotations

from pathlib import Path

from phaselens.models.vocabulary import default_workload_sql
from phaselens.pipeline.build import build
from phaselens.pipeline.store import relation_exists, sql_text

SQL_DIR = Path(__file__).resolve().parents[2] / "pipeline" / "sql"


def test_every_sql_file_gets_the_rule_written_out():
    names = [p.stem for p in SQL_DIR.glob("*.sql")]
    users = [n for n in names if "default_workload(" in (SQL_DIR / f"{n}.sql").read_text()]
    assert {"views", "allocation"} <= set(users)
    for name in names:
        assert "default_workload(" not in sql_text(name), name
    assert default_workload_sql("c.workload_hint", "c.service") in sql_text("views")


def insert_call(con, call_id: str, hint: str | None, service: str | None) -> None:
    con.execute("INSERT INTO raw_calls (call_id, source, operation, status, provider, model, timing_source, "
                "started_at, workload_hint, service, output_tokens) VALUES "
                "(?, 'test', 'chat', 'ok', 'acme', 'm1', 'none', TIMESTAMP '2026-03-02 12:00:00', ?, ?, 10)",
                [call_id, hint, service])


def test_requests_invoice_costs_and_build_agree_on_the_default(store):
    cases = {"a": ("search", "svc"), "b": ("", "svc"), "c": (None, ""), "d": (None, None), "e": ("", "")}
    expected = {"a": "search", "b": "svc", "c": "unassigned", "d": "unassigned", "e": "unassigned"}
    for call_id, (hint, service) in cases.items():
        insert_call(store, call_id, hint, service)
    before = dict(store.execute("SELECT call_id, workload FROM requests").fetchall())
    assert before == expected  # before any build: the view applies the default rule itself
    build(store)
    assert dict(store.execute("SELECT call_id, workload FROM call_workload").fetchall()) == expected
    assert dict(store.execute("SELECT call_id, workload FROM requests").fetchall()) == expected
    assert dict(store.execute("SELECT call_id, workload FROM invoice_costs").fetchall()) == expected


def test_relation_exists_sees_the_store_and_temporary_relations_only(store, tmp_path):
    import pyarrow as pa

    assert relation_exists(store, "raw_calls") and relation_exists(store, "requests")
    assert not relation_exists(store, "no_such_relation")
    store.execute("CREATE TEMP TABLE scratch (x INT)")
    store.register("arrow_rel", pa.table({"x": [1]}))
    assert relation_exists(store, "scratch") and relation_exists(store, "arrow_rel")
    other = tmp_path / "other.duckdb"
    store.execute(f"ATTACH '{other}' AS other")
    store.execute("CREATE TABLE other.only_there (x INT)")
    assert not relation_exists(store, "only_there")


def test_the_itl_split_is_written_once_and_agrees_in_python_and_sql(store):
    import re

    from phaselens.models.vocabulary import itl_per_token, itl_split_sql

    root = SQL_DIR.parents[1]
    inline = []
    for path in [*root.glob("pipeline/sql/*.sql"), *root.glob("ingest/sql/*.sql"), *root.glob("ingest/*.py"),
                 *root.glob("pipeline/*.py")]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("--")[0] if path.suffix == ".sql" else line.split("#")[0]
            # chunk-gap ITLs rescale chunks to tokens, a different formula
            if re.search(r"/\s*\((\w+\.)?output_tokens - 1\)", code) and "chunk_ns" not in code:
                inline.append(f"{path.relative_to(root)}:{n}")
    assert inline == []
    assert "itl_split(" in (SQL_DIR / "latency_call_timing.sql").read_text()
    assert itl_split_sql("out_decode_s", "output_tokens") in sql_text("latency_call_timing")
    for decode, tokens in [(1.0, 11), (0.5, 2), (0.5, 1), (0.5, 0), (None, 5), (0.5, None)]:
        sql = itl_split_sql("CAST($d AS DOUBLE)", "CAST($n AS BIGINT)")
        (in_sql,) = store.execute(f"SELECT {sql}", {"d": decode, "n": tokens}).fetchone()
        assert in_sql == itl_per_token(decode, tokens), (decode, tokens)


def test_the_dominance_and_diagnosis_rules_are_written_once():
    """Dominance, causes and the diagnosis and lever texts live in workload_rules.sql; the store's
    `workload_stats` and the snapshot's `workload_phases` both call them, and no other SQL or Python spells the
    rule out again."""
    import re

    rules = (SQL_DIR / "workload_rules.sql").read_text()
    macros = set(re.findall(r"CREATE OR REPLACE MACRO (pl_\w+)\(", rules))
    assert {"pl_dominant_phase", "pl_ttft_cause", "pl_itl_cause", "pl_cost_cause", "pl_latency_diagnosis",
            "pl_latency_lever", "pl_cost_diagnosis", "pl_cost_lever"} <= macros
    for caller in ("workloads", "rollup_macros"):
        text = (SQL_DIR / f"{caller}.sql").read_text()
        for m in ("pl_dominant_phase", "pl_ttft_cause", "pl_itl_cause", "pl_cost_cause", "pl_latency_lever",
                  "pl_cost_lever"):
            assert f"{m}(" in text, (caller, m)
    root = SQL_DIR.parents[1]
    spelled = re.compile(r">=\s*0\.5\s+THEN\s+'prefill'|\"prefill\" if .*>= 0\.5|'prefill' if .*>= 0\.5")
    for path in [*SQL_DIR.rglob("*.sql"), *(root / "app").rglob("*.py"), *(root / "pipeline").glob("*.py")]:
        if path.name != "workload_rules.sql":
            assert not spelled.search(path.read_text()), path
    assert "Shorten outputs (tighter max_tokens" not in (SQL_DIR / "workloads.sql").read_text()
