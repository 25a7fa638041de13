"""Where a sweep's points run: this process, a pool of local worker processes (one per GPU),
a Ray cluster, or Slurm job arrays through submitit.

fsc schedules nothing itself. It cuts the points into groups of one recipe (`work.groups`) and
hands them to an existing engine. Results come back to the driver, which is the store's only
writer: DuckDB takes one writing process, and its file is never shared across hosts.

Every executor yields `Arrival`s: the rows that came back from a group, and, when a group is
given up (its retries spent), why. The driver turns the points such a group never returned
into error rows, so no point is lost, and each row is stored once.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from fsc.errors import FscError, UsageError
from fsc.loading import torch_device
from fsc.scale import ExecutorSettings, work
from fsc.sweep import Point, SweepConfig
from fsc.sweep_results import PointResult

POLL_S = 0.5
# Slurm's warning signal (SIGUSR2) comes this long before a task's time limit; submitit then
# requeues the task, which goes on from its rows (work.Requeueable): seconds of work, with room.
SIGNAL_DELAY_S = 120
CONNECT_S = 5.0  # a Ray address that takes longer to answer counts as unreachable


class ExecutorError(FscError):
    """The engine could not be reached or refused the work (exit 1)."""


@dataclass
class Arrival:
    group: work.Group
    rows: list[dict[str, Any]] = field(default_factory=list)
    failure: str | None = None  # set when the group is given up: its missing points are errors


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return f"{type(e).__name__}: {text}"[:400]


# ---- local worker processes -------------------------------------------------------------------

_started: Any = None  # in a pool process: where it says which group it begins


def _init_worker(slots: Any, started: Any, gpus: list[str]) -> None:
    """A pool process takes a worker number; on a GPU node it sees only that worker's GPU. It
    ends when the driver does (`_end_with_parent`)."""
    global _started
    _started = started
    threading.Thread(target=_end_with_parent, args=(os.getppid(),), daemon=True).start()
    slot = slots.get()
    if gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[slot % len(gpus)]


ORPHAN_POLL_S = 0.5


def _end_with_parent(parent: int) -> None:
    """Exit this pool process once `parent`, the driver, is gone (a kill -9 of `fsc profile`
    gives it no chance to end its pool; the process would wait on its queue for good, holding
    the driver's stdout open): its parent is then another process."""
    while os.getppid() == parent:
        time.sleep(ORPHAN_POLL_S)
    os._exit(1)


def _begin(fn: Callable, cfg: Any, group: work.Group) -> Any:
    """`fn(cfg, group)` in a pool process, said to the driver first (synchronously, so a
    process killed at once has said it): a pool that breaks costs a try to the groups that
    had begun, not to those still queued."""
    _started.put(group.index)
    return fn(cfg, group)


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Processes started inside ignore SIGINT for good (an ignored signal stays ignored across
    exec, and Python leaves it so). A terminal's Ctrl-C reaches the whole process group: the
    driver alone answers it, ending the pool; a worker that heard it would print a traceback
    of its own, or die before the driver knew and break the pool. (A Ctrl-C while processes
    start, milliseconds, is lost.) Only the main thread may set a handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them (or by index)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and g.strip() != "-1"]
    return [str(i) for i in range(torch.cuda.device_count())]


