"""Residual pathway priors: soft equivariance (thesis ch. 3).

Every layer is the sum of an equivariant path ``A`` (``vec(A) = Q beta``) and an unconstrained path ``B``; with
Gaussian priors ``beta ~ N(0, sigma_a^2)``, ``B ~ N(0, sigma_b^2)`` the sum has prior covariance
``(sigma_a^2 + sigma_b^2) Q Q^T + sigma_b^2 P P^T`` (eq. 3.1), so the equivariant subspace gets more prior mass and
MAP training explains what it can with the equivariant path. :func:`rpp_penalty` is the negative log prior (up to
a constant) to add to the summed negative log likelihood; in terms of weight decay on a *summed* loss,
``wd = 1 / (2 sigma^2)``.

The flexible path need not be unconstrained (Sec. 3.4: "the same recipe works ... for breaking a group down to a
subgroup"): with ``subgroup=H`` every ``B`` is an equivariant map of ``H``, a group acting on the same space as
``G`` (``SO(3)`` in ``O(3)``, rotations about z in ``O(3)``), so the model is exactly ``H``-equivariant with a soft
preference for ``G``. Its nonlinearities are the ``G``-gated ones, which are ``H``-equivariant too (a gate scalar
invariant under ``G`` is invariant under ``H``); the per-channel swish residual of the unconstrained RPP, which
would break ``H``, is left out.

:class:`RPPConv2d` is the convolutional RPP of eq. 3.2: a circular convolution (translation-equivariant) plus a
dense map of the whole feature map, each with its own prior.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from symkit._checks import check_number
from symkit.groups.base import Group
from symkit.nn._equivariance import Equivariant
from symkit.nn._factory import Resettable, factory
from symkit.nn._weight_cache import WeightCache
from symkit.nn.emlp import (
    BiLinear,
    EquivariantLinear,
    GatedNonlinearity,
    _BlockNetwork,
    _GatedBlock,
    check_input,
    gated,
    swish,
)
from symkit.nn.relaxed.container import RelaxedLayer
from symkit.nn.relaxed.layers import EquivConv2d, SpatialFC2d
from symkit.reps.core import Rep

__all__ = ["RPPLinear", "RPPGatedNonlinearity", "RPPEMLP", "RPPConv2d", "rpp_penalty", "equivariant_fraction"]

#: scale of the unconstrained path at initialisation, relative to the equivariant one (reference code: 1e-3)
BASIC_INIT_SCALE = 1e-3


class RPPLinear(Resettable, Equivariant, WeightCache, nn.Module):
    """``y = (A + B) x + a + b``: an equivariant linear layer (``A``, ``a``) plus a flexible one (``B``, ``b``):
    dense, or with ``subgroup=H`` an equivariant layer of ``H`` (reps restricted by :meth:`Rep.restrict`). The
    flexible path starts at ``basic_init_scale`` (default ``BASIC_INIT_SCALE``) times the equivariant path's scale:
    1 draws both paths alike, 0 starts the layer exactly equivariant."""

    def __init__(self, rep_in: Rep, rep_out: Rep, subgroup: Group | None = None, device: Any = None,
                 dtype: torch.dtype | None = None, basic_init_scale: float = BASIC_INIT_SCALE) -> None:
        super().__init__()
        f = factory(device, dtype)
        scale = check_number("RPPLinear: basic_init_scale", basic_init_scale)
        # both paths are read as weights and fused into one matmul (forward), so no irreducible form is built
        self.equivariant = EquivariantLinear(rep_in, rep_out, **f, irreps=False)
        self.subgroup = subgroup
        if subgroup is None:
            basic = nn.Linear(rep_in.size, rep_out.size, dtype=f["dtype"])  # initialised on the CPU, then moved
            with torch.no_grad():
                basic.weight.normal_(0.0, scale / math.sqrt(max(rep_in.size, 1)))
                basic.bias.zero_()
            self.basic = basic.to(f["device"])
        else:
            if not isinstance(subgroup, Group):
                raise TypeError(f"RPPLinear: subgroup must be a symkit Group, got {type(subgroup).__name__}")
            self.basic = EquivariantLinear(rep_in.restrict(subgroup), rep_out.restrict(subgroup), **f, irreps=False)
            with torch.no_grad():
                for p in self.basic.weight_basis.parameters():
                    p.mul_(scale)

    @property
    def rep_in(self) -> Rep:
        return self.equivariant.rep_in

    @property
    def rep_out(self) -> Rep:
        return self.equivariant.rep_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One matmul with the summed weight ``A + B`` (and bias ``a + b``): the two paths cost one dense layer."""
        check_input(lambda: f"RPPLinear (rep_in {self.rep_in!r})", self, x, self.equivariant.in_features)
        return torch.nn.functional.linear(x, *self._cached(self._summed))

    def _summed(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(A + B, a + b)``: the weight and bias of the two paths summed."""
        eq = self.equivariant
        W = eq.weight + self.basic.weight
        return W, (self.basic.bias if eq.bias_basis is None else eq.bias + self.basic.bias)


class RPPGatedNonlinearity(Resettable, Equivariant, nn.Module):
    """The gated nonlinearity plus a non-equivariant residual ``w * swish(v)`` with a per-channel weight ``w``
    (footnote 1 of ch. 3: gates do not reduce to swish, so the flexible path gets its own pointwise term); ``w``
    starts at ``basic_init_scale``."""

    def __init__(self, rep: Rep, device: Any = None, dtype: torch.dtype | None = None,
                 basic_init_scale: float = BASIC_INIT_SCALE) -> None:
        super().__init__()
        f = factory(device, dtype)
        scale = check_number("RPPGatedNonlinearity: basic_init_scale", basic_init_scale)
        self.gated = GatedNonlinearity(rep, device=device)
        self.basic = nn.Parameter(torch.full((rep.size,), scale, **f))

    @property
    def rep_in(self) -> Rep:
        return self.gated.rep_in

    @property
    def rep_out(self) -> Rep:
        return self.gated.rep

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = self.gated(x)
        # no gates: the gated output already is swish(x), so the residual reuses it
        return g + self.basic * (g if self.gated.pointwise else swish(x[..., : self.basic.shape[0]]))


class _RPPBlock(_GatedBlock):
    """:class:`EMLPBlock` with residual flexible paths: an :class:`RPPLinear` and an RPP gated nonlinearity (a plain
    one under a subgroup, whose gates are already ``H``-equivariant)."""

    def __init__(self, rep_in: Rep, rep_out: Rep, subgroup: Group | None = None, device: Any = None,
                 dtype: torch.dtype | None = None, bilinear_scale: float = 0.1,
                 basic_init_scale: float = BASIC_INIT_SCALE) -> None:
        super().__init__()
        self.linear = RPPLinear(rep_in, gated(rep_out), subgroup, device=device, dtype=dtype,
                                basic_init_scale=basic_init_scale)
        self.bilinear = BiLinear(gated(rep_out), scale=bilinear_scale, device=device, dtype=dtype)
        self.nonlinearity = (RPPGatedNonlinearity(rep_out, device=device, dtype=dtype,
                                                  basic_init_scale=basic_init_scale) if subgroup is None
                             else GatedNonlinearity(rep_out, device=device))


class RPPEMLP(Resettable, _BlockNetwork):
    """An EMLP whose every layer has a residual flexible path (RPP-EMLP, Sec. 3.4): unconstrained, or with
    ``subgroup=H`` equivariant under ``H`` (the model is then exactly ``H``-equivariant, softly ``group``-
    equivariant). Train it with ``loss = sum of negative log likelihoods + rpp_penalty(model, sigma_a, sigma_b)``.
    ``bilinear_scale`` multiplies the bilinear layers' outputs (:class:`BiLinear`'s ``scale``);
    ``basic_init_scale`` is the flexible paths' initial scale relative to the equivariant ones (:class:`RPPLinear`,
    the gated nonlinearities' residual weights); ``recompute`` as in :class:`~symkit.nn.EMLP`."""

    def __init__(
        self,
        rep_in: Rep,
        rep_out: Rep,
        group: Group,
        ch: int | Rep | Sequence[int | Rep] = 384,
        num_layers: int = 3,
        subgroup: Group | None = None,
        device: Any = None,
        dtype: torch.dtype | None = None,
        bilinear_scale: float = 0.1,
        basic_init_scale: float = BASIC_INIT_SCALE,
        recompute: bool = False,
    ) -> None:
        super().__init__()
        self.subgroup = subgroup
        self._build(rep_in, rep_out, group, ch, num_layers,
                    block=lambda a, b: _RPPBlock(a, b, subgroup, device, dtype, bilinear_scale, basic_init_scale),
                    head=lambda a, b: RPPLinear(a, b, subgroup, device=device, dtype=dtype,
                                                basic_init_scale=basic_init_scale),
                    who="RPPEMLP", recompute=recompute)


