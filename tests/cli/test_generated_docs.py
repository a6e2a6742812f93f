"""The generated docs: every marked table in README.md and docs/*.md, and docs/reproductions.md, is what
``symkit report --docs`` writes from the archives in results/ (imported into a temporary store); the markers, the
status rule of the reproductions page and the command's options."""

from __future__ import annotations

import dataclasses
import itertools
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from symkit.lab.cli.main import app
from symkit.lab.experiments import unreproduced
from symkit.lab.experiments.registry import Experiment, FigureClaims, PaperValue
from symkit.lab.runner.docs_tables import find_blocks, parse_spec, refresh_docs, render_blocks, select_columns
from symkit.lab.runner.reproductions import (
    COMPARABLE,
    CONTRADICTS,
    MISSING,
    NEEDS,
    ORDERING,
    PAGE,
    REPRODUCED,
    Comparison,
    build_reproductions,
    builtin_experiments,
    experiment_rows,
    figure_rows,
)
from symkit.lab.runner.sweep import check_archived_run
from symkit.lab.store import Store
from symkit.lab.store.archive import import_archives

ROOT = Path(__file__).resolve().parents[2]
ARCHIVES = sorted((ROOT / "results").glob("*.jsonl"))


@pytest.fixture(scope="module")
def archived(tmp_path_factory) -> Store:
    """A store holding every run of every archive in results/."""
    store = Store(tmp_path_factory.mktemp("archives") / "s.db")
    import_archives(store, ARCHIVES, check=check_archived_run)
    return store


def _copy_docs(root: Path) -> Path:
    """README.md and docs/*.md copied under ``root`` (the command's --root)."""
    (root / "docs").mkdir(parents=True)
    shutil.copy(ROOT / "README.md", root / "README.md")
    for page in (ROOT / "docs").glob("*.md"):
        shutil.copy(page, root / "docs" / page.name)
    return root


def test_every_generated_table_and_the_reproductions_page_are_what_the_archives_give(archived):
    assert ARCHIVES, "no runs archive in results/"
    blocks = {p.name: find_blocks(p.read_text(), p.name) for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]}
    assert any(str(b.spec).startswith("rl-sac/") for b in blocks["rl.md"])  # the checked tables exist
    stale = refresh_docs(ROOT, archived, check=True)
    assert not stale, "generated docs out of date; `symkit import results/*.jsonl --store S && symkit report " \
                      "--docs --store S` rewrites them:\n" + "".join(c.diff(ROOT) for c in stale)


def test_a_stale_number_in_a_marked_table_is_found_and_rewritten(archived, tmp_path):
    root = _copy_docs(tmp_path / "repo")
    rl = root / "docs" / "rl.md"
    good = rl.read_text()
    planted = good.replace("| 772.3 ± 12.8 |", "| 792.3 ± 12.8 |", 1)  # Walker2d RPP's late return, in the summary
    assert planted != good
    rl.write_text(planted)
    [change] = refresh_docs(root, archived, check=True)
    assert change.path == rl and change.what == ("rl-sac/summary",)
    assert "-| Walker2d" in change.diff(root) and "792.3" in change.diff(root)
    assert rl.read_text() == planted  # --check writes nothing
    refresh_docs(root, archived)
    assert rl.read_text() == good and refresh_docs(root, archived, check=True) == []


def test_the_command_checks_then_rewrites_the_docs(archived, tmp_path):
    root = _copy_docs(tmp_path / "repo")
    (root / PAGE).unlink()  # a missing page is stale too
    runner = CliRunner()
    args = ["report", "--docs", "--root", str(root), "--store", str(archived.path)]
    checked = runner.invoke(app, [*args, "--check"], catch_exceptions=False)
    assert checked.exit_code == 1 and "+# Reproductions" in checked.stdout
    assert "docs/reproductions.md: out of date" in checked.stderr and not (root / PAGE).exists()
    written = runner.invoke(app, args, catch_exceptions=False)
    assert written.exit_code == 0 and (root / PAGE).read_text() == (ROOT / PAGE).read_text()
    again = runner.invoke(app, [*args, "--check"], catch_exceptions=False)
    assert again.exit_code == 0 and "current" in again.stderr
    for bad in (["report"], ["report", "rl-sac", "--docs"], ["report", "rl-sac", "--check"]):
        result = runner.invoke(app, [*bad, "--store", str(archived.path)], catch_exceptions=False)
        assert result.exit_code == 2 and "--docs" in result.output


