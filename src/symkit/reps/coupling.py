"""Invariant tensors of SO(3) and O(3) by angular-momentum coupling, kept as sparse factors (no dense 3^k x r basis).

Coupling one slot at a time, ``V^{⊗n} = V^{⊗(n-1)} ⊗ V`` and ``D_l ⊗ D_1 = D_{l-1} ⊕ D_l ⊕ D_{l+1}`` (``D_0 ⊗ D_1 =
D_1``), so ``V^{⊗n}`` is the orthogonal sum, over paths ``(l_1 = 1, l_2, ..., l_n)`` with steps of at most one (and
``0 -> 1`` only), of copies of the real irrep ``D_{l_n}``. The invariants of ``V^{⊗k}`` are the paths that end at
``l_k = 0``: as many as the Riordan number ``R_k`` (1, 0, 1, 1, 3, 6, 15, 36, 91, 232, 603, 1585, 4213, ...).

The change of basis is ``U_n = (U_{n-1} ⊗ I_3) B_n``, ``B_n`` block diagonal with one orthogonal block per path of
length ``n - 1``: the ``3(2l'+1)``-square matrix ``C_{l'}`` taking ``D_{l'-1} ⊕ D_{l'} ⊕ D_{l'+1}`` (in canonical
bases) into ``D_{l'} ⊗ D_1``. The invariant basis ``Q_k`` is the columns of ``U_k`` of the paths ending at 0, so it
is orthonormal by construction and applied to coefficients (or its transpose to a tensor) in ``O(k 3^k l_max)``
operations per column, level by level; paths that cannot return to 0 in the slots left are never visited.

Canonical bases: ``D_1`` is ``V`` itself (the group's own generators), ``D_l`` for ``l >= 2`` is the top component of
``D_{l-1} ⊗ D_1`` in the orthonormal eigenbasis LAPACK returns for the Casimir, and every other component is mapped
onto the canonical ``D_l`` by the intertwiner Schur's lemma makes unique up to sign. O(3) = SO(3) x {±I}: its
invariants are SO(3)'s for even ``k`` and none for odd ``k``. Duals are the rep itself (orthogonal groups).
"""

from __future__ import annotations

from functools import cache

import numpy as np
from scipy.sparse.linalg import LinearOperator

__all__ = ["CoupledInvariants", "coupled_invariants", "coupled_rank", "coupling_applicable", "coupling_rank"]

#: columns synthesised at once by :meth:`CoupledInvariants.to_dense` (bounds the working memory to a few times
#: ``3^k x COLUMN_CHUNK`` floats)
COLUMN_CHUNK = 256


def coupling_applicable(G: object, kinds: list[str] | None) -> bool:
    """Whether ``G`` is the built-in SO(3) or O(3) and every slot is V or V* of it."""
    from symkit.groups.builtin import SO, O

    return kinds is not None and type(G) in (SO, O) and G.d == 3


def _is_o3(G: object) -> bool:
    from symkit.groups.builtin import O

    return type(G) is O


def _children(lp: int) -> list[int]:
    """Spins of ``D_{l'} ⊗ D_1``, in the order of the columns of ``C_{l'}``."""
    return [1] if lp == 0 else [lp - 1, lp, lp + 1]


def _paths(k: int) -> list[np.ndarray]:
    """Final ``l`` of every path kept at each level ``n = 1..k`` (prefix-major, then ``l``): those with
    ``l_n <= k - n`` can still return to 0, so the last level holds exactly the invariant paths."""
    levels = [np.array([1])] if k >= 1 else []
    for n in range(2, k + 1):
        kids = [l for lp in levels[-1].tolist() for l in _children(lp) if l <= k - n]
        levels.append(np.array(kids, dtype=np.int64))
    return levels


def _dim(level: np.ndarray) -> int:
    return int((2 * level + 1).sum())


def coupling_rank(k: int, o3: bool = False) -> int:
    """Number of invariants of SO(3) (or O(3)) in ``V^{⊗k}``: the Riordan number ``R_k`` (0 for O(3), odd ``k``)."""
    if k == 0:
        return 1
    if o3 and k % 2:
        return 0
    return int(_paths(k)[-1].shape[0]) if k > 1 else 0


def _casimir(gens: np.ndarray) -> np.ndarray:
    return -sum(g @ g for g in gens)


