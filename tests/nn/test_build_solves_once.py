"""Building a model solves each distinct canonical block of its hom-spaces once (issue 55): the layers, the bias
expansions and the irreducible-basis plan ask :mod:`symkit.reps.solve` for the same blocks several times, and
every ask after the first is answered from the solver's memory cache. Counted here at the solvers themselves (every
method's nullspace or basis routine), with the on-disk cache off and the memory cache cleared first."""

from __future__ import annotations

from collections import Counter

import pytest

import symkit.reps.solve as solve
from symkit.groups import SO, D, O, S, SO13p
from symkit.nn import EMLP, RPPEMLP
from symkit.reps import Scalar, T, V, clear_memory_cache

#: the routines that do a solve, by the name symkit.reps.solve calls them under
SOLVERS = ("dense_nullspace", "iterative_nullspace", "orbit_basis", "brauer_basis", "coupled_invariants",
           "_weight_nullspace", "orbit_count", "coupled_rank", "brauer_rank")


@pytest.fixture
def solves(monkeypatch) -> Counter:
    """Each (solver, group, leaves, method) that reached a solver, with how many times it did."""
    monkeypatch.setenv("SYMKIT_CACHE", "0")
    clear_memory_cache()
    calls: Counter = Counter()
    current: list[tuple] = []
    original_segment = solve._solve_segment

    def segment(G, leaves, method, want):
        current.append((G.name, tuple(map(repr, leaves)), method, want))
        try:
            return original_segment(G, leaves, method, want)
        finally:
            current.pop()

    def counted(name):
        fn = getattr(solve, name)

        def wrapper(*args, **kwargs):
            calls[(name, current[-1] if current else None)] += 1
            return fn(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(solve, "_solve_segment", segment)
    for name in SOLVERS:
        monkeypatch.setattr(solve, name, counted(name))
    yield calls
    clear_memory_cache()


@pytest.mark.parametrize("build", [
    lambda: EMLP(T(2) + V, V + Scalar, SO(3), ch=64, num_layers=2),
    lambda: EMLP(2 * V, Scalar, O(3), ch=96, num_layers=3),
    lambda: RPPEMLP(V + Scalar, T(2), O(3), ch=48, num_layers=2),
    lambda: EMLP(V, Scalar + V, S(5), ch=40, num_layers=2),
    lambda: EMLP(V + Scalar, V, D(6), ch=32, num_layers=2),
    lambda: EMLP(2 * V, Scalar, SO13p(), ch=32, num_layers=2),
], ids=["SO3-emlp", "O3-emlp", "O3-rpp", "S5-emlp", "D6-emlp", "Lorentz-emlp"])
def test_each_distinct_block_is_solved_once(solves, build):
    build()
    assert solves, "no solver ran: the counting reaches nothing (the test would pass for any build)"
    repeated = {key: n for key, n in solves.items() if n > 1}
    assert not repeated, repeated
