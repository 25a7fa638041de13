"""fsc.scale's settings and run recording: executor options checked without torch, and a run a
stop signal ends that says what the store kept of it."""

import re
import signal

import pytest

from fsc.errors import UsageError
from fsc.interrupts import Interrupted, Stopped
from fsc.scale import ExecutorSettings, recording
from fsc.store import Store


@pytest.mark.parametrize("settings, given, says", [
    (ExecutorSettings("ray"), ["--slurm-time", "--retries", "--slurm-partition"],
     "--slurm-partition, --slurm-time do not apply to --executor ray"),
    (ExecutorSettings(), ["--address"], "--address does not apply to --executor local"),
    (ExecutorSettings("ray", address="no where"), [],
     "--address 'no where' is not auto, local, ray://HOST:PORT or HOST:PORT"),
])
def test_settings_refuse_what_their_executor_does_not_take(settings, given, says):
    with pytest.raises(UsageError, match=re.escape(says)):
        settings.check(given)


def test_settings_say_whether_anything_runs_elsewhere():
    assert ExecutorSettings().check().remote is False
    assert ExecutorSettings(workers=2).check(["--retries"]).remote  # a worker to run again
    assert ExecutorSettings(workers=2).remote and ExecutorSettings("slurm").remote


def test_a_stopped_run_is_marked_interrupted_and_says_what_it_kept(tmp_path):
    st = Store(tmp_path)
    with pytest.raises(Stopped) as stopped, recording(st, "profile", "fsc profile", {},
                                                      before=3, total=9) as run:
        run.interrupt_note = lambda name: f"interrupted ({name}) after {3 + len(run.points)}"
        run.add_point({"recipe": "tiny_attn", "S": 16, "B": 1, "step_ms": 1.0})
        raise Interrupted(signal.SIGTERM)
    e = stopped.value
    assert (e.run_id, e.kept, e.total, e.exit_code) == (run.run_id, 4, 9, 143)
    assert st.query("SELECT status, error FROM runs")[1] == [("interrupted",
                                                              "interrupted (SIGTERM) after 4")]
