"""SAC checkpoints keep the replay buffer's filled rows only (symkit.rl.replay) and resume from them exactly; the
whole-buffer pickles of earlier versions resume once converted on request."""

from __future__ import annotations

import os

import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer

from symkit.rl import PRESETS
from symkit.rl.replay import load_replay, replay_file, save_replay
from symkit.rl.sac import train_sac

OBS = spaces.Box(-np.inf, np.inf, (11,), np.float32)
ACT = spaces.Box(-1.0, 1.0, (3,), np.float32)


def _filled(size: int, steps: int, seed: int = 0) -> ReplayBuffer:
    buffer = ReplayBuffer(size, OBS, ACT, device="cpu")
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        buffer.add(rng.normal(size=(1, 11)), rng.normal(size=(1, 11)), rng.uniform(-1, 1, (1, 3)),
                   rng.normal(size=1), rng.random(1) < 0.1, [{"TimeLimit.truncated": bool(rng.random() < 0.05)}])
    return buffer


def _rows(buffer: ReplayBuffer) -> dict[str, np.ndarray]:
    n = buffer.size()
    return {name: getattr(buffer, name)[:n] for name in ("observations", "next_observations", "actions", "rewards",
                                                          "dones", "timeouts")}


@pytest.mark.parametrize("steps", [0, 137, 1000, 1309])  # empty, part filled, exactly full, wrapped
def test_the_filled_rows_round_trip_and_the_file_grows_with_them(tmp_path, steps):
    buffer = _filled(1000, steps)
    save_replay(buffer, tmp_path / "replay.npz")
    loaded = ReplayBuffer(1000, OBS, ACT, device="cpu")
    load_replay(loaded, tmp_path / "replay.npz")
    assert (loaded.pos, loaded.full) == (buffer.pos, buffer.full)
    for name, rows in _rows(buffer).items():
        np.testing.assert_array_equal(getattr(loaded, name)[:len(rows)], rows, err_msg=name)
    row_bytes = sum(a.itemsize * int(np.prod(a.shape[1:])) for a in _rows(buffer).values())
    assert os.path.getsize(tmp_path / "replay.npz") < 4096 + min(steps, 1000) * row_bytes


def test_a_file_of_another_size_or_other_spaces_is_refused_by_name(tmp_path):
    save_replay(_filled(1000, 10), tmp_path / "replay.npz")
    with pytest.raises(ValueError, match=r"replay.npz holds a replay buffer of 1000 rows; this run's has 500"):
        load_replay(ReplayBuffer(500, OBS, ACT, device="cpu"), tmp_path / "replay.npz")
    other = ReplayBuffer(1000, spaces.Box(-1, 1, (5,), np.float32), ACT, device="cpu")
    with pytest.raises(ValueError, match=r"observations has shape \(10, 1, 11\), expected \(10, 1, 5\)"):
        load_replay(other, tmp_path / "replay.npz")


def test_a_checkpoint_of_an_earlier_version_is_converted_on_request_and_rewritten_compact(tmp_path):
    """A checkpoint whose buffer is stable-baselines3's pickle (``replay.pkl``) is refused until converted
    (symkit.rl.sac.convert_legacy_checkpoint); then it resumes with every transition, the pickle gone."""
    from stable_baselines3.common.monitor import Monitor

    from symkit.rl.sac import LegacyCheckpointError, convert_legacy_checkpoint, load_sac

    p = PRESETS["Hopper"]
    kw = dict(seed=2, eval_every=100, eval_episodes=1, checkpoint_dir=tmp_path, checkpoint_every=100, ch=16,
              learning_starts=50, batch_size=16, buffer_size=1000, keep_replay=True)
    train_sac(p, "relu-mlp", 100, **kw)
    model = load_sac(tmp_path / "sac.zip", env=Monitor(p.make_env()))
    load_replay(model.replay_buffer, tmp_path / "replay.npz")
    model.save_replay_buffer(tmp_path / "replay.pkl")  # as an earlier version wrote it
    (tmp_path / "replay.npz").unlink()
    assert replay_file(tmp_path) == tmp_path / "replay.pkl"
    with pytest.raises(LegacyCheckpointError, match="replay.pkl is a pickle"):
        train_sac(p, "relu-mlp", 300, **kw)
    assert convert_legacy_checkpoint(tmp_path) == ["replay.pkl"]
    assert sorted(os.listdir(tmp_path)) == [".lock", "curve.json", "replay.npz", "sac.zip"]
    resumed = train_sac(p, "relu-mlp", 300, **kw)
    assert resumed.resumed_from == 100 and resumed.steps == [0, 100, 200, 300]
    assert resumed.model.replay_buffer.size() == 300  # the 100 of the pickle (a final save), then one a step
    assert sorted(os.listdir(tmp_path)) == [".lock", "curve.json", "replay.npz", "sac.zip"]
