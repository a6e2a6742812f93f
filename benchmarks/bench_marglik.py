"""One hyperparameter update (KFAC fit + marginal-likelihood steps) against the training epoch it interleaves with.

Model: the layerwise-quadrant F-FC+CONV network (16x16 canvas, 40 classes) on the quadrant-digits training set.
Baselines measured in the same run: one MAP training epoch; and, for the curvature fit alone, ASDL (``asdfghjkl``,
module ``asdl``) on a plain-torch CONV network of the same shape (zero padding, as ASDL supports). laplace-torch 0.3
is timed only if it imports (its torchvision dependency requires another torch, so on torch 2.13 it is skipped).

Run: ``.venv/bin/python benchmarks/bench_marglik.py [--alpha 4] [--reps 3]``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from symkit.datasets.quadrant_digits import quadrant_digits
from symkit.marglik import KronLaplace, fit_kfac, map_penalty, prior_groups
from symkit.nn.relaxed import RelaxedCNN, paper_spec


def _timeit(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _batches(x, y, b):
    for i in range(0, len(x), b):
        yield x[i:i + b], y[i:i + b]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alpha", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--hypersteps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    xtr, ytr, _, _ = quadrant_digits("digit_quadrant")
    n = len(xtr)
    rows = []
    for layer_type in ("conv", "ffc+conv"):
        rows += _bench(layer_type, args, xtr, ytr)
    rows += _laplace_torch_rows()
    print(f"N = {n}, alpha = {args.alpha}, threads = {args.threads}, median of {args.reps}")
    print(f"{'model':10s} {'operation':58s} {'seconds':>9s} {'x epoch':>8s}")
    epochs = {r[0]: r[2] for r in rows if r[1].startswith("MAP training epoch")}
    for model_name, op, t in rows:
        ratio = t / epochs[model_name] if (model_name in epochs and not math.isnan(t)) else float("nan")
        print(f"{model_name:10s} {op:58s} {t:9.3f} {ratio:8.2f}")


def _bench(layer_type, args, xtr, ytr):
    n = len(xtr)
    model = RelaxedCNN(1, 40, args.alpha, 16, layer_type, seed=0)
    groups = prior_groups(model)
    log_delta = torch.zeros(len(groups), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9)  # the experiments' optimiser for θ

    def epoch():
        for xb, yb in _batches(xtr, ytr, 32):
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb) + map_penalty(model, groups, log_delta, n)
            loss.backward()
            opt.step()

    def steps(lap):
        hopt = torch.optim.Adam([log_delta], lr=0.1)
        for _ in range(args.hypersteps):
            hopt.zero_grad()
            lap.neg_log_marglik(log_delta).backward()
            hopt.step()

    def hyper(mc=None):
        lap = KronLaplace(model, fit_kfac(model, _batches(xtr, ytr, 150), mc_samples=mc), groups)
        steps(lap)
        return lap

    t_epoch = _timeit(epoch, args.reps)
    t_exact = _timeit(lambda: hyper(None), args.reps)
    t_mc = _timeit(lambda: hyper(4), args.reps)
    lap = hyper(4)
    t_steps = _timeit(lambda: steps(lap), args.reps)
    rows = [(layer_type, "MAP training epoch, batch 32 (baseline)", t_epoch),
            (layer_type, f"hyper update, exact GGN (K=40) + {args.hypersteps} steps", t_exact),
            (layer_type, f"hyper update, KFAC-MC (4 samples) + {args.hypersteps} steps", t_mc),
            (layer_type, f"{args.hypersteps} L_eta steps only (eigenbases fixed)", t_steps)]
    if layer_type == "conv":
        rows += _asdl_rows(args.alpha, xtr, ytr, model)
    return rows


def _asdl_rows(alpha, xtr, ytr, ours):
    try:
        from asdl import FisherConfig, get_fisher_maker
    except ImportError:
        return [("conv", "ASDL KFAC fit: not installed", float("nan"))]
    layers, cin = [], 1
    for cout, _, stride in paper_spec(alpha, 16):
        layers += [nn.Conv2d(cin, cout, 3, stride=stride, padding=1), nn.ReLU()]
        cin = cout
    net = nn.Sequential(*layers, nn.Flatten(), nn.Linear(cin, 64 * alpha), nn.ReLU(), nn.Linear(64 * alpha, 40))
    cfg = FisherConfig(fisher_type="fisher_exact", fisher_shapes=["kron"], loss_type="cross_entropy",
                       data_size=len(xtr))
    fm = get_fisher_maker(net, cfg)

    def fit():
        for i, (xb, yb) in enumerate(_batches(xtr, ytr, 150)):
            dummy = fm.setup_model_call(net, xb)
            fm.setup_loss_call(F.cross_entropy, dummy, yb)
            fm.forward_and_backward(accumulate=i > 0)

    def ours_fit():
        fit_kfac(ours, _batches(xtr, ytr, 150))

    return [("conv", "KFAC fit only, exact GGN, symkit (circular conv)", _timeit(ours_fit, 1)),
            ("conv", "KFAC fit only, exact GGN, ASDL (plain nn.Conv2d)", _timeit(fit, 1))]


def _laplace_torch_rows():
    try:
        import laplace  # noqa: F401
    except Exception as err:  # torchvision fails to import beside torch 2.13
        print(f"laplace-torch: not available ({type(err).__name__}: {err}); row skipped")
        return []
    return [("-", "laplace-torch: installed but not wired to these layers", float("nan"))]


if __name__ == "__main__":
    main()
