"""Isotypic decomposition: each object type of an orthogonal rep split into irreducible subspaces (Schur's lemma).

An object type ``t`` of a rep (the tensor product of the leaves of one canonical block, eq. 2.8: a ``V``, a
``V (x) V``, ...) whose action is orthogonal splits by an orthogonal change of basis ``P_t`` into irreducible
subspaces: the eigenspaces of a random symmetric element of the type's commutant (the basis of ``t >> t``; ``S +
S^T`` stays in the commutant because the action is orthogonal), each checked irreducible of real type (the
commutant restricted to it is the scalars). Isomorphic subspaces, in one type or in several, are given one basis:
the copy found first is the reference of its class, and every other copy is turned by the orthogonal part of a
random intertwiner from the reference (the basis of ``t >> t'``). On every copy of an irrep ``l`` the action then
reads as the same ``d_l x d_l`` matrices, and an equivariant map between two reps decomposed together is ``sum_l
W_l (x) I_{d_l}`` in these coordinates, one dense ``W_l`` per irrep (what ``EquivariantLinear`` applies for large
layers).

Where this does not hold the answer is None: a rep whose action is not orthogonal (the Lorentz group), an
eigenspace that is not irreducible of real type (SO(2)'s rotations of the plane, whose commutant restricted to them
is 2-dimensional: complex type), or an intertwiner between copies that is not a multiple of an orthogonal matrix.

Memory: the pieces are computed once per process and kept in the solver's memory cache (so
``clear_memory_cache()`` forgets them too), keyed by object type, not by rep:

* per object type, its split (``P_t``, its subspaces, the copies of a class aligned within the type);
* per pair of object types, the orthogonal intertwiners between their classes (for a canonical order of the pair);
* per tuple of reps asked together, the assembled result.

The alignment is a relation between types, not a property of one rep: which copy is a class's reference, and so
the basis every other copy is turned to, depends on all the reps decomposed together (``rep_in`` and ``rep_out`` of a
layer are asked together, as one call). Keyed by type and by pair of types, each piece is computed once whatever
reps it appears in (a hidden rep used by several layers, the hidden types shared by a layer's input and output),
and depends on nothing decomposed before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from symkit.reps import solve as _solve
from symkit.reps.core import ProductRep, Rep, _leaf_sort_key

__all__ = ["TypeDecomposition", "IsotypicDecomposition", "isotypic_decomposition"]

_SEED = 20240229  # the random commutant element and intertwiners; any generic choice gives the same maps to rounding
_TOL = 1e-8  # relative: eigenvalue clusters, zero intertwiners


@dataclass(frozen=True, eq=False)
class TypeDecomposition:
    """One object type (the sorted ``leaves`` of a canonical block) in irreducible coordinates.

    ``P`` (``d x d``, orthogonal, read-only): its columns ``P[:, j:j + d_l]`` for each ``(j, l)`` of ``subspaces``
    (first column, irrep label; in column order, covering all ``d``) span an irreducible subspace on which ``P^T
    rho(g) P`` is the matrix of irrep ``l``, the same for every subspace labelled ``l``."""

    leaves: tuple
    P: np.ndarray
    subspaces: tuple[tuple[int, int], ...]


@dataclass(frozen=True, eq=False)
class IsotypicDecomposition:
    """The object types of some reps split into irreducible subspaces with one basis per irrep (module docstring).

    ``types``: every distinct object type of the reps, in order of first occurrence (the reps in the order asked,
    each in the order of its canonical blocks); ``irrep_dims[l]``: the dimension of irrep ``l``. Labels are numbered
    by first occurrence in that order; each irrep's reference is its first copy."""

    types: tuple[TypeDecomposition, ...]
    irrep_dims: tuple[int, ...]
    _by_key: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_key", {_type_key(t.leaves): t for t in self.types})

    def of(self, leaves: tuple) -> TypeDecomposition:
        """The decomposition of the object type with these (sorted) ``leaves``, as in ``rep.canonical_blocks()``."""
        found = self._by_key.get(_type_key(tuple(leaves)))
        if found is None:
            raise KeyError(f"{'⊗'.join(map(repr, leaves)) or 'Scalar'} is not an object type of the decomposed reps")
        return found


