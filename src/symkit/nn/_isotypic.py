"""An equivariant linear map applied in the irreducible basis (Schur's lemma), without forming its weight.

For an orthogonal rep, each object type ``t`` of ``rep_in`` and ``rep_out`` (a ``V``, a ``V (x) V``, ...) splits
by an orthogonal change of basis ``P_t`` into irreducible subspaces, chosen so that isomorphic subspaces, in any
type, share one basis. Where every irreducible rep is of real type (its commutant is the scalars), an equivariant
``W`` then acts on the ``n_in(l)`` input copies of irrep ``l`` as ``W_l (x) I_{d_l}`` (Schur's lemma), so

    ``y = P_out (sum_l W_l (x) I_{d_l}) P_in^T x``,

one dense ``(n_out(l), n_in(l))`` product per irrep on ``d_l`` rows per sample. ``W_l`` is a fixed linear function of
the layer's coefficients ``beta`` (``vec(W) = Q beta``, Sec. 2.4.2), so the parameters, their initialisation and
every result are those of the dense layer; only the cost changes: an O(3) layer of 384 channels does about 30k
multiply-adds per sample instead of 166k. The decomposition is :func:`symkit.reps.isotypic_decomposition` of
``rep_in`` and ``rep_out`` together (computed once per object type and pair of types, whatever layers ask), and the
plan verifies it against every block of the weight's basis; any rep where this does not hold (non-orthogonal groups
such as the Lorentz group, irreps of complex or quaternionic type such as SO(2)'s rotations) keeps the dense product.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from symkit.nn._factory import factory, index_tensor
from symkit.reps.core import Rep
from symkit.reps.isotypic import IsotypicDecomposition, isotypic_decomposition
from symkit.reps.solve import dense_array, memoised, object_index

__all__ = ["IrrepPlan", "plan_irreps", "make_plan", "IrrepProduct", "MAX_RATIO", "MIN_DENSE"]

#: relative size below which a basis matrix's coefficient on an irrep pair is the rounding of an exact zero and is
#: left out of the weight assembly; a genuine coefficient can be far smaller than 1e-8 (a random alignment of the
#: copies of an irrep makes them random numbers), and dropping those cost S(4)'s Scalar + T(3) -> T(3) 2e-9
_ZERO = 1e-13
#: the irreducible form replaces the dense product only where it costs at most this share of it: it runs about 40
#: small operations where the dense product runs one, which pays off at O(3) 384 channels (1.6x faster at every batch
#: size from 8 to 1000, one CPU thread) and not at 128 channels (2x slower)
MAX_RATIO = 0.4
MIN_DENSE = 256 * 256  # multiply-adds per sample of the dense product below which it is always kept
MAX_OBJECT_SIZE = 256  # objects (tensors) larger than this are not split (their commutant grows as size^2 x rank)
MAX_BLOCK_ENTRIES = 1 << 22  # nor are layers with a block basis larger than this (it is read densely)


@dataclass
class IrrepPlan:
    """The change of basis and the map from coefficients to the per-irrep weights.

    ``in_rotation``/``out_rotation``: per object type, ``(positions (copies, d), P)``; ``in_order``/``out_order``:
    the rotated entries grouped by irrep, ``(irrep, copy, component)``; ``irreps``: ``(dim, n_in, n_out)``;
    ``weight_src``, ``weight_dst``, ``weight_coef``: ``W_flat[dst] += coef * beta_flat[src]``."""

    in_rotation: list[tuple[np.ndarray, np.ndarray]]
    out_rotation: list[tuple[np.ndarray, np.ndarray]]
    in_order: np.ndarray
    out_order: np.ndarray
    irreps: list[tuple[int, int, int]]
    weight_src: np.ndarray
    weight_dst: np.ndarray
    weight_coef: np.ndarray
    multiply_adds: int


def _cat(xs: list) -> np.ndarray:
    return np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64)


def _types(blocks: list, dec: IsotypicDecomposition) -> list[tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]]:
    """Per object type (canonical block) of a rep: its positions ``(copies, d)``, ``P`` and irreducible
    subspaces."""
    types = []
    for blk in blocks:
        split = dec.of(blk.leaves)
        types.append((np.array(blk.pos), np.array(split.P), list(split.subspaces)))  # the plan's own copies
    return types


def _copies(types: list) -> dict[int, list[tuple[int, int, int]]]:
    """Per irrep, its copies in a rep: (object type, object copy, first column of the subspace in ``P``)."""
    out: dict[int, list] = {}
    for t, (pos, _, subspaces) in enumerate(types):
        for c in range(pos.shape[0]):
            for j, label in subspaces:
                out.setdefault(label, []).append((t, c, j))
    return out


def _order(types: list, copies: dict, labels: list, dims: dict) -> np.ndarray:
    """The entries of the rotated rep (named by their positions) grouped by irrep, each as (copy, component)."""
    pos = [types[t][0][c, j + a] for lab in labels for (t, c, j) in copies[lab] for a in range(dims[lab])]
    return np.asarray(pos, dtype=np.int64)


def plan_irreps(rep_in: Rep, rep_out: Rep, parts: list, coefficient_sizes: list[int],
                max_ratio: float = MAX_RATIO, min_dense: int = MIN_DENSE) -> IrrepPlan | None:
    """:func:`make_plan`, once per pair of reps (and setting) in a process: an EMLP's hidden layers ask for the same
    pair, and every model built again asks again (kept in the solver's memory cache, so
    ``symkit.reps.clear_memory_cache()`` forgets it with the bases). The plan's arrays are read-only (an
    :class:`IrrepProduct` copies what it keeps), so no layer can change another's plan."""
    key = ("irrep-plan", rep_in._key(), rep_out._key(), tuple(coefficient_sizes), float(max_ratio), int(min_dense))
    return memoised(key, lambda: _read_only(make_plan(rep_in, rep_out, parts, coefficient_sizes, max_ratio,
                                                      min_dense)))


