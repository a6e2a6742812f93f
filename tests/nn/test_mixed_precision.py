"""bfloat16 autocast (``--precision bf16``): EMLP and RPP-EMLP layers take the bfloat16 activations of an autocast
region while their parameters stay float32, give the float32 answer to bfloat16 accuracy, and train; outside autocast
a wrong input dtype is still refused."""

from __future__ import annotations

import pytest
import torch

from symkit.groups import O
from symkit.lab import runtime
from symkit.nn import EMLP, RPPEMLP
from symkit.reps import V
from symkit.train import Trainer


@pytest.mark.parametrize("cls", [EMLP, RPPEMLP])
def test_an_autocast_forward_matches_float32_to_bfloat16_accuracy_and_trains(cls):
    G = O(3)
    torch.manual_seed(0)
    model = cls(4 * V(G), V(G), G, ch=32, num_layers=2)
    x = torch.randn(16, 12)
    with torch.no_grad():
        exact = model(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            mixed = model(x)
    assert next(model.parameters()).dtype == torch.float32
    assert float((mixed.float() - exact).norm() / exact.norm()) < 5e-2  # bfloat16 keeps 8 bits of mantissa
    y = x[:, 0:3] * x[:, 3:6].norm(dim=1, keepdim=True)  # an equivariant target the model can fit
    with runtime.using(runtime.RunSettings(precision="bf16")):
        result = Trainer(model, lambda out, t: (out.float() - t).square().mean(), lr=1e-2, epochs=50,
                         batch_size=16).fit((x, y))
    assert result.losses[-1] < 0.5 * result.losses[0]


def test_outside_autocast_a_bfloat16_input_is_refused():
    G = O(3)
    model = EMLP(4 * V(G), V(G), G, ch=16, num_layers=1)
    with pytest.raises(TypeError, match="float32 parameters but the input is bfloat16"):
        model(torch.randn(2, 12, dtype=torch.bfloat16))
