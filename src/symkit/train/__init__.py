"""The one training loop of symkit: :class:`Trainer` (seeds, optimiser and schedule, mini-batches or a full-batch
objective, validation and early stopping, one progress bar, checkpoint and resume, hooks).

Every experiment that trains uses it; methods that need more than a gradient step (the marginal-likelihood
hyperparameter updates of seed 001, the bilevel sharing search of seed 004) plug in as hooks.
"""

from symkit.train.batching import batch_indices
from symkit.train.evaluation import accuracy, predict
from symkit.train.rollouts import evaluate_dynamics, train_dynamics
from symkit.train.trainer import Hook, Trainer, TrainResult, fused_options

__all__ = [
    "Hook", "TrainResult", "Trainer", "accuracy", "batch_indices", "evaluate_dynamics", "fused_options", "predict",
    "train_dynamics",
]
