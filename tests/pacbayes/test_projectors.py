"""Random projectors for subspace training (thesis Eq. 5.3, §5.4.1): products against the materialised matrices,
seeds, the dense projector's cache, FiLM rows, devices and dtypes, and the near-orthogonality scaling of
``P^T P - I`` in ``D`` (§6 item 21 of the research notes)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from symkit.pacbayes.projectors import BLOCK_ELEMENTS, KINDS, film_mask, make_projector

F64 = torch.float64


def _mask(D: int, every: int = 5) -> torch.Tensor:
    mask = torch.zeros(D, dtype=torch.bool)
    mask[::every] = True
    return mask


def _make(kind: str, D: int, d: int, **kw):
    return make_projector(kind, D, d, film_mask=_mask(D) if kind.startswith("film") else None, **kw)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("D,d", [(845, 37), (900, 49), (1, 1), (7, 7)])
def test_matvec_equals_the_materialised_matrix(kind, D, d):
    """Non-square D and d exercise the padding and truncation; D = d = 1 and D = d the edges."""
    P = _make(kind, D, d, dtype=F64)
    M = P.to_dense()
    assert M.shape == (D, d) and M.dtype == F64
    w = torch.randn(d, dtype=F64, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(P(w), M @ w, rtol=0, atol=1e-12)


def test_kronecker_kinds_are_the_thesis_formulas():
    """to_dense is built independently of forward; check it against the formulas on a perfect square, where no
    truncation happens: P_⊕ rows are (R1[b] + R2[a]) / sqrt(2D) and P_⊗ = Q1 ⊗ Q2 / sqrt(D), up to Π."""
    D, d = 36, 4
    P = make_projector("kron-sum", D, d, dtype=F64)
    M = P.to_dense()
    inv = torch.argsort(P.perm)
    for a in range(6):
        for b in range(6):
            assert torch.allclose(M[inv[a * 6 + b]], (P.R1[b] + P.R2[a]) / math.sqrt(2 * D), atol=1e-15)
    Q = make_projector("kron", D, d, dtype=F64)
    K = Q.to_dense()[torch.argsort(Q.perm)]
    assert torch.allclose(K[2 * 6 + 3, 1 * 2 + 0], Q.Q1[2, 1] * Q.Q2[3, 0] / 6, atol=1e-15)


@pytest.mark.parametrize("kind", KINDS)
def test_gradient_is_the_transpose(kind):
    """d/dw <v, P w> = P^T v, the backward pass of each kind (the regenerated dense one included)."""
    D, d = 500, 30
    kw = {"cache_bytes": 0} if kind in ("dense", "film", "film+kron") else {}
    P = _make(kind, D, d, dtype=F64, **kw)
    w = torch.randn(d, dtype=F64, requires_grad=True)
    v = torch.randn(D, dtype=F64)
    (grad,) = torch.autograd.grad(P(w) @ v, w)
    assert torch.allclose(grad, P.to_dense().T @ v, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_same_matrix_other_seed_other_matrix(kind):
    a, b, c = (_make(kind, 300, 20, seed=s, dtype=F64).to_dense() for s in (5, 5, 6))
    assert torch.equal(a, b)
    assert not torch.allclose(a, c)
    assert _make(kind, 300, 20, dtype=F64).state_dict() == {}  # regenerated from the seed, never saved


def test_dense_chunked_equals_cached():
    D, d = 4000, 300  # two blocks of BLOCK_ELEMENTS // d rows
    assert D > BLOCK_ELEMENTS // d
    cached = make_projector("dense", D, d, seed=3, dtype=F64)
    chunked = make_projector("dense", D, d, seed=3, dtype=F64, cache_bytes=0)
    assert cached.cached and not chunked.cached and chunked.matrix is None
    assert torch.equal(cached.to_dense(), chunked.to_dense())
    w = torch.randn(d, dtype=F64, requires_grad=True)
    assert torch.allclose(cached(w), chunked(w), rtol=0, atol=1e-12)
    g1, g2 = (torch.autograd.grad(P(w).sin().sum(), w)[0] for P in (cached, chunked))
    assert torch.allclose(g1, g2, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["dense", "sparse", "kron-sum", "kron"])
def test_columns_have_unit_norm_on_average(kind):
    P = make_projector(kind, 10_000, 64, dtype=F64)
    assert abs(P.to_dense().square().sum(0).mean().item() - 1) < 0.2


def test_sparse_density():
    D, d = 40_000, 50
    P = make_projector("sparse", D, d, dtype=F64)
    assert P.matrix.is_sparse
    nnz = P.matrix._nnz()
    assert abs(nnz / (D * d) * math.sqrt(D) - 1) < 0.05  # density 1 / sqrt(D)
    assert torch.allclose(P.matrix.values().abs(), torch.full((nnz,), D ** -0.25, dtype=F64))


def test_film_rows_outside_the_mask_are_zero():
    D, d = 600, 40
    mask = _mask(D, 7)
    for kind in ("film", "film+kron"):
        P = make_projector(kind, D, d, film_mask=mask, dtype=F64)
        M = P.to_dense()
        out = P(torch.randn(d, dtype=F64))
        if kind == "film":
            assert torch.all(M[~mask] == 0) and torch.all(out[~mask] == 0)
            assert torch.all(M[mask] != 0)
            assert abs(M.square().sum(0).mean().item() - 1) < 0.15  # unit columns on the selected rows
        else:
            assert torch.all(M[~mask] != 0)


def test_film_mask_selects_normalisation_and_head():
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 36, 8), nn.LayerNorm(8),
                        nn.Linear(8, 3))
    mask = film_mask(net)
    sizes = [p.numel() for p in net.parameters()]
    assert mask.shape == (sum(sizes),)
    chosen = [bool(part.all()) for part in mask.split(sizes)]
    assert all(bool(part.all()) or not bool(part.any()) for part in mask.split(sizes))
    #          conv w, conv b, bn w, bn b, fc w, fc b, ln w, ln b, head w, head b
    assert chosen == [False, False, True, True, False, False, True, True, True, True]
    convs = nn.Sequential(nn.Conv2d(1, 4, 3), nn.GroupNorm(2, 4), nn.Conv2d(4, 2, 1))  # no Linear: the last conv
    assert [bool(p.all()) for p in film_mask(convs).split([p.numel() for p in convs.parameters()])] == [
        False, False, True, True, True, True]


def _orthogonality_error(kind: str, D: int, d: int, seed: int) -> float:
    """RMS entry of P^T P - I, i.e. ||P^T P - I||_F / d."""
    M = make_projector(kind, D, d, seed=seed, dtype=F64).to_dense()
    return ((M.T @ M - torch.eye(d, dtype=F64)).square().mean().sqrt()).item()


@pytest.mark.parametrize("kind,slope", [("dense", -0.5), ("kron-sum", -0.25), ("kron", -0.25)])
def test_near_orthogonality_scaling(kind, slope):
    """The log-log slope of the RMS entry of P^T P - I against D (d = 64 fixed, 3 seeds averaged), within 0.06 of
    theory. Dense: D^{-1/2}. Kronecker product: (Q1^T Q1 / k) ⊗ (Q2^T Q2 / k) with k = sqrt(D) rows per factor, so
    D^{-1/4} (the thesis's rate). Kronecker sum: the thesis states D^{-1/2}, but its Gram matrix is
    (R1^T R1 + R2^T R2) / (2 sqrt(D)) plus an O(D^{-1/2}) cross term, an average over only 2 sqrt(D) Gaussian rows,
    so the rate is D^{-1/4}; the fit gives -0.25 and rules out -0.5."""
    Ds = [4**j for j in range(4, 9)]  # 256 ... 65536
    logs = [math.log(sum(_orthogonality_error(kind, D, 64, s) for s in range(3)) / 3) for D in Ds]
    x = [math.log(D) for D in Ds]
    mx, my = sum(x) / len(x), sum(logs) / len(logs)
    fit = sum((a - mx) * (b - my) for a, b in zip(x, logs)) / sum((a - mx) ** 2 for a in x)
    assert abs(fit - slope) < 0.06, f"{kind}: slope {fit:.3f}, theory {slope}"


@pytest.mark.parametrize("kind", KINDS)
def test_dtypes_and_output_follows_w(kind, dtype):
    """Numbers drawn in float64 and cast: the dtype changes only the rounding; the result takes w's dtype."""
    P = _make(kind, 400, 25, dtype=dtype)
    assert P.dtype == dtype
    ref = _make(kind, 400, 25, dtype=F64)
    refs = dict(ref.named_buffers())
    for name, buf in P.named_buffers():  # the random numbers are the float64 ones, cast
        other = refs[name]
        if buf is not None and buf.is_floating_point():
            buf, other = (buf.to_dense(), other.to_dense()) if buf.is_sparse else (buf, other)
            assert torch.equal(buf, other.to(dtype)), name
    tol = 1e-7 if dtype == torch.float32 else 1e-15  # entries are about 1 / sqrt(D) = 0.05
    assert torch.allclose(P.to_dense().double(), ref.to_dense(), rtol=0, atol=tol)
    w = torch.randn(25, dtype=dtype)
    out = P(w)
    assert out.dtype == dtype and out.shape == (400,)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert torch.allclose(out.double(), ref(w.double()), rtol=0, atol=tol)
    other = torch.float64 if dtype == torch.float32 else torch.float32
    assert P(w.to(other)).dtype == other
    moved = P.to(other)
    assert moved.dtype == other and moved(w.to(other)).dtype == other


@pytest.mark.parametrize("kind", KINDS)
def test_meta_device(kind):
    P = _make(kind, 300, 20, device="meta")
    out = P(torch.zeros(20, device="meta"))
    assert out.device.type == "meta" and out.shape == (300,)
    assert P.to_dense().shape == (300, 20)
    dense = make_projector("dense", 300, 20, device="meta", cache_bytes=0)  # regenerated: shape only
    assert dense(torch.zeros(20, device="meta")).shape == (300,)


def test_bad_arguments():
    with pytest.raises(ValueError, match="kind must be one of"):
        make_projector("fastfood", 10, 2)
    with pytest.raises(ValueError, match="d: expected an int >= 1"):
        make_projector("dense", 10, 0)
    with pytest.raises(ValueError, match="d must be <= D = 10"):
        make_projector("dense", 10, 11)
    with pytest.raises(ValueError, match="D: expected an int >= 1"):
        make_projector("dense", 0, 1)
    with pytest.raises(TypeError, match="d: expected an int"):
        make_projector("dense", 10, 2.0)
    P = make_projector("kron", 10, 3)
    for bad in (torch.zeros(4), torch.zeros(3, 1), torch.zeros(3, dtype=torch.long), [0.0, 0.0, 0.0]):
        with pytest.raises(ValueError, match=r"w must be a floating tensor of shape \(d,\) = \(3,\)"):
            P(bad)
    with pytest.raises(ValueError, match="needs film_mask"):
        make_projector("film", 10, 2)
    with pytest.raises(ValueError, match=r"film_mask must be a bool tensor of shape \(D,\) = \(10,\)"):
        make_projector("film", 10, 2, film_mask=torch.ones(9, dtype=torch.bool))
    with pytest.raises(ValueError, match="film_mask must be a bool tensor"):
        make_projector("film+kron", 10, 2, film_mask=torch.ones(10))
    with pytest.raises(ValueError, match="selects no parameter"):
        make_projector("film", 10, 2, film_mask=torch.zeros(10, dtype=torch.bool))
    with pytest.raises(ValueError, match="film_mask is used only by"):
        make_projector("dense", 10, 2, film_mask=torch.ones(10, dtype=torch.bool))
    with pytest.raises(TypeError, match="dtype must be a floating"):
        make_projector("dense", 10, 2, dtype=torch.int64)
