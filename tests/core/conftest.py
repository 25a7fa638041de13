import pytest


@pytest.fixture
def fsc_cli(fsc_main):
    """fsc in this process through its error boundary (see tests/conftest.py)."""
    return fsc_main
