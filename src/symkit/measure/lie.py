"""Lie derivatives and the local equivariance error (LEE) of any torch model on images (thesis Sec. 4.2-4.4).

For a one-parameter flow ``T_t`` (see :mod:`symkit.actions.flows`) the Lie derivative of a model ``f`` is

    L f(x) = d/dt|_{t=0}  rho_out(t)^{-1} f(T_t x)                                          (Eq. 4.3)

where ``rho_out`` is the action on the output: trivial for logits or probabilities (invariance), ``T_t`` itself
for image outputs, and ``T_t`` on the spatial tokens of a vision transformer (class / distillation tokens
transform trivially). LEE is its squared norm per output dimension averaged over the data (Eq. 4.4).

Beside Eq. 4.4 as the thesis states it (the default), :func:`lee` offers two readings that the raw number hides:
``normalize=True`` (each sample relative to its output, ``||L f(x)||^2 / ||f(x)||^2``) and ``border=k`` (the image's
``k``-pixel frame kept out: image / token outputs cropped, otherwise the input's frame set to zero), so that the
share of the error that comes from the padding at the image border can be told apart (docs/measure.md, "Reading LEE").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.autograd.forward_ad as fwAD
from torch import Tensor, nn

from symkit._checks import check_int
from symkit.actions.flows import ImageFlow, get_transform
from symkit.measure._fwad import LinearLayerTangents
from symkit.progress import progress_bar
from symkit.stats import standard_error
from symkit.train.batching import batch_indices

Action = Callable[[Tensor, Tensor], Tensor]
OutputSpec = Literal["auto", "invariant", "image", "tokens"] | Action
Method = Literal["jvp", "func_jvp", "double_vjp"]
Reduction = Literal["mean_sq", "mean_abs"]
OUTPUT_KINDS = ("auto", "invariant", "image", "tokens")


def token_grid(n_tokens: int) -> tuple[int, int] | None:
    """``(extra, side)`` when ``n_tokens = side**2 + extra`` with ``extra`` in {0, 1, 2} and ``side >= 2``."""
    for extra in (0, 1, 2):
        side = math.isqrt(max(n_tokens - extra, 0))
        if side >= 2 and side * side == n_tokens - extra:
            return extra, side
    return None


def tensor_kind(z: Tensor) -> str:
    """How ``"auto"`` reads a tensor: ``"image"`` (B, C, H, W), ``"tokens"`` (B, N, C) with N a square (+1 or +2),
    ``"invariant"`` otherwise."""
    if z.ndim == 4:
        return "image"
    if z.ndim == 3 and token_grid(z.shape[1]) is not None:
        return "tokens"
    return "invariant"


def act_tokens(flow: ImageFlow, z: Tensor, t: Tensor) -> Tensor:
    """Apply ``flow`` at ``t`` to the spatial tokens of ``z`` (B, N, C); leading class/distillation tokens are fixed."""
    grid = token_grid(z.shape[1])
    if z.ndim != 3 or grid is None:
        raise ValueError(f"tokens must be (B, N, C) with N = s*s (+1 or +2), got shape {tuple(z.shape)}")
    extra, side = grid
    B, _, C = z.shape
    spatial = z[:, extra:].transpose(1, 2).reshape(B, C, side, side)
    moved = flow.apply(spatial, t).reshape(B, C, side * side).transpose(1, 2)
    return torch.cat([z[:, :extra], moved], dim=1) if extra else moved


def flow_act(flow: ImageFlow, z: Tensor, t: Tensor, kind: str) -> Tensor:
    """``rho(t) z`` for a tensor of the given kind (``"image"``, ``"tokens"`` or ``"invariant"``)."""
    if kind == "invariant":
        return z
    if kind == "image":
        if z.ndim != 4:
            raise ValueError(f"an 'image' output must be (B, C, H, W), got shape {tuple(z.shape)}")
        return flow.apply(z, t)
    if kind == "tokens":
        return act_tokens(flow, z, t)
    raise ValueError(f"unknown tensor kind {kind!r}; expected one of {OUTPUT_KINDS[1:]}")


def act_tangent(flow: ImageFlow, z: Tensor, kind: str) -> Tensor | None:
    """``d/dt rho(t) z`` at ``t = 0`` for a tensor of the given kind; ``None`` for invariant tensors."""
    if kind == "invariant":
        return None
    if kind == "image":
        if z.ndim != 4:
            raise ValueError(f"an 'image' tensor must be (B, C, H, W), got shape {tuple(z.shape)}")
        return flow.tangent(z)
    if kind == "tokens":
        grid = token_grid(z.shape[1]) if z.ndim == 3 else None
        if grid is None:
            raise ValueError(f"tokens must be (B, N, C) with N = s*s (+1 or +2), got shape {tuple(z.shape)}")
        extra, side = grid
        B, _, C = z.shape
        spatial = z[:, extra:].transpose(1, 2).reshape(B, C, side, side)
        moved = flow.tangent(spatial).reshape(B, C, side * side).transpose(1, 2)
        return torch.cat([torch.zeros_like(z[:, :extra]), moved], dim=1) if extra else moved
    raise ValueError(f"unknown tensor kind {kind!r}; expected one of {OUTPUT_KINDS[1:]}")


def _output_action(flow: ImageFlow, output: OutputSpec) -> Callable[[Tensor, Tensor], Tensor]:
    """The map ``(z, t) -> rho_out(t)^{-1} z``."""
    if callable(output):
        return output
    if output not in OUTPUT_KINDS:
        raise ValueError(f"output must be one of {OUTPUT_KINDS} or a callable (z, t) -> z, got {output!r}")

    def back(z: Tensor, t: Tensor) -> Tensor:
        kind = tensor_kind(z) if output == "auto" else output
        return flow_act(flow, z, -t, kind)

    return back


def _first_tensor(out: object, model: object) -> Tensor:
    if isinstance(out, Tensor):
        return out
    raise TypeError(f"model {type(model).__name__} must return a tensor, got {type(out).__name__}")


def transformed_model(
    model: Callable[[Tensor], Tensor], x: Tensor, transform: str | ImageFlow, output: OutputSpec = "auto"
) -> Callable[[Tensor], Tensor]:
    """``t -> rho_out(t)^{-1} model(T_t x)``, the curve whose derivative at 0 is the Lie derivative."""
    flow = get_transform(transform)
    back = _output_action(flow, output)

    def curve(t: Tensor) -> Tensor:
        return back(_first_tensor(model(flow.apply(x, t)), model), t)

    return curve


def lie_derivative(
    model: Callable[[Tensor], Tensor],
    x: Tensor,
    transform: str | ImageFlow,
    *,
    output: OutputSpec = "auto",
    method: Method = "jvp",
    border: int = 0,
) -> Tensor:
    """Lie derivative ``L f(x) = d/dt rho_out(t)^{-1} f(T_t x)`` at ``t = 0`` (Eq. 4.3), shaped like ``f(x)`` (like
    its centre crop with ``border`` for image / token outputs).

    ``transform``: a name from ``TRANSFORM_NAMES`` or an :class:`ImageFlow`. ``output``: ``"auto"`` (images and
    square token grids transform back, everything else is invariant), ``"invariant"``, ``"image"``, ``"tokens"``, or a
    callable ``(z, t) -> rho_out(t)^{-1} z``. ``method="jvp"`` is one forward-mode pass (``torch.autograd.forward_ad``
    with cheaper convolution / eval batch-norm tangent rules); ``"func_jvp"`` uses ``torch.func.jvp`` (composes with
    other ``torch.func`` transforms); ``"double_vjp"`` is the reference code's two reverse-mode passes (for models
    without forward-mode support). The result stays differentiable in the model's parameters when grad mode is on.

    ``border=k`` keeps the image's ``k``-pixel frame out of the measurement: image and token outputs are returned on
    their centre crop (``k`` input pixels, rounded up at the output's resolution); for invariant outputs (and
    callable output actions) the input's frame is set to zero first, so no content crosses the border for small
    ``t`` (:func:`zero_border`). ``border=0`` (default) is Eq. 4.3 as it stands.
    """
    return _lie_and_output(model, x, transform, output=output, method=method, border=border)[0]


def zero_border(x: Tensor, border: int) -> Tensor:
    """Images ``x`` (B, C, H, W) with the outer ``border`` pixels of every edge set to zero (a hard window)."""
    border = check_int("border", border)
    if not isinstance(x, Tensor) or x.ndim != 4:
        raise ValueError(f"border needs images of shape (B, C, H, W), got shape {tuple(getattr(x, 'shape', ()))}")
    H, W = x.shape[-2:]
    if 2 * border >= min(H, W):
        raise ValueError(f"border={border} leaves nothing of a {H}x{W} image; expected border < {min(H, W) / 2:g}")
    if border == 0:
        return x
    window = torch.zeros((H, W), dtype=x.dtype, device=x.device)
    window[border : H - border, border : W - border] = 1.0
    return x * window


def crop_border(z: Tensor, kind: str, border: int, size: tuple[int, int]) -> Tensor:
    """The centre of an ``"image"`` (B, C, h, w) or ``"tokens"`` (B, N, C) tensor without a ``border``-pixel frame.

    ``border`` counts pixels of the input grid ``size = (H, W)``; at the tensor's own resolution it is rounded up,
    ``ceil(border * h / H)``. Class / distillation tokens are kept. ``"invariant"`` tensors are returned as they are.
    """
    border = check_int("border", border)
    if kind == "invariant" or border == 0:
        return z
    H, W = size
    if kind == "image":
        if z.ndim != 4:
            raise ValueError(f"an 'image' output must be (B, C, H, W), got shape {tuple(z.shape)}")
        grid, extra = z, None
    elif kind == "tokens":
        found = token_grid(z.shape[1]) if z.ndim == 3 else None
        if found is None:
            raise ValueError(f"tokens must be (B, N, C) with N = s*s (+1 or +2), got shape {tuple(z.shape)}")
        n_extra, side = found
        B, _, C = z.shape
        grid = z[:, n_extra:].transpose(1, 2).reshape(B, C, side, side)
        extra = z[:, :n_extra]
    else:
        raise ValueError(f"unknown tensor kind {kind!r}; expected one of {OUTPUT_KINDS[1:]}")
    h, w = grid.shape[-2:]
    kh, kw = math.ceil(border * h / H), math.ceil(border * w / W)
    if 2 * kh >= h or 2 * kw >= w:
        raise ValueError(
            f"border={border} input pixels ({kh}x{kw} at the output's {h}x{w} grid) leaves nothing of the output"
        )
    centre = grid[..., kh : h - kh, kw : w - kw]
    if extra is None:
        return centre
    B, C = centre.shape[:2]
    return torch.cat([extra, centre.reshape(B, C, -1).transpose(1, 2)], dim=1)


def _border_kind(model: Callable[[Tensor], Tensor], x: Tensor, output: OutputSpec) -> str:
    """How ``border`` treats the output: ``"image"`` / ``"tokens"`` are cropped, anything else windows the input."""
    if callable(output):
        return "invariant"
    if output not in OUTPUT_KINDS:
        raise ValueError(f"output must be one of {OUTPUT_KINDS} or a callable (z, t) -> z, got {output!r}")
    if output != "auto":
        return output
    with torch.no_grad():  # the shape of one sample's output decides, as "auto" does
        return tensor_kind(_first_tensor(model(x[:1]), model))


def _lie_and_output(
    model: Callable[[Tensor], Tensor],
    x: Tensor,
    transform: str | ImageFlow,
    *,
    output: OutputSpec = "auto",
    method: Method = "jvp",
    border: int = 0,
) -> tuple[Tensor, Tensor]:
    """``(L f(x), f(x))``, both with the ``border`` treatment of :func:`lie_derivative` (the output comes free)."""
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got {type(x).__name__}")
    border = check_int("border", border)
    kind = "invariant"
    if border:
        kind = _border_kind(model, x, output)
        if kind == "invariant":
            x = zero_border(x, border)
        elif 2 * border >= min(x.shape[-2:]):
            raise ValueError(f"border={border} leaves nothing of a {x.shape[-2]}x{x.shape[-1]} image")
    L, z = _lie(model, x, transform, output, method)
    if border and kind != "invariant":
        size = (x.shape[-2], x.shape[-1])
        L, z = crop_border(L, kind, border, size), crop_border(z, kind, border, size)
    return L, z


def _lie(
    model: Callable[[Tensor], Tensor], x: Tensor, transform: str | ImageFlow, output: OutputSpec, method: Method
) -> tuple[Tensor, Tensor]:
    """Eq. 4.3 by ``method``, with the model's output ``f(x)`` (every method computes it anyway)."""
    curve = transformed_model(model, x, transform, output)
    zero = torch.zeros((), dtype=x.dtype, device=x.device)
    if method == "jvp":
        # d/dt rho_out(t)^{-1} f(T_t x) = J_f(x) X_in x + d/dt rho_out(t)^{-1} z |_{z = f(x)}: one forward-mode pass
        # with the input tangent X_in x computed directly (no sampler at t = 0), then the output action's derivative.
        flow = get_transform(transform)
        try:
            with fwAD.dual_level(), LinearLayerTangents():
                y = _first_tensor(model(fwAD.make_dual(x, flow.tangent(x))), model)
                primal, tangent = fwAD.unpack_dual(y)
        except NotImplementedError as err:
            raise NotImplementedError(
                f"{type(model).__name__} uses an operation without forward-mode AD ({err}); use method='double_vjp'"
            ) from err
        out = torch.zeros_like(primal) if tangent is None else tangent
        return out + _output_term(flow, primal, output), primal
    if method == "func_jvp":
        primal, tangent = torch.func.jvp(curve, (zero,), (torch.ones_like(zero),))
        return tangent, primal
    if method == "double_vjp":
        keep_graph = torch.is_grad_enabled()
        with torch.enable_grad():
            t = zero.clone().requires_grad_(True)
            y = curve(t)
            primal = y if keep_graph else y.detach()
            if not y.requires_grad:
                return torch.zeros_like(y), primal
            v = torch.zeros_like(y, requires_grad=True)
            (g,) = torch.autograd.grad(y, t, v, create_graph=True, allow_unused=True)
            if g is None or not g.requires_grad:
                return torch.zeros_like(y), primal
            (out,) = torch.autograd.grad(g, v, torch.ones_like(g), create_graph=keep_graph, allow_unused=True)
        return (torch.zeros_like(y) if out is None else (out if keep_graph else out.detach())), primal
    raise ValueError(f"method must be 'jvp', 'func_jvp' or 'double_vjp', got {method!r}")


