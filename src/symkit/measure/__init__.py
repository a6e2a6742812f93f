"""symkit.measure: how equivariant is a model, where is it lost (thesis ch. 4)."""

from symkit.measure.aliasing import alias, fourier_translate, predicted_aliasing_error
from symkit.measure.baselines import (
    SampleResult,
    discrete_shift_consistency,
    pi_consistency_loss,
    sample_equivariance_error,
    sample_rotation_error,
    sample_translation_error,
)
from symkit.measure.layerwise import (
    LayerwiseResult,
    find_leaves,
    layerwise_lie_derivative,
)
from symkit.measure.lie import (
    LEEResult,
    crop_border,
    flow_act,
    lee,
    lee_table,
    lie_derivative,
    lie_derivative_penalty,
    reduce_lie,
    tensor_kind,
    with_scores,
    zero_border,
)
from symkit.measure.matrix import (
    EquivarianceReport,
    generator_lie_derivatives,
    linear_lie_derivative,
    rep_lie_derivative,
    sampled_equivariance_error,
)

__all__ = [
    "alias",
    "fourier_translate",
    "predicted_aliasing_error",
    "EquivarianceReport",
    "LayerwiseResult",
    "SampleResult",
    "discrete_shift_consistency",
    "find_leaves",
    "generator_lie_derivatives",
    "layerwise_lie_derivative",
    "linear_lie_derivative",
    "pi_consistency_loss",
    "rep_lie_derivative",
    "sample_equivariance_error",
    "sample_rotation_error",
    "sample_translation_error",
    "sampled_equivariance_error",
    "LEEResult",
    "flow_act",
    "crop_border",
    "lee",
    "lee_table",
    "lie_derivative",
    "lie_derivative_penalty",
    "reduce_lie",
    "tensor_kind",
    "with_scores",
    "zero_border",
]
