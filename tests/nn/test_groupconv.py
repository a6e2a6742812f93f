"""p4 group convolutions: exact quarter-turn equivariance of every layer, invariance of P4CNN, weight counts."""

from __future__ import annotations

import pytest
import torch

from symkit.actions import P4Maps, Rotations90, act
from symkit.nn.groupconv import P4CNN, P4BatchNorm2d, P4Conv2d, P4LiftConv2d, rotate_p4
from symkit.nn.vision import SmallCNN


def _x(*shape: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=dtype)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_lifting_and_group_convolutions_commute_with_quarter_turns(k):
    torch.manual_seed(0)
    lift = P4LiftConv2d(2, 3, 3, dtype=torch.float64)
    conv = P4Conv2d(3, 5, 5, dtype=torch.float64)
    x = _x(4, 2, 9, 9)
    rx = torch.rot90(x, k, dims=(2, 3))
    f = lift(x)
    assert torch.allclose(lift(rx), rotate_p4(f, k), atol=1e-12)
    assert torch.allclose(conv(rotate_p4(f, k)), rotate_p4(conv(f), k), atol=1e-12)


def test_a_plain_convolution_is_not_equivariant_so_the_check_can_fail():
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(2, 12, 3, padding=1, dtype=torch.float64)
    x = _x(4, 2, 9, 9)
    assert (conv(torch.rot90(x, 1, dims=(2, 3))) - rotate_p4(conv(x), 1)).abs().max() > 0.1


def test_batch_norm_shares_statistics_over_rotations():
    bn = P4BatchNorm2d(3, dtype=torch.float64)
    f = _x(6, 12, 5, 5) * torch.arange(1, 13, dtype=torch.float64).view(1, 12, 1, 1)
    assert torch.allclose(bn(rotate_p4(f, 1)), rotate_p4(bn(f), 1), atol=1e-12)
    assert bn.running_mean.shape == (3,)


@pytest.mark.parametrize("size", [8, 12, 16])
def test_p4cnn_logits_are_invariant_to_quarter_turns(size):
    torch.manual_seed(0)
    model = P4CNN(1, 10, width=4, stages=2, dtype=torch.float64).train()
    x = _x(5, 1, size, size)
    model.eval()
    base = model(x)
    for k in (1, 2, 3):
        assert torch.allclose(model(torch.rot90(x, k, dims=(2, 3))), base, atol=1e-12)
    model.train()  # batch statistics are invariant too
    assert torch.allclose(model(torch.rot90(x, 1, dims=(2, 3))), model(x), atol=1e-12)


def test_weight_counts_and_the_twin():
    """Hidden p4 convolutions hold 4 C' C k^2 weights; a SmallCNN of twice the width holds the same number."""
    conv = P4Conv2d(8, 8, 3, bias=False)
    assert conv.weight.numel() == 4 * 8 * 8 * 9
    twin = torch.nn.Conv2d(16, 16, 3, bias=False)
    assert twin.weight.numel() == conv.weight.numel()
    p4 = sum(p.numel() for p in P4CNN(1, 10, width=8, stages=2).parameters())
    cnn = sum(p.numel() for p in SmallCNN(1, 10, width=16, stages=2).parameters())
    assert 0.9 < p4 / cnn < 1.1


def test_devices_dtypes_and_meta(dtype):
    torch.manual_seed(0)
    a = P4CNN(1, 10, width=2, stages=2, dtype=dtype)
    torch.manual_seed(0)
    b = P4CNN(1, 10, width=2, stages=2, device="meta", dtype=dtype)
    assert all(p.dtype == dtype for p in a.parameters())
    out = b(torch.empty(3, 1, 8, 8, device="meta", dtype=dtype))
    assert out.device.type == "meta" and out.shape == (3, 10) and out.dtype == dtype
    assert a(torch.zeros(3, 1, 8, 8, dtype=dtype)).dtype == dtype


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="kernel_size must be odd"):
        P4Conv2d(2, 2, 4)
    with pytest.raises(ValueError, match=r"P4Conv2d expects \(N, 8, H, W\)"):
        P4Conv2d(2, 2)(torch.zeros(1, 6, 5, 5))
    with pytest.raises(ValueError, match="square images"):
        P4CNN()(torch.zeros(1, 1, 8, 6))
    with pytest.raises(ValueError, match="width must be an int >= 1"):
        P4CNN(width=0)


def test_the_p4_map_action_is_rotate_p4_and_a_group_action_of_the_quarter_turns():
    f = _x(2, 12, 5, 5)
    maps = P4Maps(5, 3)
    assert maps.group_key == Rotations90(5).group_key and maps.flows() == ()
    for k in range(4):
        assert torch.equal(act(maps, f, (0, 0, k)), rotate_p4(f, k))
    # rho(g) rho(h) = rho(gh) and rho(g^-1) undoes rho(g), through the flat permutations
    g, h = (0, 0, 1), (0, 0, 3)
    assert torch.equal(act(maps, act(maps, f, h), g), act(maps, f, maps.compose(g, h)))
    assert torch.equal(act(maps, act(maps, f, g), maps.inverse(g)), f)
    with pytest.raises(ValueError, match="grid shape"):
        act(maps, _x(2, 8, 5, 5), g)


def test_check_equivariance_builds_the_actions_for_the_input_size():
    torch.manual_seed(0)
    lift = P4LiftConv2d(2, 3, dtype=torch.float64)
    action_in, action_out = lift.declared_symmetry(7)
    assert action_in.shape == (7, 7) and action_out.shape == (12, 7, 7)
    assert lift.check_equivariance(_x(3, 2, 11, 11)) < 1e-13
    with pytest.raises(ValueError, match="square"):
        lift.check_equivariance(_x(3, 2, 8, 9))


def test_the_p4cnn_check_runs_in_eval_mode_restores_the_mode_and_fails_where_pooling_breaks_the_symmetry():
    torch.manual_seed(0)
    model = P4CNN(1, 4, width=2, stages=2, dtype=torch.float64).train()
    before = [b.clone() for b in model.buffers()]
    assert model.check_equivariance(_x(3, 1, 12, 12)) < 1e-12
    assert model.training and all(torch.equal(a, b) for a, b in zip(before, model.buffers()))
    with pytest.raises(AssertionError, match="not equivariant"):
        model.check_equivariance(_x(3, 1, 9, 9))  # 2x2 pooling of a 9x9 map drops a row and a column
