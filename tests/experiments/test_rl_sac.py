"""rl-sac (thesis Sec. 3.6.1, Figure 3.4) at its quick size: 600 steps of Hopper, updates from step 300, 64
channels; about 10 s for the RPP. It checks the set-up (curve, Table A.9's speed, checkpoint), not learning."""

import dataclasses
import hashlib
import json
import math
import os
import re

import pytest

pytest.importorskip("stable_baselines3")

from symkit.lab.experiments import get_experiment  # noqa: E402
from symkit.lab.experiments.rl_sac import checkpoint_dir, curve_groups, figures, shorter_run  # noqa: E402


@pytest.fixture(autouse=True)
def _own_checkpoints(tmp_path, monkeypatch):
    """Every test reads and writes checkpoints in its own folder, never in the runs/checkpoints of the checkout (the
    report lists the unfinished runs it finds there)."""
    monkeypatch.setenv("SYMKIT_CHECKPOINTS", str(tmp_path))



def _line(text, start):
    """The one line of a report that starts with ``start``."""
    lines = text.splitlines() if isinstance(text, str) else text
    (line,) = [line for line in lines if line.startswith(start)]
    return line

def test_the_quick_rpp_run_records_its_curve_and_keeps_its_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMKIT_CHECKPOINTS", str(tmp_path))
    exp = get_experiment("rl-sac")
    config = exp.make_config(quick=True, model="rpp", env="Walker2d")
    out = exp.run(config)
    assert out["curve_steps"] == [0, 300, 600] and all(math.isfinite(r) for r in out["curve_returns"])
    assert out["final_return"] == out["curve_returns"][-1] and out["tau"] == 0.004  # Table A.9, Walker2d
    assert out["train_episodes"] >= 1 and out["resumed_from"] == 0
    import mujoco

    assert f"mujoco {mujoco.__version__}, gymnasium " in out["libraries"]  # the physics the returns come from
    assert out["mean_best_return"] >= out["mean_return"] and out["best_return"] == max(out["curve_returns"])
    folder = checkpoint_dir(config)
    assert folder.parent == tmp_path / "rl-sac" and (folder / "sac.zip").exists()
    saves = json.loads((folder / "curve.json").read_text())["saves"]  # (steps, training seconds) per checkpoint
    assert [n for n, _ in saves] == [300, 600] and 0 < saves[0][1] <= saves[1][1]
    again = exp.run(config)  # a finished run is not trained again
    assert again["resumed_from"] == 600 and again["curve_returns"] == out["curve_returns"]
    assert sorted(os.listdir(folder)) == [".lock", "config.json", "curve.json", "replay.npz", "sac.zip"]  # < FULL_STEPS
    longer = exp.make_config(quick=True, model="rpp", env="Walker2d", steps=900, checkpoint_every=900)
    assert shorter_run(longer) == folder
    more = exp.run(longer)  # a longer budget carries the finished run on
    assert more["resumed_from"] == 600 and more["continued_from"] == folder.name
    assert more["curve_steps"] == [0, 300, 600, 900] and more["curve_returns"][:3] == out["curve_returns"]
    assert json.loads((folder / "curve.json").read_text())["num_timesteps"] == 600  # the shorter run is untouched
    assert [n for n, _ in json.loads((checkpoint_dir(longer) / "curve.json").read_text())["saves"]] == [300, 600, 900]
    assert exp.run(config)["curve_returns"] == out["curve_returns"]
    runs = [{"config": {"env": "Walker2d", "model": m}, "seed": 0, "metrics": out} for m in ("rpp", "mlp")]
    paths = figures(runs, tmp_path / "report")  # the curves, and rpp against mlp
    assert [p.name for p in paths] == ["rl-sac_curves.png", "rl-sac_comparisons.png"]
    assert all(p.stat().st_size > 1000 for p in paths)


def test_the_config_checks():
    exp = get_experiment("rl-sac")
    assert exp.make_config().steps == 1_000_000 and exp.make_config().learning_starts == 10_000
    with pytest.raises(ValueError, match="model must be one of"):
        exp.check_config(exp.make_config(quick=True, model="cnn"))
    with pytest.raises(ValueError, match="learning_starts"):
        exp.check_config(exp.make_config(quick=True, steps=100))
    with pytest.raises(ValueError, match="no preset"):
        exp.check_config(exp.make_config(quick=True, env="Pong"))
    with pytest.raises(ValueError, match="joint_signs must be one of"):
        exp.check_config(exp.make_config(quick=True, joint_signs="flipped"))
    with pytest.raises(ValueError, match="only presets with sign_flips"):  # Hopper has no reversed joints
        exp.check_config(exp.make_config(quick=True, env="Hopper", joint_signs="matched"))
    exp.check_config(exp.make_config(quick=True, env="Ant", joint_signs="matched"))
    with pytest.raises(ValueError, match="torso must be one of"):
        exp.check_config(exp.make_config(quick=True, env="Ant", joint_signs="matched", torso="rotated"))
    with pytest.raises(ValueError, match="needs joint_signs='matched'"):
        exp.check_config(exp.make_config(quick=True, env="Ant", torso="turned"))
    with pytest.raises(ValueError, match="only Ant has one"):
        exp.check_config(exp.make_config(quick=True, env="Walker2d", torso="turned"))
    exp.check_config(exp.make_config(quick=True, env="Ant", joint_signs="matched", torso="turned"))
    for beta1 in (1.0, 1.5):
        with pytest.raises(ValueError, match=r"rpp_beta1 .* must be a number in \[0, 1\)"):
            exp.check_config(exp.make_config(quick=True, rpp_beta1=beta1))
    with pytest.raises(ValueError, match="rpp_beta1='0.9' .* expected float, got str"):
        exp.check_config(exp.make_config(quick=True, rpp_beta1="0.9"))
    exp.check_config(exp.make_config(quick=True, rpp_beta1=0.9))
    with pytest.raises(ValueError, match="rpp_basic_init"):
        exp.check_config(exp.make_config(quick=True, rpp_basic_init=-1.0))
    exp.check_config(exp.make_config(quick=True, rpp_basic_init=1.0))


