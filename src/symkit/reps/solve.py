"""Equivariant bases of canonical blocks (eq. 2.8): per-group segments and the solver paths.

The representation algebra (`symkit.reps.core`) flattens a rep into canonical blocks (sorted tensor products of
leaves, with the positions of every copy: `symkit.reps.blocks.Block`) and calls this module with them; nothing here
imports the algebra, and a leaf is asked what it is through its `slot_kind` ("V", "D" or None). Each distinct block
is solved once. Inside a block, the leaves of different groups of a direct product are solved separately and
combined as Q_a ⊗ Q_b (§A.1.7). Each single-group segment is solved by

* ``orbit``: exact 0/1 orbit indicators for permutation groups acting on tensor powers of V (integer, sparse);
* ``brauer``: closed-form invariant tensors of the classical groups (`symkit.reps.brauer`);
* ``coupling``: SO(3) and O(3) tensor powers by angular-momentum coupling (`symkit.reps.coupling`), exact and
  orthonormal, kept as sparse factors (a lazy operator), made dense only where a matrix is asked for and at most
  ``LAZY_BASIS_BYTES``;
* ``dense``: float64 eigen-decomposition of the sparse constraint Gram matrix, for blocks up to DENSE_MAX;
* ``weight``: for Lie groups, the constraints restricted to the zero-weight space of a generic algebra element;
* ``iterative``: only lazy Kronecker products / sums (`symkit.linalg.operators`), with a growing block size.

``method="auto"`` picks them in that order, taking ``coupling`` over ``brauer`` from ``COUPLING_MIN_SLOTS`` slots.
Results are cached in memory and (when slow to compute) on disk. A disk entry is used only when it passes checks
far cheaper than the solve that a wrong entry cannot pass (`_valid_cached_basis`): its rank equals a count that
solves nothing (`_independent_rank`: coupling paths, tuple orbits, the Schur-Weyl count of the classical groups,
the mean character of a finite group), its columns are orthonormal, and every generator fixes (every Lie algebra
generator kills) them. A block with no such count is not stored on disk.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, aslinearoperator

from symkit.groups.base import Group
from symkit.linalg.cache import cache_discard, cache_get, cache_key, cache_put
from symkit.linalg.nullspace import dense_nullspace, iterative_nullspace, orthonormal_range
from symkit.linalg.operators import KronOp, KronSumOp
from symkit.linalg.orbits import orbit_basis, orbit_count
from symkit.reps.blocks import Block
from symkit.reps.brauer import brauer_applicable, brauer_basis, brauer_diagrams, brauer_rank, classical_rank
from symkit.reps.coupling import coupled_invariants, coupled_rank, coupling_applicable

__all__ = [
    "DENSE_MAX", "METHODS", "check_method", "check_index_bytes", "segment_methods", "StructuredBasis",
    "structured_basis", "equivariant_basis", "equivariant_projector", "rank", "clear_memory_cache", "dense_block",
    "dense_array", "object_index",
]

#: largest block dimension solved by the dense path under method="auto"
DENSE_MAX = int(os.environ.get("SYMKIT_DENSE_MAX", "2500"))
METHODS = ("auto", "orbit", "brauer", "coupling", "dense", "weight", "iterative")
#: SO(3) / O(3) tensor powers of at least this many slots take the coupling path under method="auto" (below it the
#: Brauer path is faster: T(10) in 0.5-0.9 s against 3 s; from T(11) on its 17,325 diagrams do not fit in memory)
COUPLING_MIN_SLOTS = 11
#: a coupling basis whose dense float64 matrix would take more bytes than this stays a lazy operator
#: (SO(3) T(12): 531,441 x 4,213, 17.9 GB)
LAZY_BASIS_BYTES = int(os.environ.get("SYMKIT_LAZY_BASIS_BYTES", str(1 << 32)))
#: the weight path applies when the zero-weight space has at most this many dimensions (and N * n0 <= 1e7)
WEIGHT_MAX = 3000
#: blocks that take longer than this (seconds) to solve are stored in the on-disk cache
DISK_CACHE_MIN_SECONDS = 0.2

_MEM: dict[tuple, Any] = {}
_LOCK = threading.Lock()


def clear_memory_cache() -> None:
    """Forget every basis solved in this process (the on-disk cache is kept)."""
    with _LOCK:
        _MEM.clear()


def memoised(key: tuple, compute: Any) -> Any:
    """``compute()`` once per ``key`` in this process's memory cache (a None answer is kept too), forgotten by
    :func:`clear_memory_cache` with the bases: for what is derived from them (isotypic decompositions, the layers'
    irreducible-basis plans). Keys start with a name of their own (``("isotypic", ...)``)."""
    with _LOCK:
        if key in _MEM:
            return _MEM[key]
    value = compute()
    with _LOCK:
        return _MEM.setdefault(key, value)


def check_method(method: str) -> None:
    """Refuse a solver method that is not one of `METHODS`."""
    if method not in METHODS:
        raise ValueError(f"unknown solver method {method!r}; expected one of {METHODS}")


def check_index_bytes(rep: Any, size: int) -> None:
    """Refuse a rep of `size` entries whose index arrays (16 bytes an entry: block, copy and place of each) would
    take more than ``LAZY_BASIS_BYTES``; checked before its canonical blocks are built."""
    if 16 * size > LAZY_BASIS_BYTES:
        raise ValueError(
            f"{rep!r} has size {size:,}: the index arrays of its entries take about {16 * size / 1e9:.1f} GB, "
            f"above LAZY_BASIS_BYTES = {LAZY_BASIS_BYTES:,}; use rep.rank(), or raise SYMKIT_LAZY_BASIS_BYTES")


# ---------------------------------------------------------------------------------------------- segments
def _segments(leaves: tuple) -> list[tuple[Group, tuple]]:
    segs: list[tuple[Group, list]] = []
    for leaf in leaves:
        if segs and segs[-1][0] == leaf.G:
            segs[-1][1].append(leaf)
        else:
            segs.append((leaf.G, [leaf]))
    return [(G, tuple(ls)) for G, ls in segs]


def _kinds(G: Group, leaves: tuple) -> list[str] | None:
    """The `slot_kind` of each leaf ("V" or "D"), or None unless every leaf is V or V* of G itself."""
    out = []
    for leaf in leaves:
        kind = leaf.slot_kind
        if kind is None or leaf.G != G:
            return None
        out.append(kind)
    return out


def segment_methods(G: Group, leaves: tuple) -> list[str]:
    """Solver paths that apply to the tensor product of `leaves` (all of group G), best first."""
    kinds = _kinds(G, leaves)
    out = []
    if kinds is not None and G.is_permutation:
        out.append("orbit")
    if kinds is not None and brauer_applicable(G, kinds):
        out.append("brauer")
    if coupling_applicable(G, kinds):
        out.append("coupling")
    out += ["dense", "weight", "iterative"] if len(G.lie_algebra) else ["dense", "iterative"]
    return out


_ZW: dict[tuple, Any] = {}
_ZW_OK: dict[tuple, bool] = {}


def _weight_applicable(G: Group, leaves: tuple) -> bool:
    key = (G._key(), tuple(x._key() for x in leaves))
    if key not in _ZW_OK:
        _ZW_OK[key] = _zero_weight_space(G, leaves) is not None
    return _ZW_OK[key]


def _zero_weight_space(G: Group, leaves: tuple) -> np.ndarray | None:
    """Basis K (N, n0) of the kernel of d rho(A) for a generic A = sum_i c_i A_i (fixed seed), or None.

    With A_f = U_f diag(w_f) U_f^{-1} per leaf, d rho(A) is diagonalised by ⊗ U_f with eigenvalues the sums of the
    w_f: its kernel is spanned by the Kronecker columns whose eigenvalues sum to zero (the zero-weight space of a
    torus containing A). Every invariant lies in it, so the remaining constraints only need solving inside it.
    """
    key = (G._key(), tuple(x._key() for x in leaves))
    if key in _ZW:
        return _ZW[key]
    out = None
    D = len(G.lie_algebra)
    sizes = [leaf.size for leaf in leaves]
    N = int(np.prod(sizes))
    if D:
        c = np.random.default_rng(12345).standard_normal(D)
        A = np.einsum("k,kij->ij", c.astype(G.lie_algebra.dtype), np.asarray(G.lie_algebra))
        ws, Us, unitary = [], [], True
        ok = True
        for leaf in leaves:
            Af = leaf.drho(A)
            w, U = np.linalg.eig(Af)
            if np.linalg.cond(U) > 1e8:
                ok = False
                break
            unitary = unitary and np.allclose(U.conj().T @ U, np.eye(len(w)), atol=1e-10)
            ws.append(w)
            Us.append(U)
        if ok:
            tot = np.zeros(1, dtype=complex)
            for w in ws:
                tot = (tot[:, None] + w[None, :]).reshape(-1)
            scale = sum(np.abs(w).max() for w in ws) or 1.0
            sel = np.nonzero(np.abs(tot) <= 1e-8 * scale)[0]
            n0 = len(sel)
            if n0 == 0:
                out = np.zeros((N, 0), dtype=complex)
            elif n0 <= WEIGHT_MAX and N * n0 <= 1e7:
                idx = np.unravel_index(sel, sizes)
                K = np.ones((1, n0), dtype=complex)
                for U, i in zip(Us, idx):
                    K = (K[:, None, :] * U[:, i][None, :, :]).reshape(-1, n0)
                if not unitary and n0:
                    K = np.linalg.qr(K)[0]
                else:
                    K = K / np.linalg.norm(K, axis=0, keepdims=True) if n0 else K
                out = K
    _ZW[key] = out
    return out


def _weight_nullspace(G: Group, leaves: tuple) -> np.ndarray:
    """Invariants solved inside the zero-weight space: the constraints restricted to K, then a dense eigensolve."""
    K = _zero_weight_space(G, leaves)
    _ZW.pop((G._key(), tuple(x._key() for x in leaves)), None)  # K can be large: do not keep it
    N, n0 = K.shape
    if n0 == 0:
        return np.zeros((N, 0), dtype=G.dtype)
    cons, _, dtype = _constraints(G, leaves, lazy=True)
    Hr = np.zeros((n0, n0), dtype=complex)
    for C in cons:
        M = C.matmat(K)
        Hr += M.conj().T @ M
    Hr = (Hr + Hr.conj().T) / 2
    w, Y = np.linalg.eigh(Hr)
    scale = max(1.0, float(np.abs(w).max()))
    Q = K @ Y[:, w <= 1e-10 * scale]
    if np.issubdtype(np.dtype(dtype), np.complexfloating):
        return np.ascontiguousarray(orthonormal_range(Q, 1e-6))
    # real constraints: the complex nullspace is closed under conjugation, so Re and Im span it over R
    return np.ascontiguousarray(orthonormal_range(np.concatenate([Q.real, Q.imag], axis=1), 1e-6))


#: above this many spanning diagrams the Brauer path (a dense n^k x diagrams matrix and its Gram matrix) gives way to
#: the weight path where that applies
BRAUER_MAX_DIAGRAMS = 2000


def _many_diagrams(G: Group, leaves: tuple) -> bool:
    return len(brauer_diagrams(G, _kinds(G, leaves))) > BRAUER_MAX_DIAGRAMS


def _pick(G: Group, leaves: tuple, method: str) -> str:
    check_method(method)
    ok = segment_methods(G, leaves)
    if method == "auto":
        if "coupling" in ok and len(leaves) >= COUPLING_MIN_SLOTS:
            return "coupling"
        if ok[0] == "brauer" and _many_diagrams(G, leaves) and _weight_applicable(G, leaves):
            return "weight"  # e.g. SO+(1,1) T(5,5): 5,670 diagrams take 41 s, the zero-weight space 0.1 s
        if ok[0] in ("orbit", "brauer"):
            return ok[0]
        size = int(np.prod([leaf.size for leaf in leaves]))
        if size <= DENSE_MAX:
            return "dense"
        return "weight" if _weight_applicable(G, leaves) else "iterative"
    if method == "weight" and not _weight_applicable(G, leaves):
        raise ValueError(
            f"solver method 'weight' does not apply to {'⊗'.join(map(repr, leaves))} of {G}: it needs a Lie algebra "
            f"whose generic element is diagonalisable and a zero-weight space of at most {WEIGHT_MAX} dimensions"
        )
    if method not in ok:
        raise ValueError(
            f"solver method {method!r} does not apply to {'⊗'.join(map(repr, leaves))} of {G}; applicable: {ok}"
        )
    return method


# ---------------------------------------------------------------------------------------------- constraints
def _constraints(G: Group, leaves: tuple, lazy: bool) -> tuple[list, int, type]:
    sizes = [leaf.size for leaf in leaves]
    N = int(np.prod(sizes))
    gens = [[leaf.rho(h) for leaf in leaves] for h in G.discrete_generators]
    algs = [[leaf.drho(A) for leaf in leaves] for A in G.lie_algebra]
    cplx = G.is_complex or any(np.iscomplexobj(m) for ms in gens + algs for m in ms)
    dtype = np.complex128 if cplx else np.float64
    cons: list = []
    for ms in gens:
        if lazy:
            cons.append(aslinearoperator(KronOp(ms)) - aslinearoperator(sp.identity(N, dtype=dtype, format="csr")))
        else:
            K = sp.csr_matrix(np.ones((1, 1)))
            for m in ms:
                m = np.where(np.abs(m) < 1e-14, 0, m)
                K = sp.kron(K, sp.csr_matrix(m), format="csr")
            C = (K - sp.identity(N, format="csr")).tocsr()
            C.eliminate_zeros()
            cons.append(C)
    for ms in algs:
        if not any(np.any(m) for m in ms):
            continue
        if lazy:
            cons.append(KronSumOp(ms))
        else:
            from symkit.linalg.operators import kronsum_sparse

            cons.append(kronsum_sparse([np.where(np.abs(m) < 1e-14, 0, m) for m in ms]))
    return cons, N, dtype


def _disk_key(G: Group, leaves: tuple, method: str, what: str) -> str:
    return cache_key(what, method, G.fingerprint(), G.name, "|".join(repr(x) + str(x.size) for x in leaves))


#: finite groups of at most this many elements have the ranks of their cached bases checked by characters
CHARACTER_MAX_ORDER = 50_000
#: ... and at most this many when a slot is not V or V* (its character takes one call of its rho per element)
CUSTOM_CHARACTER_MAX_ORDER = 2_000


def _character_rank(G: Group, leaves: tuple) -> int | None:
    """The block's rank for a finite group as the mean over its elements of the character, the product of the
    slots' traces; None for a group too large to enumerate (or a mean that is not clearly an integer)."""
    plain = all(x.slot_kind is not None for x in leaves)
    cap = CHARACTER_MAX_ORDER if plain else CUSTOM_CHARACTER_MAX_ORDER
    if G.is_permutation:
        if G.order() > cap or G.order() * G.d**2 > 1 << 22:  # elements() holds dense d x d matrices
            return None
    else:
        for h in G.discrete_generators:  # an element of finite order is diagonalisable with eigenvalues on the
            w, U = np.linalg.eig(h)  # unit circle: a quick no for most infinite groups, before enumerating
            if np.abs(np.abs(w) - 1).max() > 1e-8 or np.linalg.cond(U) > 1e8:
                return None
        if not G.is_finite:
            return None
    try:
        E = np.asarray(G.elements(max_order=max(cap, 50_000)))  # the enumeration that `is_finite` keeps
    except ValueError:
        return None
    if len(E) > cap:
        return None
    chi = np.ones(len(E), dtype=complex)
    traces: dict = {}
    for leaf in leaves:
        key = leaf._key()
        if key not in traces:
            if leaf.slot_kind == "V":
                traces[key] = np.trace(E, axis1=1, axis2=2)
            elif leaf.slot_kind == "D":
                traces[key] = np.trace(np.linalg.inv(E), axis1=1, axis2=2)
            else:
                traces[key] = np.array([np.trace(leaf.rho(g)) for g in E])
        chi = chi * traces[key]
    mean = complex(chi.mean())
    r = round(mean.real)
    if abs(mean - r) > 1e-6 * max(1.0, abs(mean)) or r < 0:
        return None
    return int(r)


