"""Equivariance assertions for users' own models and weights.

:func:`assert_equivariant` checks a function f at its inputs x (``inputs=``, shape (batch, rep_in.size); by
default 4 standard normal rows drawn with ``seed``), or a weight matrix W, against every discrete generator of the
group, ``n`` sampled elements (or the ``elements`` given) and every Lie algebra generator. Equivariance under the
generators is equivariance under the group they generate; the samples check elements far from the identity too.

The error of a group element g is relative at every output scale,

    err(g) = rms(a - b) / (rms(a) + rms(b)),   a = f(rho_in(g) x),  b = rho_out(g) f(x)   (W: rho_out(g) W, W rho_in(g))

(0 when both are exactly zero), and the check passes when

    err(g) <= tol * k(g),   k(g) = sqrt(||rho_in(g)||_2 ||rho_out(g)||_2)  (at least 1).

k(g) is how much the group element amplifies rounding: 1 for orthogonal and permutation groups, ``|g|^p`` on
rank-p tensors of Sp(n), SL(n) or a Lorentz boost. ``tol`` defaults to ``64 * eps`` of the output's dtype for
functions (7.6e-6 in float32, 1.4e-14 in float64) and to 1e-9 (float64) or ``64 * eps`` (float32) for weight
matrices. Measured on EMLPs of every built-in group (docs/core.md, "Checking equivariance"), a true float32
model stays below ``13 * eps * k(g)`` and a 0.1% non-equivariant part is above ``175 * eps * k(g)``.

A Lie algebra generator A is checked through the derivative, ``a = J_f(x) drho_in(A) x`` against
``b = drho_out(A) f(x)`` (W: ``W drho_in(A)`` against ``drho_out(A) W``), with the error of
:func:`derivative_error`, relative to ``rms(f(x)) (||drho_in(A)||_2 + ||drho_out(A)||_2)`` as well as to the two
sides (both vanish for an invariant output); it passes at ``tol``. J_f v is exact (forward mode, else a double
vector-Jacobian product) for torch modules and for functions given tensor inputs; other functions get central
differences with a Richardson step, which pass at ``max(tol, 8 sqrt(eps))``. Measured on the same float32 EMLPs
(and on invariant outputs, 2V -> Scalar), the exact derivative errors of a true model stay below ``8 * eps`` and the
largest of a 0.1% non-equivariant part is above ``2700 * eps``; finite differences reach ``1100 * eps`` on true
float32 models. Non-finite values always fail, and the failure names the worst check: the largest err / (tol k).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from symkit.reps.core import Rep
from symkit.reps.errors import _check_weight, element_scale, nanmax, relative_error

__all__ = [
    "action_errors", "assert_equivariant", "assert_invariant_basis", "default_tolerance", "derivative_error",
    "finite_difference_lie_derivative", "function_equivariance_error", "function_errors",
]

#: tolerance per unit of the element scale k(g), in units of the dtype's machine epsilon
EPS_FACTOR = 64


def default_tolerance(dtype: Any, weights: bool = False) -> float:
    """``64 * eps(dtype)``; weight matrices in float64 get 1e-9 (bases from the iterative solvers are that exact)."""
    if hasattr(dtype, "is_floating_point"):  # a torch dtype
        dtype = _np_dtype(dtype)
    eps = float(np.finfo(np.dtype(dtype)).eps)
    if weights and eps < 1e-15:
        return 1e-9
    return EPS_FACTOR * eps


def _np_dtype(torch_dtype: Any) -> np.dtype:
    import torch

    return torch.empty((), dtype=torch_dtype).numpy().dtype if torch_dtype != torch.bfloat16 else np.dtype(np.float32)


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


class _Caller:
    """f seen from the checks: it takes float64 numpy arrays (the transformed inputs) and returns numpy outputs,
    handing f numpy arrays or tensors of the kind it was given (``kind``: "numpy" or "torch")."""

    def __init__(self, f: Callable, inputs: Any) -> None:
        self.f = f
        self.kind, self.dtype, self.device = "numpy", np.dtype(np.float64), None
        try:
            import torch
        except ImportError:  # pragma: no cover - torch is a dependency
            torch = None
        if torch is not None and isinstance(f, torch.nn.Module):
            p = next(iter(f.parameters()), None)
            if p is None:
                p = next(iter(f.buffers()), None)
            if p is not None and p.device.type == "meta":
                raise ValueError("assert_equivariant: the module is on the meta device and computes no values")
            like = p if p is not None and p.is_floating_point() else inputs if _is_tensor(inputs) else None
            self.kind = "torch"
            self.dtype = like.dtype if like is not None else torch.get_default_dtype()
            self.device = p.device if p is not None else inputs.device if _is_tensor(inputs) else torch.device("cpu")
        elif _is_tensor(inputs):
            self.kind, self.dtype, self.device = "torch", inputs.dtype, inputs.device
        elif inputs is not None:
            self.dtype = np.asarray(inputs).dtype

    @property
    def eps(self) -> float:
        """Machine epsilon of the dtype f receives."""
        return float(np.finfo(_np_dtype(self.dtype) if self.kind == "torch" else self.dtype).eps)

    def arg(self, z: np.ndarray) -> Any:
        """z as f takes it (complex where a complex rep made it so)."""
        z = np.asarray(z)
        if self.kind == "numpy":
            return z.astype(np.result_type(self.dtype, np.complex64) if np.iscomplexobj(z) else self.dtype, copy=False)
        import torch

        dtype = self.dtype
        if np.iscomplexobj(z) and not dtype.is_complex:
            dtype = torch.complex128 if dtype == torch.float64 else torch.complex64
        return torch.as_tensor(z, dtype=dtype, device=self.device)

    def __call__(self, z: np.ndarray) -> np.ndarray:
        if self.kind == "numpy":
            return _to_numpy(self.f(self.arg(z)))
        import torch

        with torch.no_grad():
            return _to_numpy(self.f(self.arg(z)))

    def jvp(self, z: np.ndarray, v: np.ndarray) -> np.ndarray | None:
        """J_f(z) v exactly (forward mode, else a double vector-Jacobian product), or None when f gives no
        derivative (numpy functions, detached outputs, operations without derivative rules)."""
        if self.kind != "torch":
            return None
        import torch
        import torch.autograd.forward_ad as fwAD

        x, t = self.arg(z), self.arg(v)
        try:
            with torch.no_grad(), fwAD.dual_level():
                y = self.f(fwAD.make_dual(x, t))
                tangent = fwAD.unpack_dual(y).tangent if isinstance(y, torch.Tensor) else None
            if tangent is not None:
                return _to_numpy(tangent)
        except Exception:  # noqa: BLE001 - no forward-mode rule: try reverse mode
            pass
        try:
            with torch.enable_grad():
                xg = x.detach().requires_grad_(True)
                y = self.f(xg)
                if not isinstance(y, torch.Tensor) or not y.requires_grad:
                    return None
                u = torch.zeros_like(y, requires_grad=True)
                (g,) = torch.autograd.grad(y, xg, u, create_graph=True)
                if not g.requires_grad:
                    return np.zeros(y.shape)  # f is constant in its input
                (out,) = torch.autograd.grad(g, u, t)
            return _to_numpy(out)
        except Exception:  # noqa: BLE001 - no exact derivative: finite differences
            return None


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "detach") and hasattr(x, "is_floating_point")


def _inputs(inputs: Any, rep_in: Rep, batch: int, seed: int) -> np.ndarray:
    """The points the function is checked at, as float64 (or complex) numpy: ``inputs`` or ``batch`` standard
    normal draws."""
    if inputs is None:
        return np.random.default_rng(seed).standard_normal((batch, rep_in.size))
    if _is_tensor(inputs):
        if inputs.is_meta:
            raise ValueError("assert_equivariant: inputs are on the meta device and hold no values")
        if not (inputs.is_floating_point() or inputs.is_complex()):
            raise TypeError(f"assert_equivariant: inputs must be a floating-point tensor, got {inputs.dtype}")
        x = _to_numpy(inputs)
    else:
        x = np.asarray(inputs)
        if not np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.bool_):
            raise TypeError(f"assert_equivariant: inputs must be numeric, got dtype {x.dtype}")
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] != rep_in.size:
        raise ValueError(
            f"assert_equivariant: inputs have shape {tuple(x.shape)}, expected (batch, {rep_in.size}) with batch >= 1 "
            f"for rep_in={rep_in!r} of size {rep_in.size}"
        )
    if not np.all(np.isfinite(x)):
        raise ValueError("assert_equivariant: inputs hold non-finite values (nan or inf)")
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.abs(x) ** 2))) if np.size(x) else 0.0


def _norm2(M: Any) -> float:
    """``||M||_2``: exact up to 64 x 64, else 30 steps of seeded power iteration on M^H M (a scale, not a bound)."""
    M = np.asarray(M)
    if not np.size(M):
        return 0.0
    if max(M.shape) <= 64:
        return float(np.linalg.norm(M, 2))
    v = np.random.default_rng(0).standard_normal(M.shape[1])
    s = 0.0
    for _ in range(30):
        w = M.conj().T @ (M @ v)
        s = float(np.linalg.norm(w))
        if s == 0.0:
            return 0.0
        v = w / s
    return float(np.sqrt(s))


def derivative_error(a: np.ndarray, b: np.ndarray, scale: float) -> float:
    """``rms(a - b) / (rms(a) + rms(b) + scale)``, 0 when all three are zero, ``nan`` for non-finite values: the
    error of a Lie algebra generator A, with ``a = J_f(x) drho_in(A) x``, ``b = drho_out(A) f(x)`` and
    ``scale = rms(f(x)) (||drho_in(A)||_2 + ||drho_out(A)||_2)`` (for a weight matrix, W drho_in(A) against
    drho_out(A) W with rms(W) in place of rms(f(x))). The scale keeps the error relative when both sides vanish, as
    for an invariant output, where a is pure rounding."""
    a, b = np.asarray(a), np.asarray(b)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b)) and np.isfinite(scale)):
        return float("nan")
    den = _rms(a) + _rms(b) + scale
    return _rms(a - b) / den if den > 0 else 0.0


#: the finite-difference derivative (functions without an exact one) passes at ``max(tol, FD_FACTOR sqrt(eps))``
FD_FACTOR = 8


def _fd_jvp(call: _Caller, x: np.ndarray, v: np.ndarray, eps: float) -> np.ndarray:
    """J_f(x) v by central differences with one Richardson step, ``(4 D(h/2) - D(h)) / 3``, at a step
    ``h |v| = eps^(1/4) |x|``; the points are formed in float64."""
    h = eps ** 0.25 * _rms(x) / _rms(v)

    def D(s: float) -> np.ndarray:
        return (call(x + s * v) - call(x - s * v)) / (2 * s)

    return (4 * D(h / 2) - D(h)) / 3


#: one check: (what was checked, its error, the element scale k, the tolerance it passes at)
_Check = tuple[str, float, float, float]


def _elements(G: Any, elements: Any, n: int, seed: int) -> list[tuple[str, Any]]:
    """The discrete generators of G, then the given ``elements`` or n samples, each with a name."""
    out: list[tuple[str, Any]] = []
    if G is not None:
        gens = G.discrete_generators
        out += [(f"discrete generator {i}", gens[i]) for i in range(len(gens))]
    if elements is not None:
        els = elements if isinstance(elements, np.ndarray) else np.asarray(elements)
        if els.ndim == 2:
            els = els[None]
        out += [(f"element {i}", els[i]) for i in range(len(els))]
    elif G is not None and n > 0:
        gs = G.samples(n, seed=seed)
        out += [(f"sample {i}", gs[i]) for i in range(len(gs))]
    return out


def _lie_algebra(G: Any) -> list[tuple[str, Any]]:
    if G is None:
        return []
    alg = G.lie_algebra
    return [(f"Lie algebra generator {i}", alg[i]) for i in range(len(alg))]


def _function_checks(
    f: Callable, rep_in: Rep, rep_out: Rep, G: Any = None, n: int = 5, seed: int = 0, elements: Any = None,
    inputs: Any = None, tol: float | None = None, batch: int = 4,
) -> tuple[list[_Check], np.dtype]:
    """Every check :func:`assert_equivariant` makes of a function at ``inputs`` (or ``batch`` standard normal
    draws): each discrete generator and sample (or given element) g with err(g), each Lie algebra generator with
    :func:`derivative_error` (exact derivative, else finite differences); and the dtype of f's output."""
    if not isinstance(rep_in, Rep) or not isinstance(rep_out, Rep):
        raise TypeError(f"assert_equivariant: rep_in and rep_out must be Reps, got {rep_in!r}, {rep_out!r}")
    G = G if G is not None else (rep_in >> rep_out).G
    x = _inputs(inputs, rep_in, batch, seed)
    call = _Caller(f, inputs)
    fx = call(x)
    if fx.shape != (x.shape[0], rep_out.size):
        raise ValueError(
            f"f returned shape {fx.shape}, expected ({x.shape[0]}, {rep_out.size}) for rep_out={rep_out!r}"
        )
    out_dtype = fx.dtype if np.issubdtype(fx.dtype, np.inexact) else np.dtype(np.float64)
    tol = default_tolerance(out_dtype) if tol is None else tol
    if not np.all(np.isfinite(fx)):
        return [("f(inputs)", float("nan"), 1.0, tol)], out_dtype
    checks: list[_Check] = []
    for name, g in _elements(G, elements, n, seed):
        Rin, Rout = rep_in.rho(g), rep_out.rho(g)
        checks.append((name, relative_error(call(x @ Rin.T), fx @ Rout.T), element_scale(Rin, Rout), tol))
    eps = max(call.eps, float(np.finfo(out_dtype).eps))
    for name, A in _lie_algebra(G):
        Din, Dout = np.asarray(rep_in.drho(A)), np.asarray(rep_out.drho(A))
        v = x @ Din.T
        scale = _rms(fx) * (_norm2(Din) + _norm2(Dout))
        if not np.any(v):
            a, how, t = np.zeros_like(fx), "derivative", tol
        else:
            a = call.jvp(x, v)
            how, t = "derivative", tol
            if a is None:
                a, how, t = _fd_jvp(call, x, v, eps), "finite-difference derivative", max(tol, FD_FACTOR * eps**0.5)
        checks.append((f"{name} ({how})", derivative_error(a, fx @ Dout.T, scale), 1.0, t))
    return checks, out_dtype


