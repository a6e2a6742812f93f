"""The real irreps of SO(3) and O(3) in e3nn's basis, and e3nn's ``Irreps`` strings both ways.

``Irrep(l, p, G)`` is the real irrep of degree ``l`` (dimension ``2l + 1``) and parity ``p`` (``rho(-I) = p I``),
in the basis of e3nn's ``o3.Irrep(l, p)``: the standard real spherical harmonics ``Y_lm``, ``m = -l..l`` (formed from
the Condon-Shortley complex ones as ``(Y^-m ± (-1)^m Y^m) / sqrt 2``), in the coordinates ``(z, x, y)``, so that
``y`` is the polar axis and degree 1 is ``(x, y, z)`` itself: ``Irrep(1, -1, O(3)).rho(g) == g == V(O(3)).rho(g)``.

Its Lie algebra generators come from the closed form of the angular momentum (``J_z``, ``J_±`` on ``|l, m>``)
carried to that real basis (:func:`irrep_generators`), and ``rho`` needs no angles: ``D^1(R) = R`` and ``D^l(R) =
C_l^T (D^{l-1}(R) ⊗ R) C_l``, with ``C_l`` the isometry onto the top component of ``D^{l-1} ⊗ D^1`` (a polynomial in
the entries of ``R``, exact to rounding everywhere on the group). An element ``g`` with ``det g = -1`` acts as
``p D^l(-g)``. Bound to SO(3) the parity is only a label: ``1e`` and ``1o`` act alike there.

:func:`from_irreps` reads ``"16x0e + 8x1o + 2x2e"`` as a sum of reps in e3nn's layout (``0e`` is ``Scalar``), and
:func:`to_irreps` writes a sum of ``Irrep``, ``Scalar``, ``PseudoScalar`` and ``V`` (e3nn's ``1o``: the same basis)
back in e3nn's canonical form ``"16x0e+8x1o+2x2e"``.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import numpy as np

from symkit._checks import check_int
from symkit.groups.base import Group
from symkit.reps.core import CustomRep, Rep, Scalar, ScalarRep, SumRep, Vector, _element_for, _Leaf
from symkit.reps.coupling import _intertwiner

__all__ = ["Irrep", "from_irreps", "to_irreps", "irrep_generators"]

_PARITY = {"e": 1, "o": -1, 1: 1, -1: -1}
#: frame change: coordinates (x, y, z) of the standard real spherical harmonics are (z, x, y) of e3nn's frame
_FRAME = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
#: generators of rotations about x, y, z of R^3: (L_k)_ij = -eps_kij
_L1 = np.array([[[0, 0, 0], [0, 0, -1], [0, 1, 0]], [[0, 0, 1], [0, 0, 0], [-1, 0, 0]],
                [[0, -1, 0], [1, 0, 0], [0, 0, 0]]], dtype=np.float64)


def _axial(A: np.ndarray) -> np.ndarray:
    """Coordinates ``(a_x, a_y, a_z)`` of an antisymmetric 3x3 ``A = sum_k a_k L_k``."""
    return np.array([A[2, 1], A[0, 2], A[1, 0]])


@cache
def _standard_generators(l: int) -> np.ndarray:
    """(3, 2l+1, 2l+1): d rho of L_x, L_y, L_z on the standard real spherical harmonics of degree l (polar axis z).

    On functions, ``(L_k x) . grad`` is ``i J_k``, so in the complex basis ``Y^m`` it has the matrix ``i J_k^T``
    (``J_z = diag(m)``, ``<m+1|J_+|m> = sqrt(l(l+1) - m(m+1))``), and ``U (i J_k^T) U^H`` in the real one.
    """
    n = 2 * l + 1
    m = np.arange(-l, l + 1)
    Jp = np.zeros((n, n))
    Jp[np.arange(1, n), np.arange(n - 1)] = np.sqrt(l * (l + 1) - m[:-1] * (m[:-1] + 1))
    J = [(Jp + Jp.T) / 2, (Jp - Jp.T) / 2j, np.diag(m).astype(complex)]
    U = np.zeros((n, n), dtype=complex)  # real Y_a = sum_m U[a, m] Y^m
    U[l, l] = 1.0
    r = 1 / np.sqrt(2)
    for k in range(1, l + 1):
        U[l + k, l - k], U[l + k, l + k] = r, (-1) ** k * r  # cos-type, m = k
        U[l - k, l - k], U[l - k, l + k] = 1j * r, -1j * (-1) ** k * r  # sin-type, m = -k
    out = np.stack([U @ (1j * Jk.T) @ U.conj().T for Jk in J])
    if np.abs(out.imag).max() > 1e-12:  # pragma: no cover - a property of the closed form
        raise ArithmeticError(f"irrep_generators({l}): the real form has an imaginary part")
    return out.real


@cache
def _generators(l: int) -> np.ndarray:
    Xs = _standard_generators(l)
    out = np.stack([np.einsum("k,kij->ij", _axial(_FRAME @ L @ _FRAME.T), Xs) for L in _L1])
    out[np.abs(out) < 1e-15] = 0.0
    out.flags.writeable = False
    return out


def irrep_generators(l: int) -> np.ndarray:
    """The (3, 2l+1, 2l+1) generators of ``Irrep(l, ...)``: d rho of the rotations about x, y and z of R^3
    (``(L_k)_ij = -eps_kij``), in e3nn's basis (equal to e3nn's ``o3.so3_generators(l)``). Read-only."""
    return _generators(check_int("irrep_generators: l", l, 0))


@cache
def _top_coupling(l: int) -> np.ndarray:
    """C_l (3(2l-1), 2l+1), l >= 2: orthonormal columns with ``(X^{l-1} ⊗ 1 + 1 ⊗ L) C_l = C_l X^l``."""
    P = np.stack([np.kron(a, np.eye(3)) + np.kron(np.eye(2 * l - 1), b) for a, b in zip(_generators(l - 1), _L1)])
    w, S = np.linalg.eigh(-sum(g @ g for g in P))  # Casimir: l(l+1) on the top component, at most (l-1)l below
    S = S[:, w > l * l]
    if S.shape[1] != 2 * l + 1:  # pragma: no cover - a property of the coupling
        raise ArithmeticError(f"Irrep: D_{l - 1} x D_1 has {S.shape[1]} dimensions of degree {l}")
    C = S @ _intertwiner(np.stack([S.T @ g @ S for g in P]), _generators(l))
    C[np.abs(C) < 1e-13] = 0.0  # the structural zeros of the Clebsch-Gordan coefficients
    U, _, Vt = np.linalg.svd(C, full_matrices=False)  # the nearest isometry: C^T C = I to rounding
    C = U @ Vt
    C[np.abs(C) < 1e-15] = 0.0
    C.flags.writeable = False
    return C


def _wigner(l: int, R: np.ndarray) -> np.ndarray:
    """D^l(R) of a rotation R, by the coupling recursion (``irrep_generators(1)`` is ``_L1`` itself: D^1(R) = R)."""
    if l == 0:
        return np.ones((1, 1))
    D = R
    for k in range(2, l + 1):
        C = _top_coupling(k)
        D = C.T @ np.kron(D, R) @ C
    return D


def _parity(what: str, p: Any, l: int) -> int:
    if isinstance(p, str) and p == "y":
        return (-1) ** l
    try:
        return _PARITY[p]
    except (KeyError, TypeError):
        raise ValueError(f"{what}: parity must be 1, -1, 'e', 'o' or 'y' ((-1)^l), got {p!r}") from None


def _check_group(what: str, G: Any) -> Group:
    if not isinstance(G, Group):
        raise TypeError(f"{what}: expected a Group, got {type(G).__name__} {G!r}")
    if G.d != 3 or G.is_complex or not G.is_orthogonal:
        raise ValueError(f"{what}: the irreps of O(3) act for SO(3), O(3) or a subgroup of O(3) on R^3, got {G}")
    return G


class Irrep(_Leaf):
    """The real irrep of O(3) of degree ``l`` and parity ``p`` (1 / 'e' even, -1 / 'o' odd, 'y' for (-1)^l), in
    e3nn's basis (module docstring); ``Irrep(2, "e")`` is unbound (bind it with a group: ``Irrep(2, "e")(O(3))``).

    ``rho(g)`` takes any orthogonal 3x3 matrix; ``drho(A)`` an antisymmetric one. Orthogonal, so its dual is
    itself. ``G`` is SO(3), O(3) or a subgroup acting on R^3 (``restrict`` reads it with one)."""

    def __init__(self, l: int, p: int | str, G: Group | None = None) -> None:
        self.l = check_int("Irrep: l", l, 0)
        self.p = _parity(f"Irrep({self.l}, p)", p, self.l)
        self._G = None if G is None else _check_group(f"Irrep({self.l}, {p!r}, G)", G)

    @property
    def label(self) -> str:
        """e3nn's name of the irrep, e.g. ``"2e"``."""
        return f"{self.l}{'e' if self.p == 1 else 'o'}"

    @property
    def G(self) -> Group | None:
        return self._G

    def groups(self) -> frozenset:
        return frozenset() if self._G is None else frozenset(self._G.factors)

    @property
    def is_bound(self) -> bool:
        return self._G is not None

    def _bind(self, G: Group) -> Rep:
        return Irrep(self.l, self.p, G) if self._G is None else self

    def _rebind(self, G: Group, H: Group) -> Rep:
        return Irrep(self.l, self.p, H) if self._G == G else self

    @property
    def size(self) -> int:
        return 2 * self.l + 1

    def _key(self) -> tuple:
        return ("Irrep", self.l, self.p, self._G)

    def __repr__(self) -> str:
        return f"Irrep({self.label})" if self._G is None else f"Irrep({self.label}, {self._G})"

    def _bound(self) -> Group:
        if self._G is None:
            raise ValueError(f"{self!r} is not bound to a group; call it with a group first, e.g. {self!r}(O(3))")
        return self._G

    def rho(self, g: Any) -> np.ndarray:
        M = np.asarray(_element_for(g, self._bound(), f"{self!r}.rho"))
        if np.iscomplexobj(M):
            if np.abs(M.imag).max() > 0:
                raise ValueError(f"{self!r}.rho: expected a real orthogonal 3x3 matrix, got a complex one")
            M = M.real
        M = M.astype(np.float64)
        dev = np.abs(M.T @ M - np.eye(3)).max() if np.all(np.isfinite(M)) else np.inf
        if not dev <= 1e-6:
            raise ValueError(f"{self!r}.rho: expected an orthogonal 3x3 matrix (an element of O(3)), got one with "
                             f"max |g^T g - I| = {dev:.3g}")
        if np.linalg.det(M) > 0:
            return _wigner(self.l, M)
        return self.p * _wigner(self.l, -M)

    def drho(self, A: Any) -> np.ndarray:
        A = np.asarray(_element_for(A, self._bound(), f"{self!r}.drho"))
        scale = float(np.abs(A).max()) if A.size and np.all(np.isfinite(A)) else np.inf
        if not np.abs(A + A.T).max() <= 1e-8 * max(1.0, scale):
            raise ValueError(f"{self!r}.drho: expected an antisymmetric 3x3 matrix (an element of so(3))")
        return np.einsum("k,kij->ij", _axial(A), _generators(self.l))

    @property
    def T(self) -> Rep:
        return self

    @property
    def is_permutation(self) -> bool:
        return self.l == 0 and self.p == 1

    @property
    def is_orthogonal(self) -> bool:
        return True


