"""Fixtures for the dashboard tests: the published sample-day store and an empty published store."""

from __future__ import annotations

import pytest

from tests.app.stores import build_empty_store, build_sample_store, sample_inputs


@pytest.fixture(scope="session")
def sample_db(tmp_path_factory):
    """The sample day (traces + billing) ingested, built and published; shared, do not write to it."""
    if not sample_inputs():
        pytest.skip("sample_logs/traces is empty: generate it with `python -m phaselens.sample_logs.generate`")
    return build_sample_store(tmp_path_factory.mktemp("sample"))


@pytest.fixture
def empty_db(tmp_path):
    """A store with nothing loaded, published."""
    return build_empty_store(tmp_path)
