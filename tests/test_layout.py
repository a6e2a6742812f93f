"""The packages of symkit import one way (docs/development.md, "Layout"). The rules are import-linter contracts in
pyproject.toml (``[tool.importlinter]``), checked by ``lint-imports`` in ``make test`` and by the test below; this
file also checks that every package has a place in the layers, so that a new package cannot slip past them."""

from __future__ import annotations

import ast
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


def _reps_imports(path: Path, top_level_only: bool = False) -> set[str]:
    """The modules of symkit.reps that ``path`` imports (``symkit.reps.<name>`` as ``<name>``), counting imports
    inside functions unless ``top_level_only``; absolute and relative forms alike."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("symkit.reps.")}
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative to symkit/reps: "from .core import X", "from . import core"
                module = "symkit.reps" + ("." + module if module else "")
            if module == "symkit.reps":
                found |= {a.name for a in node.names}
            elif module.startswith("symkit.reps."):
                found.add(module.split(".")[2])
    return found


def test_the_solver_does_not_import_the_representation_algebra():
    """reps/core.py (Rep and its leaves, sums, products and canonical blocks) imports the solver, reps/solve.py, at
    its top and calls it; solve.py and reps/blocks.py (the Block both share) import nothing from core.py, and there
    is no slot through which the solver is installed into core."""
    reps = SRC / "reps"
    assert "solve" in _reps_imports(reps / "core.py", top_level_only=True)
    assert "core" not in _reps_imports(reps / "solve.py"), "reps/solve.py imports reps/core.py"
    assert not _reps_imports(reps / "blocks.py") & {"core", "solve"}, "reps/blocks.py imports core.py or solve.py"
    from symkit.reps import blocks, core

    assert not hasattr(core, "SOLVER")
    assert core.Block is blocks.Block
