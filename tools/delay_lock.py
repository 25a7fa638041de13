"""An LD_PRELOAD shim that delays DuckDB's lock on a store file, to widen a race window on purpose.

DuckDB 2 reads a database file's header before it locks the file (see fsc/store/connect.py); a
process overtaken by another's checkpoint in that gap loads an older state. The gap is short,
so only a loaded machine hits it now and then. Under the shim a process sleeps before each lock
it asks of a file whose path ends with `suffix`, and the race is hit at will: the store test
that the lock closes the gap, and `python -m tools.stress_store --delay-lock MS`, use it.
Linux only, and it needs a C compiler (`cc`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Sleep before an F_SETLK that takes (not releases) a lock on a file named *$DELAY_LOCK_SUFFIX:
   $DELAY_LOCK_MS ms, or a random time up to it with DELAY_LOCK_RANDOM=1; with DELAY_LOCK_TELL=1
   first say "about to lock" on stderr. */
static void delay(int fd, int cmd, struct flock *lock) {
    const char *suffix = getenv("DELAY_LOCK_SUFFIX");
    char link[64], path[4096];
    if (cmd != F_SETLK || !suffix || !lock || lock->l_type == F_UNLCK) return;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    size_t k = strlen(suffix);
    if (n < (ssize_t)k || strncmp(path + n - k, suffix, k) != 0) return;
    long us = 1000L * atol(getenv("DELAY_LOCK_MS"));
    if (getenv("DELAY_LOCK_RANDOM")) {
        static int seeded;
        if (!seeded) { srand(getpid()); seeded = 1; }
        us = us * (rand() % 1001) / 1000;
    }
    if (getenv("DELAY_LOCK_TELL")) fprintf(stderr, "about to lock\n");
    usleep(us);
}

#define WRAP(name) int name(int fd, int cmd, ...) { \
    va_list ap; va_start(ap, cmd); void *arg = va_arg(ap, void *); va_end(ap); \
    int (*real)(int, int, ...) = dlsym(RTLD_NEXT, #name); \
    delay(fd, cmd, arg); return real(fd, cmd, arg); }
WRAP(fcntl)
WRAP(fcntl64)
"""


def available() -> bool:
    return sys.platform.startswith("linux") and shutil.which("cc") is not None


def build(folder: Path) -> Path:
    """Compile the shim into `folder`; return the shared library's path."""
    src, lib = folder / "delay_lock.c", folder / "delay_lock.so"
    src.write_text(SOURCE)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src), "-ldl"], check=True)
    return lib


def environ(lib: Path, ms: int, *, random: bool = False, tell: bool = False,
            suffix: str = "/fsc.duckdb") -> dict[str, str]:
    """The variables that load the shim into a new process and set its delay: `ms`, or a
    random time up to it; with `tell`, the process says "about to lock" on stderr first."""
    env = {"LD_PRELOAD": str(lib), "DELAY_LOCK_MS": str(ms), "DELAY_LOCK_SUFFIX": suffix}
    env |= {name: "1" for name, on in (("DELAY_LOCK_RANDOM", random), ("DELAY_LOCK_TELL", tell))
            if on}
    return env
