"""PowerNet: layers whose weights are truncated Laurent series in fixed base matrices.

A :class:`PowerLayer` computes ``sum_i theta_i M^i x`` for a base matrix ``M`` (or several). With ``M`` a
permutation (cyclic shift, rot90) the layer is exactly equivariant to the cyclic group ``<M>``; with ``M =
expm(eps G)`` for a Shannon–Whittaker generator ``G`` (rotation, scaling, shear) the weights still commute with ``M``
but the layer is only quasi-equivariant. See ``docs/powernet.md``.
"""

from symkit.nn.powernet.bases import (
    BASE_NAMES,
    Base,
    DenseBase,
    PermutationBase,
    bases_for,
    cyclic_shift,
    expm_base,
    grid_shift,
    make_base,
    rot90_permutation,
    sw_derivative_paper,
    sw_shift,
)
from symkit.nn.powernet.layer import PowerLayer, power_set
from symkit.nn.powernet.net import ConvNet, PowerBlock, PowerNet

__all__ = [
    "BASE_NAMES",
    "Base",
    "ConvNet",
    "DenseBase",
    "PermutationBase",
    "PowerBlock",
    "PowerLayer",
    "PowerNet",
    "bases_for",
    "cyclic_shift",
    "expm_base",
    "grid_shift",
    "make_base",
    "power_set",
    "rot90_permutation",
    "sw_derivative_paper",
    "sw_shift",
]
