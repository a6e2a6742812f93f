"""Tables A.1-A.8 of the thesis (ranks of invariant tensor subspaces) and the extra facts of the notes (§5.2).

`thesis_cells()` lists every cell with the thesis's text (None where the thesis left it blank) and a cost tier;
`compute_rank()` computes one cell with this library; `format_tables()` prints thesis-style tables with the thesis
value beside ours. Tiers: "quick" cells run in CI in seconds, "full" is the default of `symkit ranks`, "all" adds
the slow ones (the blank cells of the thesis that the machine can still fill, and the largest tensors).

Table A.3 note: the thesis's values (2, 6, 22) come from the reference package's face-net facet permutations,
which generate a group of order ~1.9e47 rather than the cube group (order ~4.3e19); ``RubiksCube(variant=
"reference")`` reproduces those generators and the physical ``RubiksCube()`` is listed as an extra row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from symkit.groups import (
    O13,
    SO,
    SO13,
    SU,
    C,
    D,
    Group,
    O,
    RubiksCube,
    S,
    SO13p,
    Sp,
    Z,
    ZksZnxZn,
)
from symkit.reps.core import T

__all__ = ["RankCell", "TABLES", "TIERS", "thesis_cells", "compute_rank", "format_tables", "group_from_name"]

TIERS = ("quick", "full", "all")
TABLES = ("A.1", "A.2", "A.3", "A.4", "A.5", "A.6", "A.7", "A.8", "extra")


@dataclass(frozen=True)
class RankCell:
    """One cell of a thesis table: rank of the invariant subspace of `rep` under `group`."""

    table: str
    group: str
    rep: str
    thesis: str | None
    tier: str


_TITLES = {
    "A.1": "Table A.1: Z_n, T_k",
    "A.2": "Table A.2: S_n, T_k",
    "A.3": "Table A.3: Rubik's cube group, T_k",
    "A.4": "Table A.4: SO(n), T_k",
    "A.5": "Table A.5: O(n), T_k",
    "A.6": "Table A.6: Lorentz groups, T_(k,0)",
    "A.7": "Table A.7: Sp(n), T_(k,0)",
    "A.8": "Table A.8: SU(n), T_(p,q) (p copies of V, q of V*)",
    "extra": "Extra facts (notes §5.2): C_k, D_k, Z_n x Z_n, Z_k ⋉ (Z_n x Z_n), S_n and Z_n T(1,1), Lorentz T(k-i,i)",
}

# tables where each row is a tensor rank and each column a group (as printed in the thesis)
_REP_ROWS = {"A.1", "A.2", "A.4", "A.5", "A.7"}

_GROUPS: dict[str, Callable[[], Group]] = {}


def _reg(name: str, fn: Callable[[], Group]) -> str:
    _GROUPS[name] = fn
    return name


def group_from_name(name: str) -> Group:
    """The group of a table cell from its display name (e.g. "SO(3)", "Z(3)×Z(3)")."""
    thesis_cells()  # the tables register their groups as they are built
    if name not in _GROUPS:
        raise ValueError(f"unknown table group {name!r}; known: {sorted(_GROUPS)}")
    return _GROUPS[name]()


def _parse_rep(rep: str) -> tuple[int, int]:
    m = re.fullmatch(r"T\((\d+)(?:,(\d+))?\)", rep.replace(" ", ""))
    if not m:
        raise ValueError(f"cannot parse table rep {rep!r}; expected 'T(k)' or 'T(p,q)'")
    return int(m.group(1)), int(m.group(2) or 0)


def _cost_tier(group: Group, p: int, q: int) -> str:
    """Cost tier of a cell, from the size of the tensor and the solver path that handles it."""
    k = p + q
    N = group.d**k
    if group.is_permutation:
        return "quick" if N <= 300_000 else ("full" if N <= 6_000_000 else "all")
    if getattr(group, "brauer", None) is not None:
        # matchings of k slots: (k-1)!!; the Gram matrix is m x m with k-step loop traces per entry
        if k <= 6:
            return "quick"
        if group.brauer[2] and k >= group.d and (k - group.d) % 2 == 0 and N > 200_000:
            return "all"
        if k <= 8:
            return "full" if (k == 8 or N > 200_000) else "quick"
        return "all"
    return "quick" if N <= 1000 else ("full" if N <= 2500 else "all")


def _build() -> list[RankCell]:
    cells: list[RankCell] = []

    def add(table: str, gname: str, fn: Callable[[], Group], rep: str, thesis: str | None, tier: str | None = None):
        _reg(gname, fn)
        p, q = _parse_rep(rep)
        cells.append(RankCell(table, gname, rep, thesis, tier or _cost_tier(fn(), p, q)))

    # ---- A.1: Z_n
    a1 = {
        2: [1, 2, 4, 8, 16, 32, 64], 3: [1, 3, 9, 27, 81, 243, 729], 4: [1, 4, 16, 64, 256, 1024, 4096],
        5: [1, 5, 25, 125, 625, 3125, None], 6: [1, 6, 36, 216, 1296, None, None],
        7: [1, 7, 49, 343, 2401, None, None], 8: [1, 8, 64, 512, None, None, None],
    }
    for n, vals in a1.items():
        for k, v in enumerate(vals, start=1):
            add("A.1", f"Z({n})", (lambda n=n: Z(n)), f"T({k})", None if v is None else str(v))
    # ---- A.2: S_n
    a2 = {
        2: [1, 2, 4, 8, 16, 32, 64], 3: [1, 2, 5, 14, 41, 122, 365], 4: [1, 2, 5, 15, 51, 187, 715],
        5: [1, 2, 5, 15, 52, 202, 855], 6: [1, 2, 5, 15, 52, 203, None], 7: [1, 2, 5, 15, 52, 203, None],
        8: [1, 2, 5, 15, 52, None, None],
    }
    for n, vals in a2.items():
        for k, v in enumerate(vals, start=1):
            add("A.2", f"S({n})", (lambda n=n: S(n)), f"T({k})", None if v is None else str(v))
    # ---- A.3: Rubik's cube (thesis values: reference generators), physical cube as an extra row
    for k, v in enumerate(["2", "6", "22", ">20"], start=1):
        add("A.3", "RubiksCube(reference)", lambda: RubiksCube("reference"), f"T({k})", v)
    for k in range(1, 5):
        add("A.3", "RubiksCube", lambda: RubiksCube(), f"T({k})", None)
    # ---- A.4: SO(n), rows T2..T8
    a4 = {
        2: [2, 0, 6, 0, 20, 0, 70], 3: [1, 1, 3, 6, 15, 36, 91], 4: [1, 0, 4, 0, 25, 0, 196],
        5: [1, 0, 3, 1, 15, 15, None], 6: [1, 0, 3, 0, 16, None, None], 7: [1, 0, 3, 0, 15, None, None],
    }
    for n, vals in a4.items():
        for k, v in enumerate(vals, start=2):
            add("A.4", f"SO({n})", (lambda n=n: SO(n)), f"T({k})", None if v is None else str(v))
    # ---- A.5: O(n)
    a5 = {
        2: [1, 0, 3, 0, 10, 0, 35], 3: [1, 0, 3, 0, 15, 0, 91], 4: [1, 0, 3, 0, 15, 0, 105],
        5: [1, 0, 3, 0, 15, 0, None], 6: [1, 0, 3, 0, 15, None, None], 7: [1, 0, 3, 0, 15, None, None],
    }
    for n, vals in a5.items():
        for k, v in enumerate(vals, start=2):
            add("A.5", f"O({n})", (lambda n=n: O(n)), f"T({k})", None if v is None else str(v))
    # ---- A.6: Lorentz
    a6 = {
        ("SO+(1,3)", SO13p): [1, 0, 4, 0, 25, 0, 196],
        ("SO(1,3)", SO13): [1, 0, 4, 0, 25, 0, 196],
        ("O(1,3)", O13): [1, 0, 3, 0, 15, 0, 105],
    }
    for (gname, cls), vals in a6.items():
        for k, v in enumerate(vals, start=2):
            add("A.6", gname, cls, f"T({k},0)", str(v))
    # ---- A.7: Sp(n)
    a7 = {
        1: [1, 0, 2, 0, 5, 0, 14], 2: [1, 0, 3, 0, 14, 0, 84], 3: [1, 0, 3, 0, 15, 0, None],
        4: [1, 0, 3, 0, 15, None, None], 5: [1, 0, 3, 0, None, None, None], 6: [1, 0, 3, 0, None, None, None],
    }
    for n, vals in a7.items():
        for k, v in enumerate(vals, start=2):
            add("A.7", f"Sp({n})", (lambda n=n: Sp(n)), f"T({k},0)", None if v is None else str(v))
    # ---- A.8: SU(n)
    cols = ["T(3,0)", "T(3,1)", "T(3,2)", "T(3,3)", "T(4,0)", "T(4,1)", "T(4,2)"]
    a8 = {2: [0, 2, 0, 5, 2, 0, 5], 3: [1, 0, 0, 6, 0, 3, 0], 4: [0, 0, 0, 6, 1, 0, 0]}
    for n, vals in a8.items():
        for c, v in zip(cols, vals):
            add("A.8", f"SU({n})", (lambda n=n: SU(n)), c, str(v))
    # ---- extra facts (notes §5.2); the C_k / D_k values are the notes' independent computation
    ck = {2: [0, 4, 0, 16], 3: [0, 2, 2, 6], 4: [0, 2, 0, 8], 6: [0, 2, 0, 6], 8: [0, 2, 0, 6]}
    dk = {2: [0, 2, 0, 8], 3: [0, 1, 1, 3], 4: [0, 1, 0, 4], 6: [0, 1, 0, 3], 8: [0, 1, 0, 3]}
    for k, vals in ck.items():
        for r, v in enumerate(vals, start=1):
            add("extra", f"C({k})", (lambda k=k: C(k)), f"T({r})", str(v))
    for k, vals in dk.items():
        for r, v in enumerate(vals, start=1):
            add("extra", f"D({k})", (lambda k=k: D(k)), f"T({r})", str(v))
    for n in (3, 4, 5):
        add("extra", f"Z({n})×Z({n})", (lambda n=n: Z(n) * Z(n)), "T(1,1)", str(n * n))
    for n in (3, 4):
        add("extra", f"ZksZnxZn(4,{n})", (lambda n=n: ZksZnxZn(4, n)), "T(1,1)", str(4 * n * n))
    for n in (2, 3, 4, 5, 6):
        add("extra", f"S({n})", (lambda n=n: S(n)), "T(1,1)", "2")
    for n in (3, 5, 8):
        add("extra", f"Z({n})", (lambda n=n: Z(n)), "T(1,1)", str(n))
    for gname, cls, reps in [
        ("SO+(1,3)", SO13p, {"T(1,1)": 1, "T(2,2)": 4, "T(3,1)": 4}),
        ("O(1,3)", O13, {"T(1,1)": 1, "T(2,2)": 3, "T(3,3)": 15}),
    ]:
        for rep, v in reps.items():
            add("extra", gname, cls, rep, str(v))
    return cells


_CELLS: list[RankCell] | None = None


def thesis_cells(tables: Sequence[str] | None = None, tier: str = "full") -> list[RankCell]:
    """Every cell of the given tables (default: all) whose tier is at most `tier` ("quick" < "full" < "all")."""
    global _CELLS
    if tier not in TIERS:
        raise ValueError(f"thesis_cells: tier must be one of {TIERS}, got {tier!r}")
    if tables is not None:
        if isinstance(tables, str):
            tables = [tables]
        bad = [t for t in tables if t not in TABLES]
        if bad:
            raise ValueError(f"thesis_cells: unknown tables {bad}; expected some of {TABLES}")
    if _CELLS is None:
        _CELLS = _build()
    lim = TIERS.index(tier)
    return [c for c in _CELLS if (tables is None or c.table in tables) and TIERS.index(c.tier) <= lim]


def compute_rank(cell: RankCell) -> int:
    """Rank of the invariant subspace of the cell's tensor rep, computed with `Rep.rank()` (method "auto")."""
    if not isinstance(cell, RankCell):
        raise TypeError(f"compute_rank: expected a RankCell, got {type(cell).__name__}")
    G = group_from_name(cell.group)
    p, q = _parse_rep(cell.rep)
    return T(p, q, G).rank()


