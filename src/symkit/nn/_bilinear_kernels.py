"""The computations of :class:`symkit.nn.bilinear.BiLinear`: its forward pass in two forms and a written-out backward.

Layout. A rep stores each object copy's entries together (``(copies, entries)`` per block); the products with the
weights contract over copies, so the layer reads every block as ``(n, entries, copies)`` (for the weight products a
matrix of ``n * entries`` rows, per sample the right factor of a per-sample product), and after them the source
matrices of every group of per-sample products, stacked in the layout that product takes: one gather
(``read_index``) reads it all. Outputs are accumulated in the block layout and put back in the rep's order by one
more gather.

``BiLinear.__init__`` plans the work: products with the weights in *units* (``_units``: one matrix product for all
the interactions into (P first) or out of (Z first) a block of scalars, whose operands sit side by side in it, one
per interaction elsewhere, so that no operand is copied to be shared) and per-sample products in *groups*
(``_groups``: the small interactions of one input block (P first) or output block (Z first) share one batched
product). ``_plan`` holds, per interaction, its shape and its places in both.

``composite`` is the forward pass as differentiable torch operations: autograd, forward-mode AD, ``torch.func``
transforms and double backward apply to it. ``batch_last`` is the same map laid out for a compiler (features by
samples; ``torch.compile`` and ``torch.export`` trace it). ``BiLinearFunction`` computes
the same map with a backward written out: it keeps only each Z-first unit's ``Z`` (what its weight gradient needs;
a P-first unit's ``P`` is made again from the input, a third of the per-sample work against 2.4 MB a layer at O(3),
384 channels, batch 500), saved through ``save_for_backward`` so that checkpointing drops it too, and gathers the
input again (cheaper than keeping the gathered copy, twice the input or more), writes every gradient
straight into its place (the weights' into one flat tensor, the sources' and blocks' into one gradient of the
gather) and scatters that back with one ``index_add``, where autograd's backward of ``composite`` fills a zero tensor
per slice and view and adds them up. Double backward differentiates ``composite``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.autograd.forward_ad as forward_ad

from symkit.nn._ops import permute_dim

__all__ = ["BiLinearFunction", "batch_last", "composite", "fast_forward", "flat_weights", "is_plain", "p_unit_sets",
           "per_sample_matmul"]

Matmul = Callable[..., torch.Tensor]


def _unrolled(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """``a @ b`` per sample as a sum of ``q`` broadcast products (into ``out`` if given)."""
    if out is None:  # out of place: the composite form runs under torch.func transforms too
        out = a[:, :, :1] * b[:, :1, :]
        for c in range(1, a.shape[2]):
            out = torch.addcmul(out, a[:, :, c:c + 1], b[:, c:c + 1, :])
        return out
    torch.mul(a[:, :, :1], b[:, :1, :], out=out)
    for c in range(1, a.shape[2]):
        out.addcmul_(a[:, :, c:c + 1], b[:, c:c + 1, :])
    return out


def _broadcasts(p: int, q: int, r: int) -> bool:
    """Whether :func:`per_sample_matmul` takes a ``(p, q) @ (q, r)`` product as a sum of broadcast products."""
    return q <= 3 and p * r <= 512


def per_sample_matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b`` per sample, ``(n, p, q) @ (n, q, r)`` (into ``out`` if given), by the fastest of three forms on the
    CPU (measured at batch 500, one thread). For ``q <= 3`` and ``p r <= 512``, where CPU ``bmm`` multiplies entry
    by entry or pays its per-sample call, a sum of ``q`` broadcast products along the longer of ``p`` and ``r``
    (2-3x faster); elsewhere ``bmm``, of ``(b^T a^T)^T`` where ``p >= 1.5 r`` (the BLAS kernel is up to 2x faster
    with the wider side as columns), which returns a transposed view."""
    p, q, r = a.shape[1], a.shape[2], b.shape[2]
    if _broadcasts(p, q, r):
        if r >= p:
            return _unrolled(a, b, out)
        return _unrolled(b.transpose(1, 2), a.transpose(1, 2), None if out is None else out.transpose(1, 2)
                         ).transpose(1, 2)
    res = torch.bmm(b.transpose(1, 2), a.transpose(1, 2)).transpose(1, 2) if 2 * p >= 3 * r else torch.bmm(a, b)
    return res if out is None else out.copy_(res)


