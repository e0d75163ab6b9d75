"""Text a test adds to the end of the run's output (tests/conftest.py prints it), also when tests run in
pytest-xdist workers: a worker hands it to the controlling process through `workeroutput`."""

from __future__ import annotations

import pytest

SUMMARIES = pytest.StashKey[dict]()
_WORKER_KEY = "phaselens_summaries"


def add_summary(config: pytest.Config, title: str, text: str) -> None:
    """Print `text` under `title` in the run's terminal summary."""
    if hasattr(config, "workeroutput"):
        config.workeroutput.setdefault(_WORKER_KEY, {})[title] = text
    else:
        config.stash.setdefault(SUMMARIES, {})[title] = text


def take_from_worker(config: pytest.Config, node) -> None:
    """Keep the summaries a finished pytest-xdist worker's tests added."""
    config.stash.setdefault(SUMMARIES, {}).update(getattr(node, "workeroutput", {}).get(_WORKER_KEY) or {})