def isotypic_decomposition(rep: Rep, *others: Rep) -> IsotypicDecomposition | None:
    """The object types of ``rep`` (and of ``others``, aligned with them: an irrep has one basis across all the reps
    given) split into irreducible subspaces by orthogonal changes of basis (module docstring, Schur's lemma); None
    where the reps' action is not orthogonal or an irreducible subspace is not of real type.

    Memoised per object type, per pair of types and per tuple of reps (module docstring). The commutant of a type
    of ``d`` numbers is read densely (``d^2`` times its rank): meant for objects of up to a few hundred numbers."""
    reps = (rep, *others)
    for r in reps:
        if not isinstance(r, Rep):
            raise TypeError(f"isotypic_decomposition: expected Reps, got {type(r).__name__}")
    if not all(r.is_orthogonal for r in reps):
        return None
    return _solve.memoised(("isotypic", "reps", tuple(r._key() for r in reps)), lambda: _assemble(reps))


# ----------------------------------------------------------------------------------------------- memory
def _type_key(leaves: tuple) -> tuple:
    return tuple(x._key() for x in leaves)


def _type_order(leaves: tuple) -> tuple:
    """A total order of object types that does not depend on the reps they come from (the pair cache's order)."""
    return (len(leaves), [_leaf_sort_key(x) for x in leaves])


class _NoRealSplit(Exception):
    """An eigenspace is not irreducible of real type, or an intertwiner is not a multiple of an orthogonal map."""


# ----------------------------------------------------------------------------------------------- one type
@dataclass(frozen=True, eq=False)
class _TypeSplit:
    """A type's irreducible subspaces, classes numbered within the type: ``subspaces`` as (first column, class),
    ``dims`` per class, copies of a class aligned with its first copy."""

    P: np.ndarray
    subspaces: tuple[tuple[int, int], ...]
    dims: tuple[int, ...]

    def reference(self, cls: int) -> np.ndarray:
        """The basis of the first copy of class ``cls``."""
        j = next(j for j, c in self.subspaces if c == cls)
        return self.P[:, j:j + self.dims[cls]]


def _leaf_rep(leaves: tuple) -> Rep:
    return leaves[0] if len(leaves) == 1 else ProductRep(list(leaves))


def _hom_matrices(src: tuple, dst: tuple) -> np.ndarray:
    """A basis of the equivariant maps from object type ``src`` to ``dst`` as matrices ``(r, d_dst, d_src)``."""
    a, b = _leaf_rep(src), _leaf_rep(dst)
    H = _solve.dense_array((a >> b).equivariant_basis()).T.reshape(-1, b.size, a.size)
    if np.iscomplexobj(H):
        raise _NoRealSplit
    return H


def _orthogonal_part(T: np.ndarray, U_to: np.ndarray, U_from: np.ndarray) -> np.ndarray | None:
    """``O`` with ``U_to O`` carrying the action ``U_from`` carries, from the intertwiner ``T`` restricted to the two
    subspaces (``c O``, ``c > 0``, when they are isomorphic irreps of real type), or None where it is zero."""
    M = U_to.T @ T @ U_from
    c = np.sqrt(np.trace(M.T @ M) / M.shape[0])
    if c <= _TOL * max(np.abs(T).max(initial=0.0), 1.0):
        return None
    O = M / c
    if not np.allclose(O.T @ O, np.eye(O.shape[0]), atol=1e-7):
        raise _NoRealSplit
    return O


def _split_type(leaves: tuple) -> _TypeSplit | None:
    """The eigenspaces of a random symmetric element of the type's commutant, each checked irreducible of real type
    and aligned with the first copy of its class in the type (uncached: see :func:`_type_split`)."""
    try:
        C = _hom_matrices(leaves, leaves)  # the commutant
        rng = np.random.default_rng(_SEED)
        S = np.tensordot(rng.standard_normal(C.shape[0]), C, axes=1)
        S = S + S.T  # symmetric and, the action being orthogonal, still in the commutant
        T = np.tensordot(rng.standard_normal(C.shape[0]), C, axes=1)  # a generic self-intertwiner
        w, U = np.linalg.eigh(S)
        scale = max(np.abs(w).max(initial=0.0), 1.0)
        cuts = np.flatnonzero(np.diff(w) > _TOL * 1e3 * scale) + 1
        columns, subspaces, dims, references, start = [], [], [], [], 0
        for sub in np.split(np.arange(C.shape[1]), cuts):
            Ub = U[:, sub]
            # irreducible and of real type: the commutant restricted to it is the scalars
            R = np.stack([Ub.T @ c @ Ub for c in C]).reshape(len(C), -1)
            if np.linalg.matrix_rank(R, tol=_TOL * 1e3 * max(np.abs(R).max(initial=0.0), 1.0)) != 1:
                return None
            cls, aligned = len(dims), Ub
            for k, ref in enumerate(references):
                O = _orthogonal_part(T, Ub, ref) if ref.shape[1] == Ub.shape[1] else None
                if O is not None:
                    cls, aligned = k, Ub @ O
                    break
            if cls == len(dims):
                dims.append(Ub.shape[1])
                references.append(Ub)
            columns.append(aligned)
            subspaces.append((start, cls))
            start += Ub.shape[1]
    except _NoRealSplit:
        return None
    P = np.concatenate(columns, axis=1)
    P.flags.writeable = False
    return _TypeSplit(P, tuple(subspaces), tuple(dims))