# ---------------------------------------------------------------------------------------------- Irreps strings
_TERM = re.compile(r"^\s*(?:(\d+)\s*x\s*)?(\d+)\s*([eoy])\s*$")
_EXAMPLE = "'16x0e + 8x1o + 2x2e'"


def _terms(irreps: Any) -> list[tuple[int, int, int]]:
    """(mul, l, p) of every term of an Irreps string or a sequence of (mul, (l, p)) pairs (an e3nn ``Irreps``)."""
    if isinstance(irreps, str):
        if not irreps.strip():
            return []
        out = []
        for term in irreps.split("+"):
            m = _TERM.match(term)
            if m is None:
                raise ValueError(f"from_irreps: cannot read {irreps!r}: the term {term.strip()!r} is not of the "
                                 f"form [<mul>x]<l><parity> with parity e, o or y (e.g. {_EXAMPLE})")
            l = int(m.group(2))
            out.append((1 if m.group(1) is None else int(m.group(1)), l, _parity("from_irreps", m.group(3), l)))
        return out
    try:
        pairs = list(irreps)
    except TypeError:
        raise TypeError(f"from_irreps: expected an Irreps string such as {_EXAMPLE} or a sequence of "
                        f"(mul, (l, p)) pairs, got {type(irreps).__name__} {irreps!r}") from None
    out = []
    for pair in pairs:
        try:
            mul, (l, p) = pair
        except (TypeError, ValueError):
            raise TypeError(f"from_irreps: expected (mul, (l, p)) pairs (as in an e3nn Irreps), got {pair!r} in "
                            f"{irreps!r}") from None
        l = check_int(f"from_irreps: l of {pair!r}", l, 0)
        out.append((check_int(f"from_irreps: multiplicity of {pair!r}", mul, 0), l, _parity("from_irreps", p, l)))
    return out


