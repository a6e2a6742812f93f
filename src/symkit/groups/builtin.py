"""Built-in groups (thesis §2.3, §A.1.5, Table 1.8 of the notes), with the generator conventions of the reference."""

from __future__ import annotations

import numpy as np

from symkit._checks import check_int
from symkit.groups.base import Group

__all__ = [
    "Trivial", "Z", "S", "C", "D", "SO", "O", "SO13p", "SO13", "O13", "Lorentz", "SO11p", "O11", "Sp", "SU", "U",
    "SL", "GL", "Scaling", "Cube", "RubiksCube", "ZksZnxZn", "Embed", "SO2eR3", "O2eR3", "DkeR3",
]


def _perm_matrix(p: np.ndarray) -> np.ndarray:
    """Matrix h with h e_j = e_{p[j]}."""
    n = len(p)
    m = np.zeros((n, n))
    m[p, np.arange(n)] = 1.0
    return m


class _Builtin(Group):
    _args: tuple = ()

    def _key(self) -> tuple:
        return (type(self).__name__,) + tuple(self._args)

    def __reduce__(self):
        return (type(self), self._args)


def _so_algebra(n: int) -> np.ndarray:
    out = []
    for i in range(n):
        for j in range(i):
            A = np.zeros((n, n))
            A[i, j] = 1.0
            A[j, i] = -1.0
            out.append(A)
    return np.array(out).reshape(len(out), n, n)


class Trivial(_Builtin):
    """The trivial group acting on R^n (every tensor is invariant)."""

    def __init__(self, n: int) -> None:
        n = check_int("Trivial(n)", n, 1)
        self._args = (n,)
        super().__init__(None, None, name=f"Trivial({n})", d=n)


class Z(_Builtin):
    """Cyclic group Z_n acting on R^n by the shift P[n,1,...,n-1] (§2.4.3, Table A.1)."""

    def __init__(self, n: int) -> None:
        n = check_int("Z(n)", n, 1)
        self._args = (n,)
        super().__init__([_perm_matrix(np.roll(np.arange(n), 1))], None, name=f"Z({n})", d=n)


class S(_Builtin):
    """Symmetric group S_n on R^n with the two generators of §2.4.3: an n-cycle and a transposition."""

    def __init__(self, n: int) -> None:
        n = check_int("S(n)", n, 1)
        self._args = (n,)
        gens = []
        if n >= 2:
            gens.append(_perm_matrix(np.roll(np.arange(n), 1)))
            if n >= 3:
                t = np.arange(n)
                t[[0, 1]] = [1, 0]
                gens.append(_perm_matrix(t))
        super().__init__(gens or None, None, name=f"S({n})", d=n)


class C(_Builtin):
    """Cyclic group C_k of rotations of R^2 by 2*pi/k."""

    def __init__(self, k: int) -> None:
        k = check_int("C(k)", k, 1)
        self._args = (k,)
        t = 2 * np.pi / k
        R = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])
        R[np.abs(R) < 1e-15] = 0.0
        super().__init__([R], None, name=f"C({k})", d=2)


class D(_Builtin):
    """Dihedral group D_k of R^2: rotation by 2*pi/k and the reflection diag(-1, 1)."""

    def __init__(self, k: int) -> None:
        k = check_int("D(k)", k, 1)
        self._args = (k,)
        t = 2 * np.pi / k
        R = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])
        R[np.abs(R) < 1e-15] = 0.0
        super().__init__([R, np.diag([-1.0, 1.0])], None, name=f"D({k})", d=2)


class SO(_Builtin):
    """Special orthogonal group SO(n): so(n) = antisymmetric matrices (§A.1.5.4, Table A.4)."""

    def __init__(self, n: int) -> None:
        n = check_int("SO(n)", n, 1)
        self._args = (n,)
        self.brauer = ("form", np.eye(n), True)
        super().__init__(None, _so_algebra(n) if n > 1 else None, name=f"SO({n})", d=n)


class O(_Builtin):  # noqa: E742
    """Orthogonal group O(n): so(n) plus the reflection diag(-1, 1, ..., 1) (Table A.5)."""

    def __init__(self, n: int) -> None:
        n = check_int("O(n)", n, 1)
        self._args = (n,)
        self.brauer = ("form", np.eye(n), False)
        h = np.eye(n)
        h[0, 0] = -1.0
        super().__init__([h], _so_algebra(n) if n > 1 else None, name=f"O({n})", d=n)


def _lorentz_algebra() -> np.ndarray:
    out = []
    for i in range(3):
        A = np.zeros((4, 4))
        A[i + 1, 0] = A[0, i + 1] = 1.0
        out.append(A)
    for A3 in _so_algebra(3):
        A = np.zeros((4, 4))
        A[1:, 1:] = A3
        out.append(A)
    return np.array(out)


