"""The ``symkit`` command: list, reproduce, report and inspect experiments; print the thesis rank tables; a demo.

See ``docs/cli.md`` for a tour. Every command that reads or writes results takes ``--store PATH`` (default
``runs/symkit.db``, or ``$SYMKIT_STORE``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from symkit.lab._text import count
from symkit.lab.allocator import keep_freed_memory

if TYPE_CHECKING:
    from symkit.lab.experiments.registry import Experiment
    from symkit.lab.runner.sweep import Outcome, RunSpec
    from symkit.lab.store import Store

app = typer.Typer(
    name="symkit",
    help="Reproduce the experiments of symkit, store their results, and report them with the papers' numbers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

StoreOption = Annotated[
    Path | None,
    typer.Option("--store", help="Results store (SQLite file); default runs/symkit.db or $SYMKIT_STORE.",
                 dir_okay=False),
]


def _version(value: bool) -> None:
    if value:
        from symkit import __version__

        typer.echo(f"symkit {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Reproduce the experiments of symkit, store their results, and report them with the papers' numbers."""
    keep_freed_memory()  # fewer page faults per training step (symkit.lab.allocator); a no-op off glibc


class UsageError(ValueError):
    """Bad command-line input (exit code 2)."""


def _echo_error(message: str) -> None:
    typer.echo(f"Error: {message}", err=True)


@contextmanager
def _clear_errors() -> Iterator[None]:
    """Turn the errors users can cause into one line on stderr and an exit code, never a traceback.

    Exit 2: bad input (an unknown name, a bad setting, ``ValueError`` from symkit's checks of arguments and
    configs, ``OSError`` from a path that cannot be written). Exit 1: an unusable results store (``StoreError``).
    Anything else is a bug and keeps its traceback; ``SYMKIT_DEBUG=1`` shows the traceback of every error."""
    import os

    from symkit.lab.runner.sweep import SweepError
    from symkit.lab.store import StoreError

    if os.environ.get("SYMKIT_DEBUG", "0") not in ("", "0"):
        yield
        return
    try:
        yield
    except KeyError as exc:  # unknown experiment name: the message lists the valid ones
        _echo_error(exc.args[0] if exc.args else str(exc))
        raise typer.Exit(2) from None
    except StoreError as exc:
        _echo_error(str(exc))
        raise typer.Exit(1) from None
    except (UsageError, SweepError, ValueError) as exc:
        _echo_error(" ".join(str(exc).split()))
        raise typer.Exit(2) from None
    except OSError as exc:
        where = f" {exc.filename!r}" if exc.filename else ""
        _echo_error(f"cannot use{where}: {exc.strerror or exc}")
        raise typer.Exit(2) from None


def _open_store(path: Path | None, create: bool = True) -> Store:
    """The store to write runs to, checked before anything runs (writable, not corrupt, not locked for long)."""
    from symkit.lab.store import Store

    db = Store(path, create=create)
    db.preflight()
    return db


def _read_store(path: Path | None) -> Store:
    """The store opened read-only (``runs``, ``report``): works on a read-only file and never creates one."""
    from symkit.lab.store import Store

    return Store(path, create=False, readonly=True)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM like Ctrl-C while a sweep runs, so worker processes are stopped before exiting."""
    import signal

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def parse_duration(option: str, text: str) -> float:
    """Seconds of a duration such as ``90``, ``90s``, ``45m``, ``2h`` or ``2h30m`` (a positive number)."""
    import re

    match = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not text.strip() or match is None:
        raise UsageError(f"{option} {text!r}: expected a duration such as 90s, 45m, 2h or 2h30m")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    total = 3600 * hours + 60 * minutes + seconds
    if not total > 0:
        raise UsageError(f"{option} {text!r}: the duration must be above zero")
    return total


class _Limit:
    """Whether :func:`_stop_after`'s time limit was reached."""

    reached = False


