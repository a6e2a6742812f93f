"""Soft sharing layers and penalties (§4.2)."""

import numpy as np
import pytest
import torch

from symkit.discover import labels_to_assignment, one_cluster, partition_distance, toeplitz_partition
from symkit.nn.sharing import (
    BlockSharedLinear,
    HardSharedLinear,
    SharedLinear,
    SoftAssignment,
    SumOfNumbersNet,
    column_group_norm,
    entropy_penalty,
    hyper_parameters,
    model_parameters,
    nuclear_norm,
)


def test_penalties_on_hard_assignments():
    labels = [0, 0, 0, 1, 2, 2]
    A = torch.as_tensor(labels_to_assignment(labels, n_columns=6), dtype=torch.float64)
    assert column_group_norm(A).item() == pytest.approx(np.sqrt(3) + 1 + np.sqrt(2), abs=1e-5)
    assert nuclear_norm(A).item() == pytest.approx(np.sqrt(3) + 1 + np.sqrt(2), abs=1e-8)  # orthogonal columns
    assert entropy_penalty(A).item() == pytest.approx(0.0, abs=1e-4)
    uniform = torch.full((4, 4), 0.25, dtype=torch.float64)
    assert entropy_penalty(uniform, eps=0).item() == pytest.approx(np.log(4))
    assert entropy_penalty(uniform, reduction="sum", eps=0).item() == pytest.approx(4 * np.log(4))
    # the column norm is not the nuclear norm for soft A (the reference code's element-wise sqrt)
    soft = torch.softmax(torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0)), 1)
    assert abs(column_group_norm(soft) - nuclear_norm(soft)).item() > 1e-3
    with pytest.raises(ValueError, match="reduction"):
        entropy_penalty(A, reduction="max")


def test_soft_assignment_rows_and_hardening():
    sa = SoftAssignment(6, init="normal", generator=torch.Generator().manual_seed(0))
    A = sa()
    assert torch.allclose(A.sum(1), torch.ones(6))
    fixed = SoftAssignment(6, init=toeplitz_partition(3, 2))
    assert partition_distance(fixed.labels(), toeplitz_partition(3, 2)) == 0
    assert fixed().max(1).values.min() > 0.99  # 10 A - 5 is nearly hard
    assert torch.equal(fixed.hard().sum(1), torch.ones(6))
    proj = SoftAssignment(4, mode="projected")
    with torch.no_grad():
        proj.logits.add_(torch.tensor([[2.0, -1.0, 0.0, 0.0]] * 4))
    proj.project_()
    assert torch.all(proj() >= 0) and torch.allclose(proj().sum(1), torch.ones(4))
    with pytest.raises(ValueError, match="init"):
        SoftAssignment(3, init="zeros")


def test_parameter_split():
    net = SumOfNumbersNet(4, embed=8, hidden=3)
    hyper = list(hyper_parameters(net))
    assert len(hyper) == 1 and hyper[0].shape == (4, 4)
    ids = {id(p) for p in model_parameters(net)}
    assert id(hyper[0]) not in ids and len(ids) == len(list(net.parameters())) - 1


def test_one_cluster_network_is_permutation_invariant():
    """Notes §7.4 item 21: with the position blocks in one cluster the §5.2 network is exactly invariant."""
    torch.manual_seed(0)
    net = SumOfNumbersNet(5, embed=16, hidden=4, sharing=one_cluster(5)).double()
    tokens = torch.randint(1, 10, (8, 5))
    out = net(tokens)
    for perm in (torch.randperm(5) for _ in range(5)):
        assert torch.allclose(net(tokens[:, perm]), out, atol=1e-10)
    free = SumOfNumbersNet(5, embed=16, hidden=4, sharing=None).double()
    assert not torch.allclose(free(tokens[:, [1, 0, 2, 3, 4]]), free(tokens), atol=1e-6)


def test_block_shared_linear_mixes_blocks():
    layer = BlockSharedLinear(3, 2, 2, sharing=[0, 0, 1])
    W, b = layer.effective()
    assert torch.allclose(W[0], W[1]) and not torch.allclose(W[0], W[2])
    with pytest.raises(ValueError, match="expects input"):
        layer(torch.zeros(1, 4, 2))


def test_hard_shared_linear_is_circulant_equivariant():
    from symkit.discover import circulant_partition

    n = 5
    layer = HardSharedLinear(circulant_partition(n), n, n).double()
    x = torch.randn(7, n, dtype=torch.float64)
    shift = torch.roll(torch.arange(n), 1)
    assert torch.allclose(layer(x[:, shift]), layer(x)[:, shift], atol=1e-12)
    assert layer.psi.numel() == n


def test_shared_linear_shapes():
    layer = SharedLinear(3, 2)
    assert layer(torch.randn(4, 3)).shape == (4, 2)
    with pytest.raises(ValueError, match="input features"):
        layer(torch.randn(4, 5))
