"""EMLP layers: exact equivariance for many groups and reps, the uniform_rep allocation, gates, bilinear layer."""

import numpy as np
import pytest
import torch

from symkit.groups import O13, SL, SO, C, D, O, S, Z
from symkit.nn.emlp import EMLP, BiLinear, EquivariantLinear, GatedNonlinearity, gate_count, gated, uniform_rep
from symkit.reps import Scalar, T, V, equivariance_error
from symkit.testing import assert_equivariant

GROUPS = [SO(3), O(3), S(5), Z(4), O13(), SL(3), C(4), D(3)]


def _rho(rep, g):
    return torch.as_tensor(rep.rho(g), dtype=torch.float64)


def _relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach(), b.detach()
    return float((a - b).norm() / (a.norm() + b.norm() + 1e-300))


@pytest.mark.parametrize("G", GROUPS, ids=str)
def test_equivariant_linear_weight_commutes_with_every_sample(G):
    rep_in = V(G) + Scalar + V(G) ** 2
    rep_out = 2 * V(G) + V(G).T * V(G)
    layer = EquivariantLinear(rep_in, rep_out, dtype=torch.float64)
    assert layer.weight.shape == (rep_out.size, rep_in.size)
    assert float(layer.weight.detach().abs().max()) > 0  # not trivially zero: these hom-spaces have invariants
    assert equivariance_error(layer.weight.detach().numpy(), rep_in, rep_out, n=5, seed=1) < 1e-9


@pytest.mark.parametrize("G", GROUPS, ids=str)
def test_emlp_is_equivariant_end_to_end(G):
    rep_in, rep_out = 2 * V(G) + Scalar, V(G) + Scalar
    torch.manual_seed(0)
    model = EMLP(rep_in, rep_out, G, ch=48, num_layers=2, dtype=torch.float64)
    x = torch.randn(16, rep_in.size, dtype=torch.float64)
    for g in G.samples(3, seed=2):
        lhs = model(x @ _rho(rep_in, g).T)
        rhs = model(x) @ _rho(rep_out, g).T
        assert _relative_error(lhs, rhs) < 1e-9


def test_so3_invariant_output_is_nonconstant_thanks_to_the_bilinear_layer():
    G = SO(3)
    torch.manual_seed(0)
    with_bilinear = EMLP(V(G), Scalar, G, ch=32, num_layers=2, dtype=torch.float64)
    without = EMLP(V(G), Scalar, G, ch=32, num_layers=2, bilinear=False, dtype=torch.float64)
    x = torch.randn(32, 3, dtype=torch.float64)
    assert float(with_bilinear(x).detach().std()) > 1e-6
    # Theorem A.2: without bilinear layers nothing reaches the scalar channels from a single vector input
    assert float(without(x).detach().std()) < 1e-12


@pytest.mark.parametrize(
    "ch, G, counts, gates",
    [
        (256, SO(3), [70, 23, 7, 2], 32),
        (384, SO(3), [102, 34, 11, 3], 48),
        (384, O(5), [134, 25, 5], 30),
        (384, O13(), [112, 28, 6, 1], 35),
        (128, SO(3), [38, 12, 3, 1], 16),
    ],
)
def test_uniform_rep_matches_the_thesis_allocation(ch, G, counts, gates):
    rep = uniform_rep(ch, G)
    by_rank: dict[int, int] = {}
    for b in rep.blocks():
        by_rank[len(b.leaves)] = by_rank.get(len(b.leaves), 0) + b.mult
    assert [by_rank.get(r, 0) for r in range(len(counts))] == counts
    assert rep.size == sum(n * G.d**r for r, n in enumerate(counts))
    assert gate_count(rep) == gates
    assert gated(rep).size == rep.size + gates


def test_uniform_rep_is_deterministic_for_non_orthogonal_groups():
    assert uniform_rep(200, SL(3)) == uniform_rep(200, SL(3))
    assert uniform_rep(200, SL(3)).size == uniform_rep(200, SO(3)).size