def test_the_summary_reads_every_seeds_curve_and_gives_mean_and_standard_error():
    from symkit.lab.experiments.rl_sac import summarize

    steps = [0, 10, 20, 30, 40, 50]
    curves = {0: {"curve_steps": steps, "curve_returns": [0.0, 40.0, 20.0, 20.0, 30.0, 10.0]},
              1: {"curve_steps": steps, "curve_returns": [0.0, 20.0, 60.0, 60.0, 80.0, 60.0]}}
    row = {"config": {"env": "Hopper", "model": "rpp", "steps": 50}, "n": 2, "mean": {"seconds_per_update": 0.1},
           "by_seed": curves}
    text = summarize([row]).splitlines()
    line = text[2]
    assert _line(text, "Libraries") == "Libraries: not recorded (runs stored before symkit recorded them) (2 runs)."
    curves[1]["libraries"] = "mujoco 4.0.0, gymnasium 1.4.0"
    assert _line(summarize([row]), "Libraries") == ("Libraries: mujoco 4.0.0, gymnasium 1.4.0 (1 run); not recorded "
                                                    "(runs stored before symkit recorded them) (1 run).")
    # final 10, 60; late (steps >= 40) 20, 70; mean over the curve (trapezoids / 50) 23, 50; best so far
    # 0, 40, 40, 40, 40, 40 and 0, 20, 60, 60, 80, 80 (trapezoids / 50: 36, 52)
    assert line == ("| Hopper | 50 | rpp | bilinear 0.1, uniform hidden, entropy -1 dim A, exp std | 2 | 35.0 ± 25.0 "
                    "| 45.0 ± 25.0 "
                    "| 36.5 ± 13.5 | 44.0 ± 8.0 "
                    "| 0: 20 (10), 1: 70 (60) | 0.100 |")


def test_the_report_lists_each_seeds_return_at_every_tenth_of_its_steps():
    """The per-seed curve table: the last evaluation at or before each tenth of the run's steps (a run evaluated
    every 3 steps of 20 reads its returns at 0, 0, 3, 3, 6, ...), headed by the steps when every run shares them."""
    from symkit.lab.experiments.rl_sac import summarize

    steps = list(range(0, 21, 3)) + [20]  # 0, 3, ..., 18, 20
    curve = {"curve_steps": steps, "curve_returns": [float(s) for s in steps]}
    row = {"config": {"env": "Hopper", "model": "rpp", "steps": 20}, "n": 1, "mean": {}, "by_seed": {4: curve}}
    lines = summarize([row]).split("Evaluation return per seed at every tenth of its steps")[1].splitlines()
    assert lines[2] == "| env | steps | model | settings | seed | 2 | 4 | 6 | 8 | 10 | 12 | 14 | 16 | 18 | 20 |"
    assert lines[4] == ("| Hopper | 20 | rpp | bilinear 0.1, uniform hidden, entropy -1 dim A, exp std | 4 "
                        "| 0 | 3 | 6 | 6 | 9 | 12 | 12 | 15 | 18 | 20 |")
    short = {"curve_steps": [0, 5, 10], "curve_returns": [1.0, 2.0, 3.0]}  # another length: tenths, not steps
    other = {**row, "config": {**row["config"], "steps": 10}, "by_seed": {0: short}}
    lines = summarize([row, other]).split("Evaluation return per seed")[1].splitlines()
    assert lines[2].endswith("| seed | 1/10 | 2/10 | 3/10 | 4/10 | 5/10 | 6/10 | 7/10 | 8/10 | 9/10 | 10/10 |")
    assert lines[4].endswith("| 0 | 1 | 1 | 1 | 1 | 2 | 2 | 2 | 2 | 2 | 3 |")
    assert "Evaluation return per seed" not in summarize([{**row, "by_seed": {}}])
    odd = {"curve_steps": [0, 5, 15], "curve_returns": [1.0, 2.0, 3.0]}  # tenths of 15 steps: 1.5, 3, 4.5, ...
    lines = summarize([{**row, "by_seed": {0: odd}}]).split("Evaluation return per seed")[1].splitlines()
    assert lines[2].endswith("| seed | 1.5 | 3 | 4.5 | 6 | 7.5 | 9 | 10.5 | 12 | 13.5 | 15 |")


