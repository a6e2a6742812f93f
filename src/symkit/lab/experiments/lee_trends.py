"""LEE trends across architectures (thesis Ch. 4: Sec. 4.5-4.6, Fig. 4.1, 4.4, 4.7), on offline digits.

Trains a small CNN, an MLP-Mixer-like and a ViT-like model (``symkit.nn.vision``) on scikit-learn's handwritten
digits upsampled to ``image_size`` (no download), then measures:

* end-to-end LEE of the softmax probabilities (Eq. 4.4, ``mean_sq``) for every transform, on held-out digits,
  before and after training (``lee_init_*`` / ``lee_*``), plus the reference code's ``mean_abs`` reduction for
  translation;
* the equivariance gap: translation and rotation LEE on train, test and *shifted* data (test digits with added
  Gaussian pixel noise, a covariate shift standing in for the thesis's out-of-distribution datasets, Fig. 4.7);
* layer-wise attribution (Eq. 4.6, exact decomposition) of translation LEE: each layer type's share of
  ``sum_i ||C_i||`` and the cumulative share at each quarter of the depth (Fig. 4.4), with the closure residual;
* the sample-based baselines (translation error over U(-5, 5) px, discrete shift consistency).

The thesis studies 410 ImageNet models; this is a small-scale analogue whose numbers are not comparable with its
figures, but whose questions are the same (which architecture is more equivariant after training, where the error
comes from, whether the gap grows off-distribution). At paper scale (``--scale paper --data-dir D``) the same three
families train, wider and deeper, on natural images: CIFAR-10 from ``D`` (all 50,000 training images, the 10,000
test images), 32x32 RGB. ImageNet models themselves are measured by ``lee-zoo``, which takes the user's own trained
models; this experiment keeps training its models, so the paper scale is the largest data set that a run trains on
in hours on one GPU (a decision: the thesis trains none of its models).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from symkit.actions import pixels_per_unit
from symkit.lab import runtime
from symkit.lab.experiments.fields import Count, CountOrZero, Fraction, NonNegative, Positive, Seed
from symkit.lab.experiments.registry import Experiment, Plot, register
from symkit.measure import discrete_shift_consistency, layerwise_lie_derivative, lee, sample_translation_error
from symkit.nn.vision import build_model
from symkit.train import Trainer, accuracy

ARCHS = ("cnn", "mixer", "vit")
TRANSFORMS = (
    "translate_x",
    "translate_y",
    "rotate",
    "scale",
    "shear_x",
    "shear_y",
    "stretch_x",
    "hyperbolic_rotate",
    "brightness",
)
GAP_TRANSFORMS = ("translate_x", "rotate")
CATEGORIES = ("embedding", "conv", "norm", "nonlinearity", "pooling", "mixing", "linear", "position", "other")


@dataclass
class LEETrendsConfig:
    """Settings; the defaults are the full study (a few minutes per architecture on one core)."""

    arch: str = "cnn"
    data: str = "digits"  # digits (bundled), mnist or cifar10 (from the data folder, paper scale)
    n_train: CountOrZero = 0  # mnist / cifar10: the first n_train training images (0: all)
    image_size: Count = 32
    width: Count = 32  # CNN base width / token dimension
    depth: Count = 4  # CNN stages are 2; mixer / ViT blocks
    patch: Count = 4
    epochs: Count = 20
    max_steps: CountOrZero = 0  # 0: no cap
    batch_size: Count = 64
    lr: Positive = 1e-3
    augment_pixels: NonNegative = 0.0  # random translations of up to this many pixels during training
    test_fraction: Fraction = 0.3
    n_eval: Count = 100  # images per split for end-to-end LEE (the thesis uses 100)
    layer_images: CountOrZero = 20  # images for layer-wise attribution (the thesis uses 20)
    shift_noise: NonNegative = 0.3  # std of the Gaussian noise of the shifted split (in [0, 1] pixel units)
    num_threads: CountOrZero = 0  # torch threads during the run (0: leave unchanged); small models run best on 1
    seed: Seed = 0


DATA = ("digits", "mnist", "cifar10")


def _model(config: LEETrendsConfig, in_channels: int = 1) -> nn.Module:
    if config.arch == "cnn":
        return build_model("cnn", in_channels=in_channels, num_classes=10, width=config.width, stages=2)
    if config.arch in ("mixer", "vit"):
        return build_model(
            config.arch,
            in_channels=in_channels,
            num_classes=10,
            image_size=config.image_size,
            patch=config.patch,
            dim=config.width,
            depth=config.depth,
        )
    raise ValueError(f"arch must be one of {ARCHS}, got {config.arch!r}")


def category(name: str, kind: str) -> str:
    """Coarse layer type for the attribution summary."""
    if "embed" in name:
        return "embedding"
    if kind.startswith("Conv"):
        return "conv"
    if "Norm" in kind:
        return "norm"
    if kind in ("ReLU", "GELU", "SiLU", "Tanh", "LeakyReLU", "Sigmoid", "ELU"):
        return "nonlinearity"
    if "Pool" in kind or kind in ("TokenMean", "ClassToken"):
        return "pooling"
    if kind in ("Attention", "TokenMixing", "MultiheadAttention"):
        return "mixing"
    if kind == "Linear":
        return "linear"
    if kind == "AddClassToken":
        return "position"
    return "other"


def _train(model: nn.Module, x: torch.Tensor, y: torch.Tensor, config: LEETrendsConfig, gen: torch.Generator) -> int:
    from symkit.actions import translate_pixels

    def shift(xb: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        d = ((2 * torch.rand(2, len(xb), generator=g) - 1) * config.augment_pixels).to(xb.device, xb.dtype)
        return translate_pixels(xb, d[0], d[1])

    result = Trainer(model, F.cross_entropy, lr=config.lr, epochs=config.epochs, batch_size=config.batch_size,
                     max_steps=config.max_steps if config.max_steps > 0 else None,
                     augment=shift if config.augment_pixels > 0 else None, generator=gen,
                     desc=f"train {config.arch}", **runtime.trainer_settings()).fit((x, y))
    model.eval()
    return result.steps


def _lee_all(model: nn.Module, x: torch.Tensor, prefix: str, metrics: dict) -> None:
    for t in TRANSFORMS:
        r = lee(model, x, t)
        metrics[f"{prefix}{t}"] = r.value
        if t in GAP_TRANSFORMS:  # standard errors across images for the headline transforms
            metrics[f"{prefix}{t}_stderr"] = r.stderr


def run(config: LEETrendsConfig) -> dict:
    """Train one architecture and report end-to-end, gap and layer-wise LEE (see the module docstring)."""
    validate(config)
    threads = torch.get_num_threads()
    if config.num_threads > 0:
        torch.set_num_threads(config.num_threads)
    try:
        return _run(config)
    finally:
        torch.set_num_threads(threads)


def validate(config: LEETrendsConfig) -> None:
    """Refuse an unknown architecture or data set, and a data folder that is missing when the data need one."""
    if config.arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS}, got {config.arch!r}")
    if config.data not in DATA:
        raise ValueError(f"data must be one of {DATA}, got {config.data!r}")
    if config.data != "digits":
        from symkit.datasets.files import data_dir_of

        data_dir_of(runtime.data_dir())  # names the missing data folder before any run starts


def _splits(config: LEETrendsConfig, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Standardised (x_train, y_train, x_test, y_test): the digits split by ``test_fraction``, or a real data set's
    own train and test files (module docstring), at ``image_size``."""
    from symkit.datasets.digits import load_digits_images
    from symkit.datasets.sources import load_images

    if config.data == "digits":
        images, labels = load_digits_images(size=config.image_size)
        perm = torch.randperm(images.shape[0], generator=gen)
        n_test = int(round(config.test_fraction * images.shape[0]))
        test_idx, train_idx = perm[:n_test], perm[n_test:]
        x_train, y_train, x_test, y_test = images[train_idx], labels[train_idx], images[test_idx], labels[test_idx]
    else:
        x_train, y_train = load_images(config.data, "train", size=config.image_size, limit=config.n_train or None,
                                       data_dir=runtime.data_dir())
        x_test, y_test = load_images(config.data, "test", size=config.image_size, data_dir=runtime.data_dir())
    mean, std = x_train.mean(), x_train.std()
    return (x_train - mean) / std, y_train, (x_test - mean) / std, y_test, std


