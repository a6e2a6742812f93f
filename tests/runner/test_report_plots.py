"""What the report plots draw, checked on the matplotlib artists of figures built from synthetic stored runs."""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg", force=True)

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402

from symkit.lab.experiments.registry import Experiment, PaperValue, Plot, get_experiment  # noqa: E402
from symkit.lab.runner.report import aggregate, build_report, plot_figure  # noqa: E402
from symkit.lab.store import Store  # noqa: E402


def _store(tmp_path, name: str, runs: list[tuple[dict, dict]], file: str = "runs.db"):
    """A store holding ``runs`` of experiment ``name``: (config overrides of its quick config, metrics) each."""
    exp = get_experiment(name)
    store = Store(tmp_path / file)
    for over, metrics in runs:
        store.record(name, dataclasses.asdict(exp.make_config(quick=True, **over)), metrics)
    return exp, store.runs(name)


def _figure(exp: Experiment, plot: Plot, records):
    fig = plot_figure(exp, plot, aggregate(exp, records))
    assert fig is not None
    fig.savefig(io.BytesIO(), format="png")  # a plain save: lays the figure out as a report writes it
    return fig


def _errorbar_series(ax) -> dict[str, tuple[list[float], list[float], object]]:
    """The labelled errorbar series of ``ax``: label -> (x values, y values, the data line)."""
    out = {}
    for c in ax.containers:
        if isinstance(c, ErrorbarContainer) and c.get_label() and not c.get_label().startswith("_"):
            line = c.lines[0]
            out[c.get_label()] = ([float(x) for x in line.get_xdata()], [float(y) for y in line.get_ydata()], line)
    return out


def _horizontal_lines(ax) -> list[tuple[float, object]]:
    """The lines drawn across the whole axes (``axhline``): (y, line) each."""
    return [(float(line.get_ydata()[0]), line) for line in ax.lines
            if list(line.get_xdata()) == [0, 1] and len(set(line.get_ydata())) == 1]


def _inside(fig, artist) -> bool:
    box, frame = artist.get_window_extent(fig.canvas.get_renderer()), fig.bbox
    return frame.x0 - 0.5 <= box.x0 and box.x1 <= frame.x1 + 0.5 and frame.y0 - 0.5 <= box.y0 and \
        box.y1 <= frame.y1 + 0.5


def test_rpp_levels_box_plot_shows_every_setting_run_even_with_one_seed(tmp_path):
    # partial data: some models under some settings, one seed each, and one setting with three seeds
    runs = [({"setting": "exact", "model": "mlp"}, {"test_mse": 0.5}),
            ({"setting": "exact", "model": "emlp"}, {"test_mse": 0.03}),
            ({"setting": "approximate", "model": "rpp"}, {"test_mse": 0.07})]
    runs += [({"setting": "misspecified", "model": "emlp", "seed": s}, {"test_mse": v})
             for s, v in ((0, 0.2), (1, 0.25), (2, 0.3))]
    exp, records = _store(tmp_path, "rpp-levels", runs)
    fig = _figure(exp, exp.plots[0], records)
    ax = fig.axes[0]
    # every stored value is a visible point on the log axis; the boxes only where there is a spread to show
    points = sorted(float(y) for line in ax.lines if line.get_marker() == "o" for y in line.get_ydata())
    assert points == pytest.approx(sorted(v for _, m in runs for v in m.values()))
    lo, hi = ax.get_ylim()
    assert ax.get_yscale() == "log" and lo < min(points) and max(points) < hi
    assert len(ax.patches) == 1  # one box: the setting with three seeds
    assert all(len(line.get_xdata()) > 0 for line in ax.lines)  # no empty artists on the log axis
    # models in the order the experiment sweeps them, settings in the legend likewise
    assert [t.get_text() for t in ax.get_xticklabels()] == ["mlp", "emlp", "rpp"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "setting=exact", "setting=approximate", "setting=misspecified"]
    plt.close(fig)


def test_pac_bayes_hold_out_bounds_are_horizontal_lines_not_points_at_a_made_up_dimension(tmp_path):
    exp = get_experiment("pac-bayes-digits")
    values = {("cnn", "subspace"): 0.5, ("p4cnn", "subspace"): 0.4, ("cnn", "holdout"): 0.6, ("p4cnn", "holdout"): 0.3}
    runs = [(p, {"bound": values[p["model"], p["method"]], "quantized_test_error": 0.1}) for p in exp.points(True)]
    exp, records = _store(tmp_path, "pac-bayes-digits", runs)
    fig = _figure(exp, exp.plots[0], records)
    ax = fig.axes[0]
    series = _errorbar_series(ax)
    # the subspace bounds at their d = 200, the hold-out bounds at no d at all
    assert sorted(series) == ["model=cnn, data=upright, method=subspace", "model=p4cnn, data=upright, method=subspace"]
    assert [(xs, ys) for xs, ys, _ in series.values()] == [([200.0], [0.5]), ([200.0], [0.4])]
    lines = _horizontal_lines(ax)
    assert sorted(y for y, _ in lines) == pytest.approx([0.3, 0.6])
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "model=cnn, method=holdout, data=rot90 (no intrinsic_dim)" in labels
    assert "model=p4cnn, method=holdout, data=rot90 (no intrinsic_dim)" in labels
    # each line in the colour of its model's subspace series
    colour = {label.split(",")[0]: line.get_color() for label, (_, _, line) in series.items()}
    for y, line in lines:
        assert line.get_color() == colour["model=cnn" if y == pytest.approx(0.6) else "model=p4cnn"]
    plt.close(fig)