def _output_term(flow: ImageFlow, z: Tensor, output: OutputSpec) -> Tensor | float:
    """``d/dt rho_out(t)^{-1} z`` at ``t = 0`` for a fixed output ``z``."""
    if callable(output):
        zero = torch.zeros((), dtype=z.dtype, device=z.device)
        with fwAD.dual_level():
            moved = output(z, fwAD.make_dual(zero, torch.ones_like(zero)))
            tangent = fwAD.unpack_dual(moved).tangent
        return 0.0 if tangent is None else tangent
    if output not in OUTPUT_KINDS:
        raise ValueError(f"output must be one of {OUTPUT_KINDS} or a callable (z, t) -> z, got {output!r}")
    kind = tensor_kind(z) if output == "auto" else output
    term = act_tangent(flow, z, kind)
    return 0.0 if term is None else -term


@dataclass
class LEEResult:
    """LEE of one model under one transform: ``value`` = mean of ``per_sample``, ``stderr`` its standard error;
    ``normalize`` and ``border`` record the form measured (see :func:`lee`)."""

    value: float
    stderr: float
    per_sample: Tensor
    transform: str
    reduction: str
    on: str
    normalize: bool = False
    border: int = 0

    def __float__(self) -> float:
        return self.value


def reduce_lie(L: Tensor, reduction: Reduction = "mean_sq") -> Tensor:
    """Per-sample reduction of a Lie derivative (B, ...): ``"mean_sq"`` = ||L f||^2 / dim (Eq. 4.4, the thesis) or
    ``"mean_abs"`` = mean |L f| (the reference code's ``e2e_lee.py``)."""
    flat = L.reshape(L.shape[0], -1)
    if reduction == "mean_sq":
        return flat.pow(2).mean(1)
    if reduction == "mean_abs":
        return flat.abs().mean(1)
    raise ValueError(f"reduction must be 'mean_sq' or 'mean_abs', got {reduction!r}")


