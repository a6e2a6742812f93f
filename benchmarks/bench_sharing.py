"""Learned sharing vs Augerino with 3, 15 and 75 sampled transformations (Yeh et al. 2022, Table A1).

Standard sum of numbers, sequence length 10. Every model is trained in this run on the same splits; then each is
loaded in a fresh subprocess that times ``--repeats`` forward passes on a batch of ``--batch`` test sequences and
reports the process's peak resident memory during inference (the CPU analogue of the paper's GPU memory column) and
its increase over the resident size just before inference. Prints one table; ratios are relative to the
learned-sharing model.

``--device`` trains and times every model on that device (data, models and Augerino's sampling generator, as
``symkit reproduce sharing-sum --device`` does); each timed run of forward passes starts and ends with the device
idle, and the memory columns are then the CUDA allocator's peak during inference and its rise (on MPS, the driver's
allocation after inference and its rise). The fits are not mixed precision, so neither is this benchmark.

    python benchmarks/bench_sharing.py            # the Table A1 setting, reduced to fit 2 CPU cores
    python benchmarks/bench_sharing.py --quick    # a smoke run in well under a minute
    python benchmarks/bench_sharing.py --device cuda
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

import benchcommon as bc
from symkit.lab import runtime

HERE = os.path.dirname(os.path.abspath(__file__))


def build(kind: str, cfg_dict: dict, labels: list[int] | None, samples: int) -> torch.nn.Module:
    """The model of one row, on the current run's device (``runtime.using``)."""
    from symkit.discover.baselines import AugerinoPermutation
    from symkit.lab.experiments.sharing_sum import SumSharingConfig, _net

    cfg = SumSharingConfig(**cfg_dict)
    if kind == "ours":
        return _net(cfg, labels, seed=0)
    return AugerinoPermutation(_net(cfg, None, seed=0), cfg.length, n_samples=samples, device=runtime.device())


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def measure(spec_path: str) -> None:
    """Subprocess entry: load one trained model, time inference, report the resident-memory peak (Linux /proc).

    ``ru_maxrss`` is inherited across fork and exec, so the peak is read from ``VmHWM`` after resetting it through
    ``/proc/self/clear_refs``; ``peak_mib`` is the process's peak during inference, ``delta_mib`` its increase over
    the resident size just before inference. On a GPU they are the device's memory instead (module docstring).
    """
    with open(spec_path) as f:
        spec = json.load(f)
    torch.set_num_threads(1)
    device = torch.device(spec["device"])
    with runtime.using(runtime.RunSettings(device=spec["device"])):
        model = build(spec["kind"], spec["cfg"], spec["labels"], spec["samples"])
    model.load_state_dict(torch.load(spec["state"], map_location=device, weights_only=True))
    model.eval()
    tokens = torch.load(spec["tokens"], map_location=device, weights_only=True)
    memory = None
    if device.type == "cpu":
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak-RSS counter of this process
        before = _status_kib("VmRSS")
    else:
        memory = bc.MemoryRise(device)
    with torch.no_grad():
        model(tokens)  # warm-up
        bc.synchronize(device)
        t0 = time.perf_counter()
        for _ in range(spec["repeats"]):
            model(tokens)
        bc.synchronize(device)
        dt = (time.perf_counter() - t0) / spec["repeats"]
    if memory is None:
        peak = _status_kib("VmHWM")
        out = {"peak_mib": peak / 1024, "delta_mib": (peak - before) / 1024}
    else:
        delta = memory.mb()
        out = {"peak_mib": memory.before / 2**20 + delta, "delta_mib": delta}
    print(json.dumps({"ms": dt * 1000, **out}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--embed", type=int, default=100, help="embedding width (paper: 500)")
    parser.add_argument("--outer-steps", type=int, default=100, help="outer (hypergradient) steps of the search")
    parser.add_argument("--refit-steps", type=int, default=1500, help="Adam steps for every fit on T and V")
    bc.add_device_option(parser)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure)
        return
    device = bc.device_of(args)
    with runtime.using(bc.settings(args)):
        run(args, device)


def run(args: argparse.Namespace, device: torch.device) -> None:
    """Train every model on ``device`` (the current run settings), then time each in a fresh subprocess."""
    os.environ.setdefault("SYMKIT_PROGRESS", "0")
    torch.set_num_threads(1)
    from symkit.actions.partition import partition_distance
    from symkit.discover.baselines import AugerinoPermutation
    from symkit.discover.bilevel import fit_model_parameters
    from symkit.lab.experiments.sharing_sum import (
        SumSharingConfig,
        _net,
        discover,
        fit_fixed,
        l1,
        make_splits,
        test_errors,
    )

    if args.quick:
        cfg = SumSharingConfig(length=10, embed=16, hidden=8, inits=1, inner_steps=5, outer_steps=5, refit_steps=100,
                               refit_patience=50, n_test=500, n_hyper=100, seed=args.seed)
        counts, repeats = (3, 15), min(args.repeats, 10)
    else:
        cfg = SumSharingConfig(length=10, embed=args.embed, hidden=50, inits=1, inner_steps=20,
                               outer_steps=args.outer_steps, refit_steps=args.refit_steps,
                               refit_patience=max(100, args.refit_steps // 5), n_test=20000, seed=args.seed)
        counts, repeats = (3, 15, 75), args.repeats
    s = make_splits(cfg)
    rows = []
    tmp = tempfile.mkdtemp(prefix="bench_sharing_")
    tokens_path = os.path.join(tmp, "tokens.pt")
    torch.save(s.tokens["test"][: args.batch].clone(), tokens_path)

    def record(name: str, kind: str, model: torch.nn.Module, labels, samples: int, train_s: float, extra: str = ""):
        state = os.path.join(tmp, f"{name}.pt")
        torch.save(model.state_dict(), state)
        spec = {"kind": kind, "cfg": dataclasses.asdict(cfg), "labels": labels, "samples": samples, "state": state,
                "tokens": tokens_path, "repeats": repeats, "device": str(device)}
        spec_path = os.path.join(tmp, f"{name}.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--measure", spec_path],
                             capture_output=True, text=True, check=True)
        m = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append({"method": name, "mse": test_errors(model, s)["mse"], "train_s": train_s, **m, "note": extra})
        r = rows[-1]
        print(f"done: {name}: test l2 {r['mse']:.5f}, {r['ms']:.3f} ms, peak {r['peak_mib']:.1f} MiB", flush=True)

    t0 = time.time()
    labels, _ = discover(cfg, s)
    ours = _net(cfg, [int(v) for v in labels], seed=0)
    fit_fixed(ours, cfg, s)
    record("Ours (learned sharing)", "ours", ours, [int(v) for v in labels], 0, time.time() - t0,
           f"PD={partition_distance(labels, s.labels_gt)}, {len(set(labels.tolist()))} clusters")
    for n in counts:
        t0 = time.time()
        aug = AugerinoPermutation(_net(cfg, None, seed=0), cfg.length, n_samples=n, device=device)
        aug.generator = torch.Generator(device=device).manual_seed(cfg.seed)
        fit_model_parameters(aug, lambda m: l1(m, s, "trainval") + m.regularizer(), lambda m: l1(m, s, "hyper"),
                             steps=cfg.refit_steps, lr=1e-3, patience=cfg.refit_patience)
        record(f"Augerino ({n} transformations)", "augerino", aug, None, n, time.time() - t0)

    ref = rows[0]
    print(f"\nsum of numbers, length {cfg.length}, embed {cfg.embed}, hidden {cfg.hidden}; inference on a batch of "
          f"{args.batch}, mean of {repeats} runs, 1 thread, on {bc.describe(device)}"
          + ("" if device.type == "cpu" else f"; memory: {bc.MemoryRise.what(device)}") + "\n")
    header = (f"{'method':34s} {'test l2':>9s} {'x ours':>7s} {'infer ms':>9s} {'x ours':>7s} "
              f"{'peak MiB':>9s} {'+infer MiB':>10s} {'train s':>8s}  note")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['method']:34s} {r['mse']:9.5f} {r['mse'] / ref['mse']:7.2f} {r['ms']:9.3f} "
              f"{r['ms'] / ref['ms']:7.2f} {r['peak_mib']:9.1f} {r['delta_mib']:10.1f} {r['train_s']:8.1f}  "
              f"{r['note']}")
    print("\npaper (Table A1, GPU): Augerino 3 / 15 / 75: l2 .0350 / .0257 / .0197, 4.00 / 5.13 / 22.0 ms, "
          "727 / 1101 / 2965 MiB; Ours .0101, 1.73 ms, 645 MiB")


if __name__ == "__main__":
    main()
