"""Equivariant-basis solver benchmark: symkit against the reference emlp package, measured in the same run.

Run: ``.venv/bin/python benchmarks/bench_solver.py [--quick] [--no-tables] [--emlp-timeout S] [--device ...]``.

For each case it times a cold solve (in-memory and disk caches off) of the full orthonormal basis Q in symkit, and
the same call in emlp 1.0.3 in a fresh subprocess of its own interpreter (``.bench/emlp-venv``, JAX import and
warm-up excluded). "x faster" is emlp time / symkit time. The two bases are compared as subspaces: "subspace gap"
is 1 - the smallest cosine of their principal angles (0: the same subspace; where the two libraries use different
generators, as for the Rubik's cube, the subspaces may legitimately differ). Big direct sums also time building
the lazy projector of rep >> rep and applying it to one vector. Finally all cells of Tables A.1-A.8 (and the extra
facts) are computed with ``rank()``, including the Rubik's cube T4, and the total is printed. Timings on a shared
machine are noisy; compare the ratios of one run.

Everything timed here is float64 numpy / scipy work (basis solves, lazy projectors, ranks), which runs on the CPU:
``--device`` is taken like every benchmark's and checked, and the output says the work ran on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

os.environ["SYMKIT_CACHE"] = "0"
os.environ.setdefault("SYMKIT_PROGRESS", "0")

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import benchcommon as bc  # noqa: E402
from symkit.groups import O13, SO, SU, O, RubiksCube, S, SO11p, SO13p, Sp, Z  # noqa: E402,F401
from symkit.lab.experiments.thesis_tables import compute_rank, thesis_cells  # noqa: E402
from symkit.linalg.operators import KronSumOp  # noqa: E402
from symkit.reps import T, V, clear_memory_cache  # noqa: E402,F401

ROOT = Path(__file__).resolve().parents[1]
EMLP_PY = ROOT / ".bench" / "emlp-venv" / "bin" / "python"
#: both sides on one thread: symkit through threadpoolctl (BLAS) in this process; emlp's JAX (XLA's Eigen pool and
#: intra-op threads) and its numpy BLAS through the environment of its subprocess
PINNED_ENV = {
    "XLA_FLAGS": "--xla_force_host_platform_device_count=1 --xla_cpu_multi_thread_eigen=false "
                 "intra_op_parallelism_threads=1",
    "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NPROC": "1",
}

# (label, symkit group expr, emlp group expr, p, q) -- the same generators in both libraries where they agree
CELLS = [
    ("Z(4) T5", "Z(4)", "Z(4)", 5, 0),
    ("S(4) T5", "S(4)", "S(4)", 5, 0),
    ("S(5) T5", "S(5)", "S(5)", 5, 0),
    ("S(6) T4", "S(6)", "S(6)", 4, 0),
    ("Rubik(ref) T2", "RubiksCube('reference')", "RubiksCube()", 2, 0),
    ("Rubik(ref) T3", "RubiksCube('reference')", "RubiksCube()", 3, 0),
    ("SO(3) T5", "SO(3)", "SO(3)", 5, 0),
    ("SO(3) T6", "SO(3)", "SO(3)", 6, 0),
    ("SO(4) T6", "SO(4)", "SO(4)", 6, 0),
    ("O(3) T6", "O(3)", "O(3)", 6, 0),
    ("SO+(1,3) T(4,0)", "SO13p()", "SO13p()", 4, 0),
    ("O(1,3) T(3,1)", "O13()", "O13()", 3, 1),
    ("Sp(2) T(4,0)", "Sp(2)", "Sp(2)", 4, 0),
    ("SU(3) T(3,3)", "SU(3)", "SU(3)", 3, 3),
]
QUICK = {"Z(4) T5", "S(5) T5", "SO(3) T5", "Sp(2) T(4,0)", "Rubik(ref) T2"}

SUMS = [("SO(3)", "SO(3)"), ("S(6)", "S(6)")]

EMLP_DRIVER = r"""
import json, os, sys, time
os.environ["TQDM_DISABLE"] = "1"
import numpy as np
from emlp.groups import *
from emlp.reps import V, T
case = json.loads(sys.argv[1])
T(2)(SO(2)).equivariant_basis()  # warm up JAX
G = eval(case["group"])
t0 = time.perf_counter()
if case["kind"] == "cell":
    rep = T(case["p"], case["q"])(G)
    Q = np.asarray(rep.equivariant_basis())
    out = {"time": time.perf_counter() - t0, "rank": int(Q.shape[-1])}
    if case.get("save") and Q.size <= 5e7:
        np.save(case["save"], Q)
