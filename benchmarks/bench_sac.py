"""The cost of one SAC update (docs/rl.md, "Cost"): stable-baselines3's SAC with symkit's networks, per model and
setting, against the RL code's ReLU baseline in the same run.

    .venv/bin/python benchmarks/bench_sac.py [--env Hopper] [--updates 20] [--repeats 5] [--predicts 300] [--threads 1]
        [--kinds relu-mlp,rpp-policy] [--device cpu|cuda|mps]

Rows: ``relu-mlp`` (the baseline), ``mlp`` (swish), the RPP-EMLP with the uniform hidden reps and with the RL
code's (``rl-code``: ``126 T0 + 55 V + 5 V⊗V`` for Hopper), and each RPP once more without the critic freeze (the
critics' weight gradients computed during the actor's loss, as stable-baselines3 does on its own), for Ant the
RPP with ``joint_signs="matched"`` and with the turned torso too (docs/rl.md, "Ant's joint signs"), the RPP with
the RL code's reps compiled (``--compile``: :func:`symkit.rl.sac.compile_networks`), and the RPP in the policy only
(``rpp-policy``: an RPP actor with ReLU MLP critics, Figure A.2). ``--kinds`` keeps the rows of those kinds (the
baseline's always). Each row builds
the model with :func:`symkit.rl.sac.make_sac` (256 channels, batch 256), fills the replay buffer with 400 steps
(100 updates), then times ``--repeats`` calls of ``model.train(gradient_steps=--updates)``: seconds per update,
minimum and median, and the median's ratio to the baseline's. A second table times ``predict`` of one observation
(what a run calls once per environment step and once per evaluation step) for each model with freeze, and for the
RPP once more with its layers' inference caches off (``WeightCache.cache_weights = False``): each predict then
assembles every weight again, as before symkit kept them between updates.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import torch

import benchcommon as bc
from symkit.lab import runtime
from symkit.lab.allocator import keep_freed_memory

#: (label, kind, hidden, critic freeze, compiled, the equivariant networks' prior: make_sac's joint_signs and torso)
ROWS = (("relu-mlp", "relu-mlp", "rl-code", True, False, {}),
        ("mlp (swish)", "mlp", "rl-code", True, False, {}),
        ("rpp, uniform hidden", "rpp", "uniform", True, False, {}),
        ("rpp, uniform hidden, no freeze", "rpp", "uniform", False, False, {}),
        ("rpp, rl-code hidden", "rpp", "rl-code", True, False, {}),
        ("rpp, rl-code hidden, no freeze", "rpp", "rl-code", False, False, {}),
        ("rpp, rl-code hidden, matched joint signs", "rpp", "rl-code", True, False, {"joint_signs": "matched"}),
        ("rpp, rl-code hidden, matched joint signs, turned torso", "rpp", "rl-code", True, False,
         {"joint_signs": "matched", "torso": "turned"}),
        ("rpp, rl-code hidden, compiled (--compile)", "rpp", "rl-code", True, True, {}),
        ("rpp-policy (RPP actor, ReLU MLP critics), rl-code hidden", "rpp-policy", "rl-code", True, False, {}))


def seconds_per_update(env: str, kind: str, hidden: str, freeze: bool, updates: int, repeats: int,
                       prior: dict[str, str] | None = None, device: Any = "cpu", compiled: bool = False
                       ) -> tuple[list[float], Any]:
    """Seconds per update of ``repeats`` timed calls of ``updates`` SAC updates each (after 100 untimed ones, which
    include the compiling of a compiled row), and the model."""
    from symkit.rl import PRESETS
    from symkit.rl.sac import compile_networks, make_sac

    p = PRESETS[env]
    torch.manual_seed(0)
    model = make_sac(p, kind, p.make_env(), learning_starts=300, buffer_size=5000, hidden=hidden, seed=0,
                     device=device, **(prior or {}))
    if compiled:
        compile_networks(model)
    if not freeze:
        for handle in model.policy.critic_frozen_hooks:
            handle.remove()
    model.learn(400)
    times = []
    for _ in range(repeats):
        bc.synchronize(model.device)
        start = time.perf_counter()
        model.train(gradient_steps=updates, batch_size=256)
        bc.synchronize(model.device)
        times.append((time.perf_counter() - start) / updates)
    return times, model


def seconds_per_predict(model: Any, calls: int, caches: bool = True) -> float:
    """Median seconds of a deterministic ``predict`` of one observation, over ``calls`` calls (after 20 untimed),
    with the actor's inference caches on or off."""
    from symkit.nn._weight_cache import WeightCache

    layers = [m for m in model.policy.actor.modules() if isinstance(m, WeightCache)]
    for m in layers:
        m.cache_weights = caches
    obs = np.zeros(model.observation_space.shape, dtype=np.float32)
    for _ in range(20):
        model.predict(obs, deterministic=True)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        model.predict(obs, deterministic=True)
        times.append(time.perf_counter() - start)
    for m in layers:
        m.cache_weights = True
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="Hopper", help="a symkit.rl preset (default Hopper)")
    parser.add_argument("--updates", type=int, default=20, help="updates per timed call (default 20)")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per row (default 5)")
    parser.add_argument("--predicts", type=int, default=300, help="timed predict calls per row (default 300)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as a sweep's workers)")
    parser.add_argument("--kinds", default="", help="comma-separated kinds whose rows to time (default: every row)")
    bc.add_device_option(parser)
    args = parser.parse_args()
    device = bc.device_of(args)
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        print("bench_sac: stable-baselines3 is not installed (pip install 'symkit[rl]'); nothing to time")
        return
    keep_freed_memory()
    torch.set_num_threads(args.threads)
    print(f"SAC updates on {args.env}, {bc.describe(device)}, {args.threads} thread(s), batch 256, 256 channels")
    print("| model | s per update (min) | median | ratio to relu-mlp |")
    print("|---|---|---|---|")
    baseline, predicts = None, []
    from symkit.rl import PRESETS
    from symkit.rl.settings import KINDS

    kinds = {k for k in args.kinds.split(",") if k} or set(KINDS)
    if kinds - set(KINDS):
        parser.error(f"--kinds: unknown {sorted(kinds - set(KINDS))}; the kinds are {', '.join(KINDS)}")
    p = PRESETS[args.env]
    for label, kind, hidden, freeze, compiled, prior in ROWS:
        if kind not in kinds | {"relu-mlp"}:  # the baseline's row always: the ratios are to it
            continue
        if prior and not (any(p.sign_flips) and p.turned_torso):  # only Ant has the signs and the turned torso
            continue
        if compiled:
            runtime.RunSettings(device=str(device), compile=True).check()  # a C++ compiler for the CPU's kernels
        times, model = seconds_per_update(args.env, kind, hidden, freeze, args.updates, args.repeats, prior,
                                          device, compiled)
        median = statistics.median(times)
        baseline = baseline or median
        print(f"| {label} | {min(times):.4f} | {median:.4f} | {median / baseline:.2f}x |", flush=True)
        if freeze:  # the freeze changes updates only: one predict row per actor
            predicts.append((label, seconds_per_predict(model, args.predicts)))
            if kind == "rpp" and hidden == "rl-code" and not compiled and not prior:
                predicts.append((f"{label}, no inference caches",
                                 seconds_per_predict(model, args.predicts, caches=False)))
    print(f"\npredict, one observation, deterministic (median of {args.predicts} calls)")
    print("| model | ms per predict | ratio to relu-mlp |")
    print("|---|---|---|")
    for label, seconds in predicts:
        print(f"| {label} | {seconds * 1e3:.2f} | {seconds / predicts[0][1]:.2f}x |")


if __name__ == "__main__":
    main()
