"""Hypothesis strategies for random rep expressions (shared by the core tests)."""

from hypothesis import strategies as st

from symkit.reps import Scalar, V


@st.composite
def rep_exprs(draw, G, max_size=120):
    """Random expressions of sums, products, duals and multiplicities over V(G), of bounded size."""
    v = V(G)
    atoms = [Scalar, v, v.T]

    def build(depth):
        if depth == 0:
            return draw(st.sampled_from(atoms))
        op = draw(st.sampled_from(["leaf", "sum", "prod", "mult", "dual", "pow"]))
        if op == "leaf":
            return draw(st.sampled_from(atoms))
        a = build(depth - 1)
        if op == "dual":
            return a.T
        if op == "mult":
            return draw(st.integers(1, 3)) * a
        if op == "pow":
            return a ** draw(st.integers(0, 2)) if a.size <= 12 else a
        b = build(depth - 1)
        if op == "sum":
            return a + b
        return a * b if a.size * b.size <= max_size else a + b

    rep = build(3)
    return rep if rep.size <= max_size else v
