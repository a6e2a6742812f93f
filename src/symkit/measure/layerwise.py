"""Layer-wise attribution of the Lie derivative (thesis Sec. 4.4, Eq. 4.5-4.6, App. A.3.1.2-3).

For a network ``NN = f_N o ... o f_1`` the chain rule splits the end-to-end Lie derivative into per-layer terms

    L_X(NN)(x) = sum_i C_i,      C_i = dF_{N:i+1} (L_X f_i)(h_{i-1})                                    (Eq. 4.6)

where ``L_X f_i`` is the layer's own Lie derivative at its input (each intermediate tensor carries its own action:
images and token grids transform, other tensors are invariant) and ``dF_{N:i+1}`` is the Jacobian of the rest of
the network. Two ways to get ``C_i``:

* ``method="exact"``: one forward-mode pass per layer call, injecting ``L_X f_i`` as the tangent of the layer's
  output. Returns the vectors ``C_i``; their sum equals the end-to-end Lie derivative when every operation outside
  the leaf modules is equivariant (residual additions, reshapes), and the residual is reported.
* ``method="probes"``: Hutchinson-style ``||C_i||^2 = E_z (z^T C_i)^2`` with ``z ~ N(0, I)`` over the output; every
  layer's ``z^T C_i`` comes from one backward pass per probe (a zero scalar ``s_i`` is added as ``s_i L_X f_i`` to
  each leaf output and ``d(z^T NN)/d s_i`` read off), so the cost does not grow with the number of layers.

Leaves are modules without children, plus whole modules of the types in ``leaf_types`` (attention and token mixing,
which do non-equivariant work outside their submodules). Repeated calls of one module get one entry each
(``name#k``); ``inplace`` flags are switched off during the measurement; ``skip`` removes modules (default:
dropout). Put the model in ``eval()`` mode: leaves are re-run on transformed inputs, which would update batch-norm
statistics in training mode.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
import torch.autograd.forward_ad as fwAD
from torch import Tensor, nn

from symkit.actions.flows import ImageFlow, get_transform
from symkit.measure._fwad import LinearLayerTangents
from symkit.measure.lie import OutputSpec, act_tangent, lie_derivative, tensor_kind, with_scores
from symkit.progress import progress_bar
from symkit.stats import standard_error

DEFAULT_SKIP: tuple[type[nn.Module], ...] = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout)


def _default_leaf_types() -> tuple[type[nn.Module], ...]:
    from symkit.nn.vision import Attention, TokenMixing

    return (Attention, TokenMixing, nn.MultiheadAttention)


@dataclass
class LayerwiseResult:
    """Per-call attributions of one transform's Lie derivative.

    ``sq_norms[i, b]`` is ``||C_i||^2`` for sample ``b`` (exact, or the probe estimate with ``sq_stderr``);
    ``contributions`` holds the vectors ``C_i`` (exact method only); ``end_to_end`` is ``L_X NN``.
    """

    names: list[str]
    types: list[str]
    sq_norms: Tensor
    end_to_end: Tensor
    transform: str
    method: str
    contributions: Tensor | None = None
    sq_stderr: Tensor | None = None
    num_probes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def norms(self) -> Tensor:
        """``||C_i||`` averaged over samples, (num_layers,)."""
        return self.sq_norms.clamp_min(0).sqrt().mean(1)

    @property
    def fractions(self) -> Tensor:
        """Each layer's share of the summed norms ``sum_i ||C_i||`` (thesis Fig. 4.4)."""
        n = self.norms
        total = n.sum()
        return n / total if total > 0 else torch.zeros_like(n)

    @property
    def residual(self) -> float:
        """``||L NN - sum_i C_i|| / ||L NN||`` (exact method): 0 when every non-leaf operation is equivariant."""
        if self.contributions is None:
            return float("nan")
        diff = (self.end_to_end - self.contributions.sum(0)).norm()
        scale = self.end_to_end.norm()
        return float(diff / scale) if scale > 0 else float(diff)

    def table(self) -> list[dict[str, Any]]:
        """One row per layer call: name, type, mean norm, fraction, and (probes) the standard error of ``||C_i||^2``."""
        rows = []
        frac = self.fractions
        for i, (name, kind) in enumerate(zip(self.names, self.types)):
            row: dict[str, Any] = {
                "layer": name,
                "type": kind,
                "norm": float(self.norms[i]),
                "sq_norm": float(self.sq_norms[i].mean()),
                "fraction": float(frac[i]),
            }
            if self.sq_stderr is not None:
                row["sq_norm_stderr"] = float(self.sq_stderr[i].pow(2).sum().sqrt() / self.sq_stderr.shape[1])
            rows.append(row)
        return rows


