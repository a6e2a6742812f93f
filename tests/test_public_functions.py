"""Every public function and class of symkit's public modules has a docstring, and every public function type hints
on its arguments and return (module level, parsed, not imported: optional extras need not be installed). Methods
are left to their classes (overrides such as ``forward`` implement what the class documents)."""

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "symkit"


def _public_modules() -> list[Path]:
    return [f for f in sorted(SRC.rglob("*.py"))
            if not any(part.startswith("_") and part != "__init__.py" for part in f.relative_to(SRC).parts)]


@functools.cache
def _public_definitions() -> list[tuple[Path, ast.AST]]:
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [(path, node) for path in _public_modules() for node in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(node, kinds) and not node.name.startswith("_")]


def test_every_public_function_has_type_hints():
    missing = []
    for path, node in _public_definitions():
        if isinstance(node, ast.ClassDef):
            continue
        a = node.args
        bare = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.annotation is None]
        bare += [f"*{x.arg}" for x in (a.vararg, a.kwarg) if x is not None and x.annotation is None]
        if bare or node.returns is None:
            missing.append(f"{path.relative_to(SRC.parent)}:{node.lineno} {node.name}: "
                           f"{', '.join(bare) or 'no return annotation'}")
    assert len(_public_definitions()) > 500  # the walk found the package
    assert not missing, "public functions without type hints:\n" + "\n".join(missing)


def test_every_public_function_and_class_has_a_docstring():
    missing = [f"{path.relative_to(SRC.parent)}:{node.lineno} {node.name}" for path, node in _public_definitions()
               if ast.get_docstring(node) is None]
    assert len(_public_definitions()) > 500  # the walk found the package
    assert not missing, "public functions and classes without a docstring:\n" + "\n".join(missing)
