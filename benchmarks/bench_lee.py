"""Throughput of end-to-end LEE against a plain forward pass and the reference double-VJP method.

ResNet-18-shaped network (``symkit.nn.vision.ResNet18``, 1000 classes, eval mode) on 64x64 RGB inputs, batch 8,
translation LEE of the softmax probabilities. The three methods run interleaved in each repeat so that a shared
CPU slows them alike; the table reports the median images/s and the median per-repeat ratio to the forward pass.
A Lie derivative needs the primal pass and one tangent pass, so 50% of forward throughput is the ceiling.
Runs on one thread by default: on a shared, oversubscribed CPU, multi-threaded OpenMP regions spin and distort
every method's timings (``--threads 0`` keeps torch's default).

    .venv/bin/python benchmarks/bench_lee.py [--repeats 7] [--batch 8] [--size 64] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from symkit.measure import lie_derivative, with_scores
from symkit.nn.vision import ResNet18


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--transform", default="translate_x")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    model = ResNet18(in_channels=3, num_classes=1000).eval()
    x = torch.randn(args.batch, 3, args.size, args.size)
    f = with_scores(model, "probs")

    def forward() -> torch.Tensor:
        with torch.no_grad():
            return f(x)

    def lee_jvp() -> torch.Tensor:
        with torch.no_grad():
            return lie_derivative(f, x, args.transform, method="jvp")

    def reference() -> torch.Tensor:
        return lie_derivative(f, x, args.transform, method="double_vjp")

    methods = {"forward": forward, "LEE (jvp)": lee_jvp, "reference (double VJP)": reference}
    for fn in methods.values():  # warm-up: allocator and oneDNN primitive caches
        fn()
    times: dict[str, list[float]] = {k: [] for k in methods}
    for _ in range(args.repeats):
        for name, fn in methods.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)

    ours, ref = lee_jvp(), reference()
    ref = ref.detach()
    rel = float((ours - ref).norm() / ref.norm())
    with torch.no_grad():
        ours64 = lie_derivative(with_scores(model.double(), "probs"), x.double(), args.transform, method="jvp")
    ref64 = lie_derivative(with_scores(model, "probs"), x.double(), args.transform, method="double_vjp")
    ref64 = ref64.detach()
    rel64 = float((ours64 - ref64).norm() / ref64.norm())

    print(
        f"ResNet-18 shape, {args.size}x{args.size}, batch {args.batch}, {args.transform}, {args.repeats} repeats, "
        f"{torch.get_num_threads()} threads"
    )
    print(f"{'method':<24}{'images/s':>10}{'vs forward':>12}")
    for name in methods:
        ips = args.batch / statistics.median(times[name])
        ratio = statistics.median(tf / t for tf, t in zip(times["forward"], times[name]))
        print(f"{name:<24}{ips:>10.2f}{ratio:>11.1%}")
    speedup = statistics.median(tr / tj for tr, tj in zip(times["reference (double VJP)"], times["LEE (jvp)"]))
    print(f"LEE / reference speed-up: {speedup:.2f}x")
    print(f"relative difference LEE vs reference: float32 {rel:.2e}, float64 {rel64:.2e}")


if __name__ == "__main__":
    main()