def find_leaves(
    model: nn.Module,
    leaf_types: Sequence[type[nn.Module]] | None = None,
    skip: Sequence[type[nn.Module] | str] = DEFAULT_SKIP,
) -> list[tuple[str, nn.Module]]:
    """The (name, module) pairs that attribution hooks, in registration order (see the module docstring)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"layer-wise attribution needs an nn.Module, got {type(model).__name__}")
    leaf_types = tuple(_default_leaf_types() if leaf_types is None else leaf_types)
    skip_types = tuple(s for s in skip if isinstance(s, type))
    skip_names = {s for s in skip if isinstance(s, str)}
    leaves: list[tuple[str, nn.Module]] = []

    def visit(name: str, m: nn.Module) -> None:
        if name in skip_names or isinstance(m, skip_types):
            return
        children = list(m.named_children())
        if not children or isinstance(m, leaf_types):
            leaves.append((name or type(m).__name__, m))
            return
        for child_name, child in children:
            visit(f"{name}.{child_name}" if name else child_name, child)

    visit("", model)
    return leaves


@contextlib.contextmanager
def _no_inplace(model: nn.Module) -> Iterator[None]:
    flipped = [m for m in model.modules() if getattr(m, "inplace", False) is True]
    for m in flipped:
        m.inplace = False
    try:
        yield
    finally:
        for m in flipped:
            m.inplace = True


def layer_lie_derivative(module: Callable[..., Tensor], args: tuple, flow: ImageFlow) -> Tensor | None:
    """``L_X f(h) = d/dt rho_out(t)^{-1} f(rho_in(t) h)`` for one layer (actions read from the tensors' shapes).

    ``None`` when input and output are both invariant (the Lie derivative is then zero).
    """
    kinds_in = [tensor_kind(a) if isinstance(a, Tensor) else None for a in args]
    out = module(*args)
    if not isinstance(out, Tensor):
        raise TypeError(
            f"layer {type(module).__name__} returned {type(out).__name__}; layer-wise attribution needs single-tensor "
            "outputs: pass it in skip=... or a parent type in leaf_types=..."
        )
    kind_out = tensor_kind(out)
    if kind_out == "invariant" and all(k in (None, "invariant") for k in kinds_in):
        return None

    with fwAD.dual_level(), LinearLayerTangents():
        duals = []
        for a, k in zip(args, kinds_in):
            tan = act_tangent(flow, a, k) if k is not None else None
            duals.append(fwAD.make_dual(a, tan) if tan is not None else a)
        y = module(*duals)
        tangent = fwAD.unpack_dual(y).tangent
    lie = torch.zeros_like(out) if tangent is None else tangent
    back = act_tangent(flow, out, kind_out)
    return lie if back is None else lie - back


class _Hooks:
    """Forward hooks on the leaves; ``mode`` decides what they do on each call."""

    def __init__(self, leaves: list[tuple[str, nn.Module]], flow: ImageFlow) -> None:
        self.leaves = leaves
        self.flow = flow
        self.mode = "off"
        self.calls: list[tuple[str, str]] = []
        self.lies: list[Tensor | None] = []
        self.counter = 0
        self.inject: int | None = None
        self.scalars: list[Tensor | None] = []
        self.handles: list[Any] = []
        self.busy = False

    def __enter__(self) -> _Hooks:
        for name, m in self.leaves:
            self.handles.append(m.register_forward_hook(self._make(name), with_kwargs=False))
        return self

    def __exit__(self, *exc: object) -> None:
        for h in self.handles:
            h.remove()

    def start(self, mode: str, inject: int | None = None) -> None:
        self.mode, self.counter, self.inject = mode, 0, inject
        if mode == "probes":
            self.scalars = []

    def _make(self, name: str) -> Callable:
        def hook(module: nn.Module, args: tuple, out: Any) -> Any:
            if self.busy or self.mode == "off":
                return None
            i = self.counter
            self.counter += 1
            if self.mode == "record":
                self.busy = True
                try:
                    detached = tuple(a.detach() if isinstance(a, Tensor) else a for a in args)
                    with torch.no_grad():
                        lie = layer_lie_derivative(module, detached, self.flow)
                finally:
                    self.busy = False
                k = sum(1 for n, _ in self.calls if n.split("#")[0] == name)
                self.calls.append((f"{name}#{k}" if k else name, type(module).__name__))
                self.lies.append(lie)
                return None
            if i >= len(self.lies):
                raise RuntimeError(
                    f"layer call {i} ({name}) was not seen when recording: the forward is not repeatable"
                )
            lie = self.lies[i]
            if self.mode == "exact":
                if i == self.inject and lie is not None:
                    return fwAD.make_dual(out, lie)
                return None
            if self.mode == "probes":
                if lie is None:
                    self.scalars.append(None)
                    return None
                s = torch.zeros((out.shape[0],) + (1,) * (out.ndim - 1), dtype=out.dtype, device=out.device,
                                requires_grad=True)
                self.scalars.append(s)
                return out + s * lie
            return None

        return hook


def layerwise_lie_derivative(
    model: nn.Module,
    x: Tensor,
    transform: str | ImageFlow,
    *,
    method: Literal["exact", "probes"] = "exact",
    num_probes: int = 100,
    on: Literal["probs", "logits"] = "probs",
    output: OutputSpec = "auto",
    leaf_types: Sequence[type[nn.Module]] | None = None,
    skip: Sequence[type[nn.Module] | str] = DEFAULT_SKIP,
    seed: int = 0,
    probe_batch: int = 1,
) -> LayerwiseResult:
    """Attribute the Lie derivative of ``model`` at ``x`` to its layers (Eq. 4.6); see the module docstring.

    ``on="probs"`` attributes the softmax probabilities (the thesis's choice), ``"logits"`` the raw output.
    ``num_probes`` (probe method): Gaussian probes per image (the thesis uses 100). ``probe_batch > 1`` sends that
    many probes through one vmapped backward pass (falls back to one pass per probe if the model does not support
    it); it helps small attention models but is much slower for convolutions on CPU, hence the default of 1.
    """
    if method not in ("exact", "probes"):
        raise ValueError(f"method must be 'exact' or 'probes', got {method!r}")
    if not isinstance(num_probes, int) or num_probes < 2:
        raise ValueError(f"num_probes must be an int >= 2, got {num_probes!r}")
    flow = get_transform(transform)
    leaves = find_leaves(model, leaf_types, skip)
    f = with_scores(model, on)
    with _no_inplace(model), _Hooks(leaves, flow) as hooks:
        with torch.no_grad():
            end_to_end = lie_derivative(f, x, flow, output=output)
            hooks.start("record")
            y0 = f(x)
        n = len(hooks.lies)
        B = x.shape[0]
        if method == "exact":
            contributions = torch.zeros((n, *y0.shape), dtype=y0.dtype, device=y0.device)
            bar = progress_bar(range(n), desc="layers")
            with torch.no_grad():
                for i in bar:
                    if hooks.lies[i] is None:
                        continue
                    hooks.start("exact", inject=i)
                    with fwAD.dual_level(), LinearLayerTangents():
                        y = f(x)
                        tangent = fwAD.unpack_dual(y).tangent
                    if tangent is not None:
                        contributions[i] = tangent
            hooks.start("off")
            sq = contributions.reshape(n, B, -1).pow(2).sum(-1)
            return LayerwiseResult(
                [c[0] for c in hooks.calls],
                [c[1] for c in hooks.calls],
                sq,
                end_to_end,
                flow.name,
                "exact",
                contributions=contributions,
            )
        gen = torch.Generator(device=x.device).manual_seed(seed)
        with torch.enable_grad():
            hooks.start("probes")
            y = f(x)
            hooks.start("off")
            live = [(i, s) for i, s in enumerate(hooks.scalars) if s is not None]
            samples = torch.zeros((num_probes, n, B), dtype=y.dtype, device=y.device)
            zs = torch.randn((num_probes, *y.shape), generator=gen, dtype=y.dtype, device=y.device)
            scalars = [s for _, s in live]
            chunks = list(range(0, num_probes if live else 0, max(1, probe_batch)))
            bar = progress_bar(chunks, desc="probes")
            batched = probe_batch > 1
            for start in bar:
                stop = min(start + max(1, probe_batch), num_probes)
                grads = None
                if batched:
                    try:  # vmap over the backward pass: all probes of the chunk at once
                        grads = torch.autograd.grad(
                            y, scalars, zs[start:stop], retain_graph=True, allow_unused=True, is_grads_batched=True
                        )
                    except (RuntimeError, NotImplementedError):
                        batched = False
                if grads is not None:
                    for (i, _), g in zip(live, grads):
                        if g is not None:
                            samples[start:stop, i] = g.reshape(stop - start, B).detach()
                    continue
                for p in range(start, stop):
                    grads = torch.autograd.grad(y, scalars, zs[p], retain_graph=True, allow_unused=True)
                    for (i, _), g in zip(live, grads):
                        if g is not None:
                            samples[p, i] = g.reshape(B).detach()
    sq_samples = samples.pow(2)
    return LayerwiseResult(
        [c[0] for c in hooks.calls],
        [c[1] for c in hooks.calls],
        sq_samples.mean(0),
        end_to_end,
        flow.name,
        "probes",
        sq_stderr=torch.as_tensor(standard_error(sq_samples, axis=0), dtype=sq_samples.dtype,
                                  device=sq_samples.device),
        num_probes=num_probes,
    )