def function_errors(
    f: Callable, rep_in: Rep, rep_out: Rep, G: Any = None, n: int = 5, batch: int = 4, seed: int = 0,
    elements: Any = None, inputs: Any = None,
) -> tuple[list[tuple[float, float]], np.dtype]:
    """Per sampled g (or given element): (err(g), k(g)) of f at ``inputs`` (module docstring), and the dtype of f's
    output."""
    checks, dtype = _function_checks(f, rep_in, rep_out, G=G, n=n, seed=seed, elements=elements, inputs=inputs,
                                    batch=batch)
    kept = [(e, k) for name, e, k, _ in checks
            if name.startswith(("sample", "element")) or name == "f(inputs)"]
    return kept, dtype


def function_equivariance_error(
    f: Callable, rep_in: Rep, rep_out: Rep, G: Any = None, n: int = 5, batch: int = 4, seed: int = 0,
    elements: Any = None, inputs: Any = None,
) -> float:
    """Largest relative error of f(rho_in(g) x) against rho_out(g) f(x), over n sampled g (or the given
    ``elements``) and the ``inputs`` x (default: ``batch`` standard normal rows); ``nan`` if f returns a non-finite
    value. f gets numpy arrays, tensors like tensor ``inputs``, or, for a torch module, tensors of its parameters'
    dtype and device."""
    errs, _ = function_errors(f, rep_in, rep_out, G=G, n=n, batch=batch, seed=seed, elements=elements,
                              inputs=inputs)
    return nanmax(e for e, _ in errs)


