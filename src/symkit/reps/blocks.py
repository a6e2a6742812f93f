"""The block, the unit the representation algebra (`symkit.reps.core`) hands to the solver (`symkit.reps.solve`):
copies of one tensor product of leaves and the flat positions each copy occupies (eq. 2.8). Imports neither."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Block"]


@dataclass(frozen=True, eq=False)
class Block:
    """`pos.shape[0]` copies of the tensor product of `leaves`; row c of `pos` lists the flat positions of copy c,
    in row-major order over the leaves' axes."""

    leaves: tuple
    pos: np.ndarray

    @property
    def size(self) -> int:
        return int(self.pos.shape[1])

    @property
    def mult(self) -> int:
        return int(self.pos.shape[0])
