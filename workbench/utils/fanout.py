r"""A stage's independent configurations fanned out to processes on this machine or to a Dask
cluster, with the same results either way.

A stage whose configurations do not depend on each other (``het_long``'s systems x seeds,
``het_epoch``'s replays) hands them to [`fan_out`][]: one picklable function, one argument
tuple per configuration, a label for each. Where they run is the run's ``fanout`` setting
([`FanoutConfig`][]), never the stage's:

    configurations c_0 .. c_n-1 --> executor -------------------------> results r_0 .. r_n-1
                                     processes: spawned processes on     (in the configurations'
                                       this machine, one per             order, whatever order
                                       configuration, ``jobs`` at once   they finished in)
                                     dask: a dask.distributed cluster:
                                       a LocalCluster of ``jobs`` worker
                                       processes, one thread each, or the
                                       scheduler at ``fanout.scheduler``

Each configuration computes alone in its process with one thread of torch, numpy and numba
(the worker's), so its result is bit-identical to a serial run of it whatever the backend, the
order or the number of workers (``tests/test_fanout.py`` holds a ``LocalCluster`` of two worker
processes to the serial results). Only what a stage measures of its machine differs: a Dask
worker runs several configurations in one process, so a peak resident memory it reports is that
process's peak so far.

Admission. A configuration may carry an estimate of its memory (``need``, GB); a new one starts
only while the estimates of those running fit ``budget_gb`` (the first always starts), largest
first. With a scheduler address the cluster's own workers' memory limits apply instead: every
configuration is submitted at once and the scheduler places it.

Failures. A configuration that raises does not stop the others; when every configuration has
ended, [`FanoutFailed`][] names each failed one, ``"<label>: <Class>: <message>"`` (a
[`UserError`][workbench.utils.errors.UserError] of the stage's input), or
[`WorkerFailed`][] when one was an internal error or a lost worker (its traceback logged).

A real cluster (SLURM, PBS, ...): start a scheduler and workers there with ``dask-jobqueue``
(``SLURMCluster(...).scale(jobs=4)``) or ``dask scheduler`` / ``dask worker``, from the same
environment as this project and with its data root on a shared filesystem, then run a stage
with ``fanout.backend=dask fanout.scheduler=tcp://<host>:8786``.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from workbench.utils.errors import UserError, WorkbenchError, one_line
from workbench.utils.validation import ConfigError

log = logging.getLogger(__name__)

__all__ = ["LOCAL", "FanoutConfig", "FanoutFailed", "WorkerFailed", "fan_out", "executor",
           "dask_client"]


@dataclass(frozen=True)
class FanoutConfig:
    """Where a stage's independent configurations run (``fanout`` in the configuration).

    Attributes:
        backend: ``processes`` (spawned processes on this machine) or ``dask``
            (``dask.distributed``).
        scheduler: ``dask``: a running scheduler's address (``tcp://host:8786``); null starts
            a ``LocalCluster`` of the stage's ``jobs`` worker processes for the run.
    """

    backend: Literal["processes", "dask"] = "processes"
    scheduler: str | None = None

    def __post_init__(self) -> None:
        if self.scheduler is not None and self.backend != "dask":
            raise ConfigError(f"fanout.scheduler = {self.scheduler!r} is read by the dask backend "
                              "only: add fanout.backend=dask, or drop fanout.scheduler")
        if self.scheduler is not None and "://" not in self.scheduler:
            raise ConfigError(f"fanout.scheduler = {self.scheduler!r}: give the scheduler's "
                              "address, e.g. fanout.scheduler=tcp://127.0.0.1:8786")


#: The default: spawned processes on this machine.
LOCAL = FanoutConfig()


class FanoutFailed(UserError, RuntimeError):
    """Configurations failed on their input; the message has one line per configuration."""


class WorkerFailed(WorkbenchError, RuntimeError):
    """A configuration failed inside (a bug or a lost worker); tracebacks are in the log."""


def _one_thread(fn: Callable[..., Any], args: tuple) -> Any:
    """Run ``fn(*args)`` with one thread of torch where ``fn``'s module imported it (unpickling
    ``fn`` imported its module first; torch is not imported for a function that does not use
    it: seconds per spawned process)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    return fn(*args)


@contextmanager
def executor(config: FanoutConfig, jobs: int) -> Iterator[Executor]:
    """A ``concurrent.futures`` executor of ``config``'s backend with ``jobs`` workers.

    Raises:
        ConfigError: ``dask`` without ``dask.distributed`` installed, or a scheduler that
            cannot be reached (names the address and how to start one).
    """
    if config.backend == "processes":
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context

        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"),
                                 max_tasks_per_child=1) as pool:
            yield pool
        return
    with dask_client(config, jobs) as client:
        yield client.get_executor(pure=False)


