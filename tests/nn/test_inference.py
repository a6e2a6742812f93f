"""Inference: EquivariantLinear caches its assembled weight in eval mode, and a model exports to a standalone
program that runs with symkit not installed."""

import subprocess
import sys
import textwrap

import pytest
import torch

from symkit.groups import SO
from symkit.nn import EMLP, BiLinear, EquivariantLinear, RPPLinear, export
from symkit.reps import Scalar, V


def _model():
    torch.manual_seed(0)
    G = SO(3)
    return EMLP(2 * V(G), Scalar, G, ch=24, num_layers=2, dtype=torch.float64)


def _layer(kind: str) -> torch.nn.Module:
    G = SO(3)
    rep = 2 * Scalar + 2 * V(G) + V(G) * V(G)
    if kind == "linear":
        return EquivariantLinear(rep, rep, dtype=torch.float64)
    if kind == "rpp":
        return RPPLinear(rep, rep, dtype=torch.float64)
    return BiLinear(rep, dtype=torch.float64)


@pytest.mark.parametrize("kind", ["linear", "rpp", "bilinear"])
def test_eval_caches_the_weight_until_a_parameter_changes(kind):
    """EquivariantLinear, RPPLinear and BiLinear assemble their weights from their parameters; in eval mode without
    gradients they do it once per parameter state, and give what they give in training mode."""
    torch.manual_seed(0)
    layer = _layer(kind).eval()
    x = torch.randn(4, layer.rep_in.size, dtype=torch.float64)
    with torch.no_grad():
        y1 = layer(x)
        cached = layer.__dict__["_eval_cache"][1][0]
        assert layer(x) is not None and layer.__dict__["_eval_cache"][1][0] is cached  # reused, not rebuilt
        for p in layer.parameters():
            p.add_(0.5)  # an in-place change bumps the version counter: the cache must not be used
        y2 = layer(x)
    rebuilt = layer.__dict__["_eval_cache"][1][0]
    assert rebuilt is not cached
    layer(x).sum().backward()  # with gradients: built afresh, the cache neither used nor replaced
    assert layer.__dict__["_eval_cache"][1][0] is rebuilt
    assert all(p.grad is not None for p in layer.parameters() if p.numel())
    layer.train()
    assert "_eval_cache" not in layer.__dict__
    torch.testing.assert_close(y2, layer(x).detach(), rtol=0, atol=1e-12)
    assert not torch.allclose(y1, y2)


@pytest.mark.parametrize("kind", ["linear", "rpp", "bilinear"])
def test_parameters_swapped_in_by_functional_call_are_never_served_a_stale_weight(kind):
    """``torch.func.functional_call`` puts fresh tensors in place of the parameters (version 0, possibly at a freed
    tensor's address): each call in eval mode must act with its own, and under torch.func transforms (tensors without
    storage) the layer builds its weights without a cache."""
    from torch.func import functional_call, jvp, vmap

    torch.manual_seed(0)
    layer = _layer(kind).eval()
    x = torch.randn(3, layer.rep_in.size, dtype=torch.float64)
    shifts = [0.0, 0.5, 0.5, -1.0]
    with torch.no_grad():
        outs = []
        for k in shifts:
            params = {n: p + k for n, p in layer.named_parameters()}
            outs.append(functional_call(layer, params, (x,)))
            del params  # its memory may be reused by the next call's tensors
        layer.train()
        refs = [functional_call(layer, {n: p + k for n, p in layer.named_parameters()}, (x,)) for k in shifts]
        layer.eval()
        for out, ref in zip(outs, refs):
            torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
        assert not torch.allclose(outs[0], outs[1])
        params = dict(layer.named_parameters())
        tangents = {n: torch.ones_like(p) for n, p in params.items()}
        y, dy = jvp(lambda p: functional_call(layer, p, (x,)), (params,), (tangents,))
        torch.testing.assert_close(y, layer(x), rtol=0, atol=1e-12)
        stacked = {n: torch.stack([p, p + 0.5]) for n, p in params.items()}  # an ensemble of two
        ys = vmap(lambda p: functional_call(layer, p, (x,)))(stacked)
        torch.testing.assert_close(ys, torch.stack(outs[:2]), rtol=0, atol=1e-12)


