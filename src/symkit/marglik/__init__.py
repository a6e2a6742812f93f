"""symkit.marglik: Laplace marginal likelihood with Kronecker-factored GGN curvature (KFAC)."""

from symkit.marglik.api import LaplaceApproximation
from symkit.marglik.fit import MarglikFit, fit_with_marglik
from symkit.marglik.kfac import BatchFactors, KronBlock, KronCurvature, batch_factors, exact_ggn, fit_kfac
from symkit.marglik.laplace import (
    KroneckerLaplace,
    PriorGroup,
    effective_layer_types,
    expand_prior_precision,
    map_penalty,
    path_diagnostics,
    prior_groups,
)
from symkit.marglik.omega import OmegaGradient, omega_gradient, omega_parameters
from symkit.marglik.training import MarglikConfig, MarglikResult, hyper_update_epochs, train_marglik

__all__ = [
    "BatchFactors", "KronBlock", "KronCurvature", "KroneckerLaplace", "LaplaceApproximation", "MarglikConfig",
    "MarglikFit", "MarglikResult", "OmegaGradient", "PriorGroup", "batch_factors", "effective_layer_types",
    "exact_ggn", "expand_prior_precision", "fit_kfac", "fit_with_marglik", "hyper_update_epochs", "map_penalty",
    "omega_gradient", "omega_parameters", "path_diagnostics", "prior_groups", "train_marglik",
]
