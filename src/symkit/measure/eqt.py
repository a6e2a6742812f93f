"""EQ-T and fractional EQ-T (Karras et al. 2021), the baselines LEE is compared with in thesis App. A.3.3.1/A.3.3.3.

A translation moves the content of an image by ``d`` pixels per axis. EQ-T uses integer ``d`` (an exact shift);
EQ-T_frac uses continuous ``d``, resampled with a separable Lanczos (windowed-sinc) kernel of ``taps`` lobes, which
is exact for integers and close to band-limited interpolation otherwise. Samples that fall outside the image are
reflected about the outer pixel centres, and the comparison is masked to the pixels whose value needed no padding
(with one more pixel of margin for the layer's own footprint). A layer that pools an image to an invariant output
(global pooling, a class-token readout) has no output pixels to mask, so its input is shifted with wrap-around
instead, and no padding enters its comparison.

* :func:`eqt`: end to end, ``E_{x, d} ||f(T_d x) - rho_out(d) f(x)||^2 / dim`` on the model's softmax probabilities
  (or logits), with the PSNR ``10 log10(peak^2 / MSE)`` in decibels that Karras et al. report (higher is more
  equivariant; ``peak = 1`` for probabilities).
* :func:`layerwise_eqt`: the thesis's layer-wise EQ-T: each leaf module (as :func:`symkit.measure.find_leaves`
  picks them) is run again on its translated cached input, its output is compared with its translated cached output,
  and the masked squared error is normalised by ``1/N`` (``"mean"``), ``1/sqrt(N)`` (``"sqrt"``, the reference
  code's) or not at all (``"sum"``), with ``N`` the number of compared values. The thesis notes that this choice
  "can lead to radically different outcomes in the perceived contribution of each layer"; LEE has no such knob.

Shifts are drawn as fractions ``u ~ U(-max_shift, max_shift)`` of the image size (the thesis's +-12.5%), so a layer
that changes resolution is compared at the matching shift of its output (``d_out = u W_out``). Integer shifts use the
finest lattice on which both resolutions have whole pixels, and never 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from symkit._checks import check_int
from symkit.measure.layerwise import DEFAULT_SKIP, _no_inplace, find_leaves
from symkit.measure.lie import tensor_kind, token_grid, with_scores
from symkit.stats import standard_error

Normalization = Literal["mean", "sqrt", "sum"]
NORMALIZATIONS = ("mean", "sqrt", "sum")

__all__ = ["EQTResult", "LayerwiseEQT", "eqt", "layerwise_eqt", "shift_images"]


def lanczos_weights(frac: float, taps: int = 3) -> tuple[Tensor, Tensor]:
    """Offsets ``k = -taps+1 .. taps`` and weights ``L(k - frac)`` (normalised to sum 1) of the Lanczos kernel
    ``L(s) = sinc(s) sinc(s / taps)``; for ``frac = 0`` the weights are the unit impulse at ``k = 0``."""
    k = torch.arange(-taps + 1, taps + 1, dtype=torch.float64)
    s = k - frac
    w = torch.sinc(s) * torch.sinc(s / taps)
    return k.long(), w / w.sum()


def _reflect_index(i: Tensor, n: int) -> Tensor:
    """Fold integer positions into ``[0, n - 1]`` by reflection about the outer pixel centres."""
    if n == 1:
        return torch.zeros_like(i)
    period = 2 * (n - 1)
    i = torch.remainder(i, period)
    return torch.where(i > n - 1, period - i, i)


def _shift_axis(x: Tensor, d: float, dim: int, taps: int, circular: bool = False) -> tuple[Tensor, Tensor]:
    """Move the content of ``x`` by ``d`` pixels along ``dim``: ``out[p] = sum_k w_k x[p - n - k]`` with
    ``d = n + frac`` (reflected, or wrapped around when ``circular``); also the (length-``size``) mask of positions
    whose taps all lie inside the image."""
    n_int = math.floor(d)
    frac = d - n_int
    size = x.shape[dim]
    offsets, weights = lanczos_weights(frac, taps) if frac > 0 else (torch.zeros(1, dtype=torch.long),
                                                                      torch.ones(1, dtype=torch.float64))
    p = torch.arange(size)
    out = torch.zeros_like(x)
    valid = torch.ones(size, dtype=torch.bool)
    for k, w in zip(offsets.tolist(), weights.tolist()):
        src = p - n_int - k
        valid &= (src >= 0) & (src <= size - 1)
        index = torch.remainder(src, size) if circular else _reflect_index(src, size)
        out = out + w * x.index_select(dim, index.to(x.device))
    return out, valid


def shift_images(x: Tensor, dx: float, dy: float, *, taps: int = 3, circular: bool = False) -> tuple[Tensor, Tensor]:
    """Images ``(B, C, H, W)`` with their content moved ``dx`` pixels right and ``dy`` down (exact for integers,
    Lanczos-``taps`` otherwise; reflection outside, or wrap-around when ``circular``), and the ``(H, W)`` mask of
    pixels that needed no padding."""
    if x.ndim != 4:
        raise ValueError(f"shift_images needs (B, C, H, W) images, got shape {tuple(x.shape)}")
    out, vx = _shift_axis(x, float(dx), -1, taps, circular)
    out, vy = _shift_axis(out, float(dy), -2, taps, circular)
    return out, (vy[:, None] & vx[None, :]).to(x.device)


def _erode(mask: Tensor, margin: int) -> Tensor:
    """``mask`` without the pixels within ``margin`` (Chebyshev distance) of an invalid pixel or of the border."""
    if margin <= 0:
        return mask
    padded = F.pad(mask.to(torch.float32)[None, None], (margin,) * 4, value=0.0)
    return (-F.max_pool2d(-padded, 2 * margin + 1, stride=1))[0, 0] > 0.5


# ------------------------------------------------------------------------------------------------ tensor views
def _as_grid(z: Tensor) -> tuple[Tensor, Callable[[Tensor], Tensor], Tensor | None] | None:
    """An image view ``(B, C, H, W)`` of an image or token tensor, the map back, and the extra (class) tokens."""
    kind = tensor_kind(z)
    if kind == "image":
        return z, (lambda g: g), None
    if kind == "tokens":
        extra, side = token_grid(z.shape[1])  # type: ignore[misc]
        B, _, C = z.shape
        grid = z[:, extra:].transpose(1, 2).reshape(B, C, side, side)

        def back(g: Tensor) -> Tensor:
            moved = g.reshape(B, C, side * side).transpose(1, 2)
            return torch.cat([z[:, :extra], moved], dim=1) if extra else moved

        return grid, back, z[:, :extra] if extra else None
    return None


def _shift_tensor(z: Tensor, dx: float, dy: float, taps: int, circular: bool = False) -> tuple[Tensor, Tensor | None]:
    """Translate an image or token tensor (class tokens fixed); ``None`` mask for other tensors (left as they are)."""
    view = _as_grid(z) if _size(z) else None
    if view is None:
        return z, None
    grid, back, _ = view
    moved, mask = shift_images(grid, dx, dy, taps=taps, circular=circular)
    return back(moved), mask


def _masked_sq(a: Tensor, b: Tensor, mask: Tensor | None) -> tuple[Tensor, int]:
    """Per-sample sum of squared differences over the compared values (spatial ``mask`` for image / token tensors;
    class tokens are compared unmasked), and their number per sample."""
    diff = (a - b).to(torch.float64)
    B = diff.shape[0]
    if mask is None:
        return diff.reshape(B, -1).pow(2).sum(1), diff[0].numel()
    view = _as_grid(diff)
    assert view is not None
    grid, _, extra = view
    m = mask.to(grid.device)
    sq = (grid.pow(2) * m).reshape(B, -1).sum(1)
    count = int(m.sum()) * grid.shape[1]
    if extra is not None:
        sq = sq + extra.pow(2).reshape(B, -1).sum(1)
        count += extra[0].numel()
    return sq, count


def _normalise(sq: Tensor, count: int, normalization: str) -> Tensor:
    if count == 0:
        return torch.zeros_like(sq)
    if normalization == "mean":
        return sq / count
    if normalization == "sqrt":
        return sq / math.sqrt(count)
    return sq


def _size(z: Tensor) -> int | None:
    """Side length of an image or token tensor's spatial grid (the larger one for non-square images); None for
    other tensors and for 1x1 grids (a globally pooled map is compared as an invariant)."""
    view = _as_grid(z)
    side = None if view is None else max(view[0].shape[-2:])
    return side if side is not None and side > 1 else None


def _lattice_shifts(u: Tensor, sizes: Sequence[int], integer: bool, max_shift: float) -> list[tuple[float, float]]:
    """Per draw, the shift ``(dx, dy)`` at resolution ``sizes[0]`` as a fraction-of-size pair scaled to each size
    later: returns fractions ``(ux, uy)``, snapped to the common integer lattice when ``integer``."""
    if not integer:
        return [(float(a), float(b)) for a, b in u.tolist()]
    g = 0
    for s in sizes:
        g = math.gcd(g, int(s))
    k_max = max(1, int(math.floor(max_shift * g)))
    out = []
    for a, b in u.tolist():
        ks = []
        for v in (a, b):
            k = int(round(v * g))
            k = max(-k_max, min(k_max, k))
            if k == 0:
                k = 1 if v >= 0 else -1
            ks.append(k / g)
        out.append((ks[0], ks[1]))
    return out


# ------------------------------------------------------------------------------------------------ end to end
@dataclass
class EQTResult:
    """End-to-end EQ-T: ``mse`` (mean over images of the per-image mean squared error), its standard error, the
    per-image values, and ``db = 10 log10(peak^2 / mse)`` (Karras et al.'s PSNR; higher is more equivariant)."""

    mse: float
    stderr: float
    per_sample: Tensor
    db: float
    fractional: bool

    def __float__(self) -> float:
        return self.db


def eqt(
    model: Callable[[Tensor], Tensor],
    x: Tensor,
    *,
    fractional: bool = False,
    max_shift: float = 0.125,
    n_shifts: int = 4,
    taps: int = 3,
    seed: int = 0,
    on: Literal["probs", "logits"] = "probs",
    peak: float = 1.0,
) -> EQTResult:
    """End-to-end EQ-T (``fractional=False``, integer pixel shifts) or EQ-T_frac (continuous shifts) of ``model``
    on images ``x`` (module docstring): ``n_shifts`` translations by up to ``max_shift`` of the image size per axis,
    each moving the whole batch. Image and token outputs are translated for the comparison (and masked), others are
    compared as they are (invariance)."""
    if not isinstance(x, Tensor) or x.ndim != 4 or not x.is_floating_point():
        raise ValueError(f"x must be a floating-point (B, C, H, W) tensor, got {getattr(x, 'shape', type(x))}")
    check_int("n_shifts", n_shifts, 1)
    check_int("taps", taps, 1)
    if not 0 < max_shift < 1:
        raise ValueError(f"max_shift must be a fraction of the image size in (0, 1), got {max_shift!r}")
    f = with_scores(model, on)
    gen = torch.Generator().manual_seed(seed)
    size = max(x.shape[-2:])
    total = torch.zeros(x.shape[0], dtype=torch.float64)
    with torch.no_grad():
        fx = f(x)
        out_size = _size(fx)
        sizes = [size] + ([out_size] if out_size else [])
        u = (2 * torch.rand(n_shifts, 2, generator=gen, dtype=torch.float64) - 1) * max_shift
        for ux, uy in _lattice_shifts(u, sizes, not fractional, max_shift):
            moved, _ = shift_images(x, ux * size, uy * size, taps=taps)
            if out_size:
                target, mask = _shift_tensor(fx, ux * out_size, uy * out_size, taps)
                mask = _erode(mask, 1) if mask is not None else None
            else:
                target, mask = fx, None
            sq, count = _masked_sq(f(moved), target, mask)
            total += (sq / max(count, 1)).cpu()
    per = total / n_shifts
    mse = float(per.mean())
    db = 10 * math.log10(peak**2 / mse) if mse > 0 else math.inf
    return EQTResult(mse, standard_error(per), per, db, fractional)


# ------------------------------------------------------------------------------------------------ layer-wise
@dataclass
class LayerwiseEQT:
    """Per leaf-module call: its name and type and the normalised masked squared error (mean over shifts and
    images); ``fractions`` are the shares of their sum."""

    names: list[str]
    types: list[str]
    errors: Tensor
    fractional: bool
    normalization: str

    @property
    def fractions(self) -> Tensor:
        """Each call's share of the summed errors."""
        total = self.errors.sum()
        return self.errors / total if total > 0 else torch.zeros_like(self.errors)

    def table(self) -> list[dict[str, Any]]:
        """One row per layer call: name, type, error and share."""
        frac = self.fractions
        return [{"layer": n, "type": t, "error": float(e), "fraction": float(f)}
                for n, t, e, f in zip(self.names, self.types, self.errors, frac)]


def layerwise_eqt(
    model: nn.Module,
    x: Tensor,
    *,
    fractional: bool = False,
    max_shift: float = 0.125,
    n_shifts: int = 4,
    taps: int = 3,
    seed: int = 0,
    normalization: Normalization = "mean",
    leaf_types: Sequence[type[nn.Module]] | None = None,
    skip: Sequence[type[nn.Module] | str] = DEFAULT_SKIP,
) -> LayerwiseEQT:
    """Layer-wise EQ-T / EQ-T_frac of every leaf call of ``model`` on images ``x`` (module docstring); layers
    whose inputs are neither images nor token grids score 0. Put the model in ``eval()`` mode."""
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {normalization!r}")
    check_int("n_shifts", n_shifts, 1)
    if not 0 < max_shift < 1:
        raise ValueError(f"max_shift must be a fraction of the image size in (0, 1), got {max_shift!r}")
    leaves = find_leaves(model, leaf_types, skip)
    calls: list[tuple[str, nn.Module, tuple, Any]] = []
    counts: dict[str, int] = {}

    def make(name: str) -> Callable:
        def hook(module: nn.Module, args: tuple, out: Any) -> None:
            k = counts.get(name, 0)
            counts[name] = k + 1
            saved = tuple(a.detach() if isinstance(a, Tensor) else a for a in args)
            calls.append((f"{name}#{k}" if k else name, module, saved, out.detach() if isinstance(out, Tensor)
                          else out))

        return hook

    with _no_inplace(model), torch.no_grad():
        handles = [m.register_forward_hook(make(n)) for n, m in leaves]
        try:
            model(x)
        finally:
            for h in handles:
                h.remove()
        gen = torch.Generator().manual_seed(seed)
        u = (2 * torch.rand(n_shifts, 2, generator=gen, dtype=torch.float64) - 1) * max_shift
        errors = torch.zeros(len(calls), dtype=torch.float64)
        for i, (_, module, args, out) in enumerate(calls):
            ins = [a for a in args if isinstance(a, Tensor) and _size(a)]
            if not ins or not isinstance(out, Tensor):
                continue
            in_size = _size(ins[0])
            out_size = _size(out)
            sizes = [in_size] + ([out_size] if out_size else [])
            total = torch.zeros(out.shape[0], dtype=torch.float64)
            for ux, uy in _lattice_shifts(u, sizes, not fractional, max_shift):
                moved = tuple(_shift_tensor(a, ux * _size(a), uy * _size(a), taps, circular=not out_size)[0]
                              if isinstance(a, Tensor) and _size(a) else a for a in args)
                y = module(*moved)
                if out_size:
                    target, mask = _shift_tensor(out, ux * out_size, uy * out_size, taps)
                    mask = _erode(mask, 1) if mask is not None else None
                else:
                    target, mask = out, None
                sq, count = _masked_sq(y, target, mask)
                total += _normalise(sq, count, normalization).cpu()
            errors[i] = float((total / n_shifts).mean())
    return LayerwiseEQT([c[0] for c in calls], [type(c[1]).__name__ for c in calls], errors, fractional,
                        normalization)
