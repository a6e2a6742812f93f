"""The experiment registry.

An experiment reproduces one paper result. It is a module in ``symkit/lab/experiments/`` that builds an
:class:`Experiment` and passes it to :func:`register` at import time. The registry imports every module of the
package on first use, so adding a file is all it takes to add an experiment.

Anatomy of an experiment:

- ``config``: a dataclass whose defaults are the default setup, the paper's as closely as two CPU cores allow; it
  must have an ``int`` field ``seed``.
- scales (``symkit reproduce NAME --scale quick|default|paper``, :data:`SCALES`): ``quick`` applies the field
  overrides ``quick`` that make the run small enough for CI; ``default`` is the config's defaults; ``paper`` applies
  ``paper_scale``, the overrides that give the paper's data, sizes and epochs (real data sets come from the run's data
  folder, :mod:`symkit.lab.runtime`). ``paper_scale=None`` declares that the defaults already are the paper's setup.
- ``sweep`` / ``quick_sweep`` / ``paper_sweep``: a grid, ``{field: [values, ...]}``, for each scale (the quick and
  paper grids default to ``sweep``); every combination is one run.
- ``run(config) -> metrics``: a flat dict of JSON-serialisable values (numbers, strings, short lists).
- ``points``: optional, for sweeps that are not a grid: ``points(quick)`` returns the list of field overrides, one
  per run (the seeds of ``sweep`` still multiply it when ``sweep`` has a ``seed`` entry and the points have none).
- ``paper``: the paper's numbers, shown beside ours by ``symkit report``.
- ``plots``: what ``symkit report`` draws from the aggregated metrics.
- ``summarize``: optional, extra report text built from the seed-aggregated rows (see :data:`Summarize`).
- ``stand_in``: optional, what the default scale runs in place of the paper's data (a data set bundled or
  generated here, fewer epochs), when it does: docs/reproductions.md says so beside every comparison made with
  default-scale runs, since their values are not expected within the paper's; and beside every comparison of an
  experiment with no separate paper scale (whose defaults are the paper's sizes on other data).
- ``claims``: optional, for a paper result that prints no number but an ordering (a figure of curves or boxes, a
  sentence): ``claims(rows) -> {check: holds}`` from the same rows as ``summarize`` (those at the paper or default
  scale), each check one named comparison the paper states; docs/reproductions.md gives the result "ordering only"
  when every check holds and "contradicts" when one fails (see :data:`Claims`).
- ``figure_claims``: optional, further paper results of the experiment that print no number (figures of curves
  whose sweeps vary settings the default sweep keeps fixed): one :class:`FigureClaims` each, its own row on
  docs/reproductions.md, checked on every archived run that is not at the quick scale (each ``claims`` picks the
  rows of its figure's settings).
- ``decided``: optional, for a result where symkit departs from the paper: what a larger run or a check of the
  formula found, by result name as on docs/reproductions.md (``"*"`` for the one row of an experiment with no
  paper value), written beside the row.
- ``effective``: optional, ``effective(config)`` gives the values a run really uses for fields stored as a
  placeholder (0: "from the size table"), which reports show in their place.
- ``figures``: optional, figures that need the individual runs (curves, say) rather than seed means (see
  :data:`Figures`); ``symkit report`` calls it beside the declared ``plots``.
- ``unfinished``: optional, for experiments whose runs checkpoint: ``unfinished()`` lists the runs with saved
  progress that have not finished (:class:`Unfinished`), which ``symkit runs NAME`` shows beside the stored runs.
- ``legacy``: optional, ``{field: value}`` for fields added to the config after runs were stored, with the value
  those runs had. A run's identity in the results store (:meth:`Experiment.identity`) leaves such a field out while
  it has that value, so the stored runs stay the same runs (not rerun, grouped with new ones); a stored config
  without the field reads it as that value (:meth:`Experiment.complete`). A setting that changes what a run
  computes can so be added without orphaning the results that exist.
- ranges: each config field declares its own, in its type (``epochs: Count``, ``lr: Positive``, or any
  ``Annotated[float, pydantic.Field(gt=0, le=1)]``; :mod:`symkit.lab.experiments.fields`), checked by pydantic whenever
  a config is made; ``validate(config)``, optional, raises ``ValueError`` for combinations of values that make no
  sense (see :meth:`Experiment.check_config`).

Modules outside the package can register experiments too: list them, comma-separated, in the environment variable
``SYMKIT_EXPERIMENT_MODULES`` and they are imported with the built-in ones (worker processes inherit it). A module
that fails to import does not hide the others: it is reported by :func:`broken_modules` and by ``symkit list``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import itertools
import json
import math
import operator
import os
import pkgutil
import traceback
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pydantic

from symkit.lab.experiments.fields import Seed
from symkit.lab.store import canonical_json
from symkit.progress import progress_bar

Metrics = dict[str, Any]
#: the sizes every experiment runs at (module docstring)
SCALES = ("quick", "default", "paper")
#: ``summarize(rows) -> str``; each row is ``{"config": {...}, "n": seeds, "mean": {metric: value},
#: "stderr": {metric: value or None}, "by_seed": {seed: {metric: value}}}`` (metrics that are not numbers appear in
#: ``mean`` as their common value; ``by_seed`` holds every run's own metrics, for paired statistics).
Summarize = Callable[[Sequence[Mapping[str, Any]]], str]
#: ``claims(rows) -> {check: holds}``, rows as for :data:`Summarize`: the paper's ordering claims, each a named check
#: (empty when the rows cannot decide any, e.g. a sweep run only in part)
Claims = Callable[[Sequence[Mapping[str, Any]]], Mapping[str, bool]]
#: ``figures(runs, out_dir) -> [paths written]``; each run is ``{"config": {...}, "seed": int, "metrics": {...}}``
#: (successful runs only).
Figures = Callable[[Sequence[Mapping[str, Any]], "os.PathLike[str] | str"], Sequence[Any]]
T_ = TypeVar("T_")


@dataclass(frozen=True)
class PaperValue:
    """A number the paper reports, for the run group whose config matches ``where``."""

    metric: str
    value: float
    where: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""  # e.g. "Table 1"
    stderr: float | None = None


@dataclass(frozen=True)
class Unfinished:
    """A run that saved progress (a checkpoint) and has not finished: ``done`` of ``total`` ``unit`` at
    ``saved_at`` (seconds since the epoch), trained now by process ``holder`` (None: stopped; the same command
    carries it on)."""

    config: Mapping[str, Any]  # the run's full config, seed included
    done: int
    total: int
    unit: str
    saved_at: float
    holder: int | None = None
    note: str = ""  # e.g. "last evaluation 1983"


@dataclass(frozen=True)
class Plot:
    """A plot of the seed-aggregated ``y`` metric against config field (or metric) ``x``, one line per ``hue``."""

    x: str
    y: str
    hue: str | None = None
    logx: bool = False
    logy: bool = False
    title: str = ""
    kind: str = "line"  # "line", "bar", "box" (one box of the per-seed values per x and hue) or "scatter"
    diagonal: bool = False  # draw the line y = x (for "ours against the paper" scatter plots)
    #: config values of the runs for which ``x`` means nothing (``{"method": ("holdout", "pruning")}``: those bounds
    #: have no intrinsic dimension; a tuple is any of its values); these runs, and those without ``x``, are drawn as
    #: labelled horizontal lines
    without_x: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ("line", "bar", "box", "scatter"):
            raise ValueError(f"Plot kind must be 'line', 'bar', 'box' or 'scatter', got {self.kind!r}")
        if not isinstance(self.without_x, Mapping):
            raise TypeError(f"Plot without_x must be a mapping of config field to value, got {self.without_x!r}")


def _bound_of(item: Any) -> list[tuple[str, Any]]:
    """The (operator, value) bounds one piece of ``Annotated`` metadata declares (pydantic ``Field(ge=...)`` or an
    ``annotated_types`` bound such as ``Ge(1)``)."""
    out = []
    for meta in getattr(item, "metadata", None) or [item]:
        for op in ("gt", "ge", "lt", "le"):
            if getattr(meta, op, None) is not None:
                out.append((op, getattr(meta, op)))
    return out


def _bounds(tp: Any) -> list[tuple[str, Any]]:
    """The range ``tp`` declares for its numbers: its own ``Annotated`` metadata, or that of a sequence's items."""
    if typing.get_origin(tp) is typing.Annotated:
        return [b for item in typing.get_args(tp)[1:] for b in _bound_of(item)] or _bounds(typing.get_args(tp)[0])
    if _is_sequence(tp):
        return [b for arg in typing.get_args(tp) if arg is not Ellipsis for b in _bounds(arg)]
    return []