_ETA4 = np.diag([1.0, -1.0, -1.0, -1.0])


class SO13p(_Builtin):
    """Proper orthochronous Lorentz group SO+(1,3), metric diag(1,-1,-1,-1) (§A.1.5.5, Table A.6)."""

    z_scale = np.array([0.3, 0.3, 0.3, 1.0, 1.0, 1.0])

    def __init__(self) -> None:
        self._args = ()
        self.brauer = ("form", _ETA4, True)
        super().__init__(None, _lorentz_algebra(), name="SO+(1,3)", d=4)


class SO13(_Builtin):
    """SO(1,3): SO+(1,3) plus -I (time reversal combined with parity)."""

    z_scale = np.array([0.3, 0.3, 0.3, 1.0, 1.0, 1.0])

    def __init__(self) -> None:
        self._args = ()
        self.brauer = ("form", _ETA4, True)
        super().__init__([-np.eye(4)], _lorentz_algebra(), name="SO(1,3)", d=4)


class O13(_Builtin):
    """Full Lorentz group O(1,3): SO+(1,3) plus -I and time reversal diag(-1,1,1,1)."""

    z_scale = np.array([0.3, 0.3, 0.3, 1.0, 1.0, 1.0])

    def __init__(self) -> None:
        self._args = ()
        self.brauer = ("form", _ETA4, False)
        super().__init__([-np.eye(4), np.diag([-1.0, 1, 1, 1])], _lorentz_algebra(), name="O(1,3)", d=4)


def Lorentz() -> O13:
    """The full Lorentz group O(1,3)."""
    return O13()


class SO11p(_Builtin):
    """Identity component of the 1+1 Lorentz group (one boost)."""

    def __init__(self) -> None:
        self._args = ()
        self.brauer = ("form", np.diag([1.0, -1.0]), True)
        super().__init__(None, [np.array([[0.0, 1.0], [1.0, 0.0]])], name="SO+(1,1)", d=2)


class O11(_Builtin):
    """O(1,1): the boost plus parity diag(1,-1) and time reversal diag(-1,1)."""

    def __init__(self) -> None:
        self._args = ()
        self.brauer = ("form", np.diag([1.0, -1.0]), False)
        super().__init__(
            [np.diag([1.0, -1.0]), np.diag([-1.0, 1.0])], [np.array([[0.0, 1.0], [1.0, 0.0]])], name="O(1,1)", d=2
        )


class Sp(_Builtin):
    """Real symplectic group Sp(n) on R^{2n}, preserving Omega = [[0, I], [-I, 0]] (§A.1.5.6, Table A.7)."""

    def __init__(self, n: int) -> None:
        n = check_int("Sp(n)", n, 1)
        self._args = (n,)
        m = n
        Om = np.zeros((2 * m, 2 * m))
        Om[:m, m:] = np.eye(m)
        Om[m:, :m] = -np.eye(m)
        self.brauer = ("form", Om, False)
        out = []
        for i in range(m):
            for j in range(m):
                A = np.zeros((2 * m, 2 * m))
                A[i, j] = 1.0
                A[m + j, m + i] = -1.0
                out.append(A)
        for i in range(m):
            for j in range(i, m):
                A = np.zeros((2 * m, 2 * m))
                A[i, m + j] = A[j, m + i] = 1.0
                out.append(A)
                B = np.zeros((2 * m, 2 * m))
                B[m + i, j] = B[m + j, i] = 1.0
                out.append(B)
        super().__init__(None, np.array(out), name=f"Sp({n})", d=2 * n)


def _u_algebra(n: int, traceless: bool) -> np.ndarray:
    out = [A.astype(np.complex128) for A in _so_algebra(n)]
    for i in range(n):
        for j in range(i):
            A = np.zeros((n, n), dtype=np.complex128)
            A[i, j] = A[j, i] = 1j
            out.append(A)
    if traceless:
        for i in range(n - 1):
            A = np.zeros((n, n), dtype=np.complex128)
            A[i, i] = 1j
            A[n - 1, n - 1] = -1j
            out.append(A)
    else:
        for i in range(n):
            A = np.zeros((n, n), dtype=np.complex128)
            A[i, i] = 1j
            out.append(A)
    return np.array(out).reshape(len(out), n, n)


class SU(_Builtin):
    """Special unitary group SU(n) on C^n (complex; §A.1.5.7, Table A.8)."""

    def __init__(self, n: int) -> None:
        n = check_int("SU(n)", n, 2)
        self._args = (n,)
        self.brauer = ("linear", None, True)
        super().__init__(None, _u_algebra(n, True), name=f"SU({n})", d=n)