def _cell_text(cell: RankCell, value: int | None) -> str:
    if value is None:
        return f"({cell.thesis})" if cell.thesis is not None else "-"
    if cell.thesis is None:
        return f"{value}*"
    if cell.thesis.startswith(">"):
        try:
            ok = value > int(cell.thesis[1:])
        except ValueError:
            ok = False
        return f"{value} [{cell.thesis}]" if ok else f"{value}!{cell.thesis}"
    return str(value) if str(value) == cell.thesis else f"{value}!{cell.thesis}"


def format_tables(results: Mapping[RankCell, int | None]) -> str:
    """Thesis-style text tables. A cell shows our rank; "*" marks a cell the thesis left blank, "a!b" a
    disagreement (ours a, thesis b), "[>20]" the thesis's lower bound, "(v)" a thesis value we did not compute."""
    by_table: dict[str, list[RankCell]] = {}
    for c in results:
        by_table.setdefault(c.table, []).append(c)
    out = []
    for t in TABLES:
        cs = by_table.get(t)
        if not cs:
            continue
        out.append(_TITLES[t])
        if t == "extra":
            w = max(len(f"{c.group} {c.rep}") for c in cs)
            for c in cs:
                out.append(f"  {(c.group + ' ' + c.rep).ljust(w)}  {_cell_text(c, results[c]).rjust(8)}")
            out.append("")
            continue
        rep_rows = t in _REP_ROWS
        rows: list[str] = []
        cols: list[str] = []
        grid: dict[tuple[str, str], str] = {}
        for c in cs:
            r, k = (c.rep, c.group) if rep_rows else (c.group, c.rep)
            if r not in rows:
                rows.append(r)
            if k not in cols:
                cols.append(k)
            grid[(r, k)] = _cell_text(c, results[c])
        w0 = max(len(r) for r in rows)
        widths = [max(len(k), *(len(grid.get((r, k), "")) for r in rows)) for k in cols]
        out.append("  " + " " * w0 + "  " + "  ".join(k.rjust(w) for k, w in zip(cols, widths)))
        for r in rows:
            cells_txt = "  ".join(grid.get((r, k), "").rjust(w) for k, w in zip(cols, widths))
            out.append("  " + r.ljust(w0) + "  " + cells_txt)
        out.append("")
    out.append('legend: "*" thesis blank (filled here), "a!b" ours a vs thesis b, "(v)" thesis value not computed')
    return "\n".join(out)
