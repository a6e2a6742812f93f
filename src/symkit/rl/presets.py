"""State and action representations of the MuJoCo locomotion tasks (thesis App. A.2.4, Table A.10), as data.

Each :class:`LocomotionPreset` names a gymnasium environment and the group, state rep and action rep of Table
A.10, with the layout that puts the raw observation and action into the reps' order (``state_order``,
``action_order``: feature ``i`` is raw entry ``order[i]``; Walker2d and Ant regroup left/right pairs and legs), and
the symmetries of Table 3.2: which are exact in the simulator, which only approximate, and the subgroup of the
preset's group that is exact. The critic's moving-average speed of the RPP runs (Table A.9) rides along.

Notation of Table A.10: ``V`` is the permutation rep of ``Z_n`` (the rotation rep of ``SO(2)`` about z inside
``R^3`` for Humanoid), ``R`` a scalar, ``P`` the pseudoscalar ``sign det g`` (the sign flip of a mirror).

Decisions where the tables do not add up or the simulator differs:

- **Swimmer.** The thesis's state rep ``R + P_lr + P_lr V_fb + (R + P)^2 + P_lr V_fb`` has 10 numbers; the
  observation has 8 (Table A.12: orientation, two joint angles, x and y velocity, angular velocity, two joint
  velocities). symkit keeps the thesis's group ``Z2(left-right) x Z2(front-back)`` and reads the row against the
  observation: ``P_lr`` (orientation) ``+ P_lr V_fb`` (joint angles) ``+ R + P_lr + P_lr`` (x velocity, y
  velocity, angular velocity) ``+ P_lr V_fb`` (joint velocities): the leading ``R`` has no observed counterpart (x
  and y are not observed) and ``(R + P)^2`` is three numbers, not four. The y velocity is a pseudoscalar: the
  left/right mirror ``y -> -y`` flips it (the reference code's 8-number ``Z2`` rep keeps it a scalar, which the
  simulator does not). The mirror is exact; the front/back swap (head and tail joints) is approximate.
- **Ant.** ``Z4`` cycles the legs and keeps the torso's height, quaternion and velocities as scalars (Table A.10);
  relabelling the legs of the simulated ant also turns its body frame by 90 degrees and flips the sign convention
  of two ankles, so the cycle is approximate (Table 3.2: only a reflection is exact). The ankles of legs 2 and 3
  bend the other way (range -70..-30 degrees against 30..70), so the raw cycle sends every valid ankle angle out of
  its new joint's range; ``joint_signs="matched"`` (:meth:`LocomotionPreset.signs`) negates those two ankles'
  angles, velocities and actions in the networks' features, and the cycle then maps ranges onto ranges. With
  ``torso="turned"`` besides (:meth:`LocomotionPreset.with_torso`, symkit's) the torso's rotation matrix and
  body-frame angular velocity turn with the cycle too, and relabelling the legs is an exact symmetry of the
  simulator, reward included (tests/rl/test_presets.py): the description changes, the ant does not.
- **Humanoid.** The torso quaternion is turned into its rotation matrix (A.2.4), which Table A.10 types ``V ⊗ V``
  of ``SO(2)`` about z (``R -> g R g^T``); turning the world about z maps it to ``g R`` and leaves the body-frame
  angular velocity unchanged, so this ``SO(2)`` is a prior, not a symmetry of the observation (Table 3.2 lists it
  as approximate, broken by the reward). Table A.9 gives no RPP critic speed (``tau=None``): the RPP critic did
  not train on Humanoid.

Environments are the gymnasium ``v5`` versions (the thesis used ``v2``; same observations, Walker2d's feet now
share one friction, which makes its left/right swap exact). Ant and Humanoid leave out the contact forces and
body inertias that ``v5`` appends by default, giving the 27 and 45 numbers of Table A.15 and A.17.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from symkit.groups import SO2eR3, Z
from symkit.groups.base import Group
from symkit.reps import PseudoScalar, Rep, Scalar, T, V
from symkit.rl.settings import JOINT_SIGNS, TORSO

__all__ = ["LocomotionPreset", "PRESETS", "EXTRA_PRESETS", "preset", "require_gymnasium", "simulator_versions",
           "MujocoWarning", "mujoco_warnings", "quaternion_to_matrix"]

_SWAP = np.array([[0.0, 1.0], [1.0, 0.0]])
#: the two mirror groups of Swimmer (Table A.10: Z2 left/right times Z2 front/back); distinct groups by name
Z2_LEFT_RIGHT = Group([_SWAP], name="Z2(left-right)")
Z2_FRONT_BACK = Group([_SWAP], name="Z2(front-back)")


def require_gymnasium() -> Any:
    """Import gymnasium (with the MuJoCo bindings), or raise an ImportError that names the ``rl`` extra."""
    try:
        import gymnasium
        import mujoco  # noqa: F401
    except ImportError as exc:
        raise ImportError("the MuJoCo environments need gymnasium and mujoco, which are not installed; install the "
                          "rl extra: pip install 'symkit[rl]'") from exc
    return gymnasium


class MujocoWarning(UserWarning):
    """A warning MuJoCo printed while a symkit preset built its environment."""


@contextmanager
def mujoco_warnings() -> Iterator[None]:
    """Route MuJoCo's warnings inside the block to Python's ``warnings`` (category :class:`MujocoWarning`, shown
    once per process by the default filter) instead of MuJoCo's own handler, which prints each one and appends it
    to ``MUJOCO_LOG.TXT`` in the working directory: with mujoco 4, every HalfCheetah built from gymnasium's model
    file warns that ``settotalmass`` is deprecated, once per environment. The messages are collected and warned
    after the block, since an exception raised inside MuJoCo's callback (``-W error``) would abort the process."""
    import mujoco

    messages: list[str] = []
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(messages.append)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)
        for message in messages:
            warnings.warn(f"mujoco: {message}", MujocoWarning, stacklevel=3)