def test_runs_of_other_settings_are_separate_rows_and_curves():
    """A run stored before ``bilinear_scale``, ``hidden``, ``target_entropy_scale`` and ``std_param`` existed had
    emlp's 0.1, uniform hidden reps, an entropy target of -|A| and an exp std: it is not summarised or drawn with runs
    of the RL code's settings; the MLPs have neither bilinear layers nor hidden reps, so their rows show neither."""
    from symkit.lab.experiments.rl_sac import summarize

    curve = {"curve_steps": [0, 10], "curve_returns": [0.0, 10.0]}
    old = {"env": "Hopper", "model": "rpp", "steps": 10}
    new = {"bilinear_scale": 0.03, "hidden": "rl-code", "target_entropy_scale": 0.5, "std_param": "softplus"}
    configs = [{**old, **new}, old, {**old, "bilinear_scale": 0.03}, {**old, "model": "mlp"},
               {**old, **new, "model": "relu-mlp"}]
    rows = [{"config": c, "n": 1, "mean": {}, "by_seed": {0: curve}} for c in configs]
    lines = summarize(rows).split("\n\n")[0].splitlines()[2:]  # the results, not the comparisons below them
    legacy, rl_code = "entropy -1 dim A, exp std", "entropy -0.5 dim A, softplus std"
    expected = [("mlp", legacy), ("relu-mlp", rl_code), ("rpp", f"bilinear 0.03, rl-code hidden, {rl_code}"),
                ("rpp", f"bilinear 0.03, uniform hidden, {legacy}"), ("rpp", f"bilinear 0.1, uniform hidden, {legacy}")]
    assert [tuple(line.split(" | ")[2:4]) for line in lines] == expected
    runs = [{"config": r["config"], "seed": 0, "metrics": curve} for r in rows]
    assert sorted(curve_groups(runs)["Hopper"]) == [(f"{model} ({settings})", 10) for model, settings in expected]
    from symkit.rl.sac import RL_BILINEAR_SCALE, RL_TARGET_ENTROPY_SCALE  # the experiment's defaults are the library's

    config = get_experiment("rl-sac").make_config()
    assert (config.bilinear_scale, config.target_entropy_scale, config.hidden, config.std_param) == (
        RL_BILINEAR_SCALE, RL_TARGET_ENTROPY_SCALE, "rl-code", "softplus") == (0.03, 0.5, "rl-code", "softplus")


def test_runs_stored_before_the_new_settings_keep_their_identity_and_checkpoints(tmp_path, monkeypatch):
    """A sweep at the legacy values (bilinear 0.1, uniform hidden reps, entropy -|A|) plans the very configs stored
    before the settings existed, so stored runs are not run again, and their checkpoint folders are found."""
    from symkit.lab.runner.sweep import plan
    from symkit.lab.store import config_hash

    monkeypatch.setenv("SYMKIT_CHECKPOINTS", str(tmp_path))
    exp = get_experiment("rl-sac")
    legacy = {"bilinear_scale": [0.1], "hidden": ["uniform"], "target_entropy_scale": [1.0], "std_param": ["exp"],
              "joint_signs": ["raw"], "torso": ["scalars"], "rpp_beta1": [0.5],
              "rpp_basic_init": [1e-3]}
    (spec,) = plan(exp, quick=True, seeds=[0], settings={"env": ["Hopper"], "model": ["rpp"], **legacy})
    stored = {k: v for k, v in dataclasses.asdict(exp.make_config(quick=True, env="Hopper", model="rpp")).items()
              if k not in legacy}  # a config as stored before the three settings existed
    assert spec.config == stored and spec.config_hash == config_hash(stored)
    (new,) = plan(exp, quick=True, seeds=[0], settings={"env": ["Hopper"], "model": ["rpp"]})
    assert new.config_hash != spec.config_hash and new.config["hidden"] == "rl-code"
    assert "joint_signs" not in new.config  # "raw", the signs of every run stored before the setting: same hash
    assert not {"torso", "rpp_beta1", "rpp_basic_init"} & set(new.config)  # "scalars", 0.5, 1e-3: likewise
    old_folder = checkpoint_dir(exp.make_config(quick=True, env="Hopper", model="rpp", bilinear_scale=0.1,
                                                hidden="uniform", target_entropy_scale=1.0, std_param="exp"))
    digest = hashlib.sha1(json.dumps(stored, sort_keys=True).encode()).hexdigest()[:10]  # the folder's name then
    assert old_folder.name == f"Hopper-rpp-seed0-{digest}"
    with pytest.raises(ValueError, match="hidden must be one of"):
        exp.check_config(exp.make_config(quick=True, hidden="wide"))
    with pytest.raises(ValueError, match="std_param must be one of"):
        exp.check_config(exp.make_config(quick=True, std_param="relu"))


