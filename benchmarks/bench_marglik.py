"""KFAC fits by symkit and ASDL on the same model, and one hyperparameter update against a training epoch.

First table: the exact-GGN KFAC fit (40 classes) of one plain-torch CONV network (strided ``nn.Conv2d`` with zero
or circular padding, ReLU, the relaxed network's head) on the quadrant-digits training set, by symkit's
``fit_kfac`` and by ASDL (``asdfghjkl``, module ``asdl``), with their ratio; with zero padding the two agree (the
largest relative difference of their factors is printed), with circular padding ASDL's input factor ignores the
wrap-around. The relaxed CONV network (circular padding, APS subsampling) is timed for symkit alone.

Second table: the layerwise-quadrant CONV, F-FC+CONV and S-FC+S-CONV networks (16x16 canvas, 40 classes): one MAP
training epoch and one hyperparameter update (KFAC fit + marginal-likelihood steps); for S-FC+S-CONV (learnable ω)
also the gradient of the marginal likelihood in its length-scales. The epoch is timed again with the MAP penalty
summed group by group, as symkit did before (its ratio in the "x epoch" column). laplace-torch 0.3 is timed only if
it imports (its torchvision dependency requires another torch, so on torch 2.13 it is skipped).

Run: ``.venv/bin/python benchmarks/bench_marglik.py [--alpha 4] [--reps 3] [--n 300] [--kfac-only]``.
"""

from __future__ import annotations

import argparse
import copy
import functools
import math
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from symkit.datasets.quadrant_digits import quadrant_digits
from symkit.marglik import KroneckerLaplace, fit_kfac, map_penalty, omega_gradient, omega_parameters, prior_groups
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
    ap.add_argument("--n", type=int, default=0, help="use the first N training images (default: all 1300)")
    ap.add_argument("--kfac-only", action="store_true", help="only the symkit / ASDL KFAC comparison")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    xtr, ytr, _, _ = quadrant_digits("digit_quadrant")
    if args.n:
        xtr, ytr = xtr[:args.n], ytr[:args.n]
    n = len(xtr)
    print(f"N = {n}, alpha = {args.alpha}, threads = {args.threads}, median of {args.reps}")
    print("\nKFAC fit, exact GGN (40 classes), batches of 150: the same model for both libraries")
    print(f"{'model':62s} {'symkit s':>9s} {'ASDL s':>8s} {'symkit/ASDL':>12s}")
    for name, ours, theirs in kfac_comparison(args.alpha, xtr, ytr, args.reps):
        ratio = ours / theirs if not math.isnan(theirs) else float("nan")
        print(f"{name:62s} {ours:9.3f} {theirs:8.3f} {ratio:12.2f}")
    if args.kfac_only:
        return
    rows = []
    for layer_type in ("conv", "ffc+conv", "sfc+sconv"):
        rows += _bench(layer_type, args, xtr, ytr)
    rows += _laplace_torch_rows()
    print(f"\n{'model':10s} {'operation':58s} {'seconds':>9s} {'x epoch':>8s}")
    epochs = {r[0]: r[2] for r in rows if r[1].startswith("MAP training epoch")}
    for model_name, op, t in rows:
        ratio = t / epochs[model_name] if (model_name in epochs and not math.isnan(t)) else float("nan")
        print(f"{model_name:10s} {op:58s} {t:9.3f} {ratio:8.2f}")


def _bench(layer_type, args, xtr, ytr):
    n = len(xtr)
    model = RelaxedCNN(1, 40, args.alpha, 16, layer_type, seed=0, sparse_kwargs={"learn_omega": True})
    groups = prior_groups(model)
    log_delta = torch.zeros(len(groups), dtype=torch.float64, requires_grad=True)
    omegas = omega_parameters(model)  # the anchor layers' length-scales: hyperparameters, not trained by MAP
    theta = [p for name, p in model.named_parameters() if name not in omegas]
    opt = torch.optim.SGD(theta, lr=0.03, momentum=0.9)  # the experiments' optimiser for θ

    def epoch(penalty=map_penalty):
        for xb, yb in _batches(xtr, ytr, 32):
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb) + penalty(model, groups, log_delta, n)
            loss.backward()
            opt.step()

    def steps(lap):
        hopt = torch.optim.Adam([log_delta], lr=0.1)
        for _ in range(args.hypersteps):
            hopt.zero_grad()
            lap.neg_log_marglik(log_delta).backward()
            hopt.step()

    def hyper(mc=None):
        lap = KroneckerLaplace(model, fit_kfac(model, _batches(xtr, ytr, 150), mc_samples=mc), groups)
        steps(lap)
        return lap

    # the two penalties in turn, each epoch from the same state (the machine's drift hits both alike)
    start = copy.deepcopy((model.state_dict(), opt.state_dict()))
    times: dict[str, list[float]] = {"symkit": [], "looped": []}
    for _ in range(args.reps):
        for name, penalty in (("symkit", map_penalty), ("looped", _looped_map_penalty)):
            model.load_state_dict(start[0])
            opt.load_state_dict(start[1])
            times[name].append(_timeit(functools.partial(epoch, penalty), 1))
    t_epoch, t_looped = statistics.median(times["symkit"]), statistics.median(times["looped"])
    t_exact = _timeit(lambda: hyper(None), args.reps)
    t_mc = _timeit(lambda: hyper(4), args.reps)
    lap = hyper(4)
    t_steps = _timeit(lambda: steps(lap), args.reps)
    rows = [(layer_type, "MAP training epoch, batch 32 (baseline)", t_epoch),
            (layer_type, "the same epoch, MAP penalty summed group by group (before)", t_looped),
            (layer_type, f"hyper update, exact GGN (K=40) + {args.hypersteps} steps", t_exact),
            (layer_type, f"hyper update, KFAC-MC (4 samples) + {args.hypersteps} steps", t_mc),
            (layer_type, f"{args.hypersteps} L_eta steps only (eigenbases fixed)", t_steps)]
    if omegas:
        batches = list(_batches(xtr, ytr, 150))
        t_omega = _timeit(lambda: omega_gradient(model, batches, groups, log_delta, mc_samples=4), args.reps)
        rows.append((layer_type, "dL_eta/dlog omega, KFAC-MC (4 samples), two passes", t_omega))
    return rows