def _weight_checks(W: Any, rep_in: Rep, rep_out: Rep, G: Any = None, n: int = 5, seed: int = 0,
                  elements: Any = None, tol: float = 1e-9) -> list[_Check]:
    """Every check of a weight matrix: the discrete generators and samples (or given elements) g with the relative
    error of rho_out(g) W against W rho_in(g), and the Lie algebra generators with :func:`derivative_error` of
    W drho_in(A) against drho_out(A) W."""
    W = _check_weight(W, rep_in, rep_out, "assert_equivariant")
    if not np.all(np.isfinite(W)):
        return [("W", float("nan"), 1.0, tol)]
    G = G if G is not None else (rep_in >> rep_out).G
    checks: list[_Check] = []
    for name, g in _elements(G, elements, n, seed):
        Rin, Rout = rep_in.rho(g), rep_out.rho(g)
        checks.append((name, relative_error(Rout @ W, W @ Rin), element_scale(Rin, Rout), tol))
    for name, A in _lie_algebra(G):
        Din, Dout = np.asarray(rep_in.drho(A)), np.asarray(rep_out.drho(A))
        scale = _rms(W) * (_norm2(Din) + _norm2(Dout))
        checks.append((f"{name} (derivative)", derivative_error(W @ Din, Dout @ W, scale), 1.0, tol))
    return checks


