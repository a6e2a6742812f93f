"""Aggregation over seeds and the series a plot draws, on records written straight into a store."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from symkit.lab.experiments.registry import Experiment, PaperValue, Plot
from symkit.lab.runner.report import aggregate, build_report, plot_series
from symkit.lab.store import Store


@dataclass
class Cfg:
    model: str = "mlp"
    setting: str = "exact"
    seed: int = 0


def _experiment(*plots: Plot) -> Experiment:
    paper = (PaperValue("err", 0.5, where={"model": "emlp", "setting": "exact"}, source="Table 9"),)
    return Experiment("cli-test-report", "d", "r", Cfg, run=lambda c: {}, plots=plots, paper=paper,
                      sweep={"model": ("mlp", "emlp"), "setting": ("exact", "none"), "seed": (0, 1, 2)})


@pytest.fixture
def records(tmp_path):
    store = Store(tmp_path / "s.db")
    for m, base in (("mlp", 1.0), ("emlp", 2.0)):
        for setting, factor in (("exact", 1.0), ("none", 10.0)):
            for seed in range(3):
                store.record("cli-test-report", {"model": m, "setting": setting, "seed": seed},
                             {"err": base * factor + seed, "ok": seed > 0, "tag": "same", "note": f"s{seed}"})
    store.record("cli-test-report", {"model": "mlp", "setting": "exact", "seed": 9}, None, error="boom")
    return store.runs("cli-test-report")


def test_aggregate_gives_mean_stderr_and_paper_values(records):
    groups = aggregate(_experiment(), records)
    assert len(groups) == 4 and all(g.seeds == [0, 1, 2] for g in groups)  # the failed run is left out
    [g] = [g for g in groups if g.config == {"model": "emlp", "setting": "exact"}]
    assert g.mean["err"] == pytest.approx(3.0)  # 2, 3, 4
    assert g.stderr["err"] == pytest.approx(1.0 / math.sqrt(3))
    assert g.mean["ok"] == pytest.approx(2 / 3) and g.mean["tag"] == "same"
    assert g.mean["note"] == "(varies: s0; s1; s2)"
    assert g.paper["err"].value == 0.5
    assert all("err" not in other.paper for other in groups if other is not g)
    row = g.as_row()  # what ``summarize`` receives: the aggregates and every seed's own metrics
    assert row["n"] == 3 and row["mean"]["err"] == pytest.approx(3.0)
    assert [row["by_seed"][s]["err"] for s in (0, 1, 2)] == [2.0, 3.0, 4.0]


def test_bars_without_hue_are_split_by_the_other_varying_field_and_scatter_is_not(records):
    groups = aggregate(_experiment(), records)
    bars = plot_series(_experiment(), Plot(x="model", y="err", kind="bar"), groups)
    assert sorted(bars) == ["setting=exact", "setting=none"] and all(len(v) == 2 for v in bars.values())
    scatter = plot_series(_experiment(), Plot(x="model", y="err", kind="scatter"), groups)
    assert list(scatter) == [""] and len(scatter[""]) == 4
    hue = plot_series(_experiment(), Plot(x="setting", y="err", hue="model"), groups)
    assert sorted(hue) == ["model=emlp", "model=mlp"]
    assert plot_series(_experiment(), Plot(x="model", y="tag"), groups) == {}  # not a number: nothing to draw


def test_report_draws_every_plot_and_mentions_failures(records, tmp_path):
    exp = _experiment(Plot(x="model", y="err", hue="setting", kind="bar", logy=True),
                      Plot(x="setting", y="err", hue="model"), Plot(x="model", y="tag"))
    report = build_report(exp, records, plot_dir=tmp_path / "plots")
    assert [p.name for p in report.plots] == ["cli-test-report-err-vs-model.png", "cli-test-report-err-vs-setting.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in report.plots)
    assert "12 successful runs in 4 settings; 1 failed run (see" in report.text
    assert "| emlp | exact | paper | 3 | 3 ± 0.58 | 0.5 |" in report.text
    assert "means over seeds ± standard error" in report.text
    with pytest.raises(ValueError, match="report format must be 'md' or 'csv', got 'html'"):
        build_report(exp, records, fmt="html")


def test_figures_hook_gets_the_successful_runs_and_its_files_join_the_plots(records, tmp_path):
    seen = []

    def figures(runs, out_dir):
        seen.extend(runs)
        path = out_dir / "runs.txt"
        path.write_text(str(len(runs)))
        return [path]

    exp = Experiment("cli-test-report", "d", "r", Cfg, run=lambda c: {}, figures=figures)
    report = build_report(exp, records, plot_dir=tmp_path)
    assert len(seen) == 12 and all(r["metrics"]["tag"] == "same" for r in seen)  # the failed run is left out
    assert {(r["config"]["model"], r["seed"]) for r in seen} == {(m, s) for m in ("mlp", "emlp") for s in range(3)}
    assert report.plots == [tmp_path / "runs.txt"] and "![runs](runs.txt)" in report.text
    assert build_report(exp, records).plots == []  # no plot directory: no figures


def test_dynamics_report_draws_the_drift_curves_of_each_group(tmp_path):
    from symkit.lab.experiments import get_experiment

    exp = get_experiment("dynamics-drift")
    store = Store(tmp_path / "s.db")
    curves = {f"{w}_curve_{k}": [0.0, 0.1 * (i + 1), 0.2 * (i + 1)] for i, k in enumerate(("nom", "aug", "equi"))
              for w in ("to_e", "travelled")}
    for group, rel in (("rot", 0.25), ("trans", 1 / 64)):
        for seed in (1, 0):
            store.record("dynamics-drift", {"group": group, "seed": seed}, {"rel_dim": rel, **curves})
    report = build_report(exp, store.runs("dynamics-drift"), plot_dir=tmp_path / "plots")
    figure = tmp_path / "plots" / "dynamics-drift_curves.png"
    assert figure in report.plots and figure.read_bytes()[:4] == b"\x89PNG"


def test_box_plots_draw_every_seed_of_every_setting(records, tmp_path, monkeypatch):
    import matplotlib.axes

    from symkit.lab.runner.report import draw_plot

    drawn = []
    original = matplotlib.axes.Axes.boxplot

    def recording(self, data, *args, **kwargs):
        drawn.extend(sorted(values) for values in data)
        return original(self, data, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "boxplot", recording)
    exp = _experiment(Plot(x="model", y="err", hue="setting", kind="box", logy=True))
    path = draw_plot(exp, exp.plots[0], aggregate(exp, records), tmp_path / "box.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
    # one box per (model, setting), each holding the three seeds' values (base * factor + seed)
    assert sorted(drawn) == sorted([[b * f + s for s in range(3)] for b in (1.0, 2.0) for f in (1.0, 10.0)])


def test_the_markdown_table_leaves_series_out_and_names_them(tmp_path):
    """A learning curve (a list longer than SERIES_LENGTH) has no readable cell: the markdown table leaves it out
    and names it, short lists stay, and the CSV keeps every metric; a metric that only some seeds stored says how
    many."""
    from symkit.lab.runner.report import SERIES_LENGTH

    store = Store(tmp_path / "s.db")
    for seed in range(2):
        store.record("cli-test-report", {"model": "mlp", "setting": "exact", "seed": seed},
                     {"err": 1.0 + seed, "curve": [seed + i for i in range(SERIES_LENGTH + 1)], "pair": [1, 2]}
                     | ({"late": 5.0} if seed == 1 else {}))
    records = store.runs("cli-test-report")
    text = build_report(_experiment(), records).text
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert "err" in table[0] and "pair" in table[0] and "curve" not in table[0]
    assert "Series left out of the table" in text and ": curve." in text
    assert "| 5 (1 of 2 seeds) |" in table[1]  # a metric only some runs stored says so
    csv_text = build_report(_experiment(), records, fmt="csv").text
    assert "curve" in csv_text.splitlines()[0]


def test_an_experiments_own_summary_comes_first_and_the_table_of_every_metric_is_named(records):
    import dataclasses

    exp = dataclasses.replace(_experiment(), summarize=lambda rows: f"OWN SUMMARY of {len(rows)} settings")
    text = build_report(exp, records).text
    own, named = text.index("OWN SUMMARY of 4 settings"), text.index("Every stored metric, per setting:")
    assert own < named < text.index("| model | setting | setup | seeds |")
    assert "Every stored metric" not in build_report(_experiment(), records).text  # no summary: the table alone


def test_run_facts_are_listed_seed_by_seed_not_averaged(tmp_path):
    import dataclasses

    store = Store(tmp_path / "s.db")
    for seed, resumed, libs in ((0, 0, "a 1, b 2"), (1, 5000, "a 1, b 2"), (2, 0, None)):
        metrics = {"err": float(seed), "resumed_from": resumed, "same_fact": 7}
        if libs is not None:
            metrics["libraries"] = libs
        store.record("cli-test-report", {"model": "mlp", "setting": "exact", "seed": seed}, metrics)
    exp = dataclasses.replace(_experiment(), facts=("resumed_from", "libraries", "same_fact"))
    (group,) = aggregate(exp, store.runs("cli-test-report"))
    assert group.mean["resumed_from"] == "0: 0; 1: 5000; 2: 0" and group.stderr["resumed_from"] is None
    assert group.mean["libraries"] == "0: a 1, b 2; 1: a 1, b 2; 2: –"  # the seed without it is named
    assert group.mean["same_fact"] == 7 and group.mean["err"] == pytest.approx(1.0)
    table = build_report(exp, store.runs("cli-test-report")).text
    assert "0: 0; 1: 5000; 2: 0" in table and "(2 of 3 seeds)" not in table
    (plain,) = aggregate(_experiment(), store.runs("cli-test-report"))  # not declared a fact: averaged as before
    assert plain.mean["resumed_from"] == pytest.approx(5000 / 3)
