"""Throughput of end-to-end LEE against a forward pass and the reference method, and agreement with an independent
finite-difference Lie derivative.

Model: ResNet-18 with the CIFAR stem (3x3/1 convolution, no max pool; ``symkit.nn.vision.ResNet18(stem="cifar")``),
as in the LEE measurements of thesis ch. 4, 10 classes, eval mode, on 32x32 RGB inputs, batch 8, translation LEE of
the softmax probabilities. Rows:

* ``forward``: one forward pass, the baseline (a Lie derivative needs the primal and one tangent pass, so 50% of
  forward throughput is the ceiling);
* ``symkit LEE (jvp)``: symkit's forward-mode Lie derivative;
* ``double VJP (reference method)``: the reference code's method (two reverse-mode passes), as implemented in
  symkit's sampler: it shows the cost of that method, and it is *not* an independent check of symkit;
* the agreement lines compare symkit with ``symkit.testing.finite_difference_lie_derivative``, which shares no code
  with symkit.measure (torch's ``F.grid_sample``, a one-sided difference with Richardson extrapolation); in float64
  with step 1e-8 (below the ReLU kinks: see its docstring) and in float32 with step 1e-3 (rounding allows no
  smaller), stated separately.

The timed methods run interleaved in each repeat so that a shared CPU slows them alike; the table reports the
median images/s and the median per-repeat ratio to the forward pass. One thread by default (``--threads 0`` keeps
torch's default). ``--device`` puts the model and images on that device, each timed call waited for there; the
float64 agreement line needs a device with float64 (not MPS). Lie derivatives are exact computations, so this
benchmark has no mixed precision.

    .venv/bin/python benchmarks/bench_lee.py [--repeats 7] [--batch 8] [--size 32] [--stem cifar] [--threads N]
        [--device cpu|cuda|mps]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

import benchcommon as bc
from symkit.measure import lie_derivative, with_scores
from symkit.nn.vision import ResNet18
from symkit.testing import finite_difference_lie_derivative


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--stem", default="cifar", choices=("cifar", "imagenet"))
    parser.add_argument("--direction", default="x", choices=("x", "y"))
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    bc.add_device_option(parser)
    args = parser.parse_args()
    device = bc.device_of(args)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    transform = f"translate_{args.direction}"

    torch.manual_seed(0)
    model = ResNet18(in_channels=3, num_classes=10, stem=args.stem).eval().to(device)
    x = torch.randn(args.batch, 3, args.size, args.size).to(device)  # seeded on the CPU, then placed
    f = with_scores(model, "probs")

    def forward() -> torch.Tensor:
        with torch.no_grad():
            return f(x)

    def lee_jvp() -> torch.Tensor:
        with torch.no_grad():
            return lie_derivative(f, x, transform, method="jvp")

    def double_vjp() -> torch.Tensor:
        return lie_derivative(f, x, transform, method="double_vjp")

    methods = {"forward": forward, "symkit LEE (jvp)": lee_jvp, "double VJP (reference method)": double_vjp}
    for fn in methods.values():  # warm-up: allocator and oneDNN primitive (or CUDA kernel) caches
        fn()
    times: dict[str, list[float]] = {k: [] for k in methods}
    for _ in range(args.repeats):
        for name, fn in methods.items():
            bc.synchronize(device)
            start = time.perf_counter()
            fn()
            bc.synchronize(device)
            times[name].append(time.perf_counter() - start)

    ours32 = lee_jvp()
    fd32 = finite_difference_lie_derivative(f, x, args.direction, h=1e-3)
    agreement64 = "not run: no float64 on " + str(device)
    if bc.has_float64(device):
        model64 = copy.deepcopy(model).double()
        f64 = with_scores(model64, "probs")
        with torch.no_grad():
            ours64 = lie_derivative(f64, x.double(), transform, method="jvp")
        fd64 = finite_difference_lie_derivative(f64, x.double(), args.direction, h=1e-8)
        agreement64 = f"relative difference {_relative(ours64, fd64):.2e}"
    vjp_vs_jvp = _relative(double_vjp().detach(), ours32)

    print(
        f"ResNet-18 ({args.stem} stem), {args.size}x{args.size}, batch {args.batch}, {transform}, "
        f"{args.repeats} repeats, {torch.get_num_threads()} threads, on {bc.describe(device)}"
    )
    print(f"{'method':<32}{'images/s':>10}{'vs forward':>12}")
    for name in methods:
        ips = args.batch / statistics.median(times[name])
        ratio = statistics.median(tf / t for tf, t in zip(times["forward"], times[name]))
        print(f"{name:<32}{ips:>10.2f}{ratio:>11.1%}")
    speedup = statistics.median(tr / tj for tr, tj in zip(times["double VJP (reference method)"],
                                                            times["symkit LEE (jvp)"]))
    print(f"symkit LEE / double VJP speed-up: {speedup:.2f}x")
    print("agreement with the independent finite difference (torch grid_sample, Richardson):")
    print(f"  float64 (step 1e-8): {agreement64}")
    print(f"  float32 (step 1e-3): relative difference {_relative(ours32, fd32):.2e}  (rounding and ReLU kinks)")
    print(f"double VJP vs jvp, both symkit (float32): {vjp_vs_jvp:.2e}  (a consistency check, not a reference)")


if __name__ == "__main__":
    main()
