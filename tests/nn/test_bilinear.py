"""BiLinear: the map against a dense reference built from its parameters, its three computation paths (written-out
backward, no-grad forward, differentiable composite), gradients, saved state dicts, devices and dtypes."""

import pytest
import torch

from symkit.groups import O13, SO, O, S
from symkit.nn import _bilinear_kernels as kernels
from symkit.nn.bilinear import BiLinear, per_sample_matmul
from symkit.nn.emlp import gated, uniform_rep
from symkit.reps import Scalar, V

GROUPS = {"O(3)": O(3), "SO(3)": SO(3), "O(1,3)": O13(), "S(5)": S(5), "SO(2)": SO(2)}
# the hidden reps the tests use: gated uniform reps (scalars in two runs), and one whose objects are interleaved
REPS = {name: (lambda G=G: gated(uniform_rep(48, G))) for name, G in GROUPS.items()}
REPS["O(3) interleaved"] = lambda: V(O(3)) + Scalar + V(O(3)) + V(O(3)) ** 2 + Scalar + V(O(3)) + V(O(3)) ** 3


def dense_reference(layer: BiLinear, x: torch.Tensor) -> torch.Tensor:
    """``scale * W(x) x`` with ``W(x)`` formed densely per sample, from the definition: every block of ``rep >> rep``
    whose type occurs among the rep's objects has its copy ``p`` filled with ``sum_k weights[p, k]`` times the first
    ``K = min(copies, block size)`` objects of that type, entry by entry; the parameters are read in block order."""
    rep, n = layer.rep, layer.rep.size
    sources = {tuple(leaf._key() for leaf in b.leaves): b.pos for b in rep.canonical_blocks() if b.size > 1}
    W = x.new_zeros(x.shape[0], n, n)
    params = iter(layer.weights)
    for hb in (rep >> rep).canonical_blocks():
        src = sources.get(tuple(leaf._key() for leaf in hb.leaves))
        if src is None:
            continue
        k = min(src.shape[0], hb.size)
        coefficients = next(params)
        assert coefficients.shape == (hb.mult, k)
        values = torch.einsum("pk,bke->bpe", coefficients, x[:, torch.as_tensor(src[:k])])  # (batch, copies, entries)
        rows, cols = torch.as_tensor(hb.pos // n), torch.as_tensor(hb.pos % n)
        W[:, rows, cols] = values
    assert next(params, None) is None
    return layer.scale * torch.einsum("bij,bj->bi", W, x)


def _layer(name: str, dtype: torch.dtype = torch.float64, seed: int = 0) -> BiLinear:
    torch.manual_seed(seed)
    layer = BiLinear(REPS[name](), dtype=dtype)
    with torch.no_grad():  # weights of order 1, so that every interaction's share of the output is visible
        for p in layer.weights:
            p.normal_()
    return layer


@pytest.mark.parametrize("name", list(REPS))
def test_the_layer_is_its_dense_definition_in_values_and_gradients(name):
    layer = _layer(name)
    x = torch.randn(6, layer.size, dtype=torch.float64, requires_grad=True)
    y, ref = layer(x), dense_reference(layer, x)
    torch.testing.assert_close(y, ref, rtol=1e-12, atol=1e-12 * float(ref.detach().abs().max()))
    g = torch.randn_like(y)
    got = torch.autograd.grad(y, [x, *layer.weights], g)
    want = torch.autograd.grad(ref, [x, *layer.weights], g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-11 * float(b.detach().abs().max()))
    with torch.no_grad():
        torch.testing.assert_close(layer(x), ref, rtol=1e-12, atol=1e-12 * float(ref.detach().abs().max()))


@pytest.mark.parametrize("name", ["O(3)", "O(1,3)", "O(3) interleaved"])
def test_the_written_out_backward_equals_autograd_through_the_composite_form(name):
    layer = _layer(name)
    x = torch.randn(5, layer.size, dtype=torch.float64, requires_grad=True)
    params = list(layer.weights)
    y = kernels.BiLinearFunction.apply(layer, per_sample_matmul, x, *params)
    ref = kernels.composite(layer, x, kernels.flat_weights(layer, params), per_sample_matmul)
    torch.testing.assert_close(y, ref, rtol=1e-13, atol=1e-13)
    g = torch.randn_like(y)
    for a, b in zip(torch.autograd.grad(y, [x, *params], g), torch.autograd.grad(ref, [x, *params], g)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_gradients_and_second_derivatives_pass_gradcheck():
    layer = BiLinear(V(O(3)) + 2 * Scalar + 2 * V(O(3)) + V(O(3)) ** 2, dtype=torch.float64)
    x = torch.randn(3, layer.size, dtype=torch.float64, requires_grad=True)
    params = tuple(layer.weights)

    def f(x, *ps):
        return kernels.BiLinearFunction.apply(layer, per_sample_matmul, x, *ps)

    assert torch.autograd.gradcheck(f, (x, *params))
    assert torch.autograd.gradgradcheck(f, (x, *params))
    only_x = torch.autograd.grad(f(x, *[p.detach() for p in params]).sum(), x)[0]  # no weight gradient asked for
    torch.testing.assert_close(only_x, torch.autograd.grad(layer(x).sum(), x)[0], rtol=1e-13, atol=1e-13)


def test_second_derivatives_through_inputs_that_depend_on_the_weights_are_local():
    """As in a Hamiltonian network's rollout: the layer's input has a history through the layer's own weights (an
    earlier application), and the loss is of a gradient taken with create_graph. The double backward must be the
    layer's local derivative: equal to autograd through the composite form, in the gradient and in the weights'
    second-order gradients (a nested autograd.grad would follow the input's history back to the weights)."""
    layer = _layer("O(3) interleaved")
    params = list(layer.weights)
    x = torch.randn(4, layer.size, dtype=torch.float64, requires_grad=True)

    def written(z, ps):
        return kernels.BiLinearFunction.apply(layer, per_sample_matmul, z, *ps)

    def reference(z, ps):
        return kernels.composite(layer, z, kernels.flat_weights(layer, ps), per_sample_matmul)

    results = []
    for f in (written, reference):
        h = f(torch.tanh(f(x, params)), params).pow(2).sum()
        (g,) = torch.autograd.grad(h, x, create_graph=True)
        results.append([g, *torch.autograd.grad(g.pow(2).sum(), params)])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-11 * float(b.detach().abs().max()))


def test_forward_mode_and_vmap_see_the_same_map():
    from torch.func import jvp, vmap

    layer = _layer("O(3)")
    x, v = (torch.randn(4, layer.size, dtype=torch.float64) for _ in range(2))
    with torch.no_grad():
        y, dy = jvp(layer, (x,), (v,))
        h = 1e-3  # the map is quadratic: the central difference is its derivative up to rounding
        torch.testing.assert_close(dy, (layer(x + h * v) - layer(x - h * v)) / (2 * h), rtol=1e-8, atol=1e-8)
        torch.testing.assert_close(vmap(layer)(x.unsqueeze(1)).squeeze(1), layer(x), rtol=1e-13, atol=1e-13)


#: parameter names and shapes of layers saved before the layout was rebuilt: a saved model must still load
SAVED = {
    "O(3)": (lambda: gated(uniform_rep(48, O(3))), {"weights.0": (336, 3), "weights.1": (92, 1)}),
    "O(1,3)": (lambda: gated(uniform_rep(32, O13())), {"weights.0": (80, 2), "weights.1": (80, 2)}),
    "S(5)": (lambda: 2 * Scalar + 3 * V(S(5)) + V(S(5)) ** 2, {"weights.0": (12, 3), "weights.1": (13, 1)}),
}


@pytest.mark.parametrize("name", list(SAVED))
def test_state_dicts_keep_their_keys_and_shapes(name):
    rep_of, shapes = SAVED[name]
    layer = BiLinear(rep_of())
    state = layer.state_dict()
    assert {k: tuple(v.shape) for k, v in state.items()} == shapes  # index buffers are not saved
    fresh = BiLinear(rep_of())
    fresh.load_state_dict(state)
    x = torch.randn(3, layer.size)
    torch.testing.assert_close(fresh(x), layer(x), rtol=0, atol=0)


def test_any_device_and_dtype_follow_the_parameters():
    rep = gated(uniform_rep(24, O(3)))
    meta = BiLinear(rep, device="meta")
    x = torch.randn(2, 3, rep.size, device="meta", requires_grad=True)
    y = meta(x)
    assert y.device.type == "meta" and y.shape == (2, 3, rep.size)
    y.sum().backward()
    assert x.grad.shape == x.shape and all(p.grad.device.type == "meta" for p in meta.weights)
    torch.manual_seed(0)
    f64 = BiLinear(rep, dtype=torch.float64)
    f32 = BiLinear(rep, dtype=torch.float32)
    f32.load_state_dict({k: v.float() for k, v in f64.state_dict().items()})
    x = torch.randn(4, rep.size, dtype=torch.float64)
    assert f32(x.float()).dtype == torch.float32 and f64(x).dtype == torch.float64
    torch.testing.assert_close(f32(x.float()).double(), f64(x), rtol=1e-5, atol=1e-6)
    assert f64(x[:0]).shape == (0, rep.size)
    with pytest.raises(TypeError, match="float64 parameters but the input is float32"):
        f64(x.float())


@pytest.mark.parametrize("name", list(GROUPS))
def test_the_layer_is_exactly_equivariant_in_float64(name):
    layer = _layer(name)
    x = torch.randn(4, layer.size, dtype=torch.float64)
    assert layer.check_equivariance(x) <= 1e-9  # within 64 eps of float64 per element scale, and below 1e-9


@pytest.mark.parametrize("p,q,r", [(3, 3, 34), (34, 3, 3), (27, 3, 34), (18, 9, 11), (9, 11, 18), (3, 27, 3)])
def test_per_sample_products_write_into_any_given_layout(p, q, r):
    """Each form of the per-sample product (broadcast sums along either side, bmm, transposed bmm) is ``bmm``, and
    writes into a strided ``out`` (a transposed view, columns of a wider matrix) as into a fresh tensor."""
    a, b = torch.randn(5, p, q, dtype=torch.float64), torch.randn(5, q, r, dtype=torch.float64)
    want = torch.bmm(a, b)
    torch.testing.assert_close(per_sample_matmul(a, b), want, rtol=1e-13, atol=1e-13)
    wide = torch.zeros(5, p, r + 7, dtype=torch.float64)
    per_sample_matmul(a, b, out=wide[:, :, 3:3 + r])
    torch.testing.assert_close(wide[:, :, 3:3 + r], want, rtol=1e-13, atol=1e-13)
    assert not wide[:, :, :3].any() and not wide[:, :, 3 + r:].any()
    transposed = torch.zeros(5, r, p, dtype=torch.float64)
    per_sample_matmul(a, b, out=transposed.transpose(1, 2))
    torch.testing.assert_close(transposed.transpose(1, 2), want, rtol=1e-13, atol=1e-13)
def test_a_hamiltonian_rollout_through_bilinear_layers_has_the_composite_forms_gradients(monkeypatch):
    """A Hamiltonian network's RK4 rollout differentiates the layer twice, with inputs whose history runs through
    earlier stages of the same weights: the weights' gradients equal those of the same rollout through the composite
    form (autograd end to end), and the rollout finishes (no recursion through earlier backward calls)."""
    import sys

    from symkit.lab.experiments.pendulum import build_dynamics
    from symkit.nn.ode import rollout

    torch.manual_seed(0)
    model = build_dynamics("hnn", "emlp-o2", ch=16, num_layers=2, dtype=torch.float64)
    z0 = torch.randn(3, 12, dtype=torch.float64)
    times = torch.linspace(0, 0.3, 4, dtype=torch.float64)
    grads = []
    for plain in (True, False):
        monkeypatch.setattr(kernels, "is_plain", lambda *t, plain=plain: plain)
        model.zero_grad()
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(400)  # the RK4 stages would nest every earlier stage's backward
        try:
            rollout(model, z0, times, method="rk4").pow(2).mean().backward()
        finally:
            sys.setrecursionlimit(limit)
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1]) > 0
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10 * float(b.abs().max()))


