"""The benchmarks' memory instrument (benchmarks/benchcommon.py): ``TensorMemory`` counts the bytes of the storages
that operations create, at their peak, and ``resident_bytes`` a model's and optimiser's tensors."""

import doctest
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import benchcommon as bc  # noqa: E402


def test_the_module_examples_hold():
    assert doctest.testmod(bc).failed == 0


def test_a_linear_training_step_holds_its_activations_and_gradients_at_the_peak():
    torch.manual_seed(0)
    layer = torch.nn.Linear(100, 50, dtype=torch.float64)
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    x = torch.randn(40, 100, dtype=torch.float64)
    assert bc.resident_bytes(layer, opt) == 8 * (100 * 50 + 50)  # SGD without momentum keeps no state
    with bc.TensorMemory() as memory:
        opt.zero_grad(set_to_none=True)
        layer(x).square().sum().backward()
        opt.step()
    output, grads = 8 * 40 * 50, 8 * (100 * 50 + 50)
    assert memory.peak >= output + grads  # the output and both gradients exist together at the end of backward
    assert memory.live == grads  # afterwards only the gradients remain (x.grad is not asked for)
    with torch.no_grad(), bc.TensorMemory() as view:
        layer.weight.t()[0].add_(0)  # a view of a parameter and an in-place write create no storage
    assert view.peak == 0