def _independent_rank(G: Group, leaves: tuple) -> int | None:
    """The rank of a block counted without solving for it, or None where symkit knows no such count: coupling
    paths (SO(3), O(3)), tuple orbits (permutation groups), the Schur-Weyl count (groups with Brauer metadata),
    the mean character (other finite groups). Kept in the memory cache."""
    key = (G._key(), tuple(x._key() for x in leaves), "count")
    with _LOCK:
        if key in _MEM:
            return _MEM[key]
    kinds = _kinds(G, leaves)
    res = None
    try:
        if kinds is not None and coupling_applicable(G, kinds):
            res = coupled_rank(G, len(leaves))
        elif kinds is not None and G.is_permutation:
            res = orbit_count(G.perm_generators, len(leaves), order=G.order())
        elif kinds is not None and brauer_applicable(G, kinds):
            res = classical_rank(G, kinds)
        elif len(G.lie_algebra) == 0:
            res = _character_rank(G, leaves)
    except ValueError:  # too large to count (orbit labels above ORBIT_MAX_BYTES)
        res = None
    with _LOCK:
        _MEM[key] = res
    return res


def _valid_cached_basis(G: Group, leaves: tuple, method: str, Q: np.ndarray, rank: int | None,
                        tol: float = 1e-7) -> bool:
    """Whether a basis read from (or about to be written to) the disk cache is the block's: the block's dtype and
    row count, exactly `rank` columns (`_independent_rank`; None rejects every entry), orthonormal, fixed by every
    discrete generator and killed by every Lie algebra generator (relative to the size of the generators' reps).
    A subset of the invariants fails the rank, anything else the equivariance. Much cheaper than solving."""
    if rank is None or not isinstance(Q, np.ndarray):
        return False
    N = int(np.prod([x.size for x in leaves]))
    gens = [[leaf.rho(h) for leaf in leaves] for h in G.discrete_generators]
    algs = [[leaf.drho(A) for leaf in leaves] for A in G.lie_algebra]
    cplx = G.is_complex or any(np.iscomplexobj(m) for ms in gens + algs for m in ms)
    want_dtype = np.complex128 if cplx and method != "brauer" else np.float64
    if Q.ndim != 2 or Q.shape != (N, rank) or Q.dtype != want_dtype:
        return False
    if rank == 0:
        return True
    if np.abs(Q.conj().T @ Q - np.eye(Q.shape[1])).max() > tol:
        return False
    rms = float(np.sqrt(np.mean(np.abs(Q) ** 2)))
    for ms in gens:
        KQ = KronOp(ms).matmat(Q)
        if np.sqrt(np.mean(np.abs(KQ - Q) ** 2)) > tol * rms * float(np.prod([np.linalg.norm(m, 2) for m in ms])):
            return False
    for ms in algs:
        AQ = KronSumOp(ms).matmat(Q)
        if np.sqrt(np.mean(np.abs(AQ) ** 2)) > tol * rms * max(1.0, sum(np.linalg.norm(m, 2) for m in ms)):
            return False
    return True


