"""Equivariant MLPs for any matrix group (thesis ch. 2, Sec. 2.6 and Figure 2.4).

A layer's weight is built from its coefficients once per forward pass, ``vec(W) = Q beta`` (Sec. 2.4.2), block by
block: the hom-space ``rep_in >> rep_out`` splits into canonical blocks (eq. 2.8), each solved once by the core
solver; a block with ``m`` copies holds an ``(m, r)`` coefficient matrix and scatters ``beta Q^T`` into the weight.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from symkit._checks import check_bool, check_int
from symkit.groups.base import Group
from symkit.nn._equivariance import Equivariant
from symkit.nn._factory import Resettable, factory, index_tensor, on
from symkit.nn._inputs import check_input, check_rep
from symkit.nn._isotypic import IrrepProduct, plan_irreps
from symkit.nn._weight_cache import WeightCache
from symkit.nn.bilinear import BiLinear
from symkit.reps.core import Rep, Scalar, SumRep, T
from symkit.reps.solve import dense_array

__all__ = [
    "EquivariantLinear",
    "GatedNonlinearity",
    "gated",
    "gate_count",
    "uniform_rep",
    "BiLinear",
    "EMLPBlock",
    "layer_reps",
    "model_reps",
    "check_input",
    "EMLP",
    "MLP",
    "swish",
]


#: batches (samples per call) from which an :class:`EquivariantLinear` that has an irreducible form uses it
IRREP_MIN_BATCH = 8


def swish(x: torch.Tensor) -> torch.Tensor:
    """x * sigmoid(x) (Ramachandran et al. 2017), the nonlinearity of scalars and permutation reps (torch's fused
    ``silu`` kernel: one pass forward and one backward)."""
    return nn.functional.silu(x)


def model_reps(rep_in: Any, rep_out: Any, group: Any, who: str = "EMLP") -> tuple[Rep, Rep]:
    """``rep_in`` and ``rep_out`` as reps of the model's ``group``: an unbound rep (``V``, ``2 * V + Scalar``) is
    bound to it; a rep acting through any other group raises.

    A rep of another group (even a supergroup: ``V(O(3))`` in an ``SO(3)`` model) would make every hidden layer a
    rep of a product group with no invariant couplings to the input, so the model would output 0 for every input.
    Restricting a rep to a subgroup is a choice we leave explicit: build the rep of the subgroup, ``V(SO(3))``."""
    if not isinstance(group, Group):
        raise TypeError(f"{who}: group must be a Group, got {type(group).__name__}")
    out = []
    for what, rep in (("rep_in", rep_in), ("rep_out", rep_out)):
        if not isinstance(rep, Rep):
            raise TypeError(f"{who}: {what} must be a symkit Rep, got {type(rep).__name__}")
        if not rep.is_bound:
            rep = rep(group)
        foreign = [H for H in rep.groups() if H not in set(group.factors)]
        if foreign:
            names = ", ".join(sorted(str(H) for H in foreign))
            raise ValueError(
                f"{who}: {what} {rep!r} is a rep of {names}, not of the model's group {group}; build it from "
                f"{group} (for example V({group})), or pass the group it belongs to"
            )
        out.append(rep)
    return out[0], out[1]


def _dense(Q: Any) -> np.ndarray:
    try:
        Q = dense_array(Q, "EquivariantLinear weight")
    except ValueError as exc:
        raise ValueError(f"EquivariantLinear: {exc}") from None
    if np.iscomplexobj(Q):
        raise ValueError("EquivariantLinear supports real representations only (the basis is complex)")
    return Q


#: a basis block with more entries than this (size x rank) is kept in a sparse form when its sparsity allows
DENSE_LIMIT = 1 << 22
#: a flat vector (weight or bias) of at most this many entries whose every basis row has one nonzero is expanded
#: by one gather (:meth:`_BasisExpansion._single_gather`): the 256 x 256 layers of the RL networks, where the
#: per-block operations' overhead is most of the expansion's time; larger ones keep the blocks, whose buffers are
#: smaller (the gather's index and scale hold 8 bytes an entry in float32)
GATHER_LIMIT = 1 << 17


def _basis_form(Q: Any) -> tuple[str, Any]:
    """How a basis block is held: ``("gather", (columns, values))`` when it is large and every row has at most one
    nonzero (permutation groups: each entry lies in one orbit), so ``Q beta`` is a gather and a scale and memory
    is two numbers per entry instead of ``rank``; ``("dense", array)`` otherwise."""
    if sp.issparse(Q) and Q.shape[0] * Q.shape[1] > DENSE_LIMIT:
        if np.iscomplexobj(Q.data):
            raise ValueError("EquivariantLinear supports real representations only (the basis is complex)")
        csr = sp.csr_matrix(Q)
        csr.sum_duplicates()
        counts = np.diff(csr.indptr)
        if counts.max(initial=0) <= 1:
            columns = np.zeros(Q.shape[0], dtype=np.int64)
            values = np.zeros(Q.shape[0])
            rows = np.flatnonzero(counts)
            columns[rows], values[rows] = csr.indices, csr.data
            return "gather", (columns, values)
    return "dense", _dense(Q)


class _BasisExpansion(nn.Module):
    """Coefficients beta for the invariant subspace of ``rep``, expanded into a flat vector ``Q beta``.

    One ``(m, r)`` parameter per distinct block; the expansion is one product per block (a matmul, or for large
    one-nonzero-per-row blocks a gather, see :func:`_basis_form`) and one permutation, or, where every row of the
    basis has at most one nonzero and the vector is small enough, one gather of all the coefficients
    (:meth:`_single_gather`).
    """

    def __init__(self, rep: Rep, init_std: Sequence[float] | float | None, device: Any = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        f = factory(device, dtype)
        basis = rep.structured_basis()
        self.size = rep.size
        self.coefficients = nn.ParameterList()
        self._forms: list[str] = []
        self._block_sizes: list[int] = []
        positions, helds = [], []
        n_blocks = 0
        for pos, Q in basis.parts:
            form, held = _basis_form(Q)
            helds.append(held)
            rank = Q.shape[1]
            self._forms.append(form)
            self._block_sizes.append(Q.shape[0])
            if form == "dense":  # a fresh contiguous copy (a rank-0 block from numpy may carry odd strides)
                self.register_buffer(f"basis_{n_blocks}", torch.tensor(np.ascontiguousarray(held), **f))
            else:
                self.register_buffer(f"basis_{n_blocks}", torch.as_tensor(held[0], device=f["device"]))
                self.register_buffer(f"scale_{n_blocks}", torch.as_tensor(held[1], **f))
            beta = torch.zeros(pos.shape[0], rank, dtype=f["dtype"])  # drawn on the CPU, then moved
            if init_std is not None and rank:
                std = init_std if isinstance(init_std, float) else init_std[n_blocks]
                beta.normal_(0.0, std)
            self.coefficients.append(nn.Parameter(on(beta, f), requires_grad=rank > 0))
            positions.append(pos.reshape(-1))
            n_blocks += 1
        self.n_blocks = n_blocks
        self.init_std = init_std
        flat = np.concatenate(positions) if positions else np.zeros(0, dtype=np.int64)
        # every entry of the flat vector belongs to exactly one block copy: `flat` is a permutation of range(size)
        if flat.shape[0] != self.size or not np.array_equal(np.sort(flat), np.arange(self.size)):
            raise ValueError(f"the blocks of {rep!r} do not tile its {self.size} entries")
        # held as int32 (half of a big layer's resident memory: 165,888 entries at O(3), 384 channels); saved files
        # keep the int64 key they always had (_save_to_state_dict / _load_from_state_dict)
        self.register_buffer("inverse", index_tensor(np.argsort(flat), f["device"]), persistent=False)
        self._gather = self._single_gather(helds, np.argsort(flat), f)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "inverse"] = self.inverse.long()  # the key and dtype saved files have always had

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        """The saved ``inverse`` is derived from the rep, not loaded: it must equal this layer's (a file saved from
        a layer of another rep or block order fails here instead of loading coefficients in the wrong places)."""
        key = prefix + "inverse"
        saved = state_dict.get(key)
        if saved is None:
            if strict:
                missing_keys.append(key)
        elif not isinstance(saved, torch.Tensor) or saved.shape != self.inverse.shape or (
                not saved.is_meta and not self.inverse.is_meta
                and not torch.equal(saved.cpu().long(), self.inverse.cpu().long())):
            error_msgs.append(f"{key}: the saved order of the basis blocks differs from this layer's (a state dict "
                              f"of a layer of another representation, or of an incompatible symkit version)")
        rest = {k: v for k, v in state_dict.items() if k != key}
        super()._load_from_state_dict(rest, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def _single_gather(self, helds: Sequence[Any], inverse: np.ndarray, f: dict) -> bool:
        """Where every row of every block's basis has at most one nonzero (the orbit bases of permutation reps: Z2's
        swaps, S(n), grids) and the vector is at most ``GATHER_LIMIT`` entries, ``Q beta`` is one gather and one
        scale of all coefficients side by side (``gather_index``, ``gather_scale``, in the vector's order): the same
        values as the block products (one nonzero: nothing is summed), in 3 operations instead of about 3 a block
        (the 256-channel Z2 layer of the RL networks: 0.46 -> 0.27 ms forward and backward). Not saved with the
        state (derived from the basis, as the blocks are); layers that train through their irreducible form drop it
        (:meth:`use_blocks`)."""
        if not 0 < self.size <= GATHER_LIMIT or not sum(c.numel() for c in self.coefficients):
            return False
        index, scale, start = [], [], 0
        for held, beta, form in zip(helds, self.coefficients, self._forms):
            m, r = beta.shape
            if form == "gather":
                column, value = held
            elif r == 0:  # no coefficients: every entry is 0 (read any coefficient, scaled by 0)
                column, value = np.full(held.shape[0], -start), np.zeros(held.shape[0])
            elif (np.count_nonzero(held, axis=1) > 1).any():
                return False
            else:
                column = np.abs(held).argmax(axis=1)
                value = held[np.arange(held.shape[0]), column]
            index.append(start + np.arange(m)[:, None] * r + column[None, :])  # (copies, block size)
            scale.append(np.broadcast_to(value, (m, value.shape[0])))
            start += m * r
        index = np.concatenate([i.reshape(-1) for i in index])[inverse]
        scale = np.concatenate([v.reshape(-1) for v in scale])[inverse]
        self.register_buffer("gather_index", torch.as_tensor(index, dtype=torch.int32, device=f["device"]),
                             persistent=False)
        self.register_buffer("gather_scale", torch.as_tensor(scale, **f), persistent=False)
        return True

    def use_blocks(self) -> None:
        """Expand block by block from now on and free the single gather's buffers (if there were any)."""
        if self._gather:
            del self.gather_index, self.gather_scale
            self._gather = False

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Draw the coefficients again as at construction (``N(0, std^2)`` per block, on the CPU, then copied)."""
        for i, beta in enumerate(self.coefficients):
            if beta.shape[1] == 0:
                continue
            fresh = torch.zeros(beta.shape, dtype=beta.dtype)
            if self.init_std is not None:
                fresh.normal_(0.0, self.init_std if isinstance(self.init_std, float) else self.init_std[i])
            beta.copy_(fresh)

    def block_shapes(self) -> list[tuple[int, int, int]]:
        """(copies, block size, block rank) of every block."""
        return [(int(beta.shape[0]), size, int(beta.shape[1]))
                for beta, size in zip(self.coefficients, self._block_sizes)]

    def _piece(self, i: int, beta: torch.Tensor) -> torch.Tensor:
        """``beta Q^T`` of block ``i``, shape ``(copies, block size)``."""
        Q = getattr(self, f"basis_{i}")
        form = self._forms[i]
        if form == "dense":
            return beta @ Q.T
        return beta.index_select(1, Q) * getattr(self, f"scale_{i}")

    def forward(self) -> torch.Tensor:
        if self._gather:
            flat = torch.cat([beta.reshape(-1) for beta in self.coefficients])
            return flat.index_select(0, self.gather_index) * self.gather_scale
        pieces = [self._piece(i, beta).reshape(-1) for i, beta in enumerate(self.coefficients)]
        return torch.cat(pieces).index_select(0, self.inverse)


class EquivariantLinear(Equivariant, WeightCache, nn.Module):
    """``y = W x + b`` with ``W`` equivariant (``rho_out(g) W = W rho_in(g)``) and ``b`` invariant.

    ``vec(W) = Q beta`` with ``Q`` the orthonormal basis of ``rep_in >> rep_out`` (eq. 2.6); ``b = Q_b beta_b``
    with ``Q_b`` the invariant vectors of ``rep_out``. Coefficients are initialised as the projection of a
    LeCun-scaled dense weight: every entry has variance ``share / rep_in.size`` on average, with ``share = r /
    (n_out n_in)`` the equivariant subspace's share of the weights; the bias starts at zero. ``device``/``dtype`` as
    for ``nn.Linear`` (default: ``torch.get_default_dtype()``).

    Where both reps are orthogonal and split into irreducible reps of real type (O(n), SO(3), S(n), ...) and that
    is much cheaper (large layers: ``irrep_product`` is then set), ``W x`` is applied in the irreducible basis, one
    small dense product per irrep (Schur's lemma, :mod:`symkit.nn._isotypic`): the same function of the same
    coefficients, about 5x fewer multiply-adds and 1.6x faster at 384 channels of O(3) or SO(3), for batches of
    ``IRREP_MIN_BATCH`` or more (``irreps=False`` keeps the dense weight, for a caller that only reads
    :attr:`weight`, as :class:`~symkit.nn.rpp.RPPLinear` does). Otherwise, in ``eval()`` mode without gradients
    (``torch.no_grad()``, ``inference_mode``) the assembled ``W`` and ``b`` are cached, so inference costs one
    matmul. The cache is dropped by every ``train()`` / ``eval()`` call and whenever a parameter's version counter
    or storage changes; writes that bump no version counter (torch's fused optimisers, ``p.data`` writes such as
    an EMA or Polyak-averaged target network kept in eval mode) are only seen after the next ``eval()``, or always
    with ``cache_weights = False``. :meth:`to_linear` gives the equivalent ``nn.Linear``.
    """

    def __init__(self, rep_in: Rep, rep_out: Rep, bias: bool = True, device: Any = None,
                 dtype: torch.dtype | None = None, irreps: bool = True) -> None:
        super().__init__()
        self.rep_in = check_rep("rep_in", rep_in)
        self.rep_out = check_rep("rep_out", rep_out)
        self.in_features, self.out_features = rep_in.size, rep_out.size  # plain ints: forward reads no Rep
        hom = rep_in >> rep_out
        blocks = hom.structured_basis().parts
        # a LeCun-scaled dense weight projected onto the equivariant subspace (what the reference code draws): each
        # entry keeps the subspace's share r / (n_out n_in) of the variance 1 / n_in (docs/emlp.md, Decisions)
        share = sum(pos.shape[0] * Q.shape[1] for pos, Q in blocks) / max(rep_in.size * rep_out.size, 1)
        stds = [math.sqrt(share * pos.shape[1] / max(Q.shape[1], 1) / max(rep_in.size, 1)) for pos, Q in blocks]
        self.weight_basis = _BasisExpansion(hom, stds, device, dtype)
        self.bias_basis = _BasisExpansion(rep_out, 0.0, device, dtype) if bias else None
        sizes = [c.numel() for c in self.weight_basis.coefficients]
        plan = plan_irreps(rep_in, rep_out, blocks, sizes) if irreps else None
        #: ``W x`` through the irreducible basis (:mod:`symkit.nn._isotypic`) where that is much cheaper, else None
        self.irrep_product = None if plan is None else IrrepProduct(plan, rep_in.size, rep_out.size, device, dtype)
        if self.irrep_product is not None:  # the dense weight is then for small batches and export: keep the blocks
            self.weight_basis.use_blocks()

    @property
    def weight(self) -> torch.Tensor:
        """The equivariant weight matrix, shape ``(rep_out.size, rep_in.size)``."""
        return self.weight_basis().reshape(self.out_features, self.in_features)

    def reset_parameters(self) -> None:
        """Re-initialise the coefficients as at construction (projected LeCun-scaled weight, zero bias)."""
        self.weight_basis.reset_parameters()
        if self.bias_basis is not None:
            self.bias_basis.reset_parameters()

    def _assembled(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(W, b)``: built every call while training or recording gradients, cached otherwise."""
        return self._cached(lambda: (self.weight, self.bias))

    def to_linear(self) -> nn.Linear:
        """An ``nn.Linear`` with this layer's current ``W`` and ``b`` (same device and dtype)."""
        W, b = self.weight.detach(), self.bias
        lin = nn.Linear(self.rep_in.size, self.rep_out.size, bias=b is not None, device=W.device, dtype=W.dtype)
        with torch.no_grad():
            lin.weight.copy_(W)
            if b is not None:
                lin.bias.copy_(b.detach())
        return lin

    @property
    def bias(self) -> torch.Tensor | None:
        return None if self.bias_basis is None else self.bias_basis()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input(lambda: f"EquivariantLinear (rep_in {self.rep_in!r})", self, x, self.in_features)
        if self.irrep_product is not None and math.prod(x.shape[:-1]) >= IRREP_MIN_BATCH:
            x2 = x.reshape(-1, self.in_features)
            y = self.irrep_product(x2, self.weight_basis.coefficients)
            y = y if self.bias_basis is None else y + self.bias
            return y.reshape(*x.shape[:-1], self.out_features)
        W, b = self._assembled()
        if b is None:
            return x @ W.T
        if x.ndim == 2:
            return torch.addmm(b, x, W.T)
        return torch.addmm(b, x.reshape(-1, x.shape[-1]), W.T).reshape(*x.shape[:-1], W.shape[0])

    def extra_repr(self) -> str:
        n = sum(p.numel() for p in self.parameters())
        return f"{self.rep_in!r} -> {self.rep_out!r}, {n} free parameters"


def _gated_blocks(rep: Rep) -> list[tuple[np.ndarray, bool]]:
    """(positions (m, s), needs_gate) for every block: scalars and permutation blocks take swish, others a gate.
    A one-dimensional block is pointwise only when the group permutes it trivially: a pseudoscalar (rho(g) = det g)
    changes sign, which swish does not commute with, so it takes a gate like any other object."""
    out = []
    for b in rep.blocks():
        pointwise = all(leaf.is_permutation for leaf in b.leaves)
        out.append((b.pos, not pointwise))
    return out


def gate_count(rep: Rep) -> int:
    """Number of gate scalars ``gated(rep)`` appends: one per copy of every non-scalar, non-permutation object."""
    return int(sum(pos.shape[0] for pos, needs in _gated_blocks(rep) if needs))


def gated(rep: Rep) -> Rep:
    """``rep`` plus one gate scalar per non-scalar, non-permutation object (Sec. 2.6, Weiler et al. 2018)."""
    n = gate_count(check_rep("rep", rep))
    return rep + n * Scalar if n else rep


class GatedNonlinearity(Equivariant, nn.Module):
    """Maps ``gated(rep)`` to ``rep``: ``v_a * sigmoid(s_a)`` per object, swish for scalars and permutation reps.

    One gather (``gate_index``) reads every entry's gate; a rep with no gates (scalars and permutation reps only:
    ``pointwise``) is plain swish."""

    def __init__(self, rep: Rep, device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()  # dtype: accepted for uniformity; the layer has no floating parameters
        self.rep = check_rep("rep", rep)
        gate_index = np.arange(rep.size)  # pointwise entries gate themselves (swish)
        next_gate = rep.size
        for pos, needs in _gated_blocks(rep):
            if needs:
                for copy in pos:
                    gate_index[copy] = next_gate
                    next_gate += 1
        self.gated_size, self.size = next_gate, rep.size
        self.pointwise = next_gate == rep.size
        self.register_buffer("gate_index", torch.as_tensor(gate_index, dtype=torch.long, device=device))

    @property
    def rep_in(self) -> Rep:
        return gated(self.rep)

    @property
    def rep_out(self) -> Rep:
        return self.rep

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input(lambda: f"GatedNonlinearity({self.rep!r}) (values and gates)", self, x, self.gated_size)
        if self.pointwise:
            return swish(x)
        return x[..., : self.size] * torch.sigmoid(x.index_select(-1, self.gate_index))


def _binomial_split(count: int, rank: int) -> list[int]:
    """Split ``count`` rank-``rank`` tensors among T(k, rank-k), k = 0..rank, in proportion to C(rank, k),
    rounding by largest remainder (deterministic, unlike the reference code's random binomial draws)."""
    weights = np.array([math.comb(rank, k) for k in range(rank + 1)], dtype=float) / 2.0**rank
    raw = count * weights
    out = np.floor(raw).astype(int)
    order = np.argsort(-(raw - out), kind="stable")
    out[order[: count - out.sum()]] += 1
    return out.tolist()


def uniform_rep(ch: int, G: Group) -> Rep:
    """About ``ch`` channels spread evenly over tensor ranks 0, 1, 2, ... (Sec. 2.6, App. A.1.9).

    Repeatedly: take the largest rank ``R`` with ``(R + 1) d^R <= ch`` and add ``d^(R - r)`` copies of each rank
    ``r <= R``. ``uniform_rep(256, SO(3))`` is ``70 T0 + 23 T1 + 7 T2 + 2 T3``. For non-orthogonal groups rank ``r``
    is split among ``T(k, r - k)`` deterministically in binomial proportion.
    """
    check_int("uniform_rep: ch", ch, 1)
    if not isinstance(G, Group):
        raise TypeError(f"uniform_rep: expected a Group, got {type(G).__name__}")
    d = G.d
    counts: dict[int, int] = {}
    remaining = int(ch)
    while remaining > 0:
        if d == 1:
            counts[0] = counts.get(0, 0) + remaining
            break
        max_rank = 0
        while (max_rank + 2) * d ** (max_rank + 1) <= remaining:
            max_rank += 1
        for r in range(max_rank + 1):
            counts[r] = counts.get(r, 0) + d ** (max_rank - r)
        remaining -= (max_rank + 1) * d**max_rank
    parts: list[tuple[Rep, int]] = []
    for r in sorted(counts):
        if r == 0:
            parts.append((Scalar, counts[0]))
        elif G.is_orthogonal:
            parts.append((T(r, 0, G), counts[r]))
        else:
            for k, n in enumerate(_binomial_split(counts[r], r)):
                if n:
                    parts.append((T(r - k, k, G), n))
    return SumRep(parts)


class _GatedBlock(Equivariant, nn.Module):
    """The layer of Figure 2.4 that EMLP and RPP-EMLP blocks share: ``nonlinearity(h + bilinear(h))`` with
    ``h = linear(x)`` (no bilinear term when ``bilinear`` is None). Subclasses build the three parts."""

    linear: nn.Module
    bilinear: nn.Module | None
    nonlinearity: nn.Module

    @property
    def rep_in(self) -> Rep:
        return self.linear.rep_in

    @property
    def rep_out(self) -> Rep:
        return self.nonlinearity.rep_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x)
        if self.bilinear is not None:
            h = h + self.bilinear(h)
        return self.nonlinearity(h)


class EMLPBlock(Resettable, _GatedBlock):
    """Equivariant linear layer to ``gated(rep_out)``, a bilinear layer with a shortcut, then the gated
    nonlinearity (Figure 2.4)."""

    def __init__(self, rep_in: Rep, rep_out: Rep, bilinear: bool = True, device: Any = None,
                 dtype: torch.dtype | None = None, bilinear_scale: float = 0.1) -> None:
        super().__init__()
        self.linear = EquivariantLinear(rep_in, gated(rep_out), device=device, dtype=dtype)
        self.bilinear = (BiLinear(gated(rep_out), scale=bilinear_scale, device=device, dtype=dtype) if bilinear
                         else None)
        self.nonlinearity = GatedNonlinearity(rep_out, device=device)


def layer_reps(
    rep_in: Rep, rep_out: Rep, group: Group, ch: int | Rep | Sequence[int | Rep], num_layers: int
) -> list[Rep]:
    """``[rep_in, hidden_1, ..., hidden_L]`` for an EMLP-shaped network (ints become :func:`uniform_rep`)."""
    rep_in, rep_out = model_reps(rep_in, rep_out, group)
    check_int("EMLP: num_layers", num_layers, 0)
    widths = list(ch) if isinstance(ch, (list, tuple)) else [ch] * num_layers
    return [rep_in, *(c if isinstance(c, Rep) else uniform_rep(c, group) for c in widths)]


class _BlockNetwork(Equivariant, nn.Module):
    """The skeleton EMLP and RPP-EMLP share: ``head(blocks(x))``, one block per pair of consecutive layer reps
    (:func:`layer_reps`), then a linear head to ``rep_out``. :meth:`_build` makes them from the subclass's block and
    head constructors, in that order (the order the initial values are drawn in). With ``recompute`` each block
    keeps only its input for the backward pass and runs again there (``torch.utils.checkpoint``, non-reentrant, so
    double backward goes through it)."""

    def _build(self, rep_in: Rep, rep_out: Rep, group: Group, ch: int | Rep | Sequence[int | Rep], num_layers: int,
               block: Any, head: Any, who: str, recompute: bool = False) -> None:
        rep_in, rep_out = model_reps(rep_in, rep_out, group, who=who)
        reps = layer_reps(rep_in, rep_out, group, ch, num_layers)
        self.rep_in, self.rep_out, self.group = rep_in, rep_out, group
        self.in_features, self.out_features = rep_in.size, rep_out.size
        self.recompute = check_bool(f"{who}: recompute", recompute)
        self.blocks = nn.Sequential(*[block(a, b) for a, b in zip(reps, reps[1:])])
        self.head = head(reps[-1], rep_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input(lambda: f"{type(self).__name__} ({self.rep_in!r} -> {self.rep_out!r})", self, x,
                    self.in_features)
        if self.recompute and torch.is_grad_enabled():
            for block in self.blocks:
                x = checkpoint(block, x, use_reentrant=False)
            return self.head(x)
        return self.head(self.blocks(x))


class EMLP(Resettable, _BlockNetwork):
    """An equivariant MLP ``rep_in -> rep_out``: ``num_layers`` EMLP blocks then an equivariant linear layer.

    ``ch`` is the width of each hidden layer: an int (allocated by :func:`uniform_rep`), a Rep, or a list of
    either (one per hidden layer, which sets ``num_layers``). ``bilinear=False`` drops the bilinear layers
    (then parity groups cannot map odd-rank inputs to invariants, Theorem A.2); ``bilinear_scale`` multiplies
    their outputs (:class:`BiLinear`'s ``scale``). ``recompute=True`` trades time for memory: each block keeps
    only its input for the backward pass and runs again there (the same values and gradients;
    ``benchmarks/bench_models.py`` prints what it saves and costs).

    >>> from symkit.groups import SO
    >>> from symkit.reps import V, Scalar
    >>> G = SO(3)
    >>> model = EMLP(2 * V(G), Scalar, G, ch=64, num_layers=2)   # invariant of two 3-vectors
    """

    def __init__(
        self,
        rep_in: Rep,
        rep_out: Rep,
        group: Group,
        ch: int | Rep | Sequence[int | Rep] = 384,
        num_layers: int = 3,
        bilinear: bool = True,
        device: Any = None,
        dtype: torch.dtype | None = None,
        bilinear_scale: float = 0.1,
        recompute: bool = False,
    ) -> None:
        super().__init__()
        f = {"device": device, "dtype": dtype}
        self._build(rep_in, rep_out, group, ch, num_layers,
                    block=lambda a, b: EMLPBlock(a, b, bilinear=bilinear, bilinear_scale=bilinear_scale, **f),
                    head=lambda a, b: EquivariantLinear(a, b, **f), who="EMLP", recompute=recompute)


#: the hidden-layer nonlinearities :class:`MLP` offers
MLP_ACTIVATIONS = {"swish": nn.SiLU, "relu": nn.ReLU}


class MLP(Resettable, nn.Module):
    """The unconstrained baseline: ``num_layers`` hidden layers of width ``ch`` with swish (Sec. 2.6), or with
    ``activation="relu"`` (the standard SAC networks the thesis's RL baselines use, Sec. 3.6.1)."""

    def __init__(self, d_in: int, d_out: int, ch: int = 384, num_layers: int = 3, device: Any = None,
                 dtype: torch.dtype | None = None, activation: str = "swish") -> None:
        super().__init__()
        if activation not in MLP_ACTIVATIONS:
            raise ValueError(f"MLP: activation must be one of {', '.join(map(repr, MLP_ACTIVATIONS))}, "
                             f"got {activation!r}")
        ch = check_int("MLP: ch (the hidden width)", ch, minimum=1)
        f = factory(device, dtype)
        dims = [d_in] + [ch] * num_layers
        layers: list[nn.Module] = []
        for a, b in zip(dims, dims[1:]):
            layers += [nn.Linear(a, b, **f), MLP_ACTIVATIONS[activation]()]
        layers.append(nn.Linear(dims[-1], d_out, **f))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
