"""The MLP over layer tensors studied in the paper (§3, Eq. 1; the reference code's ``ProjectNet``).

``x_{i+1} = sigma_i(A_i x_i + b_i)`` with ``A_i`` of shape ``(c_out, c_in, *shape_out, *shape_in)`` acting on
features ``(batch, c, *shape)``; pointwise non-linearities and LayerNorm without affine parameters over
(channels, grid) are equivariant for permutation representations (Assumption 2). Biases, when enabled, follow
App. F: the lift acts on them by ``b -> rho_out(g) b`` and the projection keeps the invariant part.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence

import torch
from torch import nn

from symkit.actions.grid import Element, act, lift
from symkit.dynamics.projections import LayerSpec, project, project_vector
from symkit.nn._equivariance import Equivariant, standard_normal
from symkit.nn._factory import Resettable, factory, on

__all__ = ["ProjectNet", "ACTIVATIONS"]

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "leaky_relu": nn.functional.leaky_relu,
    "tanh": torch.tanh,
    "relu": torch.relu,
    "identity": lambda x: x,
}


class ProjectNet(Resettable, Equivariant, nn.Module):
    """An MLP ``Phi_A`` whose layers are the :class:`LayerSpec` s ``specs`` (consecutive specs must chain).

    ``activation`` is applied after every layer but the last; ``norm_after`` lists the layers followed by a
    LayerNorm without affine parameters. The output is the last layer's pre-activation (logits). The initial
    weights are Gaussian, projected onto E (``equivariant_init=True``) and rescaled so that each layer has squared
    Frobenius norm ``gain^2 c_out |shape_out|`` (rows of unit-``gain`` norm on average).
    """

    def __init__(
        self,
        specs: Sequence[LayerSpec],
        activation: str = "leaky_relu",
        norm_after: Sequence[int] = (),
        bias: bool = False,
        gain: float = 1.0,
        equivariant_init: bool = True,
        seed: int = 0,
        dtype: torch.dtype | None = None,
        projection: str = "auto",
        device: object = None,
    ) -> None:
        super().__init__()
        specs = list(specs)
        if not specs:
            raise ValueError("ProjectNet: specs must be a non-empty sequence of LayerSpec")
        for i, s in enumerate(specs):
            if not isinstance(s, LayerSpec):
                raise TypeError(f"ProjectNet: specs[{i}] is a {type(s).__name__}, expected a LayerSpec")
            if i and (s.c_in != specs[i - 1].c_out or s.action_in.shape != specs[i - 1].action_out.shape):
                raise ValueError(f"ProjectNet: specs[{i}] input does not match the output of specs[{i - 1}]")
            if s.action_in.group_key != specs[0].action_in.group_key:
                raise ValueError(f"ProjectNet: specs[{i}] acts with another group than specs[0]")
        if activation not in ACTIVATIONS:
            raise ValueError(f"ProjectNet: activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        for i in norm_after:
            if not 0 <= i < len(specs) - 1:
                raise ValueError(f"ProjectNet: norm_after index {i} is not a hidden layer (0..{len(specs) - 2})")
        self.specs = specs
        self.activation = activation
        self.norm_after = tuple(norm_after)
        self.projection = projection
        gen = torch.Generator().manual_seed(seed)
        f = factory(device, dtype)
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList() if bias else None
        for s in specs:
            A = torch.randn(s.shape, generator=gen, dtype=torch.float64)
            if equivariant_init:
                A = project(A, s, projection)
            A = A * (gain * math.sqrt(s.c_out * max(s.action_out.size, 1)) / A.norm().clamp_min(1e-30))
            self.weights.append(nn.Parameter(on(A, f)))  # drawn and projected on the CPU in float64, then moved
            if bias:
                self.biases.append(nn.Parameter(torch.zeros((s.c_out, *s.action_out.shape), **f)))

    # ------------------------------------------------------------------ structure
    @property
    def action_in(self):
        return self.specs[0].action_in

    @property
    def action_out(self):
        return self.specs[-1].action_out

    def example_input(self, batch: int = 4, generator: torch.Generator | None = None) -> torch.Tensor:
        """``(batch, c_in, *shape_in)`` standard normal features (for :meth:`check_equivariance`)."""
        s0 = self.specs[0]
        return standard_normal(self, (batch, s0.c_in, *s0.action_in.shape), generator)

    def layer_params(self) -> list[tuple[int, str, nn.Parameter]]:
        """(layer index, "weight" or "bias", parameter) for every parameter, in order."""
        out = [(i, "weight", w) for i, w in enumerate(self.weights)]
        if self.biases is not None:
            out += [(i, "bias", b) for i, b in enumerate(self.biases)]
        return out

    def project_tensor(self, i: int, kind: str, t: torch.Tensor, method: str | None = None) -> torch.Tensor:
        """Pi_E of a weight (Lemma 2) or of a bias (invariant part, App. F) of layer ``i``."""
        s = self.specs[i]
        if kind == "weight":
            return project(t, s, method or self.projection)
        return project_vector(t, s.action_out)

    def lift_tensor(self, i: int, kind: str, t: torch.Tensor, g: Element) -> torch.Tensor:
        """rho_bar(g) on a weight (Eq. 8) or rho_out(g) on a bias of layer ``i``."""
        s = self.specs[i]
        if kind == "weight":
            return lift(t, g, s.action_in, s.action_out)
        return act(s.action_out, t, g)

    # ------------------------------------------------------------------ forward
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s0 = self.specs[0]
        expect = (s0.c_in, *s0.action_in.shape)
        if tuple(x.shape[1:]) != expect:
            raise ValueError(f"ProjectNet: input of shape {tuple(x.shape)}, expected (batch, {expect})")
        sigma = ACTIVATIONS[self.activation]
        h = x
        last = len(self.specs) - 1
        for i, (s, W) in enumerate(zip(self.specs, self.weights)):
            B = h.shape[0]
            hf = h.reshape(B, s.c_in, max(s.action_in.size, 1))
            Wf = W.reshape(s.c_out, s.c_in, max(s.action_out.size, 1), max(s.action_in.size, 1))
            h = torch.einsum("oiab,nib->noa", Wf, hf).reshape(B, s.c_out, *s.action_out.shape)
            if self.biases is not None:
                h = h + self.biases[i]
            if i < last:
                h = sigma(h)
                if i in self.norm_after:
                    h = nn.functional.layer_norm(h, tuple(h.shape[1:]))
        return h

    def copy(self) -> ProjectNet:
        """An independent deep copy (Nom, Aug and Equi start from the same A^0)."""
        return copy.deepcopy(self)
