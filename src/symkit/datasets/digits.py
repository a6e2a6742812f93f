"""scikit-learn's bundled handwritten digits (1797 images, 8x8, 10 classes) as torch tensors; nothing downloads."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def load_digits_images(size: int = 8, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Images ``(1797, 1, size, size)`` scaled to [0, 1] and labels ``(1797,)``.

    ``size > 8`` upsamples bilinearly (``align_corners=False``), so a 28x28 stand-in for small-image benchmarks
    needs no download.
    """
    if not isinstance(size, int) or size < 8:
        raise ValueError(f"size must be an int >= 8 (the digits are 8x8), got {size!r}")
    from symkit._checks import require

    data = require("sklearn.datasets", "the handwritten digits data set").load_digits()
    images = torch.as_tensor(data.images, dtype=torch.float64).unsqueeze(1) / 16.0
    labels = torch.as_tensor(data.target, dtype=torch.long)
    if size != 8:
        images = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False).clamp(0.0, 1.0)
    return images.to(dtype), labels