@contextmanager
def _stop_after(seconds: float | None) -> Iterator[_Limit]:
    """After ``seconds``, send this process SIGTERM, which a sweep takes as a stop (:func:`_sigterm_as_interrupt`;
    runs that checkpoint save first, :mod:`symkit._stopping`); the timer is cancelled when the block ends."""
    import os
    import signal
    import threading
    import time

    limit = _Limit()
    if seconds is None:
        yield limit
        return
    lock = threading.Lock()
    done = False

    def stop() -> None:
        with lock:
            if not done:
                limit.reached = True
                os.kill(os.getpid(), signal.SIGTERM)

    timer = threading.Timer(seconds, stop)
    timer.daemon = True
    typer.echo(f"symkit: stopping at {time.strftime('%H:%M', time.localtime(time.time() + seconds))} "
               f"(--time-limit {_ago(seconds)})", err=True)
    timer.start()
    try:
        yield limit
    finally:
        with lock:
            done = True
        timer.cancel()


@app.command("list")
def list_command(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Also show config fields and sweeps.")] = False,
) -> None:
    """Every experiment with its one-line description and the paper result it reproduces."""
    from symkit.lab.experiments.registry import all_experiments, broken_modules
    from symkit.lab.runner.report import paper_summary

    experiments = all_experiments()
    if not experiments:
        typer.echo("No experiments are registered.")
    width = max((len(n) for n in experiments), default=0)
    for name, exp in experiments.items():
        typer.echo(f"{name.ljust(width)}  {exp.description}")
        typer.echo(f"{''.ljust(width)}  reproduces: {exp.reproduces}")
        if exp.paper:
            typer.echo(f"{''.ljust(width)}  paper values: {paper_summary(exp.paper)}")
        if verbose:
            typer.echo(f"{''.ljust(width)}  settings: {', '.join(exp.field_names())}")
            sizes = ", ".join(f"{len(exp.grid(scale=scale))} ({scale})" for scale in ("default", "paper", "quick"))
            typer.echo(f"{''.ljust(width)}  runs: {sizes}")
    for module, error in broken_modules().items():
        typer.echo(f"warning: experiment module {module} failed to import: {error}", err=True)