def test_markers_are_read_with_their_options_and_bad_ones_are_named_by_line():
    text = ("intro\n<!-- symkit:table rl-sac/comparisons seeds=7-10 -->\nold\n<!-- /symkit:table -->\n"
            "```\n<!-- symkit:table rl-sac/summary -->\n```\n")  # the second marker is in a code block: text
    [block] = find_blocks(text)
    assert block.line == 2 and block.spec == parse_spec("rl-sac/comparisons seeds=7,8,9,10")
    assert block.spec.seeds == (7, 8, 9, 10) and text[block.start:block.end] == "old\n"
    new, changed = render_blocks(text, lambda spec: f"| {spec.table} |")
    assert new.startswith("intro\n<!-- symkit:table rl-sac/comparisons seeds=7-10 -->\n\n| comparisons |\n\n<!--")
    assert changed == ["rl-sac/comparisons seeds=7-10"] and render_blocks(new, lambda s: f"| {s.table} |")[1] == []
    for bad, says in (("<!-- symkit:table rl-sac/a -->\n", "line 1: the table marker for rl-sac/a is never closed"),
                      ("x\n<!-- /symkit:table -->\n", "line 2: '<!-- /symkit:table -->' closes no table marker"),
                      ("<!-- symkit:table rl-sac -->\n<!-- /symkit:table -->\n", "expected EXPERIMENT/TABLE"),
                      ("<!-- symkit:table a/b rows=3 -->\n<!-- /symkit:table -->\n", "unknown option 'rows=3'"),
                      ("<!-- symkit:table a/b -->\n<!-- symkit:table a/c -->\n", "line 2: a table marker inside")):
        with pytest.raises(ValueError, match="page.md, line") as error:
            find_blocks(bad, "page.md")
        assert says in str(error.value)


def test_a_marker_keeps_the_columns_it_names_in_its_order():
    spec = parse_spec("a/b columns=pd_(paper),dims seeds=0")
    assert spec.columns == ("pd_(paper)", "dims") and spec.seeds == (0,) and parse_spec(str(spec)) == spec
    table = "| dims | pd | pd (paper) |\n|---|---|---|\n| 2 | 0.14 | 0.145 ± 0.026 |\n| 4 | 0.5 | 0.49 |"
    assert select_columns(table, spec.columns) == ("| pd (paper) | dims |\n|---|---|\n| 0.145 ± 0.026 | 2 |\n"
                                                   "| 0.49 | 4 |")
    with pytest.raises(ValueError, match=r"no column 'mse'; its columns: dims, pd, pd_\(paper\)"):
        select_columns(table, ["dims", "mse"])
    with pytest.raises(ValueError, match="names each column once"):
        parse_spec("a/b columns=dims,,pd")


def test_a_marker_naming_no_table_or_no_runs_is_refused_with_the_choices(archived, tmp_path):
    from symkit.lab.runner.docs_tables import _Tables

    tables = _Tables(archived)
    text = "<!-- symkit:table rl-sac/nonsense -->\n<!-- /symkit:table -->\n"
    with pytest.raises(ValueError, match=r"x.md, line 1: .*no table 'nonsense'; its tables: metrics, .*comparisons"):
        render_blocks(text, tables, "x.md")
    with pytest.raises(ValueError, match=r"no finished runs of 'rl-sac' with env=Reacher .*import results/rl-sac"):
        render_blocks(text.replace("rl-sac/nonsense", "rl-sac/metrics where=env=Reacher"), tables, "x.md")
    with pytest.raises(ValueError, match="no experiment named 'nope'"):
        render_blocks(text.replace("rl-sac/nonsense", "nope/metrics"), tables, "x.md")
    assert tables(parse_spec("rl-sac/comparisons seeds=7-10")).count("\n| Hopper | 100000 | rpp |") == 1


