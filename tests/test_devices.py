"""Device- and dtype-sensitive paths: every tensor they make follows the device and dtype of their inputs.

These run on ``--device`` (cpu by default; ``pytest --device cuda tests/test_devices.py`` on a GPU), in float32 and
float64; paths that need no values also run on ``meta``, where a tensor made on the CPU fails loudly.
"""

import torch

from symkit.actions import CyclicTranslations2D, Rotations90
from symkit.dynamics import LayerSpec, project
from symkit.groups import SO
from symkit.marglik.kfac import fit_kfac
from symkit.marglik.laplace import KroneckerLaplace, prior_groups
from symkit.measure import lie_derivative
from symkit.measure.layerwise import layerwise_lie_derivative
from symkit.measure.matrix import sampled_equivariance_error
from symkit.nn import EMLP
from symkit.nn.relaxed import RelaxedCNN
from symkit.reps import Scalar, V


def test_projections_follow_the_weights(device, dtype):
    a = CyclicTranslations2D(4)
    spec = LayerSpec(a, a, 2, 3)
    A = torch.randn(3, 2, 4, 4, 4, 4, dtype=dtype, device=device)
    for method in ("average", "fast", "basis"):
        P = project(A, spec, method=method)
        assert P.device == A.device and P.dtype == dtype
    meta = torch.empty(3, 2, 4, 4, 4, 4, device="meta")
    assert project(meta, spec, method="average").device.type == "meta"


def test_lie_derivatives_and_layerwise_probes_follow_the_model(device, dtype):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(2 * 49, 3)).to(device=device, dtype=dtype)
    x = torch.randn(2, 1, 7, 7, device=device, dtype=dtype)
    L = lie_derivative(model, x, Rotations90(7))
    assert L.device == x.device and L.dtype == dtype
    r = layerwise_lie_derivative(model, x, "rotate", method="probes", num_probes=2)
    assert r.end_to_end.device == x.device


def test_kfac_marginal_likelihood_follows_the_model(device):
    torch.manual_seed(0)
    model = RelaxedCNN(1, 3, alpha=1, size=8).to(device=device, dtype=torch.float64)
    x = torch.randn(6, 1, 8, 8, device=device, dtype=torch.float64)
    y = torch.randint(3, (6,), device=device)
    curv = fit_kfac(model, [(x, y)], mc_samples=2, seed=0)
    groups = prior_groups(model, curv, "tensor")
    lap = KroneckerLaplace(model, curv, groups)
    log_prec = torch.zeros(len(groups), dtype=torch.float64, device=device)
    value = lap.neg_log_marglik(log_prec)
    assert value.device == x.device and torch.isfinite(value)
    assert lap.effective_parameters(log_prec).device == x.device


def test_sampled_errors_draw_their_inputs_on_the_model_device(device, dtype):
    G = SO(3)
    model = EMLP(V(G), Scalar, G, ch=8, num_layers=1).to(device=device, dtype=dtype)
    report = sampled_equivariance_error(model, rep_in=V(G), rep_out=Scalar)
    assert report.max_error < (1e-4 if dtype == torch.float32 else 1e-10)