class LocalWorkers:
    """N processes on this machine (spawned, so each starts clean); on CUDA, one GPU each. A
    group whose process dies is run again, up to `retries` times."""

    def __init__(self, workers: int, retries: int, cuda: bool, fn: Callable = work.measure):
        self.workers, self.retries, self.cuda, self.fn = workers, retries, cuda, fn
        self.lanes = workers
        self.here = True  # its processes share this machine's cores

    def arrivals(self, cfg: SweepConfig, groups: list[work.Group]) -> Iterator[Arrival]:
        fn = self.fn
        ctx = multiprocessing.get_context("spawn")
        gpus = visible_gpus() if self.cuda else []
        tries = {g.index: 0 for g in groups}
        left = list(groups)
        while left:
            slots, started = ctx.Queue(), ctx.SimpleQueue()
            for i in range(self.workers):
                slots.put(i)
            begun: set[int] = set()  # groups a process of this pool began
            pending: dict[Future, work.Group] = {}
            with _sigint_ignored():
                pool = ProcessPoolExecutor(self.workers, mp_context=ctx,
                                           initializer=_init_worker,
                                           initargs=(slots, started, gpus))
            try:
                with _sigint_ignored():  # the pool starts its processes as groups are submitted
                    pending = {pool.submit(_begin, fn, cfg, g): g for g in left}
                left = []
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    if any(isinstance(f.exception(), BrokenProcessPool) for f in done):
                        done = wait(pending)[0]  # a broken pool fails every future it holds:
                        # each is charged here, as begun or not (not rerun uncounted below)
                    died: list[tuple[work.Group, BrokenProcessPool]] = []
                    for fut in done:
                        g = pending.pop(fut)
                        try:
                            yield Arrival(g, fut.result())
                        except BrokenProcessPool as e:  # a worker died, killed by a group
                            died.append((g, e))        # of those begun: which one is unknown
                        except Exception as e:  # noqa: BLE001 - the worker's error, reported
                            tries[g.index] += 1
                            if tries[g.index] > self.retries:
                                yield Arrival(g, failure=_one_line(e))
                            else:
                                left.append(g)
                    if died:  # a begun group counts a try; a queued one runs again as it was
                        while not started.empty():
                            begun.add(started.get())
                        for g, e in died:
                            tries[g.index] += g.index in begun
                            if tries[g.index] > self.retries:
                                yield Arrival(g, failure=f"worker process died ({e})")
                            else:
                                left.append(g)
                        break
            except BaseException:  # Ctrl-C, a stop signal, a reader that stopped: no worker
                _stop(pool)        # left running its group (or starting, and failing loudly)
                raise
            finally:
                pool.shutdown(wait=False, cancel_futures=True)
            left += list(pending.values())  # not seen before the pool broke: run again


def _stop(pool: ProcessPoolExecutor) -> None:
    """End `pool`'s processes now (a stopped sweep keeps nothing they would measure). A worker
    still starting would otherwise fail to read its start-up arguments once this process has
    gone, with a traceback. (Python 3.14's `terminate_workers`; before it, the pool's own
    table of processes.)"""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14 on
    if terminate is not None:
        terminate()
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for p in processes:
        p.terminate()
    for p in processes:
        p.join(5)
        if p.is_alive():  # SIGTERM not heeded in time (a loaded machine): SIGKILL
            p.kill()
            p.join(5)


# ---- Ray ----------------------------------------------------------------------------------------

class RayCluster:
    """One Ray task per group, asking for one GPU (or one CPU on a CPU cluster); rows come back
    as each task finishes. Ray retries a task whose worker died, or that raised, `retries`
    times; then the group is given up."""

    def __init__(self, address: str, retries: int, cuda: bool, fn: Callable = work.measure):
        self.address, self.retries, self.cuda, self.fn = address, retries, cuda, fn
        self.started = False
        self.lanes = 1  # after connect(): the cluster's GPUs (CPUs on a CPU cluster)
        self.here = False  # after connect(): whether the cluster is this machine alone

    def connect(self) -> None:
        """Join the cluster (or start one here for `local`) before the run is recorded, so a
        cluster that cannot be reached costs one line and no run."""
        ray = importlib.import_module("ray")
        if ray.is_initialized():
            self._count_lanes(ray)
            return
        # ray.init reads RAY_ADDRESS where it is given no address or `auto`: `auto` is that
        # address when it is set, and `local` is asked for by name, so that it never joins it
        env = os.environ.get("RAY_ADDRESS", "")
        if self.address not in ("auto", "local"):
            _check_ray_address(self.address)
        elif self.address == "auto" and env not in ("", "auto", "local"):
            _check_ray_address(env, f"--address auto reads RAY_ADDRESS={env}")
        try:
            if self.address == "local":  # bound to loopback: nothing leaves this machine
                ray.init(address="local", include_dashboard=False, log_to_driver=False,
                         _node_ip_address="127.0.0.1")
            else:
                ray.init(address=self.address, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise ExecutorError(f"--address {self.address}: no Ray cluster reached "
                                f"({_one_line(e)}); start one with `ray start --head`, or "
                                "pass --address local for one on this machine") from None
        self.started = True
        self._count_lanes(ray)

    def _count_lanes(self, ray: Any) -> None:
        resources = ray.cluster_resources()
        self.lanes = max(1, int(resources.get("GPU" if self.cuda else "CPU", 1)))
        nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
        self.here = (not self.address.startswith("ray://")
                     and nodes == [ray.get_runtime_context().get_node_id()])

    def arrivals(self, cfg: SweepConfig, groups: list[work.Group]) -> Iterator[Arrival]:
        ray = importlib.import_module("ray")
        self.connect()
        task = ray.remote(self.fn).options(
            num_gpus=1 if self.cuda else 0, num_cpus=0 if self.cuda else 1,
            max_retries=self.retries, retry_exceptions=True)
        refs = {task.remote(cfg, g): g for g in groups}
        try:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1)
                for ref in ready:
                    g = refs.pop(ref)
                    try:
                        yield Arrival(g, ray.get(ref))
                    except ray.exceptions.RayError as e:
                        yield Arrival(g, failure=f"after {self.retries} retries: {_one_line(e)}")
        finally:
            for ref in refs:
                ray.cancel(ref, force=True)
            if self.started:
                ray.shutdown()
                self.started = False


