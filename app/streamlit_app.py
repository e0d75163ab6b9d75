"""The phaselens dashboard (entry point): `phaselens dashboard --db FILE`."""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import streamlit as st


def _db_path() -> Path:
    args = sys.argv[1:]
    if "--db" in args:
        return Path(args[args.index("--db") + 1])
    return Path("phaselens.duckdb")


st.set_page_config(page_title="phaselens", layout="wide")
st.title("phaselens: where LLM time and money go")
db = _db_path()
if not db.exists():
    st.info(f"No store at {db}. Run `phaselens ingest PATH` and `phaselens build`, or `phaselens demo`.")
    st.stop()
con = duckdb.connect(str(db), read_only=True)
have = con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'workloads'").fetchone()[0]
if not have:
    st.info("The store has no built workloads yet. Run `phaselens build`.")
    st.stop()
df = con.execute(
    "SELECT workload, calls, ttft_p50_s, ttft_p95_s, itl_p50_s, itl_p95_s, uncached_input_tokens, cache_read_tokens, "
    "output_tokens, dominant_latency_phase, dominant_cost_phase, lever FROM workloads"
).pl()
con.close()
st.dataframe(df, use_container_width=True)
