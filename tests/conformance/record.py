"""Record the conformance fixtures: real instrumentation packages around the real SDKs, against the fake servers.

    python -m tests.conformance.record                 # every entry of the matrix
    python -m tests.conformance.record logfire-openai  # some entries
    python -m tests.conformance.record --install-only  # only create the virtual environments

For each entry: a virtual environment under ~/.cache/phaselens-conformance/<venv> (PHASELENS_CONFORMANCE_CACHE
overrides) gets the SDK and the instrumentation from PyPI; `driver.py` runs there with an OTel SDK
TracerProvider whose exporter writes OTLP JSON Lines as the Collector's file exporter does. The fake
servers run in this process; their log is the truth per call. Written to tests/conformance/fixtures/<entry>/:
`spans.jsonl.gz` (OTLP JSON Lines), `truth.jsonl` (one call per line), `run.json` (outcome, notes), and
`versions.txt` (pip freeze of the venv); `tests/conformance/fixtures/versions.json` summarises the versions.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fake_servers import FakeLLMServer  # noqa: E402
from matrix_spec import BASE_PACKAGES, ENTRIES, VENVS, WORKLOADS  # noqa: E402

FIXTURES = HERE / "fixtures"
CACHE = Path(os.environ.get("PHASELENS_CONFORMANCE_CACHE", Path.home() / ".cache" / "phaselens-conformance"))


def venv_python(venv: str) -> Path:
    return CACHE / venv / "bin" / "python"


def ensure_venv(venv: str, log=print) -> tuple[bool, str]:
    """Create the venv and install its packages; (ok, message)."""
    py = venv_python(venv)
    marker = CACHE / venv / ".installed"
    want = json.dumps(BASE_PACKAGES + VENVS[venv])
    if py.exists() and marker.exists() and marker.read_text() == want:
        return True, "cached"
    CACHE.mkdir(parents=True, exist_ok=True)
    if py.exists() and not (marker.exists() and marker.read_text() == want):
        # Never upgrade in place: pip leaves older packages of a namespace (opentelemetry-*) beside new ones.
        shutil.rmtree(CACHE / venv)
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(CACHE / venv)], check=True)
    log(f"[{venv}] installing {' '.join(VENVS[venv])}")
    r = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        *BASE_PACKAGES, *VENVS[venv]], capture_output=True, text=True)
    if r.returncode != 0:
        return False, "pip install failed: " + (r.stderr.strip().splitlines() or ["?"])[-1][:300]
    marker.write_text(want)
    return True, "installed"


def freeze(venv: str) -> str:
    r = subprocess.run([str(venv_python(venv)), "-m", "pip", "freeze", "--disable-pip-version-check"],
                       capture_output=True, text=True, check=True)
    return "".join(line + "\n" for line in sorted(r.stdout.splitlines(), key=str.lower) if line.strip())


def workload_of(model: str) -> str:
    for name, w in WORKLOADS.items():
        if model in (w["openai_model"], w["anthropic_model"]):
            return name
    return "unknown"


def record_entry(name: str, log=print) -> dict:
    spec = ENTRIES[name]
    out = FIXTURES / name
    ok, msg = ensure_venv(spec["venv"], log)
    run: dict = {"entry": name, "label": spec["label"], "venv": spec["venv"], "api": spec["api"],
                 "env": spec["env"], "package": spec["package"]}
    out.mkdir(parents=True, exist_ok=True)
    if not ok:
        run.update(status="not_installable", reason=msg)
        (out / "run.json").write_text(json.dumps(run, indent=1, sort_keys=True) + "\n")
        return run
    (out / "versions.txt").write_text(freeze(spec["venv"]))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sink = tmp / "sink"
        sink.mkdir()
        spans = tmp / "spans.jsonl"
        with FakeLLMServer(sink_dir=sink) as srv:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_", "ANTHROPIC_",
                                                                              "LANGFUSE_", "LOGFIRE_", "TRACELOOP_"))}
            env.update(spec["env"])
            env.update(CONF_CLIENT=str(tmp / "client.jsonl"), CONF_BASE_URL=srv.url, CONF_OUT=str(spans), CONF_SINK=str(sink), CONF_ENTRY=name,
                       CONF_API=spec["api"], CONF_WORKLOADS=json.dumps(WORKLOADS), PYTHONUNBUFFERED="1",
                       NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
            t0 = time.time()
            r = subprocess.run([str(venv_python(spec["venv"])), str(HERE / "driver.py")], env=env,
                               capture_output=True, text=True, timeout=600, cwd=tmp)
            run["record_seconds"] = round(time.time() - t0, 1)
            truth = sorted(srv.log, key=lambda e: e["start_ns"])
        driver_out = {}
        for line in r.stdout.splitlines():
            if line.startswith("CONF_RESULT "):
                driver_out = json.loads(line[len("CONF_RESULT "):])
        run["driver"] = driver_out
        if r.returncode != 0:
            run.update(status="driver_failed", reason=(r.stderr.strip().splitlines() or ["?"])[-1][:500])
            (out / "driver.stderr.txt").write_text(r.stderr[-8000:])
        else:
            run["status"] = "recorded"
            (out / "driver.stderr.txt").unlink(missing_ok=True)  # an earlier failed run's
        client = tmp / "client.jsonl"
        client = [json.loads(x) for x in client.read_text().splitlines()] if client.exists() else []
        if len(client) == len(truth) and all(c["model"] == t["model"] for c, t in zip(client, truth)):
            for c, t in zip(client, truth):  # one call at a time: the n-th client call is the n-th request
                t["client_start_ns"], t["client_end_ns"] = c["client_start_ns"], c["client_end_ns"]
        else:
            run["client_timing"] = f"not merged: {len(client)} client calls for {len(truth)} requests"
        lines = spans.read_text().splitlines() if spans.exists() else []
        with gzip.open(out / "spans.jsonl.gz", "wt", encoding="utf-8") as f:
            for line in lines:
                f.write(line + "\n")
        with open(out / "truth.jsonl", "w") as f:
            for e in truth:
                e["workload"] = workload_of(e["model"])
                f.write(json.dumps(e, sort_keys=True) + "\n")
        run["calls"] = len(truth)
        run["otlp_lines"] = len(lines)
    (out / "run.json").write_text(json.dumps(run, indent=1, sort_keys=True) + "\n")
    return run


def summarise_versions() -> None:
    summary = {}
    for name, spec in ENTRIES.items():
        vf = FIXTURES / name / "versions.txt"
        if not vf.exists():
            continue
        pins = dict(line.split("==", 1) for line in vf.read_text().splitlines() if "==" in line)
        keys = {"openai", "anthropic", "opentelemetry-sdk", spec["package"]}
        # the instrumentation packages the venv asks for (not those an instrumentation pulls in, e.g. openlit's
        # http and web-framework instrumentations)
        asked = {re.split(r"[\[<>=!~;]", p, maxsplit=1)[0].strip().lower() for p in VENVS[spec["venv"]]}
        keys |= {k for k in pins if k.startswith(("opentelemetry-instrumentation-", "openinference-instrumentation-"))
                 and k.lower() in asked}
        summary[name] = {k: pins[k] for k in sorted(keys) if k in pins}
    (FIXTURES / "versions.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("entries", nargs="*", help="matrix entries (default: all)")
    ap.add_argument("--install-only", action="store_true")
    args = ap.parse_args(argv)
    names = args.entries or list(ENTRIES)
    unknown = [n for n in names if n not in ENTRIES]
    if unknown:
        ap.error(f"unknown entries {unknown}; known: {', '.join(ENTRIES)}")
    if args.install_only:
        for v in dict.fromkeys(ENTRIES[n]["venv"] for n in names):
            print(v, *ensure_venv(v))
        return 0
    for n in names:
        run = record_entry(n)
        print(f"{n}: {run['status']} calls={run.get('calls')} lines={run.get('otlp_lines')} "
              f"{run.get('reason', '')}", flush=True)
    summarise_versions()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
