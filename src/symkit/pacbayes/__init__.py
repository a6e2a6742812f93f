"""PAC-Bayes compression bounds (thesis ch. 5; Lotfi et al. 2022): how short a message describes a trained
classifier, and the error bound that length gives.

- :mod:`~symkit.pacbayes.bounds`: Catoni, McAllester, finite-class, hold-out and KL-inverse bounds; the point-mass
  KL under the universal prior; hyperparameter and label bits.
- :mod:`~symkit.pacbayes.projectors` and :mod:`~symkit.pacbayes.subspace`: ``theta = theta0 + P w`` with random
  projectors regenerated from a seed.
- :mod:`~symkit.pacbayes.quantize`: a learned codebook with the straight-through estimator.
- :mod:`~symkit.pacbayes.coding`: arithmetic coding (constriction) with an exact round trip, and message lengths.
- :mod:`~symkit.pacbayes.pipeline`: :func:`compute_bound` (Algorithm 2), the pruning baseline and the hold-out
  bound.
"""

from symkit.pacbayes.bounds import (
    catoni_bound,
    compressible_fraction,
    finite_class_bound,
    hoeffding_holdout_bound,
    hyperparameter_bits,
    kl_inverse,
    label_bits,
    mcallester_bound,
    point_mass_kl_bits,
    random_label_min_bits,
    seeger_bound,
)
from symkit.pacbayes.coding import (
    EncodedMessage,
    MessageLength,
    arithmetic_decode,
    arithmetic_encode,
    entropy_bits,
    huffman_bits,
    message_length,
)
from symkit.pacbayes.pipeline import BoundReport, compute_bound, error_rate, holdout_bound, pruning_bound
from symkit.pacbayes.projectors import Projector, film_mask, make_projector
from symkit.pacbayes.quantize import Quantizer
from symkit.pacbayes.subspace import SubspaceModel

__all__ = [
    "BoundReport", "EncodedMessage", "MessageLength", "Projector", "Quantizer", "SubspaceModel",
    "arithmetic_decode", "arithmetic_encode", "catoni_bound", "compressible_fraction", "compute_bound",
    "entropy_bits", "error_rate", "film_mask", "finite_class_bound", "hoeffding_holdout_bound", "holdout_bound",
    "huffman_bits", "hyperparameter_bits", "kl_inverse", "label_bits", "make_projector", "mcallester_bound",
    "message_length", "point_mass_kl_bits", "pruning_bound", "random_label_min_bits", "seeger_bound",
]
