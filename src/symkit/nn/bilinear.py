"""The EMLP bilinear layer (thesis Sec. 2.6, Theorem A.2): ``y = scale * W(x) x`` with ``W(x)`` built from ``x``.

``W(x)`` is never formed. Each pair of object types it couples (an *interaction*: output type ``O`` with ``m_O``
copies of size ``d_O``, input type ``I`` with ``m_I`` copies of size ``d_I``, and ``K`` source objects ``M_k`` of
``x`` read as ``d_O x d_I`` matrices) contributes

    y_i[a] = sum_{j, k, c} w_ijk M_k[a, c] x_j[c]

contracted in the cheaper of two orders: ``P = M x`` per sample (a batched matrix product), then one matrix product
with the weights; or ``Z = w x`` as one matrix product, then ``M Z`` per sample. Nearly all of the multiply-adds are
in the weight products; a layout with the batch last (elementwise per-sample products instead of batched ones) was
measured slower in the backward pass and is not used.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from symkit._checks import check_number
from symkit.nn._equivariance import Equivariant
from symkit.nn._factory import factory, on
from symkit.nn._inputs import check_input, check_rep
from symkit.nn._weight_cache import WeightCache
from symkit.reps.core import Rep
from symkit.reps.solve import object_index

__all__ = ["BiLinear", "per_sample_matmul"]


def per_sample_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` per sample, ``(n, p, q) @ (n, q, r)``. Where ``p`` and ``q`` are at most 3 (a few vectors' products
    with many: O(3)'s ``3 x 3`` by ``3 x 34``, Z(2)'s ``2 x 2`` by ``2 x 60``) a broadcast product summed over ``q``
    replaces ``bmm``, whose CPU kernel multiplies such pairs entry by entry (``p q r < 400``): 1.5-3x faster
    forward and backward at batches of 256 and 500. Elsewhere ``bmm``."""
    if a.shape[1] <= 3 and a.shape[2] <= 3 and b.shape[2] >= 8:
        return (a.unsqueeze(-1) * b.unsqueeze(1)).sum(2)
    return torch.bmm(a, b)


def _block_key(leaves: tuple) -> tuple:
    return tuple(leaf._key() for leaf in leaves)


class _Interaction:
    """One pair of object types that the bilinear layer couples: ``W(x)`` restricted to the pairs (output copy ``i`` of
    block ``O``, input copy ``j`` of block ``I``), whose ``d_O x d_I`` entries are combinations of ``K`` source objects.

    ``y_i[a] = sum_{j,k,c} w_ijk M_k[a, c] x_j[c]``, contracted in the cheaper of two orders (``weights_first``):
    ``P = M x`` per sample then one matmul with the weights, or ``Z = w x`` as one matmul then ``M Z`` per sample.
    Index arrays (for ``index_select``) lay every operand out so that no permutation copy is needed."""

    def __init__(self, weight: int, grid: np.ndarray, src: np.ndarray, in_pos: np.ndarray, out_pos: np.ndarray,
                 out_block: int):
        self.weight, self.out_block = weight, out_block
        m_out, m_in = grid.shape
        k, d_in, d_out = src.shape[0], in_pos.shape[1], out_pos.shape[1]
        self.shape = (m_out, m_in, k, d_in, d_out)
        cost_p_first = k * d_out * d_in * m_in + d_out * k * m_in * m_out
        cost_w_first = m_in * d_in * m_out * k + m_out * k * d_out * d_in
        self.weights_first = cost_w_first < cost_p_first
        self.multiply_adds = min(cost_w_first, cost_p_first)  # per sample
        src = src.reshape(k, d_out, d_in)
        # M per sample: (d_O, d_I K) laid out (a, c, k) when the weights go first, else (d_O K, d_I) as (a, k, c)
        self.src = src.transpose(1, 2, 0).reshape(-1) if self.weights_first else src.transpose(1, 0, 2).reshape(-1)
        self.inp = in_pos.T.reshape(-1)  # (c, j): x_I as (d_I, m_I) per sample
        # flat indices into the (pairs, K) parameter: weights as (m_I, K m_O) laid out (j, k, i), or (K m_I, m_O)
        flat = grid[:, :, None] * k + np.arange(k)[None, None, :]  # (i, j, k)
        self.w_index = (flat.transpose(1, 2, 0) if self.weights_first else flat.transpose(2, 1, 0)).reshape(-1)