@app.command()
def reproduce(
    name: Annotated[str, typer.Argument(help="Experiment name (see `symkit list`).")],
    quick: Annotated[bool, typer.Option("--quick", help="The small CI-sized setup and sweep (--scale quick).")] = False,
    scale: Annotated[str | None, typer.Option(
        "--scale", help="quick (CI size), default (the paper's setup as two CPU cores allow) or paper (the paper's "
        "data, sizes and epochs; real data sets from --data-dir).")] = None,
    seeds: Annotated[str | None, typer.Option("--seeds", help="Seeds to run, e.g. '0,1,2' or '0-4'.")] = None,
    settings: Annotated[list[str] | None, typer.Option(
        "--set", help="Override a config field for every run: key=value (repeatable).")] = None,
    sweeps: Annotated[list[str] | None, typer.Option(
        "--sweep", help="Sweep a config field over values: key=v1,v2,... (repeatable).")] = None,
    executor: Annotated[str, typer.Option("--executor", "-e", help="local, process or ray.")] = "local",
    ray_address: Annotated[str | None, typer.Option(
        "--ray-address", help="Ray cluster address (default: start a local Ray instance).")] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Parallel runs (process and ray executors).")] = 2,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Run again the runs that failed.")] = False,
    data_dir: Annotated[str | None, typer.Option(
        "--data-dir", envvar="SYMKIT_DATA", help="Folder with the data files (MNIST, CIFAR-10, an image folder); "
        "never downloaded.")] = None,
    device: Annotated[str, typer.Option("--device", help="cpu, cuda, cuda:N or mps (one GPU per run).")] = "cpu",
    precision: Annotated[str, typer.Option(
        "--precision", help="32, or bf16 (bfloat16 autocast in training steps).")] = "32",
    compile_networks: Annotated[bool, typer.Option(
        "--compile", help="torch.compile the networks where the experiment allows it (rl-sac: about 15% faster "
        "updates on the CPU, a minute or two of compiling per process; needs a C++ compiler).")] = False,
    smoke: Annotated[bool, typer.Option(
        "--smoke", help="Check the set-up: run the first planned run for one epoch of two batches, print its "
        "metrics, store nothing.")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="List the planned runs and what the sweep would do with each (done, failed, to run, from "
        "a checkpoint); run nothing.")] = False,
    time_limit: Annotated[str | None, typer.Option(
        "--time-limit", help="Stop the sweep after this long (90s, 45m, 2h, 2h30m), as SIGTERM stops it: runs that "
        "checkpoint (rl-sac) save where they stand; exit 124. The same command carries on.")] = None,
    archive: Annotated[Path | None, typer.Option(
        "--archive", help="Keep the experiment's finished runs in this runs archive (.jsonl, as `symkit export` "
        "writes it) as well, updated after every finished run, so that no finished run is lost with the machine.",
        dir_okay=False)] = None,
    store: StoreOption = None,
) -> None:
    """Run an experiment's sweep, recording every run in the store; only missing runs are run again."""
    from symkit.lab import runtime
    from symkit.lab.experiments.registry import get_experiment
    from symkit.lab.runner.sweep import parse_assignments, parse_seeds, plan

    with _clear_errors():
        exp = get_experiment(name)
        limits = {"max_epochs": 1, "max_batches": 2} if smoke else {}
        run_settings = runtime.RunSettings(device=device, data_dir=data_dir or None, precision=precision,
                                           compile=compile_networks, **limits).check()
        if executor not in ("local", "process", "ray"):
            raise UsageError(f"unknown executor {executor!r}; valid executors: local, process, ray")
        overrides = parse_assignments(exp, settings or [], "--set")
        swept = parse_assignments(exp, sweeps or [], "--sweep")
        both = sorted(set(overrides) & set(swept))
        if both:
            raise UsageError(f"{', '.join(both)} given with both --set and --sweep; use one of them per setting")
        overrides.update(swept)
        limit = parse_duration("--time-limit", time_limit) if time_limit is not None else None
        with runtime.using(run_settings):  # configs that check their data files look in --data-dir
            specs = plan(exp, quick=quick, scale=scale, seeds=parse_seeds(seeds) if seeds else None,
                         settings=overrides, run_settings=run_settings)
        if smoke:
            _smoke(specs[0])
            return
        if dry_run:
            _print_plan(exp, specs, store, retry_failed, jobs=1 if executor == "local" else jobs)
            return
        keeper = _ArchiveKeeper(archive, exp.name) if archive is not None else None  # a bad archive: before any run
        db = _open_store(store)
        if keeper is not None:
            keeper.update(db)  # the runs already finished, before any new one
        try:
            _run_and_summarise(exp, specs, db, executor, jobs, ray_address, retry_failed, time_limit=limit,
                               on_finished=None if keeper is None else lambda _: keeper.update(db))
        finally:  # also when the sweep stops early (time limit, Ctrl-C, failed runs)
            if keeper is not None:
                keeper.summary()


