"""Plan a sweep, run the missing runs on an executor, and record every outcome in the store on the driver.

Executors:

- ``local``: in this process, one run after the other (an experiment's own inner progress bar shows here).
- ``process``: a pool of ``jobs`` worker processes (started with ``spawn``; each gets
  :func:`threads_per_worker` torch threads: the cores the sweep may use, over ``jobs``).
- ``ray``: one Ray task per run, on the cluster at ``ray_address`` or on a local Ray instance.

Whatever the executor, workers only compute: the outcomes come back to the driver, which writes each one to the
store in its own transaction as soon as it arrives. A sweep that is stopped (Ctrl-C, a killed process, a crashed
worker) loses only the runs that were in flight; running the same command again runs only what is missing.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import socket
import statistics
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from symkit._locks import RunInUse
from symkit.lab import runtime
from symkit.lab._text import count
from symkit.lab.allocator import keep_freed_memory
from symkit.lab.experiments.registry import Experiment, config_from_json, import_experiment, resolve_scale
from symkit.lab.store import RunRecord, Store, StoreError, canonical_json, config_hash, to_jsonable
from symkit.lab.store.db import utc_now
from symkit.progress import progress_bar, progress_enabled

EXECUTORS = ("local", "process", "ray")
#: the most runs one sweep may plan (each planned run holds its config in memory; split bigger sweeps)
MAX_RUNS = 100_000


class SweepError(RuntimeError):
    """A sweep could not be planned or run (bad settings, a missing optional dependency, a dead worker pool)."""


@dataclass(frozen=True)
class RunSpec:
    """One run to do: the experiment, the module that registers it, the full config (with its seed), and where and
    how to run it (:class:`symkit.lab.runtime.RunSettings` as a dict; not part of the run's identity in the store)."""

    experiment: str
    module: str | None
    config: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def seed(self) -> int:
        return int(self.config["seed"])

    @property
    def config_hash(self) -> str:
        return config_hash(self.config)

    def label(self, keys: Sequence[str] = ()) -> str:
        """A short description, ``k=v`` for the given config keys (and the seed)."""
        parts = [f"{k}={self.config[k]}" for k in keys if k in self.config and k != "seed"]
        return " ".join([*parts, f"seed={self.seed}"])


@dataclass(frozen=True)
class Outcome:
    """What a worker sends back for one run."""

    spec: RunSpec
    metrics: dict[str, Any] | None
    error: str | None
    started_at: str
    finished_at: str
    duration: float
    host: str
    #: refused because another process holds the run (:class:`symkit._locks.RunInUse`): not stored, neither done
    #: nor failed, so the next sweep runs it if the holder did not finish it
    in_use: bool = False


@dataclass
class SweepResult:
    """Counts for one call of :func:`run_sweep`."""

    total: int
    already_ok: int = 0
    already_failed: int = 0
    ran: int = 0
    failed: int = 0
    interrupted: bool = False
    failures: list[Outcome] = field(default_factory=list)
    #: runs another process was training (refused by its lock): not run and not stored
    in_use: list[Outcome] = field(default_factory=list)
    #: runs that finished but could not be written to the store: kept in ``pending_path`` (recorded by the next
    #: writable open of the store) or, if even that failed, only here
    store_error: str | None = None
    pending: int = 0
    pending_path: Any = None
    unsaved: list[Outcome] = field(default_factory=list)

    @property
    def skipped(self) -> int:
        return self.already_ok + self.already_failed


# -- planning ---------------------------------------------------------------------------------------------------


def parse_seeds(text: str) -> list[int]:
    """``"0,1,2"``, ``"0-4"`` or a mix (``"0-2,7"``) as a list of ints."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part[1:]:
                lo, hi = part.split("-", 1) if not part.startswith("-") else (part, "")
                a, b = int(lo), int(hi)
                if b < a:
                    raise ValueError
                if b - a + 1 + len(seeds) > MAX_RUNS:
                    raise SweepError(
                        f"--seeds {text!r} asks for more than {MAX_RUNS:,} seeds; a sweep plans at most {MAX_RUNS:,} "
                        "runs: split it into several commands"
                    )
                seeds.extend(range(a, b + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise SweepError(
                f"bad --seeds value {text!r}: expected integers and ranges separated by commas, e.g. '0,1,2' or "
                "'0-4'"
            ) from None
    if not seeds:
        raise SweepError(f"bad --seeds value {text!r}: no seeds given")
    return list(dict.fromkeys(seeds))


def parse_assignments(experiment: Experiment, items: Sequence[str], option: str = "--set") -> dict[str, list[Any]]:
    """Parse ``key=value`` (``--set``) or ``key=v1,v2`` (``--sweep``) items into typed values per config field.

    A key given more than once collects all its values (so ``--set g=a --set g=b`` sweeps over both)."""
    out: dict[str, list[Any]] = {}
    for item in items:
        if "=" not in item:
            raise SweepError(
                f"bad {option} {item!r}: expected key=value; valid keys for {experiment.name!r}: "
                f"{', '.join(experiment.field_names())}"
            )
        key, text = (s.strip() for s in item.split("=", 1))
        if key == "seed":
            raise SweepError(f"bad {option} {item!r}: choose seeds with --seeds")
        try:
            if option == "--sweep":
                values = [experiment.parse_setting(key, part) for part in _split_top_level(text) if part.strip()]
            else:
                values = [experiment.parse_setting(key, text)]
        except ValueError as exc:
            raise SweepError(f"{option} {item!r}: {exc}") from None
        if not values:
            raise SweepError(f"bad {option} {item!r}: no value given")
        out.setdefault(key, [])
        out[key] += [v for v in values if v not in out[key]]  # a repeated key adds values
    return out


def _split_top_level(text: str) -> list[str]:
    """Split on the commas that are not inside brackets, so ``SO(3),O(1,3)`` gives two values."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p.strip() for p in parts]


def _from_json(experiment: Experiment, values: Mapping[str, Any]) -> Any:
    """Rebuild a config instance from its stored JSON dict (fields it lacks that the experiment lists as ``legacy``
    take their legacy values)."""
    return config_from_json(experiment.config, experiment.complete(values))


def check_stored_config(experiment: Experiment, values: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` unless ``values`` is a config of ``experiment`` as the results store keeps it (a run
    archive's ``config``): every field of the experiment (a ``legacy`` field may be left out), no other key, each
    value of its field's type and range (:meth:`Experiment.check_config`), written as a sweep writes it, so that the
    run gets the key a sweep gives it."""
    if not isinstance(values, Mapping):
        raise TypeError(f"a config of experiment {experiment.name!r} must be a JSON object, got "
                        f"{type(values).__name__}")
    names = experiment.field_names()
    missing = [name for name in names if name not in experiment.complete(values)]
    unknown = [key for key in values if key not in names]
    if missing or unknown:
        parts = ([f"lacks {', '.join(missing)}"] if missing else []) + (
            [f"has {', '.join(map(repr, unknown))}, not settings of it"] if unknown else [])
        raise ValueError(f"the config is not one of experiment {experiment.name!r}: it {' and '.join(parts)} "
                         f"(its settings: {', '.join(names)})")
    try:
        config = _from_json(experiment, values)
    except ValueError as exc:  # pydantic's ValidationError: a value that is not of its field's type
        errors = exc.errors() if hasattr(exc, "errors") else []
        reason = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors[:3]) or str(exc)
        raise ValueError(f"the config is not one of experiment {experiment.name!r}: {reason}") from None
    experiment.check_config(config)
    made = experiment.identity(to_jsonable(dataclasses.asdict(config)))
    differ = [k for k in sorted({*made, *values}) if canonical_json(made.get(k)) != canonical_json(values.get(k))
              or (k in made) != (k in values)]
    if differ:
        shown = "; ".join(
            f"{k}={values[k]!r} where a sweep writes {made[k]!r}" if k in made and k in values else
            f"{k}={values[k]!r}, which a sweep leaves out (its legacy value)" if k in values else
            f"no {k}, which a sweep writes as {made[k]!r}" for k in differ)
        raise ValueError(f"the config is not written as experiment {experiment.name!r} writes it ({shown}), so the "
                         "run would not be found by a sweep")


def check_archived_run(entry: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` unless a run archive's ``entry`` is a run of an experiment of this install whose config
    :func:`check_stored_config` accepts (``symkit import`` checks every line so before recording any)."""
    from symkit.lab.experiments.registry import get_experiment

    try:
        experiment = get_experiment(entry["experiment"])
    except KeyError as exc:
        raise ValueError(exc.args[0] if exc.args else str(exc)) from None
    check_stored_config(experiment, entry["config"])


def plan(
    experiment: Experiment,
    quick: bool = False,
    seeds: Sequence[int] | None = None,
    settings: Mapping[str, Sequence[Any]] | None = None,
    points: Sequence[Mapping[str, Any]] | None = None,
    scale: str | None = None,
    run_settings: runtime.RunSettings | None = None,
) -> list[RunSpec]:
    """The runs of a sweep at ``scale`` (``quick``, ``default`` or ``paper``; ``quick=True`` is ``scale="quick"``):
    the experiment's grid (or ``points``), with ``settings`` overriding fields (several values per field multiply the
    grid) and ``seeds`` replacing the grid's seeds. ``run_settings`` (device, data folder, precision) go with every
    run to whichever process runs it.

    For experiments with an explicit run list (``Experiment.points``), a setting of a field that the list defines
    selects the runs with those values instead (``--set group=SO(3)`` keeps the SO(3) cells of ``ranks``), and sets it
    on the runs that leave that field to the config (``--set epochs=300`` keeps pac-bayes-structure's stochastic runs,
    at 300 epochs, and drops its full-batch run, which names its own); a field that only the sweep's grid multiplies
    the list by is set, as in a plain grid.
    """
    try:
        scale = resolve_scale(quick, scale)
    except ValueError as exc:
        raise SweepError(str(exc)) from None
    quick = scale == "quick"
    grid = [dict(p) for p in points] if points is not None else experiment.grid(scale=scale)
    # the fields the explicit run list itself defines (not those the sweep's grid multiplies it by) select runs
    listed = grid if points is not None else experiment.points(quick) if experiment.points is not None else []
    point_keys = {k for point in listed for k in point if k != "seed"}
    settings = dict(settings or {})
    for key, values in settings.items():
        if key in point_keys:  # a field the explicit run list defines: keep the runs with these values
            wanted = {canonical_json(v) for v in values}
            kept = []
            for point in grid:  # a run the list leaves the field to the config for takes the setting
                if key not in point:
                    kept += [{**point, key: value} for value in values]
                elif canonical_json(point[key]) in wanted:
                    kept.append(point)
            if not kept:
                have = sorted({str(point[key]) for point in grid if key in point})
                raise SweepError(
                    f"no run of {experiment.name!r} has {key} in {', '.join(map(str, values))}; values in this "
                    f"sweep: {', '.join(have)}"
                )
            grid = kept
        else:
            grid = [{**point, key: value} for point in grid for value in values]
    if len(grid) * (len(seeds) if seeds is not None else 1) > MAX_RUNS:
        raise SweepError(
            f"the sweep of {experiment.name!r} has {len(grid) * len(seeds or [0]):,} runs; a sweep plans at most "
            f"{MAX_RUNS:,}: split it into several commands (fewer seeds or values)"
        )
    if seeds is not None:
        grid = [{**point, "seed": seed} for point in grid for seed in seeds]
    specs: dict[tuple[str, int], RunSpec] = {}
    module = getattr(experiment.run, "__module__", None)
    for point in grid:
        try:
            config = experiment.config_at(scale, **point)
        except (TypeError, ValueError) as exc:
            raise SweepError(f"experiment {experiment.name!r} rejected the settings {point}: {exc}") from None
        values = experiment.identity(to_jsonable(dataclasses.asdict(config)))
        spec = RunSpec(experiment.name, module, values, (run_settings or runtime.RunSettings()).to_dict())
        specs.setdefault((spec.config_hash, spec.seed), spec)
    return list(specs.values())


# -- running one run (in any process) ---------------------------------------------------------------------------


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    if "numpy" in sys.modules:
        import numpy as np

        np.random.seed(seed % 2**32)
    if "torch" in sys.modules:
        import torch

        torch.manual_seed(seed)


def non_finite_metrics(metrics: Mapping[str, Any]) -> list[str]:
    """``name=value`` of every metric (or list item) that is a float but not finite."""
    import math

    def bad(value: Any) -> bool:
        if isinstance(value, float):
            return not math.isfinite(value)
        if isinstance(value, (list, tuple)):
            return any(bad(v) for v in value)
        if isinstance(value, Mapping):
            return any(bad(v) for v in value.values())
        return False

    return [f"{k}={v}" for k, v in metrics.items() if bad(v)]


def execute(spec: RunSpec) -> Outcome:
    """Run one spec and return its outcome; an exception inside the run becomes a failed outcome."""
    started, t0 = utc_now(), time.perf_counter()
    metrics: dict[str, Any] | None = None
    error: str | None = None
    in_use = False
    try:
        experiment = import_experiment(spec.experiment, spec.module)
        config = _from_json(experiment, spec.config)
        _seed_everything(spec.seed)
        with runtime.using(_placed(spec.settings)):
            result = experiment.run(config)
        if not isinstance(result, Mapping):
            raise TypeError(
                f"run() of experiment {spec.experiment!r} returned {type(result).__name__}; expected a dict of "
                "metrics"
            )
        metrics = to_jsonable(dict(result))
        canonical_json(metrics)
        bad = non_finite_metrics(metrics)
        if bad:
            raise ValueError(
                f"run() of experiment {spec.experiment!r} returned non-finite metrics: {', '.join(bad)} (a diverged "
                "or empty run; stored as failed)"
            )
    except RunInUse as exc:  # another process trains this run: not a failure of the run
        metrics, error, in_use = None, str(exc), True
    except (Exception, SystemExit):  # a run that calls sys.exit() is a failed run, not the end of the sweep
        metrics, error = None, traceback.format_exc()
    return Outcome(spec, metrics, error, started, utc_now(), time.perf_counter() - t0, socket.gethostname(), in_use)


def _exit_with_parent(parent: int, interval: float = 0.5) -> None:
    """End this worker when the process that started it is gone (killed with SIGKILL, say): a daemon thread polls
    the parent pid, which changes when the worker is re-parented. Without it, the workers of a killed sweep wait
    forever for work on their queue, holding their memory."""
    import threading

    def watch() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="symkit-parent-watch", daemon=True).start()


#: this worker process's number in its pool (None in the driver): a run on ``cuda`` takes GPU ``slot % count``
_WORKER_SLOT: int | None = None


def _placed(settings: Mapping[str, Any]) -> runtime.RunSettings:
    """The run's settings, with a bare ``cuda`` device made one GPU per pool worker (the Ray executor instead asks
    Ray for one GPU per task, which then shows the task only that GPU)."""
    placed = runtime.RunSettings(**settings)
    if placed.device == "cuda" and _WORKER_SLOT is not None:
        import torch

        count = torch.cuda.device_count()
        if count > 1:
            placed = dataclasses.replace(placed, device=f"cuda:{_WORKER_SLOT % count}")
    return placed


def _init_worker(threads: int, parent: int | None = None, slots: Any = None) -> None:
    import signal

    global _WORKER_SLOT
    if slots is not None:
        with slots.get_lock():
            _WORKER_SLOT = slots.value
            slots.value += 1
    if parent is not None:
        _exit_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is handled by the driver, which stops the pool
    keep_freed_memory()  # as the symkit command does in its own process
    os.environ.setdefault("SYMKIT_PROGRESS", "0")
    # tqdm makes a multiprocessing lock for its first bar, hidden or not; a worker stopped mid-run never releases
    # it and the resource tracker warns of a "leaked semaphore" when the sweep ends. A worker's bars are its own
    # (a lock made here is not shared with other processes anyway), so a thread lock serves.
    import threading

    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    else:  # read by torch when an experiment imports it
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))


# -- executors: generators of outcomes, in completion order -----------------------------------------------------


def _local(specs: Sequence[RunSpec], jobs: int, ray_address: str | None, on_start: Any = None) -> Iterator[Outcome]:
    for spec in specs:
        if on_start is not None:
            on_start(spec)
        yield execute(spec)


_DIED = (
    "the worker process died while running this run (killed, out of memory, or a crash outside Python); it was "
    "run again alone to make sure"
)


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the system has one (``taskset``, a batch
    scheduler's allocation), else every core of the machine."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def threads_per_worker(jobs: int) -> int:
    """Torch threads for each of ``jobs`` worker processes: the usable cores shared out, at least one. More threads
    than cores make OpenMP's workers wait on each other (compiled rl-sac updates ran six times slower, 0.7 s against
    0.108 s a step, with two two-thread sweeps on two cores)."""
    return max(1, usable_cores() // jobs)


def _new_pool(jobs: int) -> Any:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    threads = threads_per_worker(jobs)
    context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(
        max_workers=jobs, mp_context=context, initializer=_init_worker,
        initargs=(threads, os.getpid(), context.Value("i", 0)),
    )


#: seconds a stopped worker has to end (a run that checkpoints saves where it stands first: rl-sac's 100,000-step
#: replay buffers take a few seconds); then it is killed
STOP_GRACE = 60.0


def _stop_pool(pool: Any, clean: bool) -> None:
    """Shut ``pool`` down: wait for idle workers if ``clean``, else stop the workers (interrupted, broken) with
    SIGTERM, which runs that checkpoint honour at their next step (:mod:`symkit._stopping`) and others at once, and
    kill those still running after ``STOP_GRACE`` seconds."""
    if clean:
        pool.shutdown(wait=True)
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)  # shutdown() forgets it
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + STOP_GRACE
    for process in processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join(timeout=5)
    # the pool's manager thread closes its wake-up pipe once the workers are gone; at exit, Python < 3.12 writes to
    # that pipe without a lock (concurrent.futures.process._python_exit) and can find it closed mid-write (EBADF, a
    # traceback after a clean Ctrl-C), so the thread is let finish here, before exit
    if manager is not None:
        manager.join(timeout=STOP_GRACE)


def _isolated(spec: RunSpec) -> Outcome:
    """Run ``spec`` alone in a fresh one-worker pool: its outcome, or a failure if the worker dies again."""
    from concurrent.futures.process import BrokenProcessPool

    pool, started, clean = _new_pool(1), utc_now(), False
    try:
        outcome = pool.submit(execute, spec).result()
        clean = True
        return outcome
    except BrokenProcessPool:
        return Outcome(spec, None, _DIED, started, utc_now(), 0.0, socket.gethostname())
    finally:
        _stop_pool(pool, clean)


def _process(
    specs: Sequence[RunSpec], jobs: int, ray_address: str | None, on_start: Any = None
) -> Iterator[Outcome]:
    """At most ``jobs`` runs in flight, so that when a worker dies the suspects are known: they are run again one
    by one, each alone in a new worker, the one that kills its worker is recorded as failed, and the sweep goes on."""
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool

    jobs = max(1, min(jobs, len(specs)))
    queue = list(specs)
    fruitless = 0  # pools in a row that broke before taking a run
    while queue:
        pool = _new_pool(jobs)
        in_flight: dict[Any, RunSpec] = {}
        suspects: list[RunSpec] = []
        broken = clean = False
        try:
            while queue or in_flight:
                while queue and len(in_flight) < jobs:
                    spec = queue.pop(0)
                    try:
                        in_flight[pool.submit(execute, spec)] = spec
                    except BrokenProcessPool:  # a worker died since the last result: the same as seeing it there
                        queue.insert(0, spec)
                        broken = True
                        break
                    if on_start is not None:  # at most ``jobs`` in flight on ``jobs`` workers: it starts now
                        on_start(spec)
                if not broken:
                    done, _ = wait(list(in_flight), return_when=FIRST_COMPLETED)
                    for future in done:
                        spec = in_flight.pop(future)
                        try:
                            outcome = future.result()
                        except BrokenProcessPool:
                            suspects.append(spec)
                            broken = True
                            continue
                        fruitless = 0
                        yield outcome
                if broken:
                    suspects += in_flight.values()
                    in_flight.clear()
                    break
            clean = not broken
        finally:  # interrupted (Ctrl-C, SIGTERM, the consumer closed early) or broken: stop the workers now
            _stop_pool(pool, clean=clean)
        fruitless = fruitless + 1 if broken and not suspects else 0
        if fruitless >= 3:
            raise SweepError("the worker processes die before taking a run (3 pools in a row); check the machine's "
                             "memory and process limits, or use --executor local")
        for spec in suspects:
            yield _isolated(spec)


def _ray(specs: Sequence[RunSpec], jobs: int, ray_address: str | None, on_start: Any = None) -> Iterator[Outcome]:
    try:
        import ray
    except ImportError:
        raise SweepError(
            "the ray executor needs Ray, the optional extra of symkit: pip install 'symkit[ray]'"
        ) from None
    started_here = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"address": ray_address} if ray_address else {"address": "local", "num_cpus": jobs}
        try:
            ray.init(**kwargs, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        except Exception as exc:  # no cluster at that address, a port in use, ...
            where = f"the Ray cluster at {ray_address!r}" if ray_address else "a local Ray instance"
            raise SweepError(f"cannot start or reach {where}: {type(exc).__name__}: {exc}") from None
        started_here = True
    on_gpu = any(runtime.RunSettings(**spec.settings).device.startswith("cuda") for spec in specs)
    remote = ray.remote(num_cpus=1, num_gpus=1 if on_gpu else 0, max_retries=0)(execute)  # one GPU per run
    window = max(2 * jobs, 2 * int(ray.cluster_resources().get("CPU", 1)))
    queue = list(specs)
    in_flight: dict[Any, RunSpec] = {}
    try:
        while queue or in_flight:
            while queue and len(in_flight) < window:
                spec = queue.pop(0)
                in_flight[remote.remote(spec)] = spec
                if on_start is not None:  # submitted: Ray starts it when a CPU (and GPU) is free
                    on_start(spec)
            done, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in done:
                spec = in_flight.pop(ref)
                try:
                    yield ray.get(ref)
                except Exception as exc:  # the task died (worker crash, node lost): record it as failed
                    now = utc_now()
                    yield Outcome(spec, None, f"Ray task failed: {type(exc).__name__}: {exc}", now, now, 0.0, "")
    finally:
        for ref in in_flight:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # already finished or gone
                pass
        if started_here:
            ray.shutdown()


_EXECUTORS = {"local": _local, "process": _process, "ray": _ray}


# -- the driver -------------------------------------------------------------------------------------------------


def varying_fields(specs: Sequence[RunSpec]) -> list[str]:
    """The config fields whose value differs between ``specs`` (what a run's label shows), sorted."""
    seen: dict[str, set[str]] = {}
    for spec in specs:
        for key, value in spec.config.items():
            seen.setdefault(key, set()).add(canonical_json(value))
    for key, values in seen.items():  # a spec without the key counts as null
        if any(key not in spec.config for spec in specs):
            values.add(canonical_json(None))
    return sorted(key for key, values in seen.items() if len(values) > 1)


def planned_states(specs: Sequence[RunSpec], stored: Mapping[tuple[str, int], str],
                   retry_failed: bool = False) -> list[tuple[RunSpec, str]]:
    """What :func:`run_sweep` does with each spec, given the store's ``status_of``: ``"done"`` (stored, skipped),
    ``"failed"`` (stored as failed, skipped unless ``retry_failed``) or ``"to run"``."""
    out = []
    for spec in specs:
        status = stored.get((spec.config_hash, spec.seed))
        out.append((spec, "done" if status == "ok" else
                    "failed" if status == "failed" and not retry_failed else "to run"))
    return out


@dataclass(frozen=True)
class Estimate:
    """What :func:`estimate_seconds` found for the runs a sweep would run."""

    experiment: str
    #: the summed estimate of the runs that have one, in seconds of run time
    seconds: float
    #: runs with an estimate (``by_config`` of them from runs of their own config) and runs without one
    runs: int
    missing: int
    by_config: int
    #: stored finished runs whose times went into the medians
    based_on: int
    #: the longest single run's estimate (no run is split between workers)
    longest: float
    jobs: int
    #: the experiment has no stored finished run with a measured time at all (so none of any scale)
    empty_store: bool

    @property
    def wall_seconds(self) -> float:
        """A lower bound of the wall time: the run time shared out over the jobs, and never below the longest
        run."""
        return max(self.seconds / self.jobs, self.longest) if self.runs else 0.0


def estimate_seconds(experiment: Experiment, specs: Sequence[RunSpec], store: Store | Sequence[RunRecord],
                     jobs: int = 1, left: Mapping[tuple[str, int], float] | None = None) -> Estimate:
    """Estimate the run time of ``specs`` (the runs a sweep would run) from the times measured for the stored
    finished (``ok``) runs of ``experiment`` in ``store`` (a :class:`Store` or its records).

    Each run counts the median time of the stored runs with its config but another seed (same ``config_hash``);
    failing those, the median over the stored runs at its scale (the same values of every field that no sweep
    varies, so a ``--set`` of such a field is a scale of its own); failing those, it has no estimate
    (``Estimate.missing``). Runs stored without a measured time (duration 0) are left out. ``left`` gives, for a
    run keyed ``(config_hash, seed)`` that goes on from a checkpoint, the fraction of it still to do. ``jobs`` runs
    at a time give :attr:`Estimate.wall_seconds`, a lower bound of the wall time. The times are those the runs
    took where they ran (their executor, machine and load), so the estimate is only as good as that match.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be an int >= 1 (runs at a time), got {jobs!r}")
    other = sorted({spec.experiment for spec in specs} - {experiment.name})
    if other:
        raise ValueError(f"estimate_seconds for {experiment.name!r} got runs of {', '.join(map(repr, other))}")
    records = store.runs(experiment.name, status="ok") if isinstance(store, Store) else [
        r for r in store if r.experiment == experiment.name and r.status == "ok"]
    records = [r for r in records if r.duration > 0]
    fixed = experiment.fixed_fields()

    def scale_key(config: Mapping[str, Any]) -> str:
        complete = experiment.complete(config)
        return canonical_json({k: complete.get(k) for k in fixed})

    by_hash: dict[str, list[RunRecord]] = {}
    by_scale: dict[str, list[RunRecord]] = {}
    for record in records:
        by_hash.setdefault(record.config_hash, []).append(record)
        by_scale.setdefault(scale_key(record.config), []).append(record)
    total = longest = 0.0
    runs = missing = by_config = 0
    used: set[tuple[str, int]] = set()
    for spec in specs:
        chosen = by_hash.get(spec.config_hash)
        if chosen:
            by_config += 1
        else:
            chosen = by_scale.get(scale_key(spec.config))
        if not chosen:
            missing += 1
            continue
        fraction = 1.0 if left is None else min(1.0, max(0.0, float(left.get((spec.config_hash, spec.seed), 1.0))))
        seconds = statistics.median(r.duration for r in chosen) * fraction
        total += seconds
        longest = max(longest, seconds)
        runs += 1
        used.update((r.config_hash, r.seed) for r in chosen)
    return Estimate(experiment.name, total, runs, missing, by_config, len(used), longest, jobs, not records)


def estimate_line(estimate: Estimate) -> str:
    """The one line ``symkit reproduce --dry-run`` prints for ``estimate`` (empty when nothing is to run), e.g.
    ``estimate: about 14 min for 12 runs (median times of 30 stored runs: same config, else same scale; 2 jobs: at
    least 7 min)``."""
    if not estimate.runs and not estimate.missing:
        return ""
    if not estimate.runs:
        where = "in the store" if estimate.empty_store else "at this scale in the store"
        return f"no estimate: no finished run of {estimate.experiment} {where}"
    planned = count(estimate.runs, "run") if not estimate.missing else (
        f"{estimate.runs} of {estimate.runs + estimate.missing} runs")
    text = (f"estimate: about {format_seconds(estimate.seconds)} for {planned} (median times of "
            f"{count(estimate.based_on, 'stored run')}: same config, else same scale")
    if estimate.jobs > 1:
        text += f"; {estimate.jobs} jobs: at least {format_seconds(estimate.wall_seconds)}"
    text += ")"
    if estimate.missing:
        text += (f"; no estimate for {count(estimate.missing, 'run')}: no finished run of {estimate.experiment} at "
                 "their scale in the store")
    return text


def run_sweep(
    experiment: Experiment,
    specs: Sequence[RunSpec],
    store: Store,
    executor: str = "local",
    jobs: int = 1,
    ray_address: str | None = None,
    retry_failed: bool = False,
    progress: bool | None = None,
    on_finished: Callable[[Outcome], None] | None = None,
    progress_interval: float | None = 30.0,
) -> SweepResult:
    """Run the specs that the store does not hold yet (and failed ones if ``retry_failed``), recording each outcome;
    ``on_finished(outcome)`` is called after each finished (not failed) run the store took.

    ``progress=None`` draws the sweep's bars on a terminal; elsewhere (CI logs, ``nohup``), unless
    ``SYMKIT_PROGRESS=0``, it writes a :func:`progress_line` to stderr every ``progress_interval`` seconds while runs
    go (``None`` or 0: no lines). ``progress=True`` forces the bars, ``False`` shows neither.

    Returns the counts; on Ctrl-C the result has ``interrupted=True`` (the finished runs are stored).
    """
    if executor not in _EXECUTORS:
        raise SweepError(f"unknown executor {executor!r}; valid executors: {', '.join(EXECUTORS)}")
    if jobs < 1:
        raise SweepError(f"--jobs must be at least 1, got {jobs}")
    if ray_address and executor != "ray":
        raise SweepError("--ray-address is only used with --executor ray")
    _check_interval(progress_interval)
    result = SweepResult(total=len(specs))
    bar = run_bar = lines = outcomes = None
    try:  # an interruption at any point (a time limit's SIGTERM while planning, say) ends in the result
        todo = []
        for spec, state in planned_states(specs, store.status_of(experiment.name), retry_failed):
            if state == "done":
                result.already_ok += 1
            elif state == "failed":
                result.already_failed += 1
            else:
                todo.append(spec)
        if not todo:
            return result

        varying = varying_fields(todo)
        show = progress_enabled() if progress is None else progress
        bar = progress_bar(desc=experiment.name, total=len(specs), show=show, initial=len(specs) - len(todo),
                           unit="run", position=0, leave=True)
        run_bar = _RunBar(show, parallel=None if executor == "local" else jobs)
        if (progress is None and not show and progress_interval
                and os.environ.get("SYMKIT_PROGRESS", "1") != "0"):
            lines = _ProgressLines(len(todo), progress_interval, 1 if executor == "local" else jobs)

        def on_start(spec: RunSpec) -> None:
            run_bar.start(spec.label(varying))
            if lines is not None:
                lines.start()

        outcomes = _EXECUTORS[executor](todo, jobs, ray_address, on_start)
        for outcome in outcomes:
            failed = outcome.error is not None and not outcome.in_use
            if outcome.in_use:  # left to the process that holds it; a later sweep runs it if that one did not
                result.in_use.append(outcome)
            else:
                recorded = _record(store, experiment.name, outcome, result)
                result.ran += 1
                if failed:
                    result.failed += 1
                    result.failures.append(outcome)
                elif recorded and on_finished is not None:
                    on_finished(outcome)
            run_bar.finish(outcome.spec.label(varying), outcome.duration, failed)
            if lines is not None:
                lines.finish(outcome, failed)
            bar.update(1)
    except KeyboardInterrupt:
        result.interrupted = True
    finally:
        for closing in (outcomes, lines, run_bar, bar):
            if closing is not None:
                closing.close()
    return result


def _record(store: Store, name: str, outcome: Outcome, result: SweepResult) -> bool:
    """Write one outcome (True when the store took it); if the store cannot take it (locked beyond its timeout,
    read-only, broken), keep it in the store's side file, and if that fails too, in ``result.unsaved``: a finished
    run is never dropped."""
    fields = dict(error=outcome.error, started_at=outcome.started_at, finished_at=outcome.finished_at,
                  duration=outcome.duration, host=outcome.host or None)
    try:
        store.record(name, outcome.spec.config, outcome.metrics, **fields)
        return True
    except StoreError as exc:
        result.store_error = str(exc)
    try:
        result.pending_path = store.keep_pending(name, outcome.spec.config, outcome.metrics, **fields)
        result.pending += 1
    except OSError:
        result.unsaved.append(outcome)
    return False


def _check_interval(seconds: float | None) -> None:
    """Raise unless ``seconds`` is None or a finite number of seconds, at least 0."""
    if seconds is None:
        return
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"progress_interval must be a number of seconds or None, got {type(seconds).__name__}")
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"progress_interval must be a finite number of seconds >= 0 (0: no lines), got {seconds}")


def format_seconds(seconds: float) -> str:
    """A duration for people: ``"41 s"``, ``"14 min"``, ``"3.5 h"``, ``"2.0 days"``."""
    if seconds < 90:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 48 * 3600 else f"{seconds / 86400:.1f} days"


def progress_line(done: int, total: int, failed: int, running: int, elapsed: float,
                  mean_seconds: float | None, parallel: int = 1) -> str:
    """One progress line of a sweep without a terminal: ``done`` of the ``total`` runs it runs have finished (the
    ``failed`` ones among them), ``running`` are in flight, and, once a run has finished, the time left: the runs
    not finished times the finished runs' mean time ``mean_seconds``, over the ``parallel`` runs at a time (at most
    as many as are left).

    >>> progress_line(3, 12, 1, 2, 41.0, 30.0, parallel=2)
    'progress: 3/12 runs done, 1 failed, 2 running, 41 s elapsed, about 2 min left'
    """
    text = f"progress: {done}/{total} runs done, {failed} failed, {running} running, {format_seconds(elapsed)} elapsed"
    left = total - done
    if mean_seconds is not None and left > 0:
        text += f", about {format_seconds(left * mean_seconds / max(1, min(parallel, left)))} left"
    return text


class _ProgressLines:
    """Off a terminal: a :func:`progress_line` on stderr every ``interval`` seconds, from a daemon thread, while the
    sweep runs. ``start`` and ``finish`` come from the driver (a run handed to a worker, an outcome back)."""

    def __init__(self, total: int, interval: float, parallel: int) -> None:
        self.total, self.interval, self.parallel = total, interval, parallel
        self.t0 = time.monotonic()
        self.started = self.done = self.failed = 0
        self.seconds: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="symkit-progress-lines", daemon=True)
        self._thread.start()

    def start(self) -> None:
        with self._lock:
            self.started += 1

    def finish(self, outcome: Outcome, failed: bool) -> None:
        with self._lock:
            self.done += 1
            self.failed += failed
            if not outcome.in_use:  # refused at once by another process's lock: not a run's time
                self.seconds.append(outcome.duration)

    def line(self) -> str:
        with self._lock:
            mean = statistics.fmean(self.seconds) if self.seconds else None
            running = max(0, min(self.started, self.total) - self.done)
            return progress_line(self.done, self.total, self.failed, running, time.monotonic() - self.t0, mean,
                                 self.parallel)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            print(self.line(), file=sys.stderr, flush=True)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


class _RunBar:
    """The second progress line: the run in progress and its elapsed time (local executor), or the last finished
    run (parallel executors, whose runs start in the workers). An experiment's own inner bar goes below it."""

    def __init__(self, show: bool, parallel: int | None) -> None:
        import threading

        self.parallel = parallel
        self.label, self.t0, self.last = "", time.monotonic(), ""
        self.bar = progress_bar(show=show, position=1, bar_format="{desc}")
        self.show = show
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True) if show else None
        if self._thread is not None:
            self._thread.start()

    def _text(self) -> str:
        if self.parallel is None:
            if not self.label:
                return f"  {self.last}" if self.last else ""
            return f"  run: {self.label}  [{time.monotonic() - self.t0:.0f} s]"
        return f"  {self.parallel} workers; " + (self.last or "waiting for the first run")

    def _tick(self) -> None:
        while not self._stop.wait(0.5):
            self.bar.set_description_str(self._text(), refresh=True)

    def start(self, label: str) -> None:
        self.label, self.t0 = label, time.monotonic()
        if self.show:
            self.bar.set_description_str(self._text(), refresh=True)

    def finish(self, label: str, seconds: float, failed: bool) -> None:
        self.label = ""
        self.last = f"last: {label} in {seconds:.1f} s" + (" (FAILED)" if failed else "")
        if self.show:
            self.bar.set_description_str(self._text(), refresh=True)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self.bar.close()