class RPPConv2d(RelaxedLayer):
    """The convolutional RPP (eq. 3.2, the reference code's ``LinearConvBlock`` without its activation):
    ``y = conv(x) + fc(x)``, a circular ``kernel_size`` convolution (exactly equivariant to cyclic translations)
    plus a dense map of the whole ``size x size`` feature map, which starts at ``BASIC_INIT_SCALE`` times its
    default scale. :func:`rpp_penalty` puts ``sigma_a`` on the convolution and ``sigma_b`` on the dense path;
    ``check_equivariance`` measures the departure from translation equivariance (exact once ``zero_path('fc')``)."""

    def __init__(self, in_channels: int, out_channels: int, size: int, kernel_size: int = 3, device: Any = None,
                 dtype: torch.dtype | None = None) -> None:
        f = factory(device, dtype)
        conv = EquivConv2d(in_channels, out_channels, size, kernel_size=kernel_size, **f)
        super().__init__({"conv": conv, "fc": SpatialFC2d(in_channels, out_channels, size, **f)}, combine="sum")
        self._shrink_dense_path()

    @torch.no_grad()
    def _shrink_dense_path(self) -> None:
        for p in self.paths["fc"].parameters():
            p.mul_(BASIC_INIT_SCALE)

    def reset_parameters(self) -> None:
        """Re-draw both paths as at construction (the dense path at ``BASIC_INIT_SCALE`` of its default scale)."""
        super().reset_parameters()
        self._shrink_dense_path()


