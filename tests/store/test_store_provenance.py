"""fsc.provenance: the environment dict the store records."""

from fsc.provenance import driver_version_from_proc, environment, git_state
from fsc.store import Store
from fsc.store.store import ENV_FIELDS


def test_environment_on_cpu_fits_the_store(tmp_path):
    env = environment("cpu")
    assert set(env) == set(ENV_FIELDS)
    assert env["torch_version"] and env["python_version"] and env["host"]
    assert env["device_name"] and env["device_memory_bytes"] > 0
    st = Store(tmp_path)
    env_id = st.register_environment(env)
    assert len(env_id) == 16 and st.query("select count(*) from environments")[1] == [(1,)]


def test_git_state_is_a_commit_or_nothing():
    state = git_state()
    assert state["git_commit"] is None or len(state["git_commit"]) == 40
    assert state["git_dirty"] in (None, True, False)


def test_driver_version_from_proc():
    proprietary = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 "
                   "22:23:56 UTC 2024\nGCC version:  gcc version 12.2.0\n")
    open_module = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  "
                   "Release Build  (dvs-builder@U16-I3-B03-4-3)\n")
    assert driver_version_from_proc(proprietary) == "550.54.15"
    assert driver_version_from_proc(open_module) == "570.86.15"
    assert driver_version_from_proc("nothing here") is None