class _ArchiveKeeper:
    """``reproduce --archive FILE``: adds the experiment's finished runs in the store to the runs archive ``FILE``
    (:func:`symkit.lab.store.archive.export_runs`) at the start and after each finished run. An archive that cannot be
    read is an error before anything runs; one that cannot be written later is a warning (the runs are stored)."""

    def __init__(self, path: Path, experiment: str) -> None:
        from symkit.lab.store.archive import read_archive

        self.path, self.experiment, self.total, self.added = path, experiment, 0, 0
        if path.exists():
            self.total = len(read_archive(path))  # ValueError naming the bad line

    def update(self, db: Store) -> None:
        from symkit.lab.store.archive import export_runs

        try:
            self.total, added = export_runs(db, self.experiment, self.path)
        except (OSError, ValueError) as exc:
            if isinstance(exc, ValueError) and not db.runs(self.experiment, status="ok"):
                return  # nothing finished yet, so nothing to add (export_runs refuses an empty export)
            typer.echo(f"warning: --archive {self.path}: not written ({exc}); the runs are in {db.path}", err=True)
            return
        self.added += added

    def summary(self) -> None:
        """The archive's size as it is now: another sweep may have added runs to it since this one's last update."""
        from symkit.lab.store.archive import read_archive

        try:
            self.total = len(read_archive(self.path))
        except (OSError, ValueError):
            pass  # unreadable now: the last count this sweep saw
        typer.echo(f"{self.path}: {count(self.total, 'run')} of {self.experiment} ({self.added} added)")


def _print_plan(exp: Experiment, specs: list[RunSpec], store: Path | None, retry_failed: bool,
                jobs: int = 1) -> None:
    """``--dry-run``: each planned run, in the sweep's order, with what the sweep would do with it, the counts, and
    an estimate of the time the runs to run take (:func:`~symkit.lab.runner.sweep.estimate_seconds`, ``jobs`` at a
    time). The store is read, never created; a run that checkpointed shows how far it got
    (``Experiment.unfinished``) and counts for the part it has left."""
    from symkit.lab.runner.sweep import estimate_line, estimate_seconds, planned_states, varying_fields
    from symkit.lab.store.db import default_store_path

    path = store if store is not None else default_store_path()
    stored: dict = {}
    records: list = []
    if path.exists():
        with _read_store(path) as db:
            stored = db.status_of(exp.name)
            records = db.runs(exp.name, status="ok")
    progress = {key: u for key, (_, u) in _checkpointed(exp).items()}
    varying = varying_fields(specs)
    counts: dict[str, int] = {}
    resumed = 0
    to_run: list[RunSpec] = []
    left: dict[tuple[str, int], float] = {}
    for spec, state in planned_states(specs, stored, retry_failed):
        detail = ""
        u = progress.get((spec.config_hash, spec.seed))
        if state == "to run" and u is not None:
            note = f", {u.note}" if u.note else ""
            detail = f"  [{u.done} of {u.total} {u.unit}{note}"
            if u.holder is None:
                resumed += 1
                detail += ": goes on from its checkpoint]"
                if u.total > 0:
                    left[(spec.config_hash, spec.seed)] = (u.total - u.done) / u.total
            else:  # the sweep leaves it to that process (RunInUse)
                state = "in use"
                detail += f": training now (pid {u.holder}), left to that process]"
        elif state == "failed":
            detail = "  [skipped: --retry-failed runs it again]"
        if state == "to run":
            to_run.append(spec)
        counts[state] = counts.get(state, 0) + 1
        typer.echo(f"{state:7} {spec.label(varying)}{detail}")
    typer.echo(f"{count(len(specs), 'run')} planned: {counts.get('done', 0)} done, {counts.get('to run', 0)} to run "
               f"({resumed} from a checkpoint), {counts.get('in use', 0)} in use by another process, "
               f"{counts.get('failed', 0)} failed; store {path}. Nothing was run (--dry-run).")
    line = estimate_line(estimate_seconds(exp, to_run, records, jobs=jobs, left=left))
    if line:
        typer.echo(line)


