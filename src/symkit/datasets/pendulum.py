"""The 3D double spring pendulum (thesis Sec. 2.7.2, App. A.1.10, Table 2.2) and its windy variant (Sec. 3.5.1).

Two unit masses hang from a pivot at the origin on two springs. The state is ``z = (x1, x2, p1, p2)`` in ``R^12``
(positions, then momenta: the layout of ``4 * V(G)`` for a group acting on ``R^3``), and the dynamics are
Hamilton's equations ``dz/dt = J grad H(z)`` with ``J = [[0, I], [-I, 0]]`` and

    H = |p1|^2 / 2 m1 + |p2|^2 / 2 m2 + 1/2 k1 (|x1| - l1)^2 + c k2 (|x1 - x2| - l2)^2 + m1 g.x1 + m2 g.x2,

with ``m1 = m2 = k1 = k2 = l1 = l2 = 1`` and ``g = [0, 0, 1]`` (the potential grows with z: gravity pulls down).
The system is symmetric under O(2) about the z-axis (rotations and reflections of the xy-plane act on all four
vectors alike): its flow commutes with the group, and the angular momentum ``L_z`` is conserved (Noether).

**The second spring (a decision).** The thesis prints ``c = 1/2`` (the textbook potential); the authors' dataset code
has ``c = 1`` (``k2 * (...) ** 2``). Table 2.2 was presumably produced by that code (not checked), so
``spring="code"`` (``c = 1``) is the default here; ``spring="thesis"`` gives ``c = 1/2``. Both are Hamiltonian and
O(2)-symmetric.

**Windy variant** (Sec. 3.5.1, the RPP experiments): ``H + eps H1`` with ``H1 = -w.x1 - w.x2``, ``w = [-8, -5, 0]``,
``eps = 0.01``: a constant horizontal force ``eps w`` on both masses, which breaks the rotations about z (and
``L_z`` is no longer conserved) while the system stays Hamiltonian.

**Data** (as in the thesis and the authors' code): initial conditions ``x1 ~ [0, 0, -1.5] + N(0, 0.2^2)``,
``x2 ~ [0, 0, -3] + N(0, 0.2^2)``, ``p1, p2 ~ N(0, 0.4^2)``; each system is integrated for 30 s and sampled every
0.2 s (150 states, ``t = 0, 0.2, ..., 29.8``); the 150 states are cut into 30 chunks of 5 (1 s each) and one chunk
per system is kept at random: its start state ``z0`` and the states at ``0, 0.2, ..., 0.8`` s after it (the first is
``z0`` itself, as in the authors' code). 500 / 500 / 500 systems for train / validation / test (thesis A.1.10; the
authors' code draws 5000 systems and uses 500 for training and 10% each, again 500, for validation and test, so the
sizes agree). Trajectories are integrated in float64 with torchdiffeq's adaptive Dormand-Prince (``dopri5``) at
``rtol = atol = 1e-10`` under a per-system error norm (the largest over the systems of a batch of each system's
RMS error ratio), where the authors used JAX's adaptive integrator at ``rtol = 1e-4`` (docs/ode.md, Decisions).

The two registered :class:`~symkit.datasets.tasks.SymmetricTask` s, ``"pendulum"`` (O(2) about z, exact) and
``"windy-pendulum"`` (not symmetric), map a chunk's start state (``4 V``) to the four states that follow it,
flattened (``16 V``): the flow map over 0.2, 0.4, 0.6 and 0.8 s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from symkit._checks import check_int, check_number
from symkit.datasets.tasks import SymmetricTask, register_task
from symkit.groups import Group, O2eR3
from symkit.reps import V

__all__ = [
    "STATE_SIZE", "SPRING_FORMS", "WIND", "WIND_SCALE", "DATA_RTOL", "DATA_ATOL",
    "hamiltonian", "vector_field", "angular_momentum_z", "sample_initial_conditions", "integrate",
    "trajectory_times", "PendulumChunks", "PendulumData", "pendulum_chunks", "pendulum_data", "long_trajectories",
    "PENDULUM", "WINDY_PENDULUM",
]

#: the state (x1, x2, p1, p2) of two 3-vectors and their momenta
STATE_SIZE = 12
#: the second spring term: "code" is k2 (|x1 - x2| - l2)^2 (the authors' dataset), "thesis" is 1/2 k2 (...)^2
SPRING_FORMS = ("code", "thesis")
#: the wind direction w and its strength eps of the windy pendulum (Sec. 3.5.1): H + eps (-w.x1 - w.x2)
WIND = (-8.0, -5.0, 0.0)
WIND_SCALE = 0.01
#: tolerances of the data integrator (shown converged in docs/ode.md)
DATA_RTOL = 1e-10
DATA_ATOL = 1e-10

# the thesis's constants (A.1.10): unit masses, spring constants, rest lengths and gravity
_M1 = _M2 = _K1 = _K2 = _L1 = _L2 = 1.0
_G = 1.0


def _spring_factor(spring: str) -> float:
    if spring not in SPRING_FORMS:
        raise ValueError(f"spring must be one of {SPRING_FORMS} (the authors' code or the thesis's potential), "
                         f"got {spring!r}")
    return 1.0 if spring == "code" else 0.5


def _check_state(z: object, who: str) -> torch.Tensor:
    if not isinstance(z, torch.Tensor):
        raise TypeError(f"{who}: expected a torch.Tensor of states (..., {STATE_SIZE}), got {type(z).__name__}")
    if not z.is_floating_point():
        raise TypeError(f"{who}: expected a floating-point state, got {z.dtype}")
    if z.ndim == 0 or z.shape[-1] != STATE_SIZE:
        got = "a scalar" if z.ndim == 0 else f"last dimension {z.shape[-1]}"
        raise ValueError(f"{who}: expected states (..., {STATE_SIZE}) laid out as (x1, x2, p1, p2), got {got}")
    return z


def _wind_vector(z: torch.Tensor) -> torch.Tensor:
    return z.new_tensor(WIND)


def hamiltonian(z: torch.Tensor, *, wind: bool = False, spring: str = "code") -> torch.Tensor:
    """The energy ``H(z)`` of states ``z`` of shape ``(..., 12)``, shape ``(...)`` (module docstring; with
    ``wind=True`` the windy ``H + eps H1`` of Sec. 3.5.1). Differentiable, so ``J grad H`` by autograd is the same
    vector field as :func:`vector_field`."""
    z = _check_state(z, "hamiltonian")
    c = _spring_factor(spring)
    x1, x2, p1, p2 = z[..., 0:3], z[..., 3:6], z[..., 6:9], z[..., 9:12]
    kinetic = 0.5 * p1.square().sum(-1) / _M1 + 0.5 * p2.square().sum(-1) / _M2
    potential = (0.5 * _K1 * (x1.norm(dim=-1) - _L1).square() + c * _K2 * ((x1 - x2).norm(dim=-1) - _L2).square()
                 + _M1 * _G * x1[..., 2] + _M2 * _G * x2[..., 2])
    if wind:
        w = _wind_vector(z)
        potential = potential - WIND_SCALE * ((x1 * w).sum(-1) + (x2 * w).sum(-1))
    return kinetic + potential


def vector_field(z: torch.Tensor, *, wind: bool = False, spring: str = "code") -> torch.Tensor:
    """Hamilton's equations ``dz/dt = J grad H(z)`` in closed form: ``dx_i/dt = p_i / m_i`` and
    ``dp_i/dt = -dV/dx_i``; shape ``(..., 12)`` like ``z``."""
    z = _check_state(z, "vector_field")
    c = _spring_factor(spring)
    x1, x2, p1, p2 = z[..., 0:3], z[..., 3:6], z[..., 6:9], z[..., 9:12]
    r1 = x1.norm(dim=-1, keepdim=True)
    d = x1 - x2
    r12 = d.norm(dim=-1, keepdim=True)
    spring1 = _K1 * (r1 - _L1) * x1 / r1  # d/dx1 of 1/2 k1 (|x1| - l1)^2
    spring2 = 2 * c * _K2 * (r12 - _L2) * d / r12  # d/dx1 of c k2 (|x1 - x2| - l2)^2 (and minus d/dx2)
    force1, force2 = -spring1 - spring2, spring2
    gravity = torch.stack([torch.zeros_like(r1[..., 0]), torch.zeros_like(r1[..., 0]),
                           torch.ones_like(r1[..., 0])], dim=-1) * _G
    force1 = force1 - _M1 * gravity
    force2 = force2 - _M2 * gravity
    if wind:
        w = _wind_vector(z) * WIND_SCALE
        force1, force2 = force1 + w, force2 + w
    return torch.cat([p1 / _M1, p2 / _M2, force1, force2], dim=-1)


def angular_momentum_z(z: torch.Tensor) -> torch.Tensor:
    """``L_z = sum_i (x_i x p_i)_z``, shape ``(...)``: conserved by the pendulum (rotations about z), not by the
    windy one."""
    z = _check_state(z, "angular_momentum_z")
    x, p = z[..., 0:6].unflatten(-1, (2, 3)), z[..., 6:12].unflatten(-1, (2, 3))
    return (x[..., 0] * p[..., 1] - x[..., 1] * p[..., 0]).sum(-1)


def sample_initial_conditions(n: int, generator: torch.Generator | None = None, *, dtype: torch.dtype = torch.float64,
                              device: torch.device | str | None = None) -> torch.Tensor:
    """``n`` initial states (thesis A.1.10): ``x1 ~ [0, 0, -1.5] + N(0, 0.2^2)``, ``x2 ~ [0, 0, -3] + N(0, 0.2^2)``,
    ``p1, p2 ~ N(0, 0.4^2)``; drawn on the CPU from ``generator`` (so a seed gives the same states on any device),
    then moved to ``device``."""
    n = check_int("sample_initial_conditions: n", n, 1)
    noise = torch.randn(n, STATE_SIZE, generator=generator, dtype=dtype)
    scale = torch.tensor([0.2] * 6 + [0.4] * 6, dtype=dtype)
    mean = torch.tensor([0, 0, -1.5, 0, 0, -3.0] + [0.0] * 6, dtype=dtype)
    return (mean + scale * noise).to(device)


def _max_rms_norm(ratio: torch.Tensor) -> torch.Tensor:
    """The step-size control norm of the data integrator: each system's RMS error ratio, the largest over the
    batch (so every system meets the tolerance, not only their average)."""
    return ratio.square().mean(-1).sqrt().max()


def integrate(z0: torch.Tensor, times: torch.Tensor, *, wind: bool = False, spring: str = "code",
              rtol: float = DATA_RTOL, atol: float = DATA_ATOL, method: str = "dopri5") -> torch.Tensor:
    """The true trajectories from states ``z0`` (``(n, 12)`` or ``(12,)``) at ``times`` (increasing, from the
    start time ``times[0]``): shape ``(n, len(times), 12)`` (or ``(len(times), 12)``), by torchdiffeq's ``odeint``
    with the closed-form :func:`vector_field`. Every system of the batch is held to the tolerances (a per-system
    error norm); the result is in ``z0``'s dtype and on its device."""
    from torchdiffeq import odeint

    z0 = _check_state(z0, "integrate")
    times = _check_times(times, z0, "integrate")
    _spring_factor(spring)

    def f(t: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return vector_field(z, wind=wind, spring=spring)

    options = {"norm": _max_rms_norm} if method in _ADAPTIVE else None
    out = odeint(f, z0, times, rtol=rtol, atol=atol, method=method, options=options)
    return out.movedim(0, -2)


_ADAPTIVE = ("dopri5", "dopri8", "bosh3", "fehlberg2", "adaptive_heun")


def _check_times(times: object, z0: torch.Tensor, who: str) -> torch.Tensor:
    if not isinstance(times, torch.Tensor) or times.ndim != 1 or len(times) < 1:
        raise ValueError(f"{who}: times must be a 1-D tensor of increasing times, got {times!r}")
    return times.to(dtype=z0.dtype, device=z0.device)


def trajectory_times(duration: float = 30.0, dt: float = 0.2, *, dtype: torch.dtype = torch.float64,
                     device: torch.device | str | None = None) -> torch.Tensor:
    """The sampling grid ``0, dt, 2 dt, ...`` below ``duration`` (``round(duration / dt)`` points: 150 for 30 s at
    0.2 s, as ``arange(0, 30, 0.2)`` in the authors' code)."""
    check_number("dt", dt, above=True)
    check_number(f"duration (at least dt = {dt})", duration, minimum=dt)
    steps = int(round(duration / dt))
    return torch.arange(steps, dtype=dtype, device=device) * dt


@dataclass(frozen=True)
class PendulumChunks:
    """Chunks of true trajectories: start states ``z0`` ``(n, 12)``, the chunk ``times`` ``(T,)`` from 0, and the
    states ``z`` ``(n, T, 12)`` at those times after the start (``z[:, 0] == z0``); ``start_times`` ``(n,)`` says
    where in its 30 s trajectory each chunk began."""

    z0: torch.Tensor
    times: torch.Tensor
    z: torch.Tensor
    start_times: torch.Tensor

    def __len__(self) -> int:
        return self.z0.shape[0]

    def subset(self, index: torch.Tensor | slice) -> PendulumChunks:
        """The chunks at ``index`` (a slice or an index tensor)."""
        return PendulumChunks(self.z0[index], self.times, self.z[index], self.start_times[index])


def pendulum_chunks(n: int, seed: int = 0, *, wind: bool = False, spring: str = "code", chunk_len: int = 5,
                    dt: float = 0.2, duration: float = 30.0, rtol: float = DATA_RTOL, atol: float = DATA_ATOL,
                    batch: int = 500) -> PendulumChunks:
    """``n`` chunks (one per system, module docstring): each system is integrated for ``duration`` s, sampled every
    ``dt`` s, cut into ``duration / (chunk_len dt)`` chunks of ``chunk_len`` states, and one chunk is drawn at
    random. Seeded (the same chunks for the same arguments); systems are integrated ``batch`` at a time."""
    n = check_int("pendulum_chunks: n", n, 1)
    chunk_len = check_int("pendulum_chunks: chunk_len", chunk_len, 1)
    batch = check_int("pendulum_chunks: batch", batch, 1)
    generator = torch.Generator().manual_seed(check_int("pendulum_chunks: seed", seed, 0))
    grid = trajectory_times(duration, dt)
    n_chunks = len(grid) // chunk_len
    if n_chunks < 1:
        raise ValueError(f"a {duration} s trajectory sampled every {dt} s has fewer than chunk_len = {chunk_len} "
                         f"states")
    z0 = sample_initial_conditions(n, generator)
    index = torch.randint(n_chunks, (n,), generator=generator)
    parts = []
    for i in range(0, n, batch):
        traj = integrate(z0[i:i + batch], grid, wind=wind, spring=spring, rtol=rtol, atol=atol)
        parts.append(traj[:, : n_chunks * chunk_len].unflatten(1, (n_chunks, chunk_len))[
            torch.arange(traj.shape[0]), index[i:i + batch]])
    z = torch.cat(parts)
    return PendulumChunks(z[:, 0], grid[:chunk_len], z, grid[index * chunk_len])


@dataclass(frozen=True)
class PendulumData:
    """The train / validation / test chunks of one system (``wind``, ``spring``)."""

    train: PendulumChunks
    val: PendulumChunks
    test: PendulumChunks
    wind: bool = False
    spring: str = "code"

    def true_vector_field(self) -> Callable[[torch.Tensor], torch.Tensor]:
        """``z -> J grad H(z)`` of the system that made the data."""
        return lambda z: vector_field(z, wind=self.wind, spring=self.spring)


def pendulum_data(n_train: int = 500, n_val: int = 500, n_test: int = 500, seed: int = 0, *, wind: bool = False,
                  spring: str = "code", **chunk_options: object) -> PendulumData:
    """The data set of Sec. 2.7.2: ``n_train + n_val + n_test`` systems (500 each in the thesis), one chunk each
    (:func:`pendulum_chunks`, which takes ``chunk_options``), split in that order."""
    sizes = [check_int(f"pendulum_data: {k}", v, 1) for k, v in (("n_train", n_train), ("n_val", n_val),
                                                                  ("n_test", n_test))]
    chunks = pendulum_chunks(sum(sizes), seed, wind=wind, spring=spring, **chunk_options)
    a, b = sizes[0], sizes[0] + sizes[1]
    return PendulumData(chunks.subset(slice(0, a)), chunks.subset(slice(a, b)), chunks.subset(slice(b, None)),
                        wind, spring)


def long_trajectories(z0: torch.Tensor, duration: float = 30.0, dt: float = 0.2, *, wind: bool = False,
                      spring: str = "code", rtol: float = DATA_RTOL,
                      atol: float = DATA_ATOL) -> tuple[torch.Tensor, torch.Tensor]:
    """The true rollouts from ``z0`` (the test chunks' start states) that Table 2.2 compares against: ``(times,
    z)`` with ``times = 0, dt, ..., < duration`` (150 points for 30 s, as in the authors' code) and ``z``
    ``(n, len(times), 12)``."""
    z0 = _check_state(z0, "long_trajectories")
    times = trajectory_times(duration, dt, dtype=z0.dtype, device=z0.device)
    return times, integrate(z0, times, wind=wind, spring=spring, rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------------------------ the two tasks
#: the flow map of a task: the states 0.2, 0.4, 0.6 and 0.8 s after the input state
_TASK_STEPS = 4
_TASK_DT = 0.2


def _task_inputs(wind: bool) -> Callable[[int, torch.Generator], torch.Tensor]:
    def inputs(n: int, generator: torch.Generator) -> torch.Tensor:
        """Chunk start states: 30 s trajectories from the thesis's initial conditions, one start per system at a
        random whole second (the chunk starts of the data set). They only sample the states the data visit (the
        flow map, the target, is integrated at the data's tolerance), so a looser 1e-8 saves time."""
        z0 = sample_initial_conditions(n, generator)
        starts = torch.arange(30, dtype=z0.dtype)
        index = torch.randint(30, (n,), generator=generator)
        traj = integrate(z0, starts, wind=wind, rtol=1e-8, atol=1e-8)
        return traj[torch.arange(n), index]

    return inputs


def _task_target(wind: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    def target(x: torch.Tensor) -> torch.Tensor:
        times = torch.arange(_TASK_STEPS + 1, dtype=x.dtype, device=x.device) * _TASK_DT
        return integrate(x, times, wind=wind)[:, 1:].flatten(1)

    return target


def _task_reps(G: Group) -> tuple:
    return 4 * V(G), 4 * _TASK_STEPS * V(G)


PENDULUM = register_task(SymmetricTask(
    "pendulum", _task_inputs(False), _task_target(False), _task_reps, O2eR3(),
    description="the double spring pendulum's flow: a state (x1, x2, p1, p2) to the states 0.2, 0.4, 0.6, 0.8 s "
                "later, O(2) about z (Sec. 2.7.2)"))
WINDY_PENDULUM = register_task(SymmetricTask(
    "windy-pendulum", _task_inputs(True), _task_target(True), _task_reps, O2eR3(), exact=False,
    description="the pendulum in a constant wind w = [-8, -5, 0], eps = 0.01: no longer symmetric about z "
                "(Sec. 3.5.1)"))
