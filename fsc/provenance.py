"""Where a measurement was taken: software versions, device, host and source commit.

`environment()` returns the dict `Store.register_environment` records; git and nvidia-smi run
as subprocesses with short timeouts and are optional.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

import fsc

_TIMEOUT_S = 5


def _run(*cmd: str) -> str | None:
    try:
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_state() -> dict[str, Any]:
    """Commit and dirty flag of the checkout fsc is imported from (None outside a checkout).

    Dirty means tracked files differ from the commit; untracked files do not count. A package
    installed into a virtualenv that happens to sit inside some repository is not a checkout.
    """
    src = Path(fsc.__file__).resolve().parent
    head = _run("git", "-C", str(src), "rev-parse", "--show-toplevel", "HEAD")
    if head is None or len(head.split()) != 2:
        return {"git_commit": None, "git_dirty": None}
    top, commit = head.split()
    if Path(top).resolve() != src.parent:
        return {"git_commit": None, "git_dirty": None}
    status = _run("git", "-C", top, "status", "--porcelain", "--untracked-files=no")
    return {"git_commit": commit, "git_dirty": None if status is None else bool(status.strip())}


def driver_version_from_proc(text: str) -> str | None:
    """The version in /proc/driver/nvidia/version (proprietary or open kernel module)."""
    found = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d[\w.]*)", text)
    return found.group(1) if found else None


def _nvidia_driver() -> str | None:
    try:
        version = driver_version_from_proc(Path("/proc/driver/nvidia/version").read_text())
    except OSError:
        version = None
    if version:
        return version
    out = _run("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader")
    return out.splitlines()[0].strip() if out and out.strip() else None


def host_cpu() -> tuple[str, int | None]:
    """CPU model name and host RAM in bytes."""
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = None
    return name, ram


def environment(device: str | None = None) -> dict[str, Any]:
    """Versions, device and source state for the store's `environments` table.

    `device` is the torch device measured on ('cuda', 'cuda:1', 'cpu'); by default the first
    GPU if there is one, else the CPU.
    """
    cuda = torch.cuda.is_available()
    dev = (device or ("cuda" if cuda else "cpu")).strip()
    env: dict[str, Any] = {
        "fsc_version": fsc.__version__,
        "python_version": platform.python_version(),
        "torch_version": torch.__version__,
        "triton_version": _dist_version("triton"),
        "cuda_version": torch.version.cuda,
        "driver_version": None,
        "host": socket.gethostname(),
        "platform": platform.platform(),
        **git_state(),
    }
    if cuda and dev.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(dev))
        env.update(device_name=props.name, device_memory_bytes=int(props.total_memory),
                   driver_version=_nvidia_driver())
    else:
        env["device_name"], env["device_memory_bytes"] = host_cpu()
    return env