def range_text(tp: Any) -> str | None:
    """The declared range as text: ``>=1``, ``>0``, ``[0,1]``, ``(0,1)``; None when ``tp`` declares none."""
    bounds = dict(_bounds(tp))
    lo = ("[", bounds["ge"]) if "ge" in bounds else ("(", bounds["gt"]) if "gt" in bounds else None
    hi = ("]", bounds["le"]) if "le" in bounds else (")", bounds["lt"]) if "lt" in bounds else None
    if lo and hi:
        return f"{lo[0]}{lo[1]},{hi[1]}{hi[0]}"
    if lo:
        return f"{'>=' if lo[0] == '[' else '>'}{lo[1]}"
    if hi:
        return f"{'<=' if hi[0] == ']' else '<'}{hi[1]}"
    return None


def _bare(tp: Any) -> Any:
    """``tp`` without its ``Annotated`` metadata (at any depth): the type the command line parses to."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _bare(args[0])
    if origin in (tuple, list) and args:
        return origin[tuple(a if a is Ellipsis else _bare(a) for a in args)]
    if origin in (typing.Union, getattr(types, "UnionType", None)):
        return functools.reduce(operator.or_, (_bare(a) for a in args))
    return tp


def _numbers(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _numbers(v)]
    return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


def _type_error(tp: Any, value: Any) -> str | None:
    """Why ``value`` is not of type ``tp`` by pydantic's strict validation (no coercion, but an int is a float and a
    tuple field takes a list), or None when it is; unresolved annotations are not checked."""
    if tp is None or isinstance(tp, str):
        return None
    if _is_sequence(tp) and isinstance(value, list):
        value = tuple(value) if typing.get_origin(tp) is tuple or tp is tuple else value
    try:
        _adapter(tp).validate_python(value, strict=True)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        where = "".join(f"[{loc}]" for loc in err["loc"])
        return f"{type(value).__name__}{' with ' + repr(err['input']) + ' at ' + where if where else ''}"
    except pydantic.PydanticSchemaGenerationError:
        return None
    return None


@dataclass(frozen=True)
class Experiment:
    """A registered, reproducible experiment (see the module docstring)."""

    name: str
    description: str
    reproduces: str
    config: type
    run: Callable[[Any], Metrics]
    quick: Mapping[str, Any] = field(default_factory=dict)
    sweep: Mapping[str, Sequence[Any]] = field(default_factory=lambda: {"seed": (0,)})
    quick_sweep: Mapping[str, Sequence[Any]] | None = None
    paper_scale: Mapping[str, Any] | None = None
    paper_sweep: Mapping[str, Sequence[Any]] | None = None
    paper: Sequence[PaperValue] = ()
    plots: Sequence[Plot] = ()
    points: Callable[[bool], Sequence[Mapping[str, Any]]] | None = None
    summarize: Summarize | None = None
    claims: Claims | None = None
    figure_claims: Sequence[FigureClaims] = ()
    decided: Mapping[str, str] = field(default_factory=dict)
    stand_in: str | None = None
    figures: Figures | None = None
    validate: Callable[[Any], None] | None = None
    legacy: Mapping[str, Any] = field(default_factory=dict)
    unfinished: Callable[[], Sequence[Unfinished]] | None = None
    #: metrics that record how a run went rather than what it found (the step it resumed from, the run it
    #: continued, library versions): reports list them seed by seed instead of averaging them
    facts: Sequence[str] = ()
    #: ``effective(config) -> {field: value}``: the values a run uses for fields its config leaves to be resolved
    #: (a size stored as 0, read from a table); reports show these instead of the stored ones
    effective: Callable[[Any], Mapping[str, Any]] | None = None

    def __post_init__(self) -> None:
        if not dataclasses.is_dataclass(self.config):
            raise TypeError(f"experiment {self.name!r}: config must be a dataclass, got {self.config!r}")
        names = {f.name for f in dataclasses.fields(self.config)}
        if "seed" not in names:
            raise TypeError(f"experiment {self.name!r}: config {self.config.__name__} needs a 'seed' field")
        if "seed" in self.legacy:
            raise TypeError(f"experiment {self.name!r}: the seed cannot be a legacy field")
        for key in [*self.quick, *self.sweep, *(self.quick_sweep or {}), *(self.paper_scale or {}),
                    *(self.paper_sweep or {}), *self.legacy]:
            if key not in names:
                raise TypeError(
                    f"experiment {self.name!r}: {key!r} is not a field of {self.config.__name__} "
                    f"(fields: {', '.join(sorted(names))})"
                )

    def identity(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """A config (as a JSON dict) as the results store keys it: without the ``legacy`` fields that have the value
        the runs stored before them had."""
        def same(a: Any, b: Any) -> bool:
            return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)

        return {k: v for k, v in values.items() if not (k in self.legacy and same(v, self.legacy[k]))}

    def complete(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """A stored config with the ``legacy`` fields it lacks set to their legacy values (the inverse of
        :meth:`identity`)."""
        return {**self.legacy, **values}

    def field_limits(self) -> dict[str, str]:
        """The range each config field declares (``Annotated`` metadata, see :mod:`symkit.lab.experiments.fields`), as
        text; the seed is always within what the results store holds."""
        out = {name: range_text(tp) for name, tp in self.field_types().items()}
        out["seed"] = out.get("seed") or range_text(Seed)
        return {k: v for k, v in out.items() if v is not None}

    def check_config(self, config: Any) -> None:
        """Raise ``ValueError`` naming the field and what was expected if ``config`` makes no sense: a value of the
        wrong type, a float that is not finite, a value outside the range its field declares (pydantic validates
        the ``Annotated`` type strictly), or a combination ``validate`` rejects."""
        types_ = self.field_types()
        for f in dataclasses.fields(config):
            value = getattr(config, f.name)
            tp = types_.get(f.name)
            if f.name == "seed" and not _bounds(tp):
                tp = Seed
            wrong = _type_error(_bare(tp), value)
            if wrong is not None:
                raise ValueError(
                    f"setting {f.name}={value!r} of experiment {self.name!r}: expected "
                    f"{_type_name(_bare(tp))}, got {wrong}"
                )
            for x in _numbers(value):
                if isinstance(x, float) and not math.isfinite(x):
                    raise ValueError(f"setting {f.name}={value!r} of experiment {self.name!r}: must be finite")
            if _type_error(tp, value) is not None:
                raise ValueError(
                    f"setting {f.name}={value!r} of experiment {self.name!r}: must be {range_text(tp)}"
                )
        if self.validate is not None:
            self.validate(config)

    def field_names(self) -> list[str]:
        """The config's field names, in declaration order."""
        return [f.name for f in dataclasses.fields(self.config)]

    def fixed_fields(self) -> list[str]:
        """The config fields that no sweep or run list varies (nor the seed): those that say at what scale a run
        ran (``symkit.lab.runner.report.scale_of``) and which runs share a scale (``runner.sweep.estimate_seconds``)."""
        swept = {"seed", *self.sweep, *(self.quick_sweep or {}), *(self.paper_sweep or {})}
        if self.points is not None:
            swept |= {k for quick in (False, True) for point in self.points(quick) for k in point}
        return [k for k in self.field_names() if k not in swept]

    def field_types(self) -> dict[str, Any]:
        """The config's field types (resolved annotations), by name."""
        try:
            hints = typing.get_type_hints(self.config, include_extras=True)
        except Exception:  # unresolvable annotations: fall back to the raw ones
            hints = {}
        return {f.name: hints.get(f.name, f.type) for f in dataclasses.fields(self.config)}

    def parse_setting(self, key: str, text: str) -> Any:
        """Convert the command-line value ``text`` to the type of config field ``key``.

        ``int``, ``float``, ``bool`` (true/false/yes/no/1/0), ``str``, ``None`` for optional fields ("none"), and
        tuples/lists/dicts as JSON or, for sequences, comma-separated. Raises ``ValueError`` naming the field and
        the expected type.
        """
        types_ = self.field_types()
        if key not in types_:
            raise ValueError(
                f"experiment {self.name!r} has no setting {key!r}; valid settings: {', '.join(self.field_names())}"
            )
        try:
            return _parse_as(_bare(types_[key]), text)
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f"bad value {text!r} for setting {key!r} of experiment {self.name!r}: expected "
                f"{_type_name(_bare(types_[key]))} ({exc})"
            ) from None

    def scale_overrides(self, scale: str) -> dict[str, Any]:
        """The field overrides of ``scale`` (:data:`SCALES`): the quick ones, none, or the paper's."""
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
        return dict(self.quick) if scale == "quick" else dict(self.paper_scale or {}) if scale == "paper" else {}

    def sweep_of(self, scale: str) -> Mapping[str, Sequence[Any]]:
        """The grid of ``scale``: ``quick_sweep`` or ``paper_sweep`` where declared, ``sweep`` otherwise."""
        self.scale_overrides(scale)  # checks the name
        chosen = self.quick_sweep if scale == "quick" else self.paper_sweep if scale == "paper" else None
        return chosen if chosen is not None else self.sweep

    def make_config(self, quick: bool = False, **overrides: Any) -> Any:
        """The config for one run: defaults, then the quick overrides if ``quick``, then ``overrides``."""
        return self.config_at("quick" if quick else "default", **overrides)

    def config_at(self, scale: str, /, **overrides: Any) -> Any:
        """The config for one run at ``scale`` (:data:`SCALES`): defaults, then the scale's overrides, then
        ``overrides`` (which may include a config field called ``scale``)."""
        values = self.scale_overrides(scale)
        values.update(overrides)
        unknown = set(values) - set(self.field_names())
        if unknown:
            raise ValueError(
                f"experiment {self.name!r} has no setting {', '.join(sorted(unknown))}; "
                f"valid settings: {', '.join(self.field_names())}"
            )
        config = self.config(**values)
        self.check_config(config)
        return config

    def grid(self, quick: bool = False, scale: str | None = None) -> list[dict[str, Any]]:
        """The sweep of ``scale`` as a list of field overrides, one per run (``points`` gets ``quick`` as a bool)."""
        scale = resolve_scale(quick, scale)
        quick = scale == "quick"
        sweep = self.sweep_of(scale)
        keys = list(sweep)
        product = [dict(zip(keys, combo)) for combo in itertools.product(*(sweep[k] for k in keys))]
        if self.points is None:
            return product
        names = set(self.field_names())
        out = []
        for point in self.points(quick):
            unknown = set(point) - names
            if unknown:
                raise TypeError(
                    f"experiment {self.name!r}: points() gave {', '.join(sorted(unknown))}, which "
                    f"{'is not a field' if len(unknown) == 1 else 'are not fields'} of {self.config.__name__}"
                )
            out.extend({**extra, **point} for extra in product)
        return _unique(out)


