"""Tables A.1-A.8 of the thesis and the extra facts of the notes (§5.2), cell by cell."""

import itertools
import re
from math import comb, factorial, prod

import numpy as np
import pytest

from symkit.groups import RubiksCube, S
from symkit.groups.perm import pointwise_stabilizer
from symkit.lab.experiments.thesis_tables import RankCell, compute_rank, format_tables, thesis_cells
from symkit.reps import T

QUICK = thesis_cells(tier="quick")
FULL_ONLY = [c for c in thesis_cells(tier="full") if c.tier == "full"]
ALL_ONLY = [c for c in thesis_cells(tier="all") if c.tier == "all"]


def weyl_invariants(kind: str, n: int, k: int) -> int:
    """dim of the invariants of V^(x)k for SO(n), or Sp(n) on C^2n, by the Weyl integration formula: the mean of
    chi_V^k over the maximal torus, weighted by the Weyl density. The integrand is a trigonometric polynomial of
    degree below the grid size, so the uniform grid integrates it exactly (an independent check of the solvers)."""
    m = n // 2 if kind == "SO" else n
    assert m <= 3, "a grid over a torus of rank > 3 is too large; use a Brauer count"
    points = k + 2 * m + 1  # the integrand has degree k + 2m in each angle
    grid = 2 * np.pi * np.arange(points) / points
    angles = np.meshgrid(*([grid] * m), indexing="ij")
    cos = [np.cos(t) for t in angles]
    chi = sum(2 * c for c in cos) + (1.0 if kind == "SO" and n % 2 else 0.0)
    density = np.ones_like(chi)
    for i, j in itertools.combinations(range(m), 2):
        density = density * (cos[i] - cos[j]) ** 2
    for t in angles:
        if kind == "SO" and n % 2:
            density = density * np.sin(t / 2) ** 2
        elif kind == "Sp":
            density = density * np.sin(t) ** 2
    value = float((chi**k * density).sum() / density.sum())
    assert abs(value - round(value)) < 1e-6, value
    return round(value)


def stirling2(k: int, j: int) -> int:
    return sum((-1) ** i * comb(j, i) * (j - i) ** k for i in range(j + 1)) // factorial(j)


def independent_rank(cell: RankCell) -> int:
    """The rank of a cell the thesis left blank, by a method that shares no code with the solvers: closed forms
    (Z_n: n^(k-1); S_n: set partitions of k into at most n blocks; O(n) and Sp(n), k even with n >= k/2: (k-1)!!,
    k odd: 0), Weyl integration (SO(n), Sp(n) with n < k/2), or counting orbits with stabilisers (the Rubik's
    cube)."""
    k = int(re.match(r"T\((\d+)", cell.rep).group(1))
    family, arg = re.match(r"([A-Za-z]+)\(?(\w*)\)?", cell.group).groups()
    if cell.table == "A.1":
        return int(arg) ** (k - 1)
    if cell.table == "A.2":
        return sum(stirling2(k, j) for j in range(1, min(int(arg), k) + 1))
    if cell.table == "A.3":
        return _orbits_by_stabilisers(RubiksCube(arg) if arg else RubiksCube(), k)
    if cell.table == "A.4":
        return weyl_invariants("SO", int(arg), k)
    if cell.table == "A.5":
        assert k % 2 or int(arg) >= k // 2, "the Brauer count needs n >= k/2"
        return 0 if k % 2 else prod(range(k - 1, 0, -2))
    if cell.table == "A.7":  # Sp(n) on C^2n: -I kills odd k; (k-1)!! once n >= k/2 (symplectic Brauer count)
        if k % 2:
            return 0
        return prod(range(k - 1, 0, -2)) if int(arg) >= k // 2 else weyl_invariants("Sp", int(arg), k)
    raise AssertionError(f"no independent method for {cell}")


def check_rank_matches_thesis(cell: RankCell) -> int:
    r = compute_rank(cell)
    if cell.thesis is None:
        assert r == independent_rank(cell), (cell, r)
    elif cell.thesis.startswith(">"):
        assert r > int(cell.thesis[1:]), (cell, r)
    else:
        assert r == int(cell.thesis), (cell, r)
    return r


def test_every_table_is_listed():
    tables = {c.table for c in thesis_cells(tier="all")}
    assert tables == {"A.1", "A.2", "A.3", "A.4", "A.5", "A.6", "A.7", "A.8", "extra"}
    # every printed row and column is present
    assert sum(c.table == "A.4" for c in thesis_cells(tier="all")) == 6 * 7
    assert sum(c.table == "A.8" for c in thesis_cells(tier="all")) == 3 * 7
    assert len(QUICK) > 250


@pytest.mark.parametrize("cell", QUICK, ids=lambda c: f"{c.table}-{c.group}-{c.rep}")
def test_quick_cells_match_the_thesis(cell):
    check_rank_matches_thesis(cell)