def test_gated_nonlinearity_swish_on_scalars_and_permutation_reps():
    G = S(4)
    rep = V(G) + 2 * Scalar
    assert gate_count(rep) == 0  # permutation and scalar objects gate themselves
    x = torch.randn(5, rep.size)
    assert torch.allclose(GatedNonlinearity(rep)(x), x * torch.sigmoid(x))


def test_bilinear_layer_is_equivariant_and_quadratic():
    G = O(3)
    rep = Scalar + 2 * V(G) + V(G) ** 2
    torch.manual_seed(1)
    layer = BiLinear(rep, dtype=torch.float64)
    x = torch.randn(8, rep.size, dtype=torch.float64)
    assert torch.allclose(layer(2 * x), 4 * layer(x))
    for g in G.samples(3, seed=0):
        R = _rho(rep, g)
        assert _relative_error(layer(x @ R.T), layer(x) @ R.T) < 1e-10


def _bilinear_by_entries(layer: BiLinear, x: torch.Tensor) -> torch.Tensor:
    """The definition entry by entry (an independent reference): every entry of W(x) block w is a combination
    of the K source objects' matching entries, and contributes y[row] += W[row, col] x[col]."""
    from symkit.nn.bilinear import _block_key

    rep, n = layer.rep, layer.rep.size
    sources = {_block_key(b.leaves): b.pos for b in rep.canonical_blocks() if b.size > 1}
    y, w = torch.zeros_like(x), 0
    for hb in (rep >> rep).canonical_blocks():
        src = sources.get(_block_key(hb.leaves))
        if src is None:
            continue
        k = min(src.shape[0], hb.size)
        values = torch.einsum("wk,bks->bws", layer.weights[w], x[:, torch.as_tensor(src[:k])])
        rows, cols = torch.as_tensor(hb.pos // n), torch.as_tensor(hb.pos % n)
        y.index_add_(1, rows.reshape(-1), (values * x[:, cols]).flatten(1))
        w += 1
    return layer.scale * y


@pytest.mark.parametrize("group,rep_of", [
    (O(3), lambda G: gated(uniform_rep(96, G))),
    (SO(3), lambda G: Scalar + 3 * V(G) + 2 * V(G) ** 2 + V(G) ** 3),
    (O13(), lambda G: gated(uniform_rep(48, G))),
    (S(4), lambda G: 2 * Scalar + 3 * V(G) + V(G) ** 2),
])
def test_the_structured_bilinear_layer_equals_its_entrywise_definition(group, rep_of):
    rep = rep_of(group)
    torch.manual_seed(0)
    layer = BiLinear(rep, dtype=torch.float64)
    x = torch.randn(7, rep.size, dtype=torch.float64)
    torch.testing.assert_close(layer(x), _bilinear_by_entries(layer, x), rtol=1e-12, atol=1e-12)
    x.requires_grad_(True)
    g1 = torch.autograd.grad(layer(x).square().sum(), [x, *layer.weights])
    g2 = torch.autograd.grad(_bilinear_by_entries(layer, x).square().sum(), [x, *layer.weights])
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_bad_input_gives_clear_errors():
    G = SO(3)
    layer = EquivariantLinear(V(G), V(G))
    with pytest.raises(ValueError, match="expects 3 features in the last dimension, got 4"):
        layer(torch.randn(2, 4))
    with pytest.raises(TypeError, match="rep_in must be a symkit Rep"):
        EquivariantLinear(3, V(G))
    with pytest.raises(ValueError, match="not bound to a group"):
        EquivariantLinear(T(1), V(G))
    with pytest.raises(TypeError, match="ch: expected an int, got float 2.5"):
        uniform_rep(2.5, G)
    with pytest.raises(ValueError, match="ch: expected an int >= 1, got 0"):
        uniform_rep(0, G)
    with pytest.raises(ValueError, match="num_layers: expected an int >= 0, got -1"):
        EMLP(V(G), Scalar, G, ch=16, num_layers=-1)


def _fit_norm_squared(bilinear: bool) -> float:
    G = O(3)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(128, 3, generator=gen, dtype=torch.float64)
    y = (x**2).sum(-1, keepdim=True)
    torch.manual_seed(0)
    model = EMLP(V(G), Scalar, G, ch=24, num_layers=2, bilinear=bilinear, dtype=torch.float64)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        opt.zero_grad()
        loss = torch.mean((model(x) - y) ** 2)
        loss.backward()
        opt.step()
    return float(loss.detach()) / float(y.var())


def test_emlp_fits_an_o3_invariant_and_needs_the_bilinear_layer_for_it():
    """|v|^2 under O(3): fitted to 1% of the variance with bilinear layers; without them the output is a
    constant (Theorem A.2), so the relative error stays near 1."""
    assert _fit_norm_squared(bilinear=True) < 0.01
    assert _fit_norm_squared(bilinear=False) > 0.9


# ------------------------------------------------------------------------------- reps of the model's group only
def test_a_rep_of_another_group_is_refused_instead_of_giving_a_zero_model():
    from symkit.groups import O
    from symkit.nn import RPPEMLP

    for M in (EMLP, RPPEMLP):
        msg = r"rep_in V\(O\(3\)\) is a rep of O\(3\), not of the model's group SO\(3\)"
        with pytest.raises(ValueError, match=msg):
            M(V(O(3)), Scalar, SO(3), ch=16, num_layers=1)
        with pytest.raises(ValueError, match="rep_out"):
            M(V(SO(3)), V(O(3)), SO(3), ch=16, num_layers=1)
    # the same model built from the model's group computes a nonzero invariant
    torch.manual_seed(0)
    model = EMLP(V(SO(3)), Scalar, SO(3), ch=16, num_layers=1)
    assert model(torch.randn(8, 3)).abs().max() > 1e-4


def test_unbound_reps_are_bound_to_the_model_group():
    torch.manual_seed(0)
    model = EMLP(2 * V + Scalar, V, SO(3), ch=16, num_layers=1)
    assert model.rep_in.size == 7 and model.rep_out.size == 3
    assert_equivariant(model, model.rep_in, model.rep_out)


# ------------------------------------------------------------------------------------- empty batches and inputs
def _emlp_family():
    from symkit.nn import RPPEMLP, BiLinear, EquivariantLinear, GatedNonlinearity, gated

    G = SO(3)
    rep = 2 * V(G) + Scalar
    return [
        (EquivariantLinear(rep, V(G)), rep.size, 3),
        (BiLinear(gated(V(G) * 2)), gated(V(G) * 2).size, gated(V(G) * 2).size),
        (GatedNonlinearity(V(G) * 2), gated(V(G) * 2).size, 6),
        (EMLP(rep, V(G), G, ch=16, num_layers=2), rep.size, 3),
        (RPPEMLP(rep, V(G), G, ch=16, num_layers=2), rep.size, 3),
    ]


def test_every_emlp_layer_takes_an_empty_batch():
    for layer, n_in, n_out in _emlp_family():
        y = layer(torch.zeros(0, n_in))
        assert y.shape == (0, n_out), type(layer).__name__
        if y.requires_grad:
            y.sum().backward()
        assert layer(torch.zeros(2, 0, n_in)).shape == (2, 0, n_out)


def test_image_layers_take_an_empty_batch():
    from symkit.nn.powernet import ConvNet, PowerNet
    from symkit.nn.relaxed.layers import EquivConv2d, FactoredFC2d, SpatialFC2d

    for combine in ("product", "sum"):
        net = PowerNet(["rotation", "shift_up"], (1, 8, 8), (2, 4), 10, num_layers=1, combine=combine).eval()
        assert net(torch.zeros(0, 1, 8, 8)).shape == (0, 10)
    assert ConvNet((1, 8, 8), (2, 4), 10, num_layers=1).eval()(torch.zeros(0, 1, 8, 8)).shape == (0, 10)
    for L in (EquivConv2d, SpatialFC2d, FactoredFC2d):
        assert L(2, 3, 8)(torch.zeros(0, 2, 8, 8)).shape == (0, 3, 8, 8)


@pytest.mark.parametrize("bad,kind,message", [
    (np.zeros((2, 7)), TypeError, r"expects a torch.Tensor of shape \(batch, 7\), got ndarray"),
    (torch.zeros(2, 7, dtype=torch.float64), TypeError, "has float32 parameters but the input is float64"),
    (torch.zeros(2, 7, dtype=torch.long), TypeError, "has float32 parameters but the input is int64"),
    (torch.zeros(2, 6), ValueError, "expects 7 features in the last dimension, got 6"),
    (torch.tensor(1.0), ValueError, "got a scalar"),
])
def test_bad_inputs_get_one_line_symkit_errors(bad, kind, message):
    from symkit.nn import RPPEMLP

    G = SO(3)
    for M in (EMLP, RPPEMLP):
        model = M(2 * V(G) + Scalar, V(G), G, ch=16, num_layers=1)
        with pytest.raises(kind, match=message) as info:
            model(bad)
        assert "\n" not in str(info.value) and M.__name__ in str(info.value)


@pytest.mark.parametrize("group", [S(4), Z(5)])
def test_large_permutation_bases_are_gathers_with_the_same_weights(group, monkeypatch):
    """A permutation group's basis has one nonzero per row; above DENSE_LIMIT it is held as a gather (two numbers per
    entry instead of the rank). Forced here on small reps: same weight, same gradients as the dense form."""
    import symkit.nn.emlp as emlp

    rep_in, rep_out = V(group) + V(group) ** 2, V(group) ** 2 + Scalar
    monkeypatch.setattr(emlp, "GATHER_LIMIT", 0)  # block by block (the layer-wide gather is tested below)
    torch.manual_seed(0)
    dense = EquivariantLinear(rep_in, rep_out, dtype=torch.float64)
    monkeypatch.setattr(emlp, "DENSE_LIMIT", 0)
    torch.manual_seed(0)
    gathered = EquivariantLinear(rep_in, rep_out, dtype=torch.float64)
    assert set(gathered.weight_basis._forms) == {"gather"} and set(dense.weight_basis._forms) == {"dense"}
    torch.testing.assert_close(gathered.weight, dense.weight, rtol=0, atol=1e-14)
    x = torch.randn(6, rep_in.size, dtype=torch.float64)
    g1 = torch.autograd.grad(gathered(x).square().sum(), list(gathered.parameters()))
    g2 = torch.autograd.grad(dense(x).square().sum(), list(dense.parameters()))
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert gathered.check_equivariance() < 1e-12


@pytest.mark.parametrize("case", ["Z2-rl", "S4", "Z5-rank0", "O3"])
def test_one_nonzero_per_basis_row_expands_by_one_gather_with_the_blocks_values(case, monkeypatch):
    """Up to GATHER_LIMIT entries, a weight (or bias) whose every basis row has at most one nonzero is one gather of
    all coefficients: the very values of the block-by-block expansion (nothing is summed), and its gradients; O(3)'s
    weight bases have rows of several nonzeros and keep the blocks."""
    import symkit.nn.emlp as emlp
    from symkit.groups import O, S, Z
    from symkit.rl import PRESETS
    from symkit.rl.transitions import rl_code_hidden_rep

    reps = {"Z2-rl": lambda: (rl_code_hidden_rep(PRESETS["Hopper"], 64),) * 2,
            "S4": lambda: (V(S(4)) + V(S(4)) ** 2, V(S(4)) ** 2 + 2 * Scalar),
            "Z5-rank0": lambda: (V(Z(5)) ** 3, Scalar + V(Z(5))),  # V -> V: a block of every rank
            "O3": lambda: (V(O(3)) ** 2, V(O(3)) ** 2 + Scalar)}  # the trace map: 3 nonzeros a row
    rep_in, rep_out = reps[case]()
    torch.manual_seed(0)
    layer = EquivariantLinear(rep_in, rep_out, dtype=torch.float64, irreps=False)
    monkeypatch.setattr(emlp, "GATHER_LIMIT", 0)
    torch.manual_seed(0)
    blocks = EquivariantLinear(rep_in, rep_out, dtype=torch.float64, irreps=False)
    assert not blocks.weight_basis._gather
    assert layer.weight_basis._gather == (case != "O3") and layer.bias_basis._gather  # O(3)'s invariants: identities
    with torch.no_grad():  # biases start at zero: give them values to compare
        for a, b in zip(layer.bias_basis.coefficients, blocks.bias_basis.coefficients):
            a.normal_(), b.copy_(a)
    assert torch.equal(layer.weight, blocks.weight) and torch.equal(layer.bias, blocks.bias)
    x = torch.randn(5, rep_in.size, dtype=torch.float64)
    g1 = torch.autograd.grad(layer(x).square().sum(), list(layer.parameters()))
    g2 = torch.autograd.grad(blocks(x).square().sum(), list(blocks.parameters()))
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-13)
    assert "gather_index" not in layer.state_dict() and layer.state_dict().keys() == blocks.state_dict().keys()
    assert layer.check_equivariance() < 1e-12


