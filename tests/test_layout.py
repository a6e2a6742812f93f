"""The packages of symkit import one way (docs/development.md, "Layout"). The rules are import-linter contracts in
pyproject.toml (``[tool.importlinter]``), checked by ``lint-imports`` in ``make test`` and by the test below; this
file also checks that every package has a place in the layers, so that a new package cannot slip past them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tomllib

import symkit

SRC = Path(symkit.__file__).parent
ROOT = SRC.parents[1]


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


def _modules(folder: Path, prefix: str) -> set[str]:
    """The packages and modules directly in ``folder``, as ``prefix.<name>``."""
    names = {p.name for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    names |= {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    return {f"{prefix}.{n}" for n in names}


def _top_level() -> set[str]:
    """Every top-level package and module of symkit, as ``symkit.<name>``, with the lab's (``symkit.lab.<name>``)
    in place of ``symkit.lab``."""
    return (_modules(SRC, "symkit") - {"symkit.lab"}) | _modules(SRC / "lab", "symkit.lab")


def test_every_package_has_a_layer():
    layered = {m.strip() for layer in _contracts()["layers"]["layers"] for m in layer.split("|")}
    assert layered == _top_level(), f"add new packages to the layers contract: {sorted(layered ^ _top_level())}"


def test_the_lab_is_one_package_and_the_library_is_kept_from_it():
    """Everything that runs experiments (the command, runner, registry, store, run context and their plumbing) is
    under ``symkit.lab``; every other package but the shared plumbing is library, and none of it imports the lab."""
    assert _modules(SRC / "lab", "symkit.lab") == {
        "symkit.lab.runtime", "symkit.lab.store", "symkit.lab.experiments", "symkit.lab.runner", "symkit.lab.cli",
        "symkit.lab.allocator", "symkit.lab._text"}
    plumbing = {"symkit._checks", "symkit._locks", "symkit._stopping", "symkit.progress", "symkit.stats"}
    library = set(_contracts()["library"]["source_modules"])
    assert library == _modules(SRC, "symkit") - {"symkit.lab"} - plumbing
    assert {"symkit.lab", "typer", "pydantic", "ray", "matplotlib"} <= set(_contracts()["library"]["forbidden_modules"])


def test_the_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_the_library_imports_without_the_labs_dependencies():
    code = ("import sys; [sys.modules.__setitem__(m, None) for m in ('typer', 'pydantic', 'ray', 'matplotlib')]; "
            "import symkit.nn, symkit.reps, symkit.measure, symkit.marglik, symkit.pacbayes, symkit.discover, "
            "symkit.dynamics, symkit.train, symkit.testing, symkit.groups, symkit.actions, symkit.datasets; "
            "assert 'symkit.lab.runtime' not in sys.modules, 'the library imported the run context'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_representation_algebra_does_not_import_the_solver():
    """reps/core.py defines Rep; reps/solve.py solves for its bases and imports core. The solver is installed into
    core by reps/__init__.py, so there is no import cycle between the two modules."""
    import ast

    core = SRC / "reps" / "core.py"
    imported = {node.module for node in ast.walk(ast.parse(core.read_text()))
                if isinstance(node, ast.ImportFrom) and node.module}
    assert "symkit.reps.solve" not in imported
    from symkit.reps import core as core_module
    from symkit.reps import solve

    assert core_module.SOLVER is solve
