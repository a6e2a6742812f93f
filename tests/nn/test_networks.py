"""symkit.nn.network: the MLP, EMLP and RPP-EMLP by name, the same modules (and initial values) as their classes."""

import pytest
import torch

from symkit.groups import SO
from symkit.nn import EMLP, MLP, RPPEMLP, network
from symkit.reps import Scalar, V


def _same(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return type(a) is type(b) and sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("kind, cls, options", [
    ("mlp", MLP, {"activation": "relu"}),
    ("emlp", EMLP, {"bilinear_scale": 0.3}),
    ("rpp", RPPEMLP, {"basic_init_scale": 0.5}),
])
def test_network_builds_the_class_with_the_same_initial_values(kind, cls, options):
    G = SO(3)
    rep_in, rep_out = 2 * V(G), V(G) + Scalar
    torch.manual_seed(3)
    built = network(kind, rep_in, rep_out, G, ch=24, num_layers=2, dtype=torch.float64, **options)
    torch.manual_seed(3)
    direct = (MLP(rep_in.size, rep_out.size, ch=24, num_layers=2, dtype=torch.float64, **options) if cls is MLP
              else cls(rep_in, rep_out, G, ch=24, num_layers=2, dtype=torch.float64, **options))
    assert _same(built, direct)
    x = torch.randn(5, rep_in.size, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert torch.equal(built(x), direct(x))  # the options reached the class (activation, scales hold no weights)
    torch.manual_seed(4)
    other = network(kind, rep_in, rep_out, G, ch=24, num_layers=2, dtype=torch.float64, **options)
    assert not _same(built, other)  # the comparison sees the values: another seed differs


def test_network_names_what_is_wrong():
    G = SO(3)
    with pytest.raises(ValueError, match="kind must be one of 'mlp', 'emlp', 'rpp', got 'cnn'"):
        network("cnn", V(G), Scalar, G)
    with pytest.raises(TypeError, match="'mlp' takes no option bilinear_scale; its options: activation"):
        network("mlp", V(G), Scalar, G, bilinear_scale=0.1)
    with pytest.raises(TypeError, match="an MLP's ch is its hidden width"):
        network("mlp", V(G), Scalar, G, ch=4 * V(G))


def test_parameter_like_reads_the_first_floating_tensor_then_falls_back_to_the_default():
    from torch import nn

    from symkit.nn import parameter_like

    assert parameter_like(nn.Linear(2, 3).double()) == (torch.device("cpu"), torch.float64)
    assert parameter_like(nn.Linear(2, 3, device="meta")) == (torch.device("meta"), torch.float32)
    bn = nn.BatchNorm1d(3, affine=False).double()  # buffers only (num_batches_tracked is an integer buffer)
    assert parameter_like(bn) == (torch.device("cpu"), torch.float64)
    assert parameter_like(nn.ReLU()) == (torch.device("cpu"), torch.get_default_dtype())
