"""Orthogonal projections onto the equivariant layers E and the dimensions of E (paper §3.3, App. B, D, E).

A layer is described by a :class:`LayerSpec` (input/output actions and channel counts); its weight tensor has
shape ``(c_out, c_in, *shape_out, *shape_in)``. Three families of projections onto ``Hom_G(X_in, X_out)``:

- :func:`group_average`: Lemma 2, ``Pi_E A = (1/|G|) sum_g rho_out(g) A rho_in(g)^{-1}`` (the reference).
- :func:`basis_projection`: the core solver, ``P = Q Q^T`` of ``rep_in >> rep_out`` (``symkit.reps``).
- fast special cases: FFT diagonal extraction for Z_n^2 (Eq. 42), the row-wise partial FFT for Z_n (Eq. 64), C4
  orbit averages (Eq. 46), equality-pattern means for S_n (the 15-element basis of Maron et al. on R^{n x n}),
  and ``Pi_{C4} Pi_{Z_n^2}`` for Z_n^2 x| C4 (Prop. 7). For the translations :func:`project` uses the same
  projections computed as wrapped-diagonal means (:func:`translation_projection_2d`, ``_1d``): a translation-
  equivariant map is a circular convolution, and its kernel at offset ``d`` is the mean of ``A`` along the wrapped
  diagonal ``x - y = d``. That reads ``A`` once where the FFTs make complex copies: 3-5x faster for 2-D, 1.5-3x
  for 1-D (``benchmarks/bench_dynamics.py``; the FFT functions stay as the paper's formulas).

:func:`project` picks the fast one (``method="auto"``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from symkit._checks import check_int
from symkit.actions.grid import (
    CyclicTranslations1D,
    CyclicTranslations2D,
    GroupAction,
    PermAction,
    Permutations,
    Rotations90,
    TranslationsRotations,
    TrivialAction,
    lift,
)

__all__ = [
    "LayerSpec", "group_average", "basis_projection", "fft_projection_2d", "fft_projection_1d", "c4_projection",
    "translation_projection_2d", "translation_projection_1d", "pattern_projection", "transrot_projection", "project",
    "project_vector", "dim_E", "dim_L",
    "relative_dimension", "equality_patterns", "METHODS",
]

METHODS = ("auto", "average", "basis", "fast")


@dataclass(frozen=True)
class LayerSpec:
    """A linear layer ``Hom(R^{c_in x shape_in}, R^{c_out x shape_out})`` with the group acting on both sides."""

    action_in: PermAction
    action_out: PermAction
    c_in: int = 1
    c_out: int = 1

    def __post_init__(self) -> None:
        for name in ("action_in", "action_out"):
            if not isinstance(getattr(self, name), PermAction):
                raise TypeError(f"LayerSpec.{name}: expected a PermAction, got {type(getattr(self, name)).__name__}")
        if self.action_in.group_key != self.action_out.group_key:
            raise ValueError(
                f"LayerSpec: {self.action_in.name} and {self.action_out.name} are actions of different groups"
            )
        for name in ("c_in", "c_out"):
            check_int(f"LayerSpec.{name}", getattr(self, name), 1)

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the weight tensor, (c_out, c_in, *shape_out, *shape_in)."""
        return (self.c_out, self.c_in, *self.action_out.shape, *self.action_in.shape)

    @property
    def is_trivial(self) -> bool:
        """Both spaces invariant: every layer is equivariant (e.g. the fully connected head)."""
        return self.action_in.is_trivial and self.action_out.is_trivial

    def out_dims(self) -> tuple[int, ...]:
        return tuple(range(2, 2 + len(self.action_out.shape)))

    def in_dims(self) -> tuple[int, ...]:
        k = 2 + len(self.action_out.shape)
        return tuple(range(k, k + len(self.action_in.shape)))


