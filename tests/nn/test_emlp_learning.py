"""An O(3) EMLP learns the moment of inertia far better than an MLP of equal width (thesis Fig. 2.5, Inertia at
N = 1000): measured 0.11 against 2.8 test MSE (a constant predictor: 10.3). The thesis reports about 0.06 against
3.2. This guards the initialisation scale (docs/emlp.md, Decisions): at the full LeCun scale the same EMLP
reached 93."""

import torch

from symkit.datasets.synthetic import inertia
from symkit.groups import O
from symkit.nn import EMLP, MLP
from symkit.reps import Scalar, V
from symkit.train import Trainer


def _test_mse(model, x, y, xt, yt) -> float:
    sx, sy = x.std(), y.std()  # one scale per tensor keeps the symmetry
    Trainer(model, lambda out, target: (out - target).square().mean(), lr=3e-3, epochs=300, batch_size=500,
            seed=0).fit((x / sx, y / sy))
    with torch.no_grad():
        return float((model(xt / sx) * sy - yt).square().mean())


def test_emlp_learns_inertia_an_order_of_magnitude_better_than_an_mlp():
    x, y = (t.float() for t in inertia(1000, seed=0))
    xt, yt = (t.float() for t in inertia(1000, seed=1))
    constant = float((yt - y.mean(0)).square().mean())
    G = O(3)
    torch.manual_seed(0)
    emlp = _test_mse(EMLP(5 * Scalar + 5 * V(G), V(G) ** 2, G, ch=384, num_layers=3), x, y, xt, yt)
    torch.manual_seed(0)
    mlp = _test_mse(MLP(20, 9, ch=384, num_layers=3), x, y, xt, yt)
    assert mlp < constant / 2  # the baseline learns too
    assert emlp < 0.5 and emlp < mlp / 5, (emlp, mlp, constant)