def test_layers_that_train_through_the_irreducible_form_or_are_large_keep_the_blocks():
    """The single gather costs 8 bytes an entry: a layer whose training passes go through its irreducible form (S(4)
    at 300 channels) and a layer above GATHER_LIMIT entries (400 x 400) do not hold one."""
    import symkit.nn.emlp as emlp
    from symkit.groups import S

    rep = uniform_rep(300, S(4))
    irreducible = EquivariantLinear(rep, rep)
    assert irreducible.irrep_product is not None and not irreducible.weight_basis._gather
    assert not any("gather" in name for name, _ in irreducible.weight_basis.named_buffers())
    big = uniform_rep(400, S(4))
    dense = EquivariantLinear(big, big, irreps=False)
    assert big.size**2 > emlp.GATHER_LIMIT and not dense.weight_basis._gather
    small = EquivariantLinear(uniform_rep(64, S(4)), uniform_rep(64, S(4)), irreps=False)
    assert small.weight_basis._gather and small.weight_basis.gather_index.dtype == torch.int32


@pytest.mark.parametrize("group", ["O(3)", "S(4)", "O13()"])
def test_the_bilinear_layer_counts_the_multiply_adds_its_matrix_products_do(group, monkeypatch):
    """``BiLinear.multiply_adds`` (what bench_models.py compares with a dense layer) is what torch's flop counter
    sees in a forward pass: 2 flops per multiply-add per sample, over every batched and plain matmul. The counter
    sees only matmuls, so the per-sample products all run as ``bmm`` here (the smallest run as broadcast
    products otherwise, the same multiply-adds)."""
    from torch.utils.flop_counter import FlopCounterMode

    from symkit import groups
    from symkit.nn import bilinear

    monkeypatch.setattr(bilinear, "per_sample_matmul", torch.bmm)
    layer = BiLinear(gated(uniform_rep(96, eval(group, vars(groups)))))
    with FlopCounterMode(display=False) as counter:
        layer(torch.randn(7, layer.size))
    assert counter.get_total_flops() == 2 * 7 * layer.multiply_adds > 0
    # the products with the weights are the plain matmuls (the per-sample ones are batched)
    weight_flops = counter.get_flop_counts()["Global"][torch.ops.aten.mm]
    assert weight_flops == 2 * 7 * sum(r * i * c for r, i, c in layer.weight_products) > 0
    # and the per-sample ones are the batched matmuls, one per listed shape
    batched = counter.get_flop_counts()["Global"][torch.ops.aten.bmm]
    assert batched == 2 * 7 * sum(p * q * r for p, q, r in layer.per_sample_products) > 0