def resolve_scale(quick: bool = False, scale: str | None = None) -> str:
    """The scale named by ``scale``, or by the older flag ``quick``; both at once must agree."""
    if scale is None:
        return "quick" if quick else "default"
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
    if quick and scale != "quick":
        raise ValueError(f"quick=True contradicts scale={scale!r}; give one of them")
    return scale


def _unique(points: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for point in points:
        key = json.dumps(point, sort_keys=True, default=repr)
        if key not in seen:
            seen.add(key)
            out.append(point)
    return out


def _type_name(tp: Any) -> str:
    if typing.get_args(tp):  # a generic alias such as tuple[int, ...]: its __name__ would drop the arguments
        return str(tp).replace("typing.", "")
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


@functools.lru_cache(maxsize=256)
def _adapter(tp: Any) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(tp)


def _is_sequence(tp: Any) -> bool:
    return typing.get_origin(tp) in (tuple, list, Sequence) or tp in (tuple, list)


def _command_line_value(tp: Any, text: str) -> Any:
    """The command-line syntax, before type validation: ``none`` for an optional field, JSON for lists and objects
    (``[1, 2]``, ``{"a": 1}``), comma-separated items for a sequence (``3,4``); anything else stays text."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    stripped = text.strip()
    if origin in (typing.Union, getattr(types, "UnionType", None)):
        if type(None) in args and stripped.lower() in ("none", "null"):
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _command_line_value(options[0], text)
        return text
    if tp is Any or tp is object or origin in (dict, Mapping) or tp is dict:
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            return text
    if _is_sequence(tp):
        if stripped.startswith("["):
            return json.loads(stripped)
        return [part.strip() for part in stripped.split(",") if part.strip()]
    return text


def _pydantic_reason(tp: Any, exc: pydantic.ValidationError) -> str:
    """One short reason from pydantic's first error, in the words symkit's messages use."""
    err = exc.errors()[0]
    kind = err["type"]
    if kind in ("bool_parsing", "bool_type"):
        return "true or false"
    if kind == "literal_error":
        return f"one of {', '.join(map(repr, typing.get_args(tp)))}"
    if kind in ("too_long", "too_short") and typing.get_origin(tp) is tuple:
        return f"{len(typing.get_args(tp))} comma-separated values"
    return err["msg"]


def _parse_as(tp: Any, text: str) -> Any:
    """Parse command-line ``text`` as type ``tp``: the command-line syntax (:func:`_command_line_value`), then
    pydantic's validation (ints, floats, booleans such as yes/no/1/0, literals, tuples, optionals)."""
    if isinstance(tp, str):  # an annotation that could not be resolved
        tp = Any
    value = _command_line_value(tp, text)
    try:
        return _adapter(tp).validate_python(value)
    except pydantic.ValidationError as exc:
        raise ValueError(_pydantic_reason(tp, exc)) from None
    except pydantic.PydanticSchemaGenerationError:
        raise ValueError(f"values of type {_type_name(tp)} cannot be set from the command line") from None


def config_from_json(config_type: type, values: Mapping[str, Any]) -> Any:
    """Rebuild a config instance from its stored JSON dict (pydantic turns JSON lists back into tuples where the
    field is a tuple)."""
    return _adapter(config_type).validate_python(dict(values))


def progress(iterable: Iterable[T_], total: int | None = None, desc: str = "") -> Iterable[T_]:
    """A progress bar for the inner loop of a run (under the sweep's and the run's lines of ``symkit reproduce``).

    Shown only on a terminal and unless ``SYMKIT_PROGRESS=0``.
    """
    return progress_bar(iterable, desc=desc, total=total, position=2)


_REGISTRY: dict[str, Experiment] = {}
_DISCOVERED = False
_BROKEN: dict[str, str] = {}


@dataclass(frozen=True)
class FigureClaims:
    """A paper figure that prints no number, checked as named orderings: ``result`` (e.g. "Figure 4 (against the
    rank)"), ``paper`` (its claim in words), ``claims`` (rows -> {check: holds}; rows as for :data:`Summarize`, of
    every scale but quick: pick the figure's settings) and ``command`` (the runs it needs)."""

    result: str
    paper: str
    claims: Claims
    command: str


def has_settings(config: Mapping[str, Any], settings: Mapping[str, Any]) -> bool:
    """Whether a stored run's ``config`` has every one of ``settings``, compared in the stored JSON form (a tuple
    setting matches the list a store holds); a field the config lacks reads as None. How a claim picks its runs."""
    return all(canonical_json(config.get(k)) == canonical_json(v) for k, v in settings.items())


def holding_in_every(checks: Iterable[Mapping[str, bool]]) -> dict[str, bool]:
    """Named checks made once per setting (a :data:`Claims` helper), merged: a check holds where it holds in every
    setting that made it."""
    out: dict[str, bool] = {}
    for made in checks:
        for name, holds in made.items():
            out[name] = out.get(name, True) and bool(holds)
    return out


def register(experiment: Experiment) -> Experiment:
    """Add ``experiment`` to the registry under its name (names are unique)."""
    existing = _REGISTRY.get(experiment.name)
    if existing is not None and existing.run is not experiment.run:
        raise ValueError(f"two experiments are named {experiment.name!r}")
    _REGISTRY[experiment.name] = experiment
    return experiment


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True
    import symkit.lab.experiments as package

    modules = [
        f"{package.__name__}.{info.name}"
        for info in pkgutil.iter_modules(package.__path__)
        if info.name != "registry" and not info.name.startswith("_")
    ]
    modules += [m.strip() for m in os.environ.get("SYMKIT_EXPERIMENT_MODULES", "").split(",") if m.strip()]
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # one broken module must not hide the other experiments
            _BROKEN[module] = "".join(traceback.format_exception_only(type(exc), exc)).strip()


def _likely_modules(name: str) -> list[str]:
    import symkit.lab.experiments as package

    modules = [m.strip() for m in os.environ.get("SYMKIT_EXPERIMENT_MODULES", "").split(",") if m.strip()]
    stem = name.replace("-", "_")
    if stem.isidentifier() and any(info.name == stem for info in pkgutil.iter_modules(package.__path__)):
        modules.append(f"{package.__name__}.{stem}")
    return modules


def broken_modules() -> dict[str, str]:
    """Experiment modules that failed to import, with their error (empty when all is well)."""
    _discover()
    return dict(_BROKEN)


def import_experiment(name: str, module: str | None = None) -> Experiment:
    """The experiment ``name``, importing ``module`` first if discovery alone does not find it (worker processes)."""
    if name not in _REGISTRY and module and module != "__main__":
        importlib.import_module(module)  # usually registers it, sparing the worker the import of every module
    if name in _REGISTRY:
        return _REGISTRY[name]
    return get_experiment(name)


def all_experiments() -> dict[str, Experiment]:
    """Every registered experiment, by name, sorted."""
    _discover()
    return dict(sorted(_REGISTRY.items()))


def get_experiment(name: str) -> Experiment:
    """The experiment called ``name``; a ``KeyError`` listing the valid names otherwise."""
    if name not in _REGISTRY and not _DISCOVERED:  # try the likely modules before importing every one
        for module in _likely_modules(name):
            try:
                importlib.import_module(module)
            except Exception:  # discovery below records the error
                continue
            if name in _REGISTRY:
                return _REGISTRY[name]
    if name in _REGISTRY:
        return _REGISTRY[name]
    experiments = all_experiments()
    if name not in experiments:
        hint = ""
        if _BROKEN:
            hint = f" (modules that failed to import: {', '.join(sorted(_BROKEN))})"
        raise KeyError(f"no experiment named {name!r}; valid names: {', '.join(experiments) or '(none)'}{hint}")
    return experiments[name]