def test_runs_of_different_lengths_are_separate_curves(tmp_path):
    """A 60,000-step run is not cut to the length of a 30,000-step run of the same environment and model."""
    def run(model, steps, seed):
        points = list(range(0, steps + 1, 10_000))
        return {"config": {"env": "HalfCheetah", "model": model, "steps": steps}, "seed": seed,
                "metrics": {"curve_steps": points, "curve_returns": [float(seed + i) for i in range(len(points))]}}

    runs = [run("rpp", 30_000, 0), run("rpp", 30_000, 1), run("rpp", 60_000, 0), run("mlp", 60_000, 0)]
    groups = curve_groups(runs)
    rpp = "rpp (bilinear 0.1, uniform hidden, entropy -1 dim A, exp std)"  # stored without the settings: legacy
    assert sorted(groups["HalfCheetah"]) == [("mlp (entropy -1 dim A, exp std)", 60_000), (rpp, 30_000), (rpp, 60_000)]
    assert len(groups["HalfCheetah"][(rpp, 30_000)]) == 2
    assert groups["HalfCheetah"][(rpp, 60_000)][0][0] == [0, 10_000, 20_000, 30_000, 40_000, 50_000, 60_000]
    path = figures(runs, tmp_path)[0]  # the curves (then rpp against mlp at 60,000 steps)
    assert path.stat().st_size > 1000


def test_a_run_continues_only_the_longest_finished_shorter_run_of_the_same_settings(tmp_path, monkeypatch):
    """Only ``steps`` and ``checkpoint_every`` may differ; the shorter run must have finished and kept its replay
    buffer; folders without a stored config (runs from before configs were stored) are passed over."""
    monkeypatch.setenv("SYMKIT_CHECKPOINTS", str(tmp_path))
    exp = get_experiment("rl-sac")

    def fake_run(done=None, files=("sac.zip", "replay.npz"), **changes):
        config = exp.make_config(quick=True, **changes)
        folder = checkpoint_dir(config)
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(dataclasses.asdict(config)))
        (folder / "curve.json").write_text(json.dumps({"num_timesteps": config.steps if done is None else done}))
        for name in files:
            (folder / name).write_bytes(b"")
        return folder

    target = exp.make_config(quick=True, steps=5000)
    assert shorter_run(target) is None
    fake_run(steps=1000, files=("sac.zip",))  # finished, replay buffer dropped
    fake_run(steps=3000, done=2000)  # not finished
    fake_run(steps=2500, lr=1e-3)  # another learning rate
    fake_run(steps=6000)  # longer than the target
    fake_run(steps=2000, seed=1)  # another seed
    assert shorter_run(target) is None
    two = fake_run(steps=2000, checkpoint_every=100)
    assert shorter_run(target) == two
    legacy = checkpoint_dir(exp.make_config(quick=True, steps=4000))
    legacy.mkdir()  # no config.json: not considered
    (legacy / "curve.json").write_text(json.dumps({"num_timesteps": 4000}))
    assert shorter_run(target) == two
    four = fake_run(steps=4000, checkpoint_every=1000, files=("sac.zip", "replay.pkl"))  # an earlier version's buffer
    assert shorter_run(target) == four
    # a run stored before a legacy setting existed (its config.json lacks it) continues a run at the legacy value
    old_target = exp.make_config(quick=True, steps=5000, std_param="exp")
    older = fake_run(steps=3000, std_param="exp")
    stored = json.loads((older / "config.json").read_text())
    del stored["std_param"]
    (older / "config.json").write_text(json.dumps(stored))
    assert shorter_run(old_target) == older and shorter_run(target) == four


def test_the_report_lists_the_runs_in_progress_from_their_checkpoints(tmp_path, monkeypatch):
    """An unfinished run (checkpointed at 20,000 of 60,000 steps) shows in the summary with its progress and last
    and best returns; a finished one and a folder without a stored config do not."""
    from symkit.lab.experiments.rl_sac import in_progress, summarize

    monkeypatch.setenv("SYMKIT_CHECKPOINTS", str(tmp_path))
    exp = get_experiment("rl-sac")
    assert in_progress() == [] and "in progress" not in summarize([])
    for steps, done in ((60_000, 20_000), (30_000, 30_000)):
        config = exp.make_config(env="Hopper", model="rpp", steps=steps, seed=1)
        folder = checkpoint_dir(config)
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(dataclasses.asdict(config)))
        curve = {"num_timesteps": done, "steps": [0, 10_000, 20_000], "returns": [100.0, 450.0, 300.0],
                 "seconds": 1500.0}  # 10,000 updates after learning_starts 10,000: 0.15 s each
        (folder / "curve.json").write_text(json.dumps(curve))
    (tmp_path / "rl-sac" / "Hopper-mlp-seed0-old").mkdir()  # a folder from before configs were stored
    (running,) = in_progress()
    assert running["done"] == 20_000 and running["config"]["steps"] == 60_000
    assert summarize([]).splitlines()[-1] == ("| Hopper | 60000 | rpp | bilinear 0.03, rl-code hidden, "
                                             "entropy -0.5 dim A, softplus std | 1 | 20000 | 300 | 450 | 25 min "
                                             "| 1.7 h |")  # 40,000 steps left at 0.15 s: 6,000 s
    # with its checkpoints' times: the pace between the last two (after learning_starts), here 0.05 s a step after
    # a slow start (a run that shared its cores), so 40,000 steps left take 2,000 s
    folder = checkpoint_dir(exp.make_config(env="Hopper", model="rpp", steps=60_000, seed=1))
    curve = json.loads((folder / "curve.json").read_text())
    curve["saves"] = [[5_000, 10.0], [10_000, 15.0], [15_000, 1250.0], [20_000, 1500.0]]
    (folder / "curve.json").write_text(json.dumps(curve))
    assert summarize([]).splitlines()[-1].endswith("| 25 min | 33 min |")


