"""symkit.measure: how equivariant is a model, where is it lost (thesis ch. 4)."""

from symkit.measure.lie import (
    LEEResult,
    act,
    lee,
    lee_table,
    lie_derivative,
    lie_derivative_penalty,
    reduce_lie,
    tensor_kind,
    with_scores,
)
from symkit.measure.transforms import (
    SPATIAL_TRANSFORMS,
    TRANSFORM_NAMES,
    ImageFlow,
    bilinear_sample,
    get_transform,
    pixels_per_unit,
    translate_pixels,
)

__all__ = [
    "LEEResult",
    "ImageFlow",
    "SPATIAL_TRANSFORMS",
    "TRANSFORM_NAMES",
    "act",
    "bilinear_sample",
    "get_transform",
    "lee",
    "lee_table",
    "lie_derivative",
    "lie_derivative_penalty",
    "pixels_per_unit",
    "reduce_lie",
    "tensor_kind",
    "translate_pixels",
    "with_scores",
]