@pytest.mark.parametrize("p,q,r", [(3, 3, 34), (2, 2, 60), (1, 3, 8), (9, 9, 11), (3, 27, 3), (2, 2, 2)])
def test_per_sample_products_equal_bmm_in_values_and_gradients(p, q, r):
    """The bilinear layer's per-sample product (broadcast for the smallest shapes, bmm elsewhere) is ``bmm``."""
    from symkit.nn.bilinear import per_sample_matmul

    gen = torch.Generator().manual_seed(p * 100 + q * 10 + r)
    a = torch.randn(5, p, q, dtype=torch.float64, generator=gen, requires_grad=True)
    b = torch.randn(5, q, r, dtype=torch.float64, generator=gen, requires_grad=True)
    g = torch.randn(5, p, r, dtype=torch.float64, generator=gen)
    torch.testing.assert_close(per_sample_matmul(a, b), torch.bmm(a, b), rtol=1e-14, atol=1e-14)
    ours = torch.autograd.grad(per_sample_matmul(a, b), [a, b], g)
    for x, y in zip(ours, torch.autograd.grad(torch.bmm(a, b), [a, b], g)):
        torch.testing.assert_close(x, y, rtol=1e-14, atol=1e-14)


def test_the_bilinear_output_scale_is_a_setting_of_the_layer_and_of_the_models():
    """``scale`` multiplies the layer's output (0.1, emlp's, by default; the RL code's flax layers have 0.03), and
    EMLP and RPP-EMLP pass ``bilinear_scale`` to every bilinear layer; a scale that is not a number (TypeError) or
    not finite and >= 0 (ValueError) is refused, naming it."""
    from symkit.nn import RPPEMLP

    G = SO(3)
    rep = gated(Scalar + 2 * V(G) + V(G) ** 2)
    default, small = BiLinear(rep, dtype=torch.float64), BiLinear(rep, scale=0.03, dtype=torch.float64)
    small.load_state_dict(default.state_dict())
    x = torch.randn(7, rep.size, dtype=torch.float64)
    assert default.scale == 0.1 and default(x).abs().max() > 0
    torch.testing.assert_close(small(x), 0.3 * default(x), rtol=1e-12, atol=0)
    for model in (EMLP(V(G), Scalar, G, ch=24, num_layers=2, bilinear_scale=0.03),
                  RPPEMLP(V(G), Scalar, G, ch=24, num_layers=2, bilinear_scale=0.03)):
        assert [m.scale for m in model.modules() if isinstance(m, BiLinear)] == [0.03, 0.03]
    assert [m.scale for m in EMLP(V(G), Scalar, G, ch=24, num_layers=1).modules() if isinstance(m, BiLinear)] == [0.1]
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="scale must be a finite number >= 0"):
            BiLinear(rep, scale=bad)
    for bad in ("0.1", True, None):
        with pytest.raises(TypeError, match="scale must be a number >= 0"):
            BiLinear(rep, scale=bad)