@pytest.mark.parametrize("name", list(SAVED))
def test_the_backward_makes_p_one_set_of_units_at_a_time_and_no_product_spans_two_sets(name):
    layer = BiLinear(SAVED[name][0]())
    p_units = [u for u, unit in enumerate(layer._units) if unit[0] == "p"]
    sets = layer._p_sets
    assert sorted(u for units in sets for u in units) == p_units
    set_of = {u: i for i, units in enumerate(sets) for u in units}
    for kind, _, _, _, members in layer._groups:
        if kind == "p":
            assert len({set_of[layer._plan[t][8]] for t in members}) == 1
    if name == "O(3)":  # at 384 channels the vectors' large P is made alone
        assert len(BiLinear(gated(uniform_rep(384, O(3))))._p_sets) == 2


@pytest.mark.parametrize("name", list(SAVED))
def test_the_batch_last_form_is_the_layer_and_is_what_torch_compile_runs(name, monkeypatch):
    """Under ``torch.compile`` the layer runs ``kernels.batch_last`` (the batch last, per-sample products as broadcast
    sums the compiler fuses): the same values and gradients as the written-out path, float64."""
    torch.manual_seed(0)
    layer = BiLinear(SAVED[name][0](), dtype=torch.float64)
    x = torch.randn(6, layer.size, dtype=torch.float64, requires_grad=True)
    weights = tuple(layer.weights)
    y, y_ref = kernels.batch_last(layer, x, kernels.flat_weights(layer, weights)), layer(x)
    torch.testing.assert_close(y, y_ref, rtol=1e-12, atol=1e-12)
    gy = torch.randn_like(y)
    for a, b in zip(torch.autograd.grad(y, (x, *weights), gy), torch.autograd.grad(y_ref, (x, *weights), gy)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    calls = []
    real = kernels.batch_last
    monkeypatch.setattr(kernels, "batch_last", lambda *a: calls.append(1) or real(*a))
    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)
    y_c = compiled(x)
    assert calls and torch.allclose(y_c, y_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(torch.autograd.grad(y_c, x, gy)[0], torch.autograd.grad(layer(x), x, gy)[0],
                               rtol=1e-12, atol=1e-12)


def test_the_layer_compiled_by_inductor_is_the_layer():
    """What bench_models.py times as the compiled layer (Inductor's C++ kernels, about 20 s to build) is the layer,
    values and gradients, float64."""
    torch.manual_seed(0)
    layer = BiLinear(gated(uniform_rep(24, O(3))), dtype=torch.float64)
    x = torch.randn(9, layer.size, dtype=torch.float64, requires_grad=True)
    compiled = torch.compile(layer, fullgraph=True)
    y, y_ref = compiled(x), layer(x)
    torch.testing.assert_close(y, y_ref, rtol=1e-12, atol=1e-12)
    gy = torch.randn_like(y)
    for a, b in zip(torch.autograd.grad(y, (x, *layer.weights), gy),
                    torch.autograd.grad(y_ref, (x, *layer.weights), gy)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
