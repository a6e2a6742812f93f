"""PAC-Bayes compression (thesis ch. 5): cost of subspace training θ = θ0 + P w (Eq. 5.3) per projector kind, against
full training of the same net in the same run.

Run: ``.venv/bin/python benchmarks/bench_pacbayes.py [--quick] [--device cpu|cuda|mps] [--precision 32|bf16]``.

Section "projectors" (:func:`projector_table`): two nets on digits-sized inputs (8x8, 10 classes, batch 128, float32,
Adam, cross-entropy, one thread): an MLP 64-256-256-10 (D = 85,002) and a CNN (two 3x3 convolutions of 32 and 64
channels with BatchNorm, max-pool, a 1024-64-10 head; D = 85,258). For every projector kind and d in {100, 1000, 5000}
(``--quick``: {100, 1000}) it measures, each case in a fresh subprocess:

- ``step ms``: one training step (forward, backward, Adam on w), the minimum over repeated steps after a warm-up;
- ``peak MB``: how far the process's peak resident memory (``resource.getrusage(...).ru_maxrss``) rises, over
  building the model (projector included) and the steps, above its level after imports, data loading and one
  training step of a tiny copy of the net (which loads the kernels and libraries): the memory of the model, its
  projector, activations, gradients and Adam state (tracemalloc does not see torch's allocations);
- ``build s``: building the projector (drawing it from the seed).

Ratios are against full training of the same net (every parameter trained, no projector). A dense projector above
``CACHE_BYTES`` (256 MiB) is regenerated block by block in every pass (column ``cache``); such cases are also run
with the matrix held in memory (``dense, cached``) when it takes at most 1 GiB. Timings on a shared machine are
noisy: compare the ratios of one run.

``--device`` puts the nets, projectors and data of this section on that device, each step waited for there; peak MB
is then the device's memory (``benchcommon.MemoryRise``: the CUDA allocator's peak, the MPS driver's allocation).
``--precision bf16`` runs the forward pass and loss of each step under bfloat16 autocast, as ``symkit reproduce
--precision bf16`` trains (``symkit.lab.runtime.autocast``); full training runs under it too.

Section "coding" (``benchmarks/pacbayes_coding.py``): encode and decode throughput of the arithmetic coder for
d in {1e3 .. 1e6} codes of 7 and 50 levels, and its real message length against ceil(d H) + 2 and a Huffman code:
numpy and constriction work, on the CPU whatever ``--device`` says.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import benchcommon as bc

os.environ.setdefault("SYMKIT_PROGRESS", "0")

PINNED_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "SYMKIT_PROGRESS": "0"}
NETS = ("mlp", "cnn")
KIND_ORDER = ("dense", "sparse", "kron-sum", "kron", "film", "film+kron")
BATCH = 128


def _timed(fn, device, budget: float, least: int = 3, most: int = 50) -> float:
    """Minimum wall time of ``fn`` over at least ``least`` calls and about ``budget`` seconds, each call timed from
    an idle ``device`` until its work there has finished."""
    times, start = [], time.perf_counter()
    while len(times) < least or (time.perf_counter() - start < budget and len(times) < most):
        bc.synchronize(device)
        t = time.perf_counter()
        fn()
        bc.synchronize(device)
        times.append(time.perf_counter() - t)
    return min(times)


def _net(name: str, width: int = 1):
    """The benchmark nets; ``width=1`` gives the full sizes, smaller widths a tiny copy for the warm-up."""
    from torch import nn

    if name == "mlp":
        h = 256 // width
        return nn.Sequential(nn.Flatten(), nn.Linear(64, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 10))
    c1, c2, h = 32 // width, 64 // width, 64 // width
    return nn.Sequential(nn.Conv2d(1, c1, 3, padding=1), nn.BatchNorm2d(c1), nn.ReLU(),
                         nn.Conv2d(c1, c2, 3, padding=1), nn.BatchNorm2d(c2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(c2 * 16, h), nn.ReLU(), nn.Linear(h, 10))


def measure_step(net_name: str, kind: str, d: int, budget: float, device: str = "cpu",
                 precision: str = "32") -> dict:
    """One case, in this process: ``kind == "full"`` trains every parameter; otherwise a :class:`SubspaceModel`;
    on ``device``, the forward pass and loss under ``runtime.autocast`` at ``precision``."""
    import torch
    import torch.nn.functional as F

    from symkit.datasets.digits import load_digits_images
    from symkit.lab import runtime
    from symkit.pacbayes.subspace import SubspaceModel

    torch.set_num_threads(1)
    torch.manual_seed(0)
    dev = torch.device(device)
    settings = runtime.RunSettings(device=device, precision=precision)
    x, y = load_digits_images()
    x, y = x[:BATCH].contiguous().to(dev), y[:BATCH].contiguous().to(dev)

    def loss_of(model) -> torch.Tensor:
        with runtime.using(settings), runtime.autocast(dev.type):
            return F.cross_entropy(model(x), y)

    tiny = _net(net_name, width=16).to(dev)  # a training step of a tiny copy loads the kernels and libraries first
    tiny_opt = torch.optim.Adam(tiny.parameters())
    loss_of(tiny).backward()
    tiny_opt.step()
    del tiny, tiny_opt
    memory = bc.MemoryRise(dev)
    net = _net(net_name).to(dev)  # drawn on the CPU from the seed (the same net on every device), then placed
    bc.synchronize(dev)
    t0 = time.perf_counter()
    if kind == "full":
        model, params, cached = net, list(net.parameters()), None
    elif kind == "dense, cached":
        model = SubspaceModel(net, d, "dense", cache_bytes=1 << 40)
        params, cached = [model.w], True
    else:
        model = SubspaceModel(net, d, kind)
        params = [model.w]
        proj = model.projector
        inner = getattr(getattr(proj, "film", proj), "inner", proj)
        cached = getattr(inner, "cached", None)
    bc.synchronize(dev)
    build = time.perf_counter() - t0
    opt = torch.optim.Adam(params, lr=1e-3)
    model.train()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_of(model).backward()
        opt.step()

    step()  # warm-up
    step_s = _timed(step, dev, budget, least=1 if cached is False else 3)  # a regenerated dense step takes seconds
    return {"step_ms": 1e3 * step_s, "peak_mb": memory.mb(), "build_s": build,
            "D": sum(p.numel() for p in net.parameters()), "cached": cached}


def _in_subprocess(*case: object) -> dict | str:
    env = {**os.environ, **PINNED_ENV}
    proc = subprocess.run([sys.executable, __file__, "--one", json.dumps(case)], capture_output=True, text=True,
                          env=env)
    if proc.returncode != 0:
        return "failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:60]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _ratio(a: dict | str, b: dict | str, key: str) -> str:
    if not (isinstance(a, dict) and isinstance(b, dict)) or b[key] <= 0:
        return "-"
    return f"{a[key] / b[key]:.2f}x"


def projector_table(quick: bool, device: str = "cpu", precision: str = "32") -> str:
    """Time per training step and peak memory of subspace training per projector kind and d, against full training
    of the same net (module docstring), on ``device`` at ``precision``."""
    from symkit.pacbayes.projectors import CACHE_BYTES

    dims = (100, 1000) if quick else (100, 1000, 5000)
    budget = 0.3 if quick else 2.0
    memory = "ru_maxrss" if device == "cpu" else bc.MemoryRise.what(device)
    lines = [f"subspace training (theta = theta0 + P w, thesis Eq. 5.3), batch {BATCH}, float32, Adam, 1 thread, "
             f"on {bc.describe(device, precision)}; peak MB = rise of {memory} over build + steps",
             f"{'net':<5}{'D':>8}{'d':>6}  {'projector':<14}{'cache':>6}{'build s':>9}{'step ms':>9}{'step/full':>10}"
             f"{'peak MB':>9}{'peak/full':>10}"]
    for net in NETS:
        full = _in_subprocess(net, "full", 0, budget, device, precision)
        D = full["D"] if isinstance(full, dict) else "?"
        if isinstance(full, dict):
            lines.append(f"{net:<5}{D:>8}{'-':>6}  {'full':<14}{'-':>6}{'-':>9}{full['step_ms']:>9.2f}{'1.00x':>10}"
                         f"{full['peak_mb']:>9.1f}{'1.00x':>10}")
        else:
            lines.append(f"{net:<5}{'?':>8}{'-':>6}  {'full':<14} {full}")
        for d in dims:
            # a dense projector above CACHE_BYTES is regenerated in every pass; also time it held in memory, up to
            # 1 GiB (the machine is shared)
            size = 4 * d * (D if isinstance(D, int) else 0)
            big = CACHE_BYTES < size <= 1 << 30
            for kind in KIND_ORDER + (("dense, cached",) if big else ()):
                r = _in_subprocess(net, kind, d, budget, device, precision)
                if not isinstance(r, dict):
                    lines.append(f"{net:<5}{D:>8}{d:>6}  {kind:<14} {r}")
                    continue
                cache = "-" if r["cached"] is None else ("yes" if r["cached"] else "regen")
                lines.append(f"{net:<5}{D:>8}{d:>6}  {kind:<14}{cache:>6}{r['build_s']:>9.3f}{r['step_ms']:>9.2f}"
                             f"{_ratio(r, full, 'step_ms'):>10}{r['peak_mb']:>9.1f}{_ratio(r, full, 'peak_mb'):>10}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="d in {100, 1000} and shorter timings (about 2 min)")
    bc.add_device_option(parser, precision=True, cpu_only="the entropy coding section (numpy, constriction)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_step(*json.loads(args.one))))
        return
    device = bc.device_of(args)
    t0 = time.perf_counter()
    from pacbayes_coding import coding_table, overhead_table

    sections = [projector_table(args.quick, str(device), args.precision), coding_table(args.quick),
                overhead_table(args.quick)]
    print("\n\n".join(sections))
    print(f"\n(total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
