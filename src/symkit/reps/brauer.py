"""Closed-form invariant tensors of the classical groups (first fundamental theorem of invariant theory).

For a group preserving a bilinear form B (O(n), SO(n), the Lorentz groups, Sp(n)), the invariants of
V^{⊗p} ⊗ (V*)^{⊗q} are spanned by Brauer diagrams: products over a perfect matching of the k = p + q slots of the
invariant tensor B^{-1} in V ⊗ V, with B applied to the dual slots; the special groups (det = 1) add the
Levi-Civita tensor on n slots times a matching of the rest. For U(n) and GL(n) the invariants pair each V slot with
a V* slot by the identity (p = q); SU(n) and SL(n) add Levi-Civita tensors on groups of n slots of one kind.

The diagrams span the invariant space but are linearly dependent when n is small (e.g. SO(3) T_8: 105 pairings
span 91 dimensions); the rank and an orthonormal basis come from their Gram matrix. For matchings the Gram entries
are traces around the loops formed by two diagrams, computed without building any vector; the rank of the integer
Gram matrix is computed exactly (modular elimination), cross-checked by a float64 eigen-decomposition.

`classical_rank` counts the same invariants without any diagram, from Schur-Weyl duality: V^{⊗k} is the sum over
partitions λ of k with at most n rows of f^λ copies of the GL(n) irrep S_λ(V) (f^λ standard Young tableaux, by the
hook length formula), and S_λ(V) holds one invariant of O(n) when every row of λ is even, of SO(n) when the n rows
(zeros included) have one parity, of Sp(n) when every column is even, and none otherwise. For U(n) and GL(n) the
invariants of V^{⊗p} ⊗ (V*)^{⊗q} number Σ_λ (f^λ)^2 over λ of p (p = q); for SU(n) and SL(n), Σ f^λ f^μ over μ of
the smaller of p, q and λ = μ plus |p - q| / n columns of height n. The disk cache checks cached bases against it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

import numpy as np
import scipy.sparse as sp

from symkit.progress import progress_bar

__all__ = ["brauer_applicable", "brauer_diagrams", "brauer_basis", "brauer_rank", "classical_rank", "levi_civita"]


def brauer_applicable(G: object, kinds: Sequence[str]) -> bool:
    """True when G carries closed-form metadata (`G.brauer`) and every slot is V ('V') or its dual ('D')."""
    return getattr(G, "brauer", None) is not None and all(k in ("V", "D") for k in kinds)


def _matchings(slots: Sequence[int]) -> Iterator[list[tuple[int, int]]]:
    if not slots:
        yield []
        return
    a = slots[0]
    for i in range(1, len(slots)):
        b = slots[i]
        rest = list(slots[1:i]) + list(slots[i + 1 :])
        for m in _matchings(rest):
            yield [(a, b)] + m


def _groups_of(slots: Sequence[int], n: int) -> Iterator[list[tuple[int, ...]]]:
    """Partitions of `slots` (len divisible by n) into unordered groups of size n."""
    if not slots:
        yield []
        return
    a = slots[0]
    for others in itertools.combinations(slots[1:], n - 1):
        rest = [s for s in slots[1:] if s not in others]
        for g in _groups_of(rest, n):
            yield [(a,) + others] + g


def _bijections(vs: Sequence[int], ds: Sequence[int]) -> Iterator[list[tuple[int, int]]]:
    for p in itertools.permutations(ds):
        yield list(zip(vs, p))


def brauer_diagrams(G: object, kinds: Sequence[str]) -> list[tuple[list[tuple[int, int]], list[tuple[int, ...]]]]:
    """Spanning diagrams as (pairs, epsilon groups) over slot indices 0..k-1."""
    kind, _, special = G.brauer
    n = G.d
    k = len(kinds)
    out = []
    if kind == "form":
        if k % 2 == 0:
            for m in _matchings(list(range(k))):
                out.append((m, []))
        if special and k >= n and (k - n) % 2 == 0:
            for eps in itertools.combinations(range(k), n):
                rest = [s for s in range(k) if s not in eps]
                for m in _matchings(rest):
                    out.append((m, [eps]))
    else:
        vs = [i for i, t in enumerate(kinds) if t == "V"]
        ds = [i for i, t in enumerate(kinds) if t == "D"]
        diff = len(vs) - len(ds)
        if diff == 0:
            for m in _bijections(vs, ds):
                out.append((m, []))
        elif special and diff % n == 0:
            big, small = (vs, ds) if diff > 0 else (ds, vs)
            s = abs(diff) // n
            for eps_slots in itertools.combinations(big, s * n):
                rest = [x for x in big if x not in eps_slots]
                for groups in _groups_of(list(eps_slots), n):
                    pairs_src = (rest, small) if diff > 0 else (small, rest)
                    for m in _bijections(*pairs_src):
                        out.append((m, groups))
    return out


def levi_civita(n: int) -> np.ndarray:
    """The Levi-Civita tensor of rank n (dense n^n)."""
    eps = np.zeros((n,) * n)
    for p in itertools.permutations(range(n)):
        inv = sum(1 for i in range(n) for j in range(i + 1, n) if p[i] > p[j])
        eps[p] = -1.0 if inv % 2 else 1.0
    return eps


def _legs(G: object, kinds: Sequence[str]) -> list[np.ndarray]:
    kind, B, _ = G.brauer
    n = G.d
    if kind == "form":
        return [np.eye(n) if t == "V" else np.asarray(B, dtype=float) for t in kinds]
    return [np.eye(n) for _ in kinds]


def _pair_matrix(G: object, kinds: Sequence[str], legs: list[np.ndarray], i: int, j: int) -> np.ndarray:
    kind, B, _ = G.brauer
    if kind == "form":
        M = np.linalg.inv(np.asarray(B, dtype=float))
        M = np.round(M, 12)
        return legs[i] @ M @ legs[j].T
    return np.eye(G.d)


def _diagram_atoms(G: object, kinds: Sequence[str], diagram: tuple) -> list[tuple[tuple[int, ...], np.ndarray]]:
    legs = _legs(G, kinds)
    pairs, eps_groups = diagram
    atoms = []
    for i, j in pairs:
        atoms.append(((i, j), _pair_matrix(G, kinds, legs, i, j)))
    if eps_groups:
        E = levi_civita(G.d)
        for grp in eps_groups:
            t = E
            for ax, s in enumerate(grp):
                if not np.allclose(legs[s], np.eye(G.d)):
                    t = np.moveaxis(np.tensordot(legs[s], t, axes=([1], [ax])), 0, ax)
            atoms.append((tuple(grp), t))
    return atoms


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _diagram_vectors(G: object, kinds: Sequence[str], diagrams: list, fixed: tuple[int, ...] = ()) -> np.ndarray:
    """Matrix (N', m) of the diagrams' tensors, restricted to entries whose first len(fixed) indices equal `fixed`.

    Each tensor is an outer product of its atoms (pair matrices, Levi-Civita tensors) transposed to slot order.
    """
    k = len(kinds)
    n = G.d
    s = len(fixed)
    Nc = n ** (k - s)
    out = np.empty((Nc, len(diagrams)))
    atom_cache: dict = {}
    for c, dgm in enumerate(diagrams):
        key = (tuple(dgm[0]), tuple(tuple(e) for e in dgm[1]))
        atoms = atom_cache.get(key)
        if atoms is None:
            atoms = _diagram_atoms(G, kinds, dgm)
        t = np.ones(())
        slots: list[int] = []
        for sl, a in atoms:
            idx = tuple(fixed[x] if x < s else slice(None) for x in sl)
            t = np.multiply.outer(t, a[idx])
            slots.extend(x for x in sl if x >= s)
        order = np.argsort(slots)
        out[:, c] = np.transpose(t, order).reshape(-1) if slots else t.reshape(-1)
    return out


def _loop_gram(G: object, kinds: Sequence[str], diagrams: list) -> np.ndarray:
    """Gram matrix of matching-only diagrams: products of traces around the loops of each pair of diagrams."""
    k = len(kinds)
    legs = _legs(G, kinds)
    Emat: dict[tuple[int, int], np.ndarray] = {}
    for i in range(k):
        for j in range(k):
            if i < j:
                Emat[(i, j)] = _pair_matrix(G, kinds, legs, i, j)
    for (i, j), M in list(Emat.items()):
        Emat[(j, i)] = M.T
    partners = []
    for pairs, _ in diagrams:
        p = np.empty(k, dtype=int)
        for i, j in pairs:
            p[i], p[j] = j, i
        partners.append(p)
    m = len(diagrams)
    gram = np.zeros((m, m))
    trace_cache: dict[tuple, float] = {}
    for a in range(m):
        pa = partners[a]
        for b in range(a, m):
            pb = partners[b]
            seen = np.zeros(k, dtype=bool)
            val = 1.0
            for s0 in range(k):
                if seen[s0]:
                    continue
                walk = []
                s = s0
                while True:
                    seen[s] = True
                    t = int(pa[s])
                    seen[t] = True
                    u = int(pb[t])
                    walk.append((s, t, u))
                    s = u
                    if s == s0:
                        break
                key = tuple(walk)
                tr = trace_cache.get(key)
                if tr is None:
                    P = np.eye(G.d)
                    for s_, t_, u_ in walk:
                        P = P @ Emat[(s_, t_)] @ Emat[(t_, u_)]
                    tr = float(np.trace(P))
                    trace_cache[key] = tr
                val *= tr
                if val == 0:
                    break
            gram[a, b] = gram[b, a] = val
    return gram


def _rank_mod_p(M: np.ndarray, p: int = 2_147_483_629) -> int:
    """Rank of an integer matrix over GF(p) (equal to the rational rank unless p divides a minor)."""
    A = np.mod(np.round(M).astype(np.int64), p)
    rows, cols = A.shape
    r = 0
    for c in range(cols):
        if r == rows:
            break
        piv = np.nonzero(A[r:, c])[0]
        if len(piv) == 0:
            continue
        i = r + piv[0]
        if i != r:
            A[[r, i]] = A[[i, r]]
        inv = pow(int(A[r, c]), p - 2, p)
        A[r] = (A[r] * inv) % p
        f = A[:, c].copy()
        f[r] = 0
        nzr = np.nonzero(f)[0]
        if len(nzr):
            # (A[i] - f_i * A[r]) mod p, in two halves to stay inside int64
            prod = (f[nzr, None] * (A[r][None, :] % 65536)) % p
            prod = (prod + ((f[nzr, None] * (A[r][None, :] // 65536)) % p) * 65536) % p
            A[nzr] = (A[nzr] - prod) % p
        r += 1
    return r


#: the float rank of a Gram matrix is taken when its kept and dropped eigenvalues are this far apart (relative to the
#: largest); closer calls of an integer Gram matrix are settled exactly, by elimination modulo a prime
CLEAR_GAP = (1e-6, 1e-12)


def _gram_rank(gram: np.ndarray) -> int:
    """Rank of a Gram matrix from its float64 eigenvalues when the spectrum has a clear gap (:data:`CLEAR_GAP`;
    e.g. SO(3) T_10: smallest kept 1e-2, largest dropped 4e-16 of the largest), else exact (modular) when its entries
    are integers."""
    if gram.shape[0] == 0:
        return 0
    w = np.linalg.eigvalsh(gram)
    scale = max(1.0, float(w.max()))
    kept, dropped = w[w > 1e-9 * scale], w[w <= 1e-9 * scale]
    clear = (not kept.size or kept.min() > CLEAR_GAP[0] * scale) and (
        not dropped.size or np.abs(dropped).max() < CLEAR_GAP[1] * scale)
    if not clear and np.allclose(gram, np.round(gram)) and np.abs(gram).max() < 2**62:
        return _rank_mod_p(gram)
    return int(kept.size)


def _vectors_rank(G: object, kinds: Sequence[str], diagrams: list, max_chunk: int) -> int:
    k = len(kinds)
    n = G.d
    N = n**k
    if N <= len(diagrams) and N * len(diagrams) <= 4 * max_chunk:
        Tm = _diagram_vectors(G, kinds, diagrams)
        if np.allclose(Tm, np.round(Tm)):
            return _rank_mod_p(Tm.T if Tm.shape[0] > Tm.shape[1] else Tm)
        return int(np.linalg.matrix_rank(Tm))
    s = 0
    while s < k and (N // n**s) * len(diagrams) > max_chunk:
        s += 1
    gram = np.zeros((len(diagrams), len(diagrams)))
    bar = progress_bar(desc=f"Brauer Gram {G.d}^{k}", total=n**s, show=None if n**s >= 64 else False)
    for fixed in itertools.product(range(n), repeat=s):
        Tm = _diagram_vectors(G, kinds, diagrams, fixed)
        gram += Tm.T @ Tm
        bar.update(1)
    bar.close()
    return _gram_rank(gram)


def brauer_rank(G: object, kinds: Sequence[str], max_chunk: int = 4_000_000) -> int:
    """Rank of the invariant subspace of the given slots, from the Gram matrix of the spanning diagrams.

    Matchings and Levi-Civita diagrams are handled separately: for the built-in special groups a reflection that
    is an orthogonal matrix preserves B, fixes every matching and negates every Levi-Civita diagram, so the two
    families lie in orthogonal eigenspaces and their ranks add.
    """
    diagrams = brauer_diagrams(G, kinds)
    if not diagrams:
        return 0
    pair_d = [d for d in diagrams if not d[1]]
    eps_d = [d for d in diagrams if d[1]]
    r = 0
    if pair_d:
        if len(kinds) * len(pair_d) ** 2 <= 4e7 or G.d ** len(kinds) * len(pair_d) > 4e8:
            r += _gram_rank(_loop_gram(G, kinds, pair_d))
        else:
            r += _vectors_rank(G, kinds, pair_d, max_chunk)
    if eps_d:
        r += _vectors_rank(G, kinds, eps_d, max_chunk)
    return r


def _diagram_matrix_sparse(G: object, kinds: Sequence[str], diagrams: list) -> sp.csc_matrix:
    """The diagrams' tensors as the columns of a sparse (n^k, N') matrix (the same values as
    :func:`_diagram_vectors`): each tensor is an outer product of atoms, so its nonzeros are the products of the
    atoms' nonzeros, placed at the sums of their strided slot indices."""
    k = len(kinds)
    n = G.d
    stride = n ** np.arange(k - 1, -1, -1, dtype=np.int64)
    rows, cols, vals = [], [], []
    atom_cache: dict = {}
    for c, dgm in enumerate(diagrams):
        pos, val = np.zeros(1, dtype=np.int64), np.ones(1)
        for slots, atom in _diagram_atoms(G, kinds, dgm):
            key = (tuple(slots), atom.tobytes())
            nz = atom_cache.get(key)
            if nz is None:
                idx = np.nonzero(atom)
                offset = sum(i.astype(np.int64) * stride[s] for i, s in zip(idx, slots))
                nz = atom_cache[key] = (offset, atom[idx])
            pos = (pos[:, None] + nz[0][None, :]).reshape(-1)
            val = (val[:, None] * nz[1][None, :]).reshape(-1)
        rows.append(pos)
        vals.append(val)
        cols.append(np.full(pos.shape[0], c, dtype=np.int64))
    N = n**k
    if not rows:
        return sp.csc_matrix((N, 0))
    return sp.csc_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(N, len(diagrams)))


