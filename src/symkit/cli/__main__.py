"""``python -m symkit.cli``: the ``symkit`` command."""

from symkit.cli.main import app

app(prog_name="symkit")
