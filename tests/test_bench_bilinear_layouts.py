"""benchmarks/bench_bilinear_layouts.py times the map it claims: its batch-last form of the bilinear layer equals the
layer, values and gradients, in float64."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_bilinear_layouts as bl  # noqa: E402
from symkit.groups import SO, O, S  # noqa: E402
from symkit.nn.bilinear import BiLinear  # noqa: E402
from symkit.nn.emlp import gated, uniform_rep  # noqa: E402
from symkit.reps import Scalar, V  # noqa: E402


@pytest.mark.parametrize("rep_of", [lambda: gated(uniform_rep(48, O(3))), lambda: gated(uniform_rep(40, SO(3))),
                                    lambda: 2 * Scalar + 3 * V(S(5)) + V(S(5)) ** 2])
def test_the_batch_last_map_is_the_layer(rep_of):
    torch.manual_seed(0)
    layer = BiLinear(rep_of(), dtype=torch.float64)
    x = torch.randn(6, layer.size, dtype=torch.float64, requires_grad=True)
    weights = tuple(layer.weights)
    f = bl.batch_last_map(layer)
    y, y_ref = f(x, *weights), layer(x)
    torch.testing.assert_close(y, y_ref, rtol=1e-12, atol=1e-12)
    gy = torch.randn_like(y)
    grads = torch.autograd.grad(y, (x, *weights), gy)
    grads_ref = torch.autograd.grad(y_ref, (x, *weights), gy)
    for a, b in zip(grads, grads_ref):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
