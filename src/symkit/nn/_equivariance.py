"""``check_equivariance()`` for every layer family that is built for a symmetry.

A layer declares what it is built to commute with: core reps (``rep_in``/``rep_out``: the EMLP and RPP layers) or
grid actions (``action_in``/``action_out``: the projected networks of seed 002, the circular convolutions of seed 001,
PowerNet layers on permutation bases). :meth:`Equivariant.check_equivariance` then runs
:func:`symkit.testing.assert_equivariant` on the module with those declarations and, for actions, an input of the
module's own shape, dtype and device (``example_input``).

Soft layers (RPP, relaxed layers with non-equivariant paths) declare the symmetry of their equivariant part: the
check holds exactly only once their other paths are zero, and otherwise measures how far they have moved from it.
"""

from __future__ import annotations

from typing import Any

import torch

from symkit.nn._inputs import parameter_like
from symkit.testing import _attribute_symmetry, assert_equivariant

__all__ = ["Equivariant"]


class Equivariant:
    """Mixin for modules built for a symmetry: the protocol is one method, ``declared_symmetry() -> (input, output)``,
    each a core ``Rep`` or a grid ``PermAction`` (for an action, a ``None`` output is invariant), which both
    :meth:`check_equivariance` and :func:`symkit.testing.assert_equivariant` read. Its default reads
    ``rep_in``/``rep_out`` or ``action_in``/``action_out``; layers whose symmetry is derived (sharing patterns,
    PowerNet bases, relaxed paths, p4 grids) override it."""

    def declared_symmetry(self) -> tuple[Any, Any]:
        """``(rep_in, rep_out)`` or ``(action_in, action_out)``; a TypeError says why a layer declares none."""
        declared = _attribute_symmetry(self)
        if declared is not None:
            return declared
        raise TypeError(f"{type(self).__name__} declares no symmetry (rep_in/rep_out or action_in/action_out)")

    def example_input(self, batch: int = 4, generator: torch.Generator | None = None) -> torch.Tensor:
        """A standard normal input of the layer's shape, on its device and in its dtype (layers acted on by grid
        actions override this; rep layers are checked at 4 standard normal rows unless given ``inputs``)."""
        raise NotImplementedError(f"{type(self).__name__}: pass inputs= to check_equivariance")

    def check_equivariance(self, inputs: torch.Tensor | None = None, *, tol: float | None = None, n: int = 5,
                           seed: int = 0) -> float:
        """Assert that the layer commutes with its declared symmetry at ``inputs`` (default: drawn with ``seed``):
        ``err(g) <= tol * k(g)`` for every discrete generator and ``n`` sampled elements, and the derivative along
        every Lie algebra generator (:mod:`symkit.testing`); returns the largest error. ``tol`` defaults to
        ``64 eps`` of the layer's dtype. Raises AssertionError naming the worst check, or on any non-finite output."""
        rep_in, rep_out = self.declared_symmetry()
        if inputs is None and hasattr(rep_in, "act"):
            inputs = self.example_input(generator=torch.Generator().manual_seed(seed))
        return assert_equivariant(self, rep_in, rep_out, tol=tol, n=n, seed=seed, inputs=inputs)


def standard_normal(module: torch.nn.Module, shape: tuple[int, ...], generator: torch.Generator | None) -> torch.Tensor:
    """``N(0, 1)`` draws of ``shape`` (on the CPU from ``generator``), placed like ``module``'s parameters."""
    device, dtype = parameter_like(module)
    return torch.randn(shape, generator=generator, dtype=dtype).to(device)
