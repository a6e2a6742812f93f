"""Scales (--scale quick|default|paper) and run settings (--device, --data-dir, --precision, --smoke): the plan each
scale makes, the labels of the report, the settings reaching every executor's workers, and clear refusals."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from symkit.lab import runtime
from symkit.lab.cli.main import app
from symkit.lab.runner.report import aggregate
from symkit.lab.runner.sweep import SweepError, plan, run_sweep
from symkit.lab.store import Store


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_each_scale_plans_its_overrides_and_its_grid(toy_scaled):
    default = plan(toy_scaled)
    quick = plan(toy_scaled, scale="quick")
    paper = plan(toy_scaled, scale="paper")
    assert [(s.config["n"], s.config["scale"], s.seed) for s in default] == [(10, 1.0, 0), (100, 1.0, 0)]
    assert {s.config["scale"] for s in quick} == {0.5}
    assert sorted((s.config["n"], s.seed) for s in paper) == [(100, 0), (100, 1), (1000, 0), (1000, 1)]
    assert {(s.config["scale"], s.config["tag"]) for s in paper} == {(3.0, "paper")}
    assert plan(toy_scaled, quick=True) == quick
    with pytest.raises(SweepError, match="contradicts"):
        plan(toy_scaled, quick=True, scale="paper")
    with pytest.raises(SweepError, match="scale must be one of quick, default, paper"):
        plan(toy_scaled, scale="huge")


def test_the_report_labels_each_scale_and_sets_paper_values_beside_paper_and_default_rows(toy_scaled, tmp_path):
    store = Store(tmp_path / "s.db")
    for scale in ("quick", "default", "paper"):
        run_sweep(toy_scaled, plan(toy_scaled, scale=scale), store)
    run_sweep(toy_scaled, plan(toy_scaled, settings={"scale": [2.0]}), store)
    rows = {(g.config["n"], g.scale): bool(g.paper) for g in aggregate(toy_scaled, store.runs(toy_scaled.name))}
    assert rows == {(10, "quick"): False, (10, "default"): False, (100, "default"): True, (100, "quick"): False,
                    (100, "paper"): True, (1000, "paper"): False, (10, "modified"): False, (100, "modified"): False}


def test_run_settings_reach_the_run_on_every_executor(toy_scaled, tmp_path):
    settings = runtime.RunSettings(device="cpu", data_dir=str(tmp_path), precision="bf16")
    specs = plan(toy_scaled, run_settings=settings)
    for executor in ("local", "process"):
        store = Store(tmp_path / f"{executor}.db")
        result = run_sweep(toy_scaled, specs, store, executor=executor, jobs=2)
        assert (result.ran, result.failed) == (2, 0)
        for record in store.runs(toy_scaled.name):
            assert record.metrics["device"] == "cpu" and record.metrics["data_dir"] == str(tmp_path)
            assert record.metrics["precision"] == "bf16" and record.metrics["epochs"] == 50
    # the settings are not part of a run's identity: the same config on another device is the same run
    other = plan(toy_scaled, run_settings=runtime.RunSettings(data_dir=None))
    assert [s.config_hash for s in other] == [s.config_hash for s in specs]


def test_a_smoke_run_prints_its_metrics_under_the_limits_and_stores_nothing(toy_scaled, tmp_path):
    db = tmp_path / "s.db"
    result = invoke("reproduce", toy_scaled.name, "--scale", "paper", "--data-dir", str(tmp_path), "--device", "cpu",
                    "--smoke", "--store", str(db))
    assert result.exit_code == 0, result.output
    assert "epochs: 1" in result.stdout and "label: paper" in result.stdout and "n_used: 100" in result.stdout
    assert f"data_dir: {tmp_path}" in result.stdout
    assert not db.exists()


@pytest.mark.parametrize("args,fragment", [
    (["--device", "cuda"], "no CUDA GPU"),
    (["--device", "tpu"], "not a torch device name"),
    (["--data-dir", "/no/such/folder"], "does not exist"),
    (["--precision", "fp8"], "precision must be one of 32, bf16"),
    (["--scale", "huge"], "scale must be one of quick, default, paper"),
    (["--quick", "--scale", "paper"], "contradicts"),
])
def test_bad_run_settings_are_refused_in_one_line_before_anything_runs(toy_scaled, tmp_path, args, fragment):
    db = tmp_path / "s.db"
    result = invoke("reproduce", toy_scaled.name, *args, "--store", str(db))
    assert result.exit_code == 2 and fragment in result.output and "Traceback" not in result.output
    assert not db.exists()


def test_run_settings_check_their_values():
    with pytest.raises(ValueError, match="max_epochs must be a positive integer"):
        runtime.RunSettings(max_epochs=0)
    with pytest.raises(TypeError, match="RunSettings"):
        with runtime.using({"device": "cpu"}):  # type: ignore[arg-type]
            pass
    with runtime.using(runtime.RunSettings(max_epochs=2, max_batches=1)):
        assert runtime.epochs(10) == 2 and list(runtime.limit_batches(range(5))) == [0]
        assert runtime.current().smoke
    assert runtime.epochs(10) == 10 and not runtime.current().smoke


def test_compile_is_a_run_setting_refused_without_a_cpp_compiler_and_sent_to_the_runs(toy_scaled, tmp_path,
                                                                                      monkeypatch):
    """``--compile`` changes how networks run, not what a run computes: a run setting, sent with every run like
    ``--device``; on the CPU it needs a C++ compiler (torch's inductor builds one), which is checked before any run."""
    import torch

    with pytest.raises(ValueError, match="compile must be True or False"):
        runtime.RunSettings(compile="yes")  # type: ignore[arg-type]
    seen = []
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **kw: seen.append(type(self).__name__))
    with runtime.using(runtime.RunSettings(compile=True)):
        assert runtime.compile_module(torch.nn.Linear(2, 2)) is not None and seen == ["Linear"]
    assert runtime.compile_module(torch.nn.Linear(2, 2)) is not None and seen == ["Linear"]  # off by default
    monkeypatch.setenv("PATH", str(tmp_path))  # no compiler on PATH
    monkeypatch.delenv("CXX", raising=False)
    result = invoke("reproduce", toy_scaled.name, "--compile", "--store", str(tmp_path / "s.db"))
    assert result.exit_code == 2 and "no C++ compiler was found" in result.output and "Traceback" not in result.output
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    runtime.RunSettings(compile=True, device="cuda").check()  # a compiler is needed for the CPU only


def test_a_bare_cuda_device_becomes_one_gpu_per_pool_worker(monkeypatch):
    import torch

    from symkit.lab.runner import sweep

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(sweep, "_WORKER_SLOT", 3)
    assert sweep._placed({"device": "cuda"}).device == "cuda:1"
    assert sweep._placed({"device": "cuda:0"}).device == "cuda:0"  # a chosen GPU is kept
    assert sweep._placed({"device": "cpu"}).device == "cpu"
    monkeypatch.setattr(sweep, "_WORKER_SLOT", None)  # the driver (local executor) keeps what it was given
    assert sweep._placed({"device": "cuda"}).device == "cuda"


def test_a_report_labels_scales_without_the_data_folder_a_paper_config_checks_for(tmp_path, monkeypatch):
    from symkit.lab.experiments.registry import get_experiment

    monkeypatch.delenv("SYMKIT_DATA", raising=False)
    exp = get_experiment("pac-bayes-digits")  # its paper scale names a missing data folder when a config is made
    quick = plan(exp, scale="quick")[0]
    from symkit.lab.runner.report import scale_of

    assert scale_of(exp, quick.config) == "quick"
