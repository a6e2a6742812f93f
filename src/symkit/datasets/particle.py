"""Lorentz-invariant e-mu scattering ("Particle", thesis Sec. 2.7.1 and A.1.10): a registered task ``"particle"``.

Inputs are four 4-momenta, each component drawn from ``N(0, 1/4^2)`` (off-shell: no mass constraint), in the
layout ``(p, q, p~, q~)`` of the reference data set (its ``p1, p2, p3, p4``): the electron line is ``p -> p~``,
the muon line ``q -> q~``. With the Minkowski metric ``eta = diag(1, -1, -1, -1)`` and ``a.b = a^T eta b``, the
target is the scattering matrix element of A.1.10,

    y = 4 L_e^{mu nu} L^mu_{mu nu},
    L_e^{mu nu} = p^mu p~^nu - (p.p~ - p.p) eta^{mu nu},     L^mu_{mu nu} = q_mu q~_nu - (q.q~ - q.q) eta_{mu nu},

a scalar, so ``4 T(1,0) -> T(0,0)``, invariant under the full Lorentz group O(1,3) (and so under SO(1,3) and
SO+(1,3)).

Decision (thesis against code): the thesis symmetrises the outer products, ``p^(mu p~^nu) = (p^mu p~^nu +
p~^mu p^nu) / 2`` (and the same for ``q, q~``); the authors' data set does not. Both are O(1,3)-invariant. The
values behind Figure 2.5 were produced with the unsymmetrised form, so it is the default here
(``symmetrize=False`` in :func:`particle_interaction`; the registered task uses it). The two differ by an
invariant:

    y_sym - y = 2 [(p.q~)(p~.q) - (p.q)(p~.q~)],

since only the ``A:B`` term of the contraction changes, ``(A + A^T)/2 : (B + B^T)/2 = (A:B + A:B^T) / 2``.
Expanding the unsymmetrised form gives the closed expression the tests check:

    y = 4 [(p.q)(p~.q~) - (q.q~ - q.q)(p.p~) - (p.p~ - p.p)(q.q~) + 4 (p.p~ - p.p)(q.q~ - q.q)].

Scaling (used by the experiment, not here): the reference divides each 4-vector by
``sqrt(mean |(eta p)_mu p_mu|)``, the absolute value taken per component, which is the RMS of its entries: the
same one-scale-per-object statistic as :class:`~symkit.nn.Standardize` (not the Minkowski norm ``|p^T eta p|``,
which would be smaller, as the time and space parts cancel). Either way the scale is one constant per object,
which keeps every symmetry. The target is centred and scaled by its standard deviation in both.
"""

from __future__ import annotations

import torch

from symkit._checks import check_int
from symkit.datasets.tasks import SymmetricTask, register_task
from symkit.groups import O13, Group
from symkit.reps import Scalar, V

__all__ = ["particle_interaction", "particle_target", "minkowski_dot", "PARTICLE"]

#: the standard deviation of each momentum component (thesis A.1.10: N(0, 1/4^2))
MOMENTUM_SCALE = 0.25


def minkowski_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a.b = a^0 b^0 - a^1 b^1 - a^2 b^2 - a^3 b^3`` over the last dimension (metric ``diag(1, -1, -1, -1)``)."""
    if a.shape[-1] != 4 or b.shape[-1] != 4:
        raise ValueError(f"minkowski_dot: expected 4-vectors (last dimension 4), got shapes {tuple(a.shape)} and "
                         f"{tuple(b.shape)}")
    prod = a * b
    return prod[..., 0] - prod[..., 1:].sum(-1)


def _momenta(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    if not isinstance(x, torch.Tensor) or x.ndim != 2 or x.shape[1] != 16:
        raise ValueError("particle: expected inputs of shape (N, 16), four 4-momenta (p, q, p~, q~) per row, got "
                         f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
    p, q, pt, qt = x.reshape(-1, 4, 4).unbind(1)
    return p, q, pt, qt


def particle_target(x: torch.Tensor, symmetrize: bool = False) -> torch.Tensor:
    """The matrix element ``y = 4 L_e^{mu nu} L^mu_{mu nu}`` (module docstring, thesis A.1.10) of inputs ``x``
    ``(N, 16)`` in the layout ``(p, q, p~, q~)``; ``(N, 1)`` in the dtype and on the device of ``x``.

    ``symmetrize=True`` symmetrises the outer products ``p^mu p~^nu`` and ``q_mu q~_nu`` as the thesis prints it;
    the default is the authors' data set, which does not. Both are O(1,3)-invariant."""
    if not isinstance(symmetrize, bool):
        raise TypeError(f"particle_target: symmetrize must be a bool, got {type(symmetrize).__name__}")
    p, q, pt, qt = _momenta(x)
    eta = torch.diag(torch.tensor([1.0, -1.0, -1.0, -1.0], dtype=x.dtype, device=x.device))
    # upper indices for the electron tensor, lower ones (eta q) for the muon tensor
    a = p[:, :, None] * pt[:, None, :]
    b = (q @ eta)[:, :, None] * (qt @ eta)[:, None, :]
    if symmetrize:
        a, b = (a + a.transpose(1, 2)) / 2, (b + b.transpose(1, 2)) / 2
    l_e = a - (minkowski_dot(p, pt) - minkowski_dot(p, p))[:, None, None] * eta
    l_mu = b - (minkowski_dot(q, qt) - minkowski_dot(q, q))[:, None, None] * eta
    return 4 * (l_e * l_mu).sum((1, 2))[:, None]


def _inputs(n: int, g: torch.Generator) -> torch.Tensor:
    return MOMENTUM_SCALE * torch.randn(n, 16, generator=g, dtype=torch.float64)


def _reps(G: Group) -> tuple:
    return 4 * V(G), Scalar


PARTICLE = register_task(SymmetricTask(
    "particle", _inputs, particle_target, _reps, O13(),
    description="4 T(1,0) -> T(0,0): the e-mu scattering matrix element, four off-shell 4-momenta ~ N(0, 1/16) "
                "(Sec. 2.7.1, A.1.10; unsymmetrised, as the authors' data set)"))


def particle_interaction(n: int, seed: int = 0, symmetrize: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` seeded samples ``(x, y)`` (float64) of the Lorentz-invariant e-mu scattering task (thesis Sec. 2.7.1,
    A.1.10): ``x`` ``(n, 16)`` holds the 4-momenta ``(p, q, p~, q~)``, ``y`` ``(n, 1)`` the matrix element of
    :func:`particle_target`. The inputs do not depend on ``symmetrize``, so both forms can be compared on the
    same draws."""
    if not isinstance(symmetrize, bool):
        raise TypeError(f"particle_interaction: symmetrize must be a bool, got {type(symmetrize).__name__}")
    x, y = PARTICLE.generate(check_int("n", n, 1), seed)
    return (x, particle_target(x, symmetrize=True)) if symmetrize else (x, y)
