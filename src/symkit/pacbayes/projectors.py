"""Random projectors ``P`` (``D x d``, ``P^T P ≈ I``) for intrinsic-dimension subspace training (thesis ch. 5,
Eq. 5.3 ``θ = θ0 + P w``; §5.4.1; Li et al. 2018).

A projector is a function of ``(kind, D, d, seed)`` only (plus the FiLM mask): it is regenerated from the seed and
never written to disk (its tensors are non-persistent buffers, absent from ``state_dict``). All random numbers come
from a ``torch.Generator`` seeded with ``seed``, drawn on the CPU in float64 and then moved to the requested device
and dtype, so a projector holds the same numbers on every device and in every dtype, up to rounding.

Kinds (:func:`make_projector`):

- ``"dense"``: ``P_ij ~ N(0, 1) / sqrt(D)``. The matrix is defined block by block: rows ``[r, r + rows)`` with
  ``rows = max(1, BLOCK_ELEMENTS // d)``, each block drawn from its own seed (the seeds come from a generator seeded
  with ``seed``). When ``D * d`` entries of the dtype fit in ``cache_bytes`` the matrix is kept as a buffer;
  otherwise every forward (and backward) regenerates the blocks one at a time, so memory stays at one block. The
  block layout does not depend on ``cache_bytes``: the cached and regenerated matrices are the same.
- ``"sparse"``: the very sparse random projection of Li, Hastie and Church (2006) used by Li et al. (2018): each
  entry is nonzero with probability ``s = 1 / sqrt(D)``, with value ``±1 / sqrt(D s) = ±D^{-1/4}``, so every column has
  unit expected squared norm. Stored as a coalesced sparse COO tensor (about ``d sqrt(D)`` nonzeros); the product
  is a gather and scatter-add over its nonzeros.
- ``"kron-sum"``: ``P_⊕ = Π (1 ⊗ R1 + R2 ⊗ 1) / sqrt(2D)`` with ``R1, R2 ~ N(0, 1)^{k x d}``; ``P w`` is the
  ``k x k`` outer sum ``(R2 w)_a + (R1 w)_b``, ``O(d k + D)``.
- ``"kron"``: ``P_⊗ = Π (Q1 ⊗ Q2) / sqrt(D)`` with ``Q1, Q2 ~ N(0, 1)^{k x m}``; ``P w = vec(Q1 W Q2^T)`` with ``W``
  the ``m x m`` reshape of ``w`` (the vec trick), ``O(k m^2 + k^2 m) = O(d sqrt(D) + D sqrt(d))``.
- ``"film"``: only the rows selected by ``film_mask`` (normalisation and head parameters, :func:`film_mask`) are
  nonzero; they hold a ``"dense"`` projector of the ``n`` selected rows, ``N(0, 1) / sqrt(n)``.
- ``"film+kron"``: ``(P_film + P_kron) / sqrt(2)``, the thesis's choice for training from scratch.

Padding of the Kronecker kinds: ``k = ceil(sqrt(D))`` and ``m = ceil(sqrt(d))``, the smallest squares that fit; the
structured ``k^2 x m^2`` matrix is truncated to its first ``D`` rows and first ``d`` columns (``w`` is padded with
zeros), and ``Π`` is a random permutation of the ``D`` rows drawn from the seed (as the authors' code does, so that a
layer's consecutive parameters do not share a Kronecker factor). The thesis and the authors' code instead round down
and add a dense random block for the leftover (a direct sum in the code). Truncation keeps one distribution for every
entry, keeps the cost of the structured product, and leaves no parameter or coordinate of ``w`` that never moves,
which the code's direct sum does when only one of ``D`` and ``d`` is a perfect square. Every column keeps unit
expected squared norm: the scale is ``1 / sqrt(2D)`` (``1 / sqrt(D)``) for the ``D`` rows that remain.

Near-orthogonality: the rows of ``P_⊕`` are built from only ``2k = 2 sqrt(D)`` independent Gaussian vectors, and the
factors of ``P_⊗`` from ``k`` rows each, so ``P^T P - I`` has entries of size ``D^{-1/4}`` for both Kronecker kinds
(``D^{-1/2}`` for ``"dense"``). The thesis states ``O(D^{-1/2})`` for ``P_⊕``; the dominant term
``(R1^T R1 + R2^T R2) / (2k) - I`` is ``O(k^{-1/2}) = O(D^{-1/4})``, which the tests measure. Only the cross term
``(R1^T 1)(1^T R2) / (2k^2)`` is ``O(D^{-1/2})``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from symkit._checks import check_int
from symkit.nn._factory import factory

__all__ = ["BLOCK_ELEMENTS", "CACHE_BYTES", "KINDS", "Projector", "film_mask", "make_projector"]

KINDS = ("dense", "sparse", "kron-sum", "kron", "film", "film+kron")
DEFAULT_SEED = 137
#: entries per generated block of the dense projector (8 MiB in float64); part of the matrix's definition
BLOCK_ELEMENTS = 1 << 20
#: a dense projector is cached as a buffer when its ``D * d`` entries take at most this many bytes (256 MiB)
CACHE_BYTES = 1 << 28

NORM_TYPES: tuple[type[nn.Module], ...] = (
    nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm, nn.InstanceNorm1d, nn.InstanceNorm2d,
    nn.InstanceNorm3d, nn.LayerNorm, nn.GroupNorm, *((nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ()),
)


def _seeds(seed: int, n: int) -> list[int]:
    """``n`` child seeds drawn from a generator seeded with ``seed``."""
    g = torch.Generator().manual_seed(seed)
    return [int(s) for s in torch.randint(0, 2**62, (n,), generator=g)]


def _randn(shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=g, dtype=torch.float64)


def _permutation(D: int, g: torch.Generator) -> torch.Tensor:
    return torch.randperm(D, generator=g)


class Projector(nn.Module):
    """A ``D x d`` random projector ``P`` (thesis Eq. 5.3, §5.4.1): ``forward(w) = P @ w`` for ``w`` of shape
    ``(d,)``, differentiable in ``w``; ``to_dense()`` materialises ``P`` (for tests and debugging).

    The result takes the device and dtype of ``w``: the buffers are cast to them when they differ. ``device`` and
    ``dtype`` report where the buffers are (``.to()`` moves them with the module)."""

    kind: str = ""

    def __init__(self, D: int, d: int, seed: int, f: dict[str, Any]) -> None:
        super().__init__()
        self.D, self.d, self.seed = D, d, seed
        self.register_buffer("_anchor", torch.empty(0, **f), persistent=False)

    @property
    def device(self) -> torch.device:
        return self._anchor.device

    @property
    def dtype(self) -> torch.dtype:
        return self._anchor.dtype

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        """``P @ w``: shape ``(D,)``, on ``w``'s device and in ``w``'s dtype."""
        if not isinstance(w, torch.Tensor) or w.shape != (self.d,) or not w.is_floating_point():
            got = (f"a {w.dtype} tensor of shape {tuple(w.shape)}" if isinstance(w, torch.Tensor)
                   else type(w).__name__)
            raise ValueError(f"{type(self).__name__}.forward: w must be a floating tensor of shape (d,) = "
                             f"({self.d},), got {got}")
        return self._matvec(w)

    def _matvec(self, w: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def to_dense(self) -> torch.Tensor:
        """The ``D x d`` matrix, on the projector's device and in its dtype."""
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, D={self.D}, d={self.d}, seed={self.seed}"


