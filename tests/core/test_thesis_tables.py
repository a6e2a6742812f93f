"""Tables A.1-A.8 of the thesis and the extra facts of the notes (§5.2), cell by cell."""

import numpy as np
import pytest

from symkit.groups import RubiksCube, S
from symkit.groups.perm import pointwise_stabilizer
from symkit.linalg.orbits import orbit_count, tuple_orbit_labels
from symkit.reps import T
from symkit.reps.thesis_tables import RankCell, compute_rank, format_tables, thesis_cells

QUICK = thesis_cells(tier="quick")
FULL_ONLY = [c for c in thesis_cells(tier="full") if c.tier == "full"]
ALL_ONLY = [c for c in thesis_cells(tier="all") if c.tier == "all"]


def check_rank_matches_thesis(cell: RankCell) -> int:
    r = compute_rank(cell)
    if cell.thesis is None:
        assert r >= 0
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


@pytest.mark.slow
@pytest.mark.parametrize("cell", FULL_ONLY + ALL_ONLY, ids=lambda c: f"{c.table}-{c.group}-{c.rep}")
def test_slow_cells_match_the_thesis(cell):
    check_rank_matches_thesis(cell)


def test_filled_blank_cells_follow_the_known_patterns():
    # cells the thesis left blank, computed here, against the closed forms of the notes (§3.7):
    # Z_n: n^(k-1); S_n: set partitions of k into at most n blocks; O(n) even k >= ...: (k-1)!! once n >= k/2
    from math import comb, factorial

    def stirling2(k, j):
        return sum((-1) ** i * comb(j, i) * (j - i) ** k for i in range(j + 1)) // factorial(j)

    for cell in thesis_cells(tier="quick"):
        if cell.thesis is not None:
            continue
        p = int(cell.rep[2:-1].split(",")[0])
        r = compute_rank(cell)
        if cell.table == "A.1":
            n = int(cell.group[2:-1])
            assert r == n ** (p - 1)
        if cell.table == "A.2":
            n = int(cell.group[2:-1])
            assert r == sum(stirling2(p, j) for j in range(1, min(n, p) + 1))


def test_rubik_physical_cube_small_ranks():
    # facets: 24 corner and 24 edge stickers -> 2 orbits. Ordered pairs: corner-corner (same facet, the facet
    # clockwise / anticlockwise on the same cubie, different cubies) 4, edge-edge (same, same cubie, other) 3,
    # corner-edge 1, edge-corner 1 -> 9. The reference generators identify more pairs (thesis: 6).
    G = RubiksCube()
    assert T(1, 0, G).rank() == 2
    assert T(2, 0, G).rank() == 9
    assert T(2, 0, RubiksCube("reference")).rank() == 6


def _orbits_by_stabilisers(G, k):
    """Orbits of G on k-tuples counted group-theoretically: sum over orbit representatives x of (k-1)-tuples of
    the number of orbits of the pointwise stabiliser of x on single points (Schreier-Sims, independent of the
    union-find used by the solver for the k-tuples)."""
    perms, n = G.perm_generators, G.d
    lab = tuple_orbit_labels(perms, k - 1)
    reps = np.nonzero(lab == np.arange(len(lab)))[0]
    total = 0
    for r in reps:
        pts = tuple(int(x) for x in np.unravel_index(r, (n,) * (k - 1)))
        stab = pointwise_stabilizer(perms, n, pts)
        total += n if not stab else orbit_count(np.array(stab), 1)
    return total


def test_orbit_counts_agree_with_stabiliser_counting():
    assert _orbits_by_stabilisers(S(5), 4) == T(4, 0, S(5)).rank() == 15
    assert _orbits_by_stabilisers(S(3), 4) == T(4, 0, S(3)).rank() == 14


@pytest.mark.slow
def test_rubik_T4_exact_and_cross_checked():
    G = RubiksCube()
    r4 = T(4, 0, G).rank()
    assert r4 == _orbits_by_stabilisers(G, 4)
    ref = RubiksCube("reference")
    r4_ref = T(4, 0, ref).rank()
    assert r4_ref > 20  # the thesis's bound
    assert T(3, 0, G).rank() == _orbits_by_stabilisers(G, 3)


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
