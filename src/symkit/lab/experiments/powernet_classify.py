"""PowerNet classification of augmented digits against a CNN of the same structure (PowerNet §4.2, 2xMNIST).

The paper's 2xMNIST puts 28x28 digits on a 56x56 frame and applies a full-range rotation, a scale in [0.8, 1.2]
and a translation of up to 10 pixels. Here the 8x8 digits are upsampled to ``digit_size`` (14) on a frame twice
that size (28) with the translation scaled the same way (5 pixels), so a run fits a small CPU. Training digits get
fresh augmentations every epoch; the test set is held-out digits at fixed augmentations.

Both models have 4 blocks of 2 layers, max pooling, BatchNorm, residuals, LeakyReLU(0.2) and a flattened linear
head. The PowerNet's layers use four bases (rotation, scaling, shift up, shift right), each with its own power series
of kernel size 5, summed (``combine="sum"``: 17 terms per channel pair); the CNN uses 5x5 convolutions (25 taps).
The paper reports 84% for both.

Widths: the paper's (2, 4, 8, 16) make a run chaotic on 1438 training digits (two CNNs that differ only in their
initial weights land 10.8 points apart, rms over five seeds), so a 2-point comparison cannot be decided at that
size. The default is four times wider, (8, 16, 32, 64), where that noise floor is 3.4 points and ten seeds put the
mean gap at -1.6 (docs/powernet.md); ``--set channels=2,4,8,16`` gives the paper's widths. Every run also
trains ``cnn_inits - 1`` extra CNNs from other initial weights on the same data and reports their mean difference
to the first (``cnn_init_gap``), the noise floor of ``acc_gap``.

The paper's data come from the run's data folder: ``data="mnist"`` is 2xMNIST itself (MNIST's 28x28 images,
``digit_size=28``, centred on a 56x56 ``canvas``, rotated, scaled and translated by up to 10 pixels; the training
set with fresh augmentations every epoch, the test set at ``test_copies`` fixed augmentations), ``data="cifar10"``
CIFAR-10's training and test sets, not augmented (the paper names none), with the paper's CIFAR network:
``cifar_channels`` blocks of ``cifar_layers`` layers at learning rate ``cifar_lr`` (these replace ``channels``,
``num_layers`` and ``lr``; the augmentation and canvas fields do not apply). Paper scale (``--scale paper``, §4.2):
both tasks; 2xMNIST with 4 blocks of 2 layers at the paper's widths (2, 4, 8, 16), batch 64, Adam at lr 1e-3 with
weight decay 1e-4; CIFAR-10 with 5 blocks of one 32-channel layer, batch 64, lr 1e-4, weight decay 1e-4 (paper: 84%
and 75%). The paper gives no epochs, split or seeds; decided: the official splits, 30 epochs (cosine decay, as at the
other scales), one fixed augmentation per MNIST test image, one CNN beside the PowerNet (the paper's baseline) and one
seed per task, as the paper reports one number each.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from symkit._checks import check_int
from symkit.datasets.rotated_digits import augmented_digits, centred_digits, centred_images, split_indices
from symkit.lab import runtime
from symkit.lab.experiments.fields import Count, CountOrZero, Fraction, NonNegative, Positive, Seed
from symkit.lab.experiments.registry import Experiment, PaperValue, register
from symkit.nn.powernet import ConvNet, PowerNet
from symkit.stats import interval, mean_and_error
from symkit.train import Trainer, accuracy


@dataclass
class ClassifyConfig:
    """Settings; defaults are the full run (about 12 minutes per seed on one core)."""

    canvas: Count = 28
    digit_size: Count = 14
    max_shift: NonNegative = 5.0
    scale_low: Positive = 0.8
    scale_high: Positive = 1.2
    channels: tuple[Count, ...] = (8, 16, 32, 64)  # 4x the paper's (2, 4, 8, 16): see the module docstring
    num_layers: CountOrZero = 2
    kernel_size: Count = 5
    bases: tuple[str, ...] = ("rotation", "scaling", "shift_up", "shift_right")
    combine: str = "sum"
    init: str = "uniform"  # the CNN's (nn.Conv2d) initialisation, so the two models start alike
    rotation_step: Positive = math.pi / 8
    scaling_step: Positive = 0.1
    epochs: Count = 60  # 20 epochs at lr 1e-3 left both models far from converged (CNN 44-52%, PowerNet 31%)
    batch_size: Count = 64
    lr: Positive = 1e-2
    weight_decay: NonNegative = 1e-4
    test_fraction: Fraction = 0.2
    test_copies: Count = 4
    train_subset: CountOrZero = 0  # 0: every training digit
    cnn_inits: Count = 2  # CNNs trained from different initial weights on the same data: the gap's noise floor
    data: str = "digits"  # one of DATA
    cifar_channels: tuple[Count, ...] = (32, 32, 32, 32, 32)  # data="cifar10": block widths (§4.2)
    cifar_layers: Count = 1  # data="cifar10": layers per block (§4.2)
    cifar_lr: Positive = 1e-4  # data="cifar10": Adam's learning rate (§4.2)
    seed: Seed = 0


#: the bundled digits (augmented, split here), 2xMNIST from MNIST's files, or CIFAR-10's files (not augmented)
DATA = ("digits", "mnist", "cifar10")


def validate(config: ClassifyConfig) -> None:
    """Reject unknown data sets; name a missing data folder before any run starts."""
    if config.data not in DATA:
        raise ValueError(f"powernet-classify: data must be one of {', '.join(DATA)}, got {config.data!r}")
    if config.data != "digits":
        from symkit.datasets.files import data_dir_of

        data_dir_of(runtime.data_dir())


def _powers(config: ClassifyConfig) -> list[tuple[int, ...]] | None:
    """``combine="mixed"``: the shift bases combine by product (a k x k kernel, as in a CNN) and every other base
    adds its own series; ``"sum"`` / ``"product"`` are left to the layer."""
    if config.combine != "mixed":
        return None
    names = list(config.bases)
    half = config.kernel_size // 2
    shifts = [i for i, b in enumerate(names) if b.startswith("shift")]
    out: list[tuple[int, ...]] = []
    grids = itertools.product(range(-half, half + 1), repeat=len(shifts))
    for combo in grids:
        t = [0] * len(names)
        for i, p in zip(shifts, combo):
            t[i] = p
        out.append(tuple(t))
    for b in range(len(names)):
        if b not in shifts:
            for p in range(-half, half + 1):
                if p:
                    t = [0] * len(names)
                    t[b] = p
                    out.append(tuple(t))
    return out


def _data(config: ClassifyConfig, device: torch.device
          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, bool]:
    """``(train images, train labels, test images, test labels, augment)`` on ``device``; the test images are already
    augmented when ``augment`` (the training images get fresh augmentations every epoch)."""
    if config.data == "cifar10":
        from symkit.datasets.sources import load_images

        xtr, ytr = load_images("cifar10", "train", data_dir=runtime.data_dir())
        xte, yte = load_images("cifar10", "test", data_dir=runtime.data_dir())
        if config.train_subset:
            xtr, ytr = xtr[: config.train_subset], ytr[: config.train_subset]
        return xtr.to(device), ytr.to(device), xte.to(device), yte.to(device), False
    if config.data == "digits":
        images, labels = centred_digits(config.digit_size, config.canvas)
        train_idx, test_idx = split_indices(images.shape[0], config.test_fraction, seed=config.seed)
        if config.train_subset:
            train_idx = train_idx[: config.train_subset]
        xtr, ytr, xte, yte = images[train_idx], labels[train_idx], images[test_idx], labels[test_idx]
    else:  # 2xMNIST: the official split of the files in the data folder
        xtr, ytr = centred_images(config.data, "train", config.digit_size, config.canvas, data_dir=runtime.data_dir())
        xte, yte = centred_images(config.data, "test", config.digit_size, config.canvas, data_dir=runtime.data_dir())
        if config.train_subset:
            xtr, ytr = xtr[: config.train_subset], ytr[: config.train_subset]
    xtr, ytr, xte, yte = (t.to(device) for t in (xtr, ytr, xte, yte))
    test_x, src = augmented_digits(xte, config.test_copies,
                                   generator=torch.Generator().manual_seed(10_000 + config.seed), **_aug(config))
    return xtr, ytr, test_x, yte[src], True


def _aug(config: ClassifyConfig) -> dict[str, Any]:
    return dict(scale_range=(config.scale_low, config.scale_high), max_shift=config.max_shift, max_angle=math.pi)


def run(config: ClassifyConfig) -> dict:
    """Train the PowerNet and the CNN on the same (augmented) images; report both test accuracies."""
    validate(config)
    t0 = time.time()
    check_int("cnn_inits", config.cnn_inits, 1)
    device = runtime.device()
    torch.manual_seed(config.seed)
    train_x, train_y, test_x, test_y, augment = _data(config, device)
    cifar = config.data == "cifar10"
    shape = tuple(train_x.shape[1:])
    channels = list(config.cifar_channels if cifar else config.channels)
    num_layers = config.cifar_layers if cifar else config.num_layers
    lr = config.cifar_lr if cifar else config.lr
    models = {
        "powernet": PowerNet(list(config.bases), shape, channels, 10,
                             num_layers=num_layers, kernel_size=config.kernel_size, powers=_powers(config),
                             combine="sum" if config.combine == "mixed" else config.combine,
                             pool="max", head="flatten", init=config.init,
                             steps={k: v for k, v in (("rotation", config.rotation_step),
                                                      ("scaling", config.scaling_step)) if k in config.bases},
                             generator=torch.Generator().manual_seed(config.seed), device=device),
    }
    for i in range(config.cnn_inits):  # every CNN draws fresh initial weights from the seeded global generator
        cnn = ConvNet(shape, channels, 10, num_layers=num_layers, kernel_size=config.kernel_size, pool="max",
                      head="flatten")  # drawn on the CPU (the same weights on every device), then moved
        models["cnn" if i == 0 else f"cnn{i}"] = cnn.to(device)
    out: dict = {}
    for name, model in models.items():
        gen = torch.Generator().manual_seed(config.seed)  # same augmentation stream and batches for both

        def epoch_data(epoch: int, gen: torch.Generator = gen) -> tuple[torch.Tensor, torch.Tensor]:
            if not augment:
                return train_x, train_y
            x, s = augmented_digits(train_x, 1, generator=gen, **_aug(config))
            return x, train_y[s]

        t = time.time()
        history = Trainer(model, F.cross_entropy, lr=lr, weight_decay=config.weight_decay, schedule="cosine",
                          epochs=config.epochs, batch_size=config.batch_size, min_batch=2, generator=gen,
                          desc=f"classify/{name}", **runtime.trainer_settings()).fit(epoch_data).losses
        out[f"{name}_test_acc"] = accuracy(model, test_x, test_y)
        out[f"{name}_train_loss"] = history[-1]
        out[f"{name}_params"] = int(sum(p.numel() for p in model.parameters()))
        out[f"{name}_seconds"] = round(time.time() - t, 1)
    out["acc_gap"] = out["powernet_test_acc"] - out["cnn_test_acc"]
    if config.cnn_inits > 1:  # same data and batches, other initial weights: how far two equal models land apart
        alt = [out[f"cnn{i}_test_acc"] for i in range(1, config.cnn_inits)]
        out["cnn_init_gap"] = sum(alt) / len(alt) - out["cnn_test_acc"]
    out["n_train_digits"] = len(train_x)
    out["n_test"] = int(test_y.numel())
    out["seconds"] = round(time.time() - t0, 1)
    return out


def _t_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean, standard error and the half-width of the 95% t-interval of ``values`` (nan beyond the mean for n < 2)."""
    mean, se = mean_and_error(values)
    return mean, se, interval(values, 0.95, "t")


