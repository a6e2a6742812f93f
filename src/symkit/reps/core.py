"""The representation algebra (thesis §2.3, Table 2.1): V, Scalar, T(p, q), duals, ⊕, ⊗, powers and hom-spaces.

Every rep is a tree of leaves (Vector, Dual, user reps) combined by `SumRep` and `ProductRep`. For solving, a rep is
flattened into *blocks* (`symkit.reps.blocks.Block`): tensor products of leaves, each with an integer array of the
positions its copies occupy in the flat vector (`Rep.blocks()`). Blocks are canonicalised here (leaves sorted, axes
transposed: `canonical_blocks`), so T(2,1) and T(1,2)-like orderings, repeated summands and the (b, a) blocks of a
hom-space (eq. 2.8) are solved once each. The solver (`symkit.reps.solve`) is called with the canonical blocks; it
imports nothing from this module and asks a leaf what it is through `slot_kind`, so the import runs one way.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from symkit._checks import check_int
from symkit.groups.base import Group, ProductGroup
from symkit.reps import solve
from symkit.reps.blocks import Block

__all__ = [
    "Rep", "ScalarRep", "Scalar", "Vector", "V", "Dual", "SumRep", "ProductRep", "CustomRep", "PseudoScalar", "T",
    "Block", "check_int", "canonical_blocks", "canonical_counts",
]


def _element_for(g: Any, G: Group, what: str) -> np.ndarray:
    """The matrix of element `g` acting on the base space of G (picks a factor of a product-group element)."""
    if isinstance(g, Mapping):
        if G in g:
            return np.asarray(g[G])
        if isinstance(G, ProductGroup) and all(h in g for h in G.groups):
            return G.combine([g[h] for h in G.groups])
        raise ValueError(f"{what}: no element for group {G} among {list(g)}")
    facs = getattr(g, "factors", ())
    groups = getattr(g, "groups", ())
    if facs and groups:
        if G in groups:
            return np.asarray(facs[groups.index(G)])
        if isinstance(G, ProductGroup) and all(h in groups for h in G.groups):
            return G.combine([facs[groups.index(h)] for h in G.groups])
        if isinstance(G, ProductGroup) and tuple(groups) == G.groups:
            return np.asarray(g)
        raise ValueError(f"{what}: element of {'×'.join(map(str, groups))} has no component for {G}")
    g = np.asarray(g)
    if g.shape != (G.d, G.d):
        raise ValueError(f"{what}: expected a ({G.d}, {G.d}) element of {G}, got an array of shape {g.shape}")
    return g


class Rep:
    """Base class of representations. Subclasses implement `size`, `rho`, `drho`, `blocks` and `_key`."""

    # ------------------------------------------------------------------ structure
    @property
    def G(self) -> Group | None:
        """The group this rep is bound to (a ProductGroup for reps mixing groups; None for Scalar or unbound)."""
        return None

    def groups(self) -> frozenset:
        """The set of base groups acting on this rep (one per factor of a product)."""
        return frozenset()

    @property
    def size(self) -> int:
        raise NotImplementedError

    def _key(self) -> tuple:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rep) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def blocks(self) -> list[Block]:
        raise NotImplementedError

    def block_counts(self) -> list[tuple[tuple, int]]:
        """(leaves, multiplicity) of every block, without position arrays (cheap even for huge tensors)."""
        return [(b.leaves, b.mult) for b in self.blocks()]

    def __call__(self, G: Group) -> Rep:
        """Bind an unbound rep (built from `V`) to the group G, e.g. ``T(2)(SO(3))`` or ``(V**2 + V)(G)``."""
        if not isinstance(G, Group):
            raise TypeError(f"{self!r}(G): expected a Group, got {type(G).__name__}")
        return self._bind(G)

    def _bind(self, G: Group) -> Rep:
        return self

    def restrict(self, H: Group) -> Rep:
        """The same rep read as a rep of ``H``, a group acting on the same base space: a subgroup such as SO(3) of
        O(3) or ``SO2eR3()`` (rotations about z) of O(3). ``V(O(3)).restrict(SO(3)) == V(SO(3))``, and
        ``rho_H(h) = rho_G(h)`` for every ``h`` in both groups. That ``H`` lies inside the rep's group is the
        caller's claim (a map equivariant under both is equivariant under their intersection)."""
        if not isinstance(H, Group):
            raise TypeError(f"{self!r}.restrict(H): expected a Group, got {type(H).__name__}")
        groups = self.groups()
        if not groups:
            return self
        if len(groups) > 1:
            raise ValueError(f"{self!r}.restrict: the rep mixes the groups {sorted(g.name for g in groups)}; "
                             "restrict the factors one at a time")
        (G,) = groups
        if G.d != H.d:
            raise ValueError(f"{self!r}.restrict({H}): {H} acts on R^{H.d}, but {G} acts on R^{G.d}")
        return self._rebind(G, H)

    def _rebind(self, G: Group, H: Group) -> Rep:
        """This rep with every leaf bound to ``G`` bound to ``H`` instead (reps without leaves are unchanged)."""
        return self

    @property
    def is_bound(self) -> bool:
        return True

    # ------------------------------------------------------------------ numerics
    def rho(self, g: Any) -> np.ndarray:
        """rho(g) as a dense (size, size) matrix (Table 2.1)."""
        raise NotImplementedError

    def drho(self, A: Any) -> np.ndarray:
        """d rho(A) for a Lie algebra element A, dense (size, size) (Table 2.1)."""
        raise NotImplementedError

    @property
    def is_permutation(self) -> bool:
        """True when rho(g) is a permutation matrix for every g (pointwise nonlinearities are then equivariant)."""
        return False

    @property
    def is_orthogonal(self) -> bool:
        return False

    # ------------------------------------------------------------------ algebra
    @property
    def T(self) -> Rep:
        """The dual representation rho(g^{-1})^T (Table 2.1)."""
        raise NotImplementedError

    def __add__(self, other: Any) -> Rep:
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool):
            other = check_int("rep + int", other, 0) * Scalar
        if not isinstance(other, Rep):
            return NotImplemented
        return SumRep([self, other])

    def __radd__(self, other: Any) -> Rep:
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool):
            return SumRep([check_int("int + rep", other, 0) * Scalar, self])
        return NotImplemented

    def __mul__(self, other: Any) -> Rep:
        if isinstance(other, Rep):
            return ProductRep([self, other])
        if isinstance(other, (bool, float, np.floating)) or not isinstance(other, (int, np.integer)):
            raise TypeError(
                f"{self!r} * {other!r}: a multiplicity must be an int (or a Rep for a tensor product), "
                f"got {type(other).__name__}"
            )
        n = check_int(f"{self!r} * n (multiplicity)", other, 0)
        return SumRep([(self, n)])

    def __rmul__(self, other: Any) -> Rep:
        return self.__mul__(other)

    def __pow__(self, k: Any) -> Rep:
        k = check_int(f"{self!r} ** k", k, 0)
        if k == 0:
            return Scalar
        if k == 1:
            return self
        return ProductRep([self] * k)

    def __rshift__(self, other: Rep) -> Rep:
        """``rep_in >> rep_out``: linear maps rep_in -> rep_out, i.e. rep_out ⊗ rep_in* (§2.3)."""
        if not isinstance(other, Rep):
            return NotImplemented
        return ProductRep([other, self.T])

    def __lshift__(self, other: Rep) -> Rep:
        """``rep_out << rep_in`` is ``rep_in >> rep_out``."""
        if not isinstance(other, Rep):
            return NotImplemented
        return ProductRep([self, other.T])

    # ------------------------------------------------------------------ solving (see symkit.reps.solve)
    def canonical_blocks(self) -> list[Block]:
        """Blocks with sorted leaves, merged across the rep (each distinct block type once, with all its copies)."""
        return canonical_blocks(self)

    def canonicalize(self) -> tuple[Rep, np.ndarray]:
        """(canonical rep, perm): the canonical rep is a sum of sorted tensor products with multiplicities, and
        ``v[perm]`` rewrites a vector v of this rep in the canonical layout."""
        blocks = sorted(self.canonical_blocks(),
                        key=lambda b: (len(b.leaves), [_leaf_sort_key(x) for x in b.leaves]))
        parts = []
        perm = []
        for b in blocks:
            parts.append((ProductRep(list(b.leaves)) if len(b.leaves) != 1 else b.leaves[0], b.mult))
            perm.append(b.pos.reshape(-1))
        rep = SumRep(parts) if parts else SumRep([])
        return rep, (np.concatenate(perm) if perm else np.zeros(0, dtype=np.int64))

    def equivariant_basis(self, method: str = "auto", sparse: bool = False) -> Any:
        """Orthonormal basis Q (size, r) of the invariant subspace {v : rho(g) v = v} (eqs. 2.3-2.6).

        `method` is "auto" (orbits for permutation groups, Brauer diagrams for classical groups, coupling for
        SO(3)/O(3) tensor powers of 11 or more slots, dense float64 nullspace for small blocks, the zero-weight space
        or iterative otherwise), or one of "orbit", "brauer", "coupling", "dense", "weight", "iterative". A
        coupling block whose dense matrix would exceed `LAZY_BASIS_BYTES` (4 GiB) is refused here with a clear error;
        `rank()`, `equivariant_projector()` and `structured_basis()` work with it lazily.
        float64 (complex128 for complex groups); with `sparse=True` a scipy.sparse matrix. A plain tensor power's
        basis is returned as a read-only view of the solver's cached block (no copy of a possibly large matrix):
        ``Q.copy()`` to modify it.
        """
        return solve.equivariant_basis(_solvable_blocks(self, method), self.size, method=method, sparse=sparse)

    def equivariant_projector(self, method: str = "auto") -> Any:
        """The orthogonal projector P = Q Q^T onto the invariant subspace as a lazy (size, size) LinearOperator,
        applied block by block (eq. 2.8); `.to_dense()` gives the matrix."""
        return solve.equivariant_projector(_solvable_blocks(self, method), self.size, method=method)

    def rank(self, method: str = "auto") -> int:
        """Dimension r of the invariant subspace, without building Q where possible (orbit counts, Gram ranks)."""
        solve.check_method(method)
        return solve.rank(canonical_counts(self), method=method)

    def structured_basis(self, method: str = "auto") -> Any:
        """The basis as a `StructuredBasis`: one small Q per distinct block plus the positions of each copy."""
        return solve.structured_basis(_solvable_blocks(self, method), self.size, method=method)


