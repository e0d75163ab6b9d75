"""Incremental build = full build: random sequences of loads built day by day give the store a full build gives.

The loads are slices of the bundled sample day (its traces and billing exports, ingested once), moved to other
UTC days and hours: new days, late data for old days, files loaded twice, billing after the traces, calls that
cross midnight. After every sequence each built table (and the views over them) of the incrementally built
store is compared with a full build of the same raw rows: the same rows, exact decimals, integers and text;
floats equal to 1e-9 relative (DuckDB's parallel sums do not fix their order, not even between two full builds).
"""

from __future__ import annotations

import math
import random
from decimal import Decimal
from pathlib import Path

import pytest

from phaselens.models.config import load_config
from phaselens.pipeline.build import build
from phaselens.pipeline.load import ingest
from phaselens.pipeline.store import connect


SAMPLE_LOGS = Path(__file__).resolve().parents[2] / "sample_logs"
SEQUENCES = 50
BUCKETS = 4            # a sample-day slice: one of this many hash buckets of the day's calls
SLICE_SHARE = 0.02     # of the sample day's calls, what the template keeps (a few hundred calls)
NOT_COMPARED = {"raw_calls", "raw_billing_lines", "raw_rejects", "raw_loads", "phaselens_meta", "build_state",
                "build_loads", "run_files", "template_calls", "template_billing"}
VIEWS = ("requests", "workloads", "invoice_costs")


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A store holding a small share of the sample day's calls and all its billing lines, as templates."""
    path = tmp_path_factory.mktemp("incr") / "template.duckdb"
    con = connect(path)
    ingest(con, [SAMPLE_LOGS / "traces", SAMPLE_LOGS / "billing"])
    con.execute(f"CREATE TABLE template_calls AS SELECT * FROM raw_calls "
                f"WHERE hash(call_id) % 10000 < {round(SLICE_SHARE * 10000)}")
    con.execute("CREATE TABLE template_billing AS SELECT * FROM raw_billing_lines")
    con.execute("DELETE FROM raw_calls; DELETE FROM raw_billing_lines")
    n = con.execute("SELECT count(*) FROM template_calls").fetchone()[0]
    assert n > 100, n
    con.close()
    return path


def _load_calls(con, load_id: str, day: int, hours: int, bucket: int) -> None:
    """A file of calls: one bucket of the template moved `day` days and `hours` hours (ids follow the move, so
    the same move and bucket again is a duplicate file: nothing new is stored, as the loader does)."""
    shift = f"INTERVAL {day} DAY + INTERVAL {hours} HOUR"
    con.execute(
        f"""
        INSERT INTO raw_calls
        SELECT * REPLACE (
          call_id || ':' || {day} || ':' || {hours} AS call_id, $load AS load_id,
          started_at + {shift} AS started_at, first_token_at + {shift} AS first_token_at, ended_at + {shift} AS ended_at)
        FROM template_calls t
        WHERE hash(t.call_id) % {BUCKETS} = {bucket}
          AND NOT EXISTS (SELECT 1 FROM raw_calls r WHERE r.call_id = t.call_id || ':' || {day} || ':' || {hours})
        """,
        {"load": load_id},
    )


def _load_unstarted(con, load_id: str, bucket: int) -> None:
    """A file of calls without timestamps (a benchmark export, say): their own partition, with no day."""
    con.execute(
        f"""
        INSERT INTO raw_calls
        SELECT * REPLACE (call_id || ':nostart' AS call_id, $load AS load_id, NULL AS started_at,
                          NULL AS first_token_at, NULL AS ended_at)
        FROM template_calls t
        WHERE hash(t.call_id) % {BUCKETS} = {bucket}
          AND NOT EXISTS (SELECT 1 FROM raw_calls r WHERE r.call_id = t.call_id || ':nostart')
        """,
        {"load": load_id},
    )