def _intertwiner(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """The orthogonal ``T`` with ``A_i T = T B_i`` for every generator (unique up to sign for an irrep)."""
    n = B.shape[1]
    eye = np.eye(n)
    # column-major vec: vec(A T - T B) = (I ⊗ A - B^T ⊗ I) vec(T)
    M = np.concatenate([np.kron(eye, a) - np.kron(b.T, eye) for a, b in zip(A, B)])
    _, s, vt = np.linalg.svd(M)
    if s[-1] > 1e-9 * max(1.0, s[0]) or (n > 1 and s[-2] < 1e-6 * max(1.0, s[0])):
        raise ArithmeticError("coupling: no unique intertwiner between a component and its canonical irrep")
    T = vt[-1].reshape(n, n, order="F")
    return T / np.sqrt((T.T @ T)[0, 0])


@cache
def _irreps_and_couplings(gens_key: bytes, l_max: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Canonical generators ``L[l]`` (3, 2l+1, 2l+1) for ``l <= l_max + 1`` and the coupling matrices ``C[l']`` for
    ``l' <= l_max`` (columns: canonical ``D_{l'-1}``, ``D_{l'}``, ``D_{l'+1}`` coordinates; rows: ``(a, j)``)."""
    V = np.frombuffer(gens_key, dtype=np.float64).reshape(3, 3, 3)
    scale = float(np.trace(_casimir(V))) / 6.0  # Casimir of D_1 is 2 * scale (1 for the standard generators)
    L = [np.zeros((3, 1, 1)), V.copy()]
    C = [np.eye(3)]
    for lp in range(1, l_max + 1):
        G = np.stack([np.kron(L[lp][i], np.eye(3)) + np.kron(np.eye(2 * lp + 1), V[i]) for i in range(3)])
        w, S = np.linalg.eigh(_casimir(G))
        cols = []
        for l in (lp - 1, lp, lp + 1):
            sel = np.abs(w - scale * l * (l + 1)) < 1e-6 * max(1.0, scale * (lp + 2) ** 2)
            if sel.sum() != 2 * l + 1:
                raise ArithmeticError(f"coupling: D_{lp} x D_1 has {sel.sum()} dimensions of spin {l}")
            Sl = S[:, sel]
            if l == lp + 1:
                if len(L) == lp + 1:  # the canonical basis of D_{lp+1}: this component, as LAPACK returns it
                    L.append(np.stack([Sl.T @ g @ Sl for g in G]))
                cols.append(Sl)
            else:
                cols.append(Sl @ _intertwiner(np.stack([Sl.T @ g @ Sl for g in G]), L[l]))
        C.append(np.concatenate(cols, axis=1))
    return L, C


class CoupledInvariants(LinearOperator):
    """The orthonormal basis ``Q`` (``3^k x R_k``) of the invariants of ``V^{⊗k}`` under SO(3) or O(3), as a lazy
    operator: ``Q @ c`` synthesises tensors, ``Q.T @ x`` (``rmatmat``) reads coefficients, :meth:`to_dense` builds
    the matrix in column chunks. Rows in ``np.kron`` order (last slot fastest), as every symkit basis."""

    def __init__(self, generators: np.ndarray, k: int, o3: bool = False) -> None:
        self.k = int(k)
        self.levels = _paths(self.k) if self.k else []
        r = coupling_rank(self.k, o3)
        if r and self.k > 1:
            gens = np.ascontiguousarray(generators, dtype=np.float64)
            l_max = max(int(lv.max()) for lv in self.levels)
            self.C = _irreps_and_couplings(gens.tobytes(), l_max)[1]
            self._plan = [self._level_plan(n) for n in range(2, self.k + 1)]
        super().__init__(dtype=np.dtype(np.float64), shape=(3**self.k, r))

    def _level_plan(self, n: int) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
        """For level ``n``, per parent spin ``l'``: ``(l', rows of Y = B_n Z_n, rows of Z_n, columns of C_{l'})``,
        one row of the index arrays per parent path (``Y`` indexed by (parent coordinate, slot ``n``))."""
        prev, cur = self.levels[n - 2], self.levels[n - 1]
        off_prev = np.concatenate([[0], np.cumsum(2 * prev + 1)])
        off_cur = np.concatenate([[0], np.cumsum(2 * cur + 1)])
        groups: dict[int, tuple[list, list]] = {}
        child = 0
        for p, lp in enumerate(prev.tolist()):
            kids = [l for l in _children(lp) if l <= self.k - n]
            if not kids:  # a dead end (l' = 0 with one slot left): nothing of it reaches the invariants
                continue
            rows_y, rows_z = groups.setdefault(lp, ([], []))
            rows_y.append(3 * off_prev[p] + np.arange(3 * (2 * lp + 1)))
            rows_z.append(off_cur[child] + np.arange(sum(2 * l + 1 for l in kids)))
            child += len(kids)
        plan = []
        for lp, (rows_y, rows_z) in sorted(groups.items()):
            spins = _children(lp)
            starts = np.concatenate([[0], np.cumsum([2 * l + 1 for l in spins])])
            cols = np.concatenate([starts[i] + np.arange(2 * l + 1) for i, l in enumerate(spins) if l <= self.k - n])
            plan.append((lp, np.stack(rows_y), np.stack(rows_z), cols))
        return plan

    def _trivial(self, X: np.ndarray, rows: int) -> np.ndarray | None:
        """The result for no invariants, no columns or k = 0 (Q = [1]); None otherwise."""
        if self.k == 0:
            return X.copy()
        if self.shape[1] == 0 or X.shape[1] == 0:
            return np.zeros((rows, X.shape[1]))
        return None

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        m = X.shape[1]
        if (done := self._trivial(X, self.shape[0])) is not None:
            return done
        Z, rest = X, m  # the last level: one coordinate per invariant path
        for n in range(self.k, 1, -1):
            Y = np.zeros((3 * _dim(self.levels[n - 2]), rest))
            for lp, rows_y, rows_z, cols in self._plan[n - 2]:
                Y[rows_y] = np.matmul(self.C[lp][:, cols], Z[rows_z])
            rest *= 3
            Z = Y.reshape(-1, rest)  # slot n joins the columns, slower than the slots after it
        return Z.reshape(self.shape[0], m)

    def _rmatmat(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        m = X.shape[1]
        if (done := self._trivial(X, self.shape[1])) is not None:
            return done
        Z, rest = X, m * 3 ** (self.k - 1)
        for n in range(2, self.k + 1):
            rest //= 3
            Y = Z.reshape(-1, rest)  # rows (coordinate of level n - 1, slot n)
            Z = np.zeros((_dim(self.levels[n - 1]), rest))
            for lp, rows_y, rows_z, cols in self._plan[n - 2]:
                Z[rows_z] = np.matmul(self.C[lp][:, cols].T, Y[rows_y])
        return Z.reshape(self.shape[1], m)

    def _rmatvec(self, x: np.ndarray) -> np.ndarray:  # scipy's adjoint and transpose apply it
        return self._rmatmat(np.asarray(x).reshape(-1, 1))[:, 0]

    def conj(self) -> CoupledInvariants:
        """Itself: the basis is real."""
        return self

    @property
    def nbytes(self) -> int:
        """Bytes of the dense float64 matrix."""
        return 8 * self.shape[0] * self.shape[1]

    def to_dense(self) -> np.ndarray:
        """The ``3^k x R_k`` matrix, synthesised ``COLUMN_CHUNK`` columns at a time, kept (read-only) for later
        calls."""
        if getattr(self, "_dense", None) is not None:
            return self._dense
        out = np.empty(self.shape)
        r = self.shape[1]
        for s in range(0, r, COLUMN_CHUNK):
            e = min(r, s + COLUMN_CHUNK)
            eye = np.zeros((r, e - s))
            eye[np.arange(s, e), np.arange(e - s)] = 1.0
            out[:, s:e] = self._matmat(eye)
        out.flags.writeable = False
        self._dense = out
        return out


def coupled_invariants(G: object, k: int) -> CoupledInvariants:
    """The lazy invariant basis of ``V^{⊗k}`` (slots V or V*) of the built-in SO(3) or O(3)."""
    if not coupling_applicable(G, ["V"]):
        raise ValueError(f"the coupling path needs the built-in SO(3) or O(3), got {G}")
    return CoupledInvariants(np.asarray(G.lie_algebra), k, o3=_is_o3(G))


def coupled_rank(G: object, k: int) -> int:
    """The number of invariants of ``V^{⊗k}`` of the built-in SO(3) or O(3), counted without building the basis."""
    if not coupling_applicable(G, ["V"]):
        raise ValueError(f"the coupling path needs the built-in SO(3) or O(3), got {G}")
    return coupling_rank(k, o3=_is_o3(G))