# ====================================================================== leaves


class ScalarRep(Rep):
    """The trivial 1-dimensional representation (any group)."""

    @property
    def size(self) -> int:
        return 1

    def _key(self) -> tuple:
        return ("Scalar",)

    def __repr__(self) -> str:
        return "Scalar"

    def blocks(self) -> list[Block]:
        return [Block((), np.zeros((1, 1), dtype=np.int64))]

    def block_counts(self) -> list[tuple[tuple, int]]:
        return [((), 1)]

    def rho(self, g: Any) -> np.ndarray:
        return np.ones((1, 1))

    def drho(self, A: Any) -> np.ndarray:
        return np.zeros((1, 1))

    @property
    def T(self) -> Rep:
        return self

    @property
    def is_permutation(self) -> bool:
        return True

    @property
    def is_orthogonal(self) -> bool:
        return True


Scalar = ScalarRep()


class _Leaf(Rep):
    """A rep that is not a sum or product: the solver treats it as one tensor factor."""

    def blocks(self) -> list[Block]:
        return [Block((self,), np.arange(self.size, dtype=np.int64)[None, :])]

    def block_counts(self) -> list[tuple[tuple, int]]:
        return [((self,), 1)]

    def sort_key(self) -> tuple:
        G = self.G
        return (G.name if G is not None else "", hash(G) if G is not None else 0, repr(self))

    @property
    def slot_kind(self) -> str | None:
        """What this leaf is to the solver (`symkit.reps.solve`): "V" for the base representation V of its group,
        "D" for its dual V*, None for any other leaf (solved from its rho and d rho). The closed-form paths (orbits,
        Brauer diagrams, coupling, character counts of V and V*) apply only to "V" and "D" slots."""
        return None


