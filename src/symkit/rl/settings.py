"""The SAC settings' vocabulary and the RL code's values (thesis Sec. 3.6.1; the residual-pathway-priors RL code, a
jax-rl fork), importable without stable-baselines3: :mod:`symkit.rl.sac` builds from them, and the rl-sac experiment
validates and reports its configs with them."""

from __future__ import annotations

from symkit._checks import check_number

__all__ = ["KINDS", "MLP_KINDS", "network_kinds", "HIDDEN", "STD_PARAMS", "JOINT_SIGNS", "TORSO", "RL_BILINEAR_SCALE",
           "RL_TARGET_ENTROPY_SCALE", "RPP_BETAS", "check_beta1"]

#: the network families of actor and critics: ``relu-mlp`` is the RL code's baseline (jax-rl's ReLU networks),
#: ``mlp`` symkit's swish MLP (the EMLP chapters' baseline), ``emlp`` exactly equivariant, ``rpp`` the RPP-EMLP,
#: ``rpp-policy`` an RPP-EMLP actor with the baseline's ReLU MLP critics (thesis Figure A.2: RPP in the policy only)
KINDS = ("relu-mlp", "mlp", "emlp", "rpp", "rpp-policy")
#: the kinds without symmetry (no bilinear layers, no hidden reps): each one's hidden activation
MLP_KINDS = {"mlp": "swish", "relu-mlp": "relu"}
#: the kinds whose actor and critics differ: ``(actor, critics)``
_MIXED = {"rpp-policy": ("rpp", "relu-mlp")}


def network_kinds(kind: str) -> tuple[str, str]:
    """The network families ``(actor, critics)`` of a :data:`KINDS` entry: the kind itself for both, but for
    ``rpp-policy`` (an RPP-EMLP actor, ReLU MLP critics)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return _MIXED.get(kind, (kind, kind))
#: the hidden reps of the equivariant networks: the RL code's per environment, or 136/256 scalars and copies of V
HIDDEN = ("rl-code", "uniform")
#: how the actor's second head becomes the policy's standard deviation: the RL code's (jax-rl's) ``softplus``,
#: clipped to ``[e^-10, e^2]``, or stable-baselines3's ``exp`` of the head clamped to ``[-20, 2]``
STD_PARAMS = ("softplus", "exp")

#: the joints' sign conventions in the networks' features: ``raw`` as the environment gives them (Table A.10 and the
#: RL code), ``matched``: the joints a preset names (:attr:`~symkit.rl.presets.LocomotionPreset.sign_flips`) negated,
#: so that its group maps each joint's range onto the range of the joint it is sent to (Ant's ankles)
JOINT_SIGNS = ("raw", "matched")
#: how the equivariant networks see the torso: ``scalars`` (Table A.10: its orientation and velocities do not move
#: under the group), ``turned``: its rotation matrix and body-frame angular velocity turn with the group as
#: relabelling the body's parts turns the body frame (:meth:`~symkit.rl.presets.LocomotionPreset.with_torso`; Ant)
TORSO = ("scalars", "turned")
#: the bilinear layers' output scale in the RL code's flax EMLP (``rpp/flax.py``; emlp's objax and pytorch layers use
#: 0.1, symkit's default)
RL_BILINEAR_SCALE = 0.03
#: the RL code's (and jax-rl's) target entropy, ``-0.5 x`` the action dimension (stable-baselines3's "auto": ``-1 x``)
RL_TARGET_ENTROPY_SCALE = 0.5
#: the RPP networks' Adam betas (thesis A.2.2, the RL code's ``gan_betas``: the GAN setting); Adam's: (0.9, 0.999)
RPP_BETAS = (0.5, 0.999)


def check_beta1(where: str, beta1: float) -> float:
    """``beta1`` as a float if it is a valid first Adam beta (``0 <= beta1 < 1``); else the error of
    :func:`symkit._checks.check_number` (wrong type, negative, not finite) or a ValueError (1 or more), naming
    ``where``."""
    what = f"{where}: rpp_beta1 (the RPP networks' first Adam beta)"
    value = check_number(what, beta1)
    if value >= 1:
        raise ValueError(f"{what} must be a number in [0, 1), got {beta1!r}")
    return value
