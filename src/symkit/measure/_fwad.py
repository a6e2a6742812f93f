"""Forward-mode AD with cheaper rules for the layers that dominate image models.

PyTorch's built-in forward-mode rule for a convolution also convolves the (zero) weight tangent with the input, so a
``jvp`` through a CNN costs about three convolutions per layer instead of two; its batch-norm rule recomputes the
batch statistics path even in eval mode. When only the *input* carries a tangent, the exact tangent is simply

    conv(x, W, b)' = conv(x', W)           batch_norm_eval(x)' = x' * weight / sqrt(running_var + eps)

:class:`LinearLayerTangents` is a ``TorchFunctionMode`` that applies these rules to ``conv1d/2d/3d`` and eval-mode
``batch_norm`` calls whose weights carry no tangent, and defers to PyTorch for everything else. Results are identical
up to floating-point rounding; reverse mode through them (e.g. a Lie-derivative penalty) still works.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

_CONVS = {F.conv1d, F.conv2d, F.conv3d, torch.conv1d, torch.conv2d, torch.conv3d}
_BN_ARGS = ("input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps")


def _tangent(x: Any) -> torch.Tensor | None:
    if not isinstance(x, torch.Tensor):
        return None
    return fwAD.unpack_dual(x).tangent


class LinearLayerTangents(TorchFunctionMode):
    """Use within ``fwAD.dual_level()``; see the module docstring."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = dict(kwargs or {})
        if func in _CONVS:
            out = self._conv(func, list(args), kwargs)
            if out is not None:
                return out
        elif func is F.batch_norm:
            out = self._batch_norm(func, list(args), kwargs)
            if out is not None:
                return out
        return func(*args, **kwargs)

    @staticmethod
    def _conv(func, args: list, kwargs: dict) -> torch.Tensor | None:  # noqa: ANN001
        if len(args) < 2:
            return None
        x, weight = args[0], args[1]
        bias = args[2] if len(args) > 2 else kwargs.pop("bias", None)
        xt = _tangent(x)
        if xt is None or _tangent(weight) is not None or _tangent(bias) is not None:
            return None
        xp = fwAD.unpack_dual(x).primal
        rest = args[3:]
        yp = func(xp, weight, bias, *rest, **kwargs)
        yt = func(xt, weight, None, *rest, **kwargs)
        return fwAD.make_dual(yp, yt)

    @staticmethod
    def _batch_norm(func, args: list, kwargs: dict) -> torch.Tensor | None:  # noqa: ANN001
        bound = dict(zip(_BN_ARGS, args))
        bound.update(kwargs)
        x = bound.get("input")
        xt = _tangent(x)
        var = bound.get("running_var")
        if xt is None or bound.get("training", False) or var is None or bound.get("running_mean") is None:
            return None
        if any(_tangent(bound.get(k)) is not None for k in ("weight", "bias", "running_mean", "running_var")):
            return None
        xp = fwAD.unpack_dual(x).primal
        yp = func(**{**bound, "input": xp})
        scale = torch.rsqrt(var + bound.get("eps", 1e-5))
        if bound.get("weight") is not None:
            scale = scale * bound["weight"]
        yt = xt * scale.reshape(-1, *([1] * (xt.ndim - 2)))
        return fwAD.make_dual(yp, yt)
