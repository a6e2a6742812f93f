"""symkit.rl: symmetric models for MuJoCo locomotion (thesis Sec. 3.6): the state and action representations of
Table A.10 (:mod:`symkit.rl.presets`)."""

from symkit.rl.presets import PRESETS, LocomotionPreset, preset, quaternion_to_matrix, require_gymnasium

__all__ = ["PRESETS", "LocomotionPreset", "preset", "quaternion_to_matrix", "require_gymnasium"]