def _like(t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return t.to(device=w.device, dtype=w.dtype)


# ---------------------------------------------------------------------------------------------- dense
class _RegeneratedMatvec(torch.autograd.Function):
    """``P @ w`` and ``P^T g`` for a dense projector whose blocks are regenerated in both passes."""

    @staticmethod
    def forward(ctx: Any, w: torch.Tensor, proj: DenseProjector) -> torch.Tensor:
        ctx.proj = proj
        out = w.new_empty(proj.D)
        for start, block in proj._blocks_like(w):
            torch.mv(block, w, out=out[start:start + block.shape[0]])
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        grad = g.new_zeros(ctx.proj.d)
        for start, block in ctx.proj._blocks_like(g):
            grad.addmv_(block.T, g[start:start + block.shape[0]])
        return grad, None


class DenseProjector(Projector):
    """``P ~ N(0, 1)^{D x d} / sqrt(D)``, defined block by block from the seed (module docstring); cached as a
    buffer when it takes at most ``cache_bytes``, regenerated in every pass otherwise."""

    kind = "dense"

    def __init__(self, D: int, d: int, seed: int, f: dict[str, Any], cache_bytes: int = CACHE_BYTES) -> None:
        super().__init__(D, d, seed, f)
        self.rows = max(1, BLOCK_ELEMENTS // d)
        self.cached = D * d * f["dtype"].itemsize <= cache_bytes
        self.register_buffer("matrix", self._assemble(f) if self.cached else None, persistent=False)

    def _blocks(self):
        """``(first row, block)`` for the row blocks of ``P``, in float64 on the CPU, one at a time. The blocks are
        views of one buffer that the next block overwrites (no allocation per block)."""
        starts = range(0, self.D, self.rows)
        scale = 1 / math.sqrt(self.D)
        buffer = torch.empty(min(self.rows, self.D), self.d, dtype=torch.float64)
        for start, seed in zip(starts, _seeds(self.seed, len(starts))):
            block = buffer[:min(self.rows, self.D - start)]
            torch.randn(block.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64, out=block)
            yield start, block.mul_(scale)

    def _blocks_like(self, t: torch.Tensor):
        """The blocks on ``t``'s device and in its dtype, through one reused buffer."""
        if t.device.type == "cpu" and t.dtype == torch.float64:
            yield from self._blocks()
            return
        buffer = torch.empty(min(self.rows, self.D), self.d, device=t.device, dtype=t.dtype)
        for start, block in self._blocks():
            yield start, buffer[:block.shape[0]].copy_(block)

    def _assemble(self, f: dict[str, Any]) -> torch.Tensor:
        """The whole matrix on ``f``'s device and dtype, filled block by block (one float64 block at a time)."""
        out = torch.empty(self.D, self.d, **f)
        if out.device.type != "meta":
            for start, block in self._blocks():
                out[start:start + block.shape[0]] = block
        return out

    def _matvec(self, w: torch.Tensor) -> torch.Tensor:
        if self.matrix is not None:
            return _like(self.matrix, w) @ w
        if w.device.type == "meta":  # no values to compute: the shape is the result
            return w.new_empty(self.D) + w.sum()
        return _RegeneratedMatvec.apply(w, self)

    def to_dense(self) -> torch.Tensor:
        if self.matrix is not None:
            return self.matrix
        return self._assemble({"device": self.device, "dtype": self.dtype})

    def extra_repr(self) -> str:
        return super().extra_repr() + f", cached={self.cached}"


# ---------------------------------------------------------------------------------------------- sparse
class SparseProjector(Projector):
    """Very sparse random projection (Li, Hastie and Church 2006; Li et al. 2018): entries nonzero with probability
    ``s = 1 / sqrt(D)``, values ``±1 / sqrt(D s)`` (unit expected column norm), a sparse COO buffer."""

    kind = "sparse"

    def __init__(self, D: int, d: int, seed: int, f: dict[str, Any]) -> None:
        super().__init__(D, d, seed, f)
        g = torch.Generator().manual_seed(seed)
        s = 1 / math.sqrt(D)
        flat = self._positions(D * d, s, g)  # row-major positions i * d + j of the nonzeros, increasing
        signs = torch.randint(0, 2, (flat.numel(),), generator=g, dtype=torch.float64).mul_(2).sub_(1)
        index = torch.stack([flat // d, flat % d])  # sorted by (row, column) and unique: already coalesced
        matrix = torch.sparse_coo_tensor(index, signs.mul_(1 / math.sqrt(D * s)), (D, d), is_coalesced=True,
                                         check_invariants=False)
        self.density = flat.numel() / (D * d)
        self.register_buffer("matrix", matrix.to(**f), persistent=False)

    @staticmethod
    def _positions(n: int, p: float, g: torch.Generator) -> torch.Tensor:
        """The positions in ``[0, n)`` of a Bernoulli(p) process, from geometric gaps (exact, ``O(n p)``)."""
        if p >= 1:
            return torch.arange(n)
        log_q = math.log1p(-p)
        parts, last = [], -1
        batch = max(1024, int(1.1 * n * p) + 64)
        while True:
            u = 1 - torch.rand(batch, generator=g, dtype=torch.float64)  # in (0, 1]
            gaps = torch.floor(torch.log(u) / log_q).to(torch.int64) + 1
            pos = last + torch.cumsum(gaps, 0)
            parts.append(pos[pos < n])
            if pos[-1] >= n:
                return torch.cat(parts)
            last = int(pos[-1])

    def _matvec(self, w: torch.Tensor) -> torch.Tensor:
        if w.device.type == "meta" or self.matrix.device.type == "meta":  # sparse kernels have no meta version
            return w.new_empty(self.D) + w.sum()
        rows, cols = self.matrix.indices().to(w.device)  # a gather and a scatter-add: O(nnz) in both passes,
        values = _like(self.matrix.values(), w)  # several times faster than torch.sparse.mm's backward on the CPU
        return w.new_zeros(self.D).index_add(0, rows, values * w[cols])

    def to_dense(self) -> torch.Tensor:
        if self.matrix.device.type == "meta":
            return torch.empty(self.D, self.d, device="meta", dtype=self.dtype)
        return self.matrix.to_dense()

    def extra_repr(self) -> str:
        return super().extra_repr() + f", density={self.density:.3g}"


# ---------------------------------------------------------------------------------------------- Kronecker
class KronSumProjector(Projector):
    """``P_⊕ = Π (1 ⊗ R1 + R2 ⊗ 1) / sqrt(2D)`` (thesis §5.4.1), ``k = ceil(sqrt(D))``, truncated to ``D`` rows
    (module docstring); MVM ``O(d sqrt(D) + D)`` without forming ``P``."""

    kind = "kron-sum"

    def __init__(self, D: int, d: int, seed: int, f: dict[str, Any]) -> None:
        super().__init__(D, d, seed, f)
        self.k = math.isqrt(D - 1) + 1
        g = torch.Generator().manual_seed(seed)
        self.register_buffer("R1", _randn((self.k, d), g).to(**f), persistent=False)
        self.register_buffer("R2", _randn((self.k, d), g).to(**f), persistent=False)
        self.register_buffer("perm", _permutation(D, g).to(f["device"]), persistent=False)

    def _matvec(self, w: torch.Tensor) -> torch.Tensor:
        a, b = _like(self.R2, w) @ w, _like(self.R1, w) @ w
        full = (a.unsqueeze(1) + b.unsqueeze(0)).reshape(-1)  # row a * k + b of 1 ⊗ R1 + R2 ⊗ 1
        return full[self.perm.to(w.device)] * (1 / math.sqrt(2 * self.D))

    def to_dense(self) -> torch.Tensor:
        ones = torch.ones(self.k, 1, device=self.device, dtype=self.dtype)
        full = torch.kron(ones, self.R1) + torch.kron(self.R2, ones)
        return full[self.perm] / math.sqrt(2 * self.D)


class KronProjector(Projector):
    """``P_⊗ = Π (Q1 ⊗ Q2) / sqrt(D)`` (thesis §5.4.1), ``k = ceil(sqrt(D))``, ``m = ceil(sqrt(d))``, truncated to
    ``D x d`` (module docstring); MVM by the vec trick ``(Q1 ⊗ Q2) vec(W) = vec(Q1 W Q2^T)``."""

    kind = "kron"

    def __init__(self, D: int, d: int, seed: int, f: dict[str, Any]) -> None:
        super().__init__(D, d, seed, f)
        self.k, self.m = math.isqrt(D - 1) + 1, math.isqrt(d - 1) + 1
        g = torch.Generator().manual_seed(seed)
        self.register_buffer("Q1", _randn((self.k, self.m), g).to(**f), persistent=False)
        self.register_buffer("Q2", _randn((self.k, self.m), g).to(**f), persistent=False)
        self.register_buffer("perm", _permutation(D, g).to(f["device"]), persistent=False)

    def _matvec(self, w: torch.Tensor) -> torch.Tensor:
        W = torch.cat([w, w.new_zeros(self.m * self.m - self.d)]).reshape(self.m, self.m)
        full = (_like(self.Q1, w) @ W @ _like(self.Q2, w).T).reshape(-1)  # row-major vec
        return full[self.perm.to(w.device)] * (1 / math.sqrt(self.D))

    def to_dense(self) -> torch.Tensor:
        return torch.kron(self.Q1, self.Q2)[:, :self.d][self.perm] / math.sqrt(self.D)


# ---------------------------------------------------------------------------------------------- FiLM
class FiLMProjector(Projector):
    """Nonzero only on the rows where ``mask`` is true (thesis §5.4.1): a ``"dense"`` projector of the ``n``
    selected rows, ``N(0, 1) / sqrt(n)``, so every column has unit expected norm (as in the authors' code; the thesis
    text says ``1 / sqrt(D)``, which would shrink the columns to norm ``sqrt(n / D)``). With ``d > n`` the columns
    cannot be near-orthogonal (``P`` has rank at most ``n``)."""

    kind = "film"

    def __init__(self, D: int, d: int, seed: int, f: dict[str, Any], mask: torch.Tensor,
                 cache_bytes: int = CACHE_BYTES) -> None:
        super().__init__(D, d, seed, f)
        index = torch.nonzero(mask.cpu()).squeeze(1)
        self.n = index.numel()
        self.register_buffer("index", index.to(f["device"]), persistent=False)
        self.inner = DenseProjector(self.n, d, seed, f, cache_bytes)

    def _matvec(self, w: torch.Tensor) -> torch.Tensor:
        return w.new_zeros(self.D).index_copy(0, self.index.to(w.device), self.inner._matvec(w))

    def to_dense(self) -> torch.Tensor:
        out = torch.zeros(self.D, self.d, device=self.device, dtype=self.dtype)
        out[self.index] = self.inner.to_dense()
        return out

    def extra_repr(self) -> str:
        return super().extra_repr() + f", selected={self.n}"


class FiLMKronProjector(Projector):
    """``P = (P_film + P_kron) / sqrt(2)`` (thesis §5.4.1, training from scratch); the two parts use child seeds of
    ``seed``."""

    kind = "film+kron"

    def __init__(self, D: int, d: int, seed: int, f: dict[str, Any], mask: torch.Tensor,
                 cache_bytes: int = CACHE_BYTES) -> None:
        super().__init__(D, d, seed, f)
        s_film, s_kron = _seeds(seed, 2)
        self.film = FiLMProjector(D, d, s_film, f, mask, cache_bytes)
        self.kron = KronProjector(D, d, s_kron, f)

    def _matvec(self, w: torch.Tensor) -> torch.Tensor:
        return (self.film._matvec(w) + self.kron._matvec(w)) * (1 / math.sqrt(2))

    def to_dense(self) -> torch.Tensor:
        return (self.film.to_dense() + self.kron.to_dense()) / math.sqrt(2)


# ---------------------------------------------------------------------------------------------- public
def make_projector(kind: str, D: int, d: int, *, seed: int = DEFAULT_SEED, film_mask: torch.Tensor | None = None,
                   device: Any = None, dtype: torch.dtype | None = None,
                   cache_bytes: int = CACHE_BYTES) -> Projector:
    """A ``D x d`` random projector of ``kind`` (one of :data:`KINDS`; module docstring), regenerated from ``seed``.

    ``film_mask`` (a bool tensor of length ``D``, see :func:`film_mask`) selects the rows of ``"film"`` and
    ``"film+kron"`` and is required by them only. ``device`` and ``dtype`` follow PyTorch's factory conventions
    (default dtype when none is given). ``cache_bytes`` decides whether a dense part is kept in memory or
    regenerated in every pass; it does not change the matrix.
    """
    if not isinstance(kind, str) or kind not in KINDS:
        raise ValueError(f"make_projector: kind must be one of {KINDS}, got {kind!r}")
    D = check_int("make_projector: D", D, 1)
    d = check_int("make_projector: d", d, 1)
    if d > D:
        raise ValueError(f"make_projector: d must be <= D = {D} (a projection to at most as many dimensions), got {d}")
    seed = check_int("make_projector: seed", seed, 0)
    cache_bytes = check_int("make_projector: cache_bytes", cache_bytes, 0)
    f = factory(device, dtype)
    if kind in ("film", "film+kron"):
        if film_mask is None:
            raise ValueError(f"make_projector: kind {kind!r} needs film_mask, a bool tensor of length D = {D} "
                             "(see film_mask(net))")
        if not isinstance(film_mask, torch.Tensor) or film_mask.dtype != torch.bool or film_mask.shape != (D,):
            got = (f"a {film_mask.dtype} tensor of shape {tuple(film_mask.shape)}"
                   if isinstance(film_mask, torch.Tensor) else type(film_mask).__name__)
            raise ValueError(f"make_projector: film_mask must be a bool tensor of shape (D,) = ({D},), got {got}")
        if not bool(film_mask.any()):
            raise ValueError("make_projector: film_mask selects no parameter")
        cls = FiLMProjector if kind == "film" else FiLMKronProjector
        return cls(D, d, seed, f, film_mask, cache_bytes)
    if film_mask is not None:
        raise ValueError(f"make_projector: film_mask is used only by 'film' and 'film+kron', not by {kind!r}")
    if kind == "dense":
        return DenseProjector(D, d, seed, f, cache_bytes)
    return {"sparse": SparseProjector, "kron-sum": KronSumProjector, "kron": KronProjector}[kind](D, d, seed, f)


def film_mask(net: nn.Module) -> torch.Tensor:
    """The rows of a ``"film"`` projector (thesis §5.4.1): a bool tensor over ``net.parameters()`` (in that order,
    shared parameters once) that is true for the parameters of normalisation modules (BatchNorm, SyncBatchNorm,
    InstanceNorm, LayerNorm, GroupNorm, RMSNorm) and of the head. The head is the last ``nn.Linear`` in
    ``net.modules()`` order (registration order); a net without one takes the last module, in that order, that owns
    parameters and is not a normalisation module (e.g. a final convolution)."""
    if not isinstance(net, nn.Module):
        raise TypeError(f"film_mask: net must be an nn.Module, got {type(net).__name__}")
    selected: set[int] = set()
    head: nn.Module | None = None
    fallback: nn.Module | None = None
    for module in net.modules():
        own = list(module.parameters(recurse=False))
        if isinstance(module, NORM_TYPES):
            selected.update(id(p) for p in own)
        elif isinstance(module, nn.Linear):
            head = module
        elif own:
            fallback = module
    head = head if head is not None else fallback
    if head is not None:
        selected.update(id(p) for p in head.parameters())
    params = list(net.parameters())
    if not params:
        return torch.zeros(0, dtype=torch.bool)
    return torch.cat([torch.full((p.numel(),), id(p) in selected, dtype=torch.bool) for p in params])
