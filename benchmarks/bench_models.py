"""EMLP training speed and memory against an MLP of equal width, and against emlp's own EMLP, in one run.

Run: ``.venv/bin/python benchmarks/bench_models.py [--quick | --full] [--emlp-timeout S] [--device cpu|cuda|mps]``.

Model (the thesis's sizes, Sec. 2.6): input ``5 Scalar + 5 V``, output ``T(2)``, 3 hidden layers of ``ch`` channels
(``uniform_rep``), Adam (torch's fused kernel for every symkit model, MLP included, as symkit's Trainer uses it:
``symkit.train.fused_options``), MSE, float32, one thread on every side. For each group, width and batch it times,
each model in a fresh subprocess: the forward pass (no gradients), one training step (forward, backward, Adam), and
its memory. Memory is the tensor memory of a training step after the first (``benchcommon.TensorMemory``: parameters,
buffers and Adam's state plus the peak of what the step allocates, on any device what a CUDA allocator's peak counts);
the rise of the process's resident memory over the first step is printed beside it, but it also holds what the
libraries load on first use (about 25 MB here, the same for every model), which shrinks every ratio. Models: EMLP with
bilinear layers, EMLP without them, RPP-EMLP, and ``MLP(ch=ch)`` (the MLP of equal width); and the EMLP with and
without bilinear layers under ``torch.compile`` (``-compiled``: Inductor, compiled in each process before timing,
about a minute; the bilinear layers then run their batch-last form; no tensor-memory peak for them, since a dispatch
mode sends a compiled model back to eager). The emlp column runs emlp
1.0.3's objax EMLP on the same model and batch, its step jitted (compilation excluded) in ``.bench/emlp-venv`` (see
docs/core.md); without it the column reads "not installed". A per-layer table times forward plus backward of each
layer type at ch=384, batch 500 against ``nn.Linear`` of the same size and against the layer's own products with its
weights (dense matmuls of their shapes, timed beside it: what the layer costs over its arithmetic).

Every symkit process first calls ``symkit.lab.allocator.keep_freed_memory()`` (as the ``symkit`` command does: freed
memory stays in the process, so a step does not fault its temporaries' pages in again); ``--glibc-defaults`` leaves
the allocator as it is, to compare.

Default: ch=384, batch 500 for O(3), SO(3), O(1,3), S(5), plus ch 128 and 1024 and batch 32 for O(3); ``--full``:
every width and batch for every group; ``--quick``: O(3) at ch=384, batch 500. Timings on a shared machine are
noisy, and a ratio of two runs made seconds apart moves with the machine's speed (10-20% here): so the four models
are also built side by side in one process and their steps timed in turn for ``ROUNDS`` rounds, and the acceptance
table gives the median over rounds of each round's ratio to the MLP (with the least and greatest on the model's
line).

``--device`` puts symkit's models and data on that device (timings synchronised with it; the rise column is then the
device's memory, see ``benchcommon.MemoryRise``); emlp's JAX runs on the CPU in its own venv whatever the device, so its
column compares against a CPU run. There is no ``--precision``: symkit's equivariant layers take inputs in their
parameters' dtype only, so bfloat16 autocast does not apply to them.
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

import benchcommon as bc

os.environ.setdefault("SYMKIT_PROGRESS", "0")

ROOT = Path(__file__).resolve().parents[1]
EMLP_PY = ROOT / ".bench" / "emlp-venv" / "bin" / "python"
PINNED_ENV = {
    "XLA_FLAGS": "--xla_force_host_platform_device_count=1 --xla_cpu_multi_thread_eigen=false "
                 "intra_op_parallelism_threads=1",
    "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NPROC": "1",
}
GROUPS = {"O(3)": "O(3)", "SO(3)": "SO(3)", "O(1,3)": "O13()", "S(5)": "S(5)"}
MODELS = ("emlp", "emlp-recompute", "emlp-nobil", "rpp", "mlp", "emlp-compiled", "emlp-nobil-compiled")


def _cases(mode: str) -> list[tuple[str, int, int]]:
    if mode == "quick":
        return [("O(3)", 384, 500)]
    if mode == "full":
        return [(g, ch, b) for g in GROUPS for ch in (128, 384, 1024) for b in (32, 500)]
    return [(g, 384, 500) for g in GROUPS] + [("O(3)", 128, 500), ("O(3)", 1024, 500), ("O(3)", 384, 32)]


# ---------------------------------------------------------------------------------------------- one measurement
def _timed(fn, device, budget: float = 3.0, least: int = 3) -> float:
    """Minimum wall time of ``fn`` over at least ``least`` calls and about ``budget`` seconds, each call timed from
    an idle ``device`` until its work there has finished."""
    times, start = [], time.perf_counter()
    while len(times) < least or (time.perf_counter() - start < budget and len(times) < 50):
        bc.synchronize(device)
        t = time.perf_counter()
        fn()
        bc.synchronize(device)
        times.append(time.perf_counter() - t)
    return min(times)


def _model_and_step(group: str, ch: int, batch: int, kind: str, dev, backend: str = "inductor"):
    """The model ``kind`` of ``group`` at width ``ch``, seeded data of ``batch`` samples, and its training step
    (forward, MSE, backward, Adam) and forward pass as closures."""
    import torch

    from symkit import groups
    from symkit.nn import EMLP, MLP, RPPEMLP
    from symkit.reps import Scalar, T, V
    from symkit.train import fused_options

    G = eval(GROUPS[group], vars(groups))
    rep_in, rep_out = 5 * Scalar + 5 * V(G), T(2, 0, G)
    compiled, kind = kind.endswith("-compiled"), kind.removesuffix("-compiled")
    if kind == "mlp":
        model = MLP(rep_in.size, rep_out.size, ch=ch, num_layers=3, device=dev)
    elif kind == "rpp":
        model = RPPEMLP(rep_in, rep_out, G, ch=ch, num_layers=3, device=dev)
    else:
        model = EMLP(rep_in, rep_out, G, ch=ch, num_layers=3, bilinear=kind != "emlp-nobil",
                     recompute=kind == "emlp-recompute", device=dev)
    gen = torch.Generator().manual_seed(0)  # seeded data drawn on the CPU (the same on every device), then placed
    x = torch.randn(batch, rep_in.size, generator=gen).to(dev)
    y = torch.randn(batch, rep_out.size, generator=gen).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, **fused_options(model.parameters()))
    if compiled:  # torch.compile of the model (Inductor; the bilinear layers run their batch-last form), Adam eager
        model = torch.compile(model, dynamic=False, backend=backend)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = (model(x) - y).square().mean()
        loss.backward()
        opt.step()

    def forward() -> None:
        with torch.no_grad():
            model(x)

    return model, opt, step, forward


def measure_symkit(group: str, ch: int, batch: int, kind: str, device: str = "cpu") -> dict:
    import torch

    torch.set_num_threads(1)
    dev = torch.device(device)
    bc.synchronize(dev)
    t0 = time.perf_counter()
    model, opt, step, forward = _model_and_step(group, ch, batch, kind, dev)
    bc.synchronize(dev)
    build = time.perf_counter() - t0
    memory = bc.MemoryRise(dev)
    step()
    rise = memory.mb()
    out = {"build_s": build, "rise_mb": rise, "params": sum(p.numel() for p in model.parameters()),
           "macs": multiply_adds(model)}
    if kind.endswith("-compiled"):  # a dispatch mode sends a compiled model back to eager: no tensor-memory peak
        return {**out, "step_ms": 1e3 * _timed(step, dev), "fwd_ms": 1e3 * _timed(forward, dev)}
    with bc.TensorMemory() as tensors:  # a second step: the optimiser's state exists, as in every later step
        step()
    peak = (bc.resident_bytes(model, opt) + tensors.peak) / 2**20
    return {**out, "step_ms": 1e3 * _timed(step, dev), "fwd_ms": 1e3 * _timed(forward, dev), "peak_mb": peak}


#: rounds of the interleaved timing: every model's step timed in turn, the order rotated each round
ROUNDS = 7


def measure_interleaved(group: str, ch: int, batch: int, device: str = "cpu", rounds: int = ROUNDS) -> dict:
    """The training step of every model in ``MODELS``, built side by side in one process and timed in turn for
    ``rounds`` rounds (about 0.4 s each, the order rotated every round): a drift in the machine's speed then
    moves the models of one round together, so the ratios of a round are comparable where separate runs are not.
    Returns ``{kind: [step ms per round]}``."""
    import torch

    torch.set_num_threads(1)
    dev = torch.device(device)
    steps = {kind: _model_and_step(group, ch, batch, kind, dev)[2] for kind in MODELS}
    for step in steps.values():  # warm up: the optimiser's state, the allocator's pools
        step()
        step()
    times: dict[str, list[float]] = {kind: [] for kind in MODELS}
    for r in range(rounds):
        for kind in MODELS[r % len(MODELS):] + MODELS[: r % len(MODELS)]:
            times[kind].append(1e3 * _timed(steps[kind], dev, budget=0.4))
    return times


def interleaved_ratios(times: dict | str) -> dict[str, tuple[float, float, float]] | str:
    """Per model, the median, least and greatest over rounds of its step time divided by the MLP's in that round."""
    if not isinstance(times, dict):
        return times
    out = {}
    for kind, ms in times.items():
        ratios = sorted(a / b for a, b in zip(ms, times["mlp"]))
        out[kind] = (ratios[len(ratios) // 2], ratios[0], ratios[-1])
    return out


def multiply_adds(model) -> int:
    """Multiply-adds per sample of a forward pass in the matrix products (linear and bilinear layers; the gates and
    activations are elementwise and left out), as symkit does them: an EquivariantLinear applied through its
    irreducible basis counts that form's products (rotations and one product per irrep)."""
    from torch import nn

    from symkit.nn.emlp import BiLinear, EquivariantLinear
    from symkit.nn.rpp import RPPLinear

    total, skip = 0, set()
    for module in model.modules():
        if id(module) in skip:
            continue
        if isinstance(module, RPPLinear):  # one fused matmul with A + B
            total += module.equivariant.in_features * module.equivariant.out_features
            skip.update(id(m) for m in module.modules())
        elif isinstance(module, EquivariantLinear) and module.irrep_product is not None:
            total += module.irrep_product.multiply_adds
            skip.update(id(m) for m in module.modules())
        elif isinstance(module, (nn.Linear, EquivariantLinear)):
            total += module.in_features * module.out_features
        elif isinstance(module, BiLinear):
            total += module.multiply_adds
    return total


EMLP_SCRIPT = r"""
import json, sys, time
import numpy as np, jax, jax.numpy as jnp, objax
from emlp.groups import O, SO, O13, S
from emlp.reps import V, Scalar, T
import emlp.nn as enn
group, ch, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
G = eval(group)
t0 = time.perf_counter()
model = enn.EMLP(5 * Scalar + 5 * V, T(2), G, ch=ch, num_layers=3)
build = time.perf_counter() - t0
rng = np.random.default_rng(0)
x = jnp.asarray(rng.standard_normal((batch, 5 + 5 * G.d)), dtype=jnp.float32)
y = jnp.asarray(rng.standard_normal((batch, G.d ** 2)), dtype=jnp.float32)
opt = objax.optimizer.Adam(model.vars())
loss = lambda x, y: ((model(x) - y) ** 2).mean()
gv = objax.GradValues(loss, model.vars())
def train(x, y):
    g, v = gv(x, y)
    opt(1e-3, g)
    return v
step = objax.Jit(train, gv.vars() + opt.vars())
step(x, y)[0].block_until_ready()
times = []
start = time.perf_counter()
while len(times) < 3 or (time.perf_counter() - start < 3 and len(times) < 50):
    t = time.perf_counter(); step(x, y)[0].block_until_ready(); times.append(time.perf_counter() - t)
print(json.dumps({"build_s": build, "step_ms": 1e3 * min(times)}))
"""


def measure_emlp(group: str, ch: int, batch: int, timeout: float) -> dict | str:
    if not EMLP_PY.exists():
        return "not installed"
    env = {**os.environ, **PINNED_ENV}
    try:
        proc = subprocess.run([str(EMLP_PY), "-c", EMLP_SCRIPT, GROUPS[group], str(ch), str(batch)],
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return f"> {timeout:.0f} s"
    if proc.returncode != 0:
        return "failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:60]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _in_subprocess(*what: object) -> dict | str:
    env = {**os.environ, **PINNED_ENV}
    proc = subprocess.run([sys.executable, __file__, "--one", json.dumps(what)], capture_output=True, text=True,
                          env=env)
    if proc.returncode != 0:
        return "failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:60]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_big_permutation_layer(device: str = "cpu") -> dict:
    """EquivariantLinear(T(3), T(4)) of S(8): the basis of T(7), 2,097,152 x 877 (14.7 GB dense in float64), held as
    a gather; build, one forward and backward at batch 16, and the process's peak memory (and on a GPU the rise of
    the device's memory over build and step)."""
    import torch

    from symkit.groups import S
    from symkit.nn import EquivariantLinear
    from symkit.reps import T

    torch.set_num_threads(1)
    dev = torch.device(device)
    G = S(8)
    memory = bc.MemoryRise(dev) if dev.type != "cpu" else None
    t0 = time.perf_counter()
    layer = EquivariantLinear(T(3)(G), T(4)(G), device=dev)
    bc.synchronize(dev)
    build = time.perf_counter() - t0
    x = torch.randn(16, 8**3).to(dev)
    bc.synchronize(dev)
    t0 = time.perf_counter()
    layer(x).square().sum().backward()
    bc.synchronize(dev)
    step = time.perf_counter() - t0
    return {"build_s": build, "step_s": step, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "device_mb": memory.mb() if memory is not None else None}


# ---------------------------------------------------------------------------------------------- per layer
def weight_products(layer) -> list[tuple[int, int, int]]:
    """A layer's matrix products with its weights in a forward pass, ``(rows per sample, inner, columns)`` each (what
    no implementation of the layer avoids): ``nn.Linear``, ``RPPLinear`` (one fused matmul with ``A + B``) and a dense
    ``EquivariantLinear`` one ``(1, in, out)``; an ``EquivariantLinear`` applied through its irreducible basis one
    per irrep, ``(dim, copies in, copies out)``; ``BiLinear`` its ``weight_products``; a layer without weights (the
    gated nonlinearity) none."""
    from torch import nn

    from symkit.nn.emlp import BiLinear, EquivariantLinear
    from symkit.nn.rpp import RPPLinear

    layer = getattr(layer, "_orig_mod", layer)  # a torch.compile'd layer: the layer's own products
    if isinstance(layer, BiLinear):
        return list(layer.weight_products)
    if isinstance(layer, EquivariantLinear) and layer.irrep_product is not None:
        return [tuple(irrep) for irrep in layer.irrep_product.irreps]
    if isinstance(layer, RPPLinear):
        return [(1, layer.equivariant.in_features, layer.equivariant.out_features)]
    if isinstance(layer, (nn.Linear, EquivariantLinear)):
        return [(1, layer.in_features, layer.out_features)]
    return []


def products_step(products: list[tuple[int, int, int]], batch: int, dev):
    """Forward and backward of ``products`` as dense matmuls on fresh contiguous operands, ``(batch r, i) @ (i, c)``
    each, gradients for both operands (None for an empty list)."""
    import torch

    if not products:
        return None
    operands = [(torch.randn(batch * r, i, device=dev, requires_grad=True),
                 torch.randn(i, c, device=dev, requires_grad=True)) for r, i, c in products]

    def step() -> None:
        sum((a @ w).sum() for a, w in operands).backward()

    return step


def per_sample_step(products: list[tuple[int, int, int]], batch: int, dev):
    """A bilinear layer's per-sample products alone, forward and backward as three products each: ``C = A B``,
    ``dA = dC B^T``, ``dB = A^T dC`` (``(batch, p, q) @ (batch, q, r)`` and its two transposes) by
    ``symkit.nn.bilinear.per_sample_matmul`` (the fastest of its forms for each shape) on fresh contiguous operands
    (None for an empty list): what the per-sample part of the layer costs with no gather, copy or sum around it."""
    import torch

    from symkit.nn.bilinear import per_sample_matmul

    if not products:
        return None
    shapes = [s for p, q, r in products for s in ((p, q, r), (p, r, q), (q, p, r))]
    operands = [(torch.randn(batch, p, q, device=dev), torch.randn(batch, q, r, device=dev)) for p, q, r in shapes]

    def step() -> None:
        for a, b in operands:
            per_sample_matmul(a, b)

    return step


def layer_row(name: str, layer_ms: list[float], products_ms: list[float], linear_ms: list[float]
              ) -> tuple[str, float | None]:
    """A line of the per-layer table from one layer's times per round (its own products' and ``nn.Linear``'s in the
    same rounds): the least time, and the medians over rounds of each round's ratios; the ratio to the products is
    also returned (None for a layer without weights)."""
    import statistics

    to_linear = statistics.median(a / b for a, b in zip(layer_ms, linear_ms))
    ratio = statistics.median(a / b for a, b in zip(layer_ms, products_ms)) if products_ms else None
    own = f"{'-':>13}{'-':>18}" if ratio is None else f"{min(products_ms):>13.2f}{ratio:>17.2f}x"
    return f"{name:<24}{min(layer_ms):>9.2f}{to_linear:>12.2f}x{own}", ratio


def layer_table(device: str = "cpu", steps: dict | None = None, ch: int = 384, batch: int = 500,
                budget: float = 0.7, rounds: int = 3, backend: str = "inductor") -> list[str]:
    """Forward plus backward of each layer type at O(3), width ``ch``, ``batch`` samples, against ``nn.Linear`` of the
    same size and against the layer's own products with its weights (:func:`weight_products`, timed as dense matmuls
    of their shapes on fresh operands). Each layer and its products are timed one after the other, ``rounds`` times
    (``budget`` seconds each); the table gives each one's least time and the median over rounds of each round's
    ratio. With ``steps`` (the no-bilinear EMLP's and the MLP's step in ms at ch=384, batch 500) it adds the bound
    that follows for the EMLP: a step costs at least the no-bilinear step plus three bilinear layers' products.
    ``backend``: torch.compile's for the compiled bilinear layer's row (tests pass a fast one)."""
    import torch

    from symkit.groups import O
    from symkit.nn.emlp import BiLinear, EquivariantLinear, GatedNonlinearity, gated, uniform_rep
    from symkit.nn.rpp import RPPLinear

    torch.set_num_threads(1)
    dev = torch.device(device)
    G = O(3)
    hidden = uniform_rep(ch, G)
    wide = gated(hidden)
    x_h = torch.randn(batch, hidden.size).to(dev).requires_grad_(True)
    x_w = torch.randn(batch, wide.size).to(dev).requires_grad_(True)
    layers = [
        ("EquivariantLinear", EquivariantLinear(hidden, wide, device=dev), x_h),
        ("RPPLinear", RPPLinear(hidden, wide, device=dev), x_h),
        ("nn.Linear (same size)", torch.nn.Linear(hidden.size, wide.size, device=dev), x_h),
        ("BiLinear", BiLinear(wide, device=dev), x_w),
        ("BiLinear compiled", torch.compile(BiLinear(wide, device=dev), dynamic=False, backend=backend), x_w),
        ("GatedNonlinearity", GatedNonlinearity(hidden, device=dev), x_w),
    ]
    lines = [f"per layer, O(3), ch={ch} ({hidden.size} -> {wide.size} features), batch {batch}, forward + backward, "
             f"{bc.describe(dev)}; 'products': the layer's own products with its weights as dense matmuls of their "
             f"shapes, timed beside it ({rounds} rounds, ratios the median of each round's):",
             f"{'layer':<24}{'ms':>9}{'/ nn.Linear':>13}{'products ms':>13}{'layer / products':>18}"]
    layer_ms: dict[str, list[float]] = {name: [] for name, _, _ in layers}
    products_ms: dict[str, list[float]] = {name: [] for name, _, _ in layers}
    products = {name: products_step(weight_products(layer), batch, dev) for name, layer, _ in layers}
    bilinear = layers[3][1]
    per_sample = per_sample_step(bilinear.per_sample_products, batch, dev)
    per_sample_ms: list[float] = []
    for _ in range(rounds):
        for name, layer, x in layers:
            def run(layer=layer, x=x) -> None:
                layer(x).sum().backward()
            layer_ms[name].append(1e3 * _timed(run, dev, budget=budget))
            if products[name] is not None:
                products_ms[name].append(1e3 * _timed(products[name], dev, budget=budget))
            if name == "BiLinear" and per_sample is not None:
                per_sample_ms.append(1e3 * _timed(per_sample, dev, budget=budget))
    ratios = {}
    for name, _, _ in layers:
        line, ratios[name] = layer_row(name, layer_ms[name], products_ms[name], layer_ms["nn.Linear (same size)"])
        lines.append(line)
    shapes = ", ".join(f"{batch * r}x{i} @ {i}x{c}" for r, i, c in bilinear.weight_products)
    lines.append(f"(BiLinear's products: {shapes}; {sum(r * i * c for r, i, c in bilinear.weight_products):,} of its "
                 f"{bilinear.multiply_adds:,} multiply-adds per sample)")
    lines.append(f"acceptance: BiLinear forward + backward at most 1.5x its weight products: {ratios['BiLinear']:.2f}x "
                 f"eager, {ratios['BiLinear compiled']:.2f}x compiled (torch.compile: its batch-last form)")
    if per_sample_ms:
        import statistics

        floor = statistics.median((p + q) / w for p, q, w in zip(products_ms["BiLinear"], per_sample_ms,
                                                                   products_ms["BiLinear"]))
        psp = ", ".join(f"{p}x{q} @ {q}x{r}" for p, q, r in bilinear.per_sample_products)
        lines.append(f"BiLinear's per-sample products alone ({batch} x [{psp}], forward and backward as "
                     f"per_sample_matmul on fresh operands): {min(per_sample_ms):.2f} ms, "
                     f"{sum(p * q * r for p, q, r in bilinear.per_sample_products):,} multiply-adds per sample; "
                     f"weight products plus per-sample products: {floor:.2f}x the weight products (the layer's floor "
                     f"without gathers, copies or sums; the layer is {ratios['BiLinear'] / floor:.2f}x its floor)")
    if steps:
        bound = steps["emlp-nobil"] + 3 * min(products_ms["BiLinear"])
        lines.append(f"bound for this bilinear layer: an EMLP step does at least the no-bilinear step "
                     f"({steps['emlp-nobil']:.1f} ms) plus three layers' weight products: {bound:.1f} ms, "
                     f"{bound / steps['mlp']:.2f}x the MLP's {steps['mlp']:.1f} ms"
                     + (f"; the EMLP's step ({steps['emlp']:.1f} ms) is {steps['emlp'] / bound:.2f}x this bound "
                        f"(target: 1.25x)" if "emlp" in steps else ""))
        if "emlp-compiled" in steps and "emlp-nobil-compiled" in steps:
            compiled_bound = steps["emlp-nobil-compiled"] + 3 * min(products_ms["BiLinear"])
            lines.append(f"compiled (torch.compile of each model): the same bound from the compiled no-bilinear step "
                         f"({steps['emlp-nobil-compiled']:.1f} ms) is {compiled_bound:.1f} ms; the compiled EMLP's "
                         f"step ({steps['emlp-compiled']:.1f} ms) is {steps['emlp-compiled'] / compiled_bound:.2f}x "
                         f"it (target: 1.25x)")
        if per_sample_ms:
            floor_step = bound + 3 * min(per_sample_ms)
            lines.append(f"with the three layers' per-sample products too: {floor_step:.1f} ms, "
                         f"{floor_step / steps['mlp']:.2f}x the MLP's (the algorithm's floor at per_sample_matmul's "
                         f"speed)")
    return lines


# ---------------------------------------------------------------------------------------------- the report
def _fmt(r: dict | str, key: str, spec: str = ".1f") -> str:
    if isinstance(r, dict):
        return format(r[key], spec) if key in r else "-"
    return str(r)


def _ratio(a: dict | str, b: dict | str, key: str) -> str:
    if not (isinstance(a, dict) and isinstance(b, dict)) or key not in a or key not in b or b[key] <= 0:
        return "-"
    return f"{a[key] / b[key]:.2f}x"


def _step_ratio(rounds: dict | str, results: dict, kind: str) -> str:
    """The interleaved rounds' median ratio to the MLP where they ran, else the ratio of the two separate runs."""
    if isinstance(rounds, dict):
        return f"{rounds[kind][0]:.2f}x"
    return _ratio(results[kind], results["mlp"], "step_ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true")
    mode.add_argument("--full", action="store_true")
    parser.add_argument("--emlp-timeout", type=float, default=900.0)
    bc.add_device_option(parser)
    parser.add_argument("--glibc-defaults", action="store_true",
                        help="leave glibc's allocator thresholds as they are (default: symkit.lab.allocator."
                             "keep_freed_memory() in every symkit process, as the symkit command does)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.one:
        os.environ["SYMKIT_BENCH_ALLOCATOR"] = "glibc-defaults" if args.glibc_defaults else "keep-freed-memory"
    kept = False
    if os.environ.get("SYMKIT_BENCH_ALLOCATOR") == "keep-freed-memory":
        from symkit.lab.allocator import keep_freed_memory

        kept = keep_freed_memory()
    if args.one:
        what = json.loads(args.one)
        if what[0] == "s8":
            print(json.dumps(measure_big_permutation_layer(*what[1:])))
        elif what[0] == "interleaved":
            print(json.dumps(measure_interleaved(*what[1:])))
        else:
            print(json.dumps(measure_symkit(*what)))
        return
    device = bc.device_of(args)
    cases = _cases("quick" if args.quick else "full" if args.full else "default")
    print(f"EMLP training step against an MLP of equal width and emlp 1.0.3 (1 thread each, float32, Adam); symkit on "
          f"{bc.describe(device)}" + ("" if device.type == "cpu" else ", emlp 1.0.3 on the CPU (JAX in its own venv)"))
    print("peak MB: tensor memory of a training step (parameters, buffers and Adam's state, plus the peak of what the "
          f"step allocates); rise MB: {bc.MemoryRise.what(device)} over the first step")
    print("allocator: " + ("freed memory kept for reuse (symkit.lab.allocator.keep_freed_memory)" if kept else
                           "glibc's defaults" if args.glibc_defaults else "the platform's (not glibc)"))
    print(f"{'group':<8}{'ch':>5}{'batch':>6}  {'model':<15}{'fwd ms':>9}{'step ms':>10}{'step/MLP':>10}"
          f"{'MACs/MLP':>10}{'peak MB':>9}{'peak/MLP':>10}{'rise MB':>9}{'params':>9}")
    summary, steps_o3 = [], None
    for group, ch, batch in cases:
        results = {kind: _in_subprocess(group, ch, batch, kind, args.device) for kind in MODELS}
        bound_kinds = ("emlp-nobil", "mlp", "emlp")  # the per-layer table's bound starts from their steps
        if (group, ch, batch) == ("O(3)", 384, 500) and all(isinstance(results[k], dict) for k in bound_kinds):
            steps_o3 = {k: results[k]["step_ms"] for k in (*bound_kinds, "emlp-compiled", "emlp-nobil-compiled")
                        if isinstance(results[k], dict)}
        for kind in MODELS:
            r = results[kind]
            print(f"{group:<8}{ch:>5}{batch:>6}  {kind:<15}{_fmt(r, 'fwd_ms'):>9}{_fmt(r, 'step_ms'):>10}"
                  f"{_ratio(r, results['mlp'], 'step_ms'):>10}{_ratio(r, results['mlp'], 'macs'):>10}"
                  f"{_fmt(r, 'peak_mb'):>9}"
                  f"{_ratio(r, results['mlp'], 'peak_mb'):>10}{_fmt(r, 'rise_mb'):>9}{_fmt(r, 'params', 'd'):>9}")
        rounds = interleaved_ratios(_in_subprocess("interleaved", group, ch, batch, args.device))
        if isinstance(rounds, dict):
            print(f"{'':<19}  step/MLP in {ROUNDS} interleaved rounds, median [least-greatest]: " + ", ".join(
                f"{kind} {med:.2f}x [{lo:.2f}-{hi:.2f}]" for kind, (med, lo, hi) in rounds.items() if kind != "mlp"))
        else:
            print(f"{'':<19}  interleaved rounds: {rounds}")
        emlp = measure_emlp(group, ch, batch, args.emlp_timeout) if batch == 500 and ch <= 384 else "not run"
        speedup = _ratio(emlp, results["emlp"], "step_ms")
        print(f"{group:<8}{ch:>5}{batch:>6}  {'emlp 1.0.3':<15}{'':>9}{_fmt(emlp, 'step_ms'):>10}"
              f"{_ratio(emlp, results['mlp'], 'step_ms'):>10}   (symkit EMLP is {speedup} faster)")
        summary.append((group, ch, batch, _step_ratio(rounds, results, "emlp"),
                        _ratio(results["emlp"], results["mlp"], "macs"),
                        _step_ratio(rounds, results, "emlp-nobil"),
                        _ratio(results["emlp-nobil"], results["mlp"], "macs"),
                        _ratio(results["emlp"], results["mlp"], "peak_mb"),
                        _step_ratio(rounds, results, "emlp-recompute"),
                        _ratio(results["emlp-recompute"], results["mlp"], "peak_mb"), speedup))
    print()
    print("acceptance (issue: the EMLP step at most 1.25x the bound line under the per-layer table, <= 1.2x the MLP's "
          "without bilinear layers, peak <= 2.5x, >= 20x faster than emlp); 'recompute': EMLP(recompute=True), each "
          "block run again in the backward pass instead of keeping its activations;")
    print("step ratios: the median of the interleaved rounds; 'floor' is the ratio of the multiply-adds per sample "
          "the matrix products do (what the step would cost if every product ran at a dense layer's speed):")
    print(f"{'group':<8}{'ch':>5}{'batch':>6}{'EMLP/MLP':>10}{'floor':>8}{'no-bil/MLP':>12}{'floor':>8}"
          f"{'peak/MLP':>10}{'recompute/MLP':>15}{'its peak':>10}{'vs emlp':>10}")
    for group, ch, batch, *ratios in summary:
        print(f"{group:<8}{ch:>5}{batch:>6}" + "".join(f"{r:>{w}}" for r, w in zip(ratios, (10, 8, 12, 8, 10, 15, 10,
                                                                                            10))))
    print()
    print("\n".join(layer_table(args.device, steps_o3)))
    big = _in_subprocess("s8", args.device)
    print()
    print(f"S(8) EquivariantLinear(T(3), T(4)) (basis of T(7): 2,097,152 x 877, 14.7 GB dense), a gather, on "
          f"{bc.describe(device)}: "
          + (f"build {big['build_s']:.2f} s, forward + backward at batch 16 {big['step_s']:.2f} s, peak memory "
             f"{big['peak_mb']:.0f} MB (issue: within 1 GB)" if isinstance(big, dict) else big)
          + (f", {bc.MemoryRise.what(device)} {big['device_mb']:.0f} MB"
             if isinstance(big, dict) and big.get("device_mb") is not None else ""))


if __name__ == "__main__":
    main()
