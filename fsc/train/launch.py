"""Starting `fsc train --nproc N`: the same command again in N processes under torch's elastic
launcher (torchrun), on this node and over loopback only (parallel.py: what they do)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import torch

from fsc.errors import UsageError
from fsc.interrupts import STOP_SIGNALS, StopSignals, exit_code
from fsc.train import ranks

# The launcher's torchrun passes these on to the processes it started (its default lacks USR1/2).
TORCHRUN_SIGNALS = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2"


def check_gpus(nproc: int, device: str) -> None:
    """UsageError when a run on CUDA asks for more processes than this machine has GPUs (one
    process per GPU)."""
    cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    if cuda and nproc > torch.cuda.device_count():
        raise UsageError(f"--nproc {nproc}: this machine shows {torch.cuda.device_count()} GPUs "
                         "(one process per GPU)")


def launch(nproc: int, args: list[str]) -> int:
    """Run `fsc ARGS` in `nproc` processes and wait for them; their exit status, or 128 + the
    number of the stop signal that ended them. The workers read N from torchrun's WORLD_SIZE,
    so --nproc is left out of ARGS."""
    env = dict(os.environ, **{ranks.WORKER_ENV: "1", "OMP_NUM_THREADS": "1"})
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # the processes talk over loopback
    env.setdefault("TORCHELASTIC_SIGNALS_TO_HANDLE", TORCHRUN_SIGNALS)
    cmd = [sys.executable, "-m", "fsc.train.torchrun", "--standalone",
           f"--nproc-per-node={nproc}", "--master-addr=127.0.0.1", "-m", "fsc",
           *without_nproc(args)]
    # In a session of its own, torchrun hears a stop signal once, from here (not also from the
    # terminal), and passes it on once to every process: each ends after the same step, saved.
    # A hang-up (the terminal closed) is passed on too, and ends the processes as before.
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    with StopSignals(defer=True, forward=proc.send_signal,
                     signals=(*STOP_SIGNALS, signal.SIGHUP)) as stops:
        code = proc.wait()
    return code if stops.signum is None else exit_code(stops.signum)


def without_nproc(args: list[str]) -> list[str]:
    """`args` without --nproc N (or --nproc=N)."""
    kept, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "--nproc":
            skip = True
        elif not a.startswith("--nproc="):
            kept.append(a)
    return kept