def test_each_equivariant_row_is_compared_with_the_mlps_of_its_settings_and_given_a_verdict():
    """The verdict reads the late return (the evaluations in the last fifth of the steps) by Welch's one-sided test:
    ahead or behind at p < 0.05 with three seeds a side, else level; fewer seeds are too few. An MLP run of other
    SAC settings (entropy target, std) is not a baseline; an MLP is the baseline of every bilinear scale."""
    from symkit.lab.experiments.rl_sac import MIN_SEEDS, comparisons, summarize

    def row(model, finals, **settings):
        by_seed = {s: {"curve_steps": [0, 50, 100], "curve_returns": [0.0, f / 2, f]} for s, f in enumerate(finals)}
        config = {"env": "Hopper", "model": model, "steps": 100, **settings}
        return {"config": config, "n": len(finals), "mean": {}, "by_seed": by_seed}

    rl = {"target_entropy_scale": 0.5, "std_param": "softplus"}
    rows = [row("relu-mlp", [400, 300, 500, 420], **rl), row("mlp", [2000, 2100, 1900, 2050]),  # other settings
            row("rpp", [700, 800, 650, 750], bilinear_scale=0.03, hidden="rl-code", **rl),
            row("rpp", [100, 150, 120], bilinear_scale=0.1, hidden="rl-code", **rl),
            row("emlp", [350, 600, 200, 450], bilinear_scale=0.2, **rl),
            row("rpp", [900, 950], bilinear_scale=0.05, hidden="rl-code", **rl)]
    got = {c["settings"].split(",")[0]: c for c in comparisons(rows)}
    assert sorted(got) == ["bilinear 0.03", "bilinear 0.05", "bilinear 0.1", "bilinear 0.2"]
    assert {c["against"] for c in got.values()} == {"relu-mlp"}
    ahead, behind, level, few = (got[f"bilinear {b}"] for b in ("0.03", "0.1", "0.2", "0.05"))
    assert ahead["late"].mean == pytest.approx(725 - 405) and ahead["verdict"] == (
        f"ahead (p = {ahead['late'].p_greater:.3f})" if ahead["late"].p_greater >= 0.001 else "ahead (p < 0.001)")
    assert behind["verdict"].startswith("behind (p = ") and behind["seeds"] == (3, 4)
    assert level["model"] == "emlp" and level["verdict"] == "level"
    assert few["seeds"][0] < MIN_SEEDS and few["verdict"] == "too few seeds"
    assert few["final"].mean == pytest.approx(925 - 405) and few["late"].p_greater < 0.05  # two seeds: no verdict
    table = summarize(rows).split("Against the MLP")[1].splitlines()
    assert table[4].startswith("| Hopper | 100 | emlp |") and table[5].endswith(ahead["verdict"] + " |")
    assert table[9] == ("Ahead by the rule on 1 of the 1 environments compared: "
                        "Hopper (rpp against relu-mlp at 100 steps).")
    walker = [{**r, "config": {**r["config"], "env": "Walker2d"}} for r in (rows[0], rows[3])]  # relu-mlp, behind
    assert _line(summarize([*rows, *walker]), "Ahead") == (
        "Ahead by the rule on 1 of the 2 environments compared: Hopper (rpp against relu-mlp at 100 steps).")
    assert _line(summarize(walker), "Ahead") == "Ahead by the rule on 0 of the 1 environments compared: none."



