"""Groups: `Group` (discrete generators + Lie algebra basis), the built-in groups and direct products."""

from symkit.groups.base import FactoredArray, Group, ProductGroup
from symkit.groups.builtin import (
    GL,
    O11,
    O13,
    SL,
    SO,
    SO13,
    SU,
    C,
    Cube,
    D,
    DkeR3,
    Embed,
    Lorentz,
    O,
    O2eR3,
    RubiksCube,
    S,
    Scaling,
    SO2eR3,
    SO11p,
    SO13p,
    Sp,
    Trivial,
    U,
    Z,
    ZksZnxZn,
)

__all__ = [
    "Group", "ProductGroup", "FactoredArray", "Trivial", "Z", "S", "C", "D", "SO", "O", "SO13p", "SO13", "O13",
    "Lorentz", "SO11p", "O11", "Sp", "SU", "U", "SL", "GL", "Scaling", "Cube", "RubiksCube", "ZksZnxZn", "Embed",
    "SO2eR3", "O2eR3", "DkeR3",
]