def _smoke(spec: RunSpec) -> None:
    """Run ``spec`` here under the smoke limits and print its metrics (or its error); nothing is stored."""
    import os

    from symkit.lab.runner.sweep import execute

    typer.echo(f"smoke run of {spec.experiment} ({spec.label()}); not stored", err=True)
    outcome = execute(spec)
    if outcome.error is not None:  # one line, as a sweep's summary names a failed run; the traceback on request
        if os.environ.get("SYMKIT_DEBUG", "0") not in ("", "0"):
            typer.echo(outcome.error.rstrip(), err=True)
        last = (outcome.error.strip().splitlines() or [""])[-1]
        _echo_error(f"the smoke run of {spec.experiment} ({spec.label()}) failed: {last} (SYMKIT_DEBUG=1 shows "
                    "the traceback)")
        raise typer.Exit(1)
    for key, value in (outcome.metrics or {}).items():
        typer.echo(f"{key}: {value}")
    typer.echo(f"ok in {outcome.duration:.1f} s", err=True)


def _progress_interval() -> float | None:
    """Seconds between a sweep's progress lines off a terminal: ``$SYMKIT_PROGRESS_INTERVAL`` (a duration such as
    ``30``, ``90s`` or ``2m``; ``0``: no lines), 30 s when unset."""
    import os

    text = os.environ.get("SYMKIT_PROGRESS_INTERVAL", "").strip()
    if not text:
        return 30.0
    if text in ("0", "0s"):
        return None
    return parse_duration("SYMKIT_PROGRESS_INTERVAL", text)


def _run_and_summarise(
    exp: Experiment,
    specs: list[RunSpec],
    db: Store,
    executor: str,
    jobs: int,
    ray_address: str | None,
    retry_failed: bool,
    exit_on_failure: bool = True,
    time_limit: float | None = None,
    on_finished: Callable[[Outcome], None] | None = None,
) -> int:
    """Run the sweep, print what happened; exit 130 when interrupted, 124 when stopped by ``time_limit`` (seconds),
    and 1 on failed runs (unless told not to). Returns the number of failed runs. ``on_finished`` goes to
    :func:`~symkit.lab.runner.sweep.run_sweep`."""
    from symkit.lab.runner.sweep import run_sweep, summary_lines

    interval = _progress_interval()
    result = limit = None
    try:
        with _sigterm_as_interrupt(), _stop_after(time_limit) as limit:
            result = run_sweep(exp, specs, db, executor=executor, jobs=jobs, ray_address=ray_address,
                               retry_failed=retry_failed, on_finished=on_finished, progress_interval=interval)
    except KeyboardInterrupt:
        if result is None:  # outside the sweep's own handling (a second Ctrl-C while it stopped, say)
            if limit is not None and limit.reached:
                typer.echo(f"Stopped at the time limit ({_ago(time_limit)}): the finished runs are stored; run the "
                           "same command to carry on.", err=True)
                raise typer.Exit(124) from None
            typer.echo("Interrupted: the finished runs are stored; run the same command again to resume.", err=True)
            raise typer.Exit(130) from None
        # the limit's signal arrived just as the sweep ended: nothing was interrupted
    for line, is_error in summary_lines(exp, specs, result, db.path):
        typer.echo(line, err=is_error)
    if result.interrupted and limit.reached:
        typer.echo(f"Stopped at the time limit ({_ago(time_limit)}): runs that checkpoint saved where they stood; "
                   "run the same command to carry on.", err=True)
        raise typer.Exit(124)
    if result.interrupted:
        raise typer.Exit(130)
    if result.pending or result.unsaved:
        raise typer.Exit(1)
    failed = result.failed + result.already_failed
    if failed and exit_on_failure:
        raise typer.Exit(1)
    return failed