def _load_billing(con, load_id: str, day: int) -> None:
    """A billing export of the sample day's lines moved `day` days."""
    con.execute(
        f"""
        INSERT INTO raw_billing_lines
        SELECT * REPLACE (billing_line_id || ':' || {day} AS billing_line_id, $load AS load_id,
                          period_start + INTERVAL {day} DAY AS period_start, period_end + INTERVAL {day} DAY AS period_end)
        FROM template_billing t
        WHERE NOT EXISTS (SELECT 1 FROM raw_billing_lines r WHERE r.billing_line_id = t.billing_line_id || ':' || {day})
        """,
        {"load": load_id},
    )


def _sequence(rng: random.Random) -> list[tuple]:
    """Loads in arrival order: ('calls', day, hours, bucket) or ('billing', day), with builds in between."""
    steps: list[tuple] = []
    days = sorted(rng.sample(range(0, 6), rng.randint(1, 3)))
    for i, d in enumerate(days):
        for _ in range(rng.randint(1, 2)):
            steps.append(("calls", d, rng.choice([0, 0, 6, 20]), rng.randrange(BUCKETS)))
        if rng.random() < 0.5:
            steps.append(("build",))
    if rng.random() < 0.6:  # late data for an old day
        steps.append(("calls", rng.choice(days), rng.choice([0, 12]), rng.randrange(BUCKETS)))
    if rng.random() < 0.4:  # the same file again
        steps.append(rng.choice([s for s in steps if s[0] == "calls"]))
    if rng.random() < 0.2:  # calls without a start time
        steps.append(("unstarted", rng.randrange(BUCKETS)))
    if rng.random() < 0.5:  # billing after the traces
        steps.append(("build",))
        steps.append(("billing", rng.choice(days)))
    builds = [i for i, s in enumerate(steps) if s[0] == "build"]
    for i in sorted(builds[1:] if rng.random() < 0.5 else builds[:-1], reverse=True):  # at most one build between
        del steps[i]                                                                   # (CI time: ~3 builds each)
    if rng.random() < 0.3:  # files arrive out of order
        middle = steps[1:-1]
        rng.shuffle(middle)
        steps[1:-1] = middle
    return steps


def _seeded_store(bases, tmp_path, seed: int):
    """The random source of sequence `seed`, its configuration (demo or default, by parity) and a copy of that
    configuration's built base store: (rng, config, path, connection)."""
    name = "demo" if seed % 2 == 0 else "default"
    db = tmp_path / "s.duckdb"
    db.write_bytes(bases[name].read_bytes())
    return random.Random(seed), load_config(CONFIGS[name]), db, connect(db)


def _load(con, i: int, step: tuple) -> bool:
    """Apply step `i` of a sequence if it is a load (load id `L<i>`); False for a build step."""
    if step[0] == "calls":
        _load_calls(con, f"L{i}", *step[1:])
    elif step[0] == "billing":
        _load_billing(con, f"L{i}", step[1])
    elif step[0] == "unstarted":
        _load_unstarted(con, f"L{i}", step[1])
    else:
        return False
    return True


def _snapshot(con) -> dict[str, list[tuple]]:
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' AND NOT temporary ORDER BY 1").fetchall()]
    out = {}
    for t in [*(t for t in tables if t not in NOT_COMPARED), *VIEWS]:
        out[t] = con.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall()
    return out


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return type(a) is type(b) and a == b
    return a == b


def _diff(incr: dict, full: dict) -> list[str]:
    problems = [f"{t}: only in one store" for t in sorted(set(incr) ^ set(full))]
    for t in sorted(set(incr) & set(full)):
        a, b = incr[t], full[t]
        if len(a) != len(b):
            problems.append(f"{t}: {len(a)} rows incremental vs {len(b)} full")
            continue
        bad = [(x, y) for x, y in zip(a, b) if not _same(x, y)]
        if bad:
            problems.append(f"{t}: {len(bad)} rows differ, first: {bad[0][0]!r} vs {bad[0][1]!r}")
    return problems


CONFIGS = {"demo": SAMPLE_LOGS / "phaselens.toml", "default": None}
BASE_DAY = 2