class Vector(_Leaf):
    """The base representation V of G: rho(g) = g, d rho(A) = A. ``V(G)`` binds it to a group."""

    def __init__(self, G: Group | None = None) -> None:
        if G is not None and not isinstance(G, Group):
            raise TypeError(f"V(G): expected a Group, got {type(G).__name__} {G!r}")
        self._G = G

    @property
    def G(self) -> Group | None:
        return self._G

    def groups(self) -> frozenset:
        return frozenset() if self._G is None else frozenset(self._G.factors)

    @property
    def is_bound(self) -> bool:
        return self._G is not None

    def _bind(self, G: Group) -> Rep:
        return Vector(G) if self._G is None else self

    def _rebind(self, G: Group, H: Group) -> Rep:
        return Vector(H) if self._G == G else self

    @property
    def size(self) -> int:
        if self._G is None:
            raise ValueError("V is not bound to a group; use V(G) (or bind the expression: rep(G))")
        return self._G.d

    def _key(self) -> tuple:
        return ("V", self._G)

    @property
    def slot_kind(self) -> str | None:
        return "V"

    def __repr__(self) -> str:
        return "V" if self._G is None else f"V({self._G})"

    def rho(self, g: Any) -> np.ndarray:
        self.size  # noqa: B018 - raises if unbound
        return _element_for(g, self._G, f"{self!r}.rho")

    def drho(self, A: Any) -> np.ndarray:
        self.size  # noqa: B018
        return _element_for(A, self._G, f"{self!r}.drho")

    @property
    def T(self) -> Rep:
        if self._G is not None and self._G.is_orthogonal:
            return self
        return Dual(self)

    @property
    def is_permutation(self) -> bool:
        return self._G is not None and self._G.is_permutation

    @property
    def is_orthogonal(self) -> bool:
        return self._G is not None and self._G.is_orthogonal