def _interactions(rep: Rep) -> tuple[list[tuple[int, int]], list[_Interaction], list[np.ndarray]]:
    """The parameter shapes ``(pairs, K)`` (one per block type of ``rep >> rep`` that has source objects in ``rep``)
    and the interactions that read them: every pair of its entries ``(row, col)`` of ``W(x)`` belongs to one
    output object copy and one input object copy, and the pair's entry for local coordinates ``(a, c)`` is entry
    ``s(a, c)`` of the source objects, the same map for every copy pair of the interaction."""
    n = rep.size
    blocks = rep.canonical_blocks()
    block_of, copy_of, local_of = object_index(blocks, n)
    sources = {_block_key(blk.leaves): blk.pos for blk in blocks if blk.size > 1}
    shapes, out = [], []
    for hb in (rep >> rep).canonical_blocks():
        src = sources.get(_block_key(hb.leaves))
        if src is None:
            continue
        k = min(src.shape[0], hb.size)
        w = len(shapes)
        shapes.append((hb.mult, k))
        rows, cols = hb.pos // n, hb.pos % n
        pair_out, pair_in = block_of[rows[:, 0]], block_of[cols[:, 0]]
        if not ((block_of[rows] == pair_out[:, None]).all() and (block_of[cols] == pair_in[:, None]).all()):
            raise ValueError(f"BiLinear: a block of {rep!r} >> itself mixes object types")  # not for tensor reps
        for o, i in sorted(set(zip(pair_out.tolist(), pair_in.tolist()))):
            sel = np.flatnonzero((pair_out == o) & (pair_in == i))
            d_out, d_in = blocks[o].size, blocks[i].size
            a, c = local_of[rows[sel]], local_of[cols[sel]]
            s_map = np.full((d_out, d_in), -1, dtype=np.int64)
            s_map[a[0], c[0]] = np.arange(hb.size)
            grid = np.full((blocks[o].mult, blocks[i].mult), -1, dtype=np.int64)
            grid[copy_of[rows[sel, 0]], copy_of[cols[sel, 0]]] = sel
            if hb.size != d_out * d_in or (s_map < 0).any() or (grid < 0).any() or not (
                    s_map[a, c] == np.arange(hb.size)[None, :]).all():
                raise ValueError(f"BiLinear: the blocks of {rep!r} >> itself are not laid out as object pairs")
            out.append(_Interaction(w, grid, src[:k][:, s_map.reshape(-1)], blocks[i].pos, blocks[o].pos, o))
    return shapes, out, [blk.pos for blk in blocks]


