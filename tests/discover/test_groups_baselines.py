"""Bridge to symkit.groups / symkit.reps, and the Augerino-style baseline."""

import numpy as np
import pytest
import torch

from symkit.discover import (
    circulant_partition,
    deepsets_partition,
    even_odd,
    identity_partition,
    one_cluster,
    orbit_partition,
    partition_distance,
    toeplitz_partition,
)
from symkit.discover.baselines import AugerinoPermutation, gumbel_sinkhorn
from symkit.discover.groups import group_sharing, implied_group, parity_group
from symkit.nn.sharing import SumOfNumbersNet


@pytest.mark.parametrize("n", [3, 4, 5])
def test_group_sharing_matches_orbit_builders(n):
    from symkit.groups import S, Z

    assert partition_distance(group_sharing(Z(n)), circulant_partition(n)) == 0
    assert partition_distance(group_sharing(S(n)), deepsets_partition(n)) == 0
    assert partition_distance(group_sharing(S(n), "vector"), one_cluster(n)) == 0
    gens = [np.argmax(g, 0) for g in Z(n).discrete_generators]  # column j has its 1 in row p(j)
    assert partition_distance(group_sharing(Z(n)), orbit_partition(gens, gens)) == 0


def test_implied_group_names():
    assert implied_group(one_cluster(4), (4,)).name == "S(4)"
    r = implied_group(even_odd(6), (6,))
    assert r.exact and r.group is not None and "S_even" in r.name
    assert implied_group(circulant_partition(5), (5, 5)).name == "Z(5)"
    assert implied_group(deepsets_partition(4), (4, 4)).name == "S(4)"
    assert implied_group(identity_partition(5), (5,)).name.startswith("Trivial")
    shift = implied_group(toeplitz_partition(5, 3), (3, 5))
    assert shift.exact and shift.group is None
    near = implied_group([0, 0, 0, 1, 0], (5,))
    assert near.name == "S(5)" and near.partition_distance == 1 and not near.exact
    with pytest.raises(ValueError, match="shape"):
        implied_group(one_cluster(4), (5,))


def test_parity_group_elements_preserve_parity():
    G = parity_group(5)
    for g in G.discrete_generators:
        p = np.argmax(g, 0)
        assert np.all(p % 2 == np.arange(5) % 2)


def test_gumbel_sinkhorn_doubly_stochastic():
    logits = torch.randn(5, 5, generator=torch.Generator().manual_seed(0))
    P = gumbel_sinkhorn(logits, 4, tau=1.0, iters=200, generator=torch.Generator().manual_seed(1))
    assert P.shape == (4, 5, 5)
    assert torch.allclose(P.sum(-2), torch.ones(4, 5), atol=1e-6)  # columns normalised last
    assert torch.allclose(P.sum(-1), torch.ones(4, 5), atol=1e-3)
    # strongly diagonal logits and no noise give (nearly) the identity
    Id = gumbel_sinkhorn(10 * torch.eye(3), 1, tau=0.1, noise=False)[0]
    assert torch.allclose(Id, torch.eye(3), atol=1e-4)
    with pytest.raises(ValueError, match="square"):
        gumbel_sinkhorn(torch.zeros(2, 3), 1)


def test_augerino_averages_over_samples():
    net = SumOfNumbersNet(4, embed=8, hidden=4, sharing=None)
    aug = AugerinoPermutation(net, 4, n_samples=6)
    tokens = torch.randint(1, 10, (5, 4))
    assert aug(tokens).shape == (5,)
    assert aug.regularizer().item() < 0  # rewards spread
    # with hard identity logits and no noise the baseline is the plain network
    with torch.no_grad():
        aug.perm_logits.copy_(50 * torch.eye(4))
    assert torch.allclose(aug(tokens), net(tokens), atol=1e-4)
    with pytest.raises(TypeError, match="features"):
        AugerinoPermutation(torch.nn.Linear(2, 2), 2)