V = Vector()


class Dual(_Leaf):
    """The dual rho*(g) = rho(g^{-1})^T, d rho*(A) = -d rho(A)^T of a leaf (Table 2.1)."""

    def __init__(self, base: _Leaf) -> None:
        if not isinstance(base, _Leaf) or isinstance(base, Dual):
            raise TypeError(f"Dual: expected a leaf rep (not a sum, product or dual), got {base!r}")
        self.base = base

    @property
    def G(self) -> Group | None:
        return self.base.G

    def groups(self) -> frozenset:
        return self.base.groups()

    @property
    def is_bound(self) -> bool:
        return self.base.is_bound

    def _bind(self, G: Group) -> Rep:
        return self.base._bind(G).T

    def _rebind(self, G: Group, H: Group) -> Rep:
        return self.base._rebind(G, H).T

    @property
    def size(self) -> int:
        return self.base.size

    def _key(self) -> tuple:
        return ("Dual", self.base._key())

    @property
    def slot_kind(self) -> str | None:
        return "D" if isinstance(self.base, Vector) else None

    def __repr__(self) -> str:
        return f"{self.base!r}*"

    def rho(self, g: Any) -> np.ndarray:
        return np.linalg.inv(self.base.rho(g)).T

    def drho(self, A: Any) -> np.ndarray:
        return -self.base.drho(A).T

    @property
    def T(self) -> Rep:
        return self.base

    @property
    def is_permutation(self) -> bool:
        return self.base.is_permutation

    @property
    def is_orthogonal(self) -> bool:
        return self.base.is_orthogonal