def _attribute_symmetry(f: Any) -> tuple[Any, Any] | None:
    """``(rep_in, rep_out)`` or ``(action_in, action_out)`` read from ``f``'s attributes, or None: the one place that
    reads a declaration from attribute names (:class:`symkit.nn.Equivariant`'s default uses it too)."""
    for a, b in (("rep_in", "rep_out"), ("action_in", "action_out")):
        if hasattr(f, a) and hasattr(f, b):
            return getattr(f, a), getattr(f, b)
    return None


def _declared(f: Any, rep_in: Any, rep_out: Any) -> tuple[Any, Any]:
    """rep_in / rep_out given, or what the module declares: ``f.declared_symmetry()`` where it has one (every
    :class:`symkit.nn.Equivariant` layer), else its ``rep_in``/``rep_out`` or ``action_in``/``action_out``."""
    if rep_in is not None or rep_out is not None:
        if rep_in is None:
            raise TypeError("assert_equivariant: rep_out given without rep_in; pass both, or neither to use the "
                            f"symmetry {type(f).__name__} declares")
        return rep_in, rep_out
    method = getattr(f, "declared_symmetry", None)
    declared = method() if callable(method) else _attribute_symmetry(f)
    if declared is None:
        raise TypeError(
            f"assert_equivariant: {type(f).__name__} declares no symmetry (declared_symmetry(), rep_in/rep_out or "
            "action_in/action_out); pass rep_in and rep_out"
        )
    return declared