# A gRPC server (a Ray cluster's GCS; at ray://, its client server) answers HTTP/2's client
# preface with a SETTINGS frame (type 4). ray.init at an address where something else answers
# retries for many minutes, printing its own log lines, before it gives up.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _check_ray_address(address: str, said: str | None = None) -> None:
    """ExecutorError unless what answers at `address` (HOST:PORT or ray://HOST:PORT) within
    CONNECT_S answers as a gRPC server (where RAY_USE_TLS is set, a TLS handshake comes first:
    reaching it is all that is checked). `said`: how the error names the address (default
    `--address ADDRESS`)."""
    said = said or f"--address {address}"
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ExecutorError(f"{said}: not HOST:PORT (or ray://HOST:PORT)")
    try:
        conn = socket.create_connection((host, int(port)), timeout=CONNECT_S)
    except OSError as e:
        raise ExecutorError(f"{said}: no Ray cluster reached ({e.strerror or e})") from None
    reply = b""
    with conn:
        if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
            return
        try:
            conn.sendall(_HTTP2_PREFACE)
            while len(reply) < 9 and (chunk := conn.recv(9 - len(reply))):
                reply += chunk
        except OSError:  # reset, or silent past CONNECT_S: no gRPC server either
            pass
    if len(reply) < 9 or reply[3] != 4:
        raise ExecutorError(f"{said}: something answers there, but not a Ray cluster (no "
                            "gRPC reply); give the address `ray start --head` printed, or "
                            "--address local for one on this machine")


# ---- Slurm through submitit --------------------------------------------------------------------