else:
    rep = 100 * V(G) + 30 * V(G) ** 2 + 10 * V(G) ** 3
    if case["kind"] == "sum_basis":
        Q = rep.equivariant_basis()
        Q = np.asarray(Q @ np.eye(Q.shape[-1]))
        out = {"time": time.perf_counter() - t0, "rank": int(Q.shape[-1])}
    else:
        hom = rep >> rep
        P = hom.equivariant_projector()
        v = np.random.default_rng(0).standard_normal(hom.size())
        y = np.asarray(P @ v)
        out = {"time": time.perf_counter() - t0, "rank": -1}
print("RESULT " + json.dumps(out))
"""


def subspace_gap(Q: np.ndarray, Q_ref: np.ndarray) -> float:
    """How far apart the column spans of two orthonormal bases are: 1 - (smallest cosine of their principal
    angles), 0 for the same subspace, 1 when a direction of one is orthogonal to the other or the ranks differ."""
    if Q.shape != Q_ref.shape:
        return 1.0
    if Q.shape[1] == 0:
        return 0.0
    Qr = np.linalg.qr(Q_ref)[0]  # emlp's bases are orthonormal up to its solver's tolerance
    cosines = np.linalg.svd(np.conj(Q).T @ Qr, compute_uv=False)
    return float(1.0 - cosines.min())


def run_emlp(case: dict, timeout: float) -> tuple[float | None, str]:
    if not EMLP_PY.exists():
        return None, "emlp not installed"
    env = dict(os.environ, TQDM_DISABLE="1", **PINNED_ENV)
    try:
        out = subprocess.run(
            [str(EMLP_PY), "-c", EMLP_DRIVER, json.dumps(case)],
            capture_output=True, text=True, timeout=timeout, env=env,
        )
    except subprocess.TimeoutExpired:
        return None, f">{timeout:.0f} s (timeout)"
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
            return float(res["time"]), f"rank {res['rank']}" if res["rank"] >= 0 else ""
    err = (out.stderr.strip().splitlines() or ["?"])[-1]
    return None, f"emlp failed: {err[:80]}"


def time_symkit(fn) -> tuple[float, object]:
    clear_memory_cache()
    t0 = time.perf_counter()
    res = fn()
    return time.perf_counter() - t0, res


def fmt(t: float | None) -> str:
    return "-" if t is None else (f"{t * 1000:.1f} ms" if t < 1 else f"{t:.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few cases only")
    ap.add_argument("--no-tables", action="store_true", help="skip the all-tables timing")
    ap.add_argument("--emlp-timeout", type=float, default=600.0)
    bc.add_device_option(ap, cpu_only="all of this benchmark (float64 numpy / scipy basis solves)")
    args = ap.parse_args()
    device = bc.device_of(args)
    threadpool_limits(1)
    print("basis solves, projectors and ranks: float64 numpy / scipy, on the CPU"
          + ("" if device.type == "cpu" else f" (--device {args.device} does not apply to them)"))
    print(f"emlp interpreter: {EMLP_PY if EMLP_PY.exists() else 'emlp not installed'}")
    print("threads: symkit 1 (threadpoolctl: BLAS); emlp 1 (" + ", ".join(f"{k}={v}" for k, v in PINNED_ENV.items())
          + ")")
    rows = []
    for label, gs, ge, p, q in CELLS:
        if args.quick and label not in QUICK:
            continue
        G = eval(gs)
        t_ours, Q = time_symkit(lambda G=G, p=p, q=q: T(p, q, G).equivariant_basis())
        saved = ROOT / ".bench" / "emlp_basis.npy"
        saved.unlink(missing_ok=True)
        t_ref, note = run_emlp({"kind": "cell", "group": ge, "p": p, "q": q, "save": str(saved)}, args.emlp_timeout)
        if saved.exists():
            note += f", subspace gap {subspace_gap(np.asarray(Q), np.load(saved)):.1e}"
        rows.append((label, t_ours, Q.shape[1], t_ref, note))
        msg = f"  {label:18s} symkit {fmt(t_ours):>10s} (rank {Q.shape[1]})   emlp {fmt(t_ref):>10s} {note}"
        print(msg, flush=True)
    for gs, ge in SUMS:
        G = eval(gs)

        def basis(G=G):
            return (100 * V(G) + 30 * V(G) ** 2 + 10 * V(G) ** 3).equivariant_basis()

        def projector(G=G):
            rep = 100 * V(G) + 30 * V(G) ** 2 + 10 * V(G) ** 3
            hom = rep >> rep
            return hom.equivariant_projector() @ np.random.default_rng(0).standard_normal(hom.size)

        t_ours, Q = time_symkit(basis)
        t_ref, note = run_emlp({"kind": "sum_basis", "group": ge}, args.emlp_timeout)
        rows.append((f"{gs} 100V+30V²+10V³ Q", t_ours, Q.shape[1], t_ref, note))
        print(f"  {rows[-1][0]:18s} symkit {fmt(t_ours):>10s}   emlp {fmt(t_ref):>10s} {note}", flush=True)
        if args.quick:
            continue
        t_ours, _ = time_symkit(projector)
        t_ref, note = run_emlp({"kind": "sum_proj", "group": ge}, args.emlp_timeout)
        rows.append((f"{gs} (that >> that) P@v", t_ours, -1, t_ref, note))
        print(f"  {rows[-1][0]:18s} symkit {fmt(t_ours):>10s}   emlp {fmt(t_ref):>10s} {note}", flush=True)

    print()
    print(f"{'case':28s} {'rank':>6s} {'symkit':>11s} {'emlp 1.0.3':>12s} {'x faster':>9s}")
    for label, t_ours, r, t_ref, note in rows:
        ratio = f"{t_ref / t_ours:9.1f}" if t_ref else f"{'-':>9s}"
        rr = "" if r < 0 else str(r)
        print(f"{label:28s} {rr:>6s} {fmt(t_ours):>11s} {fmt(t_ref) if t_ref else note:>12s} {ratio}")

    print("\nSO(3) high-order bases (cold, symkit only; issue: T(10) under 1 s, T(11) and T(12) without running out "
          "of memory):")
    with threadpool_limits(limits=1):
        for k in (8, 9, 10) if not args.quick else (8, 9):
            t, Q = time_symkit(lambda k=k: T(k, 0, SO(3)).equivariant_basis())
            print(f"  T({k}): {Q.shape[0]} x {Q.shape[1]} in {fmt(t)}")
        # from 11 slots the coupling path: T(11) dense (2.2 GB), T(12) and T(13) lazy (17.9 GB and 145 GB dense)
        for k in (11, 12, 13) if not args.quick else (12,):
            rep = T(k, 0, SO(3))
            t_rank, r = time_symkit(lambda rep=rep: rep.rank())
            v = np.random.default_rng(0).standard_normal(rep.size)
            t_proj, y = time_symkit(lambda rep=rep, v=v: rep.equivariant_projector() @ v)
            invariant = max(float(np.abs(KronSumOp([A] * k).matvec(y)).max()) for A in SO(3).lie_algebra)
            line = f"  T({k}): rank {r} in {fmt(t_rank)}, projector built and applied in {fmt(t_proj)} " \
                   f"(|dρ(A) P v|max {invariant:.0e})"
            if k == 11:
                clear_memory_cache()
                t_basis, Q = time_symkit(lambda rep=rep: rep.equivariant_basis())
                line += f"; dense basis {Q.shape[0]} x {Q.shape[1]} in {fmt(t_basis)}"
                del Q
                clear_memory_cache()
            print(line + f"; peak RSS so far {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.1f} GB")

    print("\nSO+(1,1) projectors of T(p, q), p + q <= 10 (cold; built and applied to one vector; issue: under 1 s "
          "each):")
    with threadpool_limits(limits=1):
        worst = (0.0, "")
        for k in range(1, 11 if not args.quick else 7):
            line = []
            for p in range(k + 1):
                rep = T(p, k - p, SO11p())
                v = np.random.default_rng(0).standard_normal(rep.size)
                t, _ = time_symkit(lambda rep=rep, v=v: rep.equivariant_projector() @ v)
                worst = max(worst, (t, f"T({p},{k - p})"))
                line.append(fmt(t))
            print(f"  p+q={k:2d}: " + ", ".join(line))
        print(f"  slowest: {worst[1]} {fmt(worst[0])}")

    if not args.no_tables and not args.quick:
        print("\nAll cells of Tables A.1-A.8 and the extra facts (rank(), cold caches):")
        t_all = time.perf_counter()
        per_table: dict[str, float] = {}
        slowest = []
        for cell in thesis_cells(tier="all"):
            clear_memory_cache()
            t0 = time.perf_counter()
            r = compute_rank(cell)
            dt = time.perf_counter() - t0
            per_table[cell.table] = per_table.get(cell.table, 0.0) + dt
            slowest.append((dt, f"{cell.table} {cell.group} {cell.rep} = {r}"))
        total = time.perf_counter() - t_all
        for t, s in sorted(per_table.items()):
            print(f"  Table {t:6s} {fmt(s):>10s}")
        print("  slowest cells: " + "; ".join(f"{s} ({fmt(t)})" for t, s in sorted(slowest, reverse=True)[:5]))
        print(f"  total {fmt(total)} for {len(slowest)} cells (target: under 10 minutes)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