def _action_checks(f: Callable, action_in: Any, action_out: Any, inputs: Any, n: int = 5, seed: int = 0,
                  tol: float | None = None) -> tuple[list[_Check], Any]:
    """err(g) of ``f(act(x, g))`` against ``act(f(x), g)`` for a grid action (``k(g) = 1`` for permutations), one
    named check per generator of the action and per each of ``n`` sampled elements; ``action_out=None`` means
    invariant. Also returns the dtype of f's output."""
    import torch

    from symkit.actions import PermAction, act

    if not isinstance(action_in, PermAction) or not (action_out is None or isinstance(action_out, PermAction)):
        raise TypeError(
            f"assert_equivariant: actions must be PermActions (or action_out=None for an invariant output), got "
            f"{type(action_in).__name__} and {type(action_out).__name__}"
        )
    if not isinstance(inputs, torch.Tensor):
        raise TypeError(
            f"assert_equivariant: an action needs inputs= (a tensor whose trailing axes have the grid shape "
            f"{action_in.shape}), got {type(inputs).__name__}"
        )
    held = [*f.parameters(), *f.buffers()] if isinstance(f, torch.nn.Module) else []
    if inputs.is_meta or any(t.is_meta for t in held):
        raise ValueError("assert_equivariant: the module or its inputs are on the meta device and compute no values")
    gen = torch.Generator().manual_seed(seed)
    gens = list(action_in.generators())
    named = [(f"generator {i}", g) for i, g in enumerate(gens)]
    named += [(f"sample {i}", action_in.sample(gen)) for i in range(n)]
    checks: list[_Check] = []
    with torch.no_grad():
        fx = f(inputs)
        tol = default_tolerance(fx.dtype) if tol is None else tol
        for name, g in named:
            a = f(act(action_in, inputs, g))
            b = fx if action_out is None or action_out.is_trivial else act(action_out, fx, g)
            checks.append((name, relative_error(_to_numpy(a), _to_numpy(b)), 1.0, tol))
    return checks, fx.dtype


def action_errors(f: Callable, action_in: Any, action_out: Any, inputs: Any, n: int = 5,
                  seed: int = 0) -> tuple[list[float], Any]:
    """err(g) of ``f(act(x, g))`` against ``act(f(x), g)`` for a grid action (module docstring, ``k(g) = 1`` for
    permutations) over the action's generators and ``n`` sampled elements; ``action_out=None`` means invariant."""
    checks, dtype = _action_checks(f, action_in, action_out, inputs, n=n, seed=seed)
    return [e for _, e, _, _ in checks], dtype


