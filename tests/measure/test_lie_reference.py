"""symkit's Lie derivative against an independent reference: a finite difference of torch's own grid_sample
(symkit.testing.finite_difference_lie_derivative), which shares no code with symkit.measure."""

import pytest
import torch
from torch import nn

from symkit.measure import lie_derivative, with_scores
from symkit.nn.vision import ResNet18, SmallCNN
from symkit.testing import finite_difference_lie_derivative


def _smooth_cnn():
    """Convolutions, SiLU, average pooling: no kinks, so the finite difference converges as O(h^2)."""
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.SiLU(), nn.Conv2d(8, 8, 3, padding=1), nn.SiLU(),
                         nn.AvgPool2d(2), nn.Conv2d(8, 8, 3, padding=1), nn.SiLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, 10))


# (model, step h in normalized units, tolerance): ReLU / max-pool networks need h below the distance to their
# nearest kink (1e-7 to 1e-8 units here), where rounding (eps / h ~ 2e-8, amplified by the network) sets the floor
CASES = {
    "smooth-cnn": (_smooth_cnn, 1e-5, 1e-7),  # O(h^2): 1.8e-5 at h = 1e-3, 1.8e-7 at 1e-4, 1.9e-9 at 1e-5
    "relu-cnn": (lambda: SmallCNN(3, 10), 1e-7, 1e-6),
    "resnet18-cifar": (lambda: ResNet18(3, 10, width=8, stem="cifar"), 1e-8, 1e-5),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("direction", ["x", "y"])
def test_translation_lie_derivative_matches_the_finite_difference_in_float64(name, direction):
    build, h, tol = CASES[name]
    torch.manual_seed(0)
    f = with_scores(build().double().eval(), "probs")
    x = torch.randn(4, 3, 32, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    ours = lie_derivative(f, x, f"translate_{direction}").detach()
    ref = finite_difference_lie_derivative(f, x, direction, h=h)
    assert ref.norm() > 1e-6  # the models are not invariant: the check compares something
    assert float((ours - ref).norm() / ref.norm()) < tol


def test_the_reference_sees_a_wrong_direction_and_a_wrong_scale():
    torch.manual_seed(0)
    f = with_scores(_smooth_cnn().double().eval(), "probs")
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    ours = lie_derivative(f, x, "translate_x").detach()
    assert float((ours - finite_difference_lie_derivative(f, x, "y", h=1e-4)).norm() / ours.norm()) > 0.1
    assert float((ours - 2 * finite_difference_lie_derivative(f, x, "x", h=1e-4)).norm() / ours.norm()) > 0.5
    with pytest.raises(ValueError, match="less than one pixel"):
        finite_difference_lie_derivative(f, x, "x", h=0.1)
