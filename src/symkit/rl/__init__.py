"""symkit.rl: symmetric models for MuJoCo locomotion (thesis Sec. 3.6): the state and action representations of Table
A.10 (:mod:`symkit.rl.presets`), transition models trained on rollouts (:mod:`symkit.rl.transitions`, Table 3.3) and
SAC with RPP-EMLP actor and critics (:mod:`symkit.rl.sac`, imported on its own: it needs stable-baselines3; its
settings' names and the RL code's values are in :mod:`symkit.rl.settings`, which does not). The environments and SAC
need the ``rl`` extra: ``pip install 'symkit[rl]'``."""

from symkit.rl.presets import EXTRA_PRESETS, PRESETS, LocomotionPreset, preset, quaternion_to_matrix, require_gymnasium
from symkit.rl.transitions import (
    Rollouts,
    TransitionModel,
    build_transition_net,
    collect_rollouts,
    evaluate_transition_model,
    hidden_rep,
    model_rollout,
    sample_chunks,
    train_transition_model,
)

__all__ = [
    "PRESETS", "EXTRA_PRESETS", "LocomotionPreset", "preset", "quaternion_to_matrix", "require_gymnasium", "Rollouts",
    "TransitionModel", "build_transition_net", "collect_rollouts", "evaluate_transition_model", "hidden_rep",
    "model_rollout", "sample_chunks", "train_transition_model",
]
