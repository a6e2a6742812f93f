"""Keep freed memory in the process for the next training step (Linux, glibc): fewer page faults per step.

glibc hands large freed blocks back to the operating system: blocks above ``M_MMAP_THRESHOLD`` are unmapped, and the
top of the heap is trimmed once more than ``M_TRIM_THRESHOLD`` of it is free. A training step frees and allocates the
same tensors every time, so each step faults the pages of its temporaries in again, a few microseconds per 4 KiB
page, and zero-filling a fresh gradient buffer costs ten times what it costs in memory already mapped. EMLP layers
make many mid-sized temporaries (gathers, their zero-filled gradients): an O(3) EMLP at 384 channels and batch 500
takes 1,100-2,000 page faults a training step with glibc's defaults, under 100 with :func:`keep_freed_memory`.

:func:`keep_freed_memory` raises both thresholds with ``mallopt`` (what jemalloc or tcmalloc, which PyTorch's CPU
performance guide suggests preloading, do by design). It changes the whole process's allocator, so symkit never
calls it on import: the ``symkit`` command and the benchmarks call it; a training script may call it first thing.
The price is memory that stays resident after a peak (at most ``trim_threshold`` of free heap is kept).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

__all__ = ["keep_freed_memory"]

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 * 2**20  # glibc refuses a larger mmap threshold on 64-bit systems


def keep_freed_memory(mmap_threshold: int = MMAP_THRESHOLD_MAX, trim_threshold: int = 2**30) -> bool:
    """Serve allocations up to ``mmap_threshold`` bytes from the heap and keep up to ``trim_threshold`` bytes of
    freed heap for reuse (glibc's ``mallopt``). Returns True if both were set, False where the C library is not
    glibc (macOS, Windows, musl): nothing changes there."""
    for name, value in (("mmap_threshold", mmap_threshold), ("trim_threshold", trim_threshold)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"keep_freed_memory: {name} must be a non-negative number of bytes, got {value!r}")
    if mmap_threshold > MMAP_THRESHOLD_MAX:
        raise ValueError(f"keep_freed_memory: glibc takes an mmap_threshold of at most {MMAP_THRESHOLD_MAX} bytes "
                         f"(32 MiB), got {mmap_threshold}")
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    trim = min(trim_threshold, 2**31 - 1)  # mallopt takes an int
    return bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(_M_TRIM_THRESHOLD, trim))
