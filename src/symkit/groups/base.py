"""The `Group` abstraction: a matrix group given by discrete generators and a Lie algebra basis (thesis §2.3).

A group acts on its base space R^d (or C^d). It is described by M discrete generators h_k (M×d×d) and a basis
A_1..A_D of its Lie algebra (D×d×d); either may be empty. Theorem A.1 of the thesis: v is invariant under the whole
group iff d rho(A_i) v = 0 and (rho(h_k) - I) v = 0 for every generator, so these two lists are all the solver needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.linalg
from scipy.sparse.linalg import LinearOperator

__all__ = ["Group", "ProductGroup", "FactoredArray"]

_TOL = 1e-9


class FactoredArray(np.ndarray):
    """An array of elements of a product group (in the Kronecker base representation) that also remembers the
    elements of each factor group in `.factors` (one array per factor, same leading shape).

    The Kronecker representation of G1 x G2 is not faithful (e.g. (-I, -I) acts trivially), so reps built from
    reps of the factors need the factor elements; indexing keeps them aligned.
    """

    factors: tuple[np.ndarray, ...]
    groups: tuple

    def __new__(cls, data: np.ndarray, factors: Sequence[np.ndarray], groups: Sequence = ()) -> FactoredArray:
        obj = np.asarray(data).view(cls)
        obj.factors = tuple(np.asarray(f) for f in factors)
        obj.groups = tuple(groups)
        return obj

    def __array_finalize__(self, obj: Any) -> None:
        self.factors = getattr(obj, "factors", ())
        self.groups = getattr(obj, "groups", ())

    def __getitem__(self, item: Any) -> Any:
        out = super().__getitem__(item)
        if not isinstance(out, np.ndarray) or not self.factors:
            return out
        lead = self.ndim - 2
        if lead <= 0:
            return np.asarray(out)
        first = item[0] if isinstance(item, tuple) else item
        rest = item[1:] if isinstance(item, tuple) else ()
        if any(r != slice(None) for r in rest if not (isinstance(r, type(Ellipsis)))):
            return np.asarray(out)
        facs = tuple(f[first] for f in self.factors)
        if out.ndim < 2:
            return np.asarray(out)
        return FactoredArray(np.asarray(out), facs, self.groups)

    def __reduce__(self):  # pragma: no cover - pickling as a plain array
        return np.asarray(self).__reduce__()


def _as_matrix_stack(mats: Any, what: str, owner: str, d: int | None) -> tuple[np.ndarray, int | None]:
    """Turn a list of matrices / LinearOperators / an (M,d,d) array into a dense (M,d,d) array."""
    if mats is None:
        return None, d
    if isinstance(mats, np.ndarray) and mats.ndim == 3:
        arr = mats
    else:
        items = list(mats)
        if len(items) == 0:
            return None, d
        dense = []
        for i, m in enumerate(items):
            if isinstance(m, LinearOperator):
                if m.shape[0] != m.shape[1]:
                    raise ValueError(f"{owner}: {what}[{i}] is a LinearOperator of shape {m.shape}, expected square")
                n = m.shape[0]
                eye = np.eye(n)
                m = m.matmat(eye)
            m = np.asarray(m)
            if m.ndim != 2:
                raise ValueError(f"{owner}: {what}[{i}] has shape {m.shape}, expected a square matrix (d, d)")
            dense.append(m)
        shapes = {m.shape for m in dense}
        if len(shapes) != 1:
            raise ValueError(f"{owner}: {what} have different shapes {sorted(shapes)}, expected all (d, d)")
        arr = np.stack(dense)
    if arr.ndim != 3 or arr.shape[1] != arr.shape[2]:
        raise ValueError(f"{owner}: {what} has shape {arr.shape}, expected (M, d, d)")
    if arr.shape[0] == 0:
        return None, d
    if d is not None and arr.shape[1] != d:
        raise ValueError(f"{owner}: {what} act on dimension {arr.shape[1]}, but the group has d={d}")
    if np.iscomplexobj(arr):
        if np.abs(arr.imag).max() == 0:
            arr = arr.real.astype(np.float64)
        else:
            arr = arr.astype(np.complex128)
    else:
        if not np.issubdtype(arr.dtype, np.number) and arr.dtype != bool:
            raise TypeError(f"{owner}: {what} must be numeric, got dtype {arr.dtype}")
        arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{owner}: {what} contain non-finite entries")
    return arr, arr.shape[1]



def _bfs_closure(identity: Any, steps: list, key: Any, cap: int) -> list | None:
    """Elements reachable from `identity` by repeatedly applying `steps`, breadth first; None when more than
    `cap` are found or when `key` returns None (an element that cannot belong to a finite group)."""
    seen = {key(identity)}
    elems = [identity]
    frontier = [identity]
    while frontier:
        nxt = []
        for m in frontier:
            for step in steps:
                q = step(m)
                kq = key(q)
                if kq is None:
                    return None
                if kq not in seen:
                    seen.add(kq)
                    elems.append(q)
                    nxt.append(q)
                    if len(elems) > cap:
                        return None
        frontier = nxt
    return elems

class Group:
    """A matrix group G < GL(d) given by discrete generators (M×d×d) and a Lie algebra basis (D×d×d).

    Either list may be empty (a finite group has no Lie algebra; a connected Lie group needs no discrete generators).
    Generators may be given as dense matrices or as matrix-free `scipy.sparse.linalg.LinearOperator`s.

    Example (a user group, thesis §A.1.6):
        >>> import numpy as np
        >>> G = Group(discrete_generators=[np.array([[0., 1.], [1., 0.]])], name="Flip")
        >>> G.d, G.is_permutation, G.is_finite
        (2, True, True)
    """

    #: Closed-form invariant theory (Brauer diagrams) metadata, set by the built-in classical groups:
    #: ``("form", B, special)`` for groups preserving a bilinear form B (O, SO, Lorentz, Sp),
    #: ``("linear", None, special)`` for U(n), SU(n), GL(n), SL(n). None means "use the numerical path".
    brauer: tuple | None = None
    z_scale: np.ndarray | float = 1.0

    def __init__(
        self,
        discrete_generators: Any = None,
        lie_algebra: Any = None,
        name: str | None = None,
        d: int | None = None,
    ) -> None:
        owner = name or type(self).__name__
        dg, d = _as_matrix_stack(discrete_generators, "discrete_generators", owner, d)
        la, d = _as_matrix_stack(lie_algebra, "lie_algebra", owner, d)
        if d is None:
            raise ValueError(f"{owner}: no generators and no d given; pass d= for a group with no generators")
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d <= 0:
            raise TypeError(f"{owner}: d must be a positive int, got {d!r}")
        self._d = int(d)
        self._dg = dg if dg is not None else np.zeros((0, d, d))
        self._la = la if la is not None else np.zeros((0, d, d))
        if dg is not None:
            for i, h in enumerate(dg):
                s = np.linalg.svd(h, compute_uv=False)
                if s[-1] <= 1e-10 * max(1.0, s[0]):
                    raise ValueError(
                        f"{owner}: discrete_generators[{i}] is not invertible (smallest singular value {s[-1]:.3g}); "
                        "a group generator must be an invertible matrix"
                    )
        self._name = name
        self._cache: dict[str, Any] = {}

    # ------------------------------------------------------------------ basic data
    @property
    def d(self) -> int:
        """Dimension of the base representation V."""
        return self._d

    @property
    def discrete_generators(self) -> np.ndarray:
        """Discrete generators h_k in the base representation, shape (M, d, d)."""
        return self._dg

    @property
    def lie_algebra(self) -> np.ndarray:
        """Lie algebra basis A_i in the base representation, shape (D, d, d)."""
        return self._la

    @property
    def name(self) -> str:
        return self._name or f"Group(d={self.d})"

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    @property
    def is_complex(self) -> bool:
        """True when a generator has complex entries (SU(n), U(n)); invariants are then solved over C."""
        return bool(np.iscomplexobj(self._dg) or np.iscomplexobj(self._la))

    @property
    def dtype(self) -> type:
        return np.complex128 if self.is_complex else np.float64

    # ------------------------------------------------------------------ flags
    @property
    def is_orthogonal(self) -> bool:
        """Real and orthogonal: every generator satisfies h h^T = I and every A is antisymmetric, so rho* = rho."""
        if "orth" not in self._cache:
            ok = not self.is_complex
            if ok:
                eye = np.eye(self.d)
                ok = all(np.abs(h @ h.T - eye).max() < _TOL for h in self._dg) and all(
                    np.abs(A + A.T).max() < _TOL for A in self._la
                )
            self._cache["orth"] = bool(ok)
        return self._cache["orth"]

    @property
    def is_unitary(self) -> bool:
        """Every generator unitary and every A anti-Hermitian (true for orthogonal groups too)."""
        if "unit" not in self._cache:
            eye = np.eye(self.d)
            self._cache["unit"] = bool(
                all(np.abs(h @ h.conj().T - eye).max() < _TOL for h in self._dg)
                and all(np.abs(A + A.conj().T).max() < _TOL for A in self._la)
            )
        return self._cache["unit"]

    @property
    def is_permutation(self) -> bool:
        """True when there is no Lie algebra and every generator is a permutation matrix."""
        if "perm" not in self._cache:
            self._cache["perm"] = self._perm_arrays() is not None
        return self._cache["perm"]

    def _perm_arrays(self) -> np.ndarray | None:
        if "perm_arrays" in self._cache:
            return self._cache["perm_arrays"]
        out = None
        if len(self._la) == 0 and not self.is_complex:
            perms = []
            for h in self._dg:
                if not (np.all((h == 0) | (h == 1)) and np.all(h.sum(0) == 1) and np.all(h.sum(1) == 1)):
                    perms = None
                    break
                perms.append(np.argmax(h, axis=0))  # h[p[j], j] = 1, i.e. h e_j = e_{p[j]}
            if perms is not None:
                out = np.array(perms, dtype=np.int64).reshape(len(perms), self.d)
        self._cache["perm_arrays"] = out
        return out

    @property
    def perm_generators(self) -> np.ndarray:
        """Generators of a permutation group as index arrays p, with h e_j = e_{p[j]}, shape (M, d)."""
        p = self._perm_arrays()
        if p is None:
            raise ValueError(f"{self.name} is not a permutation group (needs no Lie algebra and 0/1 generators)")
        return p

    @property
    def is_finite(self) -> bool:
        """True for groups with no Lie algebra whose generators generate a finite group."""
        if "finite" not in self._cache:
            if len(self._la) > 0:
                fin = False
            elif self.is_permutation:
                fin = True
            else:
                fin = self._enumerate(cap=50_000) is not None
            self._cache["finite"] = fin
        return self._cache["finite"]

    @property
    def num_constraints(self) -> int:
        return len(self._dg) + len(self._la)

    # ------------------------------------------------------------------ equality
    def _key(self) -> tuple:
        if "key" not in self._cache:
            self._cache["key"] = (
                type(self).__name__,
                self._name,
                self.d,
                self._dg.tobytes(),
                self._la.tobytes(),
            )
        return self._cache["key"]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Group) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __lt__(self, other: Group) -> bool:
        return (self.name, hash(self)) < (other.name, hash(other))

    def fingerprint(self) -> str:
        """A stable hex digest of the group's generators (used as an on-disk cache key)."""
        import hashlib

        h = hashlib.sha256()
        h.update(self.name.encode())
        h.update(str(self.d).encode())
        h.update(np.ascontiguousarray(self._dg).tobytes())
        h.update(np.ascontiguousarray(self._la).tobytes())
        return h.hexdigest()[:24]

    def __mul__(self, other: Group) -> ProductGroup:
        if not isinstance(other, Group):
            return NotImplemented
        return ProductGroup(self, other)

    # ------------------------------------------------------------------ elements
    def _inverse_generators(self) -> np.ndarray:
        if "inv" not in self._cache:
            self._cache["inv"] = np.array([np.linalg.inv(h) for h in self._dg]).reshape(self._dg.shape)
        return self._cache["inv"]

    def _enumerate(self, cap: int) -> np.ndarray | None:
        """All elements by breadth-first closure under the generators, or None if more than `cap` exist."""
        key = f"elements_{cap}"
        if key not in self._cache:
            self._cache[key] = None if len(self._la) > 0 else self._closure(cap)
        return self._cache[key]

    def _closure(self, cap: int) -> np.ndarray | None:
        if self.is_permutation:  # index arrays: exact keys, cheap products
            perms = self.perm_generators
            elems = _bfs_closure(np.arange(self.d), [lambda p, g=g: g[p] for g in perms], lambda p: p.tobytes(), cap)
            if elems is None:
                return None
            out = np.zeros((len(elems), self.d, self.d))
            for i, p in enumerate(elems):
                out[i, p, np.arange(self.d)] = 1.0
            return out

        def step(h: np.ndarray):
            return lambda m: h @ m

        def key(m: np.ndarray) -> bytes | None:
            if not np.all(np.isfinite(m)) or np.abs(m).max() > 1e6:
                return None  # an element of infinite order: the group is not finite
            return (np.round(m, 6) + 0.0).tobytes()

        elems = _bfs_closure(np.eye(self.d, dtype=self.dtype), [step(h) for h in self._dg], key, cap)
        return None if elems is None else np.array(elems)

    def elements(self, max_order: int = 100_000) -> np.ndarray:
        """Every element of a finite group, (|G|, d, d), by closure under the generators.

        Raises ValueError for infinite groups or groups with more than `max_order` elements.
        """
        if len(self._la) > 0:
            raise ValueError(f"{self.name} has a Lie algebra; it is not finite and cannot be enumerated")
        els = self._enumerate(max_order)
        if els is None:
            raise ValueError(f"{self.name} has more than {max_order} elements (or is infinite); raise max_order")
        return els

    def order(self) -> int | float:
        """|G| for finite groups (Schreier-Sims for permutation groups), math.inf otherwise."""
        if len(self._la) > 0:
            return math.inf
        if self.is_permutation:
            from symkit.groups.perm import schreier_sims_order

            return schreier_sims_order(self.perm_generators, self.d)
        els = self._enumerate(200_000)
        return math.inf if els is None else len(els)

    def samples(self, n: int, seed: int | None = 0) -> np.ndarray:
        """n random elements (n, d, d) in the base representation (§A.1.8: g = exp(sum_i z_i A_i) * word).

        Finite groups with at most 10^5 elements are sampled uniformly from their enumeration; large permutation
        groups uniformly through a Schreier-Sims stabiliser chain. For Lie groups the distribution is not Haar:
        z ~ N(0, z_scale^2), times random powers in [-5, 5) of the discrete generators in random order, 3 rounds.
        """
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
            raise TypeError(f"{self.name}.samples: n must be a non-negative int, got {n!r}")
        rng = np.random.default_rng(seed)
        d = self.d
        if len(self._la) == 0:
            if self.is_permutation:
                from symkit.groups.perm import uniform_perm_samples

                perms = uniform_perm_samples(self.perm_generators, self.d, n, rng)
                out = np.zeros((n, d, d))
                for i, p in enumerate(perms):
                    out[i, p, np.arange(d)] = 1.0
                return out
            els = self._enumerate(100_000)
            if els is not None:
                return els[rng.integers(0, len(els), size=n)].copy()
        out = np.broadcast_to(np.eye(d, dtype=self.dtype), (n, d, d)).copy()
        if len(self._la) > 0:
            z = rng.standard_normal((n, len(self._la))) * self.z_scale
            A = np.einsum("nk,kij->nij", z.astype(self.dtype), self._la)
            out = np.stack([scipy.linalg.expm(a) for a in A]) if n else out
        if len(self._dg) > 0:
            inv = self._inverse_generators()
            for i in range(n):
                g = out[i]
                for _ in range(3):
                    for k in rng.permutation(len(self._dg)):
                        p = int(rng.integers(-5, 5))
                        h = self._dg[k] if p >= 0 else inv[k]
                        for _ in range(abs(p)):
                            g = g @ h
                out[i] = g
        return out

    def lie_algebra_samples(self, n: int, seed: int | None = 0) -> np.ndarray:
        """n random Lie algebra elements sum_i z_i A_i with z ~ N(0, 1), shape (n, d, d)."""
        rng = np.random.default_rng(seed)
        if len(self._la) == 0:
            return np.zeros((n, self.d, self.d), dtype=self.dtype)
        z = rng.standard_normal((n, len(self._la)))
        return np.einsum("nk,kij->nij", z.astype(self.dtype), self._la)

    @property
    def factors(self) -> tuple[Group, ...]:
        return (self,)


