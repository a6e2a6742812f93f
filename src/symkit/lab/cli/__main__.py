"""``python -m symkit.lab.cli``: the ``symkit`` command."""

from symkit.lab.cli import main

main()
