"""EquivariantLinear through the irreducible basis (symkit.nn._isotypic): the same map as the dense weight, for the
groups whose reps split into real irreps, and the dense product kept everywhere else."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from symkit.groups import SO, Lorentz, O, S, Z
from symkit.nn._isotypic import IrrepProduct, plan_irreps
from symkit.nn.emlp import IRREP_MIN_BATCH, EquivariantLinear, gated, uniform_rep
from symkit.reps import Scalar, V


def _dense_output(layer: EquivariantLinear, x: torch.Tensor) -> torch.Tensor:
    return x @ layer.weight.T + layer.bias


@pytest.mark.parametrize("G", [O(3), SO(3), S(5)], ids=str)
def test_large_layers_of_real_irrep_groups_run_through_irreps_and_equal_the_dense_map(G):
    torch.manual_seed(0)
    rep = uniform_rep(384, G)
    layer = EquivariantLinear(rep, gated(rep), dtype=torch.float64)
    assert layer.irrep_product is not None
    assert layer.irrep_product.multiply_adds < 0.3 * rep.size * gated(rep).size  # what makes it worth it
    x = torch.randn(64, rep.size, dtype=torch.float64, requires_grad=True)
    y = layer(x)
    ref = _dense_output(layer, x)
    assert torch.allclose(y, ref, rtol=0, atol=1e-12 * float(ref.detach().abs().max()))
    # the same gradients for the input and for every coefficient
    g = torch.randn_like(y)
    wrt = [x, *(p for p in layer.parameters() if p.requires_grad)]
    grads = torch.autograd.grad(y, wrt, g, retain_graph=True)
    grads_ref = torch.autograd.grad(ref, wrt, g)
    for a, b in zip(grads, grads_ref):
        assert torch.allclose(a, b, rtol=0, atol=1e-11 * max(float(b.abs().max()), 1.0))


@pytest.mark.parametrize("G", [O(3), SO(3)], ids=str)
def test_the_irrep_path_is_equivariant_in_float64_and_float32(G):
    rep = uniform_rep(384, G)
    rep_out = gated(rep)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        torch.manual_seed(1)
        layer = EquivariantLinear(rep, rep_out, dtype=dtype)
        assert layer.irrep_product is not None
        x = torch.randn(16, rep.size, dtype=dtype)
        for g in G.samples(3, seed=0):
            rho_in = torch.as_tensor(rep.rho(g), dtype=dtype)
            rho_out = torch.as_tensor(rep_out.rho(g), dtype=dtype)
            lhs, rhs = layer(x @ rho_in.T), layer(x) @ rho_out.T
            assert (lhs - rhs).abs().max() <= tol * rhs.abs().max()


def test_small_batches_and_every_batch_shape_give_the_same_map():
    torch.manual_seed(2)
    rep = uniform_rep(384, SO(3))
    layer = EquivariantLinear(rep, gated(rep), dtype=torch.float64)
    x = torch.randn(2, 5, rep.size, dtype=torch.float64)  # 10 samples: the irrep path
    y = layer(x)
    assert y.shape == (2, 5, gated(rep).size)
    assert torch.allclose(y, _dense_output(layer, x), atol=1e-12)
    small = x[0, : IRREP_MIN_BATCH - 1]  # below the threshold: the dense path
    assert torch.allclose(layer(small), y[0, : IRREP_MIN_BATCH - 1], atol=1e-12)
    assert layer(x[:0, 0]).shape == (0, gated(rep).size)


@pytest.mark.parametrize("rep_of, why", [
    (lambda: uniform_rep(384, Lorentz()), "not orthogonal"),
    (lambda: 120 * Scalar + 90 * V(SO(2)), "SO(2)'s rotations are of complex type"),
    (lambda: uniform_rep(128, O(3)), "small: the dense product is faster"),
    (lambda: uniform_rep(384, Z(2)), "its irreps do not save enough"),
], ids=["lorentz", "so2", "small", "z2"])
def test_the_dense_product_is_kept_where_the_irrep_form_does_not_apply_or_pay(rep_of, why):
    rep = rep_of()
    layer = EquivariantLinear(rep, gated(rep), dtype=torch.float64)
    assert layer.irrep_product is None, why
    x = torch.randn(16, rep.size, dtype=torch.float64)
    assert torch.allclose(layer(x), _dense_output(layer, x))


_GROUPS = {"O(3)": O(3), "SO(3)": SO(3), "S(4)": S(4)}


@settings(max_examples=25, deadline=None)
@given(group=st.sampled_from(sorted(_GROUPS)),
       counts_in=st.lists(st.integers(0, 3), min_size=4, max_size=4),
       counts_out=st.lists(st.integers(0, 3), min_size=4, max_size=4))
@example(group="S(4)", counts_in=[1, 0, 0, 1], counts_out=[0, 0, 0, 1])  # small genuine coefficients (2e-9 once)
def test_every_sum_of_tensor_reps_of_a_real_irrep_group_has_an_exact_irreducible_form(group, counts_in, counts_out):
    """Forced on (no cost limit): every pair of reps built from T(0)..T(3) gets a plan, and it equals ``W x``."""
    G = _GROUPS[group]

    def rep(counts):
        parts = [c * (V(G) ** k if k else Scalar) for k, c in enumerate(counts) if c]
        return sum(parts[1:], parts[0]) if parts else None

    rep_in, rep_out = rep(counts_in), rep(counts_out)
    if rep_in is None or rep_out is None:
        return
    rep_in, rep_out = rep_in(G) if not rep_in.is_bound else rep_in, rep_out(G) if not rep_out.is_bound else rep_out
    torch.manual_seed(3)
    layer = EquivariantLinear(rep_in, rep_out, dtype=torch.float64)
    sizes = [c.numel() for c in layer.weight_basis.coefficients]
    plan = plan_irreps(rep_in, rep_out, (rep_in >> rep_out).structured_basis().parts, sizes,
                       max_ratio=np.inf, min_dense=0)
    assert plan is not None
    product = IrrepProduct(plan, rep_in.size, rep_out.size, dtype=torch.float64)
    x = torch.randn(9, rep_in.size, dtype=torch.float64)
    y = product(x, list(layer.weight_basis.coefficients))
    ref = x @ layer.weight.T
    assert torch.allclose(y, ref, rtol=0, atol=1e-11 * max(float(ref.detach().abs().max()), 1.0))


def test_large_tensors_are_not_split_and_their_layer_stays_structured():
    """S(8)'s T(3) -> T(4): its basis (T(7) of S(8), 2,097,152 x 877) would take 14.7 GB dense; the layer is built as
    a gather, with no irreducible form attempted (which would read the blocks densely)."""
    from symkit.reps import T

    G = S(8)
    layer = EquivariantLinear(T(3)(G), T(4)(G))
    assert layer.irrep_product is None and layer.weight_basis._forms == ["gather"]


def test_the_irrep_path_traces_into_one_graph_for_torch_compile():
    torch._dynamo.reset()
    rep = uniform_rep(384, O(3))
    layer = EquivariantLinear(rep, gated(rep), dtype=torch.float64)
    x = torch.randn(16, rep.size, dtype=torch.float64)
    compiled = torch.compile(layer, backend="eager", fullgraph=True)
    out = compiled(x)
    torch.testing.assert_close(out, _dense_output(layer, x), rtol=1e-12, atol=1e-12)
    out.square().sum().backward()
    assert all(p.grad is not None for p in layer.parameters() if p.requires_grad)


def test_callers_that_only_read_the_weight_build_no_irreducible_form():
    """RPPLinear fuses both paths' weights into one matmul, so its equivariant layer keeps the dense weight; a layer
    asked for ``irreps=False`` gives the same map as one that has the irreducible form."""
    from symkit.nn import RPPLinear

    rep = uniform_rep(384, O(3))
    rpp = RPPLinear(rep, gated(rep), dtype=torch.float64)
    assert rpp.equivariant.irrep_product is None
    torch.manual_seed(4)
    fast = EquivariantLinear(rep, gated(rep), dtype=torch.float64)
    torch.manual_seed(4)
    dense = EquivariantLinear(rep, gated(rep), dtype=torch.float64, irreps=False)
    assert fast.irrep_product is not None and dense.irrep_product is None
    x = torch.randn(32, rep.size, dtype=torch.float64)
    assert torch.allclose(fast(x), dense(x), rtol=0, atol=1e-12)


def test_a_pair_of_reps_is_planned_once_and_no_layer_can_change_another_layers_plan(monkeypatch):
    """An O(3) EMLP's hidden layers share one (rep, gated rep) pair, and a second model asks for the same pairs:
    each pair is planned once per process. The plan's arrays are read-only and each layer keeps copies, so writing
    into one layer's buffers leaves the other layers and later models as they were."""
    import symkit.nn._isotypic as iso
    from symkit.nn import EMLP
    from symkit.reps import clear_memory_cache

    G = O(3)
    hidden = uniform_rep(384, G)
    made = []
    make = iso.make_plan
    clear_memory_cache()
    monkeypatch.setattr(iso, "make_plan", lambda *a, **k: made.append(a[:2]) or make(*a, **k))
    model = EMLP(4 * V(G), V(G) ** 2, G, ch=hidden, num_layers=3, dtype=torch.float64)
    pairs = {(a._key(), b._key()) for a, b in made}
    assert len(made) == len(pairs) == 3  # (input, gated), (hidden, gated) for two layers, (hidden, output)
    EMLP(4 * V(G), V(G) ** 2, G, ch=hidden, num_layers=3)
    assert len(made) == 3
    layers = [b.linear for b in model.blocks[1:]]
    plan = iso.plan_irreps(layers[0].rep_in, layers[0].rep_out,
                           (layers[0].rep_in >> layers[0].rep_out).structured_basis().parts,
                           [c.numel() for c in layers[0].weight_basis.coefficients])
    assert len(made) == 3 and not plan.weight_coef.flags.writeable and not plan.in_rotation[0][1].flags.writeable
    products = [lin.irrep_product for lin in layers]
    assert all(p is not None for p in products)
    x = torch.randn(600, hidden.size, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    before = layers[1](x)
    with torch.no_grad():
        products[0].weight_coef.mul_(2.0)  # one layer's buffer changed in place
        products[0].in_P_0.mul_(-1.0)
    assert torch.equal(layers[1](x), before)
    fresh = EMLP(4 * V(G), V(G) ** 2, G, ch=hidden, num_layers=3, dtype=torch.float64)
    assert torch.equal(fresh.blocks[2].linear.irrep_product.weight_coef, products[1].weight_coef)
    clear_memory_cache()  # forgets the plans with the bases
    EMLP(4 * V(G), V(G) ** 2, G, ch=hidden, num_layers=3)
    assert len(made) == 6
