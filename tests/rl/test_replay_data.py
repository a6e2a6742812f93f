"""Transition-model data from an SAC agent's replay buffer (thesis Table 3.3's data): the buffer read in time order,
its episodes found where they end, windows that never cross an episode, every tenth episode held out, and the
rl-sac run that supplies the buffer kept with it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer

from symkit.rl import preset
from symkit.rl.replay import buffer_steps, replay_steps, save_replay
from symkit.rl.transitions import held_out_episodes, sample_windows, steps_from_replay


def _episodes(p, lengths, seed=0) -> dict[str, np.ndarray]:
    """Buffer arrays (one environment) of episodes of ``lengths`` steps: each state the step count, so that a window
    shows which steps it holds; actions drawn in [-1, 1] as SAC stores them; done at each episode's last step."""
    rng = np.random.default_rng(seed)
    obs, nxt, act, done = [], [], [], []
    t = 0
    for length in lengths:
        first = rng.uniform(0, 0.5, size=p.raw_obs_size)
        values = first + t + np.arange(length + 1)[:, None]
        obs.extend(values[:-1])
        nxt.extend(values[1:])
        done.extend(k == length - 1 for k in range(length))
        act.extend(rng.uniform(-1, 1, (length, p.action_size)))
        t += 1000
    return {"observations": np.array(obs)[:, None], "next_observations": np.array(nxt)[:, None],
            "actions": np.array(act)[:, None], "dones": np.array(done, dtype=np.float32)[:, None]}


def _time_order(arrays):
    return {k: v[:, 0] for k, v in arrays.items()}


def test_episodes_end_at_done_and_wherever_the_next_observation_is_not_the_next_step():
    p = preset("Hopper")
    arrays = _time_order(_episodes(p, [5, 7, 4]))
    arrays["dones"][11] = 0.0  # the second episode's end unmarked, as after a resume: still an end
    steps = steps_from_replay(p, arrays)
    assert steps.episode.tolist() == [0] * 5 + [1] * 7 + [2] * 4
    assert torch.equal(steps.states, torch.as_tensor(p.features(arrays["observations"])))


def test_actions_are_put_back_in_the_environments_units():
    p = preset("Humanoid")  # actions in [-0.4, 0.4]: SAC stores them scaled to [-1, 1]
    arrays = _time_order(_episodes(p, [3]))
    arrays["actions"][:] = [-1.0, 0.0, 1.0] * (p.action_size // 3) + [0.5] * (p.action_size % 3)
    steps = steps_from_replay(p, arrays)
    expected = p.action_features(0.4 * arrays["actions"])
    assert torch.allclose(steps.actions, torch.as_tensor(expected))


def test_windows_lie_inside_one_episode_and_end_on_the_next_observation():
    p = preset("Hopper")
    steps = steps_from_replay(p, _time_order(_episodes(p, [12, 3, 10, 40])))
    windows = sample_windows(steps, 300, 10, seed=1)
    assert windows.states.shape == (300, 11, p.state_size) and windows.actions.shape == (300, 10, p.action_size)
    # each state is its step count plus a per-episode offset: consecutive within a window, by exactly one
    gaps = windows.states[:, 1:, 0] - windows.states[:, :-1, 0]
    assert torch.allclose(gaps, torch.ones_like(gaps))
    firsts = {round(float(s)) // 1000 for s in windows.states[:, 0, 0]}
    assert firsts == {0, 2, 3}  # the 3-step episode holds no window of 10
    with pytest.raises(ValueError, match="no episode has 100 steps"):
        sample_windows(steps, 5, 100)


def test_every_tenth_episode_is_held_out():
    p = preset("Hopper")
    steps = steps_from_replay(p, _time_order(_episodes(p, [4] * 25)))
    train, test = held_out_episodes(steps)
    assert sorted(test.episode.unique().tolist()) == [9, 19]
    assert len(train) + len(test) == len(steps) and not set(train.episode.tolist()) & {9, 19}


@pytest.mark.parametrize("filled", [137, 1309])  # part filled, wrapped
def test_a_buffer_and_its_file_give_the_same_steps_oldest_first(tmp_path, filled):
    obs_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
    buffer = ReplayBuffer(1000, obs_space, spaces.Box(-1, 1, (1,), np.float32), device="cpu")
    for t in range(filled):
        buffer.add(np.full((1, 2), t), np.full((1, 2), t + 1), np.zeros((1, 1)), np.zeros(1), np.zeros(1), [{}])
    save_replay(buffer, tmp_path / "replay.npz")
    a, b = buffer_steps(buffer), replay_steps(tmp_path / "replay.npz")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    first = max(filled - 1000, 0)
    assert a["observations"][:, 0].tolist() == list(range(first, filled))


def test_a_file_that_is_not_a_replay_buffer_is_refused_by_name(tmp_path):
    np.savez(tmp_path / "other.npz", observations=np.zeros((3, 1, 2)))
    with pytest.raises(ValueError, match="no next_observations, actions, dones, pos, full"):
        replay_steps(tmp_path / "other.npz")


def test_the_agents_run_keeps_its_buffer_and_serves_it_again_without_training(tmp_path, monkeypatch):
    from symkit.lab.experiments import rl_sac

    monkeypatch.setenv("SYMKIT_CHECKPOINTS", str(tmp_path))
    config = rl_sac.SACConfig(env="Swimmer", model="relu-mlp", steps=300, learning_starts=100, ch=16,
                              eval_every=300, eval_episodes=1)
    arrays, metrics = rl_sac.agent_replay(config)
    assert arrays["observations"].shape == (300, preset("Swimmer").raw_obs_size)
    assert (rl_sac.checkpoint_dir(config) / "replay.npz").exists()
    monkeypatch.setattr("symkit.rl.sac.SAC.learn", lambda *a, **k: pytest.fail("trained again"))
    again, metrics_again = rl_sac.agent_replay(config)
    assert all(np.array_equal(arrays[k], again[k]) for k in arrays)
    assert metrics_again["final_return"] == metrics["final_return"]


def test_a_finished_run_that_dropped_its_buffer_is_named(tmp_path, monkeypatch):
    from symkit.lab.experiments import rl_sac

    monkeypatch.setenv("SYMKIT_CHECKPOINTS", str(tmp_path))
    monkeypatch.setattr(rl_sac, "FULL_STEPS", 200)  # a 300-step run is then a full-length one: its buffer goes
    config = rl_sac.SACConfig(env="Swimmer", model="relu-mlp", steps=300, learning_starts=100, ch=16,
                              eval_every=300, eval_episodes=1)
    rl_sac.run(config)
    with pytest.raises(ValueError, match="kept no replay buffer"):
        rl_sac.agent_replay(config)
