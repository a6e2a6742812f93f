"""symkit.lab.cli: the ``symkit`` command (the lab extra: ``pip install 'symkit[lab]'``)."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """The ``symkit`` command; without the lab extra, one line saying how to install it (exit status 2)."""
    for module in ("typer", "pydantic"):
        try:
            __import__(module)
        except ImportError:
            print(f"symkit: the command needs {module}, which is not installed; install the lab extra: "
                  "pip install 'symkit[lab]'", file=sys.stderr)
            raise SystemExit(2) from None
    from symkit.lab.cli.main import app

    app(prog_name="symkit")