def test_a_marker_where_reads_only_the_runs_with_those_settings(archived):
    from symkit.lab.runner.docs_tables import _Tables

    spec = parse_spec("rl-sac/summary where=env=Hopper where=env=Ant columns=env,model")
    assert spec.where == ("env=Hopper", "env=Ant") and parse_spec(str(spec)) == spec
    tables = _Tables(archived)
    every = tables(parse_spec("rl-sac/summary columns=env,model"))
    chosen = tables(spec)
    envs = {line.split("|")[1].strip() for line in chosen.splitlines()[2:]}
    assert envs == {"Hopper", "Ant"} and len(every.splitlines()) > len(chosen.splitlines())
    assert {line for line in every.splitlines() if "| Hopper |" in line or "| Ant |" in line} <= set(
        chosen.splitlines())
    with pytest.raises(ValueError, match="has no setting 'enviro'; valid settings: .*env"):
        tables(parse_spec("rl-sac/summary where=enviro=Hopper"))
    with pytest.raises(ValueError, match="where=KEY=VALUE names a setting"):
        parse_spec("rl-sac/summary where=Hopper")


def test_report_where_reads_only_the_runs_with_that_setting(archived, tmp_path):
    runner = CliRunner()
    args = ["report", "rl-sac", "--store", str(archived.path), "--out", str(tmp_path), "--format", "csv"]
    every = runner.invoke(app, args, catch_exceptions=False)
    hopper = runner.invoke(app, [*args, "--where", "env=Hopper"], catch_exceptions=False)
    assert every.exit_code == 0 and hopper.exit_code == 0
    rows = hopper.stdout.splitlines()[1:]
    assert rows and all("Hopper" in row for row in rows) and len(rows) < len(every.stdout.splitlines()) - 1
    none = runner.invoke(app, [*args, "--where", "env=Reacher"], catch_exceptions=False)
    assert none.exit_code == 2 and "no runs of 'rl-sac' with env=Reacher" in none.output


@dataclass
class Cfg:
    model: str = "mlp"
    epochs: int = 10
    seed: int = 0


NAME = "cli-test-repro"


def _experiment() -> Experiment:
    paper = (PaperValue("err", 0.5, where={"model": "emlp"}, source="Table 9 (a test)", stderr=0.1),
             PaperValue("err", 1.0, where={"model": "mlp"}, source="Table 9"),
             PaperValue("acc", 90.0, where={"model": "mlp"}, source="Figure 8"))
    return Experiment(NAME, "d", "thesis Table 9 and Figure 8 (a test)", Cfg, run=lambda c: {}, paper=paper,
                      quick={"epochs": 1}, sweep={"model": ("mlp", "emlp"), "seed": (0, 1)})


_STORES = itertools.count()


def _rows(tmp_path, runs: dict[str, list[float]], epochs: int = 10):
    store = Store(tmp_path / f"r{next(_STORES)}.db")
    for model, errs in runs.items():
        for seed, err in enumerate(errs):
            store.record(NAME, {"model": model, "epochs": epochs, "seed": seed}, {"err": err})
    return {r.result: r for r in experiment_rows(_experiment(), store.runs(NAME))}


