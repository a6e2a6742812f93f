"""Learned quantisation of the subspace weights (thesis §5.4.2, Eq. 5.4; Lotfi et al. 2022).

Each weight is replaced by its nearest level of a learned codebook ``c`` of ``L`` values:
``w_hat_i = c_{q(i)}`` with ``q(i) = argmin_k |w_i - c_k|``. The codebook and the weights are trained together
(quantisation-aware training) with the straight-through estimator of Eq. 5.4,
``d w_hat_i / d w_j = delta_ij`` and ``d w_hat_i / d c_k = 1[q(i) = k]``.

Decisions (the thesis leaves them open; the authors' code is cited where it decides):

- **float16 codebook.** The message pays 16 bits a level (§5.4.2), so the decoder knows only the float16-rounded
  codebook. :meth:`Quantizer.forward` always quantises to ``fp16(c)`` (the parameter ``c`` itself stays in the
  weights' dtype and accumulates the updates, as master weights do in mixed precision; the straight-through
  gradient passes the rounding unchanged). The quantised model seen in training, the quantised training error
  and the decoded message are then the same numbers: ``quantizer(w) == quantizer.codebook_fp16().to(w.dtype)[
  quantizer.codes(w)]`` exactly. Two levels that round to one float16 value keep both indices; the second is
  never chosen (ties go to the lowest index) and costs only its codebook and count bits.
- **Ties.** ``q(i)`` is the first index of the smallest ``|w_i - c_k|`` as computed in the weights' dtype (the
  behaviour of :func:`torch.argmin`), so a weight halfway between two levels takes the lower index.
- **Uniform initialisation** (:func:`uniform_codebook`). The thesis says "uniform spacing between the minimum and
  maximum values"; the authors' code, followed here, uses ``L`` equal bins over ``[-max|w|, max|w|]``, each level
  the mean of the weights in its bin. An empty bin keeps its bin *centre* (the code keeps the bin's left edge,
  which for the first bin is -max|w|), so every empty-bin level lies strictly inside (-max|w|, max|w|).
- **k-means initialisation** (:func:`kmeans_codebook`): a deterministic 1-D Lloyd iteration in torch on the
  sorted weights (clusters are runs of the sorted weights, so one step is a search for ``L - 1`` boundaries and
  segment means from prefix sums). Like any Lloyd run it ends in a local optimum; it runs from two starts, the
  ``(k + 1/2)/L`` quantiles and the uniform codebook, and keeps the one with the smaller squared error, so its
  error (before the float16 rounding) is never above the uniform initialisation's (Lloyd's steps never increase
  it). It needs no seed, runs on the weights' device, and needs neither a CPU round trip nor scikit-learn (the
  authors use ``sklearn.cluster.KMeans``, unseeded).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from symkit._checks import check_int

__all__ = ["Quantizer", "initial_codebook", "kmeans_codebook", "nearest_codes", "quantize", "uniform_codebook"]

#: the float dtypes a weight may have: each holds every float16 value exactly (bfloat16 does not)
_FLOAT_DTYPES = (torch.float16, torch.float32, torch.float64)
#: the largest finite float16 value: a level beyond it cannot be sent
_FP16_MAX = float(torch.finfo(torch.float16).max)
#: elements of the (chunk, L) distance matrix computed at once by :func:`nearest_codes`
_CHUNK_ELEMENTS = 1 << 22


def _check_weights(w: Any, what: str = "w") -> Tensor:
    if not isinstance(w, Tensor):
        raise TypeError(f"{what}: expected a torch.Tensor, got {type(w).__name__}")
    if w.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"{what}: expected a float16, float32 or float64 tensor, got {w.dtype} (a float16 "
                        f"codebook is exact only in these dtypes)")
    return w


def _check_codebook(c: Any) -> Tensor:
    if not isinstance(c, Tensor) or c.dim() != 1 or c.numel() == 0:
        raise ValueError(f"codebook: expected a non-empty 1-D tensor, got "
                         f"{tuple(c.shape) if isinstance(c, Tensor) else type(c).__name__}")
    return c


def nearest_codes(w: Tensor, codebook: Tensor) -> Tensor:
    """``q(i) = argmin_k |w_i - c_k|`` for every element of ``w`` (a LongTensor of ``w``'s shape, on its device);
    ties go to the lowest index. The distances are computed in ``w``'s dtype, in chunks of at most 4M entries."""
    w = _check_weights(w)
    c = _check_codebook(codebook).detach().to(dtype=w.dtype)
    flat = w.detach().reshape(-1)
    out = torch.empty(flat.shape, dtype=torch.long, device=w.device)
    step = max(1, _CHUNK_ELEMENTS // c.numel())
    for start in range(0, flat.numel(), step):
        block = flat[start:start + step]
        out[start:start + step] = (block[:, None] - c[None, :]).abs().argmin(dim=1)
    return out.reshape(w.shape)


class _StraightThrough(torch.autograd.Function):
    """``w_hat = c[q(w)]`` with the straight-through gradients of Eq. 5.4."""

    @staticmethod
    def forward(ctx: Any, w: Tensor, c: Tensor) -> Tensor:
        codes = nearest_codes(w, c)
        ctx.save_for_backward(codes)
        ctx.levels, ctx.c_dtype = c.numel(), c.dtype
        return c.detach().to(w.dtype)[codes]

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        (codes,) = ctx.saved_tensors
        grad_w = grad if ctx.needs_input_grad[0] else None
        grad_c = None
        if ctx.needs_input_grad[1]:  # d w_hat_i / d c_k = 1[q(i) = k]: the sum of the gradients of level k's weights
            grad_c = torch.zeros(ctx.levels, dtype=grad.dtype, device=grad.device)
            grad_c = grad_c.index_add_(0, codes.reshape(-1), grad.reshape(-1)).to(ctx.c_dtype)
        return grad_w, grad_c


def quantize(w: Tensor, codebook: Tensor) -> Tensor:
    """``w_hat_i = c_{q(i)}`` (§5.4.2) with the straight-through gradients of Eq. 5.4: ``d w_hat / d w`` the identity
    and ``d w_hat_i / d c_k = 1[q(i) = k]``. Uses ``codebook`` as given (:class:`Quantizer` rounds it to float16
    first); the result has ``w``'s dtype."""
    return _StraightThrough.apply(_check_weights(w), _check_codebook(codebook))


def _flat_values(w: Tensor, levels: int, init: str) -> Tensor:
    w = _check_weights(w).detach().reshape(-1)
    if w.numel() == 0:
        raise ValueError(f"{init} codebook: w is empty, there is nothing to fit {levels} levels to")
    if w.device.type != "meta" and not bool(torch.isfinite(w).all()):
        raise ValueError(f"{init} codebook: w has non-finite values")
    return w


def uniform_codebook(w: Tensor, levels: int) -> Tensor:
    """The uniform initialisation of the authors' code: ``levels`` equal bins over ``[-m, m]``, ``m = max|w|``
    (bins ``[e_k, e_{k+1})``, the last one closed), each level the mean of the weights in its bin, an empty bin its
    centre. On ``w``'s device and in its dtype (also on ``meta``). ``ValueError`` for an empty ``w`` and for
    ``w == 0`` with ``levels > 1`` (every level would be 0)."""
    levels = check_int("levels", levels, 1)
    w = _flat_values(w, levels, "uniform")
    m = w.abs().amax()
    if levels > 1 and w.device.type != "meta" and float(m) == 0.0:
        raise ValueError(f"uniform codebook: every weight is 0, so all {levels} levels would coincide; use levels=1")
    steps = torch.arange(-levels, levels + 1, device=w.device)  # grid m j / L, j = -L..L: exact 0 in the middle
    grid = steps.to(w.dtype) / levels * m
    edges, centres = grid[2:-1:2].contiguous(), grid[1::2]  # the L - 1 inner edges e_1..e_{L-1}, the L centres
    bins = torch.bucketize(w, edges, right=True)  # e_{k} <= w < e_{k+1}
    sums = torch.zeros(levels, device=w.device, dtype=w.dtype).index_add_(0, bins, w)
    counts = torch.zeros(levels, device=w.device, dtype=w.dtype).index_add_(0, bins, torch.ones_like(w))
    return torch.where(counts > 0, sums / counts.clamp(min=1), centres)


def _lloyd(x: Tensor, c: Tensor, max_iter: int) -> tuple[Tensor, Tensor]:
    """1-D Lloyd iteration on the sorted values ``x`` from the sorted, distinct levels ``c``; returns the levels and
    the sum of squared errors. A value exactly between two levels joins the lower one; an empty cluster keeps its
    level (the levels stay sorted and distinct). Clusters are runs of ``x``: one step is a search for the ``L - 1``
    boundaries and segment means from prefix sums (in float64 where the device has it)."""
    n = x.numel()
    acc = torch.float64 if x.device.type in ("cpu", "cuda") else x.dtype
    prefix = torch.cat([x.new_zeros(1, dtype=acc), torch.cumsum(x.to(acc), 0)])
    bounds = None
    for _ in range(max_iter + 1):
        cut = torch.searchsorted(x, (c[1:] + c[:-1]) / 2, right=True)  # values <= midpoint k go to levels <= k
        if bounds is not None and torch.equal(cut, bounds):
            break
        bounds = cut
        edges = torch.cat([cut.new_zeros(1), cut, cut.new_full((1,), n)])
        counts = edges[1:] - edges[:-1]
        means = ((prefix[edges[1:]] - prefix[edges[:-1]]) / counts.clamp(min=1).to(acc)).to(x.dtype)
        c = torch.where(counts > 0, means, c)
    counts = torch.diff(bounds, prepend=bounds.new_zeros(1), append=bounds.new_full((1,), n))
    error = (x - torch.repeat_interleave(c, counts)).to(acc).square().sum()
    return c, error


def kmeans_codebook(w: Tensor, levels: int, *, max_iter: int = 2000) -> Tensor:
    """1-D k-means (Lloyd) levels of ``w``, sorted, on ``w``'s device and in its dtype; deterministic (module
    docstring): the better of the runs from the ``(k + 1/2)/L`` quantiles and from :func:`uniform_codebook`, so its
    squared error is never above the uniform codebook's. ``ValueError`` for an empty ``w``, for more levels than
    distinct values (``L`` clusters cannot all be non-empty), and on ``meta`` (k-means needs the values)."""
    levels = check_int("levels", levels, 1)
    max_iter = check_int("max_iter", max_iter, 1)
    if _check_weights(w).device.type == "meta":
        raise ValueError("kmeans codebook: k-means needs the values of w, which a meta tensor does not have")
    w = _flat_values(w, levels, "kmeans")
    x = torch.sort(w).values
    distinct = torch.unique_consecutive(x)
    if distinct.numel() < levels:
        raise ValueError(f"kmeans codebook: {levels} levels but w has only {distinct.numel()} distinct values; "
                         f"use levels <= {distinct.numel()} (or init='uniform', which keeps empty levels)")
    n, k = x.numel(), torch.arange(levels, device=x.device)
    start = x[(2 * k + 1) * n // (2 * levels)]  # the (k + 1/2)/L quantiles (integer arithmetic: no float64 needed)
    if torch.unique_consecutive(start).numel() < levels:  # a repeated value spans several quantiles: spread the
        u = distinct.numel()  # starts evenly over the distinct values instead, round(k (u - 1) / (L - 1))
        start = distinct[(2 * k * (u - 1) + levels - 1) // (2 * (levels - 1))]
    best, best_error = _lloyd(x, start, max_iter)
    if levels > 1:
        uniform = torch.unique(uniform_codebook(x, levels))  # sorted; distinct (bin means and centres never tie)
        if uniform.numel() == levels:
            other, other_error = _lloyd(x, uniform, max_iter)
            if other_error < best_error:
                best = other
    return best


def initial_codebook(w: Tensor, levels: int, init: str = "uniform") -> Tensor:
    """The initial levels (§5.4.2): ``init="uniform"`` (:func:`uniform_codebook`) or ``"kmeans"``
    (:func:`kmeans_codebook`)."""
    if init == "uniform":
        return uniform_codebook(w, levels)
    if init == "kmeans":
        return kmeans_codebook(w, levels)
    raise ValueError(f"init must be 'uniform' or 'kmeans', got {init!r}")


class Quantizer(nn.Module):
    """A learned codebook ``c`` of ``levels`` values (an ``nn.Parameter``) and the quantiser of §5.4.2:
    ``quantizer(w)`` is ``w_hat_i = fp16(c)_{q(i)}`` with the straight-through gradients of Eq. 5.4 for ``w`` and
    ``c``. The codebook is always rounded to float16 first (module docstring), so
    ``quantizer(w) == quantizer.codebook_fp16().to(w.dtype)[quantizer.codes(w)]``.

    Start from :meth:`initialize` (uniform or k-means levels of the weights) before building the optimiser; the
    default levels, ``linspace(-1, 1, levels)``, are only a placeholder.
    """

    def __init__(self, levels: int, *, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        levels = check_int("levels", levels, 1)
        start = torch.linspace(-1.0, 1.0, levels, dtype=torch.float64) if levels > 1 else \
            torch.zeros(1, dtype=torch.float64)
        self.codebook = nn.Parameter(start.to(device=device, dtype=dtype or torch.get_default_dtype()))

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """The placeholder levels of construction, ``linspace(-1, 1, levels)`` (0 for one level)."""
        n = self.codebook.numel()
        start = torch.linspace(-1.0, 1.0, n, dtype=torch.float64) if n > 1 else torch.zeros(1, dtype=torch.float64)
        self.codebook.copy_(start)

    @property
    def levels(self) -> int:
        """``L``, the number of levels."""
        return self.codebook.numel()

    @torch.no_grad()
    def initialize(self, w: Tensor, init: str = "uniform", levels: int | None = None) -> Quantizer:
        """Set the codebook to the ``init`` levels of ``w`` (:func:`initial_codebook`), on ``w``'s device and in its
        dtype; ``levels`` (default: the current number) may change ``L``. The parameter object is kept when its
        shape, device and dtype stay, and replaced otherwise (build the optimiser afterwards). ``ValueError`` for
        a level beyond the float16 range. Returns ``self``."""
        levels = self.levels if levels is None else check_int("levels", levels, 1)
        c = initial_codebook(w, levels, init)
        if c.device.type != "meta" and float(c.abs().max()) > _FP16_MAX:
            raise ValueError(f"{init} codebook: a level of {float(c.abs().max()):.4g} is beyond the float16 range "
                             f"(+-{_FP16_MAX:g}); the message sends the levels in float16")
        p = self.codebook
        if p.shape == c.shape and p.device == c.device and p.dtype == c.dtype:
            p.copy_(c)
        else:
            self.codebook = nn.Parameter(c)
        return self

    def codebook_fp16(self) -> Tensor:
        """The codebook as the message sends it: float16, detached, on the codebook's device. ``ValueError`` if a
        level is beyond the float16 range."""
        c = self.codebook.detach()
        if c.device.type != "meta" and float(c.abs().max()) > _FP16_MAX:
            raise ValueError(f"codebook: a level of {float(c.abs().max()):.4g} is beyond the float16 range")
        return c.to(torch.float16)

    def _rounded(self, dtype: torch.dtype) -> Tensor:
        """``fp16(c)`` in ``dtype`` with an identity gradient to ``c`` (exact: every float16 value is one of
        ``dtype``)."""
        c = self.codebook
        return _RoundFp16.apply(c).to(dtype)

    def forward(self, w: Tensor) -> Tensor:
        """``w_hat = fp16(c)[q(w)]``, ``w``'s shape and dtype, with the gradients of Eq. 5.4."""
        w = _check_weights(w)
        return _StraightThrough.apply(w, self._rounded(w.dtype))

    @torch.no_grad()
    def codes(self, w: Tensor) -> Tensor:
        """``q(i)`` for every weight (a LongTensor of ``w``'s shape on its device): the symbols to code."""
        w = _check_weights(w)
        return nearest_codes(w, self.codebook_fp16().to(w.dtype))

    def extra_repr(self) -> str:
        return f"levels={self.levels}"


class _RoundFp16(torch.autograd.Function):
    """Round to float16 and back, with the identity as gradient (the straight-through estimator of the rounding)."""

    @staticmethod
    def forward(ctx: Any, c: Tensor) -> Tensor:
        return c.detach().to(torch.float16).to(c.dtype)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        return grad