def is_plain(*tensors: torch.Tensor) -> bool:
    """Whether none of ``tensors`` is wrapped by a ``torch.func`` transform or carries a forward-mode tangent (then
    the written-out backward applies; otherwise ``composite``)."""
    wrapped = getattr(torch._C._functorch, "is_functorch_wrapped_tensor", None)
    if wrapped is None or any(wrapped(t) for t in tensors):
        return False
    if getattr(forward_ad, "_current_level", 0) < 0:  # no dual level open
        return True
    return all(forward_ad.unpack_dual(t).tangent is None for t in tensors)


# ---------------------------------------------------------------------------------------------- layout
def _block(layer: Any, xr: torch.Tensor, b: int) -> torch.Tensor:
    """Block ``b`` of the gathered input ``xr`` as an (n, entries, copies) view."""
    m, d = layer._blocks[b]
    off = layer._block_offsets[b]
    return xr[:, off:off + m * d].view(xr.shape[0], d, m)


def _rows(layer: Any, xr: torch.Tensor, b: int) -> torch.Tensor:
    """Block ``b`` of ``xr`` as the (n entries, copies) matrix of a product with the weights (a copy unless the
    block holds scalars)."""
    m, d = layer._blocks[b]
    off = layer._block_offsets[b]
    return xr[:, off:off + m * d].reshape(xr.shape[0] * d, m)


def _stacked(layer: Any, xr: torch.Tensor, g: int) -> torch.Tensor:
    """Group ``g``'s source matrices in ``xr``: ``(n, rows (a, k) of all, c)`` for P first, ``(n, a, (c, k) of all)``
    for Z first."""
    kind, b, off, size, members = layer._groups[g]
    d = layer._blocks[b][1]  # P first: the input block's entries (c); Z first: the output block's (a)
    src = xr[:, off:off + size * d]
    return src.view(-1, size, d) if kind == "p" else src.view(-1, d, size)


def _unit_weights(layer: Any, w: torch.Tensor, u: int) -> torch.Tensor:
    _, _, off, rows, cols, _ = layer._units[u]
    return w[off:off + rows * cols].view(rows, cols)