def test_the_status_of_a_row_follows_the_rule(tmp_path):
    rows = _rows(tmp_path, {"emlp": [0.5, 0.7], "mlp": [1.0, 1.0]})  # emlp 0.6 ± 0.1: within 2 x (0.1 + 0.1)
    assert rows["Table 9"].status == REPRODUCED and rows["Table 9"].why == "2 of 2 comparisons within"
    assert rows["Table 9"].ours == "0.6 ± 0.1 (2 seeds); 1 (2 seeds)"
    assert rows["Figure 8"].status == MISSING and "no archived run at the paper's or default scale" in \
        rows["Figure 8"].why and "`symkit reproduce cli-test-repro`" in rows["Figure 8"].why
    assert _rows(tmp_path, {"emlp": [0.5, 0.7], "mlp": [3.0, 3.0]})["Table 9"].status == ORDERING  # mlp is off
    assert _rows(tmp_path, {"emlp": [2.0, 2.2], "mlp": [1.2, 1.2]})["Table 9"].status == CONTRADICTS  # order too
    alone = _rows(tmp_path, {"mlp": [3.0, 3.0]})["Table 9"]  # one value, off, and no pair to order
    assert alone.status == CONTRADICTS and alone.why == "0 of 1 comparison within; 1 of the 2 paper values have no " \
        "comparable run; run: `symkit reproduce cli-test-repro --set model=emlp` after `symkit import " \
        "results/cli-test-repro.jsonl` (the sweep skips the archived runs; 0 s a run, the median of the 2 archived " \
        "runs at that scale)"
    quick = _rows(tmp_path, {"emlp": [0.5, 0.7]}, epochs=1)["Table 9"]
    assert quick.status == MISSING and "at the quick scale" in quick.why and quick.scale == "quick (2 runs)"
    assert _rows(tmp_path, {})["Table 9"].why.startswith(f"no run in `results/{NAME}.jsonl`")


def test_a_result_without_numbers_takes_its_status_from_the_registered_claims(tmp_path):
    store = Store(tmp_path / "claims.db")
    for model, err in (("mlp", 1.0), ("emlp", 0.5)):
        store.record(NAME, {"model": model, "epochs": 10, "seed": 0}, {"err": err})
        store.record(NAME, {"model": model, "epochs": 1, "seed": 0}, {"err": 2.0 if model == "emlp" else 1.0})

    def rows(claims):
        experiment = Experiment(NAME, "d", "thesis Figure 8: the EMLP below the MLP (a test)", Cfg,
                                run=lambda c: {}, quick={"epochs": 1}, sweep={"model": ("mlp", "emlp")},
                                claims=claims)
        return experiment_rows(experiment, store.runs(NAME))

    seen: list[str] = []

    def emlp_below_mlp(runs):
        seen.extend(r["scale"] for r in runs)
        err = {r["config"]["model"]: r["mean"]["err"] for r in runs}
        return {"emlp_below_mlp": err["emlp"] < err["mlp"]} if {"mlp", "emlp"} <= set(err) else {}

    [row] = rows(emlp_below_mlp)  # checked on the comparable runs alone (the quick ones have it reversed)
    assert (row.status, row.ours, row.why) == (ORDERING, "1 of 1 check holds", "emlp below mlp: holds")
    assert seen == ["paper", "paper"]  # no paper_scale: the defaults are the paper's setup
    [row] = rows(lambda runs: {**emlp_below_mlp(runs), "mlp_below_one": False})
    assert row.status == CONTRADICTS and row.ours == "1 of 2 checks holds"
    assert row.why == "emlp below mlp: holds; mlp below one: does not hold"
    [row] = rows(lambda runs: {})  # nothing decided: as without claims
    assert row.status == MISSING and "no paper value registered" in row.why