def _solve_segment(G: Group, leaves: tuple, method: str, want: str) -> Any:
    """want='basis' -> Q (dense ndarray or sparse); want='rank' -> int."""
    m = _pick(G, leaves, method)
    if want == "rank" and method == "auto" and coupling_applicable(G, _kinds(G, leaves)):
        m = "coupling"  # an exact count of coupling paths, instant at any order (the Brauer Gram rank is not)
    key = (G._key(), tuple(x._key() for x in leaves), m, want)
    with _LOCK:
        if key in _MEM:
            return _MEM[key]
    if want == "rank":
        if m == "orbit":
            res: Any = orbit_count(G.perm_generators, len(leaves), order=G.order())
        elif m == "coupling":
            res = coupled_rank(G, len(leaves))
        elif m == "brauer":  # a cached rank is used only when it equals the closed-form (Schur-Weyl) count
            dk = _disk_key(G, leaves, m, "rank")
            hit = cache_get(dk)
            if hit is not None and hit.shape == (1,) and hit.dtype == np.int64 and (
                    int(hit[0]) == _independent_rank(G, leaves)):
                res = int(hit[0])
            else:
                if hit is not None:
                    cache_discard(dk)
                t0 = time.perf_counter()
                res = brauer_rank(G, _kinds(G, leaves))
                if time.perf_counter() - t0 > DISK_CACHE_MIN_SECONDS and res == _independent_rank(G, leaves):
                    cache_put(dk, np.array([res], dtype=np.int64))
        else:
            res = _solve_segment(G, leaves, m, "basis").shape[1]
    else:
        if m == "orbit":
            res = orbit_basis(G.perm_generators, len(leaves))
        elif m == "coupling":  # exact, orthonormal, cheap to build: lazy, made dense only where a matrix is needed
            res = coupled_invariants(G, len(leaves))
        else:
            dk = _disk_key(G, leaves, m, "basis")
            hit = cache_get(dk)
            if hit is not None and _valid_cached_basis(G, leaves, m, hit, _independent_rank(G, leaves)):
                res = hit
            else:
                if hit is not None:
                    cache_discard(dk)
                t0 = time.perf_counter()
                if m == "brauer":
                    res = brauer_basis(G, _kinds(G, leaves))
                elif m == "dense":
                    cons, N, dtype = _constraints(G, leaves, lazy=False)
                    res = dense_nullspace(cons, N, dtype)
                elif m == "weight":
                    res = _weight_nullspace(G, leaves)
                else:
                    cons, N, dtype = _constraints(G, leaves, lazy=True)
                    res = iterative_nullspace(cons, N, dtype)
                # stored only when it passes the checks a read applies (so no block without a count is stored)
                if time.perf_counter() - t0 > DISK_CACHE_MIN_SECONDS and _valid_cached_basis(
                        G, leaves, m, res, _independent_rank(G, leaves)):
                    cache_put(dk, res)
    with _LOCK:
        _MEM[key] = res
    return res


