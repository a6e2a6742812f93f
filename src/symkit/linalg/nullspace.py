"""Nullspace solvers for the stacked equivariance constraint C = [rho(h_k) - I; d rho(A_i)] (eqs. 2.4-2.6).

* `dense_nullspace`: float64 (or complex128) eigen-decomposition of H = sum_i C_i^H C_i, for problems up to a few
  thousand dimensions. H is assembled from sparse constraint blocks.
* `iterative_nullspace`: only multiplies by the lazy constraint operators. It projects a block of r random vectors
  onto the nullspace with conjugate gradients on H and doubles r while the projected block has full rank (the
  rank-doubling loop of Algorithm 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, aslinearoperator

from symkit.progress import progress_bar

__all__ = ["dense_nullspace", "iterative_nullspace", "NULL_RTOL", "orthonormal_range"]

#: an eigenvalue of H = C^H C counts as zero when it is below NULL_RTOL * max(1, ||H||)
NULL_RTOL = 1e-10


def dense_nullspace(constraints: Sequence[Any], n: int, dtype: type = np.float64) -> np.ndarray:
    """Orthonormal basis (n, r) of the common nullspace of the given (sparse or dense) constraint matrices."""
    if not constraints:
        return np.eye(n, dtype=dtype)
    H = None
    for C in constraints:
        Cs = sp.csr_matrix(C) if not sp.issparse(C) else C.tocsr()
        term = (Cs.conj().T @ Cs).tocsr()
        H = term if H is None else H + term
    Hd = H.toarray()
    if np.iscomplexobj(Hd) and np.abs(Hd.imag).max() == 0:
        Hd = Hd.real
    Hd = (Hd + Hd.conj().T) / 2
    w, U = scipy.linalg.eigh(Hd)
    scale = max(1.0, float(np.abs(w).max()) if len(w) else 1.0)
    keep = w <= NULL_RTOL * scale
    Q = U[:, keep]
    return np.ascontiguousarray(Q.astype(np.result_type(dtype, Q.dtype)))


def _gram_op(ops: Sequence[LinearOperator], n: int, dtype: type) -> LinearOperator:
    ops = [aslinearoperator(o) for o in ops]

    def mm(X: np.ndarray) -> np.ndarray:
        X = X.reshape(n, -1)
        out = np.zeros((n, X.shape[1]), dtype=np.result_type(dtype, X.dtype))
        for o in ops:
            out += o.rmatmat(o.matmat(X))
        return out

    return LinearOperator((n, n), matvec=lambda x: mm(x).ravel(), matmat=mm, dtype=dtype)


def orthonormal_range(X: np.ndarray, rtol: float = 1e-8) -> np.ndarray:
    """Orthonormal basis of the column space of X (SVD, singular values above rtol * max)."""
    if X.shape[1] == 0:
        return X
    U, s, _ = np.linalg.svd(X, full_matrices=False)
    if len(s) == 0 or s[0] == 0:
        return U[:, :0]
    return U[:, s > rtol * s[0]]


def _block_cg(H: LinearOperator, B: np.ndarray, tol: float, maxiter: int) -> np.ndarray:
    """Solve H Y = B column by column with conjugate gradients (H Hermitian PSD, B in its range), from Y = 0.

    Started at 0, the iterates stay in range(H), so Y converges to the minimum-norm solution H^+ B.
    """
    Y = np.zeros_like(B)
    R = B.copy()
    P = R.copy()
    rr = np.real(np.sum(R.conj() * R, axis=0))
    b2 = np.maximum(rr, 1e-300)
    for _ in range(maxiter):
        if np.all(rr <= tol**2 * b2):
            break
        HP = H.matmat(P)
        pHp = np.real(np.sum(P.conj() * HP, axis=0))
        alpha = np.where(pHp > 0, rr / np.where(pHp > 0, pHp, 1.0), 0.0)
        Y += P * alpha
        R -= HP * alpha
        rr_new = np.real(np.sum(R.conj() * R, axis=0))
        beta = np.where(rr > 0, rr_new / np.where(rr > 0, rr, 1.0), 0.0)
        P = R + P * beta
        rr = rr_new
    return Y


def iterative_nullspace(
    ops: Sequence[LinearOperator],
    n: int,
    dtype: type = np.float64,
    seed: int = 0,
    r0: int = 16,
    maxiter: int = 5000,
) -> np.ndarray:
    """Orthonormal basis (n, r) of the nullspace of the stacked lazy operators, growing the block until r is found.

    For a block X of r random vectors, the nullspace components are X - H^+ H X with H = sum_i C_i^H C_i; H^+ H X
    is found by conjugate gradients that only multiply by the lazy C_i and C_i^H. If the projected block has full
    rank r, the nullspace may be larger and r doubles (Algorithm 1's rank loop); otherwise its rank is the answer.
    A second projection pass polishes the basis to float64 accuracy.
    """
    if not ops:
        return np.eye(n, dtype=dtype)
    H = _gram_op(ops, n, dtype)
    rng = np.random.default_rng(seed)
    cplx = np.issubdtype(np.dtype(dtype), np.complexfloating)
    r = min(r0, n)
    bar = progress_bar(desc="iterative nullspace")
    while True:
        X = rng.standard_normal((n, r))
        if cplx:
            X = X + 1j * rng.standard_normal((n, r))
        X = np.linalg.qr(X)[0]
        for _ in range(2):
            X = X - _block_cg(H, H.matmat(X), 1e-13, maxiter)
            bar.update(1)
        U, s, _ = np.linalg.svd(X, full_matrices=False)
        keep = s > 1e-6 * max(1.0, s[0] if len(s) else 1.0)
        rank = int(keep.sum())
        if rank == 0:
            bar.close()
            return np.zeros((n, 0), dtype=np.result_type(dtype, X.dtype))
        if rank < r or r == n:
            Q = U[:, keep]
            # final polish and re-orthonormalisation
            Q = Q - _block_cg(H, H.matmat(Q), 1e-14, maxiter)
            Q = orthonormal_range(Q, 1e-6)
            bar.close()
            return np.ascontiguousarray(Q)
        r = min(2 * r, n)
