"""What ``torch.compile`` makes of the bilinear layer: its per-sample products and the whole layer, batch first (the
layer's layout) against batch last, eager and compiled, in one run.

Run: ``.venv/bin/python benchmarks/bench_bilinear_layouts.py [--ch 384] [--batch 500] [--rounds 3] [--no-compile]
[--device cpu|cuda]``.

The layer (``symkit.nn.BiLinear`` at O(3), ``gated(uniform_rep(ch))``) does two kinds of products: with its weights
(large matmuls) and per sample (``BiLinear.per_sample_products``: 500 small matrix products, ``3x3 @ 3x34`` to
``27x3 @ 3x34`` at 384 channels). On the CPU, ``bmm`` pays a call per sample for those; with the batch last (each
product an elementwise product over contiguous rows of the batch, summed over the inner index) the work vectorises
over samples, and a compiler can fuse the sum into one loop. Printed, each with the batch-first eager form in the
same rounds:

* each per-sample product forward and its two backward products: ``per_sample_matmul`` (batch first, the layer's),
  the batch-last broadcast sum in eager mode, and the same compiled (``torch.compile``, Inductor's C++ kernels);
* the whole layer, forward and backward: ``BiLinear`` eager (its written-out backward) against ``torch.compile`` of
  it (under the compiler the layer runs ``symkit.nn._bilinear_kernels.batch_last``: gathers of feature rows, one
  matmul per interaction), and the layer's own products with its weights as dense matmuls (what the issue measures
  against);
* an EMLP training step and the MLP's of equal width, eager and compiled.

Compilation needs a C++ compiler; ``--no-compile`` (or a failed compile) prints the eager rows only. Timings: least
time over about ``budget`` seconds per form, ratios the median over rounds of each round's ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

import benchcommon as bc


def _timed(fn: Callable[[], Any], device: torch.device, budget: float = 0.5, least: int = 5) -> float:
    """Least wall time of ``fn`` in ms over at least ``least`` calls and about ``budget`` seconds, each timed from an
    idle device until its work there has finished."""
    for _ in range(3):
        fn()
    times, start = [], time.perf_counter()
    while len(times) < least or time.perf_counter() - start < budget:
        bc.synchronize(device)
        t = time.perf_counter()
        fn()
        bc.synchronize(device)
        times.append(time.perf_counter() - t)
    return 1e3 * min(times)


def _per_sample_forms(p: int, q: int, r: int, n: int, compiled: bool, device: torch.device
                      ) -> dict[str, Callable[[], Any]]:
    """The three products of one per-sample product (``C = A B``, ``A^T``-side and ``B^T``-side gradients) in each
    layout, on fresh operands."""
    from symkit.nn.bilinear import per_sample_matmul

    shapes = ((p, q, r), (p, r, q), (q, p, r))
    first = [(torch.randn(n, a, b, device=device), torch.randn(n, b, c, device=device)) for a, b, c in shapes]
    last = [(torch.randn(a, b, n, device=device), torch.randn(b, c, n, device=device)) for a, b, c in shapes]

    def broadcast_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:  # (a, b, n) x (b, c, n) -> (a, c, n)
        return (a[:, :, None] * b[None]).sum(1)

    forms = {"batch first (bmm / broadcasts)": lambda: [per_sample_matmul(a, b) for a, b in first],
             "batch last, eager": lambda: [broadcast_sum(a, b) for a, b in last]}
    if compiled:
        torch._dynamo.reset()  # a fresh cache per product: its three shapes compile once each, under the limit
        fused = torch.compile(broadcast_sum, dynamic=False)
        forms["batch last, compiled"] = lambda: [fused(a, b) for a, b in last]
    return forms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ch", type=int, default=384)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-compile", action="store_true", help="eager rows only")
    bc.add_device_option(parser)
    args = parser.parse_args()
    device = bc.device_of(args)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    from symkit.groups import O
    from symkit.lab.allocator import keep_freed_memory
    from symkit.nn.emlp import BiLinear, gated, uniform_rep

    keep_freed_memory()
    layer = BiLinear(gated(uniform_rep(args.ch, O(3))), device=device)
    n, compiled = args.batch, not args.no_compile
    print(f"BiLinear at O(3), ch={args.ch} ({layer.size} features), batch {n}, one thread, {bc.describe(device)}; "
          f"least times in ms, "
          f"ratios to the batch-first form the median over {args.rounds} rounds")

    print("\nper-sample products, forward and both backward products each:")
    print(f"{'product':<16}" + "".join(f"{name:>34}" for name in ("batch first (bmm / broadcasts)", "batch last, eager",
                                                                      "batch last, compiled")[:2 + compiled]))
    totals: dict[str, float] = {}
    for p, q, r in layer.per_sample_products:
        try:
            forms = _per_sample_forms(p, q, r, n, compiled, device)
            base = "batch first (bmm / broadcasts)"
            times = {name: [] for name in forms}
            for _ in range(args.rounds):
                for name, fn in forms.items():
                    times[name].append(_timed(fn, device))
        except Exception as err:  # noqa: BLE001 - a compiler that is missing or fails: say so, keep the eager rows
            print(f"  compiling failed ({type(err).__name__}: {str(err)[:200]}); run with --no-compile")
            return
        cells = []
        for name in forms:
            ratio = statistics.median(a / b for a, b in zip(times[name], times[base]))
            totals[name] = totals.get(name, 0.0) + min(times[name])
            cells.append(f"{min(times[name]):>8.3f} ms {ratio:>6.2f}x")
        print(f"{f'{p}x{q} @ {q}x{r}':<16}" + "".join(f"{c:>34}" for c in cells))
    base_total = totals["batch first (bmm / broadcasts)"]
    print(f"{'all':<16}" + "".join(f"{f'{t:8.3f} ms {t / base_total:6.2f}x':>34}" for t in totals.values()))

    print("\nthe whole layer, forward and backward:")
    x = torch.randn(n, layer.size, device=device, requires_grad=True)
    gy = torch.randn(n, layer.size, device=device)
    products = [(torch.randn(n * rr, i, device=device, requires_grad=True),
                 torch.randn(i, c, device=device, requires_grad=True)) for rr, i, c in layer.weight_products]
    runs = {"BiLinear (eager, written-out backward)": lambda: layer(x).backward(gy),
            "its weight products alone": lambda: sum((a @ w).sum() for a, w in products).backward()}
    if compiled:
        fn = torch.compile(layer, dynamic=False)
        start = time.perf_counter()
        fn(x).backward(gy)
        with torch.no_grad():
            err = (fn(x) - layer(x)).abs().max().item()
        print(f"  the layer compiled in {time.perf_counter() - start:.0f} s (forward and backward graphs; Inductor's "
              f"on-disk cache may hold them from an earlier run); largest difference from eager {err:.1e}")
        runs["BiLinear compiled (its batch-last form)"] = lambda: fn(x).backward(gy)
    times = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, fn_ in runs.items():
            times[name].append(_timed(fn_, device, budget=1.0))
    base = "BiLinear (eager, written-out backward)"
    for name in runs:
        ratio = statistics.median(a / b for a, b in zip(times[name], times[base]))
        to_products = statistics.median(a / b for a, b in zip(times[name], times["its weight products alone"]))
        print(f"  {name:<42}{min(times[name]):>8.2f} ms {ratio:>6.2f}x the layer {to_products:>6.2f}x its products")
    if compiled:
        print(f"\ntraining steps, O(3) ch={args.ch}, batch {n}, 3 layers, Adam (as bench_models.py):")
        model_steps(args.ch, n, args.rounds, device)


def model_steps(ch: int, batch: int, rounds: int, device: torch.device) -> None:
    """An EMLP training step (O(3), ``5 Scalar + 5 V -> T(2)``, 3 layers, Adam, as ``bench_models.py``) and the MLP's
    of equal width, eager and compiled (``torch.compile`` of the model; the optimiser step stays eager)."""
    from symkit.groups import O
    from symkit.nn import EMLP, MLP
    from symkit.reps import Scalar, T, V

    G = O(3)
    rep_in, rep_out = 5 * Scalar + 5 * V(G), T(2, 0, G)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, rep_in.size, generator=gen).to(device)
    y = torch.randn(batch, rep_out.size, generator=gen).to(device)
    steps = {}
    for name, model in (("EMLP", EMLP(rep_in, rep_out, G, ch=ch, num_layers=3, device=device)),
                        ("MLP", MLP(rep_in.size, rep_out.size, ch=ch, num_layers=3, device=device))):
        for compiled in (False, True):
            net = torch.compile(model, dynamic=False) if compiled else model
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)

            def step(net=net, opt=opt) -> None:
                opt.zero_grad(set_to_none=True)
                (net(x) - y).square().mean().backward()
                opt.step()

            start = time.perf_counter()
            step()
            label = f"{name} {'compiled' if compiled else 'eager'}"
            if compiled:
                print(f"  {label}: compiled in {time.perf_counter() - start:.0f} s")
            steps[label] = step
    times = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            times[name].append(_timed(step, device, budget=1.5))
    for name in steps:
        to_eager = statistics.median(a / b for a, b in zip(times[name], times["MLP eager"]))
        to_mlp = statistics.median(a / b for a, b in zip(times[name], times[f"MLP {name.split()[1]}"]))
        print(f"  {name:<16}{min(times[name]):>8.2f} ms {to_eager:>6.2f}x the eager MLP {to_mlp:>6.2f}x the MLP "
              f"run the same way")


if __name__ == "__main__":
    main()
