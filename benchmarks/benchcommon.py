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
import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from symkit.lab import runtime

__all__ = ["MemoryRise", "TensorMemory", "add_device_option", "describe", "device_of", "has_float64", "resident_bytes",
           "settings", "synchronize"]

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
                            help="32: float32; bf16: bfloat16 autocast of the timed forward passes")


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


class TensorMemory(TorchDispatchMode):
    """The peak of the bytes held by the tensors that operations create while this mode is active (activations saved
    for the backward pass, gradients, temporaries), on any device: what a CUDA allocator's peak counts, without the
    libraries, caches and allocator slack that a process's resident memory also holds.

    >>> with TensorMemory() as m:
    ...     y = torch.ones(1000) * 2  # float32: 4000 bytes each, both held while the product runs
    >>> m.peak, m.live
    (8000, 4000)
    """

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        self._held: set[tuple[int, int]] = set()

    def _release(self, key: tuple[int, int], nbytes: int) -> None:
        self.live -= nbytes
        self._held.discard(key)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0]
                  if isinstance(t, torch.Tensor) and t.device.type != "meta"}
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                continue
            storage = t.untyped_storage()
            key = (storage.data_ptr(), storage.nbytes())
            if storage.nbytes() == 0 or key in self._held or key[0] in inputs:
                continue  # a view of, or an in-place write to, a storage counted already or made before
            self._held.add(key)
            self.live += storage.nbytes()
            self.peak = max(self.peak, self.live)
            weakref.finalize(storage, self._release, key, storage.nbytes())
        return out


def resident_bytes(module: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None) -> int:
    """Bytes of a model's parameters and buffers and of its optimiser's state: the tensor memory a training step
    starts from."""
    tensors = [*module.parameters(), *module.buffers()]
    if optimizer is not None:
        tensors += [v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)