def _block_basis(leaves: tuple, method: str) -> Any:
    if not leaves:
        return np.ones((1, 1))
    Q: Any = None
    for G, ls in _segments(leaves):
        q = _solve_segment(G, ls, method, "basis")
        if isinstance(q, LinearOperator) and len(leaves) > len(ls):
            raise ValueError(f"the basis of {'⊗'.join(map(repr, ls))} is held lazily ({_gb(q)} dense); its "
                             "Kronecker product with the other groups' factors is not supported")
        if Q is None:
            Q = q
        elif sp.issparse(Q) or sp.issparse(q):
            Q = sp.kron(sp.csr_matrix(Q), sp.csr_matrix(q), format="csc")
        else:
            Q = np.kron(Q, q)
    return Q


def _block_rank(leaves: tuple, method: str) -> int:
    if not leaves:
        return 1
    r = 1
    for G, ls in _segments(leaves):
        r *= int(_solve_segment(G, ls, method, "rank"))
        if r == 0:
            return 0
    return r


def _gb(Q: Any) -> str:
    return f"{Q.nbytes / 1e9:.1f} GB"


def dense_block(Q: Any, what: str = "dense") -> Any:
    """A block's basis as an array or sparse matrix: a lazy coupling block is made dense (once; it keeps the matrix)
    when that takes at most ``LAZY_BASIS_BYTES``, and refused with a clear error otherwise."""
    if isinstance(Q, LinearOperator):
        if Q.nbytes <= LAZY_BASIS_BYTES:
            return Q.to_dense()
        raise ValueError(
            f"the {what} basis has a block of {Q.shape[0]:,} x {Q.shape[1]:,} held as a lazy operator ({_gb(Q)} as a "
            f"dense float64 matrix, above LAZY_BASIS_BYTES = {LAZY_BASIS_BYTES:,}); use rep.rank(), "
            "rep.equivariant_projector() or rep.structured_basis() (its blocks apply with @), or raise "
            "SYMKIT_LAZY_BASIS_BYTES")
    return Q