def _split_parameters(model: nn.Module) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    equivariant, basic = [], []
    for module in model.modules():
        if isinstance(module, RPPLinear):
            equivariant += list(module.equivariant.weight_basis.parameters())
            if isinstance(module.basic, EquivariantLinear):  # a subgroup's path: |gamma| = |B|_F (orthonormal Q)
                basic += list(module.basic.weight_basis.parameters())
            else:
                basic.append(module.basic.weight)
        elif isinstance(module, RPPGatedNonlinearity):
            basic.append(module.basic)
        elif isinstance(module, RPPConv2d):
            equivariant.append(module.paths["conv"].weight)
            basic.append(module.paths["fc"].weight)
    return equivariant, basic


def rpp_penalty(model: nn.Module, sigma_equivariant: float, sigma_basic: float) -> torch.Tensor:
    """Negative log prior ``|beta|^2 / (2 sigma_a^2) + |B|^2 / (2 sigma_b^2)`` over the RPP layers of ``model``
    (RPPLinear, RPPGatedNonlinearity, RPPConv2d; biases unpenalised, as in the reference code). With orthonormal
    ``Q``, ``|beta| = |A|_F``."""
    for name, s in (("sigma_equivariant", sigma_equivariant), ("sigma_basic", sigma_basic)):
        if not (isinstance(s, (int, float)) and s > 0):
            raise ValueError(f"rpp_penalty: {name} must be a positive number, got {s!r}")
    equivariant, basic = _split_parameters(model)
    if not equivariant and not basic:
        raise ValueError(f"rpp_penalty: {type(model).__name__} has no RPP layers")
    total = sum(p.pow(2).sum() for p in equivariant) / (2 * sigma_equivariant**2)
    return total + sum(p.pow(2).sum() for p in basic) / (2 * sigma_basic**2)


@torch.no_grad()
def equivariant_fraction(model: nn.Module) -> float:
    """``sum |A|^2 / sum (|A|^2 + |B|^2)`` over the RPP linear layers: how much of the weight norm the equivariant
    path carries (1 = exactly equivariant linear layers)."""
    a = b = 0.0
    for module in model.modules():
        if isinstance(module, RPPLinear):
            a += float(module.equivariant.weight.pow(2).sum())
            b += float(module.basic.weight.pow(2).sum())
    if a + b == 0:
        raise ValueError(f"equivariant_fraction: {type(model).__name__} has no RPP linear layers")
    return a / (a + b)
