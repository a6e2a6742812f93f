"""keep_freed_memory: freed tensors' pages are reused by the next step instead of faulted in again."""

import subprocess
import sys
import textwrap

import pytest

from symkit.lab.allocator import MMAP_THRESHOLD_MAX, keep_freed_memory

STEPS = textwrap.dedent("""
    import resource, sys
    import torch
    import symkit.nn  # the libraries a training script loads (they change how glibc's heap grows)
    from symkit.lab.allocator import keep_freed_memory

    kept = keep_freed_memory() if sys.argv[1] == "keep" else False
    sizes = [3 << 20, 5 << 20, 1 << 20, 7 << 20, 2 << 20]  # a step's temporaries, 18 MiB in all

    def step():
        held = [torch.zeros(size // 4) for size in sizes]  # zero-filled: every page is touched
        del held

    for _ in range(3):
        step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        step()
    print(kept, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10 / (sum(sizes) // 4096))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_a_repeated_step_reuses_its_pages_once_freed_memory_is_kept():
    out = subprocess.run([sys.executable, "-c", STEPS, "keep"], capture_output=True, text=True, check=True)
    kept, faults_per_page = out.stdout.split()
    assert kept == "True"
    assert float(faults_per_page) < 0.02  # at most 2% of the step's pages faulted in again (glibc's defaults: up to 1)


@pytest.mark.parametrize("kwargs,message", [
    ({"mmap_threshold": -1}, "non-negative number of bytes"),
    ({"trim_threshold": 1.5}, "non-negative number of bytes"),
    ({"mmap_threshold": True}, "non-negative number of bytes"),
    ({"mmap_threshold": MMAP_THRESHOLD_MAX + 1}, "at most 33554432 bytes"),
])
def test_bad_thresholds_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        keep_freed_memory(**kwargs)