def _batches(data: Tensor | Iterable, batch_size: int | None) -> Iterable[Tensor]:
    if isinstance(data, Tensor):
        yield from (data[b] for b in batch_indices(data.shape[0], batch_size))
        return
    for item in data:
        xb = item[0] if isinstance(item, (tuple, list)) else item
        if not isinstance(xb, Tensor):
            raise TypeError(f"batches must be tensors or (x, y) tuples, got {type(item).__name__}")
        yield xb


def with_scores(model: Callable[[Tensor], Tensor], on: str) -> Callable[[Tensor], Tensor]:
    """``softmax(model(x))`` over dim 1 for ``on="probs"``, ``model`` itself for ``"logits"``."""
    if on == "logits":
        return model
    if on != "probs":
        raise ValueError(f"on must be 'probs' or 'logits', got {on!r}")

    def probs(x: Tensor) -> Tensor:
        z = _first_tensor(model(x), model)
        if z.ndim != 2:
            raise ValueError(
                f"on='probs' needs (B, K) class scores, but {type(model).__name__} returned shape {tuple(z.shape)}; "
                "use on='logits' for other outputs"
            )
        return torch.softmax(z, dim=1)

    return probs


def lee(
    model: Callable[[Tensor], Tensor],
    data: Tensor | Iterable,
    transform: str | ImageFlow,
    *,
    output: OutputSpec = "auto",
    on: Literal["probs", "logits"] = "probs",
    reduction: Reduction = "mean_sq",
    method: Method = "jvp",
    batch_size: int | None = None,
    normalize: bool = False,
    border: int = 0,
) -> LEEResult:
    """Local equivariance error ``E_x ||L f(x)||^2 / dim V_out`` (Eq. 4.4) with per-sample values and stderr.

    ``data``: a tensor of images or an iterable of batches / (x, y) pairs. ``on="probs"`` measures the softmax
    probabilities (thesis App. A.3.1.3), ``"logits"`` the raw output. ``reduction="mean_abs"`` gives the reference
    code's mean absolute value instead. Runs without building a graph.

    ``normalize=True`` divides each sample's value by the same reduction of the output, ``||L f(x)||^2 / ||f(x)||^2``
    (``mean_abs``: ``||L f(x)||_1 / ||f(x)||_1``): dimensionless, unchanged when the output is scaled. ``border=k``
    keeps the image's ``k``-pixel frame out (see :func:`lie_derivative`: centre crop of image / token outputs, zero
    frame on the input otherwise). The defaults are Eq. 4.4 as the thesis states it.
    """
    if not isinstance(normalize, bool):
        raise TypeError(f"normalize must be True or False, got {type(normalize).__name__} {normalize!r}")
    border = check_int("border", border)
    flow = get_transform(transform)
    f = with_scores(model, on)
    values = []
    batches = progress_bar(_batches(data, batch_size), desc=f"LEE {flow.name}")
    with torch.no_grad():
        for xb in batches:
            L, z = _lie_and_output(f, xb, flow, output=output, method=method, border=border)
            value = reduce_lie(L, reduction)
            if normalize:
                value = value / reduce_lie(z.detach(), reduction).clamp_min(torch.finfo(value.dtype).tiny)
            values.append(value)
    per = torch.cat(values).detach()
    stderr = standard_error(per)
    return LEEResult(float(per.mean()), stderr, per, flow.name, reduction, on, normalize, border)