def _verdict(checks: list[_Check], what: str) -> float:
    """Raise AssertionError naming the worst check (the largest err / (tol k)); else the largest error."""
    bad = [c for c in checks if not np.isfinite(c[1])]
    if bad:
        names = ", ".join(c[0] for c in bad)
        raise AssertionError(f"not equivariant for {what}: non-finite values (nan or inf) at {names}")
    failing = [c for c in checks if not c[1] <= c[3] * c[2]]
    if failing:
        name, err, k, tol = max(failing, key=lambda c: c[1] / (c[3] * c[2]) if c[3] * c[2] > 0 else np.inf)
        raise AssertionError(
            f"not equivariant for {what}: worst at {name}: relative error {err:.3g} > tol {tol:.3g} x element "
            f"scale {k:.3g} ({len(failing)} of {len(checks)} checks fail)"
        )
    return nanmax(c[1] for c in checks)


def assert_equivariant(
    f_or_W: Any, rep_in: Any = None, rep_out: Any = None, G: Any = None, tol: float | None = None, n: int = 5,
    seed: int = 0, elements: Any = None, inputs: Any = None,
) -> float:
    """Assert that a weight matrix W (rep_out.size x rep_in.size) or a function f: rep_in -> rep_out is
    equivariant (module docstring): under every discrete generator of G, every Lie algebra generator (through the
    derivative) and ``n`` samples (or the given ``elements``), at ``inputs`` (``(batch, rep_in.size)``; default 4
    standard normal rows drawn with ``seed``). Returns the largest error.

    ``rep_in``/``rep_out`` are core reps, or grid actions (:class:`~symkit.actions.PermAction`; then ``inputs``
    gives the tensor to transform, and ``rep_out=None`` asks for invariance). Left out, both are what the module
    declares: its ``declared_symmetry()`` (every :class:`symkit.nn.Equivariant` layer), else its ``rep_in``/``rep_out``
    or ``action_in``/``action_out`` attributes.
    f gets numpy arrays, tensors of tensor ``inputs``' dtype and device, or, for a torch module, tensors of its
    parameters' dtype and device. Raises AssertionError naming the worst check (which generator or sample, its
    error, the tolerance and the element scale), and for any non-finite value. ``tol`` defaults to
    :func:`default_tolerance` of the output's (or W's) dtype."""
    from symkit.actions import PermAction

    rep_in, rep_out = _declared(f_or_W, rep_in, rep_out)
    what = f"{rep_in!r} -> {rep_out!r}"
    if isinstance(rep_in, PermAction):
        checks, _ = _action_checks(f_or_W, rep_in, rep_out, inputs, n=n, seed=seed, tol=tol)
        return _verdict(checks, what)
    if callable(f_or_W) and not isinstance(f_or_W, np.ndarray) and not hasattr(f_or_W, "detach"):
        checks, _ = _function_checks(f_or_W, rep_in, rep_out, G=G, n=n, seed=seed, elements=elements,
                                    inputs=inputs, tol=tol)
        return _verdict(checks, what)
    if inputs is not None:
        raise ValueError("assert_equivariant: inputs= applies to functions; a weight matrix is checked on its own")
    W = _to_numpy(f_or_W)
    dtype = W.dtype if np.issubdtype(W.dtype, np.inexact) else np.dtype(np.float64)
    tol = default_tolerance(dtype, weights=True) if tol is None else tol
    return _verdict(_weight_checks(W, rep_in, rep_out, G=G, n=n, seed=seed, elements=elements, tol=tol), what)