def test_rpp_in_the_policy_only_is_a_model_compared_with_the_mlps_of_its_settings():
    """``model=rpp-policy`` (Figure A.2) passes the config checks, has the equivariant networks' settings in its
    row (its actor's bilinear scale and hidden reps) and is compared with the MLP rows as the RPP is."""
    from symkit.lab.experiments.rl_sac import comparisons

    exp = get_experiment("rl-sac")
    exp.check_config(exp.make_config(quick=True, model="rpp-policy"))
    rl = {"env": "Hopper", "steps": 100, "target_entropy_scale": 0.5, "std_param": "softplus"}

    def row(model, finals, **settings):
        by_seed = {s: {"curve_steps": [0, 50, 100], "curve_returns": [0.0, f / 2, f]} for s, f in enumerate(finals)}
        return {"config": {"model": model, **rl, **settings}, "n": len(finals), "mean": {}, "by_seed": by_seed}

    (got,) = comparisons([row("relu-mlp", [400, 300, 500]),
                          row("rpp-policy", [700, 800, 650], bilinear_scale=0.03, hidden="rl-code")])
    assert (got["model"], got["against"], got["seeds"]) == ("rpp-policy", "relu-mlp", (3, 3))
    assert got["settings"].startswith("bilinear 0.03, rl-code hidden") and got["verdict"].startswith("ahead")


def test_joint_signs_and_torso_are_equivariant_settings_compared_with_the_same_mlps():
    """``joint_signs`` and ``torso`` change only what the equivariant networks' prior says (an MLP is indifferent to
    negated inputs and outputs up to its initialisation's draw, and takes Table A.10's torso whatever ``torso``
    says): the ReLU MLP rows are the baseline of every value, the RPP rows are separate and named by their
    settings, and the environment is counted once."""
    from symkit.lab.experiments.rl_sac import comparisons, summarize

    rl = {"env": "Ant", "steps": 100, "target_entropy_scale": 0.5, "std_param": "softplus"}
    net = {"bilinear_scale": 0.03, "hidden": "rl-code"}

    def row(model, finals, **settings):
        by_seed = {s: {"curve_steps": [0, 50, 100], "curve_returns": [0.0, f / 2, f]} for s, f in enumerate(finals)}
        return {"config": {"model": model, **rl, **settings}, "n": len(finals), "mean": {}, "by_seed": by_seed}

    rows = [row("relu-mlp", [800, 900, 850]), row("rpp", [100, 90, 60], **net),
            row("rpp", [1200, 1300, 1250], **net, joint_signs="matched"),
            row("rpp", [700, 1000, 850], **net, joint_signs="matched", torso="turned"),
            row("rpp", [700, 1000, 850], **net, joint_signs="matched", torso="turned", rpp_beta1=0.9),
            row("rpp-policy", [850, 800, 900], **net, rpp_basic_init=1.0)]
    raw, matched, beta, turned, basic = comparisons(rows)  # by model, then in the order of their settings text
    assert (raw["against"], matched["against"], turned["against"], beta["against"]) == ("relu-mlp",) * 4
    assert basic["against"] == "relu-mlp" and basic["outcome"] == "level" and basic["settings"] == (
        "bilinear 0.03, rl-code hidden, RPP flexible paths start at 1, entropy -0.5 dim A, softplus std")
    assert beta["settings"] == ("bilinear 0.03, rl-code hidden, matched joint signs, turned torso, RPP Adam beta1 "
                                "0.9, entropy -0.5 dim A, softplus std")
    assert raw["settings"] == "bilinear 0.03, rl-code hidden, entropy -0.5 dim A, softplus std"
    assert matched["settings"] == "bilinear 0.03, rl-code hidden, matched joint signs, entropy -0.5 dim A, softplus std"
    assert turned["settings"] == ("bilinear 0.03, rl-code hidden, matched joint signs, turned torso, entropy -0.5 "
                                  "dim A, softplus std") and turned["outcome"] == "level"
    assert (raw["outcome"], matched["outcome"]) == ("behind", "ahead")
    assert raw["late"].p_less < 0.001 and raw["verdict"] == "behind (p < 0.001)"  # not "p = 0.000"
    assert _line(summarize(rows), "Ahead") == ("Ahead by the rule on 1 of the 1 environments compared: "
                                               "Ant (rpp against relu-mlp at 100 steps).")


def test_a_comparison_with_one_seed_on_a_side_prints_no_nan():
    """One seed leaves the standard error and p-value undefined: the report's cells say so (``–``), not ``nan``."""
    from symkit.lab.experiments.rl_sac import summarize

    def row(model, finals, **settings):
        by_seed = {s: {"curve_steps": [0, 50, 100], "curve_returns": [0.0, f / 2, f]} for s, f in enumerate(finals)}
        return {"config": {"env": "Hopper", "model": model, "steps": 100, **settings}, "n": len(finals), "mean": {},
                "by_seed": by_seed}

    table = summarize([row("relu-mlp", [400, 300, 500]), row("rpp", [700], bilinear_scale=0.03)])
    comparisons = table.split("Against the MLP")[1].split("Evaluation return per seed")[0]
    (line,) = [line for line in comparisons.splitlines() if line.startswith("| Hopper")]
    assert "nan" not in line and line.endswith("| +300.0 | – | too few seeds |"), line