def test_a_comparison_with_a_stand_in_default_says_so(tmp_path):
    store = Store(tmp_path / "stand_in.db")
    for seed, err in enumerate([0.5, 0.7]):
        store.record(NAME, {"model": "emlp", "epochs": 10, "seed": seed}, {"err": err})
    plain = {r.result: r for r in experiment_rows(dataclasses.replace(_experiment(), paper_scale={"epochs": 100}),
                                                  store.runs(NAME))}["Table 9"]
    stand_in = dataclasses.replace(_experiment(), stand_in="digits, not MNIST", paper_scale={"epochs": 100})
    row = {r.result: r for r in experiment_rows(stand_in, store.runs(NAME))}["Table 9"]
    assert row.status == plain.status == REPRODUCED
    assert row.why == plain.why + "; the default scale is a stand-in (digits, not MNIST), not the paper's setting"
    assert "stand-in" not in plain.why
    # without a paper scale the defaults are the paper's sizes, so every comparison is of the stand-in's runs
    own = {r.result: r for r in experiment_rows(dataclasses.replace(_experiment(), stand_in="random-policy data"),
                                                store.runs(NAME))}["Table 9"]
    assert own.why.endswith("; its runs are a stand-in (random-policy data), not the paper's setting")


def test_a_value_is_within_up_to_twice_the_summed_standard_errors():
    paper = PaperValue("err", 1.0, stderr=0.5)
    assert Comparison(paper, 3.0, 0.5, 3, "default").within  # |3 - 1| = 2 x (0.5 + 0.5)
    assert not Comparison(paper, 3.0001, 0.5, 3, "default").within
    assert not Comparison(PaperValue("err", 1.0), 1.0001, None, 1, "paper").within  # no error bars: exact only
    assert Comparison(PaperValue("pd", 0), 0.0, None, 1, "paper").within


def test_a_row_with_nothing_compared_needs_data_where_the_paper_scale_does(tmp_path, monkeypatch):
    monkeypatch.setitem(unreproduced.PAPER_SCALE_NEEDS, NAME, "a GPU of its own")
    row = _rows(tmp_path, {})["Table 9"]
    assert row.status == NEEDS and "needs a GPU of its own" in row.why
    assert _rows(tmp_path, {"emlp": [0.5, 0.7], "mlp": [1.0, 1.0]})["Table 9"].status == REPRODUCED


@dataclass
class DataCfg:
    data: str = "digits"
    model: str = "mlp"
    seed: int = 0


def test_a_value_only_the_paper_scale_can_match_needs_its_data_beside_default_runs(tmp_path, monkeypatch):
    monkeypatch.setitem(unreproduced.PAPER_SCALE_NEEDS, NAME, "MNIST's files")
    store = Store(tmp_path / "data.db")
    store.record(NAME, {"data": "digits", "model": "mlp", "seed": 0}, {"err": 2.0})  # a default run
    values = (PaperValue("err", 1.1, where={"data": "mnist"}, source="Table 4"),
              PaperValue("err", 3.0, where={"model": "emlp"}, source="Table 5"))
    experiment = Experiment(NAME, "d", "thesis Tables 4 and 5 (a test)", DataCfg, run=lambda c: {}, paper=values,
                            paper_scale={"data": "mnist"}, sweep={"model": ("mlp", "emlp"), "seed": (0,)})
    rows = {r.result: r for r in experiment_rows(experiment, store.runs(NAME))}
    assert rows["Table 4"].status == NEEDS and "needs MNIST's files" in rows["Table 4"].why
    # an EMLP default run could match Table 5's value: it is missing work, not data
    assert rows["Table 5"].status == MISSING and "MNIST" not in rows["Table 5"].why


