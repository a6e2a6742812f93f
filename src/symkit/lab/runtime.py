"""Where and how a run executes: the device, the folder of the user's data files, the numeric precision, whether
networks are compiled, and the limits of a smoke run. None of these change *what* an experiment computes, so none
is part of its config (nor of the config hash that identifies a run in the results store); they are set around a
run with :func:`using` and read inside it with :func:`current`.

>>> from symkit.lab import runtime
>>> with runtime.using(runtime.RunSettings(device="cpu", data_dir=None)):
...     runtime.current().device
'cpu'

``symkit reproduce`` sets them from ``--device``, ``--data-dir`` (or ``$SYMKIT_DATA``), ``--precision``,
``--compile`` and ``--smoke``, and sends them with every run to the worker processes or Ray tasks.

A smoke run (``max_epochs`` / ``max_batches``) checks that a set-up works end to end (data found, model built on the
device, one short epoch trained); the trainers and training loops of symkit stop early under it, and its metrics are
never stored as results.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["PRECISIONS", "RunSettings", "autocast", "compile_module", "current", "data_dir", "device", "epochs",
           "limit_batches", "trainer_settings", "using"]

#: float32, or bfloat16 autocast (no loss scaling needed, unlike float16, which symkit therefore does not offer)
PRECISIONS = ("32", "bf16")
T_ = TypeVar("T_")


@dataclass(frozen=True)
class RunSettings:
    """``device``: a torch device string (``cpu``, ``cuda``, ``cuda:1``, ``mps``); ``data_dir``: the folder with the
    user's data files (None: ``$SYMKIT_DATA``); ``precision``: ``32`` (float32) or ``bf16`` (bfloat16 autocast where a
    method allows it, see :func:`autocast`); ``compile``: ``torch.compile`` the networks where a method allows it
    (rl-sac's SAC networks; the same functions, with float rounding of fused kernels); ``max_epochs`` /
    ``max_batches``: the limits of a smoke run (None: no limit)."""

    device: str = "cpu"
    data_dir: str | None = None
    precision: str = "32"
    max_epochs: int | None = None
    max_batches: int | None = None
    compile: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.device, str) or not self.device:
            raise ValueError(f"device must be a torch device name such as 'cpu', 'cuda' or 'mps', got {self.device!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        for name in ("max_epochs", "max_batches"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
        if not isinstance(self.compile, bool):
            raise ValueError(f"compile must be True or False, got {self.compile!r}")
        if self.data_dir is not None and not isinstance(self.data_dir, str):
            raise ValueError(f"data_dir must be a path given as text, got {type(self.data_dir).__name__}")

    @property
    def smoke(self) -> bool:
        """Whether this is a smoke run (its metrics are not results)."""
        return self.max_epochs is not None or self.max_batches is not None

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain values (sent to worker processes with each run)."""
        return dataclasses.asdict(self)

    def check(self) -> RunSettings:
        """Raise ``ValueError`` when the device is not available on this machine or the data folder does not exist;
        return the settings unchanged otherwise (called by the command before any run starts)."""
        check_device(self.device)
        if self.compile and self.device.split(":")[0] == "cpu" and not _cpp_compiler():
            raise ValueError("compile: torch.compile builds C++ kernels for the CPU and no C++ compiler was found "
                             "(none of $CXX, c++, g++, clang++ is on PATH); install one or leave out --compile")
        if self.data_dir is not None and not Path(self.data_dir).is_dir():
            raise ValueError(f"data directory {self.data_dir!r} does not exist or is not a folder")
        return self


_DEFAULT = RunSettings()
_CURRENT: contextvars.ContextVar[RunSettings | None] = contextvars.ContextVar("symkit_run_settings", default=None)


def current() -> RunSettings:
    """The settings of the run in progress (the defaults, ``cpu`` and no limits, outside :func:`using`)."""
    return _CURRENT.get() or _DEFAULT


@contextlib.contextmanager
def using(settings: RunSettings) -> Iterator[RunSettings]:
    """Make ``settings`` the current ones inside the ``with`` block."""
    if not isinstance(settings, RunSettings):
        raise TypeError(f"using() takes RunSettings, got {type(settings).__name__}")
    token = _CURRENT.set(settings)
    try:
        yield settings
    finally:
        _CURRENT.reset(token)


def _cpp_compiler() -> str | None:
    """The C++ compiler torch.compile would use on the CPU, or None."""
    import shutil

    names = [os.environ["CXX"]] if os.environ.get("CXX") else []
    return next((path for path in map(shutil.which, [*names, "c++", "g++", "clang++"]) if path), None)


def check_device(name: str) -> None:
    """Raise ``ValueError`` naming the device when torch cannot use it here (no CUDA build, no GPU of that index,
    no MPS) or a run cannot compute on it (``meta``)."""
    import torch

    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device {name!r} is not a torch device name ({exc}); use cpu, cuda, cuda:N or mps") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r}: this torch build or machine has no CUDA GPU; use --device cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s)")
    elif dev.type == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise ValueError(f"device {name!r}: MPS is not available on this machine; use --device cpu")
    elif dev.type == "meta":
        raise ValueError(f"device {name!r}: torch's meta device holds shapes, not values, so a run computes nothing "
                         "there; use cpu, cuda, cuda:N or mps")
    elif dev.type != "cpu":
        raise ValueError(f"device {name!r}: symkit runs on cpu, cuda or mps")


def device() -> Any:
    """The current run's device as a ``torch.device``."""
    import torch

    return torch.device(current().device)


def data_dir() -> str | None:
    """The current run's data folder, else ``$SYMKIT_DATA``, else None."""
    return current().data_dir or os.environ.get("SYMKIT_DATA") or None


def epochs(n: int) -> int:
    """``n`` epochs (or outer steps), cut to the smoke run's ``max_epochs``."""
    limit = current().max_epochs
    return n if limit is None else min(n, limit)


def limit_batches(batches: Iterable[T_]) -> Iterator[T_]:
    """The batches of one epoch, cut to the smoke run's ``max_batches``."""
    limit = current().max_batches
    for i, batch in enumerate(batches):
        if limit is not None and i >= limit:
            return
        yield batch


def trainer_settings() -> dict[str, Any]:
    """The current run's precision and smoke limits as :class:`symkit.train.Trainer` keywords (``precision``,
    ``max_epochs``, ``max_batches``): how an experiment hands the command's settings to the library."""
    s = current()
    return {"precision": s.precision, "max_epochs": s.max_epochs, "max_batches": s.max_batches}


def autocast(device_type: str | None = None) -> contextlib.AbstractContextManager:
    """``torch.autocast`` to bfloat16 when the current precision is ``bf16`` for the forward pass of methods that allow
    mixed precision (plain training steps); a no-op context at ``32``. Exact computations (bases, curvature,
    marginal likelihoods, Lie derivatives) never use it."""
    import torch

    precision = current().precision
    if precision == "32":
        return contextlib.nullcontext()
    kind = device_type or torch.device(current().device).type
    return torch.autocast(device_type=kind, dtype=torch.bfloat16)


def compile_module(module: Any) -> Any:
    """``module.compile()`` (in place: its state dict keeps its keys, so checkpoints load either way) when the current
    settings ask for compiled networks; the module unchanged otherwise. Returns the module."""
    if current().compile:
        module.compile()
    return module