def _unblock(layer: Any, blocks: dict[int, torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    """The (n, size) tensor whose blocks are ``blocks`` ((n, entries, copies) each; zeros where absent)."""
    n = like.shape[0]
    flat = [blocks[b].reshape(n, m * d) if b in blocks else like.new_zeros(n, m * d)
            for b, (m, d) in enumerate(layer._blocks)]
    return torch.cat(flat, dim=1).index_select(1, layer.unpermute)


def flat_weights(layer: Any, params: Sequence[torch.Tensor]) -> torch.Tensor:
    """The parameters, scaled and gathered into the layout of the units' weight matrices."""
    return (torch.cat([p.reshape(-1) for p in params]) * layer.scale).index_select(0, layer.w_index)


# views for the not-differentiable path: one as_strided each, where the helpers above take two to four view ops
# (the layer makes some sixty views per pass; each op costs its dispatch)
def _at(t: torch.Tensor, shape: tuple, strides: tuple, off: int) -> torch.Tensor:
    return t.as_strided(shape, strides, t.storage_offset() + off)


def _block_v(layer: Any, t: torch.Tensor, b: int, transposed: bool = False) -> torch.Tensor:
    """:func:`_block` of a row-contiguous ``t`` (or its (n, copies, entries) transpose)."""
    m, d = layer._blocks[b]
    R, off = t.stride(0), layer._block_offsets[b]
    return _at(t, (t.shape[0], m, d), (R, 1, m), off) if transposed else _at(t, (t.shape[0], d, m), (R, m, 1), off)


def _stacked_v(layer: Any, t: torch.Tensor, g: int, transposed: bool = False) -> torch.Tensor:
    """:func:`_stacked` of a row-contiguous ``t`` (or its transpose)."""
    kind, b, off, size, _ = layer._groups[g]
    d, R, n = layer._blocks[b][1], t.stride(0), t.shape[0]
    rows, cols = (size, d) if kind == "p" else (d, size)
    return _at(t, (n, cols, rows), (R, 1, cols), off) if transposed else _at(t, (n, rows, cols), (R, cols, 1), off)


def _part_v(M: torch.Tensor, entry: tuple, transposed: bool = False) -> torch.Tensor:
    """An interaction's columns of its unit's ``P`` (n d_O, columns) as ``(n, (a, k), j)``, or of its unit's ``Z``
    (n d_I, columns) as ``(n, (c, k), i)`` (or the transpose): a view, since a unit of several interactions has one
    entry per copy (``d = 1``) and a unit of one has all the columns."""
    kind, _, _, k, d_out, d_in, m_out, m_in, _, lo, _ = entry[:11]
    d, m = (d_out, m_in) if kind == "p" else (d_in, m_out)
    n, s0 = M.shape[0] // d, M.stride(0)
    if transposed:
        return _at(M, (n, m, d * k), (d * s0, 1, m), lo)
    return _at(M, (n, d * k, m), (d * s0, m, 1), lo)


def _weights_v(layer: Any, w: torch.Tensor, u: int, transposed: bool = False) -> torch.Tensor:
    _, _, off, rows, cols, _ = layer._units[u]
    return _at(w, (cols, rows), (1, cols), off) if transposed else _at(w, (rows, cols), (cols, 1), off)


# ---------------------------------------------------------------------------------------------- forward
def composite(layer: Any, x2: torch.Tensor, w: torch.Tensor, mm: Matmul) -> torch.Tensor:
    """The bilinear map of ``x2`` (n, size) as differentiable torch operations, ``w`` the flat gathered weights: one
    product with the weights and one per-sample product per interaction."""
    n = x2.shape[0]
    xr = x2.index_select(1, layer.read_index)
    totals: dict[int, torch.Tensor] = {}  # per output block, (n, d_O, m_O)
    for entry in layer._plan:
        kind, o, i, k, d_out, d_in, m_out, m_in, u, lo, hi, g, g_lo, g_hi = entry
        W, X = _unit_weights(layer, w, u), _block(layer, xr, i)
        if kind == "p":  # P[n, (a, k), j] = sum_c M[n, k, a, c] x_j[n, c]; out[n, a, i] = sum_{k, j} P w[(k, j), i]
            P = mm(_stacked(layer, xr, g)[:, g_lo:g_hi], X)
            out = (P.reshape(n * d_out, k * m_in) @ W[lo:hi]).view(n, d_out, m_out)
        else:  # Z[n, (c, k), i] = sum_j x_j[n, c] w[j, (k, i)]; out[n, a, i] = sum_{c, k} M[n, k, a, c] Z
            Z = X.reshape(n * d_in, m_in) @ W[:, lo:hi]
            out = mm(_stacked(layer, xr, g)[:, :, g_lo:g_hi], Z.view(n, d_in * k, m_out))
        totals[o] = out if o not in totals else totals[o] + out
    return _unblock(layer, totals, x2)


def batch_last(layer: Any, x2: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The map of :func:`composite` with the batch last, for ``torch.compile``: ``x^T`` (features by samples) with its
    rows permuted once so that every block is a range of (copies, entries) (``rows_perm``), each interaction's source
    matrices its source block's first ``k`` copies with the entries permuted (``s_perm``), the products with the
    weights in the layer's units, each per-sample product a broadcast product summed over its inner index (the
    compiler fuses it into one loop vectorised over samples: 2x faster than ``bmm`` at O(3), 384 channels, batch
    500), and the inverse row permutation back. Every gather's backward is a gather (``_ops.permute_dim``).
    Differentiable torch operations; ``w`` the flat gathered weights (:func:`flat_weights`)."""
    n, plan = x2.shape[0], layer._plan
    # (features, n), rows permuted so that every block is one range of (copies, entries): a transposition the
    # compiler tiles and a gather of whole rows, whose backward is a gather too (no scatter-add)
    xP = permute_dim(x2.T.contiguous(), layer.rows_perm, layer.rows_inverse, 0)

    def block(b: int) -> torch.Tensor:  # (m, d, n): copies, entries, samples
        m, d = layer._blocks[b]
        off = layer._block_offsets[b]
        return xP[off:off + m * d].view(m, d, n)

    def sources(t: int) -> torch.Tensor:  # P first: (a, k, c, n); Z first: (a, c, k, n)
        kind, _, _, k, d_out, d_in = plan[t][:6]
        lo, hi = layer._s_perm_at[t], layer._s_perm_at[t + 1]
        M = permute_dim(block(layer._sources_of[t])[:k], layer.s_perm[lo:hi], layer.s_inverse[lo:hi], 1)
        M = M.view(k, d_out, d_in, n)  # M_k[a, c]: a gather whose backward is a gather (no scatter-add)
        return M.permute(1, 0, 2, 3) if kind == "p" else M.permute(1, 2, 0, 3)

    totals: dict[int, torch.Tensor] = {}  # per output block, (m, d, n)
    for kind, b, off, rows, cols, members in layer._units:
        W = w[off:off + rows * cols].view(rows, cols)
        if kind == "p":  # P[(k, j), a] = sum_c M_k[a, c] x_j[c] per member, side by side; out[i, a] = W^T P
            d_out = layer._blocks[b][1]
            P = torch.cat([(sources(t)[..., None, :] * block(plan[t][2]).transpose(0, 1)[None, None]).sum(2)
                           .permute(1, 2, 0, 3).reshape(-1, d_out * n) for t in members])
            parts = {b: (W.T @ P).view(cols, d_out, n)}
        else:  # Z[(k, i), c] = W^T x_c per member, side by side; out[a, i] = sum_{c, k} M_k[a, c] Z[(k, i), c]
            m_in, d_in = layer._blocks[b]
            Z = W.T @ block(b).reshape(m_in, d_in * n)
            parts = {}
            for t in members:
                k, m_out, lo, hi = plan[t][3], plan[t][6], plan[t][9], plan[t][10]
                Zt = Z[lo:hi].view(k, m_out, d_in, n).permute(1, 2, 0, 3)  # (i, c, k, n)
                o = plan[t][1]
                part = (sources(t)[:, None] * Zt[None]).sum((2, 3)).transpose(0, 1)  # (i, a, n)
                parts[o] = part if o not in parts else parts[o] + part
        for o, part in parts.items():
            totals[o] = part if o not in totals else totals[o] + part
    blocks = [totals[b].reshape(m * d, n) if b in totals else xP.new_zeros(m * d, n)
              for b, (m, d) in enumerate(layer._blocks)]
    return permute_dim(torch.cat(blocks), layer.rows_inverse, layer.rows_perm, 0).T


def _matmul_into(mm: Matmul, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """``out = a @ b`` per sample (``mm``'s ``out``; ``bmm`` writes a contiguous ``out`` itself)."""
    if out.is_contiguous() and mm is per_sample_matmul and not _broadcasts(a.shape[1], a.shape[2], b.shape[2]):
        torch.bmm(a, b, out=out)
    else:
        mm(a, b, out=out)


def p_unit_sets(layer: Any) -> list[list[int]]:
    """The P-first units in sets that no per-sample product spans (a group of several interactions fills the ``P``
    of each of their units): the backward pass makes one set's ``P`` at a time."""
    plan, parent = layer._plan, {u: u for u, unit in enumerate(layer._units) if unit[0] == "p"}

    def root(u: int) -> int:
        while parent[u] != u:
            u = parent[u]
        return u

    for kind, _, _, _, members in layer._groups:
        if kind == "p":
            first = root(plan[members[0]][8])
            for t in members[1:]:
                parent[root(plan[t][8])] = first
    sets: dict[int, list[int]] = {}
    for u in parent:
        sets.setdefault(root(u), []).append(u)
    return list(sets.values())


def _p_first(layer: Any, xr: torch.Tensor, mm: Matmul, units: Sequence[int] | None = None) -> dict[int, torch.Tensor]:
    """Each P-first unit's ``P`` (n d_O, rows), filled by its interactions' per-sample products (one per group) from
    the gathered input ``xr``; with ``units`` (one of :func:`p_unit_sets`) only theirs."""
    n, plan = xr.shape[0], layer._plan
    P_of = {u: xr.new_empty(n * layer._blocks[b][1], rows)
            for u, (kind, b, _, rows, _, _) in enumerate(layer._units) if kind == "p" and (units is None or u in units)}
    for kind, b, _, _, members in layer._groups:
        if kind != "p" or plan[members[0]][8] not in P_of:
            continue
        g = plan[members[0]][11]
        A, X = _stacked_v(layer, xr, g), _block_v(layer, xr, b)
        if len(members) == 1:
            _matmul_into(mm, A, X, _part_v(P_of[plan[members[0]][8]], plan[members[0]]))
        else:
            res = mm(A, X)
            for t in members:
                entry = plan[t]
                _part_v(P_of[entry[8]], entry).copy_(res[:, entry[12]:entry[13]])
    return P_of


def fast_forward(layer: Any, x2: torch.Tensor, w: torch.Tensor, mm: Matmul,
                 keep: bool = False) -> tuple[torch.Tensor, tuple | None]:
    """The map of :func:`composite`, not differentiable: one product with the weights per unit, one per-sample
    product per group. With ``keep`` also what the backward reuses: per unit its ``Z`` (None for a P-first unit,
    whose ``P`` the backward makes again from the input)."""
    n = x2.shape[0]
    xr = x2.index_select(1, layer.read_index)
    plan = layer._plan
    P_of = _p_first(layer, xr, mm)
    totals: dict[int, torch.Tensor] = {}
    unit_ops: list[Any] = []
    for u, (kind, b, _, _, _, _) in enumerate(layer._units):
        W = _weights_v(layer, w, u)
        m, d = layer._blocks[b]
        if kind == "p":  # b: the output block
            out = (P_of.pop(u) @ W).view(n, d, m)  # a plain product, not addmm: flop counters see every one as mm
            totals[b] = out if b not in totals else totals[b].add_(out)
            unit_ops.append(None)  # P is made again in the backward pass (cheaper than its memory)
        else:  # b: the input block
            X = _rows(layer, xr, b)
            unit_ops.append(X @ W)  # Z (the rows X are gathered again in the backward)
    for kind, b, _, size, members in layer._groups:
        if kind != "z":
            continue
        out = mm(_stacked_v(layer, xr, plan[members[0]][11]), _side_by_side(layer, unit_ops, b, size, members))
        totals[b] = out if b not in totals else totals[b].add_(out)
    return _unblock(layer, totals, x2), (unit_ops if keep else None)


def _side_by_side(layer: Any, per_unit: Any, b: int, size: int, members: list[int]) -> torch.Tensor:
    """A group's members' parts of their units' matrices (``per_unit[u]``: a Z-first unit's ``Z``, or a P-first
    unit's ``dP``) side by side, ``(n, (c, k) or (a, k) of all members, copies)``: a view for a group of one
    interaction, else a copy (made where it is needed, not kept)."""
    plan = layer._plan
    parts = [_part_v(per_unit[plan[t][8]], plan[t]) for t in members]
    if len(parts) == 1:
        return parts[0]
    out = parts[0].new_empty(parts[0].shape[0], size, layer._blocks[b][0])
    for t, part in zip(members, parts):
        out[:, plan[t][12]:plan[t][13]].copy_(part)
    return out


# ---------------------------------------------------------------------------------------------- backward
class BiLinearFunction(torch.autograd.Function):
    """``BiLinearFunction.apply(layer, mm, x2, *params)``: the map of :func:`composite` with a written-out backward
    (module docstring)."""

    @staticmethod
    def forward(ctx: Any, layer: Any, mm: Matmul, x2: torch.Tensor, *params: torch.Tensor) -> torch.Tensor:
        w = flat_weights(layer, params)
        y, unit_ops = fast_forward(layer, x2, w, mm, keep=True)
        # every kept tensor goes through save_for_backward (not a ctx attribute), so that saved-tensor hooks see it:
        # torch.utils.checkpoint then drops it and runs the forward again in the backward pass
        ctx.layer, ctx.mm, ctx.n_params = layer, mm, len(params)
        ctx.units_kept = [z is not None for z in unit_ops]
        # the gathered weights and the Z groups' stacked Z are made again in the backward pass (a third of a MB
        # each a layer at O(3), 384 channels)
        ctx.save_for_backward(x2, *params, *(z for z in unit_ops if z is not None))
        return y

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor) -> tuple:
        layer, mm = ctx.layer, ctx.mm
        x2, *rest = ctx.saved_tensors
        params, kept = rest[:ctx.n_params], iter(rest[ctx.n_params:])
        unit_ops = [next(kept) if k else None for k in ctx.units_kept]
        need_x, need_p = ctx.needs_input_grad[2], ctx.needs_input_grad[3:]
        if torch.is_grad_enabled():  # double backward: the vector-Jacobian product of the composite form
            # torch.func.vjp differentiates the composite map in its own inputs alone (the layer's local derivative),
            # and its result stays differentiable in x2, the parameters and gy for the outer graph; a nested
            # torch.autograd.grad would follow x2's own history back to the parameters (a wrong, total derivative,
            # and a recursion through every earlier layer's backward)
            def local(x: torch.Tensor, *ps: torch.Tensor) -> torch.Tensor:
                return composite(layer, x, flat_weights(layer, ps), mm)

            _, vjp = torch.func.vjp(local, x2, *params)
            grads = vjp(gy)
            return (None, None, grads[0] if need_x else None,
                    *(g if need else None for g, need in zip(grads[1:], need_p)))
        need_w = any(need_p)
        w = flat_weights(layer, params)
        xr = x2.index_select(1, layer.read_index)  # gathered again, not kept: a gather costs less than its memory
        plan = layer._plan
        n = x2.shape[0]
        gb = gy.index_select(1, layer.block_index)  # the output gradient, blocks as (n, entries, copies)
        rows_of: dict[int, torch.Tensor] = {}

        def g_rows(b: int) -> torch.Tensor:  # (n d_O, m_O), contiguous
            if b not in rows_of:
                rows_of[b] = _rows(layer, gb, b)
            return rows_of[b]

        dxr = None
        if need_x:  # the blocks' part accumulates (zeros); every source entry is written once
            dxr = xr.new_empty(xr.shape)
            dxr[:, :layer.size].zero_()
        dw = torch.empty_like(w) if need_w else None
        # Z groups: dZ (into each unit's), and the sources' gradient
        dZ_of = {u: unit_ops[u].new_empty(unit_ops[u].shape) for u, unit in enumerate(layer._units) if unit[0] == "z"}
        z_groups = [group for group in layer._groups if group[0] == "z"]
        for _, b, _, size, members in z_groups:
            g = plan[members[0]][11]
            m, d = layer._blocks[b]
            G = g_rows(b).view(n, d, m)
            BtT = _stacked_v(layer, xr, g, transposed=True)
            if len(members) == 1:
                _matmul_into(mm, BtT, G, _part_v(dZ_of[plan[members[0]][8]], plan[members[0]]))
                ZsT = _part_v(unit_ops[plan[members[0]][8]], plan[members[0]], transposed=True)
            else:
                dZs = mm(BtT, G)
                for t in members:
                    _part_v(dZ_of[plan[t][8]], plan[t]).copy_(dZs[:, plan[t][12]:plan[t][13]])
                ZsT = _side_by_side(layer, unit_ops, b, size, members).transpose(1, 2)
            if need_x:
                mm(G, ZsT, out=_stacked_v(layer, dxr, g))
        dZs = ZsT = G = BtT = None  # the last group's stacked Z and dZ would live to the end (0.4 MB each)
        # the units: weight gradients (P made again from the input), the input rows' gradient (Z), dP (P)
        dP_of, P_of = {}, {}
        p_sets = {u: units for units in layer._p_sets for u in units}  # one set's P at a time
        for u in [*(u for units in layer._p_sets for u in units), *(u for u, unit in enumerate(layer._units)
                                                                   if unit[0] == "z")]:
            kind, b = layer._units[u][:2]
            if kind == "p" and need_w and u not in P_of:
                P_of = _p_first(layer, xr, mm, p_sets[u])
            ops, unit_ops[u] = (P_of.pop(u, None), None) if kind == "p" else (unit_ops[u], None)
            WT = _weights_v(layer, w, u, transposed=True)
            m, d = layer._blocks[b]
            if kind == "p":
                G = g_rows(b)
                if need_w:
                    torch.mm(ops.T, G, out=_weights_v(layer, dw, u))
                ops = None  # P freed before its gradient is made
                if need_x:
                    dP_of[u] = G @ WT
            else:
                X, dZ = _rows(layer, xr, b), dZ_of.pop(u)
                if need_w:
                    torch.mm(X.T, dZ, out=_weights_v(layer, dw, u))
                if need_x:
                    if d == 1:
                        _at(dxr, (n, m), (dxr.stride(0), 1), layer._block_offsets[b]).addmm_(dZ, WT)
                    else:
                        _block_v(layer, dxr, b).add_((dZ @ WT).view(n, d, m))
        ops = gb = None
        rows_of.clear()
        # P groups: the input's and the sources' gradients
        if need_x:
            for _, b, _, size, members in (group for group in layer._groups if group[0] == "p"):
                g = plan[members[0]][11]
                dRes = _side_by_side(layer, dP_of, b, size, members)
                _block_v(layer, dxr, b).add_(mm(_stacked_v(layer, xr, g, transposed=True), dRes))
                mm(dRes, _block_v(layer, xr, b, transposed=True), out=_stacked_v(layer, dxr, g))
        gx = None
        if need_x:
            gx = dxr[:, :layer.size].index_select(1, layer.unpermute)
            gx.index_add_(1, layer.read_index[layer.size:], dxr[:, layer.size:])
        grads: list[torch.Tensor | None] = [None] * len(params)
        if need_w:
            flat = dw.new_zeros(dw.shape).index_add_(0, layer.w_index, dw).mul_(layer.scale)  # a permutation
            grads = [g.view(p.shape) if need else None
                     for g, p, need in zip(flat.split(layer._param_sizes), params, need_p)]
        return (None, None, gx, *grads)