def _looped_map_penalty(model, groups, log_prior_prec, n_data):
    """The MAP penalty as symkit computed it before 2026-11-29 (six autograd nodes per prior group), for the
    comparison row: the same value as :func:`symkit.marglik.map_penalty`."""
    params = dict(model.named_parameters())
    delta = log_prior_prec.detach().exp()
    total = 0.0
    for gi, g in enumerate(groups):
        total = total + delta[gi].to(params[g.params[0]].dtype) * sum(params[n].pow(2).sum() for n in g.params)
    return 0.5 * total / n_data


def _plain_conv_net(alpha: int, padding_mode: str) -> nn.Sequential:
    """The CONV network as plain torch layers (strided 3x3 convolutions, the relaxed network's head), seed 0."""
    torch.manual_seed(0)
    layers, cin = [], 1
    for cout, _, stride in paper_spec(alpha, 16):
        layers += [nn.Conv2d(cin, cout, 3, stride=stride, padding=1, padding_mode=padding_mode), nn.ReLU()]
        cin = cout
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(cin, 64 * alpha), nn.ReLU(), nn.Linear(64 * alpha, 40))


def _asdl_fit(net, xtr, ytr):
    """ASDL's exact-Fisher KFAC (one backward pass per class, factors from module hooks), or None if absent."""
    try:
        from asdl import FisherConfig, get_fisher_maker
    except ImportError:
        return None
    cfg = FisherConfig(fisher_type="fisher_exact", fisher_shapes=["kron"], loss_type="cross_entropy",
                       data_size=len(xtr))
    fm = get_fisher_maker(net, cfg)

    def fit():
        for i, (xb, yb) in enumerate(_batches(xtr, ytr, 150)):
            dummy = fm.setup_model_call(net, xb)
            fm.setup_loss_call(F.cross_entropy, dummy, yb)
            fm.forward_and_backward(accumulate=i > 0)

    return fit


def _factor_gap(alpha: int, mode: str, xtr, ytr) -> float:
    """Largest relative difference between symkit's factors and ASDL's (``G = N B``, the same ``A``) over the
    layers of the float64 network on the first 150 images."""
    net = _plain_conv_net(alpha, mode).double()
    x, y = xtr[:150].double(), ytr[:150]
    _asdl_fit(net, x, y)()
    curv = fit_kfac(net, [(x, y)])
    gap = 0.0
    for i, m in enumerate(net):
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            blk, kron = curv.block(f"{i}.weight"), m.fisher.kron
            for ours, theirs in ((blk.G, len(x) * kron.B), (blk.A[0], kron.A)):
                gap = max(gap, float((ours - theirs).abs().max() / theirs.abs().max()))
    return gap


def kfac_comparison(alpha: int, xtr, ytr, reps: int) -> list[tuple[str, float, float]]:
    """Exact-GGN KFAC fit of one plain-torch CONV network by symkit and by ASDL, per padding mode; each row is
    ``(model, symkit seconds, ASDL seconds)``, medians of ``reps`` alternating fits on all of ``xtr`` in batches of
    150 (alternating, so that a change in the machine's load falls on both)."""
    rows = []
    for mode in ("zeros", "circular"):
        net = _plain_conv_net(alpha, mode)
        asdl_fit = _asdl_fit(net, xtr, ytr)
        ours, theirs = [], []
        for _ in range(reps):
            ours.append(_timeit(lambda net=net: fit_kfac(net, _batches(xtr, ytr, 150)), 1))
            theirs.append(_timeit(asdl_fit, 1) if asdl_fit is not None else float("nan"))
        label = f"plain CONV, padding {mode}"
        if asdl_fit is not None:
            label += f" (factors differ by {_factor_gap(alpha, mode, xtr, ytr):.0e})"
        rows.append((label, statistics.median(ours), statistics.median(theirs)))
    relaxed = RelaxedCNN(1, 40, alpha, 16, "conv", seed=0)
    rows.append(("RelaxedCNN CONV (circular, APS stride)",
                 _timeit(lambda: fit_kfac(relaxed, _batches(xtr, ytr, 150)), reps), float("nan")))
    return rows


def _laplace_torch_rows():
    try:
        import laplace  # noqa: F401
    except Exception as err:  # torchvision fails to import beside torch 2.13
        print(f"laplace-torch: not available ({type(err).__name__}: {err}); row skipped")
        return []
    return [("-", "laplace-torch: installed but not wired to these layers", float("nan"))]


if __name__ == "__main__":
    main()
