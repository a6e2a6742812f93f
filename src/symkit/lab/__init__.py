"""symkit.lab: the experiments that reproduce the papers and what runs them (the lab extra:
``pip install 'symkit[lab]'``).

``experiments`` (one module per paper result, and the registry), ``runner`` (sweeps, executors, reports, the
demo), ``store`` (the results database and its archives), ``cli`` (the ``symkit`` command), ``runtime`` (the run
context a sweep sets for the experiments it runs) and their plumbing. The library (every other package of symkit)
imports nothing from here: its settings travel in signatures (the import contracts in ``pyproject.toml``).
"""