def _read_only(plan: IrrepPlan | None) -> IrrepPlan | None:
    if plan is not None:
        for arrays in (plan.in_rotation, plan.out_rotation):
            for pos, P in arrays:
                pos.setflags(write=False)
                P.setflags(write=False)
        for a in (plan.in_order, plan.out_order, plan.weight_src, plan.weight_dst, plan.weight_coef):
            a.setflags(write=False)
    return plan


def make_plan(rep_in: Rep, rep_out: Rep, parts: list, coefficient_sizes: list[int],
              max_ratio: float = MAX_RATIO, min_dense: int = MIN_DENSE) -> IrrepPlan | None:
    """The plan for ``rep_in >> rep_out`` whose structured basis has blocks ``parts`` (``(pos, Q)``, coefficients of
    ``coefficient_sizes`` entries each, flattened in order); ``None`` where the irreducible form does not apply or
    would cost more than ``max_ratio`` of the dense product (multiply-adds per sample), or where assembling the
    ``W_l`` from the coefficients would take more than ``10 max_ratio`` times the entries of ``W`` (four), or ``W``
    has fewer than ``min_dense`` entries."""
    if not (rep_in.is_orthogonal and rep_out.is_orthogonal) or rep_in.size * rep_out.size < min_dense:
        return None
    blocks_in, blocks_out = rep_in.canonical_blocks(), rep_out.canonical_blocks()
    sizes = [blk.size for blk in blocks_in + blocks_out]
    if max(sizes, default=0) > MAX_OBJECT_SIZE or any(Q.shape[0] * Q.shape[1] > MAX_BLOCK_ENTRIES for _, Q in parts):
        return None  # a large tensor (S(8)'s T(4): 4096 numbers) is not split; its blocks stay structured
    dec = isotypic_decomposition(rep_in, rep_out)  # one basis per irrep across both reps
    if dec is None:
        return None
    t_in, t_out = _types(blocks_in, dec), _types(blocks_out, dec)
    dims = dict(enumerate(dec.irrep_dims))
    cin, cout = _copies(t_in), _copies(t_out)
    irreps = [(dims[lab], len(cin.get(lab, [])), len(cout[lab])) for lab in sorted(cout)]
    rotations = sum(pos.shape[0] * P.shape[0] ** 2 for pos, P, _ in t_in + t_out if P.shape[0] > 1)
    multiply_adds = rotations + sum(d * a * b for d, a, b in irreps)
    dense = rep_in.size * rep_out.size
    if multiply_adds > max_ratio * dense:
        return None
    index_in = {key: n for lab in cin for n, key in enumerate(cin[lab])}
    index_out = {key: n for lab in cout for n, key in enumerate(cout[lab])}
    out_labels = sorted(cout)
    offsets, total = {}, 0
    for lab in out_labels:
        offsets[lab] = total
        total += len(cout[lab]) * len(cin.get(lab, []))
    # W_l[p, q] = sum_k beta[copy, k] c_k, c_k the trace per dimension of basis matrix k between the two subspaces
    src, dst, coef, nonzeros = [], [], [], 0
    flat_start = np.cumsum([0, *coefficient_sizes])[:-1]
    obj_in, obj_out = object_index(blocks_in, rep_in.size), object_index(blocks_out, rep_out.size)
    n_in = rep_in.size
    for b, (pos, Q) in enumerate(parts):
        r = Q.shape[1]
        if r == 0 or pos.shape[0] == 0:
            continue
        Q = dense_array(Q)
        if np.iscomplexobj(Q):
            return None
        rows, cols = pos // n_in, pos % n_in
        to, co, lo = (a[rows] for a in obj_out)
        ti, ci, li = (a[cols] for a in obj_in)
        if not ((to == to[:, :1]).all() and (ti == ti[:, :1]).all()):
            return None
        for o, i in sorted(set(zip(to[:, 0].tolist(), ti[:, 0].tolist()))):
            sel = np.flatnonzero((to[:, 0] == o) & (ti[:, 0] == i))
            P_o, sub_o = t_out[o][1], t_out[o][2]
            P_i, sub_i = t_in[i][1], t_in[i][2]
            entry = np.full((P_o.shape[0], P_i.shape[0]), -1, dtype=np.int64)  # block entry at local (a, c)
            entry[lo[sel[0]], li[sel[0]]] = np.arange(pos.shape[1])
            if (entry < 0).any() or not (entry[lo[sel], li[sel]] == np.arange(pos.shape[1])).all():
                return None
            Qk = Q[entry.reshape(-1)].T.reshape(r, *entry.shape)
            R = np.einsum("ax,kab,by->kxy", P_o, Qk, P_i)  # the basis in irreducible coordinates
            zero = _ZERO * max(np.abs(R).max(initial=0.0), 1.0)
            expected = np.zeros_like(R)
            for jo, lab in sub_o:
                for ji, lab_i in sub_i:
                    if lab != lab_i:
                        continue
                    dl = dims[lab]
                    cs = np.einsum("kaa->k", R[:, jo:jo + dl, ji:ji + dl]) / dl
                    expected[:, jo:jo + dl, ji:ji + dl] = cs[:, None, None] * np.eye(dl)
                    p = np.asarray([index_out[(o, c, jo)] for c in co[sel, 0]])
                    q = np.asarray([index_in[(i, c, ji)] for c in ci[sel, 0]])
                    for k in np.flatnonzero(np.abs(cs) > zero):
                        src.append(flat_start[b] + sel * r + k)
                        dst.append(offsets[lab] + p * len(cin[lab]) + q)
                        coef.append(np.full(len(sel), cs[k]))
                        nonzeros += len(sel)
                    if nonzeros > 10 * max_ratio * dense:  # assembling the W_l would cost more than assembling W
                        return None
            if np.abs(R - expected).max(initial=0.0) > 1e-7 * max(np.abs(R).max(initial=0.0), 1.0):
                return None  # not of the form Schur's lemma gives: keep the dense product
    return IrrepPlan([(pos, P) for pos, P, _ in t_in], [(pos, P) for pos, P, _ in t_out],
                     _order(t_in, cin, [lab for lab in out_labels if lab in cin], dims),
                     _order(t_out, cout, out_labels, dims), irreps, _cat(src), _cat(dst),
                     np.concatenate(coef) if coef else np.zeros(0),
                     int(multiply_adds))


