"""``python -m symkit.cli``: the ``symkit`` command."""

from symkit.cli import main

main()
