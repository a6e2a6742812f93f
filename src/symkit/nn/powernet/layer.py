"""PowerLayer: a Laurent polynomial in one or more base matrices as a layer (paper §3.1–3.2)."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from symkit._checks import check_int
from symkit.actions.grid import GroupAction, PermAction
from symkit.groups.base import Group
from symkit.nn._equivariance import Equivariant, standard_normal
from symkit.nn._factory import Resettable, factory, on
from symkit.nn.powernet.bases import Base

__all__ = ["PowerLayer", "power_set"]

_BIAS = ("channel", "full", None)
_COMBINE = ("product", "sum")


def _per_base(name: str, value: int | Sequence[int], nb: int) -> list[int]:
    values = [value] * nb if isinstance(value, int) and not isinstance(value, bool) else list(value)
    if len(values) != nb or any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        raise ValueError(f"{name} must be an int or a sequence of {nb} ints (one per base), got {value!r}")
    return values


def power_set(kernel_size: int | Sequence[int], num_bases: int, combine: str = "product") -> list[tuple[int, ...]]:
    """The multi-index set ``K`` of a PowerLayer from per-base odd kernel sizes ``k_b`` (powers ``-K_b..K_b``).

    ``combine="product"``: every ``(i_1, ..., i_m)`` in the product of the ranges (``prod k_b`` terms; with two
    shifts this is a ``k_1 x k_2`` convolution kernel, §3.5). ``combine="sum"``: the identity plus the non-zero powers
    of each base on its own (``1 + sum (k_b - 1)`` terms), i.e. one Laurent series per base, summed.
    """
    if combine not in _COMBINE:
        raise ValueError(f"combine must be one of {_COMBINE}, got {combine!r}")
    sizes = _per_base("kernel_size", kernel_size, num_bases)
    for k in sizes:
        if k < 1 or k % 2 == 0:
            raise ValueError(f"kernel sizes must be odd positive ints (powers -K..K), got {kernel_size!r}")
    ranges = [range(-(k // 2), k // 2 + 1) for k in sizes]
    if combine == "product":
        return [tuple(t) for t in itertools.product(*ranges)]
    out = [(0,) * num_bases]
    for b, r in enumerate(ranges):
        for i in r:
            if i != 0:
                t = [0] * num_bases
                t[b] = i
                out.append(tuple(t))
    return out


class _GatherTerms(torch.autograd.Function):
    """``x[..., table]`` viewed as ``(..., K, d)``; backward gathers with the inverse tables and sums over K."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, table: torch.Tensor, table_inv: torch.Tensor, k: int) -> torch.Tensor:  # noqa: ANN001
        ctx.save_for_backward(table_inv)
        ctx.k = k
        return x.index_select(-1, table).unflatten(-1, (k, x.shape[-1]))

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:  # noqa: ANN001
        (table_inv,) = ctx.saved_tensors
        k, d = grad.shape[-2], grad.shape[-1]
        g = grad.reshape(*grad.shape[:-2], k * d)
        offsets = (torch.arange(k, device=grad.device) * d).repeat_interleave(d)
        return g.index_select(-1, table_inv + offsets).unflatten(-1, (k, d)).sum(-2), None, None, None


