"""torchrun as `fsc train --nproc N` runs it (`python -m fsc.train.torchrun ARGS`, from
fsc.train.launch): torch's own launcher, except that a stop signal it passed on to the
processes ends it with 128 + the signal's number once they are done, which the ranks say in one
line, rather than in torchrun's traceback of the signal. A failed process still raises
torchrun's own error. A module of its own, so that `fsc train` imports no launcher."""

from __future__ import annotations

import sys

from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.run import main as torchrun_main

from fsc.interrupts import exit_code


def torchrun(argv: list[str]) -> int:
    """torchrun with `argv`: 0, or 128 + the number of the stop signal it passed on."""
    try:
        torchrun_main(argv)
    except SignalException as e:
        return exit_code(e.sigval)
    return 0


if __name__ == "__main__":
    sys.exit(torchrun(sys.argv[1:]))