def summary_lines(experiment: Experiment, specs: Sequence[RunSpec], result: SweepResult,
                  store_path: object) -> list[tuple[str, bool]]:
    """What a sweep did, as ``(line, is_error)`` pairs: counts, the first failures, runs that could not be stored
    (each unsaved run in full, so nothing computed is lost), an interruption and how to resume."""
    lines = [(f"{experiment.name}: {count(result.total, 'run')} in the sweep; {result.already_ok} already stored, ran "
              f"{result.ran} ({result.failed} failed) -> {store_path}", False)]
    varying = [k for k in experiment.field_names() if len({canonical_json(s.config.get(k)) for s in specs}) > 1]
    for outcome in result.failures[:3]:
        last = (outcome.error or "").strip().splitlines()[-1:] or [""]
        lines.append((f"  failed: {outcome.spec.label(varying)}: {last[0]}", True))
    if len(result.failures) > 3:
        lines.append((f"  ... and {len(result.failures) - 3} more", True))
    if result.pending or result.unsaved:
        lines.append((f"Error: {count(result.pending + len(result.unsaved), 'finished run')} could not be written: "
                      f"{result.store_error}", True))
        if result.pending:
            lines.append((f"  {count(result.pending, 'run')} kept in {result.pending_path}, recorded the next time "
                          "the store is opened for writing (any `symkit reproduce` on it)", True))
        for outcome in result.unsaved:
            lines.append(("  unsaved run: " + canonical_json({"config": outcome.spec.config, "metrics": outcome.metrics,
                                                              "error": outcome.error}), True))
    for outcome in result.in_use[:3]:
        lines.append((f"  not run, in use by another process: {outcome.spec.label(varying)}", True))
    if result.in_use:
        lines.append((f"{count(len(result.in_use), 'run')} in training by another process, not run here (nor "
                      "stored); run the same command again once that process has ended to run any it did not "
                      "finish.", True))
    if result.interrupted:
        lines.append(("Interrupted: the finished runs are stored; run the same command again to resume.", True))
    failed = result.failed + result.already_failed
    if failed and not result.interrupted:
        lines.append((f"{count(failed, 'run')} failed (errors: `symkit runs {experiment.name} --failed`); rerun with "
                      "--retry-failed to retry.", True))
    return lines
