"""The library runs without the lab extra (typer, pydantic, matplotlib, scikit-learn); what needs it says so in one
line, the ``symkit`` command included."""

import subprocess
import sys
import textwrap

CODE = textwrap.dedent("""
    import sys
    sys.modules["matplotlib"] = None  # as if not installed: any import of them raises ImportError
    sys.modules["sklearn"] = None
    sys.modules["typer"] = None
    sys.modules["pydantic"] = None
    import torch
    import symkit.actions, symkit.discover, symkit.dynamics, symkit.marglik, symkit.measure, symkit.nn
    import symkit.testing, symkit.train
    from symkit.groups import SO
    from symkit.nn import EMLP
    from symkit.reps import V, Scalar
    from symkit.testing import assert_equivariant
    G = SO(3)
    model = EMLP(2 * V(G), Scalar, G, ch=16, num_layers=1)
    assert_equivariant(model)
    from symkit.datasets.digits import load_digits_images
    try:
        load_digits_images()
    except ImportError as exc:
        print(exc)
""")


def test_the_library_works_without_the_experiments_extra():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (
        "the handwritten digits data set needs scikit-learn, which is not installed; install the lab "
        "extra: pip install 'symkit[lab]'"
    )


def test_the_command_without_the_lab_extra_says_how_to_install_it():
    code = ("import sys; sys.modules['typer'] = None; sys.argv = ['symkit', 'list']; "
            "from symkit.lab.cli import main; main()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == ("symkit: the command needs typer, which is not installed; install the lab extra: "
                                  "pip install 'symkit[lab]'")
