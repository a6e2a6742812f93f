"""Representations: V, Scalar, T(p, q), duals, sums, products, hom-spaces, their equivariant bases, and their
split into irreducible subspaces (`isotypic_decomposition`)."""

from symkit.reps.blocks import Block
from symkit.reps.core import (
    CustomRep,
    Dual,
    ProductRep,
    PseudoScalar,
    Rep,
    Scalar,
    ScalarRep,
    SumRep,
    T,
    V,
    Vector,
    canonical_blocks,
)
from symkit.reps.errors import equivariance_error
from symkit.reps.irreps import Irrep, from_irreps, irrep_generators, to_irreps
from symkit.reps.isotypic import IsotypicDecomposition, TypeDecomposition, isotypic_decomposition
from symkit.reps.solve import StructuredBasis, clear_memory_cache

__all__ = [
    "Rep", "V", "Vector", "Scalar", "ScalarRep", "T", "Dual", "SumRep", "ProductRep", "CustomRep", "PseudoScalar",
    "Block", "StructuredBasis", "canonical_blocks", "clear_memory_cache", "equivariance_error",
    "Irrep", "from_irreps", "to_irreps", "irrep_generators",
    "isotypic_decomposition", "IsotypicDecomposition", "TypeDecomposition",
]
