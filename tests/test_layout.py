"""The packages of symkit import one way (docs/development.md, "Layout"): each package imports only packages of a
lower level, packages on one level do not import each other, and ``datasets`` imports no algorithm package.
Imports inside functions count too: a lazy import is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

import symkit

SRC = Path(symkit.__file__).parent

#: the level of every top-level package or module of symkit (lower levels know nothing of higher ones)
LEVELS = {
    "symkit": 0, "_checks": 0, "_locks": 0, "_stopping": 0, "_text": 0, "allocator": 0, "progress": 0, "runtime": 0,
    "stats": 0, "store": 0,
    "linalg": 1, "groups": 1,
    "reps": 2,
    "actions": 3,
    "testing": 4,
    "nn": 5, "datasets": 5,
    "train": 6,
    "measure": 7, "dynamics": 7, "discover": 7, "marglik": 7, "pacbayes": 7, "rl": 7,
    "experiments": 8,
    "runner": 9,
    "cli": 10,
}


def _package_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py") if rel.parts[0] != "__init__.py" else "symkit"


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "symkit":
                out.add(parts[1] if len(parts) > 1 else "symkit")
    return out


def test_every_package_has_a_level():
    packages = {_package_of(p) for p in SRC.rglob("*.py")}
    assert packages == set(LEVELS), f"add new packages to LEVELS: {sorted(packages ^ set(LEVELS))}"


def test_imports_point_one_way():
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        here = _package_of(path)
        for there in _imports(path) - {here}:
            if LEVELS[there] >= LEVELS[here] and there != "symkit":
                wrong.append(f"{path.relative_to(SRC)} ({here}, level {LEVELS[here]}) imports {there} "
                             f"(level {LEVELS[there]})")
    assert not wrong, "\n".join(wrong)


def test_datasets_import_no_algorithm_package():
    allowed = {"symkit", "_checks", "progress", "groups", "reps", "actions", "datasets"}
    for path in (SRC / "datasets").rglob("*.py"):
        assert _imports(path) <= allowed, f"{path.name} imports {sorted(_imports(path) - allowed)}"


def test_the_representation_algebra_does_not_import_the_solver():
    """reps/core.py defines Rep; reps/solve.py solves for its bases and imports core. The solver is installed into
    core by reps/__init__.py, so there is no import cycle between the two modules."""
    core = SRC / "reps" / "core.py"
    imported = set()
    for node in ast.walk(ast.parse(core.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    assert "symkit.reps.solve" not in imported
    from symkit.reps import core as core_module
    from symkit.reps import solve

    assert core_module.SOLVER is solve