def _type_split(leaves: tuple) -> _TypeSplit | None:
    return _solve.memoised(("isotypic", "type", _type_key(leaves)), lambda: _split_type(leaves))


# ----------------------------------------------------------------------------------------------- pairs of types
def _align_pair(first: tuple, second: tuple) -> dict[tuple[int, int], np.ndarray] | None:
    """``{(a, b): O}`` for each class ``a`` of type ``first`` isomorphic to class ``b`` of type ``second``: the
    reference of ``b`` turned by ``O`` carries the action of the reference of ``a`` (uncached: see
    :func:`_intertwiners`)."""
    sa, sb = _type_split(first), _type_split(second)
    pairs = [(a, b) for a, da in enumerate(sa.dims) for b, db in enumerate(sb.dims) if da == db]
    if not pairs:
        return {}
    try:
        H = _hom_matrices(first, second)
        if H.shape[0] == 0:
            return {}
        T = np.tensordot(np.random.default_rng(_SEED).standard_normal(H.shape[0]), H, axes=1)
        out = {}
        for a, b in pairs:
            O = _orthogonal_part(T, sb.reference(b), sa.reference(a))
            if O is not None:
                O.flags.writeable = False
                out[(a, b)] = O
        return out
    except _NoRealSplit:
        return None


def _intertwiners(src: tuple, dst: tuple) -> dict[tuple[int, int], np.ndarray] | None:
    """:func:`_align_pair` of ``(src, dst)``, computed once per pair in the canonical order of the two types (the
    other order is its transpose), so the answer does not depend on which order was asked first."""
    if _type_order(dst) < _type_order(src):
        found = _intertwiners(dst, src)
        return None if found is None else {(a, b): O.T for (b, a), O in found.items()}
    key = ("isotypic", "pair", _type_key(src), _type_key(dst))
    return _solve.memoised(key, lambda: _align_pair(src, dst))


# ----------------------------------------------------------------------------------------------- assembly
def _assemble(reps: tuple) -> IsotypicDecomposition | None:
    """The types of ``reps`` in order of first occurrence, each class matched against the irreps found so far
    (the first copy of an irrep is its reference) and its copies turned to the reference's basis."""
    types, seen = [], set()
    for r in reps:
        for blk in r.canonical_blocks():
            key = _type_key(blk.leaves)
            if key not in seen:
                seen.add(key)
                types.append(blk.leaves)
    splits = [_type_split(leaves) for leaves in types]
    if any(s is None for s in splits):
        return None
    references: list[tuple[int, int]] = []  # per irrep: (type index, class within the type) of its first copy
    dims: list[int] = []
    out = []
    for t, (leaves, split) in enumerate(zip(types, splits)):
        P = np.array(split.P)
        labels = []
        for cls, d in enumerate(split.dims):
            label = None
            for lab, (t0, c0) in enumerate(references):
                if dims[lab] != d or t0 == t:  # classes of one type are distinct
                    continue
                pair = _intertwiners(types[t0], leaves)
                if pair is None:
                    return None
                O = pair.get((c0, cls))
                if O is not None:
                    for j, c in split.subspaces:
                        if c == cls:
                            P[:, j:j + d] = P[:, j:j + d] @ O
                    label = lab
                    break
            if label is None:
                references.append((t, cls))
                dims.append(d)
                label = len(dims) - 1
            labels.append(label)
        P.flags.writeable = False
        out.append(TypeDecomposition(leaves, P, tuple((j, labels[c]) for j, c in split.subspaces)))
    return IsotypicDecomposition(tuple(out), tuple(dims))
