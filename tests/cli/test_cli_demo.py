"""``symkit demo``: quick experiments end to end, reports with plots under --out."""

from __future__ import annotations

from typer.testing import CliRunner

from symkit.lab.cli.main import app
from symkit.lab.runner import demo as demo_module
from symkit.lab.store import Store


def test_demo_runs_the_listed_experiments_and_writes_reports_with_plots(toy, tmp_path, monkeypatch):
    monkeypatch.setattr(demo_module, "DEMO_EXPERIMENTS", ("cli-toy", "no-such-experiment"))
    out = tmp_path / "demo"
    result = CliRunner().invoke(app, ["demo", "--out", str(out), "--executor", "local"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "skipping no-such-experiment (not available" in result.output
    report = (out / "cli-toy" / "report.md").read_text()
    assert "| n | setup | seeds |" in report and "| 10 | quick | 2 |" in report
    png = out / "cli-toy" / "cli-toy-error-vs-n.png"
    assert png.read_bytes()[:4] == b"\x89PNG"
    index = (out / "README.md").read_text()
    assert "[cli-toy](cli-toy/report.md)" in index and "cli-toy/cli-toy-error-vs-n.png" in index
    assert len(Store(out / "demo.db").runs("cli-toy")) == 4
    # a second demo resumes from its store; --fresh starts over
    again = CliRunner().invoke(app, ["demo", "--out", str(out), "--executor", "local"])
    assert "4 already stored, ran 0" in again.output
    fresh = CliRunner().invoke(app, ["demo", "--out", str(out), "--executor", "local", "--fresh"])
    assert "0 already stored, ran 4" in fresh.output


def test_demo_with_an_unknown_experiment_lists_the_valid_ones(toy, tmp_path):
    result = CliRunner().invoke(app, ["demo", "--out", str(tmp_path), "--experiments", "nope"])
    assert result.exit_code == 2
    assert "no experiment named 'nope'; valid names:" in result.output and "cli-toy" in result.output