#: above this many entries (n^k x diagrams) the basis is built from the sparse diagram matrix
SPARSE_ABOVE = 2_000_000


def _gram_range(gram: np.ndarray, r: int) -> np.ndarray:
    """Coefficients C (N', r) with ``Tm C`` orthonormal, from the Gram matrix ``Tm^T Tm`` alone: the top ``r``
    eigenvectors scaled by ``1/sqrt(w)``, then one re-orthonormalisation ``C L^-T`` with ``L L^T = C^T gram C``."""
    w, U = np.linalg.eigh(gram)
    idx = np.argsort(w)[::-1][:r]
    C = U[:, idx] / np.sqrt(w[idx])
    L = np.linalg.cholesky(C.T @ gram @ C)
    return np.linalg.solve(L, C.T).T


def brauer_basis(G: object, kinds: Sequence[str]) -> np.ndarray:
    """Orthonormal basis (n^k, r) of the invariant tensors, as combinations of the spanning diagrams."""
    diagrams = brauer_diagrams(G, kinds)
    N = G.d ** len(kinds)
    if not diagrams:
        return np.zeros((N, 0))
    if N * len(diagrams) > SPARSE_ABOVE:
        Ts = _diagram_matrix_sparse(G, kinds, diagrams)
        gram = (Ts.T @ Ts).toarray()
        C = _gram_range(gram, _gram_rank(gram))
        return np.ascontiguousarray(Ts @ C)
    Tm = _diagram_vectors(G, kinds, diagrams)
    gram = Tm.T @ Tm
    r = _gram_rank(gram)
    w, U = np.linalg.eigh(gram)
    idx = np.argsort(w)[::-1][:r]
    Q = Tm @ (U[:, idx] / np.sqrt(w[idx]))
    # one re-orthonormalisation step (Q stays inside the span of exact invariants)
    L = np.linalg.cholesky(Q.T @ Q)
    Q = np.linalg.solve(L, Q.T).T
    return np.ascontiguousarray(Q)