class IrrepProduct(nn.Module):
    """``x -> W x`` through the irreducible basis of an :class:`IrrepPlan` (module docstring): rotate each input
    object by ``P_t^T``, one product per irrep with ``W_l`` assembled from the coefficients, rotate back.

    The work is done on ``x^T`` (features by samples), where every irrep's copies are one contiguous ``(n_in(l),
    d_l n)`` matrix and every rotation one ``(d, copies n)`` matrix: no layout copies besides the gathers."""

    def __init__(self, plan: IrrepPlan, in_features: int, out_features: int, device: Any = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        f = factory(device, dtype)
        self.multiply_adds = plan.multiply_adds
        self.irreps = plan.irreps
        self._weight_sizes = [a * b for _, a, b in plan.irreps]
        self._in_rows = [d * a for d, a, _ in plan.irreps]  # rows of the irrep-major input per irrep

        def turns(kind: str, parts: list, size: int) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
            """Rows of the extended matrix ``[x^T; rotated objects]`` per entry of the rotated rep, and the
            rotations: for each turned type, its entries as (component, copy) and ``P``."""
            row = np.arange(size)  # an unturned entry is its own row
            shapes, gathers, next_row = [], [], size
            for pos, P in parts:
                if np.allclose(P, np.eye(P.shape[0]), atol=1e-12):
                    continue
                m, d = pos.shape
                gathers.append(pos.T.reshape(-1))  # (component, copy)
                row[pos.T.reshape(-1)] = next_row + np.arange(m * d)
                next_row += m * d
                shapes.append((m, d))
                self.register_buffer(f"{kind}_P_{len(shapes) - 1}", torch.tensor(P, **f), persistent=False)
            gather = np.concatenate(gathers) if gathers else np.zeros(0, np.int64)
            self.register_buffer(f"{kind}_gather", index_tensor(gather, device), persistent=False)
            return row, gather, shapes

        in_row, _, self._in_turns = turns("in", plan.in_rotation, in_features)
        self.register_buffer("in_order", index_tensor(in_row[plan.in_order], device), persistent=False)
        # output: the irrep-major rows Y; turned types are read from Y as (component, copy) and rotated back
        place = np.empty(out_features, dtype=np.int64)  # rep entry (in irreducible coordinates) -> row of Y
        place[plan.out_order] = np.arange(plan.out_order.shape[0])
        out_row, out_gather, self._out_turns = turns("out", plan.out_rotation, out_features)
        # rows of [Y; P-rotated objects]: a turned entry's row is its rotated row, shifted past Y
        final = np.where(out_row < out_features, place[np.minimum(out_row, out_features - 1)],
                         out_row - out_features + plan.out_order.shape[0])
        self.register_buffer("out_turn_rows", index_tensor(place[out_gather], device),
                             persistent=False)
        self.register_buffer("out_final", index_tensor(final, device), persistent=False)
        self.register_buffer("weight_src", index_tensor(plan.weight_src, device), persistent=False)
        self.register_buffer("weight_dst", index_tensor(plan.weight_dst, device), persistent=False)
        self.register_buffer("weight_coef", torch.tensor(plan.weight_coef, **f), persistent=False)

    def _turned(self, rows: torch.Tensor, kind: str, transpose: bool) -> list[torch.Tensor]:
        """The turned objects of ``rows`` (their entries as (component, copy) rows), each ``P^T`` (or ``P``) times
        its ``(d, copies n)`` matrix."""
        turns, n_b = self._in_turns if kind == "in" else self._out_turns, rows.shape[1]
        out = []  # one split, not a slice per type: the backward of a slice fills a zero matrix of all the rows
        for t, ((m, d), block) in enumerate(zip(turns, rows.split([m * d for m, d in turns]))):
            P = getattr(self, f"{kind}_P_{t}")
            out.append(((P if transpose else P.T) @ block.reshape(d, m * n_b)).view(m * d, n_b))
        return out

    def forward(self, x2: torch.Tensor, coefficients: Any) -> torch.Tensor:
        """``W x2`` for ``x2`` of shape ``(n, in_features)`` and the layer's coefficient matrices."""
        n_b = x2.shape[0]
        beta = torch.cat([c.reshape(-1) for c in coefficients])
        W = x2.new_zeros(sum(self._weight_sizes)).index_add(
            0, self.weight_dst, beta.index_select(0, self.weight_src) * self.weight_coef)
        xt = x2.T
        turned = self._turned(xt.index_select(0, self.in_gather), "in", transpose=False) if self._in_turns else []
        Z = torch.cat([xt, *turned]).index_select(0, self.in_order) if turned else xt.index_select(0, self.in_order)
        outs = []
        for (d, n_in, n_out), W_l, Z_l in zip(self.irreps, W.split(self._weight_sizes), Z.split(self._in_rows)):
            if n_in == 0:
                outs.append(x2.new_zeros(n_out * d, n_b))
                continue
            outs.append((W_l.view(n_out, n_in) @ Z_l.view(n_in, d * n_b)).view(n_out * d, n_b))
        Y = torch.cat(outs)
        if self._out_turns:
            Y = torch.cat([Y, *self._turned(Y.index_select(0, self.out_turn_rows), "out", transpose=True)])
        # samples by features again, in memory too: the bias, the gates and the next layer's gathers run 5% faster
        # on a row-major result than on the transposed view
        return Y.index_select(0, self.out_final).T.contiguous()