class SlurmArrays:
    """One job array per sweep, one array task per group (submitit). Each task appends its rows
    as JSON lines to a file under `folder` on shared storage; the driver reads whole lines as
    they appear, and on --resume reads what a killed driver left (`leftovers`). A task warned
    of its time limit or preempted (Slurm's SIGUSR2, SIGNAL_DELAY_S ahead) is requeued and goes
    on from the rows it wrote (work.Requeueable). A task that failed or ended early is
    submitted again, `retries` times, and goes on from its rows the same way."""

    def __init__(self, folder: Path, partition: str | None, gpus_per_node: int, time_min: int,
                 cuda: bool, cluster: str | None = None, fn: Callable = work.measure_to_file,
                 say: Callable[[str], None] = lambda text: None, rows_per_point: int = 1,
                 retries: int = 0):
        self.rows_per_point = rows_per_point  # an eval grid: cells per length
        self.retries = retries
        self.lanes = 1  # one array task per recipe unless --workers asks for more
        self.here = False  # the cluster's nodes, not this machine's cores
        self.folder, self.partition, self.gpus = folder, partition, gpus_per_node
        self.time_min, self.cuda, self.cluster, self.fn, self.say = (
            time_min, cuda, cluster, fn, say)

    def arrivals(self, cfg: SweepConfig, groups: list[work.Group]) -> Iterator[Arrival]:
        submitit = importlib.import_module("submitit")
        attempt = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
        rows_dir = self.folder / "rows"
        rows_dir.mkdir(parents=True, exist_ok=True)
        ex = submitit.AutoExecutor(folder=str(self.folder / "jobs"), cluster=self.cluster)
        if ex.cluster != "slurm":
            self.say(f"no Slurm here (sbatch not found): submitit runs the array on this "
                     f"machine ({ex.cluster} executor)")
        params: dict[str, Any] = {"timeout_min": self.time_min, "tasks_per_node": 1,
                                  "nodes": 1, "name": "fsc-profile",
                                  "slurm_signal_delay_s": SIGNAL_DELAY_S}
        if self.cuda:
            params["gpus_per_node"] = self.gpus
        if self.partition:
            params["slurm_partition"] = self.partition
        ex.update_parameters(**params)
        paths = [rows_dir / f"{attempt}-{g.index:05d}.jsonl" for g in groups]
        try:
            task = work.Requeueable(self.fn, self.rows_per_point)
            jobs = ex.map_array(task, [cfg] * len(groups), groups, [str(p) for p in paths])
        except Exception as e:  # noqa: BLE001 - sbatch's or submitit's refusal, reported
            raise ExecutorError(f"submitting the job array failed: {_one_line(e)}") from None
        readers = [_Lines(p) for p in paths]
        got, tries = [0] * len(groups), [0] * len(groups)
        open_ = set(range(len(groups)))
        while open_:
            for i in sorted(open_):
                finished = jobs[i].done()
                rows = readers[i].read()
                got[i] += len(rows)
                if rows:
                    yield Arrival(groups[i], rows)
                if not finished:
                    continue
                if got[i] < len(groups[i].points) * self.rows_per_point:
                    why = _job_error(jobs[i]) or "the job ended early"
                    if tries[i] < self.retries:  # again, from the rows its file holds
                        tries[i] += 1
                        self.say(f"Slurm job {jobs[i].job_id} failed ({why}); submitted "
                                 f"again ({tries[i]} of {self.retries})")
                        jobs[i] = self._again(ex, task, cfg, groups[i], paths[i])
                        continue
                    yield Arrival(groups[i], failure=f"Slurm job {jobs[i].job_id}: {why}"
                                  + (f" (after {self.retries} retries)" if self.retries else ""))
                open_.discard(i)
                readers[i].done()
            if open_:
                time.sleep(POLL_S)

    @staticmethod
    def _again(ex: Any, task: work.Requeueable, cfg: Any, group: work.Group, path: Path) -> Any:
        try:
            return ex.submit(task, cfg, group, str(path))
        except Exception as e:  # noqa: BLE001 - sbatch's or submitit's refusal, reported
            raise ExecutorError(f"submitting a job again failed: {_one_line(e)}") from None


def _job_error(job: Any) -> str | None:
    try:
        e = job.exception()
    except Exception as err:  # noqa: BLE001 - submitit could not tell: say what it said
        return _one_line(err)
    return None if e is None else _raised(str(e)) or _one_line(e)


def _raised(report: str) -> str | None:
    """What a failed task raised, from submitit's report (a traceback between dashed lines,
    then its log files): the traceback's last line and the task's error log, else None."""
    parts = report.split("-" * 22)
    lines = [line.strip() for line in parts[1].splitlines() if line.strip()] if parts[2:] else []
    if not lines:
        return None
    logs = [line.strip(" -") for line in parts[2].splitlines() if line.endswith("_log.err")]
    return (lines[-1] + (f" (log {logs[0]})" if logs else ""))[:400]