class CustomRep(_Leaf):
    """A user representation given by rho as a function of the base matrix (thesis §A.1.6).

    `rho_fn(M)` receives a torch float64 (complex128 for complex groups) tensor M of shape (d, d) and returns a
    (size, size) tensor. If `drho_fn` is not given, d rho(A) is derived by automatic differentiation: the JVP of
    rho_fn at the identity in the direction A (torch.func.jvp). `name` identifies the rep for equality, hashing and
    the basis cache. Set `orthogonal=True` when rho(g) is always orthogonal, so that the dual is the rep itself.
    """

    def __init__(
        self,
        G: Group | None,
        rho_fn: Callable,
        size: int,
        name: str,
        drho_fn: Callable | None = None,
        orthogonal: bool = False,
        permutation: bool = False,
    ) -> None:
        if G is not None and not isinstance(G, Group):
            raise TypeError(f"CustomRep {name!r}: expected a Group, got {type(G).__name__}")
        if not callable(rho_fn):
            raise TypeError(f"CustomRep {name!r}: rho_fn must be callable, got {type(rho_fn).__name__}")
        self._G = G
        self.rho_fn = rho_fn
        self.drho_fn = drho_fn
        self._size = check_int(f"CustomRep {name!r} size", size, 1)
        self.name = str(name)
        self._orth = bool(orthogonal)
        self._perm = bool(permutation)

    @property
    def G(self) -> Group | None:
        return self._G

    def groups(self) -> frozenset:
        return frozenset() if self._G is None else frozenset(self._G.factors)

    @property
    def is_bound(self) -> bool:
        return self._G is not None

    def _bind(self, G: Group) -> Rep:
        if self._G is not None:
            return self
        return CustomRep(G, self.rho_fn, self._size, self.name, self.drho_fn, self._orth, self._perm)

    def _rebind(self, G: Group, H: Group) -> Rep:
        if self._G != G:
            return self
        return CustomRep(H, self.rho_fn, self._size, self.name, self.drho_fn, self._orth, self._perm)

    @property
    def size(self) -> int:
        return self._size

    def _key(self) -> tuple:
        return ("Custom", self.name, self._size, self._G)

    def __repr__(self) -> str:
        return self.name if self._G is None else f"{self.name}({self._G})"

    def _check(self) -> Group:
        if self._G is None:
            raise ValueError(f"{self.name} is not bound to a group; call it with a group first")
        return self._G

    def rho(self, g: Any) -> np.ndarray:
        import torch

        G = self._check()
        M = _element_for(g, G, f"{self!r}.rho")
        out = self.rho_fn(torch.as_tensor(np.asarray(M)))
        out = out.detach().cpu().numpy() if isinstance(out, torch.Tensor) else np.asarray(out)
        out = np.asarray(out).reshape(self._size, self._size) if np.size(out) == self._size**2 else out
        if out.shape != (self._size, self._size):
            raise ValueError(f"{self.name}: rho_fn returned shape {out.shape}, expected ({self._size}, {self._size})")
        return out

    def drho(self, A: Any) -> np.ndarray:
        import torch

        G = self._check()
        A = _element_for(A, G, f"{self!r}.drho")
        if self.drho_fn is not None:
            out = self.drho_fn(torch.as_tensor(np.asarray(A)))
        else:
            At = torch.as_tensor(np.asarray(A))
            eye = torch.eye(G.d, dtype=At.dtype)

            def f(M: torch.Tensor) -> torch.Tensor:
                return torch.as_tensor(self.rho_fn(M)).reshape(self._size, self._size)

            _, out = torch.func.jvp(f, (eye,), (At,))
        out = out.detach().cpu().numpy() if isinstance(out, torch.Tensor) else np.asarray(out)
        if not np.all(np.isfinite(out)):
            if self.drho_fn is not None:
                raise ValueError(f"CustomRep {self!r}: drho_fn returned non-finite values (nan or inf)")
            raise ValueError(f"CustomRep {self!r}: d rho derived as the JVP of rho_fn at the identity is not finite "
                             "(nan or inf); pass drho_fn (A -> d rho(A) for a Lie algebra element A) to CustomRep")
        return np.asarray(out).reshape(self._size, self._size)

    @property
    def T(self) -> Rep:
        return self if self._orth else Dual(self)

    @property
    def is_permutation(self) -> bool:
        return self._perm

    @property
    def is_orthogonal(self) -> bool:
        return self._orth


def _sign_det(M: Any) -> Any:
    import torch

    return torch.sign(torch.linalg.det(M).real).reshape(1, 1).to(torch.float64)


def PseudoScalar(G: Group | None = None) -> CustomRep:
    """The pseudoscalar rho(g) = sign(det g) (a 1-dimensional rep; its d rho is 0, found by autodiff)."""
    return CustomRep(G, _sign_det, 1, "PseudoScalar", orthogonal=True)


# ====================================================================== sums and products


def _combine_groups(reps: list[Rep], op: str) -> None:
    sets = [r.groups() for r in reps if r.groups()]
    if not sets:
        return
    if op == "sum":
        big = max(sets, key=len)
        for s in sets:
            if not s <= big:
                a = "×".join(sorted(g.name for g in big))
                b = "×".join(sorted(g.name for g in s))
                raise ValueError(
                    f"cannot add reps of different groups ({a} and {b}) without a product; "
                    "tensor them together (rep1 * rep2) or bind both to the same group"
                )


