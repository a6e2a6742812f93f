"""Speed of the projections onto E against the generic group average (Lemma 2) measured in the same run.

For each case a batch of layers ``(c_out, c_in, n, n, n, n)`` (float64) is projected by the generic average over
every group element (``group_average``), by the core basis projector (``basis_projection``: ``P = Q Q^T`` of
``V(G) >> V(G)``, built once before timing) and by the fast special case that ``project`` picks (wrapped-diagonal
means for Z_n^2 and Z_n, C4 orbit averages with ``torch.rot90``, equality-pattern means for S_n, and the
composition Pi_C4 Pi_Z for Z_n^2 x| C4); for the translations also by the paper's FFT formulas (Eq. 42's diagonal
extraction, Eq. 64's row-wise partial FFT), the route ``project`` took before. The table gives median milliseconds
and the speed-ups over the group average (and of the fast case over the FFT); every method's result is checked
against the group average before timing. One thread by default.

``--device`` puts the layers on that device (float32 on MPS, which has no float64); every call is timed until its
work there has finished. The core basis projector is float64 numpy, so ``basis_projection`` runs on the CPU (its
time includes copying the layer there and back). Projections are exact computations: no mixed precision.

    .venv/bin/python benchmarks/bench_dynamics.py [--n 10] [--channels 4] [--repeats 5] [--threads N]
        [--device cpu|cuda|mps]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import benchcommon as bc
from symkit.actions import CyclicTranslations1D, CyclicTranslations2D, Permutations, Rotations90, TranslationsRotations
from symkit.dynamics import LayerSpec, basis_projection, fft_projection_1d, fft_projection_2d, group_average, project


def _time(fn, repeats: int, device: torch.device) -> float:
    fn()  # warm-up (and the basis solve, cached)
    out = []
    for _ in range(repeats):
        bc.synchronize(device)
        t0 = time.perf_counter()
        fn()
        bc.synchronize(device)
        out.append(time.perf_counter() - t0)
    return statistics.median(out) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10, help="image side / number of graph nodes")
    parser.add_argument("--channels", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    bc.add_device_option(parser, cpu_only="basis_projection (the core's float64 numpy projector)")
    args = parser.parse_args()
    device = bc.device_of(args)
    dtype = torch.float64 if bc.has_float64(device) else torch.float32
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    n, c = args.n, args.channels
    cases = {
        "Z_n^2 (Eq. 42)": (CyclicTranslations2D(n), fft_projection_2d),
        "Z_n (Eq. 64)": (CyclicTranslations1D(n, 1), lambda A: fft_projection_1d(A, 1)),
        "C4 (rot90 orbits, Eq. 46)": (Rotations90(n), None),
        "Z_n^2 x| C4 (Prop. 7)": (TranslationsRotations(n), None),
        "S_6 on R^{6x6} (15 patterns)": (Permutations(6, "matrix"), None),
    }
    gen = torch.Generator().manual_seed(0)
    rows = []
    for name, (action, fft) in cases.items():
        spec = LayerSpec(action, action, c, c)
        # seeded on the CPU (the same layer on every device), then placed
        A = torch.randn(spec.shape, generator=gen, dtype=torch.float64).to(device=device, dtype=dtype)
        ref = group_average(A, spec)
        err = max(float((project(A, spec, "fast") - ref).abs().max()),
                  float((basis_projection(A, spec) - ref).abs().max()),
                  float((fft(A) - ref).abs().max()) if fft else 0.0)
        t_avg = _time(lambda A=A, spec=spec: group_average(A, spec), max(1, args.repeats // 2), device)
        t_basis = _time(lambda A=A, spec=spec: basis_projection(A, spec), args.repeats, device)
        t_fast = _time(lambda A=A, spec=spec: project(A, spec, "fast"), args.repeats, device)
        t_fft = _time(lambda A=A, fft=fft: fft(A), args.repeats, device) if fft else None
        rows.append((name, action.order, t_avg, t_basis, t_fast, t_fft, err))
    head = f"{'case':30s} {'|G|':>5s} {'average ms':>11s} {'basis ms':>9s} {'x avg':>6s} {'fast ms':>8s} " \
           f"{'x avg':>7s} {'FFT ms':>7s} {'fast/FFT':>8s} {'max err':>8s}"
    print(f"projection of a ({c}, {c}, n^2, n^2) layer, n = {n}, {str(dtype)[6:]}, {torch.get_num_threads()} "
          f"thread(s), on {bc.describe(device)}" + ("" if device.type == "cpu" else " (basis ms: numpy on the CPU)"))
    print(head)
    print("-" * len(head))
    for name, order, t_avg, t_basis, t_fast, t_fft, err in rows:
        fft_cols = f"{t_fft:7.2f} {t_fast / t_fft:7.2f}x" if t_fft else f"{'-':>7s} {'-':>8s}"
        print(f"{name:30s} {order:5d} {t_avg:11.2f} {t_basis:9.2f} {t_avg / t_basis:6.1f} {t_fast:8.2f} "
              f"{t_avg / t_fast:7.1f} {fft_cols} {err:8.1e}")


if __name__ == "__main__":
    main()
