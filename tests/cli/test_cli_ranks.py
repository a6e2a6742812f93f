"""The ``ranks`` experiment and ``symkit ranks``: the thesis tables, run through the sweep machinery."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import symkit.lab.experiments.thesis_tables as thesis_tables  # noqa: E402
from symkit.lab.cli.main import app
from symkit.lab.runner.sweep import SweepError, plan, run_sweep
from symkit.lab.store import Store


@pytest.fixture
def ranks_experiment():
    from symkit.lab.experiments.registry import get_experiment

    return get_experiment("ranks")


def test_ranks_metrics_are_our_rank_the_thesis_value_and_a_match_flag(ranks_experiment, tmp_path):
    from symkit.lab.experiments.ranks import select_points

    points = [p for p in select_points("quick", group="S(4)") if p["table"] == "A.2"]
    assert {p["rep"] for p in points} == {f"T({k})" for k in range(1, 8)}
    store = Store(tmp_path / "s.db")
    result = run_sweep(ranks_experiment, plan(ranks_experiment, points=points), store)
    assert (result.ran, result.failed) == (7, 0)
    cells = {(c.group, c.rep): c for c in thesis_tables.thesis_cells(tier="all")}
    for run in store.runs("ranks"):
        cell = cells[(run.config["group"], run.config["rep"])]
        assert run.metrics["rank"] == thesis_tables.compute_rank(cell)
        assert run.metrics["thesis"] == int(cell.thesis)
        assert run.metrics["match"] is (run.metrics["rank"] == int(cell.thesis))
    # Table A.2, S(4): 1, 2, 5, 15, 51, 187, 715
    by_rep = {r.config["rep"]: r.metrics["rank"] for r in store.runs("ranks")}
    assert [by_rep[f"T({k})"] for k in range(1, 8)] == [1, 2, 5, 15, 51, 187, 715]


def test_filters_select_the_right_cells():
    from symkit.lab.experiments.ranks import select_points, tensor_order

    assert tensor_order("T(3)") == 3 and tensor_order("T(3,2)") == 5 and tensor_order("weird") is None
    small = select_points("all", max_rank=2)
    assert small and all(tensor_order(p["rep"]) <= 2 for p in small)
    assert len(select_points("quick")) < len(select_points("full")) <= len(select_points("all"))
    with pytest.raises(ValueError, match="no cells for group 'SO\\(99\\)'; groups: .*SO\\(3\\)"):
        select_points("full", group="SO(99)")


def test_settings_of_a_listed_field_select_cells_instead_of_overriding(ranks_experiment):
    specs = plan(ranks_experiment, quick=True, settings={"group": ["SO(3)", "O(1,3)"], "table": ["A.4", "A.6"]})
    assert {(s.config["table"], s.config["group"]) for s in specs} == {("A.4", "SO(3)"), ("A.6", "O(1,3)")}
    assert len(specs) == len(select_cells("A.4", "SO(3)")) + len(select_cells("A.6", "O(1,3)"))
    with pytest.raises(SweepError, match=r"no run of 'ranks' has group in SO\(33\); values in this sweep: .*SO\(3\)"):
        plan(ranks_experiment, quick=True, settings={"group": ["SO(33)"]})


def select_cells(table: str, group: str) -> list:
    return [c for c in thesis_tables.thesis_cells(tier="quick") if c.table == table and c.group == group]


def test_symkit_ranks_prints_the_table_and_report_shows_it(tmp_path):
    runner = CliRunner()
    db = str(tmp_path / "s.db")
    result = runner.invoke(app, ["ranks", "--quick", "--group", "SO(3)", "--max-rank", "5", "--store", db],
                           catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "Table A.4: SO(n), T_k" in lines
    rows = {line.split()[0]: line.split()[1] for line in lines if line.strip().startswith("T(")}
    assert rows == {"T(2)": "1", "T(3)": "1", "T(4)": "3", "T(5)": "6"}  # the thesis' SO(3) column
    report = runner.invoke(app, ["report", "ranks", "--store", db, "--out", str(tmp_path / "rep")])
    assert report.exit_code == 0, report.output
    assert "4 of 4 cells with a thesis value agree with it" in report.stdout
    assert "Table A.4: SO(n), T_k" in report.stdout
    assert "Settings shared by every row: table=A.4, group=SO(3)" in report.stdout
    assert "| rep | setup | seeds | rank | rank (paper) | thesis | match |" in report.stdout
    assert "| T(4) | paper | 1 | 3 | 3 | 3 | yes |" in report.stdout  # the registered paper value beside the run
    assert (tmp_path / "rep" / "ranks-rank-vs-thesis.png").exists()


def test_ranks_rejects_quick_with_all():
    result = CliRunner().invoke(app, ["ranks", "--quick", "--all"])
    assert result.exit_code == 2 and "choose one of --quick and --all" in result.output


def test_an_unknown_table_group_lists_the_known_ones_in_a_fresh_process(monkeypatch):
    """``group_from_name`` before any table was built (a fresh process: the tables register their groups as they are
    built) lists the groups of the tables, not ``known: []``."""
    monkeypatch.setattr(thesis_tables, "_GROUPS", {})
    monkeypatch.setattr(thesis_tables, "_CELLS", None)
    with pytest.raises(ValueError, match=r"unknown table group 'SO\(99x\)'; known: \[.*'SO\(3\)'.*\]") as caught:
        thesis_tables.group_from_name("SO(99x)")
    assert "known: []" not in str(caught.value)
    assert thesis_tables.group_from_name("SO(3)").d == 3


def test_the_registered_paper_values_are_the_thesis_tables_numbers():
    """Every number of Tables A.1-A.8 is a paper value of its own cell (238 of them); lower bounds, blanks and the
    cells beyond the thesis are not; Table A.3's are the reference generators' group, not the physical cube's."""
    from symkit.lab.experiments import get_experiment
    from symkit.lab.experiments.ranks import find_cell

    paper = get_experiment("ranks").paper
    assert len(paper) == 238
    assert {v.source for v in paper} == {f"Table A.{i}" for i in range(1, 9)}
    for v in paper:
        assert v.metric == "rank" and v.value == int(find_cell(**v.where).thesis)
    rubik = sorted((v.where["rep"], v.value) for v in paper if v.source == "Table A.3")
    assert rubik == [("T(1)", 2.0), ("T(2)", 6.0), ("T(3)", 22.0)]
    assert {v.where["group"] for v in paper if v.source == "Table A.3"} == {"RubiksCube(reference)"}


def test_a_listed_field_some_runs_leave_to_the_config_is_set_on_them():
    from symkit.lab.experiments import get_experiment

    experiment = get_experiment("pac-bayes-structure")  # only its full-batch run names its epochs (360)
    specs = plan(experiment, settings={"epochs": [300]}, seeds=[0])
    assert {s.config["optimizer"] for s in specs} == {"sgd"} and len(specs) == 6
    assert {s.config["epochs"] for s in specs} == {300}
    full = plan(experiment, settings={"epochs": [360], "optimizer": ["full-batch"]}, seeds=[0])
    assert [(s.config["optimizer"], s.config["epochs"]) for s in full] == [("full-batch", 360)]