class SumRep(Rep):
    """Direct sum ⊕ of reps (block-diagonal rho). Built with ``+`` and ``n * rep``; `parts` are (rep, mult)."""

    def __init__(self, parts: list) -> None:
        flat: list[tuple[Rep, int]] = []
        for p in parts:
            if isinstance(p, Rep):
                rep, m = p, 1
            elif isinstance(p, tuple) and len(p) == 2:
                rep, m = p
            else:
                raise TypeError(f"SumRep: expected Rep summands or (Rep, multiplicity) pairs, got {p!r}")
            if not isinstance(rep, Rep):
                raise TypeError(f"SumRep: expected Rep summands, got {type(rep).__name__} {rep!r}")
            m = check_int(f"multiplicity of {rep!r}", m, 0)
            if m == 0:
                continue
            if isinstance(rep, SumRep):
                if len(rep.parts) == 1:
                    flat.append((rep.parts[0][0], rep.parts[0][1] * m))
                else:
                    for _ in range(m):
                        flat.extend(rep.parts)
            else:
                flat.append((rep, m))
        merged: list[tuple[Rep, int]] = []
        for r, m in flat:
            if merged and merged[-1][0] == r:
                merged[-1] = (r, merged[-1][1] + m)
            else:
                merged.append((r, m))
        _combine_groups([r for r, _ in merged], "sum")
        self.parts = tuple(merged)

    @functools.cached_property
    def _G(self) -> Group | None:
        return _group_of(self.groups(), [r for r, _ in self.parts])

    @property
    def G(self) -> Group | None:
        return self._G

    def groups(self) -> frozenset:
        out: frozenset = frozenset()
        for r, _ in self.parts:
            out = out | r.groups()
        return out

    @property
    def is_bound(self) -> bool:
        return all(r.is_bound for r, _ in self.parts)

    def _bind(self, G: Group) -> Rep:
        return SumRep([(r._bind(G), m) for r, m in self.parts])

    def _rebind(self, G: Group, H: Group) -> Rep:
        return SumRep([(r._rebind(G, H), m) for r, m in self.parts])

    @property
    def size(self) -> int:
        return sum(r.size * m for r, m in self.parts)

    def _key(self) -> tuple:
        return ("Sum",) + tuple((r._key(), m) for r, m in self.parts)

    def __repr__(self) -> str:
        if not self.parts:
            return "0"
        return " + ".join((f"{m}{r!r}" if m > 1 else repr(r)) for r, m in self.parts)

    def blocks(self) -> list[Block]:
        out = []
        off = 0
        for r, m in self.parts:
            s = r.size
            offs = off + s * np.arange(m, dtype=np.int64)
            for b in r.blocks():
                pos = (offs[:, None, None] + b.pos[None, :, :]).reshape(m * b.mult, b.size)
                out.append(Block(b.leaves, pos))
            off += s * m
        return out

    def block_counts(self) -> list[tuple[tuple, int]]:
        return [(lv, c * m) for r, m in self.parts for lv, c in r.block_counts()]

    def rho(self, g: Any) -> np.ndarray:
        import scipy.linalg

        mats = []
        for r, m in self.parts:
            R = r.rho(g)
            mats.extend([R] * m)
        return scipy.linalg.block_diag(*mats) if mats else np.zeros((0, 0))

    def drho(self, A: Any) -> np.ndarray:
        import scipy.linalg

        mats = []
        for r, m in self.parts:
            R = r.drho(A)
            mats.extend([R] * m)
        return scipy.linalg.block_diag(*mats) if mats else np.zeros((0, 0))

    @property
    def T(self) -> Rep:
        return SumRep([(r.T, m) for r, m in self.parts])

    @property
    def is_permutation(self) -> bool:
        return all(r.is_permutation for r, _ in self.parts)

    @property
    def is_orthogonal(self) -> bool:
        return all(r.is_orthogonal for r, _ in self.parts)


def _group_of(groups: frozenset, reps: list[Rep]) -> Group | None:
    if not groups:
        return None
    if len(groups) == 1:
        return next(iter(groups))
    order: list[Group] = []
    for r in reps:
        G = r.G
        if G is None:
            continue
        for h in G.factors:
            if h not in order:
                order.append(h)
    return ProductGroup(*order)