def from_irreps(irreps: Any, G: Group | None = None) -> Rep:
    """The symkit rep of an e3nn Irreps string (``"16x0e + 8x1o + 2x2e"``, ``"1o"``, ``""``) or sequence of
    ``(mul, (l, p))`` pairs (an ``e3nn.o3.Irreps``), laid out as e3nn lays it out: the sum of ``mul`` copies of
    ``Irrep(l, p, G)`` term by term (``0e`` is ``Scalar``; equal neighbouring terms merge, ``0x`` terms drop out).
    A single irrep of multiplicity 1 is returned as that ``Irrep``. ``G=None`` leaves it unbound (``rep(O(3))``)."""
    if G is not None:
        _check_group("from_irreps", G)
    parts: list[tuple[Rep, int]] = []
    for mul, l, p in _terms(irreps):
        parts.append((Scalar if (l, p) == (0, 1) else Irrep(l, p, G), mul))
    parts = [(r, m) for r, m in parts if m]
    if len(parts) == 1 and parts[0][1] == 1 and isinstance(parts[0][0], Irrep):
        return parts[0][0]
    return SumRep(parts)


def _label(leaf: Rep, rep: Rep) -> str:
    if isinstance(leaf, ScalarRep):
        return "0e"
    if isinstance(leaf, Irrep):
        return leaf.label
    if isinstance(leaf, CustomRep) and leaf.name == "PseudoScalar" and leaf.size == 1:
        return "0o"
    if isinstance(leaf, Vector) and leaf.G is not None:
        _check_group(f"to_irreps({rep!r})", leaf.G)
        return "1o"  # e3nn's degree-1 basis is (x, y, z): the same matrices as V
    raise ValueError(f"to_irreps: {rep!r} has the part {leaf!r}, which is not an irrep of O(3); expected a sum of "
                     "Irrep, Scalar, PseudoScalar and V (a tensor product such as V⊗V has no Irreps string "
                     "until it is decomposed)")


def to_irreps(rep: Rep) -> str:
    """The e3nn Irreps string of ``rep``, a sum of ``Irrep``, ``Scalar``, ``PseudoScalar`` and ``V`` (bound to
    SO(3), O(3) or a subgroup on R^3), in e3nn's canonical form (``"16x0e+8x1o+2x2e"``, ``""`` for the empty sum):
    ``o3.Irreps(to_irreps(rep))`` lays out the same numbers in the same order."""
    if not isinstance(rep, Rep):
        raise TypeError(f"to_irreps: expected a Rep, got {type(rep).__name__} {rep!r}")
    parts = rep.parts if isinstance(rep, SumRep) else ((rep, 1),)
    terms: list[list] = []
    for leaf, m in parts:
        if isinstance(leaf, SumRep):  # pragma: no cover - SumRep flattens its summands
            raise ValueError(f"to_irreps: nested sum {leaf!r} in {rep!r}")
        label = _label(leaf, rep)
        if terms and terms[-1][1] == label:
            terms[-1][0] += m
        else:
            terms.append([m, label])
    return "+".join(f"{m}x{label}" for m, label in terms)