def test_a_figure_without_numbers_gets_its_own_row_from_its_claims(tmp_path):
    from symkit.lab.runner.report import aggregate

    store = Store(tmp_path / "figures.db")
    for epochs, err in ((10, 0.5), (20, 0.4), (40, 0.3), (1, 0.1)):  # a sweep of a fixed setting; epochs=1 is quick
        store.record(NAME, {"model": "emlp", "epochs": epochs, "seed": 0}, {"err": err})

    def falls(rows):
        points = sorted((r["config"]["epochs"], r["mean"]["err"]) for r in rows)
        return {"err_falls_with_epochs": all(a[1] > b[1] for a, b in zip(points, points[1:]))} if points else {}

    figure = FigureClaims("Figure 9 (against epochs)", "the error falls with training", falls,
                          "symkit reproduce cli-test-repro --sweep epochs=10,20,40")
    experiment = dataclasses.replace(_experiment(), figure_claims=(figure,))
    [row] = figure_rows(experiment, aggregate(experiment, store.runs(NAME)))
    # the modified-scale runs count, the quick one (which would break the trend) does not
    assert (row.result, row.status, row.why) == ("Figure 9 (against epochs)", ORDERING, "err falls with epochs: holds")
    assert row.paper == "the error falls with training (curves only)"
    assert row.scale == "paper (1 run), modified (2 runs)"
    store.record(NAME, {"model": "emlp", "epochs": 80, "seed": 0}, {"err": 0.35})
    [row] = figure_rows(experiment, aggregate(experiment, store.runs(NAME)))
    assert row.status == CONTRADICTS and row.why == "err falls with epochs: does not hold"
    # a table's numbers checked as orderings are not curves
    table = dataclasses.replace(experiment, figure_claims=(dataclasses.replace(figure, result="Table 9 (orderings)"),))
    [row] = figure_rows(table, aggregate(table, store.runs(NAME)))
    assert row.paper == "the error falls with training (orderings only)"
    [row] = figure_rows(experiment, [])
    assert row.status == MISSING and row.why.endswith("run: `symkit reproduce cli-test-repro --sweep epochs=10,20,40`")
    assert build_reproductions(store, {NAME: experiment}).count("| Figure 9 (against epochs) | `cli-test-repro` |") == 1


def test_a_decided_departure_is_written_beside_its_row(tmp_path):
    experiment = dataclasses.replace(_experiment(), decided={"Table 9": "a longer run closes the gap"})
    page = build_reproductions(Store(tmp_path / "d.db"), {NAME: experiment})
    [table9] = [line for line in page.splitlines() if line.startswith("| Table 9 |")]
    assert table9.endswith("; decided: a longer run closes the gap |")
    [figure8] = [line for line in page.splitlines() if line.startswith("| Figure 8 |")]
    assert "decided" not in figure8
    plain = Experiment(NAME, "d", "thesis Figure 8: an ordering (a test)", Cfg, run=lambda c: {},
                       decided={"*": "checked against the reference code"})
    assert "; decided: checked against the reference code |" in build_reproductions(Store(tmp_path / "e.db"),
                                                                                    {NAME: plain})


def test_the_page_has_a_row_per_result_and_an_entry_per_unreproduced_result(tmp_path):
    store = Store(tmp_path / "s.db")
    page = build_reproductions(store, {NAME: _experiment()})
    assert page.count(f"| `{NAME}` |") == 2  # Table 9 and Figure 8
    for item in unreproduced.UNREPRODUCED:
        assert f"| {item.result} | – |" in page
    total = 2 + len(unreproduced.UNREPRODUCED)
    assert f"Of {total} results: 0 reproduced, 0 ordering only, 0 contradicts" in page


def test_every_builtin_experiment_names_a_document_and_every_need_an_experiment():
    experiments = builtin_experiments()
    for experiment in experiments.values():
        unreproduced.document_of(experiment.reproduces)  # raises when it names none
    assert set(unreproduced.PAPER_SCALE_NEEDS) <= set(experiments)
    with pytest.raises(ValueError, match="document must be one of thesis"):
        unreproduced.Unreproduced("thesis 2", "Table 1", "1", "none")


def test_experiments_registered_from_outside_symkit_get_no_row(monkeypatch):
    from symkit.lab.experiments import registry

    monkeypatch.setitem(registry._REGISTRY, NAME, _experiment())
    assert NAME in registry.all_experiments() and NAME not in builtin_experiments()
    assert "rl-sac" in builtin_experiments()