@pytest.fixture(scope="module")
def bases(template, tmp_path_factory):
    """Per configuration, a store already built once (fully) with one slice on day BASE_DAY."""
    out = {}
    for name, path in CONFIGS.items():
        db = tmp_path_factory.mktemp("base") / f"{name}.duckdb"
        db.write_bytes(template.read_bytes())
        con = connect(db)
        _load_calls(con, "L-base", BASE_DAY, 0, 0)
        first = build(con, load_config(path))
        assert first.full and first.reason == "no earlier build"
        con.close()
        out[name] = db
    return out


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(SEQUENCES))
def test_incremental_build_equals_full_build(bases, tmp_path, seed):
    rng, cfg, db, con = _seeded_store(bases, tmp_path, seed)
    steps = _sequence(rng)
    results = []
    for i, step in enumerate(steps):
        if not _load(con, i, step):
            results.append(build(con, cfg))
    results.append(build(con, cfg))
    assert not any(r.full for r in results), (steps, [r.reason for r in results])
    incr = _snapshot(con)
    full = build(con, cfg, full=True)
    assert full.full
    problems = _diff(incr, _snapshot(con))
    assert not problems, f"steps {steps}:\n" + "\n".join(problems)


def test_invoice_shares_of_adjacent_days_add_up(template, tmp_path):
    """The invoice-true costs a publish and `workloads` read per period (`invoice_shares_in` over whole days) give
    each call's shares once however the days are grouped, and `invoice_costs` is each call's shares summed."""
    from phaselens.pipeline.incremental import rows_within

    db = tmp_path / "s.duckdb"
    db.write_bytes(template.read_bytes())
    con = connect(db)
    for day in (0, 1, 2):  # three adjacent days of calls (one crossing midnight), each billed
        _load_calls(con, f"C{day}", day, 20 if day == 1 else 0, day)
        _load_billing(con, f"B{day}", day)
    build(con, load_config(None))
    days = [r[0] for r in con.execute(
        "SELECT DISTINCT day FROM allocated_costs ORDER BY 1").fetchall()]
    assert len(days) >= 3
    cols = "call_id, input_cost_usd_invoice, output_cost_usd_invoice, cost_usd_invoice"
    whole = con.execute(f"SELECT {cols} FROM invoice_shares ORDER BY ALL").fetchall()
    assert whole and len({r[0] for r in whole}) == len(whole)
    odd = [d for i, d in enumerate(days) if i % 2]
    even = [d for i, d in enumerate(days) if not i % 2]
    for groups in ([days], [[d] for d in days], [even, odd]):
        parts = [r for g in groups for r in con.execute(rows_within("invoice_shares_in", g, cols)).fetchall()]
        assert sorted(parts) == whole, groups
    # invoice_costs: one row per call, its shares summed by side (NULL without a share)
    want = con.execute("""
        SELECT c.call_id,
               CAST(sum(a.allocated_cost_usd) FILTER (WHERE a.token_type <> 'output') AS DECIMAL(38, 12)),
               CAST(sum(a.allocated_cost_usd) FILTER (WHERE a.token_type = 'output') AS DECIMAL(38, 12)),
               CAST(sum(a.allocated_cost_usd) AS DECIMAL(38, 12))
        FROM raw_calls c LEFT JOIN allocated_costs a USING (call_id) GROUP BY c.call_id ORDER BY ALL""").fetchall()
    assert con.execute(f"SELECT {cols} FROM invoice_costs ORDER BY ALL").fetchall() == want
    assert sum(1 for r in want if r[3] is not None) == len(whole)


def test_a_build_reports_the_days_it_recomputed(template, tmp_path):
    db = tmp_path / "s.duckdb"
    db.write_bytes(template.read_bytes())
    con = connect(db)
    cfg = load_config(None)
    _load_calls(con, "A", 0, 0, 0)
    first = build(con, cfg)
    assert first.full and first.reason == "no earlier build"
    _load_calls(con, "B", 10, 0, 1)
    second = build(con, cfg)
    assert not second.full and second.new_loads == 1
    base = min(d for d in second.days_rebuilt if d is not None)
    # day 10 of the template, widened by the one-day caching reach either side (and nothing of day 0)
    assert 3 <= len(second.days_rebuilt) <= 4 and all(0 <= (d - base).days <= 3 for d in second.days_rebuilt)
    again = build(con, cfg)
    assert not again.full and again.days_rebuilt == [] and again.new_loads == 0
    changed = cfg.model_copy(update={"whatif": cfg.whatif.model_copy(update={"sample_calls_per_day": 7})})
    assert build(con, changed).full
    assert build(con, changed, full=True).reason == "--full asked for"


