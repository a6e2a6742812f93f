"""PowerBlock, the PowerNet builder and the ConvNet baseline."""

import pytest
import torch

from symkit.nn.powernet import ConvNet, PowerBlock, PowerNet, make_base, rot90_permutation


def _rot_images(x: torch.Tensor) -> torch.Tensor:
    return torch.rot90(x, 1, dims=(-2, -1))


@pytest.mark.parametrize("norm", ["batch", "layer", None])
def test_rot90_block_is_exactly_equivariant(norm):
    n = 6
    torch.manual_seed(0)
    block = PowerBlock(rot90_permutation(n), 2, 3, num_layers=2, kernel_size=3, norm=norm, rho=0.5,
                       generator=torch.Generator().manual_seed(0)).double().eval()
    x = torch.randn(4, 2, n, n, dtype=torch.float64)
    out = block(_rot_images(x))
    torch.testing.assert_close(out, _rot_images(block(x)), atol=1e-13, rtol=0)
    assert out.shape == (4, 3, n, n)


def test_powernet_rebuilds_bases_after_pooling():
    net = PowerNet(["rotation", "shift_up"], (1, 12, 12), [2, 3, 4], 5, num_layers=1, kernel_size=3, pool="avg")
    assert net.shapes == [(12, 12), (6, 6), (3, 3)]
    blocks = [m for m in net.blocks if isinstance(m, PowerBlock)]
    for block, (h, w) in zip(blocks, net.shapes):
        layer = block.layers[0]
        assert layer.size == h * w
        assert all(b.shape == (h, w) for b in layer.bases)
    assert net(torch.randn(2, 1, 12, 12)).shape == (2, 5)


def test_rot90_powernet_with_mean_head_is_invariant():
    net = PowerNet(["rot90"], (2, 8, 8), [3, 4], 3, kernel_size=3, pool="max", head="mean", norm="batch",
                   generator=torch.Generator().manual_seed(1)).double().eval()
    x = torch.randn(5, 2, 8, 8, dtype=torch.float64)
    torch.testing.assert_close(net(_rot_images(x)), net(x), atol=1e-13, rtol=0)


def test_sw_rotation_powernet_is_rot90_invariant_but_only_quasi_invariant_to_its_base():
    """G_rot commutes with the rot90 permutation, so SW-rotation layers are exactly C4-equivariant; under the base
    step A = expm(eps G_rot) itself the non-linearities break equivariance."""
    step = torch.pi / 8
    net = PowerNet(["rotation"], (1, 8, 8), [3, 4], 3, kernel_size=3, pool="max", head="mean",
                   steps={"rotation": step}, generator=torch.Generator().manual_seed(1)).double().eval()
    x = torch.randn(5, 1, 8, 8, dtype=torch.float64)
    y = net(x)
    torch.testing.assert_close(net(_rot_images(x)), y, atol=1e-12, rtol=0)
    a = make_base("rotation", 8, step)
    xa = a(x.reshape(5, 1, 64)).reshape(5, 1, 8, 8)
    assert float(((net(xa) - y).norm() / y.norm()).detach()) > 1e-3


def test_custom_base_factory_and_errors():
    calls = []

    def factory(shape):
        calls.append(shape)
        return [make_base("shift_x", shape)]

    PowerNet(factory, (1, 8, 6), [2, 2], 1, num_layers=1, kernel_size=3)
    assert calls == [(8, 6), (4, 3)]
    with pytest.raises(ValueError, match="steps given"):
        PowerNet(["rotation"], (1, 8, 8), [2], 1, steps={"scaling": 0.1})
    with pytest.raises(ValueError, match="in_shape"):
        PowerNet(["rotation"], (8, 8), [2], 1)
    with pytest.raises(ValueError, match="pool"):
        PowerNet(["shift_x"], (1, 8, 8), [2, 2], 1, pool="median")
    with pytest.raises(ValueError, match="norm"):
        PowerBlock(make_base("shift_x", 4), 1, 1, norm="instance")
    with pytest.raises(ValueError, match="head"):
        PowerNet(["shift_x"], (1, 8, 8), [2], 1, head="attention")
    with pytest.raises(ValueError, match="cannot pool"):
        PowerNet(["shift_x"], (1, 2, 2), [2, 2, 2], 1, num_layers=1, kernel_size=1)


def test_shift_powernet_matches_circular_convnet_exactly():
    """With the two shifts (product powers) and the same weights, PowerNet is the circular-padding CNN."""
    torch.manual_seed(0)
    power = PowerNet(["shift_x", "shift_y"], (1, 8, 8), [2, 3], 4, num_layers=2, kernel_size=3, pool="max",
                     rho=1.0).double().eval()
    conv = ConvNet((1, 8, 8), [2, 3], 4, num_layers=2, kernel_size=3, pool="max", padding_mode="circular").double()
    conv.eval()
    pblocks = [m for m in power.blocks if isinstance(m, PowerBlock)]
    cblocks = [m for m in conv.blocks if hasattr(m, "layers")]
    with torch.no_grad():
        for pb, cb in zip(pblocks, cblocks):
            for pl, cl in zip(pb.layers, cb.layers):
                cl.weight.copy_(pl.weight.reshape(cl.weight.shape))
                cl.bias.copy_(pl.bias)
            if pb.skip is not None and not isinstance(pb.skip, torch.nn.Identity):
                cb.skip.weight.copy_(pb.skip.weight.reshape(cb.skip.weight.shape))
        conv.head.load_state_dict(power.head.state_dict())
    x = torch.randn(3, 1, 8, 8, dtype=torch.float64)
    torch.testing.assert_close(power(x), conv(x), atol=1e-12, rtol=0)