def assert_invariant_basis(Q: np.ndarray, rep: Rep, tol: float = 1e-9, n: int = 5, seed: int = 0) -> float:
    """Assert Q is a finite orthonormal basis of the invariants of ``rep``: ``rep.rank()`` columns, each fixed by
    rho(g) and killed by d rho(A) for sampled g, A.

    The error is rms(rho(g) Q - Q) / (rms(Q) * max(1, largest column norm of rho(g))): rounding errors in Q are
    amplified by |rho(g)|, which for non-compact groups (Lorentz, Sp, SL) grows like |g|^k on rank-k tensors."""
    Q = np.asarray(Q)
    if Q.ndim != 2 or Q.shape[0] != rep.size:
        raise ValueError(f"assert_invariant_basis: Q has shape {Q.shape}, expected ({rep.size}, r)")
    if not np.all(np.isfinite(Q)):
        raise AssertionError(f"basis of {rep!r} has non-finite entries (nan or inf)")
    r = rep.rank()
    if Q.shape[1] != r:
        raise AssertionError(f"basis of {rep!r} has {Q.shape[1]} columns, but the rank is {r}")
    orth = float(np.abs(Q.conj().T @ Q - np.eye(Q.shape[1])).max()) if Q.shape[1] else 0.0
    if not orth <= tol * max(1, Q.shape[1]):
        raise AssertionError(f"basis of {rep!r} is not orthonormal: max |Q^H Q - I| = {orth:.3g}")
    G = rep.G
    errs = [0.0]
    if G is not None and Q.shape[1]:
        rq = float(np.sqrt(np.mean(np.abs(Q) ** 2)))
        gs = G.samples(n, seed=seed)
        As = G.lie_algebra_samples(n, seed=seed) if len(G.lie_algebra) else None
        for i in range(n):
            for M, target in [(rep.rho(gs[i]), Q)] + ([(rep.drho(As[i]), 0 * Q)] if As is not None else []):
                scale = max(1.0, float(np.linalg.norm(M, axis=0).max()))
                errs.append(float(np.sqrt(np.mean(np.abs(M @ Q - target) ** 2))) / (rq * scale))
    err = nanmax(errs)
    if not err <= tol:
        raise AssertionError(f"basis of {rep!r} is not invariant: scale-adjusted error {err:.3g} > {tol:g}")
    return err


def finite_difference_lie_derivative(
    f: Callable, x: Any, direction: str = "x", h: float = 1e-7, padding: str = "reflection"
) -> Any:
    """An independent reference for the translation Lie derivative of :mod:`symkit.measure`: a one-sided finite
    difference with Richardson extrapolation, ``2 D(h/2) - D(h)``, ``D(h) = (f(S_h x) - f(x)) / h``, where ``S_h``
    shifts the image by ``h`` normalized units (``h (max(H, W) - 1) / 2`` pixels) with ``torch``'s own
    ``F.grid_sample`` (bilinear, ``align_corners=True``), sampling the input at ``u + h e`` as symkit's flows do.

    One-sided, because at ``t = 0`` every sample sits on a pixel centre, where bilinear interpolation has a kink:
    symkit defines the derivative as the limit from ``t > 0`` (docs/measure.md). ``S_h x`` is exactly linear in ``h``
    while the shift is under a pixel, so for a smooth ``f`` the error is ``O(h^2)`` plus ``eps |f| / h`` rounding.
    A piecewise-linear network (ReLU, max pool) adds an ``O(h)`` error from the units whose kink lies within the
    step, until ``h`` is below the distance to the nearest kink: measured on a ReLU CNN (32x32, float64), 1e-2
    relative at ``h = 1e-3``, 6e-4 at ``1e-5``, 2e-8 at ``1e-7`` (the default, for float64). In float32 rounding
    needs ``h >= 1e-3``, so agreement is at the 1e-2 level there. ``f`` maps ``(N, C, H, W)`` to outputs that do not
    move with the image (class scores)."""
    import torch
    import torch.nn.functional as F

    if direction not in ("x", "y"):
        raise ValueError(f"direction must be 'x' or 'y', got {direction!r}")
    if not isinstance(x, torch.Tensor) or x.ndim != 4 or not x.is_floating_point():
        raise TypeError("x must be a floating-point tensor of shape (N, C, H, W)")
    if not 0 < h * (max(x.shape[-2:]) - 1) / 2 < 1:
        raise ValueError(f"h = {h} must shift the image by less than one pixel")
    n, _, H, W = x.shape
    ys = torch.linspace(-1, 1, H, dtype=x.dtype, device=x.device)
    xs = torch.linspace(-1, 1, W, dtype=x.dtype, device=x.device)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    pixels_per_unit = (max(H, W) - 1) / 2

    def shifted(t: float) -> Any:
        grid = torch.stack([gx, gy], dim=-1).expand(n, H, W, 2).clone()
        axis, size = (0, W) if direction == "x" else (1, H)
        grid[..., axis] += t * pixels_per_unit / ((size - 1) / 2)
        return F.grid_sample(x, grid, mode="bilinear", padding_mode=padding, align_corners=True)

    with torch.no_grad():
        f0 = f(x)
        d = lambda t: (f(shifted(t)) - f0) / t  # noqa: E731
        return 2 * d(h / 2) - d(h)