def _optimistic(con) -> bool:
    return con.execute("SELECT current_setting('enable_optimistic_write')").fetchone()[0]


def test_an_incremental_build_gives_the_connection_back_writing_as_before(template, tmp_path, monkeypatch):
    """The scratch stages run with DuckDB's optimistic writes off (their tables are dropped before the commit); the
    connection writes as before once the build ends, and when a stage fails too, so a later load on it still writes
    its row groups ahead of the commit."""
    from phaselens.pipeline import pricing

    db = tmp_path / "s.duckdb"
    db.write_bytes(template.read_bytes())
    con = connect(db)
    cfg = load_config(None)
    _load_calls(con, "A", 0, 0, 0)
    build(con, cfg)
    _load_calls(con, "B", 1, 0, 1)
    seen = []
    real = pricing.build_costs

    def costs(c, book):  # the costs stage of the incremental build runs in the scratch schema
        seen.append(_optimistic(c))
        real(c, book)

    monkeypatch.setattr(pricing, "build_costs", costs)
    assert not build(con, cfg).full
    assert seen == [False] and _optimistic(con) is True

    _load_calls(con, "C", 2, 0, 2)

    def broken(c, book):
        raise RuntimeError("a stage fails")

    monkeypatch.setattr(pricing, "build_costs", broken)
    with pytest.raises(RuntimeError, match="a stage fails"):
        build(con, cfg)
    assert _optimistic(con) is True
    con.execute("SET enable_optimistic_write = false")  # a connection that had it off keeps it off
    monkeypatch.setattr(pricing, "build_costs", real)
    assert not build(con, cfg).full
    assert _optimistic(con) is False


def test_a_prefix_reused_across_midnight_recomputes_the_earlier_days_caching_sums(template, tmp_path):
    """A call just after midnight that reuses the prompt prefix of a call just before it changes what the earlier
    call writes to the cache: the incremental build recomputes that earlier day's caching sums too (its calls are
    unchanged), and its store is the full build's."""
    db = tmp_path / "midnight.duckdb"
    db.write_bytes(template.read_bytes())
    con = connect(db)
    cfg = load_config(None)
    source = con.execute("SELECT call_id FROM template_calls WHERE len(prefix_hashes) > 0 ORDER BY call_id").fetchone()[0]

    def place(load: str, at: str) -> str:
        con.execute(
            """
            INSERT INTO raw_calls
            SELECT * REPLACE (call_id || ':' || $load AS call_id, $load AS load_id, CAST($at AS TIMESTAMP) AS started_at,
                              CAST($at AS TIMESTAMP) + (first_token_at - started_at) AS first_token_at,
                              CAST($at AS TIMESTAMP) + (ended_at - started_at) AS ended_at)
            FROM template_calls WHERE call_id = $id
            """, {"load": load, "at": at, "id": source})
        return f"{source}:{load}"

    def writes(sql: str, *args) -> list[tuple]:
        return con.execute(sql, list(args)).fetchall()

    before_midnight = place("A", "2026-11-20 23:58:00")
    assert build(con, cfg).full
    reuse_sql = "SELECT lifetime_s, write_tokens FROM call_prefix_reuse WHERE call_id = ? ORDER BY ALL"
    sums_sql = "SELECT lifetime_s, sum(write_tokens) FROM caching_days WHERE day = DATE '2026-11-20' GROUP BY ALL ORDER BY ALL"
    reuse, sums = writes(reuse_sql, before_midnight), writes(sums_sql)
    place("B", "2026-11-21 00:01:00")
    second = build(con, cfg)
    assert not second.full
    assert writes(reuse_sql, before_midnight) != reuse  # the later call reads what the earlier one wrote
    assert writes(sums_sql) != sums                     # so the earlier day's sums moved
    incr = _snapshot(con)
    build(con, cfg, full=True)
    problems = _diff(incr, _snapshot(con))
    assert not problems, "\n".join(problems)