@dataclass
class Cfg:
    model: str = "mlp"
    n: int | None = 10
    seed: int = 0


def _toy(tmp_path, runs, *plots, paper=(), effective=None):
    exp = Experiment("test-report-plots", "d", "r", Cfg, run=lambda c: {}, plots=plots, paper=paper,
                     sweep={"model": ("mlp", "emlp"), "n": (10, 100), "seed": (0,)}, effective=effective)
    store = Store(tmp_path / "toy.db")
    for config, metrics in runs:
        store.record(exp.name, {"model": "mlp", "n": 10, "seed": 0, **config}, metrics)
    return exp, store.runs(exp.name)


def test_a_run_without_the_x_setting_is_a_line_and_one_without_the_x_metric_is_named_as_left_out(tmp_path):
    runs = [({"n": 10}, {"err": 1.0, "acc": 0.5}), ({"n": 100}, {"err": 0.5, "acc": 0.7}),
            ({"n": None}, {"err": 0.8}), ({"model": "emlp"}, {"err": 0.2})]
    exp, records = _toy(tmp_path, runs, Plot(x="n", y="err"), Plot(x="acc", y="err", kind="scatter"))
    fig = _figure(exp, exp.plots[0], records)
    ax = fig.axes[0]
    points = sorted(x for xs, _, _ in _errorbar_series(ax).values() for x in xs)
    assert points == [10.0, 10.0, 100.0]  # the run without n is not placed at any n
    [(y, line)] = _horizontal_lines(ax)
    assert y == 0.8 and line.get_label() == "model=mlp (no n)"
    plt.close(fig)
    fig = _figure(exp, exp.plots[1], records)
    ax = fig.axes[0]
    assert sorted(x for xs, _, _ in _errorbar_series(ax).values() for x in xs) == [0.5, 0.7]
    assert _horizontal_lines(ax) == [] and "2 settings without acc not shown" in ax.get_title()
    plt.close(fig)


def test_the_report_header_shows_the_sizes_rpp_levels_resolves_not_the_stored_zeros(tmp_path):
    runs = [({"dataset": d, "setting": "exact", "model": "mlp"}, {"test_mse": 0.1}) for d in ("inertia", "pendulum")]
    exp, records = _store(tmp_path, "rpp-levels", runs[:1])
    text = build_report(exp, records).text
    header = next(line for line in text.splitlines() if line.startswith("Settings shared by every row"))
    assert "n_train=500" in header and "ch=128" in header and "epochs=30" in header and "equivariant_wd=0.001" in header
    assert "n_train=0" not in header and "ch=0" not in header
    assert "n_train, n_test, ch, num_layers, equivariant_wd, basic_wd (stored as 0)" in text
    # sizes that differ between rows are columns of the table, with the values each row ran at
    exp, records = _store(tmp_path, "rpp-levels", runs, file="both.db")
    text = build_report(exp, records).text
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| dataset | n_train | n_test | ch | num_layers | equivariant_wd | basic_wd | setup |")
    assert table[1].startswith("| inertia | 500 | 500 | 128 | 3 | 0.001 | 100 | quick |")
    assert table[2].startswith("| pendulum | 100 | 100 | 32 | 2 | 1e-05 | 1e-05 | quick |")


