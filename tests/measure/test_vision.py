"""The small vision models used for equivariance measurements."""

import pytest
import torch

from symkit.nn.vision import MLPMixer, ResNet18, SmallCNN, ViT, build_model


def test_resnet18_has_the_standard_shape():
    # 11,689,512 parameters: the ResNet-18 layout of He et al. (2016) with 1000 classes
    m = ResNet18(in_channels=3, num_classes=1000)
    assert sum(p.numel() for p in m.parameters()) == 11_689_512
    widths = [m.layer1[0].conv1.out_channels, m.layer2[0].conv1.out_channels, m.layer4[1].conv2.out_channels]
    assert widths == [64, 128, 512] and m.layer2[0].conv1.stride == (2, 2)


@pytest.mark.parametrize(
    "model,shape",
    [
        (SmallCNN(1, 10, 4), (2, 1, 12, 12)),
        (MLPMixer(1, 10, image_size=8, patch=2, dim=8, depth=1), (2, 1, 8, 8)),
        (ViT(1, 10, image_size=8, patch=2, dim=8, depth=1, heads=2), (2, 1, 8, 8)),
        (ResNet18(1, 10, width=4), (2, 1, 32, 32)),
    ],
)
def test_output_shapes(model, shape):
    assert model.eval()(torch.randn(shape)).shape == (2, 10)


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown architecture"):
        build_model("resnet50")
    with pytest.raises(ValueError, match="multiple of patch"):
        MLPMixer(image_size=10, patch=4)
    with pytest.raises(ValueError, match="divisible by heads"):
        ViT(dim=10, heads=4)
    with pytest.raises(ValueError, match="width: expected an int >= 1, got 0"):
        SmallCNN(width=0)
    with pytest.raises(TypeError, match="width: expected an int, got float"):
        SmallCNN(width=4.0)