def test_the_comparisons_are_drawn_one_panel_each_from_the_runs(tmp_path):
    """The figure regroups the runs into the report's rows (config but the seed), compares them as the table does,
    and draws a panel per comparison; without an MLP of the same settings there is nothing to draw."""
    from symkit.lab.experiments.rl_sac import TITLE_WIDTH, _rows, comparison_figure, comparisons, summarize

    def run(model, seed, final, **settings):
        return {"config": {"env": "Hopper", "model": model, "steps": 100, "seed": seed, **settings}, "seed": seed,
                "metrics": {"curve_steps": [0, 50, 100], "curve_returns": [0.0, final / 2, final]}}

    runs = [run("relu-mlp", s, f) for s, f in enumerate([400, 300, 500])]
    runs += [run("rpp", s, f, bilinear_scale=0.03) for s, f in enumerate([700, 800, 650])]
    runs += [run("rpp", 0, 900, bilinear_scale=0.2, rpp_beta1=0.9, rpp_basic_init=1.0)]  # one seed: a panel
    # without a band, "too few seeds", and a settings text too long for one line
    rows = _rows(runs)
    assert sorted((r["config"]["model"], r["n"]) for r in rows) == [("relu-mlp", 3), ("rpp", 1), ("rpp", 3)]
    assert all("seed" not in r["config"] for r in rows)
    verdicts = sorted(c["outcome"] for c in comparisons(rows))
    assert verdicts == ["ahead", "too few seeds"]
    import matplotlib.figure

    labels, titles, save = [], [], matplotlib.figure.Figure.savefig

    def saving(fig, *args, **kwargs):  # the legends' labels and the titles of every panel drawn
        labels.extend(t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts())
        titles.extend(ax.get_title() for ax in fig.axes if ax.get_visible())
        return save(fig, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(matplotlib.figure.Figure, "savefig", saving)
        path = comparison_figure(runs, tmp_path)
    assert path.name == "rl-sac_comparisons.png" and path.stat().st_size > 1000
    assert "rpp (1 seed)" in labels and labels.count("relu-mlp (3 seeds)") == 2  # the count, in words that agree
    long = next(c["settings"] for c in comparisons(rows) if "RPP flexible paths" in c["settings"])
    assert len(long) > TITLE_WIDTH and len(titles) == 2
    assert any(" ".join(t.splitlines()[1:]) == long for t in titles)  # wrapped, not cut
    assert max(len(line) for t in titles for line in t.splitlines()[1:]) <= TITLE_WIDTH
    assert [p.name for p in figures(runs, tmp_path)] == ["rl-sac_curves.png", "rl-sac_comparisons.png"]
    no_steps = [{**r, "config": {k: v for k, v in r["config"].items() if k != "steps"}} for r in runs]
    assert _line(summarize(_rows(no_steps)), "Ahead") == (  # runs stored without a budget still compare
        "Ahead by the rule on 1 of the 1 environments compared: Hopper (rpp against relu-mlp at ? steps).")
    assert comparison_figure(runs[:3], tmp_path / "none") is None  # MLPs only
    assert [p.name for p in figures(runs[:3], tmp_path / "none")] == ["rl-sac_curves.png"]


def _hold_folder(folder, ready, release):
    from symkit._locks import exclusive

    with exclusive(folder, "another sweep"):
        ready.set()
        release.wait(60)


def test_a_run_that_another_process_is_training_is_refused_not_trained_twice(tmp_path):
    """Two processes on one run would mix their checkpoints (policy, replay buffer and curve are separate files):
    the second is refused with the holder's pid, and nothing of the run is written."""
    import multiprocessing

    from symkit._locks import RunInUse
    from symkit.lab.runner.sweep import plan, run_sweep, summary_lines
    from symkit.lab.store import Store

    exp = get_experiment("rl-sac")
    config = exp.make_config(quick=True, model="relu-mlp")
    folder = checkpoint_dir(config)
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_folder, args=(str(folder), ready, release))
    holder.start()
    try:
        assert ready.wait(60)
        with pytest.raises(RunInUse, match=rf"rl-sac: .* in use by another process \(pid {holder.pid}\)"):
            exp.run(config)
        assert sorted(os.listdir(folder)) == [".lock", ".lock.pid"]  # the lock and its holder's pid, nothing trained
        # through a sweep: not run, and not stored as failed (a later sweep runs it if the holder does not finish it)
        store = Store(tmp_path / "runs.db")
        specs = [s for s in plan(exp, quick=True, seeds=[config.seed]) if s.config["model"] == "relu-mlp"]
        assert len(specs) == 1 and specs[0].config == exp.identity(dataclasses.asdict(config))
        result = run_sweep(exp, specs, store, progress=False)
        assert (len(result.in_use), result.ran, result.failed) == (1, 0, 0)
        assert store.status_of("rl-sac") == {}
        lines = [line for line, _ in summary_lines(exp, specs, result, store.path)]
        assert any(line.startswith("  not run, in use by another process") for line in lines), lines
        assert lines[0].startswith("rl-sac: 1 run in the sweep; 0 already stored, ran 0 (0 failed)"), lines
        assert any("1 run in training by another process, not run here" in line for line in lines), lines
    finally:
        release.set()
        holder.join(60)


