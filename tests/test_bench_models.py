"""benchmarks/bench_models.py's interleaved timing: every model timed in each round, ratios taken within a round."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_models as bm  # noqa: E402


def test_ratios_are_taken_within_each_round_then_summarised():
    times = {"emlp": [20.0, 40.0, 30.0], "mlp": [10.0, 20.0, 10.0]}  # a machine twice as slow in round 2
    ratios = bm.interleaved_ratios(times)
    assert ratios["emlp"] == (2.0, 2.0, 3.0)  # median, least, greatest of 2, 2, 3
    assert ratios["mlp"] == (1.0, 1.0, 1.0)
    assert bm.interleaved_ratios("failed: x") == "failed: x"
    assert bm._step_ratio(ratios, {}, "emlp") == "2.00x"
    assert bm._step_ratio("failed", {"emlp": {"step_ms": 3.0}, "mlp": {"step_ms": 2.0}}, "emlp") == "1.50x"


def test_every_model_is_timed_in_every_round():
    times = bm.measure_interleaved("O(3)", 16, 8, "cpu", rounds=2)
    assert set(times) == set(bm.MODELS)
    assert all(len(ms) == 2 and all(t > 0 for t in ms) for ms in times.values())


@pytest.mark.parametrize("kind", bm.MODELS)
def test_each_model_takes_a_training_step(kind):
    import torch

    torch.manual_seed(0)
    model, _, step, _ = bm._model_and_step("O(3)", 16, 8, kind, torch.device("cpu"), backend="aot_eager")
    before = [p.detach().clone() for p in model.parameters()]
    step()
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters()))  # Adam moved the weights


def test_each_layer_lists_the_products_with_its_weights_its_forward_pass_does():
    import torch

    from symkit.groups import O
    from symkit.nn.emlp import BiLinear, EquivariantLinear, GatedNonlinearity, gated, uniform_rep
    from symkit.nn.rpp import RPPLinear

    hidden = uniform_rep(96, O(3))
    wide = gated(hidden)
    linear = torch.nn.Linear(hidden.size, wide.size)
    assert bm.weight_products(linear) == [(1, hidden.size, wide.size)]
    assert bm.weight_products(RPPLinear(hidden, wide)) == [(1, hidden.size, wide.size)]  # one fused matmul
    dense = EquivariantLinear(hidden, wide, irreps=False)
    assert bm.weight_products(dense) == [(1, hidden.size, wide.size)]
    big = uniform_rep(384, O(3))  # wide enough for the irreducible form
    irreducible = EquivariantLinear(big, gated(big))
    assert irreducible.irrep_product is not None
    products = bm.weight_products(irreducible)  # one per irrep: its dimension, copies in, copies out
    assert products == [tuple(irrep) for irrep in irreducible.irrep_product.irreps] and len(products) > 1
    assert sum(d * a * b for d, a, b in products) < irreducible.irrep_product.multiply_adds  # rotations besides
    bilinear = BiLinear(wide)
    assert bm.weight_products(bilinear) == bilinear.weight_products
    assert sum(r * i * c for r, i, c in bilinear.weight_products) < bilinear.multiply_adds
    assert bm.weight_products(GatedNonlinearity(hidden)) == []


def test_a_layer_row_takes_its_ratios_within_each_round():
    # the machine's speed moved between rounds: the least times come from different rounds (24 / 10 would be 2.4)
    line, ratio = bm.layer_row("BiLinear", [24.0, 40.0, 30.0], [12.0, 20.0, 10.0], [6.0, 10.0, 10.0])
    assert ratio == 2.0  # median of 2, 2, 3
    assert line.split() == ["BiLinear", "24.00", "4.00x", "10.00", "2.00x"]  # least times, median ratios
    line, ratio = bm.layer_row("GatedNonlinearity", [1.0, 3.0], [], [4.0, 4.0])
    assert ratio is None and line.split() == ["GatedNonlinearity", "1.00", "0.50x", "-", "-"]


def test_the_layer_table_gives_every_layer_with_weights_its_ratio_to_its_own_products():
    lines = bm.layer_table("cpu", ch=16, batch=8, budget=0.0, rounds=2, backend="aot_eager")
    rows = {line.split("  ")[0]: line.split() for line in lines[2:8]}
    assert set(rows) == {"EquivariantLinear", "RPPLinear", "nn.Linear (same size)", "BiLinear", "BiLinear compiled",
                         "GatedNonlinearity"}
    for name, cells in rows.items():
        assert float(cells[-4]) > 0 and float(cells[-3].rstrip("x")) > 0  # its time, its ratio to nn.Linear
        if name == "GatedNonlinearity":
            assert cells[-2:] == ["-", "-"]
        else:
            assert float(cells[-2]) > 0 and float(cells[-1].rstrip("x")) > 0
    assert rows["nn.Linear (same size)"][-3] == "1.00x"
    assert lines[-2].startswith("acceptance: BiLinear")
    assert f"{rows['BiLinear'][-1]} eager, {rows['BiLinear compiled'][-1]} compiled" in lines[-2]
    # the floor: weight products plus the per-sample products alone, and the layer against it
    floor = lines[-1]
    assert floor.startswith("BiLinear's per-sample products alone (8 x [") and "the layer is " in floor
    ratio = float(floor.split("per-sample products: ")[1].split("x")[0])
    assert ratio > 1.0  # the per-sample products take time beside the weight products
