"""The registry's additions used by the command line: typed settings, explicit run lists, plot kinds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

from symkit.lab.experiments.registry import Experiment, Plot, import_experiment


@dataclass
class Cfg:
    n: int = 1
    lr: float = 0.1
    name: str = "a"
    sizes: tuple[int, ...] = (1, 2)
    pair: tuple[int, str] = (1, "x")
    flag: bool = False
    limit: int | None = None
    mode: Literal["fast", "slow"] = "fast"
    seed: int = 0


def _exp(**kwargs) -> Experiment:
    return Experiment("cli-test-registry", "d", "r", Cfg, run=lambda c: {}, **kwargs)


@pytest.mark.parametrize(
    ("key", "text", "value"),
    [
        ("n", "5", 5), ("lr", "1e-3", 1e-3), ("name", "b c", "b c"), ("sizes", "3, 4", (3, 4)),
        ("sizes", "[5, 6]", (5, 6)), ("pair", "2,y", (2, "y")), ("flag", "yes", True), ("flag", "0", False),
        ("limit", "none", None), ("limit", "7", 7), ("mode", "slow", "slow"),
    ],
)
def test_settings_are_parsed_as_the_field_type(key, text, value):
    assert _exp().parse_setting(key, text) == value


@pytest.mark.parametrize(
    ("key", "text", "message"),
    [
        ("n", "1.5", "expected int"), ("flag", "maybe", "expected bool (true or false)"),
        ("pair", "1,2,3", "2 comma-separated values"), ("mode", "medium", "one of 'fast', 'slow'"),
        ("limit", "x", "expected int | None"), ("nope", "1", "has no setting 'nope'; valid settings: n, lr"),
    ],
)
def test_bad_settings_say_what_was_expected(key, text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("|", r"\|")):
        _exp().parse_setting(key, text)


def test_points_make_the_grid_and_are_checked():
    exp = _exp(points=lambda quick: [{"n": 1}, {"n": 2}] if quick else [{"n": 1}, {"n": 2}, {"n": 3}],
               sweep={"seed": (0, 1)})
    assert exp.grid(quick=True) == [{"seed": 0, "n": 1}, {"seed": 1, "n": 1}, {"seed": 0, "n": 2},
                                    {"seed": 1, "n": 2}]
    assert len(exp.grid()) == 6
    bad = _exp(points=lambda quick: [{"m": 1}])
    with pytest.raises(TypeError, match="points\\(\\) gave m, which is not a field of Cfg"):
        bad.grid()


def test_plot_kind_is_checked():
    assert Plot(x="n", y="err", kind="scatter", diagonal=True).diagonal
    with pytest.raises(ValueError, match="Plot kind must be 'line', 'bar', 'box' or 'scatter', got 'pie'"):
        Plot(x="n", y="err", kind="pie")


def test_import_experiment_imports_the_module_that_registers_it(monkeypatch):
    import sys

    from symkit.lab.experiments import registry

    monkeypatch.delitem(sys.modules, "symkit_cli_toy", raising=False)  # restored afterwards
    # the real registry without the toy (a stand-in dict would keep what discovery imports here, and modules
    # register only when first imported)
    monkeypatch.delitem(registry._REGISTRY, "cli-toy", raising=False)
    monkeypatch.delitem(registry._REGISTRY, "cli-toy-scaled", raising=False)  # the module registers both
    exp = import_experiment("cli-toy", "symkit_cli_toy")
    assert exp.name == "cli-toy" and exp.config.__name__ == "ToyConfig"
    with pytest.raises(KeyError, match="no experiment named 'cli-none'; valid names: .*cli-toy"):
        import_experiment("cli-none")


def test_stored_json_comes_back_as_the_same_config():
    from symkit.lab.experiments.registry import config_from_json
    from symkit.lab.store import canonical_json

    cfg = Cfg(n=3, sizes=(4, 5, 6), pair=(2, "y"), limit=None, mode="slow")
    back = config_from_json(Cfg, __import__("json").loads(canonical_json(cfg.__dict__)))
    assert back == cfg and isinstance(back.sizes, tuple) and isinstance(back.pair, tuple)


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("sizes", (1, "two"), "expected tuple[int, ...]"),  # element types are checked, not only the container
    ("pair", (1, 2), "expected tuple[int, str]"),
    ("mode", "medium", "expected Literal"),
    ("limit", 2.5, "expected int | None"),
])
def test_config_values_of_the_wrong_type_are_rejected(field, value, expected):
    with pytest.raises(ValueError, match=expected.replace("[", r"\[").replace("|", r"\|")):
        _exp().make_config(**{field: value})


def test_every_number_in_every_built_in_config_declares_its_range():
    """Ranges are declared on the fields (symkit.lab.experiments.fields): a new numeric field without one fails here."""
    from symkit.lab.experiments.registry import _bare, all_experiments

    missing = []
    for name, exp in all_experiments().items():
        if not exp.config.__module__.startswith("symkit.lab.experiments."):
            continue  # the toy experiment of these tests
        limits = exp.field_limits()
        for field_name, tp in exp.field_types().items():
            text = str(_bare(tp))
            if ("int" in text or "float" in text) and field_name not in limits:
                missing.append(f"{name}.{field_name}: {text}")
    assert not missing, "declare a range (Count, Positive, ... or Annotated[..., Field(...)]) for: " + ", ".join(
        missing)
    quick = all_experiments()["powernet-angle"]
    assert quick.field_limits()["test_fraction"] == "(0,1)" and quick.field_limits()["epochs"] == ">=1"
    with pytest.raises(ValueError, match="epochs=0 .*must be >=1"):
        quick.make_config(epochs=0)


def test_has_settings_compares_in_the_stored_form():
    from symkit.lab.experiments.registry import has_settings

    stored = {"transforms": ["rotate", "scale"], "lr": 0.1, "model": "cnn"}
    assert has_settings(stored, {"transforms": ("rotate", "scale"), "lr": 0.1})  # a tuple setting, a stored list
    assert not has_settings(stored, {"transforms": ("rotate",)}) and not has_settings(stored, {"lr": 0.2})
    assert not has_settings(stored, {"epochs": 3}) and has_settings(stored, {"epochs": None})  # missing reads as None