def _partitions(k: int, rows: int, largest: int | None = None) -> Iterator[tuple[int, ...]]:
    """Partitions of k into at most `rows` parts (non-increasing, no zeros), each part at most `largest`."""
    largest = k if largest is None else largest
    if k == 0:
        yield ()
        return
    if rows == 0:
        return
    for first in range(min(k, largest), 0, -1):
        for rest in _partitions(k - first, rows - 1, first):
            yield (first,) + rest


def _tableaux(lam: tuple[int, ...]) -> int:
    """Number of standard Young tableaux of shape lam (hook length formula, exact)."""
    cols = [sum(1 for r in lam if r > j) for j in range(lam[0])] if lam else []
    hooks = 1
    for i, r in enumerate(lam):
        for j in range(r):
            hooks *= (r - j - 1) + (cols[j] - i - 1) + 1
    return math.factorial(sum(lam)) // hooks


def classical_rank(G: object, kinds: Sequence[str]) -> int | None:
    """Number of invariants of the slots `kinds` ('V' / 'D') of a group with Brauer metadata, counted in closed
    form (Schur-Weyl duality, module docstring) without building a diagram; None for a form that is neither
    symmetric nor antisymmetric."""
    kind, B, special = G.brauer
    n = G.d
    p = sum(1 for t in kinds if t == "V")
    q = len(kinds) - p
    if kind == "form":
        Bm = np.asarray(B)
        if np.allclose(Bm, Bm.T):
            def holds(lam: tuple[int, ...]) -> bool:
                parity = {x % 2 for x in lam + (0,) * (n - len(lam))}
                return parity == {0} or (bool(special) and len(parity) == 1)
        elif np.allclose(Bm, -Bm.T):
            def holds(lam: tuple[int, ...]) -> bool:
                return all(c % 2 == 0 for c in (sum(1 for r in lam if r > j) for j in range(lam[0] if lam else 0)))
        else:
            return None
        return sum(_tableaux(lam) for lam in _partitions(p + q, n) if holds(lam))
    big, small = max(p, q), min(p, q)
    if not special:
        return sum(_tableaux(lam) ** 2 for lam in _partitions(p, n)) if p == q else 0
    if (big - small) % n:
        return 0
    c = (big - small) // n
    return sum(_tableaux(mu) * _tableaux(tuple(x + c for x in mu + (0,) * (n - len(mu))))
               for mu in _partitions(small, n))