class PowerLayer(Resettable, Equivariant, nn.Module):
    """``y^(o) = sum_{c, (i,...,q) in K} theta^(o,c)_{i...q} A^{i D_A} ... Z^{q D_Z} x^(c) + b^(o)``, then ``sigma``.

    The weight matrix of each channel pair is a truncated Laurent series in the base matrices (paper §3.2, with
    dilation ``D`` from §3.4). The forward pass never forms a ``d x d`` weight: it builds the stack of terms
    ``A^i ... Z^q x`` by repeated matrix-vector products (one per power step and base, shared by all output channels)
    and mixes the stack with the coefficients. Terms apply the last base first: ``A^i B^j x = A^i (B^j x)``.

    Args:
        bases: one :class:`Base` or a sequence of bases of the same size ``d``.
        in_channels, out_channels: channel counts.
        kernel_size: odd int or one per base; powers ``-(k-1)/2 .. (k-1)/2``. Ignored when ``powers`` is given.
        powers: explicit multi-index set ``K`` (tuples of ints, one entry per base).
        dilation: int or one per base; power ``i`` of base ``A`` means ``A^{i D}``.
        combine: ``"product"`` or ``"sum"`` (see :func:`power_set`).
        bias: ``"channel"`` (one scalar per output channel; invariant under every base that fixes constants),
            ``"full"`` (a ``d``-vector per output channel, as in the paper) or ``None``.
        activation: optional pointwise module applied last (``sigma``).
        generator: ``torch.Generator`` for the initial coefficients.
        init: ``"kaiming"`` (coefficients ``N(0, 2 / (c_in |K|))``, zero bias) or ``"uniform"`` (coefficients and
            channel bias ``U(-1/sqrt(c_in |K|), 1/sqrt(c_in |K|))``, the default of ``nn.Conv2d``).
        normalize_terms: divide each term's coefficient by the term's RMS gain (see :meth:`term_gains`), so that
            strongly non-normal bases (SW scaling) do not dominate a sum of terms at initialisation or in training.

    Input ``(N, c_in, d)`` or ``(N, c_in, h, w)`` with ``h w = d``; output has the same trailing shape.
    """

    def __init__(
        self,
        bases: Base | Sequence[Base],
        in_channels: int,
        out_channels: int,
        kernel_size: int | Sequence[int] = 5,
        *,
        powers: Sequence[Sequence[int]] | None = None,
        dilation: int | Sequence[int] = 1,
        combine: str = "product",
        bias: str | None = "channel",
        activation: nn.Module | None = None,
        generator: torch.Generator | None = None,
        dtype: torch.dtype | None = None,
        normalize_terms: bool = False,
        init: str = "kaiming",
        device: Any = None,
    ) -> None:
        super().__init__()
        base_list = [bases] if isinstance(bases, Base) else list(bases) if isinstance(bases, Sequence) else None
        if not base_list or not all(isinstance(b, Base) for b in base_list):
            raise TypeError(f"bases must be a Base or a non-empty sequence of Base objects, got {bases!r}")
        sizes = {b.size for b in base_list}
        if len(sizes) != 1:
            raise ValueError(f"all bases must have the same size, got sizes {[b.size for b in base_list]}")
        for name, c in (("in_channels", in_channels), ("out_channels", out_channels)):
            check_int(name, c, 1)
        if bias not in _BIAS:
            raise ValueError(f"bias must be one of {_BIAS}, got {bias!r}")
        nb = len(base_list)
        if powers is None:
            power_list = power_set(kernel_size, nb, combine)
        else:
            power_list = [tuple(p) for p in powers]
            if not power_list or any(len(p) != nb or not all(isinstance(i, int) for i in p) for p in power_list):
                raise ValueError(f"powers must be a non-empty list of {nb}-tuples of ints, got {powers!r}")
            if len(set(power_list)) != len(power_list):
                raise ValueError(f"powers contains duplicates: {powers!r}")
        dil = _per_base("dilation", dilation, nb)
        if any(d < 1 for d in dil):
            raise ValueError(f"dilation must be >= 1, got {dilation!r}")

        self.size = base_list[0].size
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.dilation = tuple(dil)
        self.power_list = power_list
        self.bases = nn.ModuleList(base_list)
        # one step per base: M^D (its inverse M^-D is stored with it), built once, only for dilation D > 1
        self.steps = nn.ModuleList(base if d == 1 else base.power(d) for base, d in zip(base_list, dil))
        self.register_buffer("powers", torch.tensor(power_list, dtype=torch.long), persistent=False)
        # the trailing run of permutation bases (applied first) is one gather with an index table; when every base
        # is a permutation that gather is the whole stack, otherwise the other bases step on top of its outputs
        n_perm = 0
        while n_perm < nb and base_list[nb - 1 - n_perm].is_permutation:
            n_perm += 1
        first = self._first_stepped = nb - n_perm  # bases [0, first) are applied by repeated steps
        # ``internal`` is the order in which the stack is built: gathered terms first, then stepped ones
        pure = [p for p in power_list if not any(p[:first])]
        self._stepped = [p for p in power_list if any(p[:first])]
        pure_rows = [p[first:] for p in pure]  # gather rows: the gathered terms, then suffixes only stepped from
        self._rows = pure_rows + sorted({p[first:] for p in self._stepped} - set(pure_rows))
        internal = pure + self._stepped if n_perm else list(power_list)  # no gather: build in the order of K
        where = {p: i for i, p in enumerate(internal)}
        self.register_buffer("term_order", torch.tensor([where[p] for p in power_list]), persistent=False)
        self.register_buffer("internal_order", torch.tensor([power_list.index(p) for p in internal]),
                             persistent=False)
        self._identity_order = internal == power_list
        if not n_perm:
            self.table = None
        else:
            on_bases = next(iter(base_list[0].buffers()), torch.empty(0)).device
            idx = torch.arange(self.size, dtype=torch.float64, device=on_bases)
            cache = self._extend({(): idx}, first, nb, [(0,) * first + r for r in self._rows])
            table = torch.stack([cache[r] for r in self._rows]).round().long()
            self.register_buffer("table", table.reshape(-1), persistent=False)
            self.register_buffer("table_inv", torch.argsort(table, dim=1).reshape(-1), persistent=False)

        f = factory(device, dtype)  # initial values are drawn on the CPU in float64, then moved
        k = len(power_list)
        fan_in = in_channels * k
        if init == "kaiming":
            w = torch.randn(out_channels, in_channels, k, generator=generator, dtype=torch.float64)
            w = w * math.sqrt(2.0 / fan_in)
        elif init == "uniform":
            w = torch.rand(out_channels, in_channels, k, generator=generator, dtype=torch.float64)
            w = (2 * w - 1) / math.sqrt(fan_in)
        else:
            raise ValueError(f"init must be 'kaiming' or 'uniform', got {init!r}")
        self.weight = nn.Parameter(on(w, f))
        # optional fixed per-term scale 1 / g_k, g_k the RMS gain of the term (1 for orthogonal bases)
        self.normalize_terms = bool(normalize_terms)
        scale = 1.0 / self.term_gains() if self.normalize_terms else torch.ones(k, dtype=torch.float64)
        self.register_buffer("term_scale", scale.to(device=self.weight.device, dtype=self.weight.dtype),
                             persistent=False)
        self.bias_mode = bias
        if bias == "channel":
            b = torch.zeros(out_channels, dtype=torch.float64)
            if init == "uniform":
                b = (2 * torch.rand(out_channels, generator=generator, dtype=torch.float64) - 1) / math.sqrt(fan_in)
            self.bias = nn.Parameter(on(b, f))
        elif bias == "full":
            self.bias = nn.Parameter(torch.zeros(out_channels, self.size, **f))
        else:
            self.register_parameter("bias", None)
        self.activation = activation
        if device is not None:  # index buffers and the bases follow the parameters
            self.to(device)

    @property
    def num_terms(self) -> int:
        """``|K|``, the number of coefficients per channel pair."""
        return len(self.power_list)

    def _step(self, b: int, x: torch.Tensor, up: bool) -> torch.Tensor:
        return self.steps[b].step(x, inverse=not up)

    @torch.no_grad()
    def term_gains(self, probes: int = 64) -> torch.Tensor:
        """RMS gain ``g_k = sqrt(E ||T_k z||^2 / E ||z||^2)`` of every term ``T_k`` (Gaussian probes, seed 0).

        ``g_k = 1`` for permutation and orthogonal bases; non-normal bases such as the SW scaling base amplify some
        inputs strongly (``g ~ 14`` for ``expm(0.2 G_scale)`` at 28x28), which ``normalize_terms=True`` divides out
        (coefficients ``theta_k / g_k``, so the layer is still ``sum theta'_k T_k``).
        """
        if self._first_stepped == 0:
            return torch.ones(self.num_terms, dtype=torch.float64)
        z = torch.randn(probes, self.size, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        z = z.to(next(iter(self.bases[0].buffers()), z).device)  # drawn on the CPU, applied where the bases are
        t = self._terms_generic(z)
        g = (t.pow(2).sum(dim=(0, 2)) / z.pow(2).sum()).sqrt()
        return torch.where((g - 1).abs() < 1e-9, torch.ones_like(g), g)  # orthogonal terms: exactly 1

    def effective_weight(self) -> torch.Tensor:
        """The coefficients ``theta^(o,c)_k`` of the Laurent series, ``(c_out, c_in, |K|)``."""
        return self.weight * self.term_scale if self.normalize_terms else self.weight

    def terms(self, x: torch.Tensor) -> torch.Tensor:
        """The stack ``[A^{i D_A} ... Z^{q D_Z} x]_{(i..q) in K}`` of shape ``(..., |K|, d)`` for ``x`` ``(..., d)``.

        The last base is applied first. The trailing permutation bases (all of them, or e.g. the two shifts of a
        layer that adds SW series) are one gather with a precomputed index table; every other base is applied by
        repeated steps from power 0, each shared suffix computed once.
        """
        t = self._terms_internal(x)
        return t if self._identity_order else t.index_select(-2, self.term_order)

    def _terms_internal(self, x: torch.Tensor) -> torch.Tensor:
        """The stack in the layer's internal order: gathered terms first, then the stepped ones."""
        if self.table is None:
            return self._terms_generic(x)
        first = self._first_stepped
        gathered = _GatherTerms.apply(x, self.table, self.table_inv, len(self._rows))
        if not self._stepped:
            return gathered
        cache = {r: gathered[..., i, :] for i, r in enumerate(self._rows)}
        cache = self._extend(cache, 0, first, self._stepped)
        n_pure = len(self.power_list) - len(self._stepped)
        return torch.cat([gathered[..., :n_pure, :], torch.stack([cache[p] for p in self._stepped], dim=-2)], dim=-2)

    def _extend(self, cache: dict[tuple[int, ...], torch.Tensor], lo: int, hi: int,
                powers: Sequence[tuple[int, ...]] | None = None) -> dict[tuple[int, ...], torch.Tensor]:
        """Terms keyed by the powers of bases ``hi..`` extended to keys of bases ``lo..`` (for the multi-indices
        ``powers``, default all): bases ``hi - 1`` down to ``lo`` are applied by repeated steps from power 0, each
        shared suffix computed once."""
        for b in reversed(range(lo, hi)):
            groups: dict[tuple[int, ...], set[int]] = defaultdict(set)
            for p in self.power_list if powers is None else powers:
                groups[p[b + 1:]].add(p[b])
            new: dict[tuple[int, ...], torch.Tensor] = {}
            for suffix, exps in groups.items():
                v = cache[suffix]
                if 0 in exps:
                    new[(0, *suffix)] = v
                for sign in (1, -1):
                    top = max((sign * e for e in exps), default=0)
                    cur = v
                    for e in range(1, top + 1):
                        cur = self._step(b, cur, up=sign > 0)
                        if sign * e in exps:
                            new[(sign * e, *suffix)] = cur
            cache = new
        return cache

    def _terms_generic(self, x: torch.Tensor) -> torch.Tensor:
        cache = self._extend({(): x}, 0, len(self.bases))
        return torch.stack([cache[p] for p in self.power_list], dim=-2)

    def declared_symmetry(self) -> tuple[PermAction, PermAction]:
        """The group generated by the bases, acting on the flattened grid, when the bases are commuting permutations
        and the bias is per channel: each term ``A^i ... Z^q`` then commutes with every base and the pointwise
        activation with every permutation (§3.2, exact equivariance). Other layers are quasi-equivariant and declare
        none (measure them with the Lie derivative)."""
        if not all(b.is_permutation for b in self.bases):
            raise TypeError("PowerLayer: only layers on permutation bases declare an exact symmetry; these bases "
                            f"are {[type(b).__name__ for b in self.bases]}")
        mats = [b.to_dense(torch.float64).cpu() for b in self.bases]
        for i, a in enumerate(mats):
            for b in mats[i + 1:]:
                if not torch.equal(a @ b, b @ a):
                    raise TypeError("PowerLayer: its permutation bases do not commute, so the layer is "
                                    "quasi-equivariant only (§3.2)")
        if self.bias_mode == "full":
            raise TypeError("PowerLayer: a full (per-position) bias is not invariant; use bias='channel' or None")
        action = GroupAction(Group(discrete_generators=torch.stack(mats).numpy(), name="PowerLayer bases"))
        return action, action

    def example_input(self, batch: int = 4, generator: torch.Generator | None = None) -> torch.Tensor:
        """``(batch, in_channels, size)`` standard normal features."""
        return standard_normal(self, (batch, self.in_channels, self.size), generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim not in (3, 4) or x.shape[1] != self.in_channels:
            raise ValueError(
                f"PowerLayer expects input (N, {self.in_channels}, d) or (N, {self.in_channels}, h, w) with d = "
                f"{self.size}, got shape {tuple(x.shape)}"
            )
        trailing = x.shape[2:]
        flat = x.flatten(2)  # not reshape(..., -1): a batch of 0 has no inferable size
        if flat.shape[-1] != self.size:
            raise ValueError(f"PowerLayer acts on {self.size} pixels per channel, got input shape {tuple(x.shape)}")
        t = self._terms_internal(flat)  # (N, c_in, K, d), K in the internal order
        n, c, k, d = t.shape
        w = self.effective_weight()
        w = w if self._identity_order else w.index_select(-1, self.internal_order)
        y = torch.matmul(w.reshape(self.out_channels, c * k), t.reshape(n, c * k, d))
        if self.bias is not None:
            y = y + (self.bias[:, None] if self.bias_mode == "channel" else self.bias)
        if self.activation is not None:
            y = self.activation(y)
        return y.reshape(n, self.out_channels, *trailing)

    def weight_matrix(self) -> torch.Tensor:
        """The dense weights ``W[o, c] = sum_K theta^(o,c)_K A^i ... Z^q`` as ``(c_out, c_in, d, d)`` (inspection)."""
        eye = torch.eye(self.size, dtype=self.weight.dtype, device=self.weight.device)
        t = self.terms(eye)  # (d, K, d): t[j, k, a] = (M^k)[a, j]
        return torch.einsum("oik,jka->oiaj", self.effective_weight(), t)

    def extra_repr(self) -> str:
        return (
            f"in_channels={self.in_channels}, out_channels={self.out_channels}, size={self.size}, "
            f"terms={self.num_terms}, dilation={self.dilation}, bias={self.bias_mode}"
        )