class ProductRep(Rep):
    """Tensor product ⊗ of reps (Kronecker rho, Kronecker-sum d rho). Reps of different groups give a rep of
    their direct product (§A.1.7)."""

    def __init__(self, factors: list[Rep]) -> None:
        flat: list[Rep] = []
        for f in factors:
            if not isinstance(f, Rep):
                raise TypeError(f"ProductRep: expected Rep factors, got {type(f).__name__} {f!r}")
            if isinstance(f, ProductRep):
                flat.extend(f.factors)
            elif isinstance(f, ScalarRep):
                continue
            else:
                flat.append(f)
        self.factors = tuple(flat)

    @functools.cached_property
    def _G(self) -> Group | None:
        return _group_of(self.groups(), list(self.factors))

    @property
    def G(self) -> Group | None:
        return self._G

    def groups(self) -> frozenset:
        out: frozenset = frozenset()
        for r in self.factors:
            out = out | r.groups()
        return out

    @property
    def is_bound(self) -> bool:
        return all(r.is_bound for r in self.factors)

    def _bind(self, G: Group) -> Rep:
        return ProductRep([r._bind(G) for r in self.factors])

    def _rebind(self, G: Group, H: Group) -> Rep:
        return ProductRep([r._rebind(G, H) for r in self.factors])

    @property
    def size(self) -> int:
        return math.prod(r.size for r in self.factors)

    def _key(self) -> tuple:
        if not self.factors:
            return ("Scalar",)
        if len(self.factors) == 1:
            return self.factors[0]._key()
        return ("Prod",) + tuple(r._key() for r in self.factors)

    def __repr__(self) -> str:
        if not self.factors:
            return "Scalar"
        out = []
        i = 0
        fs = self.factors
        while i < len(fs):
            j = i
            while j < len(fs) and fs[j] == fs[i]:
                j += 1
            s = repr(fs[i])
            if isinstance(fs[i], SumRep) and len(fs[i].parts) > 1:
                s = f"({s})"
            if j - i > 1 and s.endswith("*"):
                s = f"({s})"
            out.append(s if j - i == 1 else f"{s}**{j - i}")
            i = j
        return "⊗".join(out)

    def blocks(self) -> list[Block]:
        cur = [Block((), np.zeros((1, 1), dtype=np.int64))]
        size_so_far = 1
        for f in self.factors:
            fb = _merge_blocks(f.blocks())
            s = f.size
            nxt = []
            for a in cur:
                for b in fb:
                    pos = a.pos[:, None, :, None] * s + b.pos[None, :, None, :]
                    nxt.append(Block(a.leaves + b.leaves, pos.reshape(a.mult * b.mult, a.size * b.size)))
            cur = _merge_blocks(nxt)
            size_so_far *= s
        return cur

    def block_counts(self) -> list[tuple[tuple, int]]:
        cur: list[tuple[tuple, int]] = [((), 1)]
        for f in self.factors:
            fc = _merge_counts(f.block_counts())
            cur = _merge_counts([(a + b, ma * mb) for a, ma in cur for b, mb in fc])
        return cur

    def rho(self, g: Any) -> np.ndarray:
        out = np.ones((1, 1))
        for f in self.factors:
            out = np.kron(out, f.rho(g))
        return out

    def drho(self, A: Any) -> np.ndarray:
        out = np.zeros((1, 1))
        for f in self.factors:
            D = f.drho(A)
            out = np.kron(out, np.eye(D.shape[0])) + np.kron(np.eye(out.shape[0]), D)
        return out

    @property
    def T(self) -> Rep:
        return ProductRep([f.T for f in self.factors])

    @property
    def is_permutation(self) -> bool:
        return all(f.is_permutation for f in self.factors)

    @property
    def is_orthogonal(self) -> bool:
        return all(f.is_orthogonal for f in self.factors)


def _merge_counts(counts: list[tuple[tuple, int]]) -> list[tuple[tuple, int]]:
    acc: dict[tuple, list] = {}
    for lv, m in counts:
        k = tuple(x._key() for x in lv)
        if k in acc:
            acc[k][1] += m
        else:
            acc[k] = [lv, m]
    return [(lv, m) for lv, m in acc.values()]