@app.command()
def report(
    name: Annotated[str | None, typer.Argument(help="Experiment name (see `symkit list`); none with --docs.")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="md (markdown) or csv.")] = "md",
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Directory for the report file and plots (default runs/reports/NAME).", file_okay=False,
    )] = None,
    store: StoreOption = None,
    seeds: Annotated[str | None, typer.Option(
        "--seeds", help="Only the runs of these seeds, e.g. '7-10' (a batch fixed in advance, read on its own).",
    )] = None,
    where: Annotated[list[str] | None, typer.Option(
        "--where", help="Only the runs with this setting: key=value (repeatable; a key given twice allows either "
                        "value).",
    )] = None,
    docs: Annotated[bool, typer.Option(
        "--docs", help="Rewrite every marked table in README.md and docs/*.md, and docs/reproductions.md, from the "
                       "store's runs (import results/*.jsonl first).",
    )] = False,
    check: Annotated[bool, typer.Option(
        "--check", help="With --docs: change nothing; print a diff and exit 1 when a generated table is stale.",
    )] = False,
    root: Annotated[Path, typer.Option(
        "--root", help="With --docs: the folder holding README.md and docs/ (default: the current folder).",
        file_okay=False,
    )] = Path("."),
) -> None:
    """Aggregate an experiment's stored runs over seeds: a table beside the paper's numbers, and its plots. With
    --docs, write the docs' generated tables and docs/reproductions.md from the stored runs instead."""
    from symkit.lab.experiments.registry import get_experiment

    with _clear_errors():
        if docs:
            if name is not None or out is not None or seeds is not None or where or fmt != "md":
                raise UsageError("--docs writes every generated table at once: give no experiment NAME, --out, "
                                 "--seeds, --where or --format with it")
            _report_docs(store, root, check)
            return
        if check:
            raise UsageError("--check goes with --docs (`symkit report --docs --check`)")
        if name is None:
            raise UsageError("missing experiment NAME (see `symkit list`), or --docs for the docs' tables")
        if fmt not in ("md", "csv"):
            raise UsageError(f"unknown report format {fmt!r}; valid formats: md, csv")
        exp = get_experiment(name)
        db = _read_store(store)
        from symkit.lab.runner.report import write_report
        from symkit.lab.runner.sweep import parse_seeds

        chosen = parse_seeds(seeds) if seeds is not None else None
        text, paths = write_report(exp, db, out if out is not None else Path("runs") / "reports" / name, fmt, chosen,
                                   where or ())
        typer.echo(text, nl=False)
        for path in paths:
            typer.echo(f"wrote {path}", err=True)


def _report_docs(store: Path | None, root: Path, check: bool) -> None:
    """``symkit report --docs [--check]``: rewrite (or check) the generated tables and docs/reproductions.md."""
    from symkit.lab.runner.docs_tables import refresh_docs

    if not root.is_dir():
        raise UsageError(f"--root {str(root)!r} is not a folder; expected the one holding README.md and docs/")
    db = _read_store(store)
    changes = refresh_docs(root, db, check=check)
    for change in changes:
        where = change.path.relative_to(root) if change.path.is_relative_to(root) else change.path
        if check:
            typer.echo(change.diff(root), nl=False)
            typer.echo(f"{where}: out of date ({', '.join(change.what)})", err=True)
        else:
            typer.echo(f"rewrote {where} ({', '.join(change.what)})", err=True)
    if check and changes:
        typer.echo(f"{count(len(changes), 'generated file')} out of date; `symkit import results/*.jsonl` into a "
                   "store, then `symkit report --docs` rewrites them", err=True)
        raise typer.Exit(1)
    if not changes:
        typer.echo("the generated tables and docs/reproductions.md are current", err=True)


