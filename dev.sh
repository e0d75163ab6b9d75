#!/usr/bin/env bash
# Set up phaselens in ./.venv and run the demo or the test suite.
#   ./dev.sh demo [--headless] [--port N]   ingest the sample day, build, open the dashboard
#   ./dev.sh test [pytest args]             the whole test suite (installs Debian's chromium for browser tests
#                                           and Debian's openjdk-17 for the Spark parity tests)
#   ./dev.sh setup                          only set up
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}

setup() {
  if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
  fi
  .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null
  .venv/bin/python -m pip install --quiet -e '.[test,spark]'
}

install_chromium() {
  # Browser tests drive Debian's chromium through Playwright; no browser is downloaded by Playwright itself.
  if [ -x /usr/bin/chromium ]; then return 0; fi
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's chromium for the browser tests ..." >&2
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
      || echo "installing chromium failed (apt-get output above): browser tests will be skipped" >&2
  else
    echo "chromium is not installed and cannot be installed here (not root): browser tests will be skipped" >&2
  fi
}

install_java() {
  # The Spark parity tests run PySpark in local mode, which needs a Java runtime (17 or newer).
  if command -v java >/dev/null 2>&1; then return 0; fi
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's openjdk-17-jre-headless for the Spark tests ..." >&2
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null \
      || echo "installing openjdk-17 failed (apt-get output above): Spark tests will be skipped" >&2
  else
    echo "java is not installed and cannot be installed here (not root): Spark tests will be skipped" >&2
  fi
}

cmd=${1:-}
shift || true
case "$cmd" in
  setup) setup ;;
  demo) setup; exec .venv/bin/phaselens demo "$@" ;;
  # one worker a core, each test file whole on one worker (its module fixtures are built once); `-n 0` runs serially
  test) setup; install_chromium; install_java; exec .venv/bin/python -m pytest -n auto --dist loadfile "$@" ;;
  *) echo "usage: ./dev.sh demo|test|setup [args]" >&2; exit 2 ;;
esac
