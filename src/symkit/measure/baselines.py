"""Sample-based equivariance metrics the thesis compares LEE with (App. A.3.3.1, A.3.3.3), and consistency losses.

* :func:`sample_equivariance_error`: ``(1/k) sum_k ||f(rho_in(g_k) x) - rho_out(g_k) f(x)||`` over group elements
  near the identity (Finzi et al. 2020; Hutchinson et al. 2021), for any :class:`ImageFlow`. The output is moved
  forward (not the transformed output moved back), so one interpolation is compared with one interpolation and
  pointwise maps score exactly 0.
  :func:`sample_translation_error` draws translations uniformly in ``[-5, 5]`` pixels per axis (the thesis's
  default) and :func:`sample_rotation_error` rotations in ``[-pi/16, pi/16]`` (the reference code's ``np.pi//16``
  evaluates to 0 and so samples no rotation at all).
* :func:`discrete_shift_consistency`: fraction of top-1 predictions unchanged by integer shifts (Zhang 2019). The
  shift is a true shift with reflection (or zero) padding, *not* the circular ``torch.roll`` of the reference code.
* :func:`pi_consistency_loss`: the Pi-model loss ``||f(T_a x) - f(T_b x)||^2`` with ``a, b ~ N(0, sigma^2)``
  (Eq. A.11); for small sigma and a smooth flow its expectation is ``2 sigma^2 ||L f(x)||^2`` (Eq. A.12). The
  direct Lie-derivative penalty is :func:`symkit.measure.lie_derivative_penalty`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from symkit._checks import check_int
from symkit.actions.flows import ImageFlow, get_transform, pixels_per_unit, translate_pixels
from symkit.measure.lie import OutputSpec, _output_action, with_scores
from symkit.stats import standard_error


@dataclass
class SampleResult:
    """Mean over images of a per-image metric, with its standard error and the per-image values."""

    value: float
    stderr: float
    per_sample: Tensor

    def __float__(self) -> float:
        return self.value


def _summary(per: Tensor) -> SampleResult:
    per = per.detach()
    return SampleResult(float(per.mean()), standard_error(per), per)


def _check_images(x: object) -> Tensor:
    if not isinstance(x, Tensor) or x.ndim != 4 or not x.is_floating_point():
        raise ValueError(
            f"x must be a floating-point (B, C, H, W) tensor, got {type(x).__name__} {getattr(x, 'shape', '')}"
        )
    return x


def _check_count(name: str, value: object) -> int:
    return check_int(name, value, 1)


def sample_equivariance_error(
    model: Callable[[Tensor], Tensor],
    x: Tensor,
    transform: str | ImageFlow,
    *,
    max_t: float,
    n_samples: int = 8,
    seed: int = 0,
    output: OutputSpec = "auto",
    on: Literal["probs", "logits"] = "probs",
) -> SampleResult:
    """Per image, ``(1/k) sum_k ||f(T_{t_k} x) - rho_out(t_k) f(x)||`` with ``t_k ~ U(-max_t, max_t)`` drawn
    independently per image and sample (``t`` in the flow's units, see :mod:`symkit.actions.flows`)."""
    x = _check_images(x)
    _check_count("n_samples", n_samples)
    flow = get_transform(transform)
    f = with_scores(model, on)
    back = _output_action(flow, output)
    gen = torch.Generator().manual_seed(seed)
    total = torch.zeros(x.shape[0], dtype=x.dtype)
    with torch.no_grad():
        fx = f(x)
        for _ in range(n_samples):
            t = (2 * torch.rand(x.shape[0], generator=gen, dtype=x.dtype) - 1) * max_t
            diff = f(flow.apply(x, t)) - back(fx, -t)
            total += diff.reshape(x.shape[0], -1).norm(dim=1).cpu()
    return _summary(total / n_samples)


def sample_translation_error(
    model: Callable[[Tensor], Tensor],
    x: Tensor,
    *,
    max_pixels: float = 5.0,
    n_samples: int = 8,
    seed: int = 0,
    output: OutputSpec = "auto",
    on: Literal["probs", "logits"] = "probs",
) -> SampleResult:
    """Translations with both pixel offsets ~ U(-max_pixels, max_pixels) (the thesis's U(-5, 5) px default); each
    of the ``n_samples`` draws moves the whole batch by the same offset."""
    x = _check_images(x)
    _check_count("n_samples", n_samples)
    s = pixels_per_unit((x.shape[-2], x.shape[-1]))
    gen = torch.Generator().manual_seed(seed)
    total = torch.zeros(x.shape[0], dtype=x.dtype)
    for _ in range(n_samples):
        dx, dy = ((2 * torch.rand(2, generator=gen, dtype=torch.float64) - 1) * max_pixels / s).tolist()
        # translations commute, so the flow of dx X + dy Y at t = 1 is the translation by (dx, dy)
        flow = dx * get_transform("translate_x") + dy * get_transform("translate_y")
        total += _at_one(model, x, flow, output, on)
    return _summary(total / n_samples)


def _at_one(model: Callable[[Tensor], Tensor], x: Tensor, flow: ImageFlow, output: OutputSpec, on: str) -> Tensor:
    f = with_scores(model, on)
    back = _output_action(flow, output)
    one = torch.ones((), dtype=x.dtype)
    with torch.no_grad():
        diff = f(flow.apply(x, one)) - back(f(x), -one)
    return diff.reshape(x.shape[0], -1).norm(dim=1).cpu()


def sample_rotation_error(
    model: Callable[[Tensor], Tensor],
    x: Tensor,
    *,
    max_angle: float = math.pi / 16,
    n_samples: int = 8,
    seed: int = 0,
    output: OutputSpec = "auto",
    on: Literal["probs", "logits"] = "probs",
) -> SampleResult:
    """Rotations about the image centre by angles ~ U(-max_angle, max_angle) radians."""
    return sample_equivariance_error(
        model, x, "rotate", max_t=max_angle, n_samples=n_samples, seed=seed, output=output, on=on
    )


def discrete_shift_consistency(
    model: Callable[[Tensor], Tensor],
    x: Tensor,
    *,
    max_shift: int = 10,
    n_shifts: int = 8,
    seed: int = 0,
    padding: Literal["reflection", "zeros", "border"] = "reflection",
) -> SampleResult:
    """Fraction of top-1 predictions that stay the same under random integer shifts (Zhang 2019).

    Each of ``n_shifts`` draws picks offsets in ``{-max_shift, ..., max_shift}`` per axis; the shifted image is
    padded (no wrap-around). ``per_sample`` holds each image's fraction of unchanged predictions; report
    ``1 - value`` for the thesis's "% changed".
    """
    x = _check_images(x)
    _check_count("n_shifts", n_shifts)
    check_int("max_shift", max_shift, 0)
    gen = torch.Generator().manual_seed(seed)
    same = torch.zeros(x.shape[0], dtype=torch.float64)
    with torch.no_grad():
        ref = model(x).argmax(1)
        for _ in range(n_shifts):
            dx, dy = torch.randint(-max_shift, max_shift + 1, (2,), generator=gen).tolist()
            pred = model(translate_pixels(x, float(dx), float(dy), padding=padding)).argmax(1)
            same += (pred == ref).double().cpu()
    return _summary(same / n_shifts)


def pi_consistency_loss(
    model: Callable[[Tensor], Tensor],
    x: Tensor,
    transform: str | ImageFlow,
    *,
    sigma: float,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    on: Literal["probs", "logits"] = "logits",
) -> Tensor:
    """Differentiable Pi-model loss ``mean_x ||f(T_a x) - f(T_b x)||^2`` with ``a, b ~ N(0, sigma^2)`` per image
    (Eq. A.11); its expectation is ``2 sigma^2 E||L f||^2`` to leading order for a smooth flow (Eq. A.12)."""
    x = _check_images(x)
    flow = get_transform(transform)
    f = with_scores(model, on)
    gen = generator if generator is not None else torch.Generator().manual_seed(0 if seed is None else seed)
    a = torch.randn(x.shape[0], generator=gen, dtype=x.dtype) * sigma
    b = torch.randn(x.shape[0], generator=gen, dtype=x.dtype) * sigma
    diff = f(flow.apply(x, a)) - f(flow.apply(x, b))
    return diff.reshape(x.shape[0], -1).pow(2).sum(1).mean()