class U(_Builtin):
    """Unitary group U(n) on C^n (complex)."""

    def __init__(self, n: int) -> None:
        n = check_int("U(n)", n, 1)
        self._args = (n,)
        self.brauer = ("linear", None, False)
        super().__init__(None, _u_algebra(n, False), name=f"U({n})", d=n)


class SL(_Builtin):
    """Special linear group SL(n): traceless Lie algebra (volume- and orientation-preserving maps)."""

    def __init__(self, n: int) -> None:
        n = check_int("SL(n)", n, 2)
        self._args = (n,)
        self.brauer = ("linear", None, True)
        out = []
        for i in range(n):
            for j in range(n):
                if i != j:
                    A = np.zeros((n, n))
                    A[i, j] = 1.0
                    out.append(A)
        for i in range(n - 1):
            A = np.zeros((n, n))
            A[i, i] = 1.0
            A[n - 1, n - 1] = -1.0
            out.append(A)
        super().__init__(None, np.array(out), name=f"SL({n})", d=n)

    z_scale = 0.3


class GL(_Builtin):
    """General linear group GL(n) (identity component, plus a reflection)."""

    z_scale = 0.3

    def __init__(self, n: int) -> None:
        n = check_int("GL(n)", n, 1)
        self._args = (n,)
        self.brauer = ("linear", None, False)
        out = []
        for i in range(n):
            for j in range(n):
                A = np.zeros((n, n))
                A[i, j] = 1.0
                out.append(A)
        h = np.eye(n)
        h[0, 0] = -1.0
        super().__init__([h], np.array(out), name=f"GL({n})", d=n)


class Scaling(_Builtin):
    """Positive scalings x -> e^t x of R^n."""

    def __init__(self, n: int) -> None:
        n = check_int("Scaling(n)", n, 1)
        self._args = (n,)
        super().__init__(None, [np.eye(n)], name=f"Scaling({n})", d=n)


class Cube(_Builtin):
    """Rotation group of the cube (24 elements) acting on the 6 faces (+x, -x, +y, -y, +z, -z)."""

    def __init__(self) -> None:
        self._args = ()
        # faces: 0:+x 1:-x 2:+y 3:-y 4:+z 5:-z ; quarter turn about z: +x->+y->-x->-y ; about x: +y->+z->-y->-z
        rz = np.array([2, 3, 1, 0, 4, 5])
        rx = np.array([0, 1, 4, 5, 3, 2])
        super().__init__([_perm_matrix(rz), _perm_matrix(rx)], None, name="Cube", d=6)


def _rubik_generators() -> list[np.ndarray]:
    """Quarter turns of the 6 faces as permutations of the 48 movable facets (centres excluded, Table A.3)."""
    stickers = []
    for p in np.ndindex(3, 3, 3):
        pos = np.array(p) - 1
        if np.count_nonzero(pos) < 2:
            continue  # centres and the core do not move relative to the frame
        for ax in range(3):
            if pos[ax] != 0:
                nrm = np.zeros(3, dtype=int)
                nrm[ax] = pos[ax]
                stickers.append((tuple(pos), tuple(nrm)))
    index = {s: i for i, s in enumerate(stickers)}
    gens = []
    for ax in range(3):
        for side in (1, -1):
            # quarter turn of the layer pos[ax] == side, about the axis, clockwise seen from outside
            R = np.zeros((3, 3), dtype=int)
            a, b = [i for i in range(3) if i != ax]
            R[ax, ax] = 1
            R[a, b] = -side
            R[b, a] = side
            perm = np.arange(len(stickers))
            for i, (pos, nrm) in enumerate(stickers):
                if pos[ax] == side:
                    perm[i] = index[(tuple(R @ np.array(pos)), tuple(R @ np.array(nrm)))]
            gens.append(_perm_matrix(perm))
    return gens


def _net_generators() -> list[np.ndarray]:
    """The facet permutations of the reference package's face-net construction (faces U,F,R,B,L,D, 8 facets each).

    An up-turn rotates the U grid and cycles the top rows of F,R,B,L; the other five turns are conjugates of it by
    whole-cube rotations that move faces as blocks *without* turning the facet grids. Those rotations are not
    symmetries of the sticker layout, so the generated group (order ~1.9e47) is larger than the cube group (~4.3e19).
    Table A.3 of the thesis was computed with these generators.
    """

    def pad(a: np.ndarray) -> np.ndarray:
        return np.insert(a.reshape(6, 8), 4, -1, axis=1)

    def unpad(a: np.ndarray) -> np.ndarray:
        return np.delete(a, 4, axis=1).reshape(48)

    up = pad(np.arange(48))
    up[0] = np.rot90(up[0].reshape(3, 3), 1).reshape(9)
    ring = np.array([1, 2, 3, 4])
    up[ring, :3] = up[np.roll(ring, 1), :3]
    up = unpad(up)

    def block_cycle(faces: list[int]) -> np.ndarray:
        a = pad(np.arange(48))
        f = np.array(faces)
        a[f] = a[np.roll(f, 1)]
        return unpad(a)

    rot_f = block_cycle([0, 2, 5, 4])
    rot_b = np.argsort(rot_f)
    rot_l = block_cycle([0, 1, 5, 3])
    rot_r = np.argsort(rot_l)
    perms = [
        up,
        rot_r[up[rot_l]],
        rot_b[up[rot_f]],
        rot_l[up[rot_r]],
        rot_f[up[rot_b]],
        rot_r[rot_r[up[rot_l[rot_l]]]],
    ]
    # (h x)_i = x[perm_i]  <=>  h e_j = e_{argsort(perm)_j}
    return [_perm_matrix(np.argsort(p)) for p in perms]