def test_the_mlp_takes_swish_or_relu_and_refuses_another_activation():
    from symkit.nn import MLP

    x = torch.linspace(-2, 2, 12, dtype=torch.float64).reshape(2, 6)
    relu = MLP(6, 3, ch=8, num_layers=2, activation="relu", dtype=torch.float64)
    swish = MLP(6, 3, ch=8, num_layers=2, dtype=torch.float64)
    swish.load_state_dict(relu.state_dict())  # the same parameters: only the nonlinearity differs
    h = relu.net[1](relu.net[0](x))
    assert torch.equal(h, torch.relu(relu.net[0](x))) and (h == 0).any()
    assert not torch.allclose(relu(x), swish(x))
    with pytest.raises(ValueError, match="activation must be one of 'swish', 'relu', got 'tanh'"):
        MLP(6, 3, activation="tanh")


def _swish(x):
    return x * torch.sigmoid(x)


@pytest.mark.parametrize("G", [SO(3), O(3)], ids=str)
def test_every_object_is_gated_by_its_own_gate_scalar(G):
    """A reference written out by hand from the rep's layout, not from the layer's ``gate_index``: scalars take
    swish, and the k-th non-scalar object (in the rep's order) is multiplied by sigmoid of the k-th gate scalar
    appended after the values. Every gate gets a different value, so an off-by-one gate (still equivariant: all
    gates are invariant scalars) gives other outputs."""
    torch.manual_seed(0)
    # V + Scalar + V**2 + V: sizes 3, 1, 9, 3 (16 values), then the gates of V, V**2 and V at 16, 17, 18
    rep = V(G) + Scalar + V(G) ** 2 + V(G)
    layer = GatedNonlinearity(rep)
    assert (rep.size, layer.gated_size) == (16, 19)
    x = torch.randn(4, 19, dtype=torch.float64)
    x[:, 16:] = torch.tensor([-2.0, 0.5, 3.0], dtype=torch.float64)
    gate = torch.sigmoid(x[:, 16:])
    want = torch.cat([x[:, 0:3] * gate[:, :1], _swish(x[:, 3:4]), x[:, 4:13] * gate[:, 1:2],
                      x[:, 13:16] * gate[:, 2:3]], 1)
    torch.testing.assert_close(layer(x), want, rtol=1e-12, atol=1e-12)
    # 2 Scalar + 2 V + V**2 (17 values): the two copies of V are gated by 17 and 18 in turn, V**2 by 19
    rep = 2 * Scalar + 2 * V(G) + V(G) ** 2
    layer = GatedNonlinearity(rep)
    assert (rep.size, layer.gated_size) == (17, 20)
    x = torch.randn(4, 20, dtype=torch.float64)
    gate = torch.sigmoid(x[:, 17:])
    want = torch.cat([_swish(x[:, :2]), x[:, 2:5] * gate[:, :1], x[:, 5:8] * gate[:, 1:2],
                      x[:, 8:17] * gate[:, 2:3]], 1)
    torch.testing.assert_close(layer(x), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("G", [SO(3), O(3)], ids=str)
def test_the_initial_weight_has_the_projected_lecun_variance(G):
    """``EquivariantLinear(2 Scalar + 2 V, Scalar + V + V**2)``, its object pairs written out by hand: each pair
    that admits an equivariant map (Scalar -> Scalar, Scalar -> V**2, V -> V and, for SO(3) only, V -> V**2 by the
    cross product) has ``E |W_pair|^2 = share * entries / n_in``, ``share = r / (n_out n_in)``; the other pairs are
    0. Measured as the mean over 400 draws (construction, then ``reset_parameters``), within 15 %. The full LeCun
    variance 1 / n_in per entry would be 1 / share = 13x (SO(3)) or 17x (O(3)) larger."""
    rep_in, rep_out = 2 * Scalar + 2 * V(G), Scalar + V(G) + V(G) ** 2
    n_in, n_out = 8, 13
    cross = 1 if G.name == "SO(3)" else 0  # V -> V**2: the cross product is a map for SO(3), not for O(3)
    r = 2 + 2 + 2 + 2 * cross
    assert (rep_in.size, rep_out.size, (rep_in >> rep_out).rank()) == (n_in, n_out, r)
    share = r / (n_out * n_in)
    rows = {"S": slice(0, 1), "V": slice(1, 4), "V2": slice(4, 13)}
    cols = {"S": [slice(0, 1), slice(1, 2)], "V": [slice(2, 5), slice(5, 8)]}
    free = {("S", "S"), ("S", "V2"), ("V", "V")} | ({("V", "V2")} if cross else set())
    torch.manual_seed(0)
    layer = EquivariantLinear(rep_in, rep_out, dtype=torch.float64)
    draws = 400
    total = torch.zeros(n_out, n_in, dtype=torch.float64)
    for i in range(draws):
        if i:
            layer.reset_parameters()
        total += layer.weight.detach().square()
    mean = total / draws
    for a, cs in cols.items():
        for b, rs in rows.items():
            got = sum(float(mean[rs, c].sum()) for c in cs) / len(cs)  # per pair, the two input copies pooled
            entries = (rs.stop - rs.start) * (cs[0].stop - cs[0].start)
            if (a, b) in free:
                assert got == pytest.approx(share * entries / n_in, rel=0.15), (a, b, got, share * entries / n_in)
            else:
                assert got == 0.0, (a, b, got)


@pytest.mark.parametrize("hidden", ["pseudoscalar", "0o irreps"])
def test_hidden_pseudoscalars_are_gated_so_the_emlp_stays_equivariant(hidden):
    """swish(-x) != -swish(x): a pseudoscalar channel (rho(g) = det g) must take a gate, not swish."""
    from symkit.groups import O
    from symkit.nn import EMLP
    from symkit.nn.emlp import gate_count
    from symkit.reps import PseudoScalar, Scalar, V, from_irreps

    G = O(3)
    ch = 4 * PseudoScalar(G) + 2 * Scalar + V(G) if hidden == "pseudoscalar" else from_irreps("4x0o+2x0e+1x1o", G)
    assert gate_count(ch) == 5  # four pseudoscalars and one vector, each with its own gate
    model = EMLP(V(G) + PseudoScalar(G), PseudoScalar(G), G, ch=ch, num_layers=2, dtype=torch.float64)
    assert model.check_equivariance() < 1e-12


def _integer_buffers(model):
    return {name: b for name, b in model.named_buffers() if not (b.is_floating_point() or b.is_complex())}


@pytest.mark.parametrize("bilinear", [True, False])
def test_a_model_holds_its_index_buffers_as_int32_and_no_inverse_of_a_permutation(bilinear):
    """Index buffers live as long as the model and were most of its resident memory (5.4 MB of buffers against 1.0 MB
    of parameters at O(3), 384 channels): every large one is int32, and the bilinear layer scatters its weight gradient
    through its gather index instead of keeping the inverse permutation."""
    G = O(3)
    model = EMLP(5 * Scalar + 5 * V(G), T(2, 0, G), G, ch=256, num_layers=2, bilinear=bilinear)  # irreducible form
    buffers = _integer_buffers(model)
    assert any(".irrep_product." in name for name in buffers)
    assert any("weight_basis.inverse" in name for name in buffers)
    # the large ones (O(weights)); a few of O(width) are int64 for speed (CPU index_add is 2x slower with int32)
    large = {name: b.dtype for name, b in buffers.items() if b.numel() > 4096}
    assert large and all(dtype == torch.int32 for dtype in large.values()), large
    assert not any(name.endswith("w_inverse") for name in buffers)


def test_a_state_dict_keeps_the_int64_inverse_saved_files_have_and_refuses_another_order():
    """The inverse permutation of a basis expansion is held as int32 but saved as it always was (key and int64), so
    saved models load both ways; a saved order that is not this layer's (another rep) fails instead of loading."""
    G = O(3)
    torch.manual_seed(0)
    layer = EquivariantLinear(3 * V(G) + Scalar, T(2, 0, G) + Scalar, dtype=torch.float64)
    state = layer.state_dict()
    assert state["weight_basis.inverse"].dtype == torch.int64 and state["bias_basis.inverse"].dtype == torch.int64
    assert layer.weight_basis.inverse.dtype == torch.int32
    assert torch.equal(state["weight_basis.inverse"], layer.weight_basis.inverse.long())
    fresh = EquivariantLinear(3 * V(G) + Scalar, T(2, 0, G) + Scalar, dtype=torch.float64)
    fresh.load_state_dict(state)
    x = torch.randn(4, 3 * 3 + 1, dtype=torch.float64)
    assert torch.equal(fresh(x), layer(x))
    shuffled = dict(state, **{"weight_basis.inverse": state["weight_basis.inverse"].flip(0)})
    with pytest.raises(RuntimeError, match="weight_basis.inverse: the saved order of the basis blocks differs"):
        fresh.load_state_dict(shuffled)
    missing = {k: v for k, v in state.items() if k != "bias_basis.inverse"}
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "bias_basis.inverse"'):
        fresh.load_state_dict(missing)
    fresh.load_state_dict(missing, strict=False)

