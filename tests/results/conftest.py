"""The results tests' fixtures; they and the helpers live in results_helpers.py (a module of
its own name: `conftest` is a name every test folder has)."""

from results_helpers import made, real_profile  # noqa: F401 - fixtures, registered here