@pytest.mark.parametrize("cell", FULL_ONLY + ALL_ONLY, ids=lambda c: f"{c.table}-{c.group}-{c.rep}")
def test_slow_cells_match_the_thesis(cell):
    check_rank_matches_thesis(cell)


def test_rubik_physical_cube_small_ranks():
    # facets: 24 corner and 24 edge stickers -> 2 orbits. Ordered pairs: corner-corner (same facet, the facet
    # clockwise / anticlockwise on the same cubie, different cubies) 4, edge-edge (same, same cubie, other) 3,
    # corner-edge 1, edge-corner 1 -> 9. The reference generators identify more pairs (thesis: 6).
    G = RubiksCube()
    assert T(1, 0, G).rank() == 2
    assert T(2, 0, G).rank() == 9
    assert T(2, 0, RubiksCube("reference")).rank() == 6


_STABILISER_COUNTS: dict = {}


def _point_orbit_representatives(gens: list, n: int) -> list[int]:
    seen, reps = np.zeros(n, bool), []
    for x in range(n):
        if not seen[x]:
            reps.append(x)
            seen[x] = True
            stack = [x]
            while stack:
                y = stack.pop()
                for g in gens:
                    z = int(g[y])
                    if not seen[z]:
                        seen[z] = True
                        stack.append(z)
    return reps


def _orbits_by_stabilisers(G, k):
    """Orbits of G on k-tuples counted group-theoretically: the orbits of G on tuples (x, y, ...) whose first point
    lies in the orbit of x are those of the stabiliser of x on the remaining (k-1)-tuples, so the count is a sum over
    point-orbit representatives, recursively (Schreier-Sims for the stabilisers; independent of the union-find
    labelling of tuples the solver uses)."""
    if (str(G), k) not in _STABILISER_COUNTS:

        def count(gens: list, depth: int) -> int:
            reps = _point_orbit_representatives(gens, G.d)
            if depth == 1:
                return len(reps)
            stack = np.array(gens, dtype=np.int64).reshape(-1, G.d)
            return sum(count(pointwise_stabilizer(stack, G.d, (x,)), depth - 1) for x in reps)

        _STABILISER_COUNTS[str(G), k] = count([np.asarray(g) for g in G.perm_generators], k)
    return _STABILISER_COUNTS[str(G), k]


def test_orbit_counts_agree_with_stabiliser_counting():
    assert _orbits_by_stabilisers(S(5), 4) == T(4, 0, S(5)).rank() == 15
    assert _orbits_by_stabilisers(S(3), 4) == T(4, 0, S(3)).rank() == 14


def test_rubik_T4_exact_and_cross_checked():
    """Physical cube (facets as points) T(4) = 350, reference generators T(4) = 94 (the thesis prints only
    '> 20'), each equal to the orbit count by stabilisers (Schreier-Sims), which shares no code with the solver."""
    G = RubiksCube()
    assert T(4, 0, G).rank() == 350 == _orbits_by_stabilisers(G, 4)
    assert T(3, 0, G).rank() == _orbits_by_stabilisers(G, 3)
    ref = RubiksCube("reference")
    assert T(4, 0, ref).rank() == 94 == _orbits_by_stabilisers(ref, 4)


def test_weyl_integration_agrees_with_printed_cells():
    """The independent Weyl count used for blank cells reproduces cells the thesis prints."""
    for cell in thesis_cells(["A.4", "A.7"], tier="quick"):
        if cell.thesis is not None and not cell.thesis.startswith(">"):
            kind = "SO" if cell.table == "A.4" else "Sp"
            n = int(re.search(r"\((\d+)\)", cell.group).group(1))
            k = int(re.match(r"T\((\d+)", cell.rep).group(1))
            if (n // 2 if kind == "SO" else n) <= 3:
                assert weyl_invariants(kind, n, k) == int(cell.thesis), cell


def test_format_tables_shows_thesis_values_and_disagreements():
    cells = thesis_cells(["A.4", "extra"], tier="quick")
    res = {c: compute_rank(c) for c in cells}
    bogus = RankCell("A.4", "SO(3)", "T(9)", "7", "quick")
    res[bogus] = 8
    text = format_tables(res)
    assert "Table A.4" in text and "Extra facts" in text
    assert "8!7" in text  # a disagreement is flagged
    assert "SO(3)" in text and "T(4)" in text
    missing = {c: None for c in cells[:3]}
    assert "(" in format_tables(missing)


def test_bad_cell_requests():
    with pytest.raises(ValueError, match="tier"):
        thesis_cells(tier="fast")
    with pytest.raises(ValueError, match="unknown tables"):
        thesis_cells(["A.9"])
    with pytest.raises(ValueError, match="unknown table group"):
        compute_rank(RankCell("A.4", "SO(99x)", "T(2)", None, "quick"))
    with pytest.raises(TypeError):
        compute_rank("SO(3) T(2)")
