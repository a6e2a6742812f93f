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

from symkit.nn._equivariance import Equivariant
from symkit.nn._factory import factory, on
from symkit.nn._inputs import check_input, check_rep
from symkit.reps.core import Rep
from symkit.reps.solve import object_index

__all__ = ["BiLinear"]


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
        self.out = out_pos.T.reshape(-1)  # (a, i): the result as (d_O, m_O) per sample
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


class BiLinear(Equivariant, nn.Module):
    """The cheap bilinear layer (Sec. 2.6 / §2.4 of the notes): ``y = scale * W(x) x``.

    ``W(x)`` is a map ``rep -> rep`` whose blocks of each tensor type are filled with learned linear combinations
    of the input's own non-scalar objects of that type, so ``W(rho(g) x) = rho_out(g) W(x) rho_in(g)^-1`` and the
    layer is equivariant. It is what lets parity groups such as O(3) build invariants like ``|v|^2`` from
    vectors (Theorem A.2). Only the first ``min(copies in x, block size)`` input copies of a type are combined
    (the reference code picks them at random).

    ``W(x)`` is never formed: see the module docstring for the two contraction orders, chosen per pair of object
    types by their cost. ``multiply_adds`` counts a forward pass's multiply-adds per sample (batched and plain
    matrix products).
    """

    def __init__(self, rep: Rep, scale: float = 0.1, device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        f = factory(device, dtype)
        self.rep = check_rep("rep", rep)
        self.size = rep.size
        self.scale = float(scale)
        shapes, interactions, block_pos = _interactions(rep)
        #: multiply-adds per sample of a forward pass (for comparison: a dense layer of this width has size**2)
        self.multiply_adds = sum(it.multiply_adds for it in interactions)
        self.weights = nn.ParameterList(
            nn.Parameter(on(torch.randn(m, k, dtype=f["dtype"]) / math.sqrt(k), f)) for m, k in shapes)
        self._plan = []
        for t, it in enumerate(interactions):
            self.register_buffer(f"w_index_{t}", torch.as_tensor(it.w_index, dtype=torch.long, device=device),
                                 persistent=False)
            self._plan.append((it.weight, it.out_block, it.shape, it.weights_first))
        # every operand read from x, gathered at once (one gather, and one scatter in the backward pass)
        reads = [r for it in interactions for r in (it.inp, it.src)]
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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input(lambda: f"BiLinear({self.rep!r})", self, x, self.size)
        lead = x.shape[:-1]
        n_b = math.prod(lead)
        x2 = x.reshape(n_b, self.size)  # not -1: a batch of 0 has no inferable size
        acc: dict[int, torch.Tensor] = {}
        operands = torch.split(x2.index_select(1, self.reads), self._read_sizes, dim=1)
        for t, (w, o, (m_out, m_in, k, d_in, d_out), weights_first) in enumerate(self._plan):
            W = self.weights[w].reshape(-1).index_select(0, getattr(self, f"w_index_{t}"))
            xi, M = operands[2 * t], operands[2 * t + 1]  # (b, d_I m_I) laid out (c, j); (b, d_O K d_I) as (a, k, c)
            if weights_first:  # Z[b, (c, k), i] = sum_j x_j[c] w_ijk, then out[b, a, i] = sum_{c,k} M[a, c, k] Z
                Z = (xi.reshape(n_b * d_in, m_in) @ W.view(m_in, k * m_out)).view(n_b, d_in * k, m_out)
                out = torch.bmm(M.reshape(n_b, d_out, d_in * k), Z)
            else:  # P[b, (a, k), j] = sum_c M[a, k, c] x_j[c], then out[b, a, i] = sum_{k,j} P w_ijk
                P = torch.bmm(M.reshape(n_b, d_out * k, d_in), xi.reshape(n_b, d_in, m_in))
                out = P.view(n_b * d_out, k * m_in) @ W.view(k * m_in, m_out)
            out = out.reshape(n_b, d_out * m_out)
            acc[o] = out if o not in acc else acc[o] + out
        pieces = [acc[o] if has else x2.new_zeros(n_b, size) for o, size, has in self._out_blocks]
        y = torch.cat(pieces, dim=1).index_select(1, self.unpermute) if pieces else torch.zeros_like(x2)
        return (self.scale * y).reshape(*lead, self.size)