@contextmanager
def dask_client(config: FanoutConfig, jobs: int) -> Iterator[Any]:
    """A ``dask.distributed`` client: of the scheduler at ``config.scheduler``, else of a
    ``LocalCluster`` of ``jobs`` worker processes with one thread each (non-daemonic, so a
    configuration may start processes of its own), closed at the end.

    Raises:
        ConfigError: ``dask.distributed`` is not installed, or no scheduler answers at
            ``config.scheduler`` (names the address and how to start one).
    """
    try:
        import distributed  # noqa: F401
    except ImportError:  # pragma: no cover - a dependency of the project
        raise ConfigError("fanout.backend=dask needs dask.distributed: pip install "
                          "'dask[distributed]' (make install does)") from None
    quiet = logging.getLogger("distributed")  # its INFO lines (nannies, comms) are not ours
    level = quiet.level
    quiet.setLevel(max(level, logging.WARNING))
    try:
        with _client(config, jobs) as client:
            yield client
    finally:
        quiet.setLevel(level)


@contextmanager
def _client(config: FanoutConfig, jobs: int) -> Iterator[Any]:
    import dask
    from distributed import Client, LocalCluster

    if config.scheduler is None:
        with dask.config.set({"distributed.worker.daemon": False}), \
                LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                             dashboard_address=None, silence_logs=logging.WARNING) as cluster, \
                Client(cluster) as client:
            yield client
        return
    try:
        client = Client(config.scheduler, timeout="10s")
    except OSError as err:
        raise ConfigError(f"fanout.scheduler = {config.scheduler!r}: no scheduler answers "
                          f"there ({err}); start one (dask scheduler, or dask-jobqueue's "
                          "cluster) and give its address, or drop fanout.scheduler for a "
                          "LocalCluster") from None
    with client:
        yield client


def fan_out(fn: Callable[..., Any], configs: Sequence[tuple], labels: Sequence[str], *,
            jobs: int, config: FanoutConfig = LOCAL,
            need: Sequence[float] | None = None, budget_gb: float | None = None,
            done: Callable[[int, Any], None] | None = None, progress: bool = False,
            desc: str = "fan_out", unit: str = "configuration") -> list[Any]:
    """``[fn(*c) for c in configs]``, computed on ``config``'s backend ``jobs`` at a time.

    Args:
        fn: a module-level function (pickled by reference into the workers).
        configs: one argument tuple per configuration.
        labels: one name per configuration, for progress and failures.
        jobs: workers side by side (``processes``, a ``LocalCluster``).
        config: the backend.
        need: each configuration's estimated memory (GB); None: no admission.
        budget_gb: the memory the running configurations' estimates must fit.
        done: called with ``(index, result)`` as each configuration ends (its log line).
        progress: show a progress bar (``desc``, counted in ``unit``), one step per
            configuration that ends.

    Returns:
        The results, in ``configs``' order.

    Raises:
        FanoutFailed: configurations raised a UserError (one line each).
        WorkerFailed: a configuration failed otherwise (tracebacks logged).
    """
    from tqdm.auto import tqdm

    weights = list(need) if need is not None else [0.0] * len(configs)
    budget = budget_gb if budget_gb is not None and config.scheduler is None else float("inf")
    pending = sorted(range(len(configs)), key=lambda i: -weights[i])
    out: dict[int, Any] = {}
    failed: dict[int, BaseException] = {}
    with executor(config, jobs) as pool, \
            tqdm(total=len(configs), disable=not progress, desc=desc, unit=unit) as bar:
        running: dict[Future, int] = {}
        while pending or running:
            used = sum(weights[i] for i in running.values())
            for i in list(pending):
                if len(running) >= jobs and config.scheduler is None:
                    break
                if not running or used + weights[i] <= budget:
                    running[pool.submit(_one_thread, fn, configs[i])] = i
                    used += weights[i]
                    pending.remove(i)
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                i = running.pop(future)
                bar.update()
                try:
                    out[i] = future.result()
                except Exception as err:  # noqa: BLE001 - every configuration's error is kept
                    failed[i] = err
                    if not isinstance(err, UserError):
                        log.error("%s failed:\n%s", labels[i], "".join(
                            traceback.format_exception(type(err), err, err.__traceback__)))
                    continue
                if done is not None:
                    done(i, out[i])
    if failed:
        lines = [f"{labels[i]}: {one_line(failed[i])}" for i in sorted(failed)]
        text = (f"{len(failed)} of {len(configs)} configurations failed "
                f"({len(out)} computed):\n" + "\n".join(lines))
        if all(isinstance(err, UserError) for err in failed.values()):
            raise FanoutFailed(text)
        raise WorkerFailed(text)
    return [out[i] for i in range(len(configs))]