def _check(A: torch.Tensor, spec: LayerSpec) -> None:
    if not isinstance(spec, LayerSpec):
        raise TypeError(f"expected a LayerSpec, got {type(spec).__name__}")
    if not isinstance(A, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor layer, got {type(A).__name__}")
    if tuple(A.shape) != spec.shape:
        raise ValueError(f"layer tensor has shape {tuple(A.shape)}, expected {spec.shape} for {spec}")


# ----------------------------------------------------------------------------------------------- generic
def group_average(A: torch.Tensor, spec: LayerSpec) -> torch.Tensor:
    """Lemma 2: Pi_E A = (1/|G|) sum_{g in G} rho_out(g) A rho_in(g)^{-1}, over every element of the group."""
    _check(A, spec)
    if spec.is_trivial:
        return A.clone()
    out = torch.zeros_like(A)
    count = 0
    for g in spec.action_out.elements():
        out = out + lift(A, g, spec.action_in, spec.action_out)
        count += 1
    return out / count


_CORE_PROJECTORS: dict[tuple, object] = {}


def _core_rep_projector(spec: LayerSpec):
    """The core's projector onto equivariant maps of the layer, with the group from ``action.to_group()``; cached per
    abstract group, grid and trivial ends (at most 64 entries)."""
    from symkit.reps import Scalar, V

    a_in, a_out = spec.action_in, spec.action_out
    base = a_out if not a_out.is_trivial else a_in
    if not a_in.is_trivial and not a_out.is_trivial and a_in.shape != a_out.shape:
        raise ValueError(
            f"basis_projection: the core solver is used with one base representation; {a_in.name} and "
            f"{a_out.name} act on grids of different shapes"
        )
    if a_in.is_trivial and a_out.is_trivial:
        return None
    key = (base.group_key, base.shape, a_in.is_trivial, a_out.is_trivial)
    if key not in _CORE_PROJECTORS:
        G = base.to_group()
        rep_in = Scalar if a_in.is_trivial else V(G)
        rep_out = Scalar if a_out.is_trivial else V(G)
        if len(_CORE_PROJECTORS) >= 64:
            _CORE_PROJECTORS.pop(next(iter(_CORE_PROJECTORS)))
        _CORE_PROJECTORS[key] = (rep_in >> rep_out).equivariant_projector()
    return _CORE_PROJECTORS[key]


def basis_projection(A: torch.Tensor, spec: LayerSpec) -> torch.Tensor:
    """Pi_E A with the core's equivariant projector ``(rep_in >> rep_out).equivariant_projector()`` (float64).

    The group is rebuilt as ``Group(discrete_generators=...)`` from the permutation matrices of the action's
    generators, so this works for every :class:`PermAction`. Not differentiable (numpy).
    """
    _check(A, spec)
    P = _core_rep_projector(spec)
    if P is None:
        return A.clone()
    c = spec.c_out * spec.c_in
    X = A.detach().reshape(c, -1).to(torch.float64).cpu().numpy().T
    Y = np.asarray(P @ X).T.reshape(spec.shape)
    return torch.as_tensor(Y, dtype=A.dtype, device=A.device)


# ----------------------------------------------------------------------------------------------- fast cases
def _grid_side(who: str, A: torch.Tensor) -> int:
    """``n`` of a layer ``(..., n, n, n, n)`` between (n, n) images; ValueError naming ``who`` otherwise."""
    n = A.shape[-1] if A.ndim else 0
    if A.ndim < 4 or A.shape[-4:] != (n, n, n, n):
        raise ValueError(f"{who}: expected (..., n, n, n, n), got {tuple(A.shape)}")
    return n


def _along_axis(who: str, project_axis_1: Callable[[torch.Tensor], torch.Tensor], A: torch.Tensor,
                axis: int) -> torch.Tensor:
    """``project_axis_1`` (a projection for shifts of image axis 1) applied for shifts of ``axis``: for axis 0 the two
    grid axes are swapped on both sides, projected, and swapped back."""
    if axis not in (0, 1):
        raise ValueError(f"{who}: axis must be 0 or 1, got {axis!r}")
    if axis == 1:
        return project_axis_1(A)
    return project_axis_1(A.transpose(-4, -3).transpose(-2, -1)).transpose(-4, -3).transpose(-2, -1)


def _differences(n: int, device: torch.device) -> torch.Tensor:
    """``d[x, y] = (x - y) mod n``: the offset of the wrapped diagonal through ``(x, y)``."""
    i = torch.arange(n, device=device)
    return (i[:, None] - i[None, :]) % n


def _convolution_2d(h: torch.Tensor) -> torch.Tensor:
    """The layer ``M[..., x1, x2, y1, y2] = h[..., (x1 - y1) mod n, (x2 - y2) mod n]`` of a 2-D kernel ``h``."""
    d = _differences(h.shape[-1], h.device)
    return h[..., d[:, None, :, None], d[None, :, None, :]]


def _convolution_1d(h: torch.Tensor) -> torch.Tensor:
    """The layer ``M[..., x1, x2, y1, y2] = h[..., x1, y1, (x2 - y2) mod n]`` of a kernel per row pair."""
    n = h.shape[-1]
    i, d = torch.arange(n, device=h.device), _differences(n, h.device)
    return h[..., i[:, None, None, None], i[None, None, :, None], d[None, :, None, :]]


def _wrapped_diagonal_means(A: torch.Tensor, dim_x: int, dim_y: int) -> torch.Tensor:
    """``h[..., d] = (1/n) sum_y A[..., x = (y + d) mod n, ..., y, ...]``: the mean of each wrapped diagonal of the
    axes ``(dim_x, dim_y)`` (both of size n), which are removed; ``d`` is appended last. Each wrapped diagonal is
    two ``torch.diagonal`` views (offsets ``-d`` and ``n - d``), so ``A`` is read once and nothing is copied."""
    n = A.shape[dim_x]
    sums = []
    for d in range(n):
        s = torch.diagonal(A, offset=-d, dim1=dim_x, dim2=dim_y).sum(-1)
        sums.append(s + torch.diagonal(A, offset=n - d, dim1=dim_x, dim2=dim_y).sum(-1) if d else s)
    return torch.stack(sums, dim=-1) / n


def fft_projection_2d(A: torch.Tensor) -> torch.Tensor:
    """Eq. 42: Pi_E A = F^{-1} D(F A F^{-1}) F for Z_n^2 on (n, n) images; ``A`` is (..., n, n, n, n).

    F is the unitary 2-D DFT and D keeps the diagonal. The result is the convolution A[x, y] = h(x - y) with
    h = ifft2(diag(F A F^{-1})). :func:`translation_projection_2d` computes the same faster.
    """
    _grid_side("fft_projection_2d", A)
    B = torch.fft.fftn(A, dim=(-4, -3), norm="ortho")
    B = torch.fft.ifftn(B, dim=(-2, -1), norm="ortho")
    lam = torch.einsum("...abab->...ab", B)
    return _convolution_2d(torch.fft.ifftn(lam, dim=(-2, -1)).real.to(A.dtype))


def fft_projection_1d(A: torch.Tensor, axis: int = 1) -> torch.Tensor:
    """Eq. 64: the row-wise partial FFT for Z_n shifting ``axis`` of (n, n) images; ``A`` is (..., n, n, n, n).

    Every block B_{ii'} (fixed untranslated coordinates) becomes a 1-D circular convolution (Lemma 8, Prop. 5).
    :func:`translation_projection_1d` computes the same faster.
    """
    _grid_side("fft_projection_1d", A)

    def rows(A: torch.Tensor) -> torch.Tensor:
        B = torch.fft.ifft(torch.fft.fft(A, dim=-3, norm="ortho"), dim=-1, norm="ortho")
        lam = torch.einsum("...aubu->...abu", B)  # (..., n_rows_out, n_rows_in, freq)
        return _convolution_1d(torch.fft.ifft(lam, dim=-1).real.to(A.dtype))

    return _along_axis("fft_projection_1d", rows, A, axis)


def translation_projection_2d(A: torch.Tensor) -> torch.Tensor:
    """Pi_E for Z_n^2 acting on (n, n) images on both sides (Lemma 2's average over the n^2 translations, which
    Eq. 42 computes with FFTs): ``Pi_E A [x, y] = h(x - y)``, ``h(d) = mean over y of A[y + d, y]``. The same
    projection as :func:`fft_projection_2d` (tested to float64 rounding), computed with wrapped-diagonal means:
    3-5x faster and without complex intermediates. ``A`` is ``(..., n, n, n, n)``; differentiable."""
    _grid_side("translation_projection_2d", A)
    return _convolution_2d(_wrapped_diagonal_means(_wrapped_diagonal_means(A, -4, -2), -3, -2))


def translation_projection_1d(A: torch.Tensor, axis: int = 1) -> torch.Tensor:
    """Pi_E for Z_n shifting ``axis`` of (n, n) images on both sides (what Eq. 64's row-wise partial FFT computes):
    every block of fixed untranslated coordinates becomes the circular convolution of its wrapped-diagonal means.
    The same projection as :func:`fft_projection_1d` (tested); ``A`` is ``(..., n, n, n, n)``; differentiable."""
    _grid_side("translation_projection_1d", A)
    rows = lambda A: _convolution_1d(_wrapped_diagonal_means(A, -3, -1))  # noqa: E731  (..., x1, y1, d) kernels
    return _along_axis("translation_projection_1d", rows, A, axis)


def c4_projection(
    A: torch.Tensor, out_dims: Sequence[int] = (-4, -3), in_dims: Sequence[int] = (-2, -1)
) -> torch.Tensor:
    """Eq. 46: Pi_E A = (1/4) sum_k rho(w^k) A rho(w^k)^{-1}, with ``torch.rot90`` on the image axes.

    Pass ``out_dims=()`` or ``in_dims=()`` for invariant (trivially acted) sides.
    """
    out = torch.zeros_like(A)
    for k in range(4):
        B = A
        if out_dims:
            B = torch.rot90(B, k, dims=tuple(out_dims))
        if in_dims:
            B = torch.rot90(B, k, dims=tuple(in_dims))
        out = out + B
    return out / 4


def transrot_projection(A: torch.Tensor) -> torch.Tensor:
    """Prop. 7: Pi_E = Pi_{C4} Pi_{Z_n^2} for Z_n^2 x| C4 acting on (n, n) images; ``A`` is (..., n, n, n, n)."""
    return c4_projection(translation_projection_2d(A))


@functools.lru_cache(maxsize=32)
def equality_patterns(n: int, k: int) -> tuple[np.ndarray, int]:
    """Labels (n^k,) of the equality pattern (set partition) of every multi-index in [n]^k, and their number.

    For k = 4 there are 15 patterns when n >= 4 (14 for n = 3, 8 for n = 2): the basis of Maron et al. 2019.
    """
    if k == 0:
        return np.zeros(1, dtype=np.int64), 1
    idx = np.indices((n,) * k).reshape(k, -1).T  # (n^k, k)
    rgs = np.zeros_like(idx)
    for j in range(1, k):
        # label of position j: the label of the first earlier equal position, else a new one
        new = rgs[:, :j].max(axis=1) + 1
        lab = new.copy()
        for i in reversed(range(j)):
            lab = np.where(idx[:, i] == idx[:, j], rgs[:, i], lab)
        rgs[:, j] = lab
    _, labels = np.unique(rgs, axis=0, return_inverse=True)
    labels = labels.reshape(-1).astype(np.int64)
    return labels, int(labels.max()) + 1


def pattern_projection(A: torch.Tensor, n: int, k: int) -> torch.Tensor:
    """Pi_E for S_n acting on all of the trailing ``k`` axes (each of size n) of ``A``: the mean over each equality
    pattern. For ``k = 4`` this is the projection on the 15 normalised indicator tensors of Maron et al.; for the
    functionals R^{n x n} -> R (k = 2): the diagonal mean on I and the off-diagonal mean on J - I."""
    if k == 0:
        return A.clone()
    if tuple(A.shape[A.ndim - k :]) != (n,) * k:
        raise ValueError(f"pattern_projection: the last {k} axes of {tuple(A.shape)} should all be {n}")
    labels_np, m = equality_patterns(n, k)
    labels = torch.as_tensor(labels_np, device=A.device)
    lead = A.shape[: A.ndim - k]
    flat = A.reshape(-1, n**k)
    sums = torch.zeros(flat.shape[0], m, dtype=A.dtype, device=A.device).index_add(1, labels, flat)
    counts = torch.bincount(labels, minlength=m).to(A.dtype)
    return (sums / counts)[:, labels].reshape(*lead, *(n,) * k)


def project_vector(x: torch.Tensor, action: PermAction, dims: Sequence[int] | None = None) -> torch.Tensor:
    """Projection of a vector (e.g. a bias, App. F) on the invariant vectors: b -> (1/|G|) sum_g rho(g) b."""
    dims = tuple(range(x.ndim - len(action.shape), x.ndim)) if dims is None else tuple(dims)
    if action.is_trivial:
        return x.clone()
    out = torch.zeros_like(x)
    count = 0
    for g in action.elements():
        out = out + action.act(x, g, dims)
        count += 1
    return out / count


def _fast(A: torch.Tensor, spec: LayerSpec) -> torch.Tensor | None:
    a_in, a_out = spec.action_in, spec.action_out
    base = a_out if not a_out.is_trivial else a_in
    if spec.is_trivial:
        return A.clone()
    od, idims = spec.out_dims(), spec.in_dims()
    both = not a_in.is_trivial and not a_out.is_trivial
    if isinstance(base, Permutations):
        if both and a_in.n != a_out.n:
            return None
        return pattern_projection(A, base.n, len(od) + len(idims))
    if isinstance(base, TranslationsRotations):
        if both:
            return transrot_projection(A)
        return A.mean(dim=od + idims, keepdim=True).expand_as(A).clone()  # transitive: constants
    if isinstance(base, CyclicTranslations2D):
        if both:
            return translation_projection_2d(A)
        return A.mean(dim=od + idims, keepdim=True).expand_as(A).clone()
    if isinstance(base, CyclicTranslations1D):
        if both:
            return translation_projection_1d(A, base.axis)
        dim = (od or idims)[base.axis]
        return A.mean(dim=dim, keepdim=True).expand_as(A).clone()
    if isinstance(base, Rotations90):
        return c4_projection(A, od, idims)
    return None


def project(A: torch.Tensor, spec: LayerSpec, method: str = "auto") -> torch.Tensor:
    """Pi_E A for one layer. ``method``: "average" (Lemma 2), "basis" (core projector), "fast" (the special
    cases; ValueError if none applies) or "auto" (fast, else basis). Differentiable except for "basis"."""
    if method not in METHODS:
        raise ValueError(f"project: method must be one of {METHODS}, got {method!r}")
    _check(A, spec)
    if method == "average":
        return group_average(A, spec)
    if method == "basis":
        return basis_projection(A, spec)
    out = _fast(A, spec)
    if out is not None:
        return out
    if method == "fast":
        raise ValueError(f"project: no fast projection for {spec.action_in.name} -> {spec.action_out.name}")
    if isinstance(spec.action_in, GroupAction) or isinstance(spec.action_out, GroupAction):
        return _project_matrix(A, spec)
    return basis_projection(A, spec)


def _project_matrix(A: torch.Tensor, spec: LayerSpec) -> torch.Tensor:
    """Differentiable basis projection: the dense float64 projector of the core applied with torch."""
    P = _core_rep_projector(spec)
    if P is None:
        return A.clone()
    Pt = _dense_projector(id(P), P)
    c = spec.c_out * spec.c_in
    X = A.reshape(c, -1)
    return (X @ Pt.to(device=A.device, dtype=A.dtype).T).reshape(spec.shape)


_DENSE: dict[int, torch.Tensor] = {}


def _dense_projector(key: int, P) -> torch.Tensor:
    if key not in _DENSE:
        _DENSE[key] = torch.as_tensor(P.to_dense())
    return _DENSE[key]


# ----------------------------------------------------------------------------------------------- dimensions
def dim_L(spec: LayerSpec) -> int:
    """dim Hom(X_in, X_out) = c_out c_in |shape_out| |shape_in|."""
    return int(math.prod(spec.shape))


def dim_E(spec: LayerSpec, method: str = "core") -> int:
    """dim Hom_G(X_in, X_out) = c_out c_in r. ``method="core"``: r = ``(rep_in >> rep_out).rank()``;
    ``method="character"``: r = (1/|G|) sum_g fix_out(g) fix_in(g) (permutation representations)."""
    if method not in ("core", "character"):
        raise ValueError(f"dim_E: method must be 'core' or 'character', got {method!r}")
    c = spec.c_in * spec.c_out
    if spec.is_trivial:
        return c
    if method == "core":
        return c * int(_core_rank(spec))
    total, count = 0, 0
    for g in spec.action_out.elements():
        total += _fixed(spec.action_out, g) * _fixed(spec.action_in, g)
        count += 1
    if total % count:
        raise ValueError(f"dim_E: character sum {total} not divisible by |G| = {count}")  # pragma: no cover
    return c * total // count


def _fixed(action: PermAction, g) -> int:
    """Number of grid points fixed by g (the character of a permutation representation)."""
    if action.is_trivial:
        return 1
    return int((action.perm(g) == np.arange(action.size)).sum())


def _core_rank(spec: LayerSpec) -> int:
    from symkit.groups import Group
    from symkit.reps import Scalar, V

    a_in, a_out = spec.action_in, spec.action_out
    base = a_out if not a_out.is_trivial else a_in
    d = base.size
    mats = []
    for g in base.generators():
        m = np.zeros((d, d))
        m[np.arange(d), base.perm(g)] = 1.0
        mats.append(m)
    G = Group(discrete_generators=mats or None, name=f"dynamics{base.group_key}", d=d)
    rep = (Scalar if a_in.is_trivial else V(G)) >> (Scalar if a_out.is_trivial else V(G))
    return rep.rank()


def relative_dimension(specs: Sequence[LayerSpec], include_trivial: bool = True) -> float:
    """dim E / dim L summed over the layers (App. E.1); ``include_trivial=False`` leaves out the FC head."""
    specs = [s for s in specs if include_trivial or not s.is_trivial]
    if not specs:
        raise ValueError("relative_dimension: no layers")
    return sum(dim_E(s) for s in specs) / sum(dim_L(s) for s in specs)


def trivial_of(action: PermAction) -> TrivialAction:
    """The invariant-feature action of ``action``'s group."""
    return action.trivial()