def _run(config: LEETrendsConfig) -> dict:
    start = time.time()
    torch.manual_seed(config.seed)
    gen = torch.Generator().manual_seed(config.seed)
    x_train, y_train, x_test, y_test, std = _splits(config, gen)
    noise = torch.randn(x_test.shape, generator=gen) * (config.shift_noise / float(std))
    x_shift = x_test + noise
    device = runtime.device()
    x_train, y_train, x_test, y_test, x_shift = (t.to(device) for t in (x_train, y_train, x_test, y_test, x_shift))

    model = _model(config, in_channels=x_train.shape[1]).to(device).eval()
    metrics: dict = {"n_params": sum(p.numel() for p in model.parameters())}
    ev = slice(0, config.n_eval)
    metrics["lee_init_translate_x"] = lee(model, x_test[ev], "translate_x").value
    metrics["lee_init_rotate"] = lee(model, x_test[ev], "rotate").value

    metrics["steps"] = _train(model, x_train, y_train, config, gen)
    metrics["train_acc"] = accuracy(model, x_train, y_train)
    metrics["test_acc"] = accuracy(model, x_test, y_test)
    metrics["shifted_acc"] = accuracy(model, x_shift, y_test)

    _lee_all(model, x_test[ev], "lee_", metrics)
    metrics["lee_mean_abs_translate_x"] = lee(model, x_test[ev], "translate_x", reduction="mean_abs").value
    for t in GAP_TRANSFORMS:
        train_v = lee(model, x_train[ev], t).value
        shift_v = lee(model, x_shift[ev], t).value
        metrics[f"lee_train_{t}"] = train_v
        metrics[f"lee_shifted_{t}"] = shift_v
        metrics[f"gap_test_over_train_{t}"] = metrics[f"lee_{t}"] / max(train_v, 1e-30)
        metrics[f"gap_shifted_over_test_{t}"] = shift_v / max(metrics[f"lee_{t}"], 1e-30)
        # the same on logits: softmax saturation (confident vs unsure predictions) scales the probability LEE
        for split, xs in (("train", x_train), ("test", x_test), ("shifted", x_shift)):
            metrics[f"lee_logits_{split}_{t}"] = lee(model, xs[ev], t, on="logits").value

    lw = layerwise_lie_derivative(model, x_test[: config.layer_images], "translate_x", method="exact")
    frac = lw.fractions
    for c in CATEGORIES:
        metrics[f"layer_frac_{c}"] = float(
            sum(float(f) for f, n, k in zip(frac, lw.names, lw.types) if category(n, k) == c)
        )
    cum = torch.cumsum(frac, 0)
    n = len(cum)
    for q in (1, 2, 3):
        metrics[f"layer_cum_q{q}"] = float(cum[max(0, math.ceil(q * n / 4) - 1)])
    top = int(frac.argmax())
    metrics["layer_top"] = lw.names[top]
    metrics["layer_top_frac"] = float(frac[top])
    metrics["layer_residual"] = lw.residual
    metrics["layer_sum_norms_over_norm"] = float(
        lw.sq_norms.sqrt().sum(0).mean() / lw.end_to_end.flatten(1).norm(dim=1).mean().clamp_min(1e-30)
    )

    s = pixels_per_unit(config.image_size)
    metrics["sample_translation_error"] = sample_translation_error(model, x_test[ev], max_pixels=min(5.0, s)).value
    metrics["shift_changed"] = 1.0 - discrete_shift_consistency(model, x_test[ev], max_shift=2).value
    metrics["time_s"] = time.time() - start
    return metrics


