"""The measurements behind the pendulum's decisions (docs/ode.md): the data integrator's convergence, the training
solver's accuracy, initial flows that escape without the state scale, and the cost of a full-size epoch.

    .venv/bin/python benchmarks/bench_pendulum.py [--parts tolerance,solver,init,epoch] [--systems 100]
        [--epochs 3] [--threads 1] [--device cpu|cuda|mps]

- ``tolerance``: dopri5 at rtol = atol = 1e-6 ... 1e-11 on ``--systems`` 30 s trajectories: seconds, the largest
  relative energy drift, and the relative error against rtol = atol = 1e-12 (the largest, and the geometric mean
  over systems and times).
- ``solver``: the true field rolled over the 500 training chunks (0.8 s) by dopri5 at rtol 1e-4 (the authors'
  training tolerance) and by RK4 with steps of 0.2 s and 0.1 s: field evaluations, MSE and mean relative error
  against the data; then the true field rolled out for 30 s by dopri5 at rtol 1e-4 (the evaluation tolerance),
  whose rollout error against the data-tolerance truth is the floor of Table 2.2's metric.
- ``init``: of 8 seeds, how many freshly built EMLP-O(2) HNNs (128 channels, 3 layers) have a flow that leaves
  every bound within a 0.8 s chunk (dopri5 fails), with and without the per-vector state scale.
- ``epoch``: seconds of one full-size training epoch (500 chunks, one batch, 128 channels, 3 layers) for the MLP-
  and EMLP-O(2) HNNs, dopri5 at rtol 1e-4 against RK4 at 0.2 s, float32 and float64 (median of ``--epochs``
  after one warm-up epoch; the field evaluations of an epoch beside it).

``--device`` integrates, rolls out and trains on that device; the data (seeded trajectories at the data tolerance)
are made on the CPU as the data sets make them, and the errors are computed against them there in float64. Every
timing starts and ends with the device idle (an epoch is timed from the end of the one before it). On MPS, which
has no float64, the float64 rows and the tolerance part are left out. No mixed precision: the solvers' accuracy is
what is measured.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import benchcommon as bc
from symkit.datasets import pendulum as P
from symkit.lab.experiments.pendulum import build_dynamics, state_scale
from symkit.nn import rollout, rollout_error
from symkit.train import train_dynamics


def _relative(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a - b).norm(dim=-1) / (a.norm(dim=-1) + b.norm(dim=-1))


def _dtypes(device: torch.device) -> tuple[torch.dtype, ...]:
    return (torch.float32, torch.float64) if bc.has_float64(device) else (torch.float32,)


def tolerance(systems: int, device: torch.device) -> None:
    if not bc.has_float64(device):
        print(f"data integrator: not run on {device} (it integrates in float64)")
        return
    z0 = P.sample_initial_conditions(systems, torch.Generator().manual_seed(0), device=device)
    grid = P.trajectory_times(device=device)
    ref = P.integrate(z0, grid, rtol=1e-12, atol=1e-12)
    print(f"data integrator: dopri5 on {systems} systems over 30 s, against rtol = atol = 1e-12, on "
          f"{bc.describe(device)}")
    print(f"{'tol':>7} {'seconds':>8} {'energy drift':>13} {'max error':>10} {'geo. error':>10}")
    for tol in (1e-6, 1e-8, 1e-9, 1e-10, 1e-11):
        bc.synchronize(device)
        start = time.perf_counter()
        z = P.integrate(z0, grid, rtol=tol, atol=tol)
        bc.synchronize(device)
        seconds = time.perf_counter() - start
        H = P.hamiltonian(z)
        drift = float(((H - H[:, :1]).abs() / H[:, :1].abs()).max())
        err = _relative(z[:, 1:], ref[:, 1:]).clamp_min(1e-16)
        print(f"{tol:7.0e} {seconds:8.2f} {drift:13.2e} {float(err.max()):10.2e} {float(err.log().mean().exp()):10.2e}")


def solver(device: torch.device) -> None:
    chunks = P.pendulum_chunks(500, seed=0)
    print(f"training solver: the true field over the 500 training chunks (0.8 s), against the data, on "
          f"{bc.describe(device)}")
    print(f"{'solver':>24} {'dtype':>8} {'evaluations':>12} {'MSE':>9} {'mean rel. error':>16}")
    for dtype in _dtypes(device):
        for name, kw in (("dopri5 rtol 1e-4", {"method": "dopri5", "rtol": 1e-4, "atol": 1e-6}),
                         ("rk4 step 0.2 s", {"method": "rk4"}),
                         ("rk4 step 0.1 s", {"method": "rk4", "step_size": 0.1})):
            count = [0]

            def counted(z: torch.Tensor, count: list = count) -> torch.Tensor:
                count[0] += 1
                return P.vector_field(z)

            pred = rollout(counted, chunks.z0.to(device=device, dtype=dtype), chunks.times, **kw).cpu().double()
            mse = float((pred - chunks.z).square().mean())
            rel = float(_relative(pred[:, 1:], chunks.z[:, 1:]).mean())
            print(f"{name:>24} {str(dtype)[6:]:>8} {count[0]:12d} {mse:9.2e} {rel:16.2e}")
    test = P.pendulum_data(seed=0).test
    times, truth = P.long_trajectories(test.z0)  # the data: on the CPU, in float64
    z0 = test.z0.to(device=device, dtype=_dtypes(device)[-1])
    pred = rollout(P.vector_field, z0, times, rtol=1e-4, atol=1e-6).cpu().double()
    floor = float(rollout_error(pred, truth).log().mean().exp())
    print(f"the true field rolled out for 30 s at rtol 1e-4 (500 test systems): rollout error {floor:.2e}")


def init(device: torch.device) -> None:
    chunks = P.pendulum_chunks(500, seed=0)
    scale = state_scale(chunks)
    print(f"initial EMLP-O(2) HNNs (128 channels, 3 layers) whose flow escapes within a 0.8 s chunk, of 8 seeds, on "
          f"{bc.describe(device)}")
    for dtype in _dtypes(device):
        for scaled in (False, True):
            failed = 0
            for seed in range(8):
                torch.manual_seed(seed)
                field = build_dynamics("hnn", "emlp-o2", input_scale=scale if scaled else None, device=device,
                                       dtype=dtype)
                try:
                    with torch.no_grad():
                        rollout(field, chunks.z0.to(device=device, dtype=dtype), chunks.times)
                except AssertionError:  # torchdiffeq: "underflow in dt", the state left every bound
                    failed += 1
            print(f"  {str(dtype)[6:]:>8}, {'with' if scaled else 'without'} the state scale: {failed} of 8")


def epoch(epochs: int, device: torch.device) -> None:
    chunks = P.pendulum_chunks(500, seed=0)
    scale = state_scale(chunks)
    print(f"one full-size epoch (500 chunks in one batch, 128 channels, 3 layers), median of {epochs} after a "
          f"warm-up, on {bc.describe(device)}")
    print(f"{'model':>12} {'solver':>8} {'dtype':>8} {'s/epoch':>8} {'evaluations':>12}")
    for model in ("mlp", "emlp-o2"):
        for method in ("dopri5", "rk4"):
            for dtype in _dtypes(device):
                torch.manual_seed(0)
                field = build_dynamics("hnn", model, input_scale=scale, device=device, dtype=dtype)
                count = [0]
                forward = field.forward

                def counted(z: torch.Tensor, forward=forward, count: list = count) -> torch.Tensor:
                    count[0] += 1
                    return forward(z)

                field.forward = counted
                marks: list[tuple[float, int]] = []  # (time, field evaluations) at the end of each epoch

                def mark(trainer, epoch: int, record: dict, marks: list = marks, count: list = count) -> None:
                    bc.synchronize(device)  # the epoch's work on the device is done
                    marks.append((time.perf_counter(), count[0]))

                train_dynamics(field, chunks, epochs=epochs + 1, method=method, hooks=[mark])  # 1: warm-up
                seconds = statistics.median(b[0] - a[0] for a, b in zip(marks, marks[1:]))
                evaluations = (marks[-1][1] - marks[0][1]) / epochs
                print(f"{'hnn ' + model:>12} {method:>8} {str(dtype)[6:]:>8} {seconds:8.2f} {evaluations:12.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="tolerance,solver,init,epoch")
    parser.add_argument("--systems", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    bc.add_device_option(parser)
    args = parser.parse_args()
    device = bc.device_of(args)
    torch.set_num_threads(args.threads)
    parts = args.parts.split(",")
    for part in parts:
        if part == "tolerance":
            tolerance(args.systems, device)
        elif part == "solver":
            solver(device)
        elif part == "init":
            init(device)
        elif part == "epoch":
            epoch(args.epochs, device)
        else:
            raise SystemExit(f"unknown part {part!r}; expected tolerance, solver, init or epoch")
        print()


if __name__ == "__main__":
    main()