def test_an_effective_hook_that_fails_leaves_the_stored_values(tmp_path):
    def effective(config):
        if config.model == "emlp":
            raise KeyError("no table entry")
        return {"n": 1000}

    exp, records = _toy(tmp_path, [({}, {"err": 1.0}), ({"model": "emlp"}, {"err": 0.5})], effective=effective)
    table = [line for line in build_report(exp, records).text.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| model | n |")
    assert sorted(line.split(" | ")[:2] for line in table[1:]) == [["| emlp", "10"], ["| mlp", "1000"]]


def test_emlp_data_efficiency_draws_the_papers_curves_beside_the_demo_runs(tmp_path):
    from symkit.lab.experiments.emlp_data_efficiency import _FIG25, SIZES

    runs = [({"dataset": "inertia", "model": m, "n_train": 1000, "epochs": 300, "batch_size": 500},
             {"test_mse": v}) for m, v in (("mlp", 3.1), ("emlp-o", 0.2))]
    exp, records = _store(tmp_path, "emlp-data-efficiency", runs)
    fig = _figure(exp, exp.plots[0], records)
    ax = fig.axes[0]
    series = _errorbar_series(ax)
    assert sorted(series) == ["model=emlp-o", "model=mlp", "paper: model=emlp-o", "paper: model=mlp"]
    for model in ("mlp", "emlp-o"):
        xs, ys, line = series[f"paper: model={model}"]
        assert xs == [float(n) for n in SIZES] and ys == pytest.approx(_FIG25["inertia", model])
        assert line.get_markerfacecolor() == "none" and line.get_linestyle() == "--"
        assert line.get_color() == series[f"model={model}"][2].get_color()
        assert series[f"model={model}"][:2] == ([1000.0], [3.1 if model == "mlp" else 0.2])
    assert "not the paper's setup" in ax.get_title()  # the demo's runs are not at the paper's scale
    assert _inside(fig, ax.get_legend()) and _inside(fig, ax.xaxis.label) and _inside(fig, ax.title)
    plt.close(fig)


def test_paper_values_of_categories_sit_beside_their_bars_and_a_log_bar_axis_starts_below_every_bar(tmp_path):
    paper = [PaperValue("err", 0.03, {"model": "emlp", "n": 10}), PaperValue("err", 0.9, {"model": "mlp", "n": 10}),
             PaperValue("err", 0.5, {"model": "mlp", "n": 100})]  # no run at n = 100: not drawn
    runs = [({"model": "mlp"}, {"err": 1.0}), ({"model": "emlp"}, {"err": 0.011})]
    exp, records = _toy(tmp_path, runs, Plot(x="model", y="err", hue="n", kind="bar", logy=True), paper=paper)
    fig = _figure(exp, exp.plots[0], records)
    ax = fig.axes[0]
    [(label, (xs, ys, line))] = [(k, v) for k, v in _errorbar_series(ax).items() if k.startswith("paper")]
    assert label == "paper: n=10" and line.get_markerfacecolor() == "none"
    bars = sorted(ax.patches, key=lambda b: b.get_x())
    assert xs == pytest.approx([b.get_x() + b.get_width() / 2 for b in bars]) and ys == [0.9, 0.03]
    assert ax.get_ylim()[0] <= 0.011 / 2  # the smallest bar is plainly taller than the axis' start
    plt.close(fig)


def test_a_long_legend_goes_beside_the_axes_and_stays_inside_the_figure(tmp_path):
    runs = [({"model": f"m{i}"}, {"err": 1.0 + i}) for i in range(8)]
    exp, records = _toy(tmp_path, runs, Plot(x="n", y="err", hue="model", title="a title"))
    fig = _figure(exp, exp.plots[0], records)
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert len(legend.get_texts()) == 8 and _inside(fig, legend)
    renderer = fig.canvas.get_renderer()
    assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1  # covers no data
    assert _inside(fig, ax.xaxis.label) and _inside(fig, ax.yaxis.label)
    plt.close(fig)


def test_cumulative_contributions_keep_their_labels_inside_a_plainly_saved_figure():
    import torch

    from symkit.lab.experiments.figures import plot_cumulative_contributions
    from symkit.measure.layerwise import LayerwiseResult

    result = LayerwiseResult(names=["a", "b", "c"], types=["conv"] * 3, end_to_end=torch.ones(2, 3),
                             sq_norms=torch.tensor([[1.0, 4.0], [4.0, 1.0], [9.0, 9.0]], dtype=torch.float64),
                             transform="translate_x", method="exact")
    ax = plot_cumulative_contributions({"cnn": result, "vit": result})
    fig = ax.figure
    fig.savefig(io.BytesIO(), format="png")  # no bbox_inches: the layout alone must keep the labels in
    assert _inside(fig, ax.xaxis.label) and _inside(fig, ax.yaxis.label)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["cnn", "vit"]
    plt.close(fig)


def test_without_x_takes_any_of_a_tuple_of_values():
    """pac-bayes-digits' hold-out and pruning bounds both have no intrinsic dimension: neither is placed on it."""
    from symkit.lab.experiments import get_experiment
    from symkit.lab.runner.report import _without_x

    [plot, *_] = get_experiment("pac-bayes-digits").plots
    assert _without_x({"method": "pruning"}, plot.without_x) and _without_x({"method": "holdout"}, plot.without_x)
    assert not _without_x({"method": "subspace"}, plot.without_x) and not _without_x({}, plot.without_x)
    assert not _without_x({"method": "holdout"}, {})
