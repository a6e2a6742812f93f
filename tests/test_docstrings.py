"""Every public function and class of symkit's public modules has a docstring (module level, parsed, not imported:
optional extras need not be installed). Methods are left to their classes' docstrings (overrides such as
``forward`` implement what the class documents)."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "symkit"


def _public_modules() -> list[Path]:
    return [f for f in sorted(SRC.rglob("*.py"))
            if not any(part.startswith("_") and part != "__init__.py" for part in f.relative_to(SRC).parts)]


def test_every_public_function_and_class_has_a_docstring():
    missing = []
    for path in _public_modules():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                    and not node.name.startswith("_") and ast.get_docstring(node) is None):
                missing.append(f"{path.relative_to(SRC.parent)}:{node.lineno} {node.name}")
    assert len(_public_modules()) > 100  # the walk found the package
    assert not missing, "public functions and classes without a docstring:\n" + "\n".join(missing)
