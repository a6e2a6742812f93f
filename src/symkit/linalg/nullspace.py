"""Nullspace solvers for the stacked equivariance constraint C = [rho(h_k) - I; d rho(A_i)] (eqs. 2.4-2.6).

* `dense_nullspace`: float64 (or complex128) eigen-decomposition of H = sum_i C_i^H C_i, for problems up to a few
  thousand dimensions. H is assembled from sparse constraint blocks.
* `iterative_nullspace`: only multiplies by the lazy constraint operators. It finds the bottom of the spectrum of H
  with LOBPCG on a block of r + guard vectors and doubles r until the number of (numerically) zero eigenvalues is
  below the block size (the rank-doubling loop of Algorithm 1), then polishes the basis with Rayleigh-Ritz.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, aslinearoperator

from symkit.linalg.progress import progress

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


def iterative_nullspace(
    ops: Sequence[LinearOperator],
    n: int,
    dtype: type = np.float64,
    seed: int = 0,
    r0: int = 16,
    maxiter: int = 2000,
) -> np.ndarray:
    """Orthonormal basis (n, r) of the nullspace of the stacked lazy operators, growing the block until r is found."""
    if not ops:
        return np.eye(n, dtype=dtype)
    H = _gram_op(ops, n, dtype)
    rng = np.random.default_rng(seed)
    # spectral scale from a few power iterations
    x = rng.standard_normal((n, 1)).astype(dtype)
    lam_max = 1.0
    for _ in range(20):
        y = H.matmat(x)
        lam_max = float(np.linalg.norm(y))
        if lam_max == 0:
            return np.eye(n, dtype=dtype)
        x = y / lam_max
    scale = max(1.0, lam_max)
    guard = 8
    r = min(r0, n)
    bar = progress(desc="iterative nullspace", total=None)
    while True:
        m = min(r + guard, n)
        if 5 * m >= n:
            Hd = H.matmat(np.eye(n, dtype=dtype))
            w, U = np.linalg.eigh((Hd + Hd.conj().T) / 2)
            bar.close()
            return np.ascontiguousarray(U[:, w <= NULL_RTOL * scale])
        X = rng.standard_normal((n, m))
        if np.issubdtype(dtype, np.complexfloating):
            X = X + 1j * rng.standard_normal((n, m))
        X = np.linalg.qr(X)[0]
        # Block Rayleigh-Ritz on span[X, H X, P] (LOBPCG-style: P is the previous update direction).
        P = None
        stable = 0
        last_cnt = -1
        cnt = 0
        nz = np.zeros(m, dtype=bool)
        for _ in range(maxiter):
            HX = H.matmat(X)
            blocks = [X, HX] + ([P] if P is not None else [])
            B = orthonormal_range(np.concatenate(blocks, axis=1), 1e-13)
            small = B.conj().T @ H.matmat(B)
            w, U = np.linalg.eigh((small + small.conj().T) / 2)
            Xn = B @ U[:, :m]
            P = Xn - X @ (X.conj().T @ Xn)
            P = orthonormal_range(P, 1e-10) if P.size else None
            X = Xn
            wm = w[:m]
            res = np.linalg.norm(H.matmat(X) - X * wm[None, :], axis=0)
            nz = wm <= NULL_RTOL * scale
            cnt = int(nz.sum())
            bar.update(1)
            stable = stable + 1 if cnt == last_cnt else 0
            last_cnt = cnt
            null_ok = cnt == 0 or res[nz].max() < 1e-10 * scale
            # the first non-null Ritz value must be resolved (its residual well below its value), so that it is
            # not a null vector still converging
            gap_ok = cnt == m or res[cnt] < 0.1 * wm[cnt]
            if null_ok and gap_ok and stable >= 5:
                break
        if cnt < m - guard // 2 or m == n:
            bar.close()
            return np.ascontiguousarray(X[:, nz])
        r *= 2
