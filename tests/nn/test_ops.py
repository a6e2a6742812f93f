"""The shared permutation op agrees with plain indexing in value, reverse-mode and forward-mode derivatives."""

import torch
from torch.func import jvp, vjp

from symkit.nn._ops import permute_last


def test_permute_last_matches_indexing_in_both_modes_of_differentiation():
    gen = torch.Generator().manual_seed(0)
    perm = torch.randperm(7, generator=gen)
    inv = torch.argsort(perm)
    x = torch.randn(3, 7, dtype=torch.float64, generator=gen)
    t = torch.randn(3, 7, dtype=torch.float64, generator=gen)
    assert torch.equal(permute_last(x, perm, inv), x[..., perm])
    _, tangent = jvp(lambda z: permute_last(z, perm, inv), (x,), (t,))
    assert torch.equal(tangent, t[..., perm])
    _, pullback = vjp(lambda z: permute_last(z, perm, inv), x)
    _, reference = vjp(lambda z: z[..., perm], x)
    assert torch.equal(pullback(t)[0], reference(t)[0])


def test_permute_dim_matches_indexing_and_traces_into_one_graph():
    """The form ``torch.compile`` traces (no custom jvp, which Dynamo refuses): a gather along ``dim`` whose
    backward is the gather with the inverse, equal to autograd's scatter of plain indexing."""
    from symkit.nn._ops import permute_dim

    gen = torch.Generator().manual_seed(0)
    perm = torch.randperm(5, generator=gen)
    inv = torch.argsort(perm)
    x = torch.randn(5, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    g = torch.randn(5, 3, dtype=torch.float64, generator=gen)
    assert torch.equal(permute_dim(x, perm, inv, 0), x[perm])
    assert torch.equal(torch.autograd.grad(permute_dim(x, perm, inv, 0), x, g)[0],
                       torch.autograd.grad(x[perm], x, g)[0])
    compiled = torch.compile(lambda z: permute_dim(z, perm, inv, 0), backend="aot_eager", fullgraph=True)
    assert torch.equal(torch.autograd.grad(compiled(x), x, g)[0], torch.autograd.grad(x[perm], x, g)[0])