class BiLinear(Equivariant, WeightCache, nn.Module):
    """The cheap bilinear layer (Sec. 2.6 / §2.4 of the notes): ``y = scale * W(x) x``.

    ``W(x)`` is a map ``rep -> rep`` whose blocks of each tensor type are filled with learned linear combinations
    of the input's own non-scalar objects of that type, so ``W(rho(g) x) = rho_out(g) W(x) rho_in(g)^-1`` and the
    layer is equivariant. It is what lets parity groups such as O(3) build invariants like ``|v|^2`` from
    vectors (Theorem A.2). Only the first ``min(copies in x, block size)`` input copies of a type are combined
    (the reference code picks them at random). ``scale`` multiplies the output: 0.1 as in emlp (its objax and
    pytorch layers); the residual-pathway-priors RL code's flax layers use 0.03 (with ``N(0, 1)`` weights where
    symkit draws ``N(0, 1/k)``).

    ``W(x)`` is never formed: see the module docstring for the two contraction orders, chosen per pair of object
    types by their cost. ``multiply_adds`` counts a forward pass's multiply-adds per sample (batched and plain
    matrix products); ``weight_products`` lists its products with the weights, ``(rows per sample, inner, columns)``
    each: ``sum(r * i * c)`` of them is the part of ``multiply_adds`` that no choice of order can remove (every
    weight meets every entry of the object it multiplies, once per sample).
    """

    def __init__(self, rep: Rep, scale: float = 0.1, device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        f = factory(device, dtype)
        self.rep = check_rep("rep", rep)
        self.size = rep.size
        self.scale = check_number("BiLinear: scale", scale)
        shapes, interactions, block_pos = _interactions(rep)
        #: multiply-adds per sample of a forward pass (for comparison: a dense layer of this width has size**2)
        self.multiply_adds = sum(it.multiply_adds for it in interactions)
        self.weights = nn.ParameterList(
            nn.Parameter(on(torch.randn(m, k, dtype=f["dtype"]) / math.sqrt(k), f)) for m, k in shapes)
        starts = np.cumsum([0, *(m * k for m, k in shapes)])[:-1]  # of each parameter in their concatenation
        # Interactions share matrix products: those contracted P first by output block (their P side by side, one
        # product with their weights stacked), those contracted Z first by input block (one product of x_I with
        # their weights side by side). Every operand read from x is gathered at once (one gather, one scatter back).
        groups: dict[tuple, list[int]] = {}
        for t, it in enumerate(interactions):
            key = ("z", tuple(it.inp)) if it.weights_first else ("p", it.out_block)
            groups.setdefault(key, []).append(t)
        self._groups, reads = [], []
        #: ``(rows per sample, inner, columns)`` of each product with the weights (one per group, forward pass)
        self.weight_products: list[tuple[int, int, int]] = []
        for g, ((kind, _), members) in enumerate(groups.items()):
            its = [interactions[t] for t in members]
            index = [starts[it.weight] + it.w_index for it in its]
            if kind == "z":  # weights (m_I, sum K m_O): each member's (j, k, i) block side by side
                m_in = its[0].shape[1]
                index = [i.reshape(m_in, -1) for i in index]
                reads.append(its[0].inp)
            self.register_buffer(f"w_index_{g}", torch.as_tensor(np.concatenate(index, axis=-1 if kind == "z" else 0)
                                                                 .reshape(-1), dtype=torch.long, device=device),
                                 persistent=False)
            for it in its:
                reads += [it.src] if kind == "z" else [it.inp, it.src]
            # Z first: the shared input's (m_I, d_I); P first: the shared output's (m_O, d_O)
            m, d = (its[0].shape[1], its[0].shape[3]) if kind == "z" else (its[0].shape[0], its[0].shape[4])
            # Z first: the widths of the members' columns of the shared product Z, split apart once per call
            widths = [it.shape[2] * it.shape[0] for it in its] if kind == "z" else []
            self._groups.append((kind, m, d, [(it.out_block, it.shape) for it in its], widths))
            inner = m if kind == "z" else sum(it.shape[2] * it.shape[1] for it in its)  # P first: sum of K m_I
            self.weight_products.append((d, inner, sum(widths) if kind == "z" else m))
        self._read_sizes = [len(r) for r in reads]
        self.register_buffer("reads", torch.as_tensor(np.concatenate(reads) if reads else np.zeros(0, np.int64),
                                                      dtype=torch.long, device=device), persistent=False)
        # the output: per block, the sum of its interactions laid out (a, i); one gather puts them in rep order
        receives = {it.out_block for it in interactions}
        self._out_blocks = [(o, pos.size, o in receives) for o, pos in enumerate(block_pos)]
        layout = np.concatenate([pos.T.reshape(-1) for pos in block_pos]) if block_pos else np.zeros(0, np.int64)
        self.register_buffer("unpermute", torch.as_tensor(np.argsort(layout), dtype=torch.long, device=device),
                             persistent=False)

    @property
    def rep_in(self) -> Rep:
        return self.rep

    @property
    def rep_out(self) -> Rep:
        return self.rep

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Draw the mixing weights again as at construction (``N(0, 1/k)``, on the CPU, then copied)."""
        for w in self.weights:
            w.copy_(torch.randn(w.shape, dtype=w.dtype) / math.sqrt(w.shape[1]))

    def _group_weights(self) -> list[torch.Tensor]:
        """Each group's weights (scaled), gathered from the parameters in the layout of its matrix product."""
        if not self._groups:
            return []
        flat = torch.cat([w.reshape(-1) for w in self.weights]) * self.scale
        return [flat.index_select(0, getattr(self, f"w_index_{g}")) for g in range(len(self._groups))]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input(lambda: f"BiLinear({self.rep!r})", self, x, self.size)
        lead = x.shape[:-1]
        n_b = math.prod(lead)
        x2 = x.reshape(n_b, self.size)  # not -1: a batch of 0 has no inferable size
        acc: dict[int, torch.Tensor] = {}
        operands = iter(torch.split(x2.index_select(1, self.reads), self._read_sizes, dim=1))
        for (kind, m, d, members, widths), W in zip(self._groups, self._cached(self._group_weights)):
            outs = []
            if kind == "z":  # Z[b, (c, k), i] = sum_j x_j[c] w_ijk, then out[b, a, i] = sum_{c,k} M[a, c, k] Z
                m_in, d_in = m, d
                Z = next(operands).reshape(n_b * d_in, m_in) @ W.view(m_in, -1)
                # one split, not a slice per member: a slice's backward fills a zero matrix of all of Z
                for (_, (m_out, _, k, _, d_out)), Zk in zip(members, Z.split(widths, dim=1)):  # M: (a, c, k)
                    Zt = Zk.reshape(n_b, d_in * k, m_out)
                    outs.append(per_sample_matmul(next(operands).reshape(n_b, d_out, d_in * k), Zt)
                                .view(n_b, d_out * m_out))
            else:  # P[b, (a, k), j] = sum_c M[a, k, c] x_j[c] (M laid out (a, k, c)), then out = sum_{k,j} P w_ijk
                m_out, d_out = m, d
                P = []
                for _, (_, m_in, k, d_in, _) in members:
                    xi, M = next(operands), next(operands)  # (b, d_I m_I) laid out (c, j); M as (a, k, c)
                    P.append(per_sample_matmul(M.reshape(n_b, d_out * k, d_in), xi.reshape(n_b, d_in, m_in))
                             .view(n_b * d_out, k * m_in))
                P = P[0] if len(P) == 1 else torch.cat(P, dim=1)
                outs.append((P @ W.view(-1, m_out)).view(n_b, d_out * m_out))
            for (o, _), out in zip(members, outs):  # P first: one result, for the members' common output block
                acc[o] = out if o not in acc else acc[o] + out
        pieces = [acc[o] if has else x2.new_zeros(n_b, size) for o, size, has in self._out_blocks]
        y = torch.cat(pieces, dim=1).index_select(1, self.unpermute) if pieces else torch.zeros_like(x2)
        return y.reshape(*lead, self.size)
