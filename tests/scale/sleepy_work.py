"""A work function for pool processes that waits (a spawned process imports it by name):
each group writes its process id into the folder $FSC_TEST_PIDS, then sleeps a minute."""

import os
import time
from pathlib import Path


def sleeps(cfg, group):
    Path(os.environ["FSC_TEST_PIDS"], str(os.getpid())).write_text("")
    time.sleep(60)
    return []