def test_where_compares_a_tuple_setting_in_its_stored_form(archived):
    from symkit.lab.experiments import get_experiment
    from symkit.lab.runner.report import parse_where, select_runs

    experiment = get_experiment("powernet-classify")
    records = archived.runs("powernet-classify", status="ok")
    where = parse_where(experiment, ["channels=2,4,8,16"])
    assert where == {"channels": [(2, 4, 8, 16)]}  # typed as the field's tuple, stored as a JSON list
    chosen = select_runs(records, where=where)
    assert chosen and all(r.config["channels"] == [2, 4, 8, 16] for r in chosen)
    assert len(chosen) < len(records)  # the default widths' runs are left out
    assert select_runs(records, where=parse_where(experiment, ["channels=2,4,8"])) == []


def test_the_command_for_a_rows_missing_values_is_one_that_plans_them(tmp_path):
    store = Store(tmp_path / "rest.db")
    for seed in (0, 1, 2):
        store.record(NAME, {"model": "mlp", "epochs": 10, "seed": seed}, {"err": 3.0},
                     duration=(60.0, 120.0, 600.0)[seed])  # median 2 min, mean 4.3 min
    values = (PaperValue("err", 1.0, where={"model": "mlp"}, source="Table 9"),
              PaperValue("err", 0.5, where={"model": "emlp", "epochs": 20}, source="Table 9"),
              PaperValue("err", 0.4, where={"model": "cnn", "epochs": 20}, source="Table 9"))

    def why(**changes):
        experiment = dataclasses.replace(_experiment(), paper=values, **changes)
        return {r.result: r for r in experiment_rows(experiment, store.runs(NAME))}["Table 9"].why

    assert why().endswith("run: `symkit reproduce cli-test-repro --sweep model=emlp,cnn --set epochs=20` after "
                          "`symkit import results/cli-test-repro.jsonl` (the sweep skips the archived runs; 2 min a "
                          "run, the median of the 3 archived runs at that scale)")
    # a run list that holds no cnn: no command plans the value, so none is printed
    listed = why(points=lambda quick: [{"model": "mlp"}, {"model": "emlp"}])
    assert listed.endswith("2 of the 3 paper values have no comparable run")


class _Watched(dict):
    """A row's metrics that note every name read or looked for and not found (``[]``, ``get``, ``in``)."""

    def __init__(self, values, missed: set):
        super().__init__(values)
        self.missed = missed

    def __getitem__(self, key):
        if key not in self:
            self.missed.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        if key not in self:
            self.missed.add(key)
        return super().get(key, default)

    def __contains__(self, key):
        found = super().__contains__(key)
        if not found:
            self.missed.add(key)
        return found


def _watched_rows(groups, missed: set) -> list[dict]:
    rows = []
    for g in groups:
        row = g.as_row()
        row["mean"], row["stderr"] = _Watched(row["mean"], missed), _Watched(row["stderr"], missed)
        row["by_seed"] = {s: _Watched(m, missed) for s, m in row["by_seed"].items()}
        rows.append(row)
    return rows


@pytest.mark.parametrize("name", sorted(n for n, e in builtin_experiments().items() if e.claims or e.figure_claims))
def test_every_claim_reads_metrics_the_archived_runs_have(archived, name):
    """The claims (orderings on docs/reproductions.md) checked on the archived runs read only metric names that
    some archived run of the experiment reports: a claim that asks for a misspelt metric would otherwise read
    nothing, and its check would fail or pass by default rather than by the runs."""
    from symkit.lab.runner.report import aggregate

    experiment = builtin_experiments()[name]
    records = [r for r in archived.runs(name) if r.status == "ok"]
    usable = [g for g in aggregate(experiment, records) if g.scale != "quick"]
    reported = {k for g in usable for k in g.mean}
    missed: set = set()
    checked = 0
    comparable = [g for g in usable if g.scale in COMPARABLE]
    if experiment.claims is not None and comparable:
        checked += len(experiment.claims(_watched_rows(comparable, missed)))
    for figure in experiment.figure_claims:
        checked += len(figure.claims(_watched_rows(usable, missed)))
    assert checked, f"{name}: no claim was checked on the archived runs"
    assert not missed - reported, f"{name}: claims read {sorted(missed - reported)}, which no archived run reports"
