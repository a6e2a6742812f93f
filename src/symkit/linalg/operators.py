"""Lazy linear operators with structured matrix-vector products (thesis §2.5: (A ⊗ B) vec(W) = vec(A W B^T)).

All are `scipy.sparse.linalg.LinearOperator`s, so they compose with scipy's iterative solvers and never build the
dense (N, N) matrix of a tensor representation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

__all__ = ["KronOp", "KronSumOp", "ConcatOp", "DirectSumOp", "PermOp", "kron_dense", "kronsum_sparse"]


def _apply_factors(mats: Sequence[np.ndarray], X: np.ndarray, which: Sequence[int] | None = None) -> np.ndarray:
    """Apply mats[i] along tensor axis i of X reshaped to (d_1, ..., d_k, ncols)."""
    dims = [m.shape[1] for m in mats]
    ncol = X.shape[1]
    Y = X.reshape(*dims, ncol)
    idx = range(len(mats)) if which is None else which
    for i in idx:
        Y = np.moveaxis(np.tensordot(mats[i], Y, axes=([1], [i])), 0, i)
    return Y.reshape(-1, ncol)


class KronOp(LinearOperator):
    """A_1 ⊗ A_2 ⊗ ... ⊗ A_k applied factor by factor."""

    def __init__(self, mats: Sequence[np.ndarray]) -> None:
        self.mats = [np.asarray(m) for m in mats]
        n = int(np.prod([m.shape[0] for m in self.mats]))
        dt = np.result_type(*self.mats)
        super().__init__(dtype=dt, shape=(n, n))

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return _apply_factors(self.mats, X)

    def _adjoint(self) -> KronOp:
        return KronOp([m.conj().T for m in self.mats])


class KronSumOp(LinearOperator):
    """A_1 ⊕̄ A_2 ⊕̄ ... = sum_i I ⊗ .. ⊗ A_i ⊗ .. ⊗ I (the d rho of a tensor product, Table 2.1)."""

    def __init__(self, mats: Sequence[np.ndarray]) -> None:
        self.mats = [np.asarray(m) for m in mats]
        n = int(np.prod([m.shape[0] for m in self.mats]))
        dt = np.result_type(*self.mats)
        super().__init__(dtype=dt, shape=(n, n))

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        out = None
        for i, m in enumerate(self.mats):
            if not np.any(m):
                continue
            y = _apply_factors(self.mats, X, which=[i])
            out = y if out is None else out + y
        return np.zeros((self.shape[0], X.shape[1]), dtype=np.result_type(self.dtype, X.dtype)) if out is None else out

    def _adjoint(self) -> KronSumOp:
        return KronSumOp([m.conj().T for m in self.mats])


class ConcatOp(LinearOperator):
    """Vertical stack [C_1; C_2; ...] of operators with the same number of columns."""

    def __init__(self, ops: Sequence[LinearOperator]) -> None:
        self.ops = list(ops)
        n = self.ops[0].shape[1]
        for o in self.ops:
            if o.shape[1] != n:
                raise ValueError(f"ConcatOp: operator of shape {o.shape} does not have {n} columns")
        dt = np.result_type(*[o.dtype for o in self.ops])
        super().__init__(dtype=dt, shape=(sum(o.shape[0] for o in self.ops), n))

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return np.concatenate([o.matmat(X) for o in self.ops], axis=0)

    def _rmatmat(self, Y: np.ndarray) -> np.ndarray:
        out = None
        off = 0
        for o in self.ops:
            y = o.rmatmat(Y[off : off + o.shape[0]])
            off += o.shape[0]
            out = y if out is None else out + y
        return out


class DirectSumOp(LinearOperator):
    """Block-diagonal A_1 ⊕ A_2 ⊕ ... (the rho of a direct sum)."""

    def __init__(self, ops: Sequence[LinearOperator]) -> None:
        self.ops = list(ops)
        r = sum(o.shape[0] for o in self.ops)
        c = sum(o.shape[1] for o in self.ops)
        super().__init__(dtype=np.result_type(*[o.dtype for o in self.ops]), shape=(r, c))

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        outs = []
        off = 0
        for o in self.ops:
            outs.append(o.matmat(X[off : off + o.shape[1]]))
            off += o.shape[1]
        return np.concatenate(outs, axis=0)


class PermOp(LinearOperator):
    """The permutation matrix P with (P x)[i] = x[perm[i]]."""

    def __init__(self, perm: np.ndarray) -> None:
        self.perm = np.asarray(perm)
        n = len(self.perm)
        super().__init__(dtype=np.float64, shape=(n, n))

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return X[self.perm]

    def _adjoint(self) -> PermOp:
        return PermOp(np.argsort(self.perm))


def kron_dense(mats: Sequence[np.ndarray]) -> np.ndarray:
    """The Kronecker product of ``mats`` as a dense array (``1 x 1`` for none)."""
    out = np.ones((1, 1))
    for m in mats:
        out = np.kron(out, m)
    return out


def kronsum_sparse(mats: Sequence[np.ndarray]) -> sp.csr_matrix:
    """The Kronecker sum as a sparse matrix (sparse factors stay sparse)."""
    dims = [m.shape[0] for m in mats]
    n = int(np.prod(dims))
    out = sp.csr_matrix((n, n), dtype=np.result_type(*mats))
    for i, m in enumerate(mats):
        if not np.any(m):
            continue
        left = int(np.prod(dims[:i]))
        right = int(np.prod(dims[i + 1 :]))
        out = out + sp.kron(sp.kron(sp.identity(left, format="csr"), sp.csr_matrix(m)), sp.identity(right), "csr")
    return out
