"""A SAC checkpoint holds tensors, arrays and JSON only, and resuming one unpickles nothing: the pickles of earlier
versions (stable-baselines3's ``sac.zip``, ``replay.pkl``) are refused, with the way to convert a trusted folder
(symkit.rl.sac.convert_legacy_checkpoint), and the converted folder resumes as the old one did."""

import base64
import io
import json
import os
import pickle
import shlex
import shutil
import zipfile

import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")

import cloudpickle  # noqa: E402
from stable_baselines3 import SAC  # noqa: E402
from stable_baselines3.common.logger import Logger  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402

from symkit.rl import PRESETS  # noqa: E402
from symkit.rl.replay import load_replay  # noqa: E402
from symkit.rl.sac import LegacyCheckpointError, convert_legacy_checkpoint, load_sac, train_sac  # noqa: E402

P = PRESETS["Hopper"]
KW = dict(seed=2, eval_every=100, eval_episodes=1, checkpoint_every=100, ch=16, learning_starts=50, batch_size=16,
          buffer_size=1000, keep_replay=True)


class _Touch:
    """Unpickled, creates ``marker`` (a shell command, as a planted checkpoint would run)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {shlex.quote(self.marker)}",)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A 100-step checkpoint of today's format (its replay buffer kept), and the model it saved (a final save: the
    model as it ended)."""
    folder = tmp_path_factory.mktemp("run")
    return folder, train_sac(P, "relu-mlp", 100, checkpoint_dir=folder, **KW).model


def _copy(run, tmp_path, name="ckpt"):
    return shutil.copytree(run[0], tmp_path / name, ignore=shutil.ignore_patterns(".lock"))


def _as_an_earlier_version_wrote_it(run, folder, replay="pkl"):
    """Rewrite ``folder`` as symkit wrote ``run``'s checkpoint before: stable-baselines3's ``save`` of the model
    (``sac.zip``, pickled ``data``) and, with ``replay="pkl"``, its pickle of the buffer (``replay.pkl``) instead of
    ``replay.npz``."""
    model = run[1]
    model.save(folder / "sac.zip")
    if replay == "pkl":
        model.save_replay_buffer(folder / "replay.pkl")
        (folder / "replay.npz").unlink()