def _bar(y: str, title: str) -> Plot:
    return Plot(x="arch", y=y, kind="bar", title=title)


def claims(rows: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    """Fig. 4.4's and Fig. 4.7's claims on the translation LEE (means over seeds), for docs/reproductions.md, each
    where its architectures have runs: in the CNN the non-linearities and downsampling carry more of it than the
    convolutions; in the ViT and the Mixer the patch embedding is the largest single layer (in most seeds); every
    model is less equivariant on test than on training data, and less again on shifted (out-of-distribution)
    data."""
    by_arch = {r["config"].get("arch"): r["mean"] for r in rows}
    tops = {r["config"].get("arch"): [str(s["layer_top"]) for s in r.get("by_seed", {}).values() if "layer_top" in s]
            for r in rows}
    out: dict[str, bool] = {}
    cnn = by_arch.get("cnn")
    if cnn and "layer_frac_conv" in cnn:
        out["cnn_nonlinearity_and_pooling_above_conv"] = (
            cnn.get("layer_frac_nonlinearity", 0) + cnn.get("layer_frac_pooling", 0) > cnn["layer_frac_conv"])
    tokens = [top for arch, top in tops.items() if arch in ("vit", "mixer") and top]
    if tokens:
        out["patch_embedding_largest_layer_of_vit_and_mixer"] = all(
            2 * sum(t.startswith("embed") for t in top) > len(top) for top in tokens)
    gaps = [m for m in by_arch.values() if all(k in m for k in ("lee_train_translate_x", "lee_translate_x",
                                                                 "lee_shifted_translate_x"))]
    if gaps:
        out["less_equivariant_on_test_than_train"] = all(
            m["lee_translate_x"] > m["lee_train_translate_x"] for m in gaps)
        out["less_equivariant_on_shifted_than_test"] = all(
            m["lee_shifted_translate_x"] > m["lee_translate_x"] for m in gaps)
    return out


def summarize(rows: Sequence[Mapping[str, Any]]) -> str:
    """Two compact tables: LEE by architecture and transform, and layer-type shares of translation LEE."""
    rows = sorted(rows, key=lambda r: ARCHS.index(r["config"].get("arch")) if r["config"].get("arch") in ARCHS else 9)

    def fmt(v: Any) -> str:
        return f"{v:.3g}" if isinstance(v, (int, float)) else "-"

    lines = ["LEE of the test-digit probabilities (Eq. 4.4, mean over images and seeds):", ""]
    lines.append("| arch | test acc | " + " | ".join(TRANSFORMS) + " |")
    lines.append("|---" * (len(TRANSFORMS) + 2) + "|")
    for r in rows:
        m = r["mean"]
        cells = [fmt(m.get(f"lee_{t}")) for t in TRANSFORMS]
        lines.append(f"| {r['config'].get('arch')} | {fmt(m.get('test_acc'))} | " + " | ".join(cells) + " |")
    lines += ["", "Share of sum_i ||C_i|| (layer-wise translation LEE, Eq. 4.6) by layer type:", ""]
    lines.append("| arch | " + " | ".join(CATEGORIES) + " | largest layer |")
    lines.append("|---" * (len(CATEGORIES) + 2) + "|")
    for r in rows:
        m = r["mean"]
        cells = [fmt(m.get(f"layer_frac_{c}")) for c in CATEGORIES]
        lines.append(f"| {r['config'].get('arch')} | " + " | ".join(cells) + f" | {m.get('layer_top', '-')} |")
    lines += ["", "Equivariance gap (translation LEE of probabilities, then of logits): train / test / shifted:", ""]
    lines.append("| arch | train | test | shifted | logits: train | test | shifted | shifted acc |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for r in rows:
        m = r["mean"]
        trio = [fmt(m.get(f"lee_{k}translate_x")) for k in ("train_", "", "shifted_")]
        trio += [fmt(m.get(f"lee_logits_{k}_translate_x")) for k in ("train", "test", "shifted")]
        lines.append(f"| {r['config'].get('arch')} | " + " | ".join(trio) + f" | {fmt(m.get('shifted_acc'))} |")
    return "\n".join(lines)


register(
    Experiment(
        name="lee-trends",
        description="End-to-end and layer-wise LEE of CNN, Mixer and ViT digit classifiers; equivariance gap.",
        reproduces="Finzi thesis Ch. 4 (Gruver et al. ICLR 2023): Fig. 4.1/4.5 (LEE by architecture and transform), "
        "Fig. 4.4 (layer-wise contributions), Fig. 4.7 (equivariance gap), at small scale on offline digits",
        config=LEETrendsConfig,
        run=run,
        validate=validate,
        paper_scale={"data": "cifar10", "image_size": 32, "width": 64, "depth": 6, "epochs": 30, "batch_size": 128,
                     "augment_pixels": 0.0, "n_eval": 100, "layer_images": 20},
        quick={
            "image_size": 16,
            "width": 8,
            "depth": 1,
            "patch": 4,
            "max_steps": 150,  # the ViT needs 150 steps to leave chance (48% against 16% at 60)
            "batch_size": 32,
            "lr": 3e-3,
            "n_eval": 16,
            "layer_images": 4,
            "num_threads": 1,
        },
        sweep={"arch": ARCHS, "seed": (0, 1, 2)},
        quick_sweep={"arch": ARCHS, "seed": (0,)},
        plots=(
            *(
                _bar(f"lee_{t}", f"LEE ({t}) of the probabilities, test digits")
                for t in ("translate_x", "rotate", "scale", "hyperbolic_rotate", "brightness")
            ),
            _bar("test_acc", "Test accuracy"),
            _bar("lee_init_translate_x", "Translation LEE at initialisation"),
            _bar("gap_shifted_over_test_translate_x", "Equivariance gap: shifted / test translation LEE"),
            *(
                _bar(f"layer_frac_{c}", f"Share of layer-wise translation LEE: {c}")
                for c in ("embedding", "conv", "norm", "nonlinearity", "pooling", "mixing")
            ),
            *(_bar(f"layer_cum_q{q}", f"Cumulative share of layer contributions at {q}/4 depth") for q in (1, 2, 3)),
            Plot(
                x="test_acc",
                y="lee_translate_x",
                hue="arch",
                kind="scatter",
                logy=True,
                title="Translation LEE against test accuracy",
            ),
            _bar("shift_changed", "Fraction of predictions changed by integer shifts"),
        ),
        summarize=summarize,
        claims=claims,
    )
)
