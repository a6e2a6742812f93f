"""Intrinsic-dimension subspace training (thesis ch. 5, Eq. 5.3; Li et al. 2018): a net's parameters are

    θ = θ0 + P w,    P ∈ R^{D x d},  P^T P ≈ I,

with only ``w ∈ R^d`` trained. ``θ0`` is the net's initial point (or a pretrained / data-dependent point: thesis
§5.4 item 7, §5.5.2) and ``P`` a random projector regenerated from a seed (:mod:`symkit.pacbayes.projectors`), so a
trained model is described by ``w`` alone, given the seeds of ``θ0`` and ``P``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.func import functional_call

from symkit._checks import check_int
from symkit.pacbayes.projectors import CACHE_BYTES, DEFAULT_SEED, KINDS, Projector, film_mask, make_projector

__all__ = ["SubspaceModel"]


class SubspaceModel(nn.Module):
    """``net`` evaluated at ``θ = θ0 + P w`` (thesis Eq. 5.3); ``w`` (shape ``(intrinsic_dim,)``, zeros at the
    start) is the only trainable parameter.

    - ``net``: any module; its parameters (``net.parameters()`` order, shared ones once; ``D`` of them in all) are
      frozen (``requires_grad=False``) and are not what ``forward`` uses; its buffers (BatchNorm running statistics)
      are, and training-mode updates of them go to the net as usual.
    - ``projector``: a kind of :func:`~symkit.pacbayes.projectors.make_projector` (``"kron-sum"`` by default; the
      FiLM kinds take their rows from :func:`~symkit.pacbayes.projectors.film_mask` of ``net``), built with ``seed``
      on ``θ0``'s device and dtype, or a :class:`~symkit.pacbayes.projectors.Projector` of shape ``D x d``.
    - ``theta0``: the point the subspace passes through. ``None`` copies the net's current parameters; a flat tensor
      of length ``D`` (in ``net.parameters()`` order) or a state dict (parameters by name; parameters it leaves out
      keep the net's current values, e.g. a re-initialised head for transfer; buffers it holds, such as running
      statistics, are copied into the net) gives a transfer or data-dependent initial point.
    - ``intrinsic_dim=0`` is the point ``θ = θ0`` (the data-dependent prior of §5.5.2 with ``Q`` a point mass at it):
      no projector is built, ``w`` has shape ``(0,)`` and does not require a gradient (a
      :class:`~symkit.train.Trainer` finds nothing to train), and ``forward`` evaluates the net at ``θ0``.

    ``forward(x, w=None)`` is ``functional_call(net, θ0 + P w, x)`` with ``w`` the given vector or ``self.w``;
    ``load_into_net(w)`` writes ``θ`` into the net's own parameters to use the plain net.
    """

    def __init__(self, net: nn.Module, intrinsic_dim: int, projector: str | Projector = "kron-sum", *,
                 seed: int = DEFAULT_SEED, theta0: torch.Tensor | Mapping[str, torch.Tensor] | None = None,
                 cache_bytes: int = CACHE_BYTES) -> None:
        super().__init__()
        if not isinstance(net, nn.Module):
            raise TypeError(f"SubspaceModel: net must be an nn.Module, got {type(net).__name__}")
        named = list(net.named_parameters())
        if not named:
            raise ValueError("SubspaceModel: net has no parameters")
        kinds = {(p.dtype, p.device) for _, p in named}
        if len(kinds) != 1 or not named[0][1].is_floating_point():
            raise ValueError(f"SubspaceModel: the net's parameters must share one floating dtype and one device, got "
                             f"{sorted(str(k) for k in kinds)}")
        self._names = [n for n, _ in named]
        self._shapes = [p.shape for _, p in named]
        self._numels = [p.numel() for _, p in named]
        D = sum(self._numels)
        d = check_int("SubspaceModel: intrinsic_dim", intrinsic_dim, 0)
        if d > D:
            raise ValueError(f"SubspaceModel: intrinsic_dim must be <= the number of parameters D = {D}, got {d}")
        dtype, device = named[0][1].dtype, named[0][1].device
        start = self._initial_point(net, named, theta0, D)
        for _, p in named:
            p.requires_grad_(False)
        self.net = net
        self.register_buffer("theta0", start)
        if isinstance(projector, Projector):
            if (projector.D, projector.d) != (D, d):
                raise ValueError(f"SubspaceModel: the projector is {projector.D} x {projector.d}, expected D x d = "
                                 f"{D} x {d}")
            self.projector: Projector | None = projector.to(device=device, dtype=dtype)
        elif not isinstance(projector, str) or projector not in KINDS:
            raise ValueError(f"SubspaceModel: projector must be one of {KINDS} or a Projector, got {projector!r}")
        elif d == 0:
            self.projector = None
        else:
            mask = film_mask(net) if projector.startswith("film") else None
            self.projector = make_projector(projector, D, d, seed=seed, film_mask=mask, device=device, dtype=dtype,
                                            cache_bytes=cache_bytes)
        self.w = nn.Parameter(torch.zeros(d, device=device, dtype=dtype), requires_grad=d > 0)

    @staticmethod
    def _initial_point(net: nn.Module, named: list[tuple[str, nn.Parameter]], theta0: Any, D: int) -> torch.Tensor:
        p0 = named[0][1]
        if theta0 is None:
            return torch.cat([p.detach().reshape(-1) for _, p in named]).clone()
        if isinstance(theta0, torch.Tensor):
            if theta0.shape != (D,) or not theta0.is_floating_point():
                raise ValueError(f"SubspaceModel: theta0 must be a floating tensor of shape (D,) = ({D},) or a state "
                                 f"dict, got a {theta0.dtype} tensor of shape {tuple(theta0.shape)}")
            return theta0.detach().to(device=p0.device, dtype=p0.dtype).clone()
        if not isinstance(theta0, Mapping):
            raise TypeError(f"SubspaceModel: theta0 must be None, a flat tensor or a state dict, got "
                            f"{type(theta0).__name__}")
        params = dict(named)
        buffers = dict(net.named_buffers())
        unknown = [k for k in theta0 if k not in params and k not in buffers]
        if unknown:
            raise ValueError(f"SubspaceModel: theta0 has keys that name no parameter or buffer of the net: "
                             f"{unknown[:5]}{' ...' if len(unknown) > 5 else ''}")
        for key, value in theta0.items():
            target = params.get(key, buffers.get(key))
            if not isinstance(value, torch.Tensor) or value.shape != target.shape:
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise ValueError(f"SubspaceModel: theta0[{key!r}] must have shape {tuple(target.shape)}, got {got}")
        with torch.no_grad():
            for key, buf in buffers.items():
                if key in theta0 and key not in params:
                    buf.copy_(theta0[key])
        return torch.cat([(theta0[n] if n in theta0 else p).detach().reshape(-1).to(device=p0.device, dtype=p0.dtype)
                          for n, p in named]).clone()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """``w = 0`` (the point ``θ0``, which does not change); the wrapped net's own (unused, frozen) parameters are
        reset too when it has ``reset_parameters``."""
        if hasattr(self.net, "reset_parameters"):
            self.net.reset_parameters()
        self.w.zero_()

    @property
    def num_params(self) -> int:
        """``D``, the number of the net's parameters."""
        return sum(self._numels)

    @property
    def intrinsic_dim(self) -> int:
        """``d``, the dimension of the subspace."""
        return self.w.numel()

    def _vector(self, w: torch.Tensor | None) -> torch.Tensor:
        if w is None:
            return self.w
        d = self.intrinsic_dim
        if not isinstance(w, torch.Tensor) or w.shape != (d,) or not w.is_floating_point():
            got = f"a {w.dtype} tensor of shape {tuple(w.shape)}" if isinstance(w, torch.Tensor) else type(w).__name__
            raise ValueError(f"SubspaceModel: w must be a floating tensor of shape (intrinsic_dim,) = ({d},), got "
                             f"{got}")
        return w

    def flat_theta(self, w: torch.Tensor | None = None) -> torch.Tensor:
        """``θ = θ0 + P w`` (thesis Eq. 5.3), flat in ``net.parameters()`` order; ``w`` defaults to ``self.w``.
        With ``intrinsic_dim=0`` it is a copy of ``θ0``."""
        w = self._vector(w)
        if self.projector is None:
            return self.theta0.clone()
        return self.theta0 + self.projector(w)

    def _params(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        return {n: t.view(s) for n, t, s in zip(self._names, theta.split(self._numels), self._shapes)}

    def forward(self, x: Any, w: torch.Tensor | None = None) -> Any:
        """``net(x)`` at ``θ = θ0 + P w`` (``w`` defaults to ``self.w``), through ``torch.func.functional_call``;
        the net's buffers are its own."""
        return functional_call(self.net, self._params(self.flat_theta(w)), (x,))

    @torch.no_grad()
    def load_into_net(self, w: torch.Tensor | None = None) -> nn.Module:
        """Write ``θ = θ0 + P w`` into the net's own parameters (they stay frozen) and return the net."""
        theta = self._params(self.flat_theta(w))
        for name, p in self.net.named_parameters():
            p.copy_(theta[name])
        return self.net

    def extra_repr(self) -> str:
        kind = "none" if self.projector is None else self.projector.kind
        return f"D={self.num_params}, d={self.intrinsic_dim}, projector={kind!r}"
