"""A zoo of image classifiers named by the user, and their learned equivariance (thesis Sec. 4.5-4.6, Fig. 4.1/4.5).

A model is named by a *spec*, text that a command line can carry::

    [label=]target[(key=value, ...)][@weights]

``target`` is an importable constructor ``package.module:function`` (any callable returning an ``nn.Module``), a
timm model name ``timm:resnet50`` (needs timm installed; the model is built with ``pretrained=False``, so nothing
downloads), or the name of one of the small models of :data:`ZOO` (convnets, MLP-Mixers and ViTs built here).
Keyword arguments are Python literals. ``weights`` is a local file holding a state dict, read with
``torch.load(..., weights_only=True)`` (or a ``.safetensors`` file when safetensors is installed); checkpoints that
wrap the state dict are unwrapped as timm's ``load_state_dict`` reads them (the EMA weights first: ``state_dict_ema``,
``model_ema``, then ``state_dict``, ``model``; and ``model_state``), and ``module.`` prefixes are dropped. symkit reads
the file itself rather than through timm, so that ``weights_only=True`` holds on every torch version and the weights
a spec loads do not depend on whether timm is installed.
A model that declares its input normalisation as timm models do (``pretrained_cfg`` / ``default_cfg`` with ``mean``
and ``std``) gets a :class:`Normalize` layer in front, so every measurement is on images in [0, 1].

:func:`evaluate_model` measures one model on images: accuracy, end-to-end LEE per transform (Eq. 4.4), layer-wise
attribution (Eq. 4.6; exact or Hutchinson probes), and the EQ-T / EQ-T_frac baselines end to end and per layer.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from symkit.measure.eqt import EQTResult, LayerwiseEQT, eqt, layerwise_eqt
from symkit.measure.layerwise import LayerwiseResult, _default_leaf_types, layerwise_lie_derivative
from symkit.measure.lie import LEEResult, lee
from symkit.nn._factory import Resettable, factory, place
from symkit.nn.vision import GlobalAvgPool, MLPMixer, ViT
from symkit.train import accuracy as top1_accuracy

__all__ = [
    "ZOO",
    "BlurPool2d",
    "LoadedModel",
    "ModelSpec",
    "Normalize",
    "TinyConvNet",
    "ZooReport",
    "evaluate_model",
    "load_model",
    "load_state_dict",
    "model_family",
    "parse_spec",
    "tiny_convnet",
    "tiny_mixer",
    "tiny_vit",
    "zoo_leaf_types",
]

#: module class names (timm's, and the reference code's list) measured as one layer: their forward does work that
#: is not a submodule (reshapes, softmax, functional normalisation or activation)
LEAF_NAMES = frozenset({
    "Attention", "MultiheadAttention", "TokenMixing", "MixerBlock", "Affine", "SpatialGatingBlock",
    "SpatialGatingUnit", "PatchEmbed", "Mlp", "GluMlp", "GatedMlp", "DropPath", "BlurPool2d", "GatherExcite",
    "EvoNorm2dB0", "EvoNorm2dS0", "BatchNormAct2d", "GroupNormAct", "LayerNorm", "LayerNorm2d", "GroupNorm",
    "SEModule", "SqueezeExcite", "EffectiveSEModule", "MHSA", "GPSA", "ClassAttn", "TalkingHeadAttn",
    "WindowAttention", "XCA", "LayerScale", "Normalize",
})


#: summed layer-wise EQ-T errors at or below this are rounding (float32 layers that commute with the shifts)
EXACT_EQT = 1e-10


# ------------------------------------------------------------------------------------------------ small models
class BlurPool2d(nn.Module):
    """Anti-aliased stride-2 subsampling (Zhang 2019): a fixed binomial ``[1, 2, 1]^2 / 16`` low-pass filter per
    channel, reflection padding, then every second pixel (Fig. 4.6, case study 1). The filter is made in the input's
    dtype and on its device (the layer holds no tensor of its own)."""

    def forward(self, x: Tensor) -> Tensor:
        c = x.shape[1]
        k = torch.tensor([1.0, 2.0, 1.0], dtype=x.dtype, device=x.device)
        w = (k[:, None] * k[None, :] / 16).expand(c, 1, 3, 3)
        return F.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), w, stride=2, groups=c)


class TinyConvNet(Resettable, nn.Module):
    """Three conv3x3-BN-ReLU stages (widths w, 2w, 4w) with stride-2 downsampling between them, global average
    pooling and a linear head. ``blur=True`` downsamples with max pooling at stride 1 followed by
    :class:`BlurPool2d` (Zhang 2019's MaxBlurPool) instead of stride-2 max pooling."""

    def __init__(self, in_channels: int = 3, num_classes: int = 10, width: int = 8, blur: bool = False,
                 device: Any = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c_in = in_channels
        for i in range(3):
            c_out = width * 2**i
            layers += [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]
            if i < 2:
                layers += [nn.MaxPool2d(2, stride=1), BlurPool2d()] if blur else [nn.MaxPool2d(2)]
            c_in = c_out
        self.features = nn.Sequential(*layers)
        self.pool = GlobalAvgPool()
        self.head = nn.Linear(c_in, num_classes)
        place(self, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.pool(self.features(x)))


def tiny_convnet(in_channels: int = 3, num_classes: int = 10, width: int = 8, blur: bool = False) -> nn.Module:
    """A :class:`TinyConvNet` (any image size: the network pools globally)."""
    return TinyConvNet(in_channels, num_classes, width, blur)


def tiny_mixer(in_channels: int = 3, num_classes: int = 10, image_size: int = 16, patch: int = 4, dim: int = 16,
               depth: int = 2) -> nn.Module:
    """A small MLP-Mixer (:class:`symkit.nn.vision.MLPMixer`)."""
    return MLPMixer(in_channels, num_classes, image_size, patch=patch, dim=dim, depth=depth)


def tiny_vit(in_channels: int = 3, num_classes: int = 10, image_size: int = 16, patch: int = 4, dim: int = 16,
             depth: int = 2, heads: int = 2) -> nn.Module:
    """A small ViT (:class:`symkit.nn.vision.ViT`)."""
    return ViT(in_channels, num_classes, image_size, patch=patch, dim=dim, depth=depth, heads=heads)


#: the built-in zoo: name -> (constructor, keyword arguments); three sizes per family and a BlurPool convnet
ZOO: dict[str, tuple[Callable[..., nn.Module], dict[str, Any]]] = {
    "convnet-s": (tiny_convnet, {"width": 4}),
    "convnet-m": (tiny_convnet, {"width": 8}),
    "convnet-l": (tiny_convnet, {"width": 16}),
    "convnet-blur-m": (tiny_convnet, {"width": 8, "blur": True}),
    "mixer-s": (tiny_mixer, {"dim": 8, "depth": 1}),
    "mixer-m": (tiny_mixer, {"dim": 16, "depth": 2}),
    "mixer-l": (tiny_mixer, {"dim": 32, "depth": 3}),
    "vit-s": (tiny_vit, {"dim": 8, "depth": 1, "heads": 2}),
    "vit-m": (tiny_vit, {"dim": 16, "depth": 2, "heads": 2}),
    "vit-l": (tiny_vit, {"dim": 32, "depth": 3, "heads": 4}),
}


class Normalize(nn.Module):
    """``(x - mean) / std`` per channel: the input normalisation a pretrained model expects, as its own layer."""

    def __init__(self, mean: Sequence[float], std: Sequence[float], device: Any = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        f = factory(device, dtype)
        self.register_buffer("mean", torch.tensor([float(m) for m in mean], **f)[None, :, None, None],
                             persistent=False)
        self.register_buffer("std", torch.tensor([float(s) for s in std], **f)[None, :, None, None], persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        return (x - self.mean.to(x.dtype)) / self.std.to(x.dtype)


# ------------------------------------------------------------------------------------------------ specs
@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec (module docstring): ``kind`` is ``"zoo"``, ``"timm"`` or ``"import"``."""

    text: str
    label: str
    kind: str
    target: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    weights: str | None = None


def _split_weights(spec: str) -> tuple[str, str | None]:
    """Split at the first ``@`` outside the parentheses of the keyword arguments."""
    depth = 0
    for i, ch in enumerate(spec):
        depth += (ch == "(") - (ch == ")")
        if ch == "@" and depth == 0:
            return spec[:i], spec[i + 1:].strip() or None
    return spec, None


def parse_spec(text: str) -> ModelSpec:
    """Parse ``[label=]target[(key=value, ...)][@weights]`` (module docstring); raises ``ValueError`` naming the
    spec and what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"a model spec must be non-empty text, got {text!r}")
    spec, weights = _split_weights(text.strip())
    head = spec.split("(", 1)[0]
    label = None
    if "=" in head:
        label, spec = (s.strip() for s in spec.split("=", 1))
        if not label:
            raise ValueError(f"model spec {text!r}: empty label before '='")
    kwargs: dict[str, Any] = {}
    if "(" in spec:
        if not spec.endswith(")"):
            raise ValueError(f"model spec {text!r}: keyword arguments must end with ')'")
        spec, inner = spec.split("(", 1)
        try:
            call = ast.parse(f"f({inner}", mode="eval").body
            assert isinstance(call, ast.Call)
            if call.args:
                raise ValueError("only keyword arguments are allowed")
            kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg}
        except (SyntaxError, ValueError, AssertionError) as exc:
            raise ValueError(f"model spec {text!r}: keyword arguments must be key=literal pairs ({exc})") from None
    target = spec.strip()
    if target.startswith("timm:"):
        kind, target = "timm", target[5:]
    elif ":" in target:
        kind = "import"
    elif target in ZOO:
        kind = "zoo"
    else:
        raise ValueError(f"model spec {text!r}: {target!r} is neither package.module:function, timm:NAME, nor a "
                         f"built-in model ({', '.join(ZOO)})")
    if not target:
        raise ValueError(f"model spec {text!r}: no model name")
    return ModelSpec(text, label or target, kind, target, kwargs, weights)


def load_state_dict(path: str | Path) -> dict[str, Tensor]:
    """A state dict from a local file (``torch.load(..., weights_only=True)``, or safetensors by suffix), unwrapped
    from common checkpoint layouts (module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"weights file {str(path)!r} does not exist")
    if path.suffix == ".safetensors":
        try:
            from safetensors.torch import load_file
        except ImportError:
            raise ImportError(f"{path}: reading .safetensors files needs the safetensors package") from None
        state: Any = load_file(str(path))
    else:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # pickle errors of files that hold more than tensors
            raise ValueError(f"{path}: not a state dict that torch.load(weights_only=True) can read ({exc})") from None
    for key in ("state_dict_ema", "model_ema", "state_dict", "model", "model_state"):  # timm's order, EMA first
        if isinstance(state, Mapping) and isinstance(state.get(key), Mapping):
            state = state[key]
            break
    if not isinstance(state, Mapping) or not all(isinstance(v, Tensor) for v in state.values()):
        raise ValueError(f"{path}: expected a state dict (names -> tensors), got {type(state).__name__}")
    if state and all(k.startswith("module.") for k in state):
        state = {k[len("module."):]: v for k, v in state.items()}
    return dict(state)


def _construct(spec: ModelSpec, defaults: Mapping[str, Any]) -> nn.Module:
    if spec.kind == "zoo":
        fn, kwargs = ZOO[spec.target]
        accepted = inspect.signature(fn).parameters
        return fn(**{**{k: v for k, v in defaults.items() if k in accepted}, **kwargs, **spec.kwargs})
    if spec.kind == "timm":
        try:
            timm = importlib.import_module("timm")
        except ImportError:
            raise ImportError(f"model {spec.text!r} needs timm (pip install timm); or name a constructor "
                              "package.module:function") from None
        return timm.create_model(spec.target, pretrained=False, **spec.kwargs)
    module_name, _, attr = spec.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"model {spec.text!r}: cannot import {module_name!r} ({exc})") from None
    fn = module
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise ValueError(f"model {spec.text!r}: {module_name!r} has no attribute {attr!r}")
        fn = getattr(fn, part)
    if not callable(fn):
        raise ValueError(f"model {spec.text!r}: {spec.target!r} is not callable")
    return fn(**spec.kwargs)


def model_family(model: nn.Module) -> str:
    """``"vit"`` (attention), ``"mlp"`` (token-mixing MLPs) or ``"cnn"``, read from the model's module types."""
    names = {type(m).__name__ for m in model.modules()}
    if any("Attention" in n or n in ("MHSA", "GPSA", "XCA", "ClassAttn") for n in names):
        return "vit"
    if any(n in ("TokenMixing", "MixerBlock", "SpatialGatingUnit", "SpatialGatingBlock", "ResBlock", "Affine")
           for n in names):
        return "mlp"
    return "cnn"


def zoo_leaf_types(model: nn.Module) -> tuple[type[nn.Module], ...]:
    """symkit's default leaf types and every module type of ``model`` from outside symkit (timm's, a user's) whose
    class name is in :data:`LEAF_NAMES`; symkit's own models keep their finer layers."""
    found = {type(m) for m in model.modules()
             if type(m).__name__ in LEAF_NAMES and not type(m).__module__.startswith("symkit.nn")}
    return tuple(dict.fromkeys((*_default_leaf_types(), *sorted(found, key=lambda t: t.__name__))))


@dataclass
class LoadedModel:
    """A model ready to measure (in ``eval()`` mode, on its device): the module (with :class:`Normalize` in front
    when it declares a normalisation), its spec, family and parameter count."""

    model: nn.Module
    spec: ModelSpec
    family: str
    n_params: int

    @property
    def label(self) -> str:
        return self.spec.label


def load_model(spec: str | ModelSpec, *, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32,
               defaults: Mapping[str, Any] | None = None, normalize: Literal["auto", "none"] = "auto") -> LoadedModel:
    """Build the model a spec names, load its local weights, and put it in ``eval()`` mode on ``device``.

    ``defaults``: keyword arguments for the built-in zoo's constructors (``in_channels``, ``num_classes``,
    ``image_size``, ``patch``; each passed to the constructors that take it); the spec's own arguments win.
    ``normalize="auto"`` puts a :class:`Normalize` in front when the model declares ``mean`` / ``std`` in
    ``pretrained_cfg`` or ``default_cfg``.
    """
    spec = parse_spec(spec) if isinstance(spec, str) else spec
    if normalize not in ("auto", "none"):
        raise ValueError(f"normalize must be 'auto' or 'none', got {normalize!r}")
    model = _construct(spec, dict(defaults or {}))
    if not isinstance(model, nn.Module):
        raise TypeError(f"model {spec.text!r}: the constructor returned {type(model).__name__}, not an nn.Module")
    if spec.weights is not None:
        state = load_state_dict(spec.weights)
        try:
            model.load_state_dict(state)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()
            raise ValueError(f"{spec.weights}: does not fit model {spec.text!r}: {' '.join(first[:3])}") from None
    for m in model.modules():  # timm attention: the written-out path, which forward-mode AD supports
        if hasattr(m, "fused_attn"):
            m.fused_attn = False
    family = model_family(model)
    n_params = sum(p.numel() for p in model.parameters())
    cfg = getattr(model, "pretrained_cfg", None) or getattr(model, "default_cfg", None)
    if normalize == "auto" and isinstance(cfg, Mapping) and cfg.get("mean") is not None and cfg.get("std") is not None:
        model = nn.Sequential(OrderedDict(normalize=Normalize(cfg["mean"], cfg["std"]), model=model))
    model = model.to(device=device, dtype=dtype).eval()
    return LoadedModel(model, spec, family, n_params)


# ------------------------------------------------------------------------------------------------ measurement
@dataclass
class ZooReport:
    """What :func:`evaluate_model` measured; :meth:`metrics` flattens it for a results store."""

    accuracy: float
    lee: dict[str, LEEResult]
    layerwise: LayerwiseResult | None
    eqt: EQTResult | None
    eqt_frac: EQTResult | None
    layer_eqt: LayerwiseEQT | None
    layer_eqt_frac: LayerwiseEQT | None
    seconds: dict[str, float] = field(default_factory=dict)

    def metrics(self) -> dict[str, Any]:
        """Flat metrics: ``accuracy``, ``lee_<t>`` / ``lee_<t>_stderr``, the EQ-T values (``eqt_db``, ``eqt_mse``,
        ``eqt_frac_db``, ...), and the layer-wise summaries (``layer_residual``, ``layer_top``, ...)."""
        out: dict[str, Any] = {"accuracy": self.accuracy}
        for name, r in self.lee.items():
            out[f"lee_{name}"] = r.value
            out[f"lee_{name}_stderr"] = r.stderr
        for key, r in (("eqt", self.eqt), ("eqt_frac", self.eqt_frac)):
            if r is not None:
                out[f"{key}_db"] = r.db if math.isfinite(r.db) else 999.0
                out[f"{key}_mse"] = r.mse
                out[f"{key}_mse_stderr"] = r.stderr
        lw = self.layerwise
        if lw is not None:
            top = int(lw.fractions.argmax())
            out["layer_top"] = lw.names[top]
            out["layer_top_frac"] = float(lw.fractions[top])
            out["layer_calls"] = len(lw.names)
            out["layer_sum_norms_over_norm"] = float(
                lw.sq_norms.clamp_min(0).sqrt().sum(0).mean()
                / lw.end_to_end.flatten(1).norm(dim=1).mean().clamp_min(1e-30))
            if lw.contributions is not None:
                out["layer_residual"] = lw.residual
        for key, r in (("layer_eqt", self.layer_eqt), ("layer_eqt_frac", self.layer_eqt_frac)):
            if r is not None and len(r.names):
                out[f"{key}_total"] = float(r.errors.sum())
                top = int(r.errors.argmax())
                exact = float(r.errors.sum()) <= EXACT_EQT  # every layer commutes with the shifts: no top layer
                out[f"{key}_top"] = "none" if exact else r.names[top]
                out[f"{key}_top_frac"] = 0.0 if exact else float(r.fractions[top])
        out.update({f"seconds_{k}": v for k, v in self.seconds.items()})
        return out


def evaluate_model(
    model: nn.Module,
    x: Tensor,
    y: Tensor | None = None,
    *,
    accuracy: float | None = None,
    transforms: Sequence[str] = ("translate_x", "translate_y", "rotate", "shear_x", "shear_y", "scale",
                                 "hyperbolic_rotate", "brightness"),
    layer_transform: str = "translate_x",
    layer_images: int = 20,
    layer_method: Literal["exact", "probes"] = "probes",
    num_probes: int = 100,
    eqt_shifts: int = 4,
    max_shift: float = 0.125,
    eqt_images: int | None = None,
    layer_eqt: bool = True,
    batch_size: int = 50,
    seed: int = 0,
) -> ZooReport:
    """Measure one classifier on images ``x`` (labels ``y``, or a given ``accuracy``): end-to-end LEE of the softmax
    probabilities per transform (Eq. 4.4, mean square, standard errors across images), layer-wise attribution of
    ``layer_transform`` on the first ``layer_images`` images (Eq. 4.6), end-to-end and layer-wise EQ-T / EQ-T_frac
    (translations up to ``max_shift`` of the image size; layer-wise on the layer images)."""
    model.eval()
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    if accuracy is None:
        if y is None:
            raise ValueError("evaluate_model needs labels y or a given accuracy")
        accuracy = top1_accuracy(model, x, y, batch_size)
    seconds["accuracy"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    lees = {t: lee(model, x, t, batch_size=batch_size) for t in transforms}
    seconds["lee"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    lw = None
    leaf = zoo_leaf_types(model)
    xl = x[:layer_images]
    if layer_images > 0:
        lw = layerwise_lie_derivative(model, xl, layer_transform, method=layer_method, num_probes=num_probes,
                                      leaf_types=leaf, seed=seed)
    seconds["layerwise"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    xe = x[:eqt_images] if eqt_images else x
    eqt_int = eqt(model, xe, fractional=False, max_shift=max_shift, n_shifts=eqt_shifts, seed=seed)
    eqt_frac = eqt(model, xe, fractional=True, max_shift=max_shift, n_shifts=eqt_shifts, seed=seed)
    seconds["eqt"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    leqt = leqt_frac = None
    if layer_eqt and layer_images > 0:
        leqt = layerwise_eqt(model, xl, fractional=False, max_shift=max_shift, n_shifts=eqt_shifts, seed=seed,
                             leaf_types=leaf)
        leqt_frac = layerwise_eqt(model, xl, fractional=True, max_shift=max_shift, n_shifts=eqt_shifts, seed=seed,
                                  leaf_types=leaf)
    seconds["layer_eqt"] = time.perf_counter() - t0
    return ZooReport(float(accuracy), lees, lw, eqt_int, eqt_frac, leqt, leqt_frac, seconds)