def lee_table(
    model: Callable[[Tensor], Tensor],
    data: Tensor | Iterable,
    transforms: Iterable[str | ImageFlow] | object,
    **kwargs: object,
) -> dict[str, LEEResult]:
    """:func:`lee` for several transforms, keyed by transform name; an action (``.flows()``) gives all its flows."""
    if not isinstance(transforms, (str, ImageFlow)) and callable(getattr(transforms, "flows", None)):
        transforms = transforms.flows()  # an action: every flow it has
    flows = [get_transform(t) for t in transforms]
    out: dict[str, LEEResult] = {}
    for flow in progress_bar(flows, desc="LEE"):
        out[flow.name] = lee(model, data, flow, **kwargs)  # type: ignore[arg-type]
    return out


def lie_derivative_penalty(
    model: nn.Module | Callable[[Tensor], Tensor],
    x: Tensor,
    transforms: Iterable[str | ImageFlow] = ("translate_x", "translate_y", "rotate"),
    *,
    output: OutputSpec = "auto",
    on: Literal["probs", "logits"] = "logits",
) -> Tensor:
    """Differentiable regulariser ``sum_X mean_x ||L_X f(x)||^2 / dim`` over the given generators.

    This is the infinitesimal form of consistency regularisation (thesis Eq. A.12):
    ``E ||f(T_a x) - f(T_b x)||^2 ~= 2 sigma^2 ||L f||^2`` for small centred ``a, b`` with variance ``sigma^2``.
    Backpropagates into the model's parameters (reverse over forward mode).
    """
    f = with_scores(model, on)
    total = x.new_zeros(())
    for t in transforms:
        total = total + reduce_lie(lie_derivative(f, x, t, output=output), "mean_sq").mean()
    return total
