"""Whether a CPU sweep's timing processes share cores: lanes (worker processes, each timing
points) × threads each, plus the driver when there are workers. Timings taken on shared cores
are inflated (1.6–15.7× measured with two workers on two cores), so a sweep says so before it
starts and records the share in its run's config."""

from __future__ import annotations

import os


def cores() -> int:
    """CPU cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_share(lanes: int, threads: int, available: int | None = None) -> dict:
    """{lanes, threads, cores, contended}: contended when the timing threads (and the driver,
    with worker processes) outnumber the cores."""
    available = available or cores()
    busy = lanes * threads + (1 if lanes > 1 else 0)
    return {"lanes": lanes, "threads": threads, "cores": available, "contended": busy > available}


def warning(share: dict) -> str:
    """The one line a contended sweep prints before it starts."""
    driver = " and the driver" if share["lanes"] > 1 else ""
    return (f"warning: {share['lanes']} timing process(es) × {share['threads']} thread(s) "
            f"(FSC_THREADS){driver} share {share['cores']} core(s): step times will be "
            "inflated and noisy; use fewer --workers or FSC_THREADS (the run is marked "
            "contended: config.cpu_share)")