@app.command()
def runs(
    name: Annotated[str | None, typer.Argument(help="Experiment name (none: a summary of the store).")] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only failed runs, with their errors.")] = False,
    store: StoreOption = None,
) -> None:
    """The stored runs of an experiment: config, seed, status, time (and the error of failed runs); then its runs
    that checkpointed and have not finished, how far each got and whether it is training now."""
    with _clear_errors():
        db = _read_store(store)
        if name is None:
            counts = db.counts()
            typer.echo(f"{db.path}: {count(sum(sum(c.values()) for c in counts.values()), 'run')}")
            for experiment, by_status in counts.items():
                typer.echo(f"  {experiment}: " + ", ".join(f"{n} {status}" for status, n in sorted(by_status.items())))
            return
        records = db.runs(name, status="failed" if failed else None)
        pending = [] if failed else _unfinished(name, db)
        if not records and not pending:
            known = ", ".join(db.counts()) or "(none)"
            typer.echo(f"No {'failed ' if failed else ''}runs of {name!r} in {db.path} (experiments stored: {known}).")
            return
        rows = [(f"{r.status:6}", r.config, f"{r.duration:.1f}s, {r.finished_at}, attempts {r.attempts}",
                 r.error if failed else None) for r in records]
        rows += [("unfinished", config, state, None) for config, state in pending]
        shared = _shared_settings([config for _, config, _, _ in rows])
        if len(rows) > 1 and shared:
            typer.echo("Settings shared by every run listed: " + ", ".join(f"{k}={v}" for k, v in shared.items()))
        for status, config, state, error in rows:
            own = [f"{k}={v}" for k, v in config.items() if k != "seed" and (len(rows) == 1 or k not in shared)]
            typer.echo(f"{status} seed={config.get('seed')}" + (" " + ", ".join(own) if own else "") + f"  [{state}]")
            if error:
                typer.echo("    " + "\n    ".join(error.strip().splitlines()))


def _shared_settings(configs: list[dict]) -> dict:
    """The settings (all but the seed) that every config has, with the same value, compared as canonical JSON (as
    ``symkit report`` compares them, :func:`symkit.lab.runner.report.varying_keys`)."""
    from symkit.lab.store.db import canonical_json

    first, rest = configs[0], configs[1:]
    return {k: v for k, v in first.items()
            if k != "seed" and all(k in c and canonical_json(c[k]) == canonical_json(v) for c in rest)}


def _ago(seconds: float) -> str:
    """``"40 s"``, ``"12 min"``, ``"3.5 h"``, ``"2.0 days"`` (:func:`symkit.lab.runner.sweep.format_seconds`, imported
    when needed: the command starts without the runner)."""
    from symkit.lab.runner.sweep import format_seconds

    return format_seconds(seconds)


def _checkpointed(exp: Experiment) -> dict[tuple[str, Any], tuple[dict, Any]]:
    """The runs of ``exp`` that saved progress without finishing (``Experiment.unfinished``), keyed as the store
    keys runs, ``(config_hash, seed)``, each with its identifying config and its progress."""
    from symkit.lab.store.db import config_hash

    out = {}
    for u in exp.unfinished() if exp.unfinished is not None else []:
        values = exp.identity(u.config)
        out[(config_hash(values), values.get("seed"))] = (values, u)
    return out


def _unfinished(name: str, db: Store) -> list[tuple[dict, str]]:
    """``(config, state)`` of each run of ``name`` that saved progress without finishing (``Experiment.unfinished``)
    and has no finished run in ``db``: how far it got, when it saved, and whether a process is training it now."""
    import time

    from symkit.lab.experiments.registry import get_experiment

    try:
        exp = get_experiment(name)
    except KeyError:  # runs stored by an experiment this install does not have
        return []
    finished = {key for key, status in db.status_of(name).items() if status == "ok"}
    out = []
    for key, (values, u) in _checkpointed(exp).items():
        if key in finished:
            continue
        state = "stopped: the same command carries it on" if u.holder is None else (
            f"training now (pid {u.holder})" if u.holder > 0 else "training now")
        note = f", {u.note}" if u.note else ""
        out.append((values, f"{u.done} of {u.total} {u.unit}{note}, saved {_ago(time.time() - u.saved_at)} ago, "
                            f"{state}"))
    return out