def _plant_in_sac_zip(path, marker):
    """Add to stable-baselines3's ``data`` an entry it deserialises with cloudpickle when it loads the file."""
    with zipfile.ZipFile(path) as z:
        members = {name: z.read(name) for name in z.namelist()}
    data = json.loads(members["data"])
    data["planted"] = {":type:": "<class 'object'>",
                       ":serialized:": base64.b64encode(cloudpickle.dumps(_Touch(marker))).decode()}
    members["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(path, "w") as z:
        for name, content in members.items():
            z.writestr(name, content)


def _one_line_naming(files, folder):
    names = " and ".join(files)
    return (rf"^train_sac: {folder}: {names} (is a pickle|are pickles) written by an earlier symkit version, which "
            r"symkit does not load .*convert it once with symkit\.rl\.sac\.convert_legacy_checkpoint\("
            rf"'{folder}'\), then run again$")


@pytest.mark.parametrize("replay", ["npz", "pkl"])
def test_a_pickled_sac_zip_of_an_earlier_version_runs_no_code_and_is_refused(run, tmp_path, replay):
    """Planted in stable-baselines3's ``data``, a pickled call would run when the run resumed (SAC.load); train_sac
    refuses the file without reading it, in one line that names it and the conversion, also for a finished run."""
    folder = _copy(run, tmp_path)
    _as_an_earlier_version_wrote_it(run, folder, replay)
    marker = tmp_path / "ran"
    _plant_in_sac_zip(folder / "sac.zip", marker)
    files = ["sac.zip"] if replay == "npz" else ["sac.zip", "replay.pkl"]
    with pytest.raises(LegacyCheckpointError, match=_one_line_naming(files, folder)) as refused:
        train_sac(P, "relu-mlp", 200, checkpoint_dir=folder, **KW)
    assert "\n" not in str(refused.value)
    with pytest.raises(LegacyCheckpointError, match=_one_line_naming(["sac.zip"], folder)):
        train_sac(P, "relu-mlp", 100, checkpoint_dir=folder, **KW)  # finished: only the model would be read
    with pytest.raises(LegacyCheckpointError, match="convert_legacy_checkpoint"):
        load_sac(folder / "sac.zip")
    assert not marker.exists()


def test_a_pickled_replay_buffer_runs_no_code_and_is_refused(run, tmp_path):
    folder = _copy(run, tmp_path)
    marker = tmp_path / "ran"
    (folder / "replay.npz").unlink()
    (folder / "replay.pkl").write_bytes(pickle.dumps(_Touch(marker)))
    with pytest.raises(LegacyCheckpointError, match=_one_line_naming(["replay.pkl"], folder)):
        train_sac(P, "relu-mlp", 200, checkpoint_dir=folder, **KW)
    assert not marker.exists()


def test_todays_files_holding_a_pickled_call_run_no_code(run, tmp_path):
    """``state.pt`` is read with ``torch.load(weights_only=True)`` and ``replay.npz`` with ``allow_pickle=False``: a
    pickled call planted in either is refused, not run."""
    marker = tmp_path / "ran"
    folder = _copy(run, tmp_path, "model")
    with zipfile.ZipFile(folder / "sac.zip") as z:
        settings = z.read("sac.json")
    state = io.BytesIO()
    torch.save({"parameters": {}, "variables": {"log_ent_coef": _Touch(marker)}}, state)
    with zipfile.ZipFile(folder / "sac.zip", "w") as z:
        z.writestr("sac.json", settings)
        z.writestr("state.pt", state.getvalue())
    with pytest.raises(ValueError, match=r"sac.zip: state.pt holds more than tensors and plain data"):
        train_sac(P, "relu-mlp", 200, checkpoint_dir=folder, **KW)
    folder = _copy(run, tmp_path, "replay")
    with np.load(folder / "replay.npz") as data:
        arrays = dict(data)
    arrays["rewards"] = np.array([_Touch(marker)], dtype=object)
    with open(folder / "replay.npz", "wb") as f:
        np.savez(f, **arrays)
    with pytest.raises(ValueError, match="replay.npz: rewards holds pickled objects, not numbers; symkit loads arrays"):
        train_sac(P, "relu-mlp", 200, checkpoint_dir=folder, **KW)
    assert not marker.exists()


def test_a_run_resumes_without_unpickling_anything(run, tmp_path, monkeypatch):
    """Every unpickler that could read a checkpoint (pickle's, cloudpickle's, numpy's and torch's full loads go
    through them) raises during the resume: the policy, optimisers, entropy coefficient, replay buffer and counters
    come back from tensors, arrays and JSON, and the checkpoint written holds nothing else."""
    folder = _copy(run, tmp_path)

    def refused(*args, **kwargs):
        raise AssertionError("a checkpoint was unpickled")

    for module, name in ((pickle, "load"), (pickle, "loads"), (pickle, "Unpickler"), (cloudpickle, "loads"),
                         (cloudpickle, "load")):
        monkeypatch.setattr(module, name, refused)
    resumed = train_sac(P, "relu-mlp", 200, checkpoint_dir=folder, **KW)
    monkeypatch.undo()
    assert resumed.resumed_from == 100 and resumed.steps == [0, 100, 200] and resumed.model.num_timesteps == 200
    with zipfile.ZipFile(folder / "sac.zip") as z:
        assert sorted(z.namelist()) == ["sac.json", "state.pt"]
        settings = json.loads(z.read("sac.json"))
        state = torch.load(io.BytesIO(z.read("state.pt")), weights_only=True)
    assert settings["counters"]["num_timesteps"] == 200 and settings["policy_kwargs"]["kind"] == "relu-mlp"
    assert sorted(state["parameters"]) == ["actor.optimizer", "critic.optimizer", "ent_coef_optimizer", "policy"]
    with np.load(folder / "replay.npz", allow_pickle=False) as data:
        assert int(data["pos"]) == 200  # the 100 of a final save, then one a step


def test_a_converted_checkpoint_resumes_as_the_old_one_did(run, tmp_path):
    """convert_legacy_checkpoint rewrites an earlier version's folder (pickled sac.zip and replay.pkl) in today's
    format; loaded from either, the model has the same networks, optimiser states, entropy coefficient, counters,
    replay buffer and random state, and 40 further steps give bit-identical parameters. train_sac then resumes it."""
    old = _copy(run, tmp_path, "old")
    _as_an_earlier_version_wrote_it(run, old)
    new = shutil.copytree(old, tmp_path / "new")
    assert convert_legacy_checkpoint(new) == ["sac.zip", "replay.pkl"]
    assert convert_legacy_checkpoint(new) == []  # nothing left to convert
    assert sorted(os.listdir(new)) == [".lock", "curve.json", "replay.npz", "sac.zip"]

    def loaded(folder):
        if folder == old:  # as train_sac resumed before
            model = SAC.load(old / "sac.zip", env=Monitor(P.make_env()))
            model.load_replay_buffer(old / "replay.pkl")
        else:
            model = load_sac(new / "sac.zip", env=Monitor(P.make_env()))
            load_replay(model.replay_buffer, new / "replay.npz")
        return model, torch.get_rng_state(), np.random.get_state()[1].copy()

    (a, a_torch, a_numpy), (b, b_torch, b_numpy) = loaded(old), loaded(new)
    assert torch.equal(a_torch, b_torch) and np.array_equal(a_numpy, b_numpy)
    for name, state in a.get_parameters().items():
        torch.testing.assert_close(b.get_parameters()[name], state, rtol=0, atol=0, msg=name)
    assert torch.equal(a.log_ent_coef, b.log_ent_coef)
    for name in ("num_timesteps", "_episode_num", "_n_updates", "learning_starts", "tau", "target_entropy", "seed"):
        assert getattr(a, name) == getattr(b, name), name
    n = a.replay_buffer.size()
    assert (n, a.replay_buffer.pos) == (b.replay_buffer.size(), b.replay_buffer.pos) == (100, 100)
    for name in ("observations", "next_observations", "actions", "rewards", "dones", "timeouts"):
        np.testing.assert_array_equal(getattr(a.replay_buffer, name)[:n], getattr(b.replay_buffer, name)[:n])
    params = []
    for folder in (old, new):
        model, _, _ = loaded(folder)
        model.set_logger(Logger(folder=None, output_formats=[]))
        model.learn(40, reset_num_timesteps=False)
        params.append(model.policy.state_dict())
    before = a.policy.state_dict()
    assert any(not torch.equal(value, before[key]) for key, value in params[0].items())  # the 40 steps trained
    for key, value in params[0].items():
        assert torch.equal(value, params[1][key]), key
    resumed = train_sac(P, "relu-mlp", 200, checkpoint_dir=new, **KW)
    assert resumed.resumed_from == 100 and resumed.steps == [0, 100, 200]


def test_what_is_not_a_symkit_checkpoint_is_refused_by_name(tmp_path):
    from symkit.rl.sac import save_sac

    with pytest.raises(ValueError, match="missing is not a folder"):
        convert_legacy_checkpoint(tmp_path / "missing")
    with pytest.raises(TypeError, match="expected a SAC with a SymmetricSACPolicy"):
        save_sac(SAC("MlpPolicy", P.make_env(), buffer_size=10), tmp_path / "sac.zip")
    (tmp_path / "text.zip").write_text("not a zip")
    with pytest.raises(ValueError, match=r"text.zip: not a symkit SAC model \(a zip of sac.json and state.pt\), not a"):
        load_sac(tmp_path / "text.zip")
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as z:
        z.writestr("sac.json", "{}")
    with pytest.raises(ValueError, match=r"other.zip: not a symkit SAC model .*holds \['sac.json'\]"):
        load_sac(tmp_path / "other.zip")