def dense_array(Q: Any, what: str = "dense") -> np.ndarray:
    """A block's basis as a dense numpy array (:func:`dense_block`, then a sparse block made dense)."""
    Q = dense_block(Q, what)
    return Q.toarray() if sp.issparse(Q) else np.asarray(Q)


def object_index(blocks: list[Block], size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per entry of a rep of ``size`` numbers laid out in ``blocks`` (its canonical blocks): the block it belongs to,
    its copy within the block, and its place within the copy."""
    block_of, copy_of, local_of = (np.full(size, -1, dtype=np.int64) for _ in range(3))
    for b, blk in enumerate(blocks):
        block_of[blk.pos] = b
        copy_of[blk.pos] = np.arange(blk.pos.shape[0])[:, None]
        local_of[blk.pos] = np.arange(blk.pos.shape[1])[None, :]
    return block_of, copy_of, local_of


# ---------------------------------------------------------------------------------------------- assembled bases
@dataclass
class StructuredBasis:
    """Q of a whole rep, kept as one small basis per distinct block plus the positions of every copy.

    `parts` holds (pos (m, s), Q_b (s, r_b)); the full Q has, for copy c of block b, the rows pos[c] filled with Q_b.
    Q_b is an array, a sparse matrix or (coupling blocks) a lazy ``LinearOperator``: ``project`` applies all three
    as they are; ``to_dense`` / ``to_sparse`` make a lazy block dense up to ``LAZY_BASIS_BYTES`` and refuse larger
    ones with a clear error.
    """

    size: int
    parts: list[tuple[np.ndarray, Any]]
    dtype: type

    @property
    def rank(self) -> int:
        return int(sum(pos.shape[0] * Q.shape[1] for pos, Q in self.parts))

    def to_dense(self) -> np.ndarray:
        parts = [(pos, dense_block(Q, "dense")) for pos, Q in self.parts]
        if len(parts) == 1:  # one block copy in natural order (a plain tensor power): a read-only view of
            pos, Q = parts[0]  # the cached block, no copy (copy it to modify it)
            if (pos.shape[0] == 1 and not sp.issparse(Q) and Q.dtype == self.dtype and Q.flags.c_contiguous
                    and np.array_equal(pos[0], np.arange(self.size))):
                view = Q.view()
                view.flags.writeable = False
                return view
        out = np.zeros((self.size, self.rank), dtype=self.dtype)
        off = 0
        for pos, Q in parts:
            m, r = pos.shape[0], Q.shape[1]
            if r == 0:
                continue
            Qd = Q.toarray() if sp.issparse(Q) else Q
            if m <= 64:  # copy by rows into a column slice per copy (no index array of Q's size)
                for c in range(m):
                    rows = pos[c]
                    block = slice(off + c * r, off + (c + 1) * r)
                    if rows.shape[0] == self.size and np.array_equal(rows, np.arange(self.size)):
                        out[:, block] = Qd
                    else:
                        out[rows, block] = Qd
            else:
                cols = off + np.arange(m * r).reshape(m, r)
                out[pos[:, :, None], cols[:, None, :]] = Qd[None, :, :]
            off += m * r
        return out

    def to_sparse(self) -> sp.csc_matrix:
        rows, cols, vals = [], [], []
        off = 0
        for pos, Q in ((pos, dense_block(Q, "sparse")) for pos, Q in self.parts):
            m, r = pos.shape[0], Q.shape[1]
            if r == 0:
                continue
            Qc = sp.coo_matrix(Q)
            for c in range(m):
                rows.append(pos[c][Qc.row])
                cols.append(off + c * r + Qc.col)
                vals.append(Qc.data)
            off += m * r
        if not rows:
            return sp.csc_matrix((self.size, 0), dtype=self.dtype)
        return sp.csc_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(self.size, self.rank)
        )

    def project(self, X: np.ndarray) -> np.ndarray:
        """P X = Q Q^H X for X of shape (size,) or (size, k), block by block."""
        X = np.asarray(X)
        vec = X.ndim == 1
        X2 = X[:, None] if vec else X
        if X2.shape[0] != self.size:
            raise ValueError(f"projector of size {self.size} applied to an array with {X2.shape[0]} rows")
        out = np.zeros(X2.shape, dtype=np.result_type(self.dtype, X2.dtype))
        k = X2.shape[1]
        for pos, Q in self.parts:
            if Q.shape[1] == 0:
                continue
            m, s = pos.shape
            xb = X2[pos]  # (m, s, k)
            xb = np.moveaxis(xb, 1, 0).reshape(s, m * k)
            coef = Q.conj().T @ xb
            yb = Q @ coef
            yb = np.asarray(yb).reshape(s, m, k)
            out[pos] = np.moveaxis(yb, 0, 1)
        return out[:, 0] if vec else out


class Projector(LinearOperator):
    """The lazy equivariant projector P = Q Q^H of a rep (apply with ``P @ x``; ``to_dense()`` for the matrix)."""

    def __init__(self, basis: StructuredBasis) -> None:
        self.basis = basis
        super().__init__(dtype=np.dtype(basis.dtype), shape=(basis.size, basis.size))

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return self.basis.project(X)

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        return self.basis.project(np.asarray(x).reshape(-1))

    def _adjoint(self) -> Projector:
        return self

    def to_dense(self) -> np.ndarray:
        return self.basis.project(np.eye(self.shape[0], dtype=self.dtype))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.to_dense()
        return out if dtype is None else out.astype(dtype)


def structured_basis(blocks: list[Block], size: int, method: str = "auto") -> StructuredBasis:
    """The basis of a rep of `size` entries laid out in `blocks` (its canonical blocks) as a StructuredBasis
    (see `Rep.equivariant_basis`)."""
    check_method(method)
    parts = []
    cplx = False
    for b in blocks:
        Q = _block_basis(b.leaves, method)
        cplx = cplx or np.iscomplexobj(Q.data if sp.issparse(Q) else Q)
        parts.append((b.pos, Q))
    return StructuredBasis(size, parts, np.complex128 if cplx else np.float64)


def equivariant_basis(blocks: list[Block], size: int, method: str = "auto", sparse: bool = False) -> Any:
    """The equivariant basis (Eq. 2.3-2.6) of a rep laid out in `blocks`, dense, or scipy-sparse if ``sparse``."""
    sb = structured_basis(blocks, size, method)
    return sb.to_sparse() if sparse else sb.to_dense()


def equivariant_projector(blocks: list[Block], size: int, method: str = "auto") -> Projector:
    """The projector ``Q Q^T`` onto the equivariant subspace of a rep laid out in `blocks`, applied lazily."""
    return Projector(structured_basis(blocks, size, method))


def rank(counts: list[tuple[tuple, int]], method: str = "auto") -> int:
    """Sum over canonical blocks, given as (sorted leaves, multiplicity), of multiplicity x block rank (no basis is
    built for orbit / Brauer blocks)."""
    check_method(method)
    return int(sum(m * _block_rank(lv, method) for lv, m in counts))
