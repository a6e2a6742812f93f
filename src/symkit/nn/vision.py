"""Small image classifiers for equivariance measurements: a CNN, an MLP-Mixer-like and a ViT-like model, and a
ResNet-18-shaped network (He et al. 2016 layout, written here; torchvision is not used); and a masked autoencoder
that pretrains the ViT (:class:`MaskedAutoencoder`).

Every operation that can break equivariance lives in its own module (no functional ReLU, pooling or flatten in a
``forward``), so layer-wise attribution (:mod:`symkit.measure.layerwise`) sees each one. Token tensors are
(B, N, C) everywhere; token mixing transposes inside its module.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from symkit._checks import check_int
from symkit.nn._factory import Resettable, place


def _check_positive(**kwargs: int) -> None:
    for name, value in kwargs.items():
        check_int(name, value, 1)


class GlobalAvgPool(nn.Module):
    """(B, C, H, W) -> (B, C): mean over the spatial positions."""

    def forward(self, x: Tensor) -> Tensor:
        return x.mean(dim=(-2, -1))


class TokenMean(nn.Module):
    """(B, N, C) -> (B, C): mean over tokens."""

    def forward(self, x: Tensor) -> Tensor:
        return x.mean(dim=1)


class ClassToken(nn.Module):
    """(B, N, C) -> (B, C): the first (class) token."""

    def forward(self, x: Tensor) -> Tensor:
        return x[:, 0]


class PatchEmbed(Resettable, nn.Module):
    """Strided ``patch x patch`` convolution, (B, C_in, H, W) -> tokens (B, (H/p)(W/p), dim)."""

    def __init__(self, in_channels: int, dim: int, patch: int,
    device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        _check_positive(in_channels=in_channels, dim=dim, patch=patch)
        self.proj = nn.Conv2d(in_channels, dim, kernel_size=patch, stride=patch)
        place(self, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


def norm_kind(who: str, norm: bool | str) -> str:
    """``"batch"``, ``"group"`` or ``"none"`` from a ``norm`` argument (True is ``"batch"``, False ``"none"``)."""
    kind = {True: "batch", False: "none"}.get(norm, norm) if isinstance(norm, bool) else norm
    if kind not in ("batch", "group", "none"):
        raise ValueError(f"{who}: norm must be 'batch', 'group', 'none' or a bool, got {norm!r}")
    return kind


class SmallCNN(Resettable, nn.Module):
    """conv3x3-BN-ReLU blocks, stride-2 max pooling between stages, global average pooling and a linear head.

    ``norm``: ``"batch"`` (or True, the default), ``"group"`` (per-sample statistics over groups of 4 channels,
    no affine parameters: the twin of :class:`~symkit.nn.P4CNN`'s per-filter norm; no running statistics) or
    ``"none"`` (or False; the convolutions get biases instead)."""

    def __init__(self, in_channels: int = 1, num_classes: int = 10, width: int = 16, stages: int = 2,
                 norm: bool | str = True, device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        _check_positive(in_channels=in_channels, num_classes=num_classes, width=width, stages=stages)
        kind = norm_kind("SmallCNN", norm)
        layers: list[nn.Module] = []
        c_in = in_channels
        for i in range(stages):
            c_out = width * 2**i
            for a, b in ((c_in, c_out), (c_out, c_out)):
                layers += [nn.Conv2d(a, b, 3, padding=1, bias=kind == "none")]
                if kind == "batch":
                    layers.append(nn.BatchNorm2d(b))
                elif kind == "group":
                    layers.append(nn.GroupNorm(max(1, b // 4), b, affine=False))
                layers.append(nn.ReLU())
            if i < stages - 1:
                layers.append(nn.MaxPool2d(2))
            c_in = c_out
        self.features = nn.Sequential(*layers)
        self.pool = GlobalAvgPool()
        self.head = nn.Linear(c_in, num_classes)
        place(self, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.pool(self.features(x)))


class TokenMixing(Resettable, nn.Module):
    """MLP across tokens (per channel), on (B, N, C) tokens."""

    def __init__(self, num_tokens: int, hidden: int, device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.fc1 = nn.Linear(num_tokens, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, num_tokens)
        place(self, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x.transpose(1, 2)))).transpose(1, 2)


class ChannelMLP(Resettable, nn.Module):
    """Token-wise MLP ``Linear-GELU-Linear``."""

    def __init__(self, dim: int, hidden: int, device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)
        place(self, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)))


class MixerBlock(Resettable, nn.Module):
    """``x + TokenMixing(LN(x))``, then ``x + ChannelMLP(LN(x))``."""

    def __init__(self, num_tokens: int, dim: int, token_hidden: int, channel_hidden: int,
    device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.tokens = TokenMixing(num_tokens, token_hidden)
        self.norm2 = nn.LayerNorm(dim)
        self.channels = ChannelMLP(dim, channel_hidden)
        place(self, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.tokens(self.norm1(x))
        return x + self.channels(self.norm2(x))


class MLPMixer(Resettable, nn.Module):
    """MLP-Mixer-like classifier (Tolstikhin et al. 2021): patch embedding, mixer blocks, token mean, linear head."""

    def __init__(
        self,
        in_channels: int = 1,
        num_classes: int = 10,
        image_size: int = 32,
        patch: int = 4,
        dim: int = 64,
        depth: int = 4,
        token_hidden: int | None = None,
        channel_hidden: int | None = None,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        _check_positive(in_channels=in_channels, num_classes=num_classes, image_size=image_size, patch=patch)
        if image_size % patch:
            raise ValueError(f"image_size {image_size} must be a multiple of patch {patch}")
        n = (image_size // patch) ** 2
        self.embed = PatchEmbed(in_channels, dim, patch)
        self.blocks = nn.Sequential(
            *[MixerBlock(n, dim, token_hidden or 2 * n, channel_hidden or 4 * dim) for _ in range(depth)]
        )
        self.norm = nn.LayerNorm(dim)
        self.pool = TokenMean()
        self.head = nn.Linear(dim, num_classes)
        place(self, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.pool(self.norm(self.blocks(self.embed(x)))))


class Attention(Resettable, nn.Module):
    """Multi-head self-attention on (B, N, C) tokens (written out, so forward-mode AD works)."""

    def __init__(self, dim: int, heads: int = 4, device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} must be divisible by heads {heads}")
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        place(self, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(C // self.heads), dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(B, N, C))


class ViTBlock(Resettable, nn.Module):
    """Pre-norm transformer block: ``x + Attention(LN(x))``, then ``x + MLP(LN(x))``."""

    def __init__(self, dim: int, heads: int, hidden: int, device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = ChannelMLP(dim, hidden)
        place(self, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class AddClassToken(Resettable, nn.Module):
    """Prepend a learned class token and add learned position embeddings, (B, N, C) -> (B, N + 1, C)."""

    def __init__(self, num_tokens: int, dim: int, device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(0.02 * torch.randn(1, num_tokens + 1, dim))
        place(self, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos


class ViT(Resettable, nn.Module):
    """ViT-like classifier (Dosovitskiy et al. 2021): patch embedding, class token and position embedding,
    pre-norm transformer blocks, class-token readout."""

    def __init__(
        self,
        in_channels: int = 1,
        num_classes: int = 10,
        image_size: int = 32,
        patch: int = 4,
        dim: int = 64,
        depth: int = 4,
        heads: int = 4,
        mlp_ratio: int = 2,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        _check_positive(in_channels=in_channels, num_classes=num_classes, image_size=image_size, patch=patch)
        if image_size % patch:
            raise ValueError(f"image_size {image_size} must be a multiple of patch {patch}")
        n = (image_size // patch) ** 2
        self.embed = PatchEmbed(in_channels, dim, patch)
        self.tokens = AddClassToken(n, dim)
        self.blocks = nn.Sequential(*[ViTBlock(dim, heads, mlp_ratio * dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.readout = ClassToken()
        self.head = nn.Linear(dim, num_classes)
        place(self, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.readout(self.norm(self.blocks(self.tokens(self.embed(x))))))


def patchify(x: Tensor, patch: int) -> Tensor:
    """(B, C, H, W) -> (B, N, patch * patch * C), patches in the order of :class:`PatchEmbed`."""
    B, C, H, W = x.shape
    h, w = H // patch, W // patch
    return x.reshape(B, C, h, patch, w, patch).permute(0, 2, 4, 3, 5, 1).reshape(B, h * w, patch * patch * C)


class MaskedAutoencoder(Resettable, nn.Module):
    """A masked autoencoder (He et al. 2021; the pretraining of thesis Sec. 4.6, Table 4.1) around a :class:`ViT`:
    the ViT's patch embedding, class token, position embedding, blocks and final norm encode the visible patches (a
    random ``1 - mask_ratio`` of them per image); a small transformer decoder gets the encoded tokens and a shared
    mask token at every hidden position (with its own position embedding) and predicts each hidden patch's pixels,
    normalised per patch. The forward pass returns each image's mean squared error over its hidden patches."""

    def __init__(self, vit: ViT, patch: int, in_channels: int = 1, decoder_dim: int = 64, decoder_depth: int = 2,
                 heads: int = 4, mask_ratio: float = 0.75, device: Any = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        if not 0 < mask_ratio < 1:
            raise ValueError(f"mask_ratio must be in (0, 1), got {mask_ratio!r}")
        self.vit, self.patch, self.mask_ratio = vit, patch, mask_ratio
        n_tokens, dim = vit.tokens.pos.shape[1], vit.tokens.pos.shape[2]
        self.decoder_embed = nn.Linear(dim, decoder_dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, decoder_dim))
        self.decoder_pos = nn.Parameter(0.02 * torch.randn(1, n_tokens, decoder_dim))
        self.decoder = nn.Sequential(*[ViTBlock(decoder_dim, heads, 2 * decoder_dim) for _ in range(decoder_depth)])
        self.decoder_norm = nn.LayerNorm(decoder_dim)
        self.predict = nn.Linear(decoder_dim, patch * patch * in_channels)
        place(self, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        tokens = self.vit.embed(x)
        B, N, D = tokens.shape
        pos = self.vit.tokens.pos
        tokens = tokens + pos[:, 1:]
        keep = max(1, int(round(N * (1 - self.mask_ratio))))
        order = torch.rand(B, N, device=x.device, dtype=x.dtype).argsort(1)
        restore = order.argsort(1)
        visible = tokens.gather(1, order[:, :keep, None].expand(-1, -1, D))
        cls = (self.vit.tokens.cls + pos[:, :1]).expand(B, -1, -1)
        encoded = self.decoder_embed(self.vit.norm(self.vit.blocks(torch.cat([cls, visible], 1))))
        E = encoded.shape[-1]
        hidden = self.mask_token.expand(B, N - keep, E)
        seq = torch.cat([encoded[:, 1:], hidden], 1).gather(1, restore[..., None].expand(-1, -1, E))
        seq = torch.cat([encoded[:, :1], seq], 1) + self.decoder_pos
        pred = self.predict(self.decoder_norm(self.decoder(seq)))[:, 1:]
        target = patchify(x, self.patch)
        target = (target - target.mean(-1, keepdim=True)) / (target.var(-1, keepdim=True) + 1e-6).sqrt()
        masked = (restore >= keep).to(pred.dtype)  # 1 where the patch was hidden
        return ((pred - target).pow(2).mean(-1) * masked).sum(1) / masked.sum(1)


class BasicBlock(Resettable, nn.Module):
    """ResNet basic block: conv3x3-BN-ReLU-conv3x3-BN, plus the (possibly 1x1-strided) shortcut, then ReLU.

    The final ReLU is the same module as the first one (called twice), as in the common implementation.
    """

    def __init__(self, c_in: int, c_out: int, stride: int = 1,
    device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.downsample: nn.Module | None = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))
        place(self, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out = out + identity
        return self.relu(out)


class ResNet18(Resettable, nn.Module):
    """ResNet-18-shaped network: a stem, four stages of two basic blocks (widths w, 2w, 4w, 8w; stride 2 from the
    second stage), global average pooling, linear head. ``width=64`` is the standard size.

    ``stem="imagenet"``: 7x7/2 convolution and 3x3/2 max pool (He et al. 2016). ``stem="cifar"``: one 3x3/1
    convolution and no pooling, the variant used for 32x32 inputs (and by the LEE measurements of thesis ch. 4)."""

    def __init__(self, in_channels: int = 3, num_classes: int = 1000, width: int = 64, stem: str = "imagenet",
    device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        _check_positive(in_channels=in_channels, num_classes=num_classes, width=width)
        if stem not in ("imagenet", "cifar"):
            raise ValueError(f"ResNet18: stem must be 'imagenet' or 'cifar', got {stem!r}")
        self.stem = stem
        if stem == "imagenet":
            self.conv1 = nn.Conv2d(in_channels, width, 7, stride=2, padding=3, bias=False)
            self.maxpool: nn.Module = nn.MaxPool2d(3, stride=2, padding=1)
        else:
            self.conv1 = nn.Conv2d(in_channels, width, 3, stride=1, padding=1, bias=False)
            self.maxpool = nn.Identity()
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        stages = []
        c_in = width
        for i in range(4):
            c_out = width * 2**i
            stride = 1 if i == 0 else 2
            stages.append(nn.Sequential(BasicBlock(c_in, c_out, stride), BasicBlock(c_out, c_out)))
            c_in = c_out
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.pool = GlobalAvgPool()
        self.fc = nn.Linear(c_in, num_classes)
        place(self, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.pool(x))


def build_model(arch: str, *, in_channels: int = 1, num_classes: int = 10, image_size: int = 32,
                **kwargs: Any) -> nn.Module:
    """A model by name: ``"cnn"``, ``"mixer"``, ``"vit"`` or ``"resnet18"``; extra keyword arguments go to it."""
    if arch == "cnn":
        return SmallCNN(in_channels, num_classes, **kwargs)
    if arch == "mixer":
        return MLPMixer(in_channels, num_classes, image_size, **kwargs)
    if arch == "vit":
        return ViT(in_channels, num_classes, image_size, **kwargs)
    if arch == "resnet18":
        return ResNet18(in_channels, num_classes, **kwargs)
    raise ValueError(f"unknown architecture {arch!r}; valid names: cnn, mixer, vit, resnet18")


__all__ = [
    "AddClassToken",
    "Attention",
    "BasicBlock",
    "ChannelMLP",
    "ClassToken",
    "GlobalAvgPool",
    "MaskedAutoencoder",
    "MLPMixer",
    "MixerBlock",
    "PatchEmbed",
    "ResNet18",
    "SmallCNN",
    "TokenMean",
    "TokenMixing",
    "ViT",
    "ViTBlock",
    "build_model",
    "patchify",
]