def simulator_versions() -> str:
    """The versions of the libraries a run's returns depend on, e.g. ``"mujoco 4.0.0, gymnasium 1.4.0,
    stable-baselines3 2.9.2, torch 2.13.0"``: runs made with other physics or another SAC are not the same
    experiment, so rl-sac stores this with every run and the report shows it."""
    from importlib.metadata import PackageNotFoundError, version

    parts = []
    for package in ("mujoco", "gymnasium", "stable-baselines3", "torch"):
        try:
            parts.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            parts.append(f"{package} (not installed)")
    return ", ".join(parts)


def quaternion_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 9), row-major, of unit quaternions ``q = (w, x, y, z)`` (..., 4) (MuJoCo's order)."""
    q = np.asarray(q, dtype=float)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True).clip(1e-12)
    w, x, y, z = np.moveaxis(q, -1, 0)
    m = [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
         2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
         2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]
    return np.stack(m, axis=-1)


@dataclass(frozen=True)
class LocomotionPreset:
    """One row of Table A.10 with the symmetries of Table 3.2 and the RPP critic speed of Table A.9."""

    name: str
    env_id: str
    group: Group
    state_rep: Rep
    action_rep: Rep
    #: the rep of the action's magnitudes (a policy's log standard deviations): pseudoscalars become scalars
    action_scale_rep: Rep
    table_a10: str  # the row of Table A.10, as printed
    exact: str  # Table 3.2, "Exact"
    approximate: str  # Table 3.2, "Approximate"
    #: the subgroup of ``group`` that is an exact symmetry of the simulated environment (None: none of it)
    exact_subgroup: Group | None
    tau_rpp: float | None  # Table A.9: the RPP critic's target moving-average speed (baseline 0.005 everywhere)
    raw_obs_size: int
    state_order: tuple[int, ...] | None = None  # feature i is (converted) observation entry state_order[i]
    action_order: tuple[int, ...] | None = None  # feature i is raw action entry action_order[i]
    quaternion: int | None = None  # where a (w, x, y, z) quaternion starts in the raw observation (to a matrix)
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: features (state layout, action layout) that ``joint_signs="matched"`` negates so the group maps each joint's
    #: range onto its image's range; empty: the raw signs already agree (or the preset has no joints to match)
    sign_flips: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
    #: +1/-1 per state feature, applied after ``state_order`` (a turned torso's copies of its 2-vectors); None: +1
    state_factors: tuple[float, ...] | None = None
    #: the fields that lay the torso out in the group's frame (``torso="turned"``, :meth:`with_torso`); empty: the
    #: preset has no such layout
    turned_torso: Mapping[str, Any] = field(default_factory=dict)

    def with_torso(self, torso: str = "scalars", joint_signs: str = "raw") -> LocomotionPreset:
        """The preset as the equivariant networks see it under ``torso`` (:data:`~symkit.rl.settings.TORSO`): itself
        for ``"scalars"`` (Table A.10); for ``"turned"`` the layout of :attr:`turned_torso`, which makes the group
        an exact symmetry of the simulator together with ``joint_signs="matched"`` (required; Ant only)."""
        if torso not in TORSO:
            raise ValueError(f"torso must be one of {TORSO}, got {torso!r}")
        if torso == "scalars":
            return self
        if not self.turned_torso:
            raise ValueError(f"{self.name}: torso='turned' needs a layout that turns the torso with the group; only "
                             "Ant has one")
        if joint_signs != "matched":
            raise ValueError(f"{self.name}: torso='turned' needs joint_signs='matched' (the relabelled legs are an "
                             f"exact symmetry only with the reversed ankles negated), got joint_signs={joint_signs!r}")
        return replace(self, **self.turned_torso, turned_torso={})

    def signs(self, joint_signs: str = "raw") -> tuple[np.ndarray, np.ndarray]:
        """The +1/-1 factors of the state and action features (rep layout) under ``joint_signs``
        (:data:`~symkit.rl.settings.JOINT_SIGNS`): all ones for ``"raw"``; ``"matched"`` negates
        :attr:`sign_flips` and is refused for a preset without any."""
        if joint_signs not in JOINT_SIGNS:
            raise ValueError(f"joint_signs must be one of {JOINT_SIGNS}, got {joint_signs!r}")
        state, action = np.ones(self.state_size), np.ones(self.action_size)
        if joint_signs == "matched":
            if not any(self.sign_flips):
                raise ValueError(f"{self.name}: joint_signs='matched' needs joints to negate; only presets with "
                                 "sign_flips have them (Ant)")
            state[list(self.sign_flips[0])], action[list(self.sign_flips[1])] = -1.0, -1.0
        return state, action

    @property
    def state_size(self) -> int:
        return self.state_rep.size

    @property
    def action_size(self) -> int:
        return self.action_rep.size

    def features(self, obs: np.ndarray) -> np.ndarray:
        """Raw observations (..., raw_obs_size) in the state rep's layout (..., state_size)."""
        obs = np.asarray(obs, dtype=float)
        if obs.shape[-1] != self.raw_obs_size:
            raise ValueError(f"{self.name}: expected observations of {self.raw_obs_size} numbers, got {obs.shape[-1]}")
        if self.quaternion is not None:
            i = self.quaternion
            obs = np.concatenate([obs[..., :i], quaternion_to_matrix(obs[..., i:i + 4]), obs[..., i + 4:]], -1)
        obs = obs if self.state_order is None else obs[..., list(self.state_order)]
        return obs if self.state_factors is None else obs * np.asarray(self.state_factors)

    def raw_observation(self, state: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`features` (presets without a quaternion conversion only)."""
        if self.quaternion is not None:
            raise ValueError(f"{self.name}: the rotation matrix features have no unique raw observation")
        state = np.asarray(state, dtype=float)
        return state if self.state_order is None else state[..., np.argsort(self.state_order)]

    def action_features(self, action: np.ndarray) -> np.ndarray:
        """Raw actions in the action rep's layout."""
        action = np.asarray(action, dtype=float)
        return action if self.action_order is None else action[..., list(self.action_order)]

    def raw_action(self, action: np.ndarray) -> np.ndarray:
        """Actions in the rep's layout back in the environment's order (the inverse of :meth:`action_features`)."""
        action = np.asarray(action, dtype=float)
        return action if self.action_order is None else action[..., np.argsort(self.action_order)]

    def exact_generators(self) -> list[Any]:
        """Elements of ``group`` (as ``rep.rho`` takes them) that generate its exact subgroup (empty: none)."""
        H = self.exact_subgroup
        if H is None:
            return []
        if H == self.group:
            return list(self.group.discrete_generators)
        factors = self.group.factors
        return [{f: (h if f == H else np.eye(f.d)) for f in factors} for h in H.discrete_generators]

    def make_env(self, **kwargs: Any) -> Any:
        """``gymnasium.make(env_id)`` with the preset's observation settings (plus ``kwargs``). What MuJoCo warns
        of while compiling the model comes as a Python warning (:func:`mujoco_warnings`)."""
        gym = require_gymnasium()
        with mujoco_warnings():
            return gym.make(self.env_id, **{**self.env_kwargs, **kwargs})


def _pairs(first: int, n: int) -> list[int]:
    """Indices that interleave a right block [first, first + n) with the left block after it: r0 l0 r1 l1 ..."""
    return [i for k in range(n) for i in (first + k, first + n + k)]


def _ant_turned_torso(z4: Group) -> dict[str, Any]:
    """Ant's torso in the leg cycle's frame (``torso="turned"``). Relabelling leg k as leg k+1 describes the same
    ant with its body frame turned by -90 degrees about z: the quaternion ``q -> q r``, so each row ``(a, b)`` of the
    rotation matrix's first two columns and the body-frame angular velocity's ``(x, y)`` turn by +90 degrees,
    ``(a, b) -> (-b, a)``, which the cycle of ``(a, b, -a, -b)`` in ``V`` is. The world-frame linear velocity, the
    height, the matrix's third column (the body's z axis) and the angular velocity about z do not move. The
    converted observation (32: z, R row-major, 8 joints, linear and angular velocity, 8 joint velocities) becomes
    8 scalars and 8 copies of ``V``: R's three rows, hips, ankles, the angular velocity, hips' and ankles'
    velocities."""
    def turning(first: int) -> tuple[list[int], list[float]]:
        return [first, first + 1, first, first + 1], [1.0, 1.0, -1.0, -1.0]

    scalars = [0, 3, 6, 9, 18, 19, 20, 23]
    blocks = [turning(1), turning(4), turning(7), ([10, 12, 14, 16], [1.0] * 4), ([11, 13, 15, 17], [1.0] * 4),
              turning(21), ([24, 26, 28, 30], [1.0] * 4), ([25, 27, 29, 31], [1.0] * 4)]
    order = scalars + [i for index, _ in blocks for i in index]
    factors = [1.0] * len(scalars) + [f for _, sign in blocks for f in sign]
    return {"state_rep": len(scalars) * Scalar + len(blocks) * V(z4), "state_order": tuple(order),
            "state_factors": tuple(factors), "quaternion": 1, "sign_flips": ((25, 26, 37, 38), (5, 6)),
            "exact": "Z4 (legs relabelled; torso='turned', joint_signs='matched')", "exact_subgroup": z4,
            "table_a10": "not Table A.10's: R^8 + V^8 | V^2 | Z4 (torso turned)"}


def _build() -> dict[str, LocomotionPreset]:
    z2, z4, so2 = Z(2), Z(4), SO2eR3()
    P = PseudoScalar(z2)
    Plr = PseudoScalar(Z2_LEFT_RIGHT)
    joints_lr_fb = Plr * V(Z2_FRONT_BACK)  # the two joints: mirrored (sign) and swapped head <-> tail
    presets = [
        LocomotionPreset(
            "Hopper", "Hopper-v5", z2,
            state_rep=Scalar + 5 * P + Scalar + 4 * P, action_rep=3 * P, action_scale_rep=3 * Scalar,
            table_a10="R + P^5 + R + P^4 | P^3 | Z2", exact="none", approximate="Z2 (front/back)",
            exact_subgroup=None, tau_rpp=0.005, raw_obs_size=11),
        LocomotionPreset(
            "Swimmer", "Swimmer-v5", Z2_LEFT_RIGHT * Z2_FRONT_BACK,
            state_rep=Plr + joints_lr_fb + Scalar + Plr + Plr + joints_lr_fb, action_rep=joints_lr_fb,
            action_scale_rep=V(Z2_FRONT_BACK),
            table_a10="R + P_lr + P_lr V_fb + (R + P)^2 + P_lr V_fb | P_lr V_fb | Z2_lr x Z2_fb (10 numbers for 8)",
            exact="Z2 (left/right)", approximate="Z2 x Z2 (left/right, front/back)",
            exact_subgroup=Z2_LEFT_RIGHT, tau_rpp=0.004, raw_obs_size=8),
        LocomotionPreset(
            "HalfCheetah", "HalfCheetah-v5", z2,
            state_rep=Scalar + 8 * P + Scalar + 7 * P, action_rep=6 * P, action_scale_rep=6 * Scalar,
            table_a10="R + P^8 + R + P^7 | P^6 | Z2", exact="none", approximate="Z2 (front/back)",
            exact_subgroup=None, tau_rpp=0.005, raw_obs_size=17),
        LocomotionPreset(
            "Walker2d", "Walker2d-v5", z2,
            state_rep=2 * Scalar + 3 * V(z2) + 3 * Scalar + 3 * V(z2), action_rep=3 * V(z2),
            action_scale_rep=3 * V(z2),
            table_a10="R^2 + V^3 + R^3 + V^3 | V^3 | Z2", exact="Z2 (left/right)", approximate="Z2",
            exact_subgroup=z2, tau_rpp=0.004, raw_obs_size=17,
            state_order=(0, 1, *_pairs(2, 3), 8, 9, 10, *_pairs(11, 3)), action_order=tuple(_pairs(0, 3))),
        LocomotionPreset(
            "Ant", "Ant-v5", z4,
            state_rep=5 * Scalar + 2 * V(z4) + 6 * Scalar + 2 * V(z4), action_rep=2 * V(z4),
            action_scale_rep=2 * V(z4),
            table_a10="R^5 + V^2 + R^6 + V^2 | V^2 | Z4", exact="Z2 (reflection)", approximate="D4 x O(2)",
            exact_subgroup=None, tau_rpp=0.005, raw_obs_size=27,
            # hips 1-4 then ankles 1-4, positions (raw 5..12) and velocities (raw 19..26); actions come as
            # hip_4, ankle_4, hip_1, ankle_1, hip_2, ankle_2, hip_3, ankle_3
            state_order=(0, 1, 2, 3, 4, 5, 7, 9, 11, 6, 8, 10, 12, *range(13, 19), 19, 21, 23, 25, 20, 22, 24, 26),
            action_order=(2, 4, 6, 0, 3, 5, 7, 1),
            env_kwargs={"include_cfrc_ext_in_observation": False},
            # the ankles of legs 2 and 3 bend the other way (their ranges are -70..-30 degrees, legs 1 and 4
            # 30..70): negated, the leg cycle maps every ankle's range onto the next one's (joint_signs="matched")
            sign_flips=((10, 11, 24, 25), (5, 6)),
            turned_torso=_ant_turned_torso(z4)),
        LocomotionPreset(
            "Humanoid", "Humanoid-v5", so2,
            state_rep=Scalar + T(2)(so2) + 17 * Scalar + 2 * V(so2) + 17 * Scalar, action_rep=17 * Scalar,
            action_scale_rep=17 * Scalar,
            table_a10="R + V_SO(3)^(x2) + R^17 + V_SO(3)^2 + R^17 | R^17 | SO(2)", exact="Z2 (left/right)",
            approximate="Z2 x O(2)", exact_subgroup=None, tau_rpp=None, raw_obs_size=45, quaternion=1,
            env_kwargs={"include_cinert_in_observation": False, "include_cvel_in_observation": False,
                        "include_qfrc_actuator_in_observation": False, "include_cfrc_ext_in_observation": False}),
    ]
    return {p.name: p for p in presets}


#: the six presets of Table A.10, by name: Hopper, Swimmer, HalfCheetah, Walker2d, Ant, Humanoid
PRESETS: dict[str, LocomotionPreset] = _build()


def _build_extra() -> dict[str, LocomotionPreset]:
    z2 = Z(2)
    P = PseudoScalar(z2)
    return {"InvertedPendulum": LocomotionPreset(
        "InvertedPendulum", "InvertedPendulum-v5", z2,
        state_rep=4 * P, action_rep=P, action_scale_rep=Scalar,
        table_a10="not in Table A.10: P^4 | P | Z2", exact="none (the pole leans 1 mm)",
        approximate="Z2 (mirror)", exact_subgroup=None, tau_rpp=None, raw_obs_size=4)}


#: presets outside the thesis's tables: ``InvertedPendulum``, which SAC learns in a few thousand steps (a first run
#: that shows learning in about a minute on a CPU; symkit's tests use it so). Its mirror (the cart's position and
#: the pole's angle, their velocities and the force all change sign) is almost a symmetry of the simulator: the
#: model's pole runs from ``(0, 0, 0)`` to ``(0.001, 0, 0.6)``, leaning 1 mm, so a mirrored step differs from the
#: step mirrored by 0.004-0.03% of the state (an approximate symmetry, the kind RPP is for). Its critics move at
#: the baseline's speed, 0.005, whatever the model (Table A.9 has no row for it).
EXTRA_PRESETS: dict[str, LocomotionPreset] = _build_extra()


def preset(name: str) -> LocomotionPreset:
    """The preset of an environment: ``"Hopper"`` or ``"Hopper-v5"`` (case-insensitive), from :data:`PRESETS` or
    :data:`EXTRA_PRESETS`."""
    key = str(name).split("-")[0].lower()
    for p in (*PRESETS.values(), *EXTRA_PRESETS.values()):
        if p.name.lower() == key:
            return p
    raise ValueError(f"no preset for {name!r}; known: {', '.join([*PRESETS, *EXTRA_PRESETS])}")
