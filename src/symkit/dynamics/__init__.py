"""Optimization dynamics of augmented versus equivariant networks (Nordenfors, Ohlsson, Flinth; arXiv 2303.13458).

The finite groups acting on grids by permutations, and the lifted action on layers, are :mod:`symkit.actions`'s.
- :mod:`~symkit.dynamics.projections`: Pi_E by group average, by the core basis, and fast special cases; dim E.
- :mod:`~symkit.dynamics.model`: the MLP over layer tensors (``ProjectNet``).
- :mod:`~symkit.dynamics.training`: nominal / augmented / equivariant gradient descent and drift tracking.
- :mod:`~symkit.dynamics.hessian`: Hessian-vector products of the risks and the spectrum on E^perp.
"""

from symkit.dynamics.hessian import (
    flat_params,
    hvp_fn,
    lift_bilinear,
    lift_flat,
    perp_hessian_eigs,
    project_bilinear,
    project_flat,
    risk_fn,
)
from symkit.dynamics.model import ProjectNet
from symkit.dynamics.projections import (
    LayerSpec,
    basis_projection,
    c4_projection,
    dim_E,
    dim_L,
    equality_patterns,
    fft_projection_1d,
    fft_projection_2d,
    group_average,
    pattern_projection,
    project,
    project_vector,
    relative_dimension,
    translation_projection_1d,
    translation_projection_2d,
    transrot_projection,
)
from symkit.dynamics.training import (
    MODES,
    Trajectory,
    distances,
    full_batch_gradient,
    projectnet_equivariance_error,
    train,
)

__all__ = [
    "LayerSpec", "group_average", "basis_projection", "fft_projection_2d", "fft_projection_1d", "c4_projection",
    "translation_projection_2d", "translation_projection_1d", "pattern_projection", "transrot_projection", "project",
    "project_vector", "dim_E", "dim_L",
    "relative_dimension", "equality_patterns",
    "ProjectNet", "MODES", "Trajectory", "distances", "projectnet_equivariance_error", "full_batch_gradient", "train",
    "flat_params", "hvp_fn", "lift_flat", "lift_bilinear", "project_bilinear", "perp_hessian_eigs", "project_flat",
    "risk_fn",
]