def _with_interval(mean: float, se: float, half: float) -> str:
    """``mean ± se | [low, high]`` cells; a single seed has neither (``–``)."""
    if math.isnan(se):
        return f"{mean:+.2f} | –"
    return f"{mean:+.2f} ± {se:.2f} | [{mean - half:+.2f}, {mean + half:+.2f}]"


def summarize(rows: Sequence[Mapping[str, Any]]) -> str:
    """Per setting, in points: the paired gap PowerNet − CNN (first CNN, as ``acc_gap``) and PowerNet − the mean of
    all ``cnn_inits`` CNNs (less noisy), each with its 95% t-interval over seeds, beside the noise floor: the root mean
    square over seeds of the difference between two CNNs that differ only in their initial weights."""
    lines = ["| channels | combine | seeds | PowerNet % | CNN % | gap to CNN | 95% interval | gap to mean of CNNs "
             "| 95% interval | CNN-vs-CNN rms |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        runs = [m for m in r.get("by_seed", {}).values() if "acc_gap" in m]
        if not runs:
            continue
        inits = int(r["config"].get("cnn_inits", 1))
        cnns = [[m["cnn_test_acc"]] + [m[f"cnn{i}_test_acc"] for i in range(1, inits) if f"cnn{i}_test_acc" in m]
                for m in runs]
        gap, gap_se, gap_half = _t_interval([100 * m["acc_gap"] for m in runs])
        to_mean = [100 * (m["powernet_test_acc"] - sum(c) / len(c)) for m, c in zip(runs, cnns)]
        mgap, mgap_se, mgap_half = _t_interval(to_mean)
        floors = [100 * (c[1] - c[0]) for c in cnns if len(c) > 1]
        floor = f"{math.sqrt(sum(f * f for f in floors) / len(floors)):.2f}" if floors else "–"
        chans = ",".join(str(c) for c in r["config"].get("channels", []))
        pn = 100 * sum(m["powernet_test_acc"] for m in runs) / len(runs)
        cnn = 100 * sum(m["cnn_test_acc"] for m in runs) / len(runs)
        lines.append(f"| {chans} | {r['config'].get('combine')} | {len(runs)} | {pn:.2f} | {cnn:.2f} | "
                     f"{_with_interval(gap, gap_se, gap_half)} | {_with_interval(mgap, mgap_se, mgap_half)} | "
                     f"{floor} |")
    return "\n".join(lines) if len(lines) > 2 else ""


register(
    Experiment(
        name="powernet-classify",
        stand_in="scikit-learn's 8x8 digits, not MNIST",
        decided={"§4.2 text": "at the paper's widths the two-shift PowerNet, exactly a circular 5x5 CNN, is level with "
                              "the CNN within the noise floor while the 4-base one is far below: the rotation and "
                              "scaling series cost accuracy on these data, not the PowerNet code (docs/powernet.md)"},
        description="PowerNet (rotation, scaling, shift bases) vs a same-structure CNN on augmented digits",
        reproduces="PowerNet (ICLR 2025 submission) §4.2, augmented 2xMNIST classification",
        config=ClassifyConfig,
        run=run,
        summarize=summarize,
        # quick: the smallest size at which all three models learn (about 45% against 10% chance in ~20 s)
        quick={"canvas": 12, "digit_size": 8, "max_shift": 1.0, "epochs": 12, "batch_size": 32, "train_subset": 600,
               "test_copies": 1, "channels": (4, 8, 16, 16)},
        sweep={"seed": (0, 1, 2, 3, 4)},  # one seed tells little: compare the paired gap with cnn_init_gap
        quick_sweep={"seed": (0,)},
        # §4.2: 2xMNIST (56x56, full rotation, scale 0.8-1.2, shifts up to 10 px; widths 2, 4, 8, 16; lr 1e-3) and
        # CIFAR-10 (the cifar_* fields); epochs, split and seeds are not in the paper (module docstring)
        paper_scale={"data": "mnist", "canvas": 56, "digit_size": 28, "max_shift": 10.0, "scale_low": 0.8,
                     "scale_high": 1.2, "channels": (2, 4, 8, 16), "num_layers": 2, "kernel_size": 5, "epochs": 30,
                     "batch_size": 64, "lr": 1e-3, "weight_decay": 1e-4, "test_copies": 1, "train_subset": 0,
                     "cnn_inits": 1, "cifar_channels": (32, 32, 32, 32, 32), "cifar_layers": 1, "cifar_lr": 1e-4},
        # CIFAR-10 first: its 32x32 bases build in seconds, the 56x56 ones of 2xMNIST take a minute (a smoke run
        # checks the first planned run)
        paper_sweep={"data": ("cifar10", "mnist"), "seed": (0,)},
        validate=validate,
        paper=(
            PaperValue("powernet_test_acc", 0.84, {}, "§4.2 text"),
            PaperValue("cnn_test_acc", 0.84, {}, "§4.2 text ('identical performance')"),
        ),
    )
)