def test_the_cache_never_outlives_writes_that_bump_no_version_counter():
    """Fused Adam and ``p.data`` writes leave version counters alone: every eval() starts afresh, and a layer kept
    in eval mode under such writes (a target network) turns its cache off."""
    G = SO(3)
    torch.manual_seed(0)
    layer = EquivariantLinear(V(G) + Scalar, V(G), dtype=torch.float64)
    x = torch.randn(4, 4, dtype=torch.float64)
    opt = torch.optim.Adam(layer.parameters(), lr=0.1, fused=True)

    def fresh() -> torch.Tensor:
        return torch.addmm(layer.bias, x, layer.weight.T).detach()

    for _ in range(3):
        layer.train()
        opt.zero_grad()
        layer(x).square().sum().backward()
        versions = [p._version for p in layer.parameters()]
        opt.step()
        assert [p._version for p in layer.parameters()] == versions  # the fused kernel bumps nothing
        layer.eval()
        with torch.no_grad():
            torch.testing.assert_close(layer(x), fresh(), rtol=0, atol=1e-12)
    with torch.no_grad():
        for p in layer.parameters():
            p.data.mul_(0.5)  # an EMA-style write in eval mode: unseen by the cache until eval() or cache_weights
        layer.cache_weights = False
        torch.testing.assert_close(layer(x), fresh(), rtol=0, atol=1e-12)


def test_eval_mode_with_gradients_still_trains_the_coefficients():
    model = _model().eval()
    model(torch.randn(3, 6, dtype=torch.float64)).sum().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_to_linear_is_the_same_map():
    G = SO(3)
    layer = EquivariantLinear(2 * V(G), V(G) + Scalar, dtype=torch.float64)
    x = torch.randn(5, 6, dtype=torch.float64)
    torch.testing.assert_close(layer.to_linear()(x), layer(x), rtol=0, atol=1e-14)


def test_an_exported_model_runs_without_symkit(tmp_path):
    model = _model()
    x = torch.randn(7, 6, dtype=torch.float64)
    export(model, x[:3], tmp_path / "emlp.pt2")  # exported with batch 3, run with batch 7
    with torch.no_grad():
        expected = model(x)
    torch.save({"x": x, "y": expected}, tmp_path / "io.pt")
    code = textwrap.dedent(f"""
        import sys
        sys.modules["symkit"] = None  # symkit cannot be imported in this process
        import torch
        program = torch.export.load({str(tmp_path / "emlp.pt2")!r})
        io = torch.load({str(tmp_path / "io.pt")!r})
        err = (program.module()(io["x"]) - io["y"]).abs().max().item()
        print(err)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) < 1e-12


def test_reset_parameters_redraws_as_at_construction():
    from symkit.nn import BiLinear, RPPLinear
    from symkit.nn.emlp import gated, uniform_rep

    G = SO(3)
    for build in (lambda: EquivariantLinear(2 * V(G), V(G) + Scalar, dtype=torch.float64),
                  lambda: BiLinear(gated(uniform_rep(16, G)), dtype=torch.float64)):
        torch.manual_seed(3)
        fresh = build()
        layer = build()
        torch.manual_seed(3)
        layer.reset_parameters()
        for a, b in zip(fresh.parameters(), layer.parameters()):
            assert torch.equal(a, b)
    rpp = RPPLinear(2 * V(G), V(G), dtype=torch.float64)
    with torch.no_grad():
        for p in rpp.parameters():
            p.fill_(7.0)
    rpp.reset_parameters()
    assert float(rpp.basic.bias.detach().abs().max()) == 0.0 and float(rpp.basic.weight.detach().abs().max()) < 1.0


@pytest.mark.parametrize("name", ["EMLP", "RPPEMLP"])
def test_models_trace_into_one_graph_for_torch_compile(name):
    """No graph break in forward or backward (dynamo with the eager backend: the tracing, not the code generation)."""
    import symkit.nn as snn
    from symkit.groups import O
    from symkit.reps import Scalar, T, V

    torch._dynamo.reset()
    G = O(3)
    model = getattr(snn, name)(2 * Scalar + 2 * V(G), T(2, 0, G), G, ch=48, num_layers=2, dtype=torch.float64)
    x = torch.randn(5, model.rep_in.size, dtype=torch.float64)
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    out = compiled(x)
    torch.testing.assert_close(out, model(x), rtol=1e-12, atol=1e-12)
    out.square().sum().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
