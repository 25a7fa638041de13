import pytest


@pytest.fixture
def fsc_cli(fsc_main):
    """fsc in this process through its error boundary (see tests/conftest.py)."""
    return fsc_main


@pytest.fixture
def no_weights(monkeypatch):
    """A decode that gets as far as loading weights fails the test."""

    def load_model(*args, **kw):
        raise AssertionError("weights were loaded")

    monkeypatch.setattr("fsc.loading.load_model", load_model)