def test_files_loaded_one_by_one_build_to_the_full_store(tmp_path):
    """The real loader, file by file (each its own ledger load id), with a build after each: the same store."""
    con = connect(tmp_path / "files.duckdb")
    cfg = load_config(CONFIGS["demo"])
    files = [SAMPLE_LOGS / "traces" / "editor-indexer.jsonl", SAMPLE_LOGS / "traces" / "editor-tab.jsonl.gz",
             SAMPLE_LOGS / "billing", SAMPLE_LOGS / "traces" / "editor-inline.jsonl.gz"]
    modes = []
    for f in files:
        ingest(con, [str(f)])
        modes.append(build(con, cfg).full)
    ingest(con, [str(files[1])])  # the same file again: nothing new
    again = build(con, cfg)
    assert modes == [True, False, False, False] and not again.full and again.days_rebuilt == []
    incr = _snapshot(con)
    build(con, cfg, full=True)
    problems = _diff(incr, _snapshot(con))
    assert not problems, "\n".join(problems)


PUBLISH_SEEDS = range(0, SEQUENCES, 10)


@pytest.mark.slow
@pytest.mark.parametrize("seed", PUBLISH_SEEDS)
def test_incremental_publish_after_each_build_equals_a_full_publish(bases, tmp_path, seed):
    """A publish after each incremental build computes only the days whose calls' rows that build changed
    (`build_days`) and copies the rest from the snapshot before: the last snapshot equals a full publish of the
    fully built store (every relation; floats to 12 digits, as two full builds agree)."""
    from phaselens.pipeline.publish import build_days, publish, store_basis
    from tests.app.test_publish_incremental import VOLATILE, meta, snapshot_rows

    rng, cfg, db, con = _seeded_store(bases, tmp_path, seed)
    publish(con, db, cfg)
    basis = store_basis(con)
    computed = []
    for i, step in enumerate([*_sequence(rng), ("build",)]):
        if not _load(con, i, step):
            r = build(con, cfg)
            assert not r.full, r.reason
            path = publish(con, db, cfg, days=build_days(r), since=basis)
            basis = store_basis(con)
            computed.append(meta(path)["computed_days"])
    assert any(c != "all" for c in computed), computed
    volatile = {**VOLATILE, "freshness": {"published_at", "built_at"}}
    incremental = snapshot_rows(path, volatile, 12)
    build(con, cfg, full=True)
    full = snapshot_rows(publish(con, db, cfg), volatile, 12)
    assert set(incremental) == set(full)
    for t in full:
        assert incremental[t] == full[t], (t, computed)
    con.close()


def test_a_store_built_before_attribution_kept_the_start_gains_it(template, tmp_path):
    """call_attribution keeps each call's start (requests joins on it, so a period's reads prune by it). A store
    built before that gains the column, filled from raw_calls, when it is next opened for writing: `requests`
    keeps its attribution until the next build."""
    db = tmp_path / "old.duckdb"
    db.write_bytes(template.read_bytes())
    con = connect(db)
    _load_calls(con, "A", 0, 0, 0)
    build(con, load_config(None))
    expected = con.execute("SELECT call_id, workload, cost_usd FROM requests ORDER BY call_id").fetchall()
    # the store as an older phaselens left it: no start in call_attribution, and its view joined on call_id alone
    con.execute("CREATE OR REPLACE VIEW requests AS SELECT 1 AS x")
    con.execute("ALTER TABLE call_attribution DROP COLUMN started_at")
    con.close()
    con = connect(db)
    assert con.execute("SELECT count(*) FROM call_attribution a JOIN raw_calls c USING (call_id) "
                       "WHERE a.started_at IS NOT DISTINCT FROM c.started_at").fetchone()[0] == len(expected)
    assert con.execute("SELECT call_id, workload, cost_usd FROM requests ORDER BY call_id").fetchall() == expected
    assert any(cost is not None for _, _, cost in expected)