def test_symkit_runs_lists_the_unfinished_runs_with_their_progress_and_who_trains_them(tmp_path):
    """``symkit runs rl-sac`` shows, after the stored runs, each checkpointed run that has not finished: steps done
    of its budget, its last evaluation, when it saved and whether a process is training it now; a run finished in
    the store (its folder may remain) is not listed again."""
    from typer.testing import CliRunner

    from symkit._locks import exclusive
    from symkit.lab.cli.main import app
    from symkit.lab.experiments.rl_sac import unfinished
    from symkit.lab.store import Store

    exp = get_experiment("rl-sac")
    store_path = tmp_path / "runs.db"
    runs = lambda: CliRunner().invoke(app, ["runs", "rl-sac", "--store", str(store_path)])  # noqa: E731
    configs = [exp.make_config(env="Hopper", model="rpp", steps=60_000, seed=seed) for seed in (0, 1)]
    for config in configs:
        folder = checkpoint_dir(config)
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(dataclasses.asdict(config)))
        (folder / "curve.json").write_text(json.dumps({"num_timesteps": 20_000, "steps": [0, 10_000, 20_000],
                                                       "returns": [100.0, 450.0, 312.4], "seconds": 1500.0}))
    assert [(u.config["seed"], u.done, u.total, u.holder) for u in unfinished()] == [(0, 20_000, 60_000, None),
                                                                                      (1, 20_000, 60_000, None)]
    with Store(store_path) as store:  # seed 1 finished (stored) while its folder stays
        store.record(experiment="rl-sac", config=exp.identity(dataclasses.asdict(configs[1])), metrics={"x": 1.0})
    result = runs()
    assert result.exit_code == 0, result.output
    shared, *lines = result.output.splitlines()
    assert shared.startswith("Settings shared by every run listed: ") and "env=Hopper" in shared, shared
    assert "steps=60000" in shared and "seed=" not in shared
    assert len(lines) == 2 and lines[0].startswith("ok     seed=1  ["), lines
    # time left: 1500 s over the 10,000 updates after learning_starts (10,000), times the 40,000 steps to go
    assert exp.make_config().learning_starts == 10_000
    assert re.fullmatch(r"unfinished seed=0  \[20000 of 60000 steps, last evaluation 312, about 1\.7 h left at its "
                        r"latest pace, saved \d+ s ago, stopped: the same command carries it on\]", lines[1]), lines[1]
    with exclusive(checkpoint_dir(configs[0]), "rl-sac"):  # training now, in this process
        assert re.search(rf"s ago, training now \(pid {os.getpid()}\)\]$", runs().output.splitlines()[2])
    # reproduce --dry-run: seed 0 goes on from its checkpoint (or is left to the process training it), seed 1 is done
    plan = ["reproduce", "rl-sac", "--seeds", "0-1", "--set", "env=Hopper", "--set", "model=rpp", "--set",
            "steps=60000", "--dry-run", "--store", str(store_path)]
    lines = CliRunner().invoke(app, plan).output.splitlines()
    assert lines[0] == ("to run  seed=0  [20000 of 60000 steps, last evaluation 312, about 1.7 h left at its latest "
                        "pace: goes on from its checkpoint]") and lines[1] == "done    seed=1", lines
    assert lines[2].startswith("2 runs planned: 1 done, 1 to run (1 from a checkpoint), 0 in use by another process")
    with exclusive(checkpoint_dir(configs[0]), "rl-sac"):
        lines = CliRunner().invoke(app, plan).output.splitlines()
    assert lines[0].startswith("in use  seed=0  [20000 of 60000 steps") and lines[0].endswith(
        f"training now (pid {os.getpid()}), left to that process]"), lines


def test_each_rpp_decay_reaches_its_own_path_in_the_optimisers():
    """The actor's and the critics' Adam decay the equivariant coefficients by 2 equivariant_wd and the flexible
    weights (dense paths and the nonlinearities' residual weights) by 2 basic_wd, each path read off the parameter
    names; biases, bilinear weights and the rest are not decayed."""
    from stable_baselines3.common.monitor import Monitor

    from symkit.rl import PRESETS
    from symkit.rl.sac import make_sac

    p = PRESETS["Walker2d"]
    model = make_sac(p, "rpp", Monitor(p.make_env()), ch=32, buffer_size=1000, learning_starts=100,
                     equivariant_wd=1e-5, basic_wd=1e-3)
    for net in (model.policy.actor, model.policy.critic):
        decay = {id(q): g["weight_decay"] for g in net.optimizer.param_groups for q in g["params"]}
        seen = {"equivariant": 0, "basic": 0}
        for name, q in net.named_parameters():
            if ".equivariant.weight_basis." in name:
                want, kind = 2e-5, "equivariant"
            elif name.endswith(("basic.weight", "nonlinearity.basic")):
                want, kind = 2e-3, "basic"
            else:
                want, kind = 0.0, None
            assert decay[id(q)] == want, (name, decay[id(q)], want)
            if kind:
                seen[kind] += 1
        assert seen["equivariant"] >= 3 and seen["basic"] >= 5, seen  # every layer's paths were found by name
