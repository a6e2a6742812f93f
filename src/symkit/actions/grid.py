"""Finite groups acting on feature spaces by permuting entries, and the lifted action on layers.

A feature space of the network is ``R^{c x shape}``: ``c`` channels of a grid (an ``(n, n)`` image, an ``(n,)``
vector, an ``(n, n)`` adjacency matrix, or ``()`` for invariant features). A :class:`PermAction` is a finite group
acting on the grid by a permutation of its entries, the same on every channel (notes A.3, Ex. 2-4). Group
elements are small hashable tuples; all actions of one network share the group (``group_key``), so the same element
acts on every space, e.g. a translation on the image spaces and trivially on the invariant head.

Images are transformed with ``torch.roll`` / ``torch.rot90`` on the ``(n, n)`` view and permutations with index
gathers: no dense ``d x d`` matrix is formed. The lifted representation on a layer ``A in Hom(X_in, X_out)`` is
(paper Eq. 8)

    rho_bar(g) A = rho_out(g) A rho_in(g)^{-1},

which for permutation representations is the gather of ``g`` applied to the output grid axes and to the input grid
axes of the weight tensor ``(c_out, c_in, *shape_out, *shape_in)``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterator, Sequence

import numpy as np
import torch

from symkit._checks import check_int
from symkit.groups import Group

__all__ = [
    "PermAction", "CyclicTranslations2D", "CyclicTranslations1D", "Rotations90", "P4Maps", "TranslationsRotations",
    "Permutations", "GroupAction", "TrivialAction", "lift", "lift_inverse", "act",
]

Element = Hashable


class PermAction:
    """A finite group acting on ``R^shape`` by permuting entries (subclasses fix the group and the grid).

    ``act(x, g, dims)`` applies ``rho(g)`` to the axes ``dims`` of ``x``; ``perm(g)`` is the flat index array ``p``
    with ``(rho(g) x).ravel() = x.ravel()[p]``.
    """

    shape: tuple[int, ...] = ()
    name: str = "PermAction"

    # -------------------------------------------------------------- group structure (override)
    @property
    def group_key(self) -> tuple:
        """Actions with equal keys are actions of the same abstract group (same element set)."""
        raise NotImplementedError

    @property
    def order(self) -> int:
        raise NotImplementedError

    def elements(self) -> Iterator[Element]:
        """Every group element, identity first."""
        raise NotImplementedError

    def identity(self) -> Element:
        return next(iter(self.elements()))

    def inverse(self, g: Element) -> Element:
        raise NotImplementedError

    def sample(self, generator: torch.Generator | None = None) -> Element:
        """One exactly Haar-uniform element (uniform on the finite group)."""
        raise NotImplementedError

    def generators(self) -> list[Element]:
        """Elements generating the group."""
        raise NotImplementedError

    # -------------------------------------------------------------- the action (override one of the two)
    def perm(self, g: Element) -> np.ndarray:
        """Flat index array p with ``(rho(g) x).ravel() == x.ravel()[p]`` (int64, length ``size``)."""
        idx = torch.arange(self.size).reshape(self.shape)
        return self.act(idx, g, tuple(range(len(self.shape)))).reshape(-1).numpy().astype(np.int64)

    def act(self, x: torch.Tensor, g: Element, dims: Sequence[int]) -> torch.Tensor:
        """``rho(g)`` applied to the axes ``dims`` of ``x`` (which must have this action's grid shape)."""
        dims = _check_dims(self, x, dims)
        if not dims:
            return x
        p = torch.as_tensor(self.perm(g), device=x.device)
        moved = torch.movedim(x, dims, tuple(range(x.ndim - len(dims), x.ndim)))
        flat = moved.reshape(*moved.shape[: x.ndim - len(dims)], self.size)
        out = flat[..., p].reshape(moved.shape)
        return torch.movedim(out, tuple(range(x.ndim - len(dims), x.ndim)), dims)

    # -------------------------------------------------------------- derived
    @property
    def size(self) -> int:
        return int(math.prod(self.shape))

    @property
    def is_trivial(self) -> bool:
        return self.size <= 1 or isinstance(self, TrivialAction)

    def trivial(self) -> TrivialAction:
        """The same group acting trivially on invariant features (shape ``()``)."""
        return TrivialAction(self)

    def matrix(self, g: Element) -> np.ndarray:
        """Dense permutation matrix of ``rho(g)`` (for tests and the core basis solver only)."""
        m = np.zeros((self.size, self.size))
        m[np.arange(self.size), self.perm(g)] = 1.0
        return m

    # -------------------------------------------------------------- bridges to the rest of symkit
    def flows(self) -> tuple:
        """The one-parameter image flows (:class:`~symkit.actions.ImageFlow`) whose samples this action is: the Lie
        algebra of its continuous hull, used for Lie derivatives (thesis ch. 4). Empty when the action has no
        continuous counterpart (permutations of nodes or set elements)."""
        return ()

    def to_group(self) -> Group:
        """This action as a core matrix group on ``R^size``: its generators as permutation matrices.

        ``V(action.to_group())`` is then the representation of the action on one channel of the flattened grid, so
        the core solver gives its equivariant maps (``(V >> V).equivariant_basis()``). Cached per action.
        """
        if getattr(self, "_group", None) is None:
            mats = [self.matrix(g) for g in self.generators()]
            self._group = Group(discrete_generators=np.stack(mats) if mats else None, d=max(self.size, 1),
                                name=self.name)
        return self._group

    def __repr__(self) -> str:
        return self.name


def _check_dims(action: PermAction, x: torch.Tensor, dims: Sequence[int]) -> tuple[int, ...]:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{action.name}.act: expected a torch.Tensor, got {type(x).__name__}")
    dims = tuple(int(d) % max(x.ndim, 1) for d in dims)
    if len(dims) != len(action.shape) or tuple(x.shape[d] for d in dims) != action.shape:
        raise ValueError(
            f"{action.name}.act: axes {dims} of a tensor of shape {tuple(x.shape)} should have the grid shape "
            f"{action.shape}"
        )
    return dims


def _uniform_int(high: int, generator: torch.Generator | None) -> int:
    return int(torch.randint(high, (1,), generator=generator).item())


class _GridGroup(PermAction):
    """Elements (a, b, r) of Z_n^2 x| C4 acting on (n, n) grids by rot90^r after roll by (a, b); subgroups restrict
    the ranges of a, b and r."""

    def __init__(self, n: int, shifts: tuple[int, int], rotations: int, name: str) -> None:
        self.n = n
        self._ranges = (shifts[0], shifts[1], rotations)
        self.shape = (n, n)
        self.name = name

    @property
    def group_key(self) -> tuple:
        return ("grid", self.n, self._ranges)

    @property
    def order(self) -> int:
        return int(math.prod(self._ranges))

    def elements(self) -> Iterator[Element]:
        a, b, r = self._ranges
        for k in range(r):
            for i in range(a):
                for j in range(b):
                    yield (i, j, k)

    def sample(self, generator: torch.Generator | None = None) -> Element:
        a, b, r = self._ranges
        return (_uniform_int(a, generator), _uniform_int(b, generator), _uniform_int(r, generator))

    def _table(self) -> dict[bytes, Element]:
        if not hasattr(self, "_perm_table"):
            self._perm_table = {self.perm(g).tobytes(): g for g in self.elements()}
        return self._perm_table

    def compose(self, g: Element, h: Element) -> Element:
        """The element acting as rho(g) rho(h)."""
        # rho(g) rho(h) x = (x[p_h])[p_g] = x[p_h[p_g]]
        return self._table()[self.perm(h)[self.perm(g)].tobytes()]

    def inverse(self, g: Element) -> Element:
        return self._table()[np.argsort(self.perm(g)).astype(np.int64).tobytes()]

    def generators(self) -> list[Element]:
        a, b, r = self._ranges
        gens = []
        if a > 1:
            gens.append((1, 0, 0))
        if b > 1:
            gens.append((0, 1, 0))
        if r > 1:
            gens.append((0, 0, 1))
        return gens

    def flows(self) -> tuple:
        """Cyclic shifts along rows sample ``translate_y``, along columns ``translate_x``; quarter turns sample
        ``rotate`` (the continuous groups agree with the discrete ones up to the wrap-around of cyclic shifts)."""
        from symkit.actions.flows import get_transform

        a, b, r = self._ranges
        names = [n for n, k in (("translate_x", b), ("translate_y", a), ("rotate", r)) if k > 1]
        return tuple(get_transform(n) for n in names)

    def act(self, x: torch.Tensor, g: Element, dims: Sequence[int]) -> torch.Tensor:
        dims = _check_dims(self, x, dims)
        a, b, r = g
        if a or b:
            x = torch.roll(x, shifts=(a, b), dims=dims)
        if r % 4:
            x = torch.rot90(x, r % 4, dims=dims)
        return x


class CyclicTranslations2D(_GridGroup):
    """Z_n^2 acting on (n, n) images by cyclic translation, (rho(k, l) x)_{ij} = x_{i-k, j-l} (paper Ex. 2)."""

    def __init__(self, n: int) -> None:
        n = check_int("CyclicTranslations2D: grid size n", n, 1)
        super().__init__(n, (n, n), 1, f"CyclicTranslations2D({n})")


class CyclicTranslations1D(_GridGroup):
    """Z_n acting on (n, n) images by cyclic translation along one axis (App. E.2, Eq. 52; axis 1 = x-shifts)."""

    def __init__(self, n: int, axis: int = 1) -> None:
        n = check_int("CyclicTranslations1D: grid size n", n, 1)
        if axis not in (0, 1):
            raise ValueError(f"CyclicTranslations1D: axis must be 0 or 1, got {axis!r}")
        self.axis = axis
        super().__init__(n, (n, 1) if axis == 0 else (1, n), 1, f"CyclicTranslations1D({n}, axis={axis})")


class Rotations90(_GridGroup):
    """C4 acting on (n, n) images by rotations by multiples of 90 degrees, ``torch.rot90`` (paper Ex. 4)."""

    def __init__(self, n: int) -> None:
        n = check_int("Rotations90: grid size n", n, 1)
        super().__init__(n, (1, 1), 4, f"Rotations90({n})")


class P4Maps(_GridGroup):
    """C4 acting on p4 feature maps ``(channels * 4, n, n)`` laid out filter-major, as :mod:`symkit.nn.groupconv`
    lays them out (channel ``c * 4 + s``: filter ``c`` turned ``s`` quarter turns). A quarter turn rotates every map
    (``torch.rot90``) and moves orientation ``s`` to ``s + 1 (mod 4)``; the elements are those of
    :class:`Rotations90` (same ``group_key``), so a lifting convolution is checked from ``Rotations90(n)`` to
    ``P4Maps(n, c)``."""

    def __init__(self, n: int, channels: int) -> None:
        n = check_int("P4Maps: grid size n", n, 1)
        self.channels = check_int("P4Maps: channels", channels, 1)
        super().__init__(n, (1, 1), 4, f"P4Maps({n}, channels={self.channels})")
        self.shape = (4 * self.channels, n, n)

    def act(self, x: torch.Tensor, g: Element, dims: Sequence[int]) -> torch.Tensor:
        dims = _check_dims(self, x, dims)
        r = g[2] % 4
        if not r:
            return x
        moved = torch.movedim(x, dims, (-3, -2, -1))
        maps = moved.reshape(*moved.shape[:-3], self.channels, 4, self.n, self.n).roll(r, dims=-3)
        turned = torch.rot90(maps, r, dims=(-2, -1)).reshape(moved.shape)
        return torch.movedim(turned, (-3, -2, -1), dims)

    def flows(self) -> tuple:
        """None: an image flow would rotate the maps but not move the orientation axis."""
        return ()


class TranslationsRotations(_GridGroup):
    """Z_n^2 x| C4 acting on (n, n) images by a cyclic translation followed by a rotation (App. E.2, Eq. 53)."""

    def __init__(self, n: int) -> None:
        n = check_int("TranslationsRotations: grid size n", n, 1)
        super().__init__(n, (n, n), 4, f"TranslationsRotations({n})")


class Permutations(PermAction):
    """S_n acting on R^n (``on="vector"``) or on R^{n x n} by A -> P A P^T (``on="matrix"``, paper Ex. 3).

    Elements are tuples ``pi`` with ``(rho(pi) v)_i = v_{pi^{-1}(i)}``. ``elements()`` enumerates all n! of them
    (refused above 10^6); ``sample`` draws uniformly with ``torch.randperm``.
    """

    def __init__(self, n: int, on: str = "matrix") -> None:
        self.n = check_int("Permutations: grid size n", n, 1)
        if on not in ("vector", "matrix"):
            raise ValueError(f"Permutations: on must be 'vector' or 'matrix', got {on!r}")
        self.on = on
        self.shape = (self.n,) if on == "vector" else (self.n, self.n)
        self.name = f"Permutations({self.n}, on={on!r})"

    @property
    def group_key(self) -> tuple:
        return ("sym", self.n)

    @property
    def order(self) -> int:
        return math.factorial(self.n)

    def elements(self) -> Iterator[Element]:
        if self.order > 10**6:
            raise ValueError(f"{self.name}: {self.order} elements are too many to enumerate; sample instead")
        return itertools.permutations(range(self.n))

    def inverse(self, g: Element) -> Element:
        return tuple(int(i) for i in np.argsort(np.asarray(g)))

    def sample(self, generator: torch.Generator | None = None) -> Element:
        return tuple(int(i) for i in torch.randperm(self.n, generator=generator))

    def generators(self) -> list[Element]:
        if self.n < 2:
            return []
        cyc = tuple(int(i) for i in np.roll(np.arange(self.n), 1))
        if self.n == 2:
            return [cyc]
        swap = list(range(self.n))
        swap[0], swap[1] = 1, 0
        return [cyc, tuple(swap)]

    def act(self, x: torch.Tensor, g: Element, dims: Sequence[int]) -> torch.Tensor:
        dims = _check_dims(self, x, dims)
        inv = torch.as_tensor(np.argsort(np.asarray(g)), device=x.device)
        for d in dims:
            x = torch.index_select(x, d, inv)
        return x


class GroupAction(PermAction):
    """A finite permutation group of the core (``symkit.groups.Group``, e.g. ``Z(n)``, ``S(n)`` or
    ``Group(discrete_generators=[...])``) acting on ``R^d`` through its base representation ``V(G)``."""

    def __init__(self, G: object, max_order: int = 100_000) -> None:
        from symkit.groups import Group

        if not isinstance(G, Group):
            raise TypeError(f"GroupAction: expected a symkit Group, got {type(G).__name__}")
        if not (G.is_finite and G.is_permutation):
            raise ValueError(f"GroupAction: {G.name} must be a finite permutation group")
        self.G = G
        mats = G.elements(max_order)
        # (rho x)_i = sum_j M_ij x_j = x_{p[i]}
        self._perms = [tuple(int(i) for i in np.argmax(m, axis=1)) for m in mats]
        self._index = {p: k for k, p in enumerate(self._perms)}
        self.shape = (G.d,)
        self.name = f"GroupAction({G.name})"

    @property
    def group_key(self) -> tuple:
        return ("core", self.G.fingerprint() if hasattr(self.G, "fingerprint") else repr(self.G))

    @property
    def order(self) -> int:
        return len(self._perms)

    def elements(self) -> Iterator[Element]:
        return iter(self._perms)

    def inverse(self, g: Element) -> Element:
        return tuple(int(i) for i in np.argsort(np.asarray(g)))

    def sample(self, generator: torch.Generator | None = None) -> Element:
        return self._perms[_uniform_int(self.order, generator)]

    def generators(self) -> list[Element]:
        return [tuple(int(i) for i in np.argmax(m, axis=1)) for m in self.G.discrete_generators]

    def perm(self, g: Element) -> np.ndarray:
        return np.asarray(g, dtype=np.int64)


class TrivialAction(PermAction):
    """The group of ``base`` acting trivially on invariant features (grid shape ``()``)."""

    def __init__(self, base: PermAction) -> None:
        if not isinstance(base, PermAction):
            raise TypeError(f"TrivialAction: expected a PermAction, got {type(base).__name__}")
        self.base = base.base if isinstance(base, TrivialAction) else base
        self.shape = ()
        self.name = f"Trivial[{self.base.name}]"

    @property
    def group_key(self) -> tuple:
        return self.base.group_key

    @property
    def order(self) -> int:
        return self.base.order

    def elements(self) -> Iterator[Element]:
        return self.base.elements()

    def inverse(self, g: Element) -> Element:
        return self.base.inverse(g)

    def sample(self, generator: torch.Generator | None = None) -> Element:
        return self.base.sample(generator)

    def generators(self) -> list[Element]:
        return self.base.generators()

    def act(self, x: torch.Tensor, g: Element, dims: Sequence[int]) -> torch.Tensor:
        return x

    def perm(self, g: Element) -> np.ndarray:
        return np.zeros(1, dtype=np.int64)


def act(action: PermAction, x: torch.Tensor, g: Element) -> torch.Tensor:
    """``rho(g)`` applied to the trailing grid axes of a batch ``x`` of shape ``(..., *action.shape)``."""
    k = len(action.shape)
    return action.act(x, g, tuple(range(x.ndim - k, x.ndim)))


def lift(A: torch.Tensor, g: Element, action_in: PermAction, action_out: PermAction) -> torch.Tensor:
    """rho_bar(g) A = rho_out(g) A rho_in(g)^{-1} (paper Eq. 8) for ``A`` of shape (c_out, c_in, *out, *in)."""
    if action_in.group_key != action_out.group_key:
        raise ValueError(f"lift: {action_in.name} and {action_out.name} are actions of different groups")
    ko, ki = len(action_out.shape), len(action_in.shape)
    if A.ndim != 2 + ko + ki:
        raise ValueError(
            f"lift: expected a layer tensor (c_out, c_in, *{action_out.shape}, *{action_in.shape}), "
            f"got shape {tuple(A.shape)}"
        )
    A = action_out.act(A, g, tuple(range(2, 2 + ko)))
    # for a permutation P: (A P^{-1})[a, b] = A[a, p[b]], i.e. rho(g) acting on the input axes
    return action_in.act(A, g, tuple(range(2 + ko, 2 + ko + ki)))


def lift_inverse(A: torch.Tensor, g: Element, action_in: PermAction, action_out: PermAction) -> torch.Tensor:
    """rho_bar(g)^{-1} A = rho_bar(g^{-1}) A."""
    return lift(A, action_out.inverse(g), action_in, action_out)
