"""Groups acting on data: the one vocabulary every symkit package speaks.

An *action* says how a group moves the samples of a data set: the entries of a grid or an image, the nodes of a graph,
the pixels under a continuous flow. Two kinds, one protocol:

- **Discrete** (:class:`PermAction`): a finite group permuting the entries of a grid: cyclic shifts
  (:class:`CyclicTranslations2D`, :class:`CyclicTranslations1D`), quarter turns (:class:`Rotations90`, and
  :class:`P4Maps` on p4 feature maps), both
  (:class:`TranslationsRotations`), permutations of a set or of a graph's nodes (:class:`Permutations`), or any finite
  permutation group of the core (:class:`GroupAction`).
- **Continuous** (:class:`ImageFlow`): a one-parameter group of image transforms with a generator (translations,
  rotations, scalings, shears, stretches, brightness; :func:`get_transform` by name).

Every action has ``flows()`` (its continuous generators, for Lie derivatives); a discrete action also has
``act``/``sample``/``elements``/``generators`` and ``to_group()`` (the core :class:`~symkit.groups.Group` of its
permutation matrices), and a flow has ``grid_generator(shape)`` (its sampled generator as a matrix). From one action a
user gets:

- the projection onto equivariant layers (seed 002): ``symkit.dynamics.project(A, LayerSpec(action, action, c_in,
  c_out))``;
- the Lie derivative (thesis ch. 4): ``symkit.measure.lie_derivative(model, x, action)`` or ``lee_table``;
- PowerNet bases (seed 003): ``symkit.nn.powernet.bases_for(action)``;
- an equivariance test: ``symkit.testing.assert_equivariant(model, action, action, inputs=x)``;
- the core's equivariant bases: ``V(action.to_group())``.
"""

from symkit.actions.derivatives import (
    GENERATOR_NAMES,
    affine_generator,
    check_grid_shape,
    coordinates,
    derivative_2d,
    generator,
    sw_derivative,
    sw_kernel,
)
from symkit.actions.flows import (
    SPATIAL_TRANSFORMS,
    TRANSFORM_NAMES,
    ImageFlow,
    bilinear_sample,
    get_transform,
    pixels_per_unit,
    translate_pixels,
)
from symkit.actions.grid import (
    CyclicTranslations1D,
    CyclicTranslations2D,
    Element,
    GroupAction,
    P4Maps,
    PermAction,
    Permutations,
    Rotations90,
    TranslationsRotations,
    TrivialAction,
    act,
    lift,
    lift_inverse,
)

__all__ = [
    "GENERATOR_NAMES",
    "SPATIAL_TRANSFORMS",
    "TRANSFORM_NAMES",
    "CyclicTranslations1D",
    "CyclicTranslations2D",
    "Element",
    "GroupAction",
    "ImageFlow",
    "PermAction",
    "Permutations",
    "P4Maps",
    "Rotations90",
    "TranslationsRotations",
    "TrivialAction",
    "act",
    "affine_generator",
    "bilinear_sample",
    "check_grid_shape",
    "coordinates",
    "derivative_2d",
    "generator",
    "get_transform",
    "lift",
    "lift_inverse",
    "pixels_per_unit",
    "sw_derivative",
    "sw_kernel",
    "translate_pixels",
]
