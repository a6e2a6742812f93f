"""Risks as functions of the flat parameter vector, Hessian-vector products, and the stability of E (paper §4).

At A in E the augmented Hessian is block diagonal w.r.t. E + E^perp (Prop. 2, Lemma 6), and the linearised
augmented flow off E is ``d/dt A_perp = -Pi_perp H^aug Pi_perp A_perp`` (Eq. 27): E is unstable when the Hessian
restricted to E^perp has negative eigenvalues. :func:`perp_hessian_eigs` finds the smallest ones with Lanczos
(``scipy.sparse.linalg.eigsh``) on Hessian-vector products from ``torch.func``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from scipy.sparse.linalg import LinearOperator, eigsh
from torch.func import functional_call, grad, jvp

from symkit.actions.grid import Element
from symkit.dynamics.model import ProjectNet
from symkit.dynamics.training import Loss, _loss, _transform
from symkit.nn import parameter_like

__all__ = [
    "flat_params", "unflatten", "risk_fn", "hvp_fn", "project_flat", "lift_flat", "lift_bilinear", "project_bilinear",
    "perp_hessian_eigs",
]


def _names(model: ProjectNet) -> list[tuple[str, int, str]]:
    out = [(f"weights.{i}", i, "weight") for i in range(len(model.weights))]
    if model.biases is not None:
        out += [(f"biases.{i}", i, "bias") for i in range(len(model.biases))]
    return out


def flat_params(model: ProjectNet) -> torch.Tensor:
    """All parameters (``layer_params`` order) as one detached vector."""
    return torch.cat([p.detach().reshape(-1) for _, _, p in model.layer_params()])


def unflatten(model: ProjectNet, w: torch.Tensor) -> dict[str, torch.Tensor]:
    """The parameter dict (for ``torch.func.functional_call``) of a flat vector ``w``."""
    out, off = {}, 0
    params = dict(model.named_parameters())
    for name, _, _ in _names(model):
        shape = params[name].shape
        size = int(np.prod(shape))
        out[name] = w[off : off + size].reshape(shape)
        off += size
    if off != w.numel():
        raise ValueError(f"unflatten: vector of {w.numel()} entries, the model has {off} parameters")
    return out


def project_flat(model: ProjectNet, w: torch.Tensor) -> torch.Tensor:
    """Pi_E on the flat parameter vector (layer-wise, Lemma 2)."""
    d = unflatten(model, w)
    return torch.cat([model.project_tensor(i, kind, d[name]).reshape(-1) for name, i, kind in _names(model)])


def lift_flat(model: ProjectNet, w: torch.Tensor, g: Element) -> torch.Tensor:
    """rho_bar(g) on the flat parameter vector (Eq. 8)."""
    d = unflatten(model, w)
    return torch.cat([model.lift_tensor(i, kind, d[name], g).reshape(-1) for name, i, kind in _names(model)])


def lift_bilinear(model: ProjectNet, M: torch.Tensor, g: Element) -> torch.Tensor:
    """Eq. 14 on a bilinear form of L given as a (P, P) matrix: rho_bar(g) M rho_bar(g)^T (e.g. a Hessian)."""
    n = flat_params(model).numel()
    if tuple(M.shape) != (n, n):
        raise ValueError(f"lift_bilinear: expected a ({n}, {n}) matrix for this model, got {tuple(M.shape)}")
    left = torch.stack([lift_flat(model, col, g) for col in M.T], dim=1)  # rho_bar(g) M
    return torch.stack([lift_flat(model, row, g) for row in left], dim=0)  # (rho_bar(g) M) rho_bar(g)^T


def project_bilinear(model: ProjectNet, M: torch.Tensor) -> torch.Tensor:
    """Lemma 5: Pi^(x) M = (1/|G|) sum_g rho_bar(g) M rho_bar(g)^T, the projection on invariant bilinear forms."""
    elements = list(model.action_in.elements())
    return sum(lift_bilinear(model, M, g) for g in elements) / len(elements)


def risk_fn(
    model: ProjectNet, X: torch.Tensor, Y: torch.Tensor, loss: str | Loss = "mse", kind: str = "nominal"
) -> Callable[[torch.Tensor], torch.Tensor]:
    """w -> R(w) (Eq. 2), R^aug(w) with the exact orbit average of the data (Eq. 5) or R^eqv(w) = R(Pi_E w)."""
    if kind not in ("nominal", "augmented", "equivariant"):
        raise ValueError(f"risk kind must be 'nominal', 'augmented' or 'equivariant', got {kind!r}")
    fn = _loss(loss)

    def nominal(w: torch.Tensor, x: torch.Tensor = X, y: torch.Tensor = Y) -> torch.Tensor:
        return fn(functional_call(model, unflatten(model, w), (x,)), y)

    if kind == "nominal":
        return nominal
    if kind == "equivariant":
        return lambda w: nominal(project_flat(model, w))
    data = [_transform(model, X, Y, g) for g in model.action_in.elements()]

    def augmented(w: torch.Tensor) -> torch.Tensor:
        return sum(nominal(w, x, y) for x, y in data) / len(data)

    return augmented


def hvp_fn(risk: Callable[[torch.Tensor], torch.Tensor], w: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """v -> H(w) v with forward-over-reverse differentiation (``torch.func.jvp`` of ``torch.func.grad``)."""
    g = grad(risk)

    def hvp(v: torch.Tensor) -> torch.Tensor:
        return jvp(g, (w,), (v,))[1]

    return hvp


def perp_hessian_eigs(
    model: ProjectNet,
    X: torch.Tensor,
    Y: torch.Tensor,
    loss: str | Loss = "mse",
    k: int = 3,
    tol: float = 1e-8,
) -> np.ndarray:
    """The ``k`` smallest eigenvalues of Pi_perp H^aug Pi_perp on E^perp at the model's A (meant for A in E).

    E is moved out of the way by the shift ``c Pi_E`` with c above the spectrum, so the zero eigenvalues of E do not
    mask positive ones of E^perp. Eigenvalues below 0 mean E is unstable under the augmented flow (Eq. 27).
    """
    w = flat_params(model).to(torch.float64)
    dtype = parameter_like(model)[1]
    if dtype != torch.float64:
        raise TypeError(f"perp_hessian_eigs needs a float64 model for Lanczos accuracy, got {dtype}")
    hvp = hvp_fn(risk_fn(model, X, Y, loss, "augmented"), w)
    n = w.numel()

    def perp(v: torch.Tensor) -> torch.Tensor:
        return v - project_flat(model, v)

    def op(shift: float) -> LinearOperator:
        def mv(x: np.ndarray) -> np.ndarray:
            v = torch.as_tensor(np.asarray(x).reshape(-1), dtype=torch.float64, device=w.device)
            pv = perp(v)
            out = perp(hvp(pv)) + shift * (v - pv)
            return out.cpu().numpy()

        return LinearOperator((n, n), matvec=mv, dtype=np.float64)

    big = float(eigsh(op(0.0), k=1, which="LM", tol=1e-3, return_eigenvectors=False)[0])
    shift = 2.0 * abs(big) + 1.0
    vals = eigsh(op(shift), k=k, which="SA", tol=tol, return_eigenvectors=False)
    return np.sort(vals)