class _Lines:
    """Whole JSON lines appended to a file since the last read."""

    def __init__(self, path: Path):
        self.path, self.offset = path, 0

    def read(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1
        self.offset += end
        return [json.loads(line) for line in data[:end].splitlines() if line.strip()]

    def done(self) -> None:
        """Mark the file read (renamed *.read), so a resume does not take its rows again."""
        if self.path.exists():
            self.path.rename(self.path.with_suffix(".read"))


def leftovers(folder: Path, mark_read: bool = True) -> list[dict[str, Any]]:
    """Rows that Slurm tasks wrote and no driver read (it was killed): each file is marked
    read once taken (unless not `mark_read`: a dry run's look). The caller stores the rows
    whose points the run still lacks."""
    rows: list[dict[str, Any]] = []
    for path in sorted((folder / "rows").glob("*.jsonl")):
        reader = _Lines(path)
        rows += reader.read()
        if mark_read:
            reader.done()
    return rows


# ---- choosing one ------------------------------------------------------------------------------

def engine_for(settings: ExecutorSettings, cuda: bool, fn: Callable, file_fn: Callable,
               say: Callable[[str], None], rows_per_point: int = 1) -> Any:
    """The executor `settings` name, running `fn(job, group)` (`file_fn(job, group, path)` as a
    Slurm task). Ray is joined here; a Slurm folder is set once the run id is known. UsageError
    for more local workers than GPUs."""
    kind, workers, retries = settings.executor, settings.workers, settings.retries
    if kind == "local":
        if cuda and workers > len(visible_gpus()):
            raise UsageError(f"--workers {workers}: this machine shows {len(visible_gpus())} "
                             "GPUs (one worker per GPU)")
        return LocalWorkers(workers, retries, cuda, fn)
    if kind == "ray":
        engine = RayCluster(settings.address, retries, cuda, fn)
        engine.connect()
        return engine
    return SlurmArrays(None, settings.slurm_partition, settings.slurm_gpus_per_node,
                       settings.slurm_time, cuda, fn=file_fn, say=say,
                       rows_per_point=rows_per_point, retries=retries)


def run_device(device: str, settings: ExecutorSettings) -> str:
    """The device a run measures on, from --device. Points measured here (or in local workers)
    need it here; a Ray or Slurm driver may run where the GPUs are not (a login node): there
    `cuda` is taken as asked, and each worker runs on the one GPU it is given (cuda:0 in its
    own view)."""
    if settings.executor == "local":
        resolved = torch_device(device)
        return "cuda:0" if settings.remote and resolved.startswith("cuda") else resolved
    if device == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    return "cuda:0" if device.startswith("cuda") else device


def slurm_folder(store_dir: Path, run_id: str) -> Path:
    """Where a run's Slurm tasks write their rows: beside the store (shared storage)."""
    return store_dir / "slurm" / run_id


# ---- the driver's side -------------------------------------------------------------------------

def error_row(cfg: SweepConfig, p: Point, why: str) -> PointResult:
    now = datetime.now(UTC)
    return PointResult(p.recipe.name, p.recipe.recipe_hash, p.recipe.layer_plan, p.S, p.B, p.G,
                       p.K, p.dtype, cfg.backend, work.worker_device(cfg).device, status="error",
                       error=why, started_at=now, ended_at=now)


class Distributed:
    """A sweep run by an executor, with the interface of fsc.profile.Sweep: `on_point(row)` is
    called on the driver for each row as it arrives, then `on_progress(row)`; `run()` returns
    the rows in plan order."""

    def __init__(self, cfg: SweepConfig, points: list[Point], executor: Any, lanes: int,
                 on_point=None, on_progress=None):
        self.cfg, self.points, self.executor = cfg, points, executor
        self.groups = work.groups(points, lanes)
        self.on_point = on_point or (lambda r: None)
        self.on_progress = on_progress or (lambda r: None)

    def run(self) -> list[PointResult]:
        rows: list[PointResult] = []
        got = {g.index: 0 for g in self.groups}
        for arrival in self.executor.arrivals(self.cfg, self.groups):
            g = arrival.group
            results = [PointResult.from_columns(r) for r in arrival.rows]
            if arrival.failure is not None:
                results += [error_row(self.cfg, p, arrival.failure)
                            for p in g.points[got[g.index] + len(arrival.rows):]]
            got[g.index] += len(results)
            for r in results:
                self.on_point(r)
                rows.append(r)
                self.on_progress(r)
        ran = work.worker_device(self.cfg)  # the settings the rows were measured under
        order: dict[tuple, int] = {}
        for i, p in enumerate(self.points):
            order.setdefault(p.key(ran), i)
        return sorted(rows, key=lambda r: order.get(r.key(), len(order)))
