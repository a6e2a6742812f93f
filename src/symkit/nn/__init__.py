"""Torch modules: exactly equivariant layers (EMLP), soft equivariance (RPP), p4 group convolutions, and the other
layer families in their submodules (`symkit.nn.powernet`, `symkit.nn.relaxed`, `symkit.nn.sharing`,
`symkit.nn.vision`)."""

from symkit.nn._inputs import parameter_like
from symkit.nn.augment import GroupAugmented
from symkit.nn.emlp import (
    EMLP,
    MLP,
    BiLinear,
    EMLPBlock,
    EquivariantLinear,
    GatedNonlinearity,
    gate_count,
    gated,
    swish,
    uniform_rep,
)
from symkit.nn.export import export
from symkit.nn.groupconv import P4CNN, P4BatchNorm2d, P4Conv2d, P4LiftConv2d, rotate_p4
from symkit.nn.networks import NETWORKS, network
from symkit.nn.ode import HamiltonianNet, NeuralODE, rollout, rollout_error
from symkit.nn.rpp import RPPEMLP, RPPConv2d, RPPGatedNonlinearity, RPPLinear, equivariant_fraction, rpp_penalty
from symkit.nn.standardize import Standardize, rep_statistics
from symkit.nn.vision import MaskedAutoencoder, patchify

__all__ = [
    "EMLP", "MLP", "BiLinear", "export", "EMLPBlock", "EquivariantLinear", "GatedNonlinearity", "gate_count", "gated",
    "swish",
    "uniform_rep", "RPPEMLP", "RPPConv2d", "RPPGatedNonlinearity", "RPPLinear", "equivariant_fraction", "rpp_penalty",
    "Standardize", "rep_statistics", "GroupAugmented", "HamiltonianNet", "NeuralODE", "rollout", "rollout_error",
    "P4CNN", "P4BatchNorm2d", "P4Conv2d", "P4LiftConv2d", "rotate_p4", "MaskedAutoencoder", "patchify", "NETWORKS",
    "network", "parameter_like",
]