class RubiksCube(_Builtin):
    """The Rubik's cube group < S_48 acting on the 48 movable facets, generated by the 6 face quarter turns.

    ``RubiksCube()`` is the physical cube group (order 43,252,003,274,489,856,000), built from the 3D geometry of
    the stickers. ``RubiksCube(variant="reference")`` uses the facet permutations of the reference package's
    face-net construction, which generate a larger group; the thesis's Table A.3 (2, 6, 22) was computed with those.
    """

    def __init__(self, variant: str = "physical") -> None:
        if variant not in ("physical", "reference"):
            raise ValueError(f"RubiksCube: variant must be 'physical' or 'reference', got {variant!r}")
        self._args = (variant,)
        gens = _rubik_generators() if variant == "physical" else _net_generators()
        name = "RubiksCube" if variant == "physical" else "RubiksCube(reference)"
        super().__init__(gens, None, name=name, d=48)


def _shift(n: int) -> np.ndarray:
    return _perm_matrix(np.roll(np.arange(n), 1))


class ZksZnxZn(_Builtin):
    """Z_k ⋉ (Z_n x Z_n) on R^k ⊗ R^{n^2} (the p4 / p2 GCNN group of §2.4.3), k in {2, 4}."""

    def __init__(self, k: int, n: int) -> None:
        k = check_int("ZksZnxZn(k, n)", k, 2)
        n = check_int("ZksZnxZn(k, n)", n, 1)
        if k not in (2, 4):
            raise ValueError(f"ZksZnxZn(k, n): k must be 2 or 4 (rotations by 180 or 90 degrees), got {k}")
        self._args = (k, n)
        Sn = _shift(n)
        In = np.eye(n)
        Ik = np.eye(k)
        grid = np.arange(n * n).reshape(n, n)
        rot = np.rot90(grid, 1 if k == 4 else 2).reshape(-1)
        Rot = _perm_matrix(np.argsort(rot))
        gens = [
            np.kron(Ik, np.kron(Sn, In)),
            np.kron(Ik, np.kron(In, Sn)),
            np.kron(_shift(k), Rot),
        ]
        super().__init__(gens, None, name=f"Z{k}⋉(Z{n}×Z{n})", d=k * n * n)


class Embed(Group):
    """A group G acting on a block (`slice`) of R^d and trivially on the rest."""

    def __init__(self, G: Group, d: int, slc: slice) -> None:
        if not isinstance(G, Group):
            raise TypeError(f"Embed: expected a Group, got {type(G).__name__}")
        d = check_int("Embed(d)", d, G.d)
        idx = np.arange(d)[slc]
        if len(idx) != G.d:
            raise ValueError(f"Embed: slice {slc} selects {len(idx)} coordinates, but {G.name} has d={G.d}")
        self.base_group = G
        self._args = (G, d, (slc.start, slc.stop, slc.step))
        gens = []
        for h in G.discrete_generators:
            m = np.eye(d, dtype=h.dtype)
            m[np.ix_(idx, idx)] = h
            gens.append(m)
        alg = []
        for A in G.lie_algebra:
            m = np.zeros((d, d), dtype=A.dtype)
            m[np.ix_(idx, idx)] = A
            alg.append(m)
        super().__init__(gens or None, alg or None, name=f"{G.name}⊂R{d}", d=d)


def SO2eR3() -> Embed:
    """SO(2) rotating the xy-plane of R^3 (rotations about z)."""
    return Embed(SO(2), 3, slice(0, 2))


def O2eR3() -> Embed:
    """O(2) acting on the xy-plane of R^3."""
    return Embed(O(2), 3, slice(0, 2))


def DkeR3(k: int) -> Embed:
    """Dihedral D_k acting on the xy-plane of R^3."""
    return Embed(D(k), 3, slice(0, 2))
