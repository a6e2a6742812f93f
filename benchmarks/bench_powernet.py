"""PowerLayer forward + backward time against a dense layer and a convolution of the same size (28x28, 56x56).

Every row maps ``channels`` input maps of an ``n x n`` image to ``channels`` output maps, on a batch of ``--batch``:

- ``conv 5x5``: ``nn.Conv2d`` with circular padding (the baseline of the ratio column);
- ``power shift 5x5``: PowerLayer with the two cyclic shifts, product powers (the same function as the conv);
- ``power rotation k=5``: PowerLayer with one dense SW rotation base, powers -2..2;
- ``power 4 bases (sum)``: rotation, scaling, shift up, shift right, one series each, kernel 5 (17 terms);
- ``dense``: ``nn.Linear(channels n^2, channels n^2)``.

Times are the median of ``--repeats`` forward + backward passes on one thread, measured in this run. ``setup s``
is the time to build the layer (for SW bases: two ``matrix_exp`` of an ``n^2 x n^2`` matrix).

``--device`` builds every layer on that device and puts the batch there; each pass (and each build) is timed until
its work on the device has finished. There is no ``--precision``: a PowerLayer's output stays float32 under
bfloat16 autocast, so a bf16 run would set bfloat16 baselines against float32 layers.

    python benchmarks/bench_powernet.py            # 28x28 and 56x56
    python benchmarks/bench_powernet.py --quick    # 14x14 and 28x28, fewer repeats
    python benchmarks/bench_powernet.py --device cuda
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

import benchcommon as bc
from symkit.nn.powernet import PowerLayer, make_base


def _time(module: nn.Module, x: torch.Tensor, repeats: int) -> float:
    times = []
    for i in range(repeats + 1):
        xi = x.detach().requires_grad_(True)
        bc.synchronize(x.device)
        t0 = time.perf_counter()
        module(xi).sum().backward()
        bc.synchronize(x.device)
        if i:  # the first pass is a warm-up
            times.append(time.perf_counter() - t0)
        module.zero_grad(set_to_none=True)
    return statistics.median(times)


def _rows(n: int, c: int, device: torch.device) -> list[tuple[str, Callable[[], nn.Module], str]]:
    def power(names: list[str], combine: str = "product", k: int = 5) -> Callable[[], nn.Module]:
        return lambda: PowerLayer([make_base(b, n) for b in names], c, c, k, combine=combine, device=device)

    return [
        ("conv 5x5", lambda: nn.Conv2d(c, c, 5, padding=2, padding_mode="circular", device=device), "image"),
        ("power shift 5x5", power(["shift_x", "shift_y"]), "image"),
        ("power rotation k=5", power(["rotation"]), "image"),
        ("power 4 bases (sum)", power(["rotation", "scaling", "shift_up", "shift_right"], "sum"), "image"),
        ("dense", lambda: nn.Linear(c * n * n, c * n * n, device=device), "flat"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats (smoke run)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--channels", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    bc.add_device_option(parser)
    args = parser.parse_args()
    device = bc.device_of(args)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    sizes = (14, 28) if args.quick else (28, 56)
    repeats = 2 if args.quick else args.repeats
    c, b = args.channels, args.batch
    header = f"{'size':>6} {'layer':<22} {'params':>10} {'setup s':>8} {'fwd+bwd ms':>11} {'x conv':>8} {'x dense':>8}"
    print(f"batch {b}, {c} -> {c} channels, one thread, median of {repeats}, on {bc.describe(device)}")
    print(header)
    print("-" * len(header))
    for n in sizes:
        results = []
        x_img = torch.randn(b, c, n, n).to(device)  # seeded on the CPU (the same batch on every device), then placed
        for name, make, kind in _rows(n, c, device):
            bc.synchronize(device)
            t0 = time.perf_counter()
            module = make()
            bc.synchronize(device)
            setup = time.perf_counter() - t0
            x = x_img if kind == "image" else x_img.reshape(b, -1)
            ms = _time(module, x, repeats) * 1000
            params = sum(p.numel() for p in module.parameters())
            results.append((name, params, setup, ms))
            del module
        conv_ms = results[0][3]
        dense_ms = results[-1][3]
        for name, params, setup, ms in results:
            print(f"{n}x{n:<3} {name:<22} {params:>10} {setup:>8.2f} {ms:>11.2f} {ms / conv_ms:>8.2f} "
                  f"{ms / dense_ms:>8.2f}")


if __name__ == "__main__":
    main()
