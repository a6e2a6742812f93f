"""What every benchmark shares: the ``--device`` option (and ``--precision`` where a benchmark's method allows mixed
precision), the check that the device exists, and the synchronisation that makes timings on a GPU honest.

The benchmarks run as scripts, so their folder is on ``sys.path`` and they ``import benchcommon``. A timing loop
calls :func:`synchronize` before it starts the clock and again before it stops it: CUDA and MPS run kernels
asynchronously, and without it a loop would time the launches, not the work. On the CPU it does nothing.

>>> import argparse
>>> parser = argparse.ArgumentParser()
>>> add_device_option(parser, precision=True)
>>> args = parser.parse_args(["--device", "cpu"])
>>> device_of(args), args.precision
(device(type='cpu'), '32')
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from typing import Any

import torch

from symkit import runtime

__all__ = ["MemoryRise", "add_device_option", "describe", "device_of", "has_float64", "settings", "synchronize"]

DEVICE_HELP = "torch device to run on: cpu (default), cuda, cuda:N or mps"


def add_device_option(parser: argparse.ArgumentParser, *, precision: bool = False, cpu_only: str | None = None) -> None:
    """Add ``--device`` (default ``cpu``) to ``parser``, and ``--precision 32|bf16`` when ``precision`` (the benchmark
    times plain forward passes or training steps, which may run under bfloat16 autocast). ``cpu_only`` names the
    work that stays on the CPU whatever the device (numpy or scipy float64 code); it is added to the help."""
    text = DEVICE_HELP
    if cpu_only:
        text += f"; {cpu_only} runs on the CPU whatever the device"
    parser.add_argument("--device", default="cpu", help=text)
    if precision:
        parser.add_argument("--precision", default="32", choices=runtime.PRECISIONS,
                            help="32: float32; bf16: bfloat16 autocast of the timed forward passes (symkit.runtime)")


def device_of(args: argparse.Namespace) -> torch.device:
    """The ``torch.device`` of ``args.device``; when this machine has no such device, print one line naming it on
    stderr and exit with status 2 (as argparse does for a bad option)."""
    name = args.device
    try:
        runtime.check_device(name)
        if torch.device(name).type not in ("cpu", "cuda", "mps"):
            raise ValueError(f"device {name!r}: the benchmarks run on cpu, cuda or mps")
    except ValueError as exc:
        print(f"{os.path.basename(sys.argv[0])}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    return torch.device(name)


def settings(args: argparse.Namespace) -> runtime.RunSettings:
    """The run settings of ``args`` (device, and precision when the benchmark has the option), for
    ``runtime.using``: code of symkit that reads ``runtime.device()`` or ``runtime.autocast()`` follows them."""
    return runtime.RunSettings(device=args.device, precision=getattr(args, "precision", "32"))


def synchronize(device: Any) -> None:
    """Wait for the work queued on ``device`` (CUDA or MPS) to finish; nothing on the CPU."""
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        torch.mps.synchronize()


def has_float64(device: Any) -> bool:
    """Whether ``device`` computes in float64 (MPS does not)."""
    return torch.device(device).type != "mps"


def describe(device: Any, precision: str | None = None) -> str:
    """The device for a table's header: ``cpu``, ``cuda:0 (GPU name)`` or ``mps``, with ``bf16 autocast`` when the
    precision is bf16."""
    dev = torch.device(device)
    text = str(dev)
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        text = f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    if precision == "bf16":
        text += ", bf16 autocast"
    return text


def _rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


class MemoryRise:
    """How far the memory of a run rises from the moment this object is made: on the CPU the process's peak resident
    memory (``ru_maxrss``), on CUDA the peak of torch's caching allocator, on MPS the memory the Metal driver has
    allocated for torch (MPS keeps no peak)."""

    def __init__(self, device: Any) -> None:
        self.device = torch.device(device)
        synchronize(self.device)
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            self.before = torch.cuda.memory_allocated(self.device)
        elif self.device.type == "mps":
            self.before = torch.mps.driver_allocated_memory()
        else:
            self.before = _rss_bytes()

    @staticmethod
    def what(device: Any) -> str:
        """What is measured on ``device``, for a table's header."""
        kind = torch.device(device).type
        return {"cuda": "CUDA allocator peak", "mps": "MPS driver allocation"}.get(kind, "peak resident memory")

    def mb(self) -> float:
        """The rise so far, in MiB."""
        synchronize(self.device)
        if self.device.type == "cuda":
            now = torch.cuda.max_memory_allocated(self.device)
        elif self.device.type == "mps":
            now = torch.mps.driver_allocated_memory()
        else:
            now = _rss_bytes()
        return (now - self.before) / 2**20
