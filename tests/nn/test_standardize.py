"""Standardize scales per object and centres only scalars, so a wrapped model stays exactly equivariant; per-entry
standardisation (what a generic scaler does) would not."""

import pytest
import torch

from symkit.groups import O, S
from symkit.nn import EMLP, Standardize, rep_statistics
from symkit.reps import Scalar, V


@pytest.mark.parametrize("group", [O(3), S(4)])
def test_the_standardised_model_is_as_equivariant_as_the_model(group):
    rep_in, rep_out = 2 * Scalar + 3 * V(group), V(group) ** 2 + Scalar
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(200, rep_in.size, generator=gen, dtype=torch.float64) * 7 + 3  # off-centre, off-scale data
    y = torch.randn(200, rep_out.size, generator=gen, dtype=torch.float64) * 0.01 - 5
    torch.manual_seed(0)
    model = Standardize(EMLP(rep_in, rep_out, group, ch=48, num_layers=1, dtype=torch.float64), rep_in, rep_out, x, y)
    assert model.check_equivariance() < 1e-12
    # the statistics: scalars centred and scaled, each vector one scale (the RMS of its entries)
    mean, scale = rep_statistics(x, rep_in)
    torch.testing.assert_close(mean[:2], x[:, :2].mean(0))
    torch.testing.assert_close(scale[:2], x[:, :2].std(0))
    assert torch.all(mean[2:] == 0)
    d = group.d
    for j in range(3):
        block = slice(2 + j * d, 2 + (j + 1) * d)
        assert torch.all(scale[block] == scale[block][0])
        torch.testing.assert_close(scale[block][0], x[:, block].square().mean().sqrt())


def test_per_entry_standardisation_would_break_the_symmetry():
    """A per-entry scale (as sklearn's StandardScaler) is not constant on a vector: rotating then scaling differs
    from scaling then rotating, which is why Standardize does not do it."""
    G = O(3)
    x = torch.randn(100, 3, dtype=torch.float64) * torch.tensor([1.0, 5.0, 0.2], dtype=torch.float64)
    per_entry = x.std(0)
    R = torch.as_tensor(G.samples(1, seed=0)[0], dtype=torch.float64)
    v = x[:1]
    assert not torch.allclose((v @ R.T) / per_entry, (v / per_entry) @ R.T)
    _, scale = rep_statistics(x, V(G))
    torch.testing.assert_close((v @ R.T) / scale, (v / scale) @ R.T)


def test_bad_data_is_refused():
    G = O(3)
    with pytest.raises(ValueError, match=r"expected samples of shape \(N, 3\)"):
        rep_statistics(torch.randn(5, 4), V(G))
    with pytest.raises(ValueError, match="at least 2 samples"):
        rep_statistics(torch.randn(1, 3), V(G))
