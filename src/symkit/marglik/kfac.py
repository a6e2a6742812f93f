"""Kronecker-factored GGN (KFAC) for the relaxed layers, computed with recorded layer inputs and output gradients.

For a weight ``W ∈ R^{G×D}`` applied as ``out_{n,r} = W a_{n,r}`` at ``R`` weight-sharing positions ``r`` (pixels for
a convolution, input channels for the θ₂ factor of F-FC, output channels for θ₁), the GGN block
``Σ_n J_nᵀ Λ_n J_n`` is approximated by the "expand" rule (paper §5, App. C.1; Grosse & Martens 2016):

    H_W ≈ [Σ_{n,r,k} g_{n,r,k} g_{n,r,k}ᵀ] ⊗ [1/(NR) Σ_{n,r} a_{n,r} a_{n,r}ᵀ] = G ⊗ A,

in the row-major order of ``W.flatten()``. Here ``g_{n,r,k} = ∂f_n/∂out_{n,r}ᵀ v_{n,k}`` with ``Σ_k v_k v_kᵀ = Λ_n``
(for the softmax, ``v_k = √p_k (e_k − p)``). It is exact for one datum when ``R = 1``. Sparse (anchor) layers
record ``a`` already projected on their basis Φ, so their input factor is ``ΦAΦᵀ`` (App. C.2); the output-side
anchor layer of S-FC records its anchor-space output, which projects ``G``. A bias is a block ``G`` of its own.

The paper's authors used a patched ASDL for this; the public ``asdfghjkl`` 0.1a5 (module ``asdl``) installs beside
torch 2.13 but its convolution factor ignores ``padding_mode='circular'`` and it has no rule for the factored or
sparse layers, so the factors are computed here.

Each factor ``G`` costs one ordinary backward pass per column ``v_k`` (``K`` exact, ``S`` sampled), each folded into
``G`` at once, as KFAC does with grad-output hooks; ``A`` is formed once per batch from the recorded inputs. With
``differentiable=True`` the passes keep their graph (``create_graph``), so ``A``, ``G``, their eigenvalues and the
NLL are differentiable in quantities the network depends on besides θ, such as the anchor length-scales ω
(:mod:`symkit.marglik.omega`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from symkit._checks import check_int
from symkit.nn.relaxed.record import Site, recording, torch_layer_rules

LIKELIHOODS = ("classification", "regression")


@dataclass
class KronBlock:
    """Curvature block ``G ⊗ A`` of one parameter tensor; ``A`` is block-diagonal ``(B, d, d)`` or ``None`` (=1)."""

    name: str
    param: torch.Tensor
    G: torch.Tensor
    A: torch.Tensor | None
    eig_G: torch.Tensor | None = None
    eig_A: torch.Tensor | None = None
    rows: int = 0  # the (datum, position) pairs averaged in A

    @property
    def numel(self) -> int:
        return self.param.numel()

    def decompose(self) -> None:
        """Eigenvalues of both factors (clamped at 0); those of ``G ⊗ A`` are all products ``λ_G λ_A``."""
        self.eig_G = torch.linalg.eigvalsh(self.G.double()).clamp_min(0.0)
        self.eig_A = (torch.linalg.eigvalsh(self.A.double()).clamp_min(0.0).flatten() if self.A is not None
                      else torch.ones(1, dtype=torch.float64, device=self.G.device))

    def eigenvalues(self) -> torch.Tensor:
        if self.eig_G is None:
            self.decompose()
        return torch.outer(self.eig_G, self.eig_A).flatten()

    def dense(self) -> torch.Tensor:
        """The block as a dense matrix in ``param.flatten()`` order (for tests on small layers)."""
        if self.A is None:
            return self.G.clone()
        a = torch.block_diag(*self.A)
        return torch.kron(self.G, a)


@dataclass
class KronCurvature:
    """KFAC-GGN of a model on a data set: blocks, data size ``N`` and the summed negative log-likelihood (a float, or
    a tensor in the graph for a differentiable fit)."""

    blocks: list[KronBlock]
    n_data: int
    nll: float | torch.Tensor
    extras: dict = field(default_factory=dict)

    def block(self, name: str) -> KronBlock:
        for b in self.blocks:
            if b.name == name:
                return b
        raise KeyError(f"no curvature block {name!r}; blocks: {', '.join(b.name for b in self.blocks)}")


def _loss_factor(f: torch.Tensor, likelihood: str, sigma_noise: float, mc_samples: int | None = None,
                 generator: torch.Generator | None = None, differentiable: bool = False) -> torch.Tensor:
    """``V`` of shape ``(S, N, K)`` with ``Σ_s V[s,n] V[s,n]ᵀ = Λ_n`` (negative log-likelihood Hessian in ``f``).

    Exact (``S = K``) unless ``mc_samples`` is given for classification: then ``V[s,n] = (p_n − e_ŷ)/√S`` with
    ``ŷ ~ Cat(p_n)``, an unbiased estimate of ``Λ_n = diag(p) − ppᵀ`` (KFAC-MC) at ``S/K`` of the cost. With
    ``differentiable`` the factor stays in the graph of ``f`` (the sampled labels are fixed).
    """
    n, k = f.shape
    eye = torch.eye(k, dtype=f.dtype, device=f.device)
    if likelihood == "regression":
        return (eye / sigma_noise).unsqueeze(1).expand(k, n, k)
    p = torch.softmax(f if differentiable else f.detach(), dim=-1)
    if mc_samples is not None:
        # drawn on the CPU with the CPU generator, then moved: the same samples on every device
        yhat = torch.multinomial(p.detach().cpu(), mc_samples, replacement=True, generator=generator).T
        return (p.unsqueeze(0) - eye[yhat.to(f.device)]) / mc_samples**0.5
    return p.sqrt().T.unsqueeze(-1) * (eye.unsqueeze(1) - p.unsqueeze(0))


def _nll(f: torch.Tensor, y: torch.Tensor, likelihood: str, sigma_noise: float) -> torch.Tensor:
    if likelihood == "classification":
        return F.cross_entropy(f, y, reduction="sum")
    r = (f - y.reshape(f.shape)) / sigma_noise
    return 0.5 * (r**2).sum() + f.numel() * (math.log(sigma_noise) + 0.5 * math.log(2 * math.pi))


def _gram(rows: torch.Tensor) -> torch.Tensor:
    """``Σ_{n,r} g_{n,r} g_{n,r}ᵀ`` of rows ``(N, R, G)``: batched over ``n`` when ``R`` is large (a convolution's
    rows are a transposed view, read in place), else one product of the flattened rows."""
    if rows.shape[1] >= 8:
        return torch.bmm(rows.transpose(1, 2), rows).sum(0)
    flat = rows.reshape(-1, rows.shape[-1])
    return flat.T @ flat


def _input_gram(site: Site, a: torch.Tensor) -> torch.Tensor:
    """``Σ_{n,r} a_{n,r} a_{n,r}ᵀ``, as ``(1, D, D)`` or, for a block-diagonal site, ``(R, D/R, D/R)``."""
    if site.block_diag:
        return torch.einsum("nrd,nre->rde", a, a)
    flat = a.reshape(-1, a.shape[-1])
    return (flat.T @ flat).unsqueeze(0)


@contextlib.contextmanager
def _torch_layer_inputs(model: nn.Module, store: dict[int, torch.Tensor]) -> Iterator[None]:
    """Keep the input of every ``nn.Linear`` / ``nn.Conv2d`` call by the id of its output (their recorded rows are
    detached; a differentiable fit rebuilds them from these)."""
    def hook(module: nn.Module, inputs: tuple, out: torch.Tensor) -> None:
        store[id(out)] = inputs[0]

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _rows_in_graph(site: Site, x: torch.Tensor) -> torch.Tensor:
    """The rows ``a`` of an ``nn.Linear`` / ``nn.Conv2d`` site rebuilt from its input ``x``, in the graph."""
    m = site.module
    if isinstance(m, nn.Linear):
        return x.reshape(x.shape[0], -1, x.shape[-1])
    padding: object = m.padding
    if m.padding_mode != "zeros":
        x, padding = F.pad(x, m._reversed_padding_repeated_twice, mode=m.padding_mode), 0
    return F.unfold(x, m.kernel_size, dilation=m.dilation, padding=padding, stride=m.stride).transpose(1, 2)


@dataclass
class BatchFactors:
    """One batch's share of a KFAC fit: the summed NLL and, per recorded site that ``f`` depends on,
    ``Σ a aᵀ`` (``SA``), the number of rows in it and ``Σ_k Σ g gᵀ`` (``SG``)."""

    nll: torch.Tensor
    n_data: int
    sites: list[tuple[Site, torch.Tensor, int, torch.Tensor]]


def batch_factors(model: nn.Module, x: torch.Tensor, y: torch.Tensor, likelihood: str = "classification",
                  sigma_noise: float = 1.0, mc_samples: int | None = None, generator: torch.Generator | None = None,
                  differentiable: bool = False) -> BatchFactors:
    """The KFAC sums of one batch (App. C): one backward pass per column of ``V`` (:func:`_loss_factor`).

    With ``differentiable`` everything stays in the graph (``create_graph``), else it is detached.
    """
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
    inputs: dict[int, torch.Tensor] = {}
    with (recording() as rec, torch_layer_rules(model),
          _torch_layer_inputs(model, inputs) if differentiable else contextlib.nullcontext()):
        f = model(x)
    if f.dim() != 2:
        raise ValueError(f"fit_kfac: the model must return (N, K) outputs, got {tuple(f.shape)}")
    if not rec.sites:
        raise ValueError(f"fit_kfac: {type(model).__name__} has no layers with a curvature rule (nn.Linear, "
                         "nn.Conv2d, or the symkit.nn.relaxed paths)")
    nll = _nll(f if differentiable else f.detach(), y, likelihood, sigma_noise)
    V = _loss_factor(f, likelihood, sigma_noise, mc_samples, generator, differentiable)
    outs = [s.out for s in rec.sites]
    parts: list[list | None] = []
    for k in range(V.shape[0]):
        grads = torch.autograd.grad(f, outs, grad_outputs=V[k], retain_graph=differentiable or k + 1 < V.shape[0],
                                    create_graph=differentiable, allow_unused=True)
        if k == 0:  # the sites that f depends on, with their input sums
            parts = []
            for site, g in zip(rec.sites, grads):
                if g is None:
                    parts.append(None)
                    continue
                a = site.a
                if not differentiable:
                    a = a.detach()
                elif id(site.out) in inputs and isinstance(site.module, (nn.Linear, nn.Conv2d)):
                    a = _rows_in_graph(site, inputs[id(site.out)])
                parts.append([site, _input_gram(site, a), a.shape[0] * a.shape[1], 0.0])
        for part, g in zip(parts, grads):
            if part is not None:
                part[3] = part[3] + _gram(part[0].rows(g if differentiable else g.detach()))
    return BatchFactors(nll, x.shape[0], [tuple(p) for p in parts if p is not None])


def fit_kfac(model: nn.Module, batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
             likelihood: str = "classification", sigma_noise: float = 1.0, mc_samples: int | None = None,
             seed: int = 0, differentiable: bool = False) -> KronCurvature:
    """KFAC-GGN of ``model`` over ``batches`` of ``(x, y)`` (App. C), plus the summed NLL at the current θ.

    ``mc_samples=None`` uses the exact ``Λ`` (one backward pass per output); an int uses that many sampled labels
    per datum (see :func:`_loss_factor`). Parameters that no recorded layer applies (e.g. anchor length-scales) get
    no block. ``differentiable=True`` keeps factors, eigenvalues and NLL in the graph (memory of all batches; see
    :func:`symkit.marglik.omega.omega_gradient` for the two-pass version).
    """
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
    if mc_samples is not None:
        check_int("mc_samples (None or an int)", mc_samples, 1)
    gen = torch.Generator().manual_seed(seed)
    names = {id(p): n for n, p in model.named_parameters()}
    acc: dict[int, dict] = {}
    n_data, nll = 0, 0.0
    for x, y in batches:
        part = batch_factors(model, x, y, likelihood, sigma_noise, mc_samples, gen, differentiable)
        nll = nll + (part.nll if differentiable else float(part.nll))
        n_data += part.n_data
        for site, sa, n_rows, sg in part.sites:
            entry = acc.setdefault(id(site.weight), {"site": site, "A": 0.0, "G": 0.0, "rows": 0})
            entry["A"] = entry["A"] + sa
            entry["G"] = entry["G"] + sg
            entry["rows"] += n_rows
    blocks = []
    for entry in acc.values():
        site = entry["site"]
        A = entry["A"] / entry["rows"]
        blocks.append(KronBlock(names.get(id(site.weight), site.name), site.weight, entry["G"], A,
                                rows=entry["rows"]))
        if site.bias is not None:
            blocks.append(KronBlock(names.get(id(site.bias), site.name + ".bias"), site.bias, entry["G"], None))
    for b in blocks:
        b.decompose()
    return KronCurvature(blocks, n_data, nll)


def exact_ggn(model: nn.Module, x: torch.Tensor, params: list[torch.Tensor],
              likelihood: str = "classification", sigma_noise: float = 1.0) -> torch.Tensor:
    """Exact GGN ``Σ_n J_nᵀ Λ_n J_n`` over ``params`` (dense; for tests on small models)."""
    f = model(x)
    n, k = f.shape
    rows = []
    for i in range(n):
        for j in range(k):
            gr = torch.autograd.grad(f[i, j], params, retain_graph=True, allow_unused=True)
            rows.append(torch.cat([(torch.zeros_like(p) if g is None else g).flatten() for g, p in zip(gr, params)]))
    J = torch.stack(rows).view(n, k, -1)
    V = _loss_factor(f, likelihood, sigma_noise)  # (K, N, K)
    lam = torch.einsum("kna,knb->nab", V, V)
    return torch.einsum("nap,nab,nbq->pq", J, lam, J)