@app.command("export")
def export_command(
    name: Annotated[str, typer.Argument(help="Experiment name (see `symkit list`).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The runs archive (.jsonl) to write or add to.",
                                      dir_okay=False)],
    store: StoreOption = None,
) -> None:
    """Add an experiment's finished runs to a runs archive (JSON lines) to keep beside the code."""
    from symkit.lab.experiments.registry import get_experiment
    from symkit.lab.store.archive import export_runs

    with _clear_errors():
        get_experiment(name)
        db = _read_store(store)
        total, added = export_runs(db, name, out)
        typer.echo(f"{out}: {count(total, 'run')} of {name} ({added} added from {db.path})")


@app.command("import")
def import_command(
    archives: Annotated[list[Path], typer.Argument(help="Runs archives written by `symkit export`.",
                                                   dir_okay=False)],
    store: StoreOption = None,
) -> None:
    """Record the runs of runs archives into the store, where report aggregates them and reproduce skips them."""
    from symkit.lab.runner.sweep import check_archived_run
    from symkit.lab.store.archive import import_archives

    with _clear_errors():
        db = _open_store(store)
        # every line of every archive checked (its experiment's config included), then all recorded at once
        for archive, (recorded, kept) in zip(archives, import_archives(db, archives, check=check_archived_run)):
            typer.echo(f"{archive}: {count(recorded, 'run')} recorded into {db.path}, {kept} already there")


@app.command()
def ranks(
    group: Annotated[str | None, typer.Option("--group", "-g", help="Only the cells of this group, e.g. 'SO(3)'.")]
    = None,
    max_rank: Annotated[int | None, typer.Option("--max-rank", "-k", help="Only tensors of order at most K.")]
    = None,
    quick: Annotated[bool, typer.Option("--quick", help="Only the cells that take seconds.")] = False,
    all_cells: Annotated[bool, typer.Option("--all", help="Every cell, including those the thesis left blank.")]
    = False,
    executor: Annotated[str, typer.Option("--executor", "-e", help="local, process or ray.")] = "local",
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Parallel runs (process and ray executors).")] = 2,
    store: StoreOption = None,
) -> None:
    """Print the thesis' rank tables (A.1-A.8) as computed here, with the thesis value beside each cell."""
    from symkit.lab.experiments.registry import get_experiment
    from symkit.lab.runner.sweep import plan

    with _clear_errors():
        if quick and all_cells:
            raise UsageError("choose one of --quick and --all")
        try:
            from symkit.lab.experiments import ranks as ranks_module
        except ImportError as exc:
            raise UsageError(f"the rank tables are not available: {exc}") from None
        exp = get_experiment("ranks")
        tier = "quick" if quick else "all" if all_cells else "full"
        points = ranks_module.select_points(tier=tier, group=group, max_rank=max_rank)
        specs = plan(exp, points=points)
        db = _open_store(store)
        _run_and_summarise(exp, specs, db, executor, jobs, None, retry_failed=False, exit_on_failure=False)
        typer.echo(ranks_module.tables_from_records(db.runs("ranks"), points))


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="Where the demo writes its store and reports.",
                                      file_okay=False)] = Path("runs") / "demo",
    experiments: Annotated[str | None, typer.Option(
        "--experiments", help="Comma-separated experiments to run (default: the demo list).")] = None,
    executor: Annotated[str, typer.Option("--executor", "-e", help="local, process or ray.")] = "process",
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Parallel runs.")] = 2,
    fresh: Annotated[bool, typer.Option("--fresh", help="Start from an empty demo store.")] = False,
) -> None:
    """A short tour: run quick experiments end to end and write their reports (with plots) under --out."""
    from symkit.lab.runner.demo import run_demo

    with _clear_errors():
        names = [n.strip() for n in experiments.split(",") if n.strip()] if experiments else None
        try:
            with _sigterm_as_interrupt():
                run_demo(out, names, executor=executor, jobs=jobs, fresh=fresh, echo=typer.echo)
        except KeyboardInterrupt:
            raise typer.Exit(130) from None


def main() -> None:  # pragma: no cover - console entry alternative
    """Run the command line (``python -m symkit.lab.cli``)."""
    app(prog_name="symkit")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