def _merge_blocks(blocks: list[Block]) -> list[Block]:
    """Merge blocks with identical (ordered) leaves into one block with all copies."""
    groups: dict[tuple, list[Block]] = {}
    order = []
    for b in blocks:
        k = tuple(x._key() for x in b.leaves)
        if k not in groups:
            groups[k] = []
            order.append(k)
        groups[k].append(b)
    out = []
    for k in order:
        bs = groups[k]
        out.append(bs[0] if len(bs) == 1 else Block(bs[0].leaves, np.concatenate([b.pos for b in bs], axis=0)))
    return out


# ====================================================================== canonical blocks (eq. 2.8)


def _leaf_sort_key(leaf: Any) -> tuple:
    """The order of leaves in a canonical block: by group (name, fingerprint), then V before V* before other leaves,
    then by repr."""
    G = leaf.G
    gname = G.name if G is not None else ""
    kind = 0 if isinstance(leaf, Vector) else (1 if isinstance(leaf, Dual) and isinstance(leaf.base, Vector) else 2)
    return (gname, G.fingerprint() if G is not None else "", kind, repr(leaf))


def _check_solvable(rep: Any) -> None:
    if not isinstance(rep, Rep):
        raise TypeError(f"expected a Rep, got {type(rep).__name__}")
    if not rep.is_bound:
        raise ValueError(f"{rep!r} is not bound to a group; call it with a group first, e.g. rep(SO(3))")


def canonical_blocks(rep: Rep) -> list[Block]:
    """The blocks of `rep` with leaves sorted (axes of `pos` transposed to match), equal blocks merged, ordered by
    their first position (eq. 2.8: each distinct block is solved once)."""
    _check_solvable(rep)
    merged: dict[tuple, list] = {}
    order: list[tuple] = []
    for b in rep.blocks():
        leaves = b.leaves
        perm = sorted(range(len(leaves)), key=lambda i: _leaf_sort_key(leaves[i]))
        lc = tuple(leaves[i] for i in perm)
        pos = b.pos
        if perm != list(range(len(leaves))):
            shape = (b.mult,) + tuple(leaf.size for leaf in leaves)
            pos = pos.reshape(shape).transpose((0,) + tuple(1 + i for i in perm)).reshape(b.mult, -1)
        key = tuple(x._key() for x in lc)
        if key not in merged:
            merged[key] = [lc, []]
            order.append(key)
        merged[key][1].append(pos)
    out = [Block(merged[k][0], np.concatenate(merged[k][1], axis=0)) for k in order]
    out.sort(key=lambda b: int(b.pos.min()) if b.pos.size else 0)
    return out


def canonical_counts(rep: Rep) -> list[tuple[tuple, int]]:
    """(sorted leaves, multiplicity) of each distinct canonical block, without building position arrays."""
    _check_solvable(rep)
    acc: dict[tuple, list] = {}
    for leaves, m in rep.block_counts():
        lc = tuple(sorted(leaves, key=_leaf_sort_key))
        k = tuple(x._key() for x in lc)
        if k in acc:
            acc[k][1] += m
        else:
            acc[k] = [lc, m]
    return [(lc, m) for lc, m in acc.values()]


def _solvable_blocks(rep: Rep, method: str) -> list[Block]:
    """The canonical blocks of `rep` for the solver, after the checks that come before building them: a known
    `method`, and index arrays of at most ``LAZY_BASIS_BYTES`` for a bound rep."""
    solve.check_method(method)
    if rep.is_bound:
        solve.check_index_bytes(rep, rep.size)
    return canonical_blocks(rep)


def T(p: int, q: int = 0, G: Group | None = None) -> Rep:
    """T_(p,q) = V^{⊗p} ⊗ (V*)^{⊗q} (§2.3); unbound (call it with a group) unless G is given."""
    p = check_int("T(p, q): p", p, 0)
    q = check_int("T(p, q): q", q, 0)
    if G is not None and not isinstance(G, Group):
        raise TypeError(f"T(p, q, G): G must be a Group, got {type(G).__name__} {G!r}")
    v = Vector(G)
    return v**p * v.T**q if (p or q) else Scalar