class ProductGroup(Group):
    """Direct product G1 x G2 x ... acting on V1 ⊗ V2 ⊗ ... (thesis §A.1.7), built with ``G1 * G2``.

    Generators are h ⊗ I and I ⊗ h'; the Lie algebra is A ⊕̄ 0 and 0 ⊕̄ A'. `samples` returns a `FactoredArray`
    that also carries each factor's elements, which reps made of reps of the factors need.
    """

    def __init__(self, *groups: Group) -> None:
        flat: list[Group] = []
        for g in groups:
            if not isinstance(g, Group):
                raise TypeError(f"ProductGroup: expected Group factors, got {type(g).__name__}")
            flat.extend(g.groups if isinstance(g, ProductGroup) else [g])
        if len(flat) < 2:
            raise ValueError("ProductGroup needs at least two factors")
        self.groups = tuple(flat)
        dims = [g.d for g in flat]
        d = int(np.prod(dims))
        gens, alg = [], []
        for i, g in enumerate(flat):
            left = int(np.prod(dims[:i]))
            right = int(np.prod(dims[i + 1 :]))
            for h in g.discrete_generators:
                gens.append(np.kron(np.kron(np.eye(left), h), np.eye(right)))
            for A in g.lie_algebra:
                alg.append(np.kron(np.kron(np.eye(left), A), np.eye(right)))
        name = "×".join(g.name for g in flat)
        super().__init__(gens or None, alg or None, name=name, d=d)

    @property
    def factors(self) -> tuple[Group, ...]:
        return self.groups

    def _key(self) -> tuple:
        return ("ProductGroup",) + tuple(g._key() for g in self.groups)

    @property
    def is_finite(self) -> bool:
        return all(g.is_finite for g in self.groups)

    def combine(self, factor_elements: Sequence[np.ndarray]) -> FactoredArray:
        """Kronecker product of one element (or batch) per factor, returned as a FactoredArray."""
        fe = [np.asarray(f) for f in factor_elements]
        if len(fe) != len(self.groups):
            raise ValueError(f"{self.name}: expected {len(self.groups)} factor elements, got {len(fe)}")
        for f, g in zip(fe, self.groups):
            if f.shape[-2:] != (g.d, g.d):
                raise ValueError(f"{self.name}: factor element of shape {f.shape} does not fit {g.name} (d={g.d})")
        out = fe[0]
        for f in fe[1:]:
            if out.ndim == 2:
                out = np.kron(out, f)
            else:
                out = np.einsum("nij,nkl->nikjl", out, f).reshape(out.shape[0], out.shape[1] * f.shape[1], -1)
        return FactoredArray(out, fe, self.groups)

    def samples(self, n: int, seed: int | None = 0) -> FactoredArray:
        """n random elements; each factor sampled independently (seeds derived from `seed`)."""
        ss = np.random.SeedSequence(seed).spawn(len(self.groups))
        fe = [g.samples(n, seed=int(s.generate_state(1)[0])) for g, s in zip(self.groups, ss)]
        return self.combine(fe)

    def lie_algebra_samples(self, n: int, seed: int | None = 0) -> FactoredArray:
        ss = np.random.SeedSequence(seed).spawn(len(self.groups))
        fe = [g.lie_algebra_samples(n, seed=int(s.generate_state(1)[0])) for g, s in zip(self.groups, ss)]
        out = None
        for f in fe:
            if out is None:
                out = f
            else:
                a, b = out.shape[1], f.shape[1]
                out = np.einsum("nij,kl->nikjl", out, np.eye(b)).reshape(n, a * b, a * b) + np.einsum(
                    "ij,nkl->nikjl", np.eye(a), f
                ).reshape(n, a * b, a * b)
        return FactoredArray(out, fe, self.groups)

    @property
    def lie_algebra(self) -> np.ndarray:
        """Lie algebra of the product in the Kronecker base rep; a FactoredArray whose `.factors` hold the
        per-factor components (zero in the other factors)."""
        if "la_fact" not in self._cache:
            facs: list[list[np.ndarray]] = [[] for _ in self.groups]
            for i, g in enumerate(self.groups):
                for A in g.lie_algebra:
                    for j, g2 in enumerate(self.groups):
                        facs[j].append(A if j == i else np.zeros((g2.d, g2.d), dtype=A.dtype))
            arrs = [np.array(f).reshape(len(f), g.d, g.d) for f, g in zip(facs, self.groups)]
            self._cache["la_fact"] = FactoredArray(self._la, arrs, self.groups)
        return self._cache["la_fact"]

    @property
    def discrete_generators(self) -> np.ndarray:
        if "dg_fact" not in self._cache:
            facs: list[list[np.ndarray]] = [[] for _ in self.groups]
            for i, g in enumerate(self.groups):
                for h in g.discrete_generators:
                    for j, g2 in enumerate(self.groups):
                        facs[j].append(h if j == i else np.eye(g2.d))
            arrs = [np.array(f).reshape(len(f), g.d, g.d) for f, g in zip(facs, self.groups)]
            self._cache["dg_fact"] = FactoredArray(self._dg, arrs, self.groups)
        return self._cache["dg_fact"]

