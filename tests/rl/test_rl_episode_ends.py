"""benchmarks/rl_episode_ends.py: the numbers docs/rl.md and docs/rl-runs.md quote from it (how episodes end, the
invariant share of the actions, the critics' value beside the return that followed)."""

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import rl_episode_ends as ends  # noqa: E402
from symkit.rl import PRESETS  # noqa: E402


@given(st.lists(st.floats(-10, 10), min_size=1, max_size=30), st.floats(0, 1))
def test_returns_to_go_are_the_discounted_sums_of_what_followed(rewards, discount):
    got = ends.returns_to_go(rewards, discount)
    want = [sum(r * discount ** k for k, r in enumerate(rewards[t:])) for t in range(len(rewards))]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(("name", "invariant"), [("Ant", 2), ("Walker2d", 3), ("Hopper", 0)])
def test_the_invariant_projection_keeps_the_actions_no_group_element_moves(name, invariant):
    """A projection (P^2 = P) whose rank counts the invariant action features: Ant's hips all alike and ankles all
    alike (2), Walker2d's three joint pairs moved together (3), none of Hopper's (its mirror negates)."""
    p = PRESETS[name]
    proj = ends.invariant_projection(p)
    np.testing.assert_allclose(proj @ proj, proj, atol=1e-12)
    assert round(float(np.trace(proj))) == invariant
    for g in p.group.elements():
        np.testing.assert_allclose(p.action_rep.rho(g) @ proj, proj, atol=1e-12)
    assert ends.invariant_projection(PRESETS["Humanoid"]) is None  # SO(2): no finite average


def test_episode_ends_counts_every_episode_and_values_the_actions_taken():
    """An untrained SAC on Hopper: every episode is counted once, by how it ended; the critics' value and the
    return that followed are finite; the untrained critics (outputs near 0) value the actions far below the
    roughly 1-per-step returns Hopper pays for staying up."""
    from stable_baselines3.common.monitor import Monitor

    from symkit.rl.sac import make_sac

    p = PRESETS["Hopper"]
    env = p.make_env()
    model = make_sac(p, "relu-mlp", Monitor(p.make_env()), ch=32, buffer_size=1000, learning_starts=100)
    out = ends.episode_ends(model, env, episodes=3, seed=0, projection=ends.invariant_projection(p),
                            to_features=p.action_features)
    assert out["above"] + out["below"] + out["other"] + out["time limit"] == 3
    assert 1000 * out["time limit"] / 3 <= out["episode length"] <= 1000  # time-limited episodes: Hopper's 1,000
    env.reset(seed=0)
    start = float(env.unwrapped.data.qpos[0])  # where episode_ends' first reset puts the torso
    one = ends.episode_ends(model, env, episodes=1, seed=0, deterministic=True)  # env is left at the episode's end
    travelled = float(env.unwrapped.data.qpos[0]) - start
    assert abs(travelled) > 1e-3  # it moved: the check below is not 0 == 0
    assert one["forward reward per step"] * one["episode length"] * env.unwrapped.dt == pytest.approx(travelled)
    assert 0 < out["mean |action|"] <= 1 and 0 < out["policy std"]
    assert abs(out["critic value"]) < 1 < out["return that followed"]
    if out["time limit"] < 3:  # some episode ended early: its steps are in both means
        assert abs(out["critic value, ended early"]) < 1 < out["return that followed, ended early"]
    else:
        assert np.isnan(out["critic value, ended early"])
    assert np.isnan(out["critic bilinear ratio"])  # ReLU MLP critics have no bilinear layers
    played = [ends.episode_ends(model, env, episodes=2, seed=0, deterministic=True) for _ in range(2)]
    assert played[0] == pytest.approx(played[1], nan_ok=True)  # the mean actions: the same episodes twice
    sampled = [ends.episode_ends(model, env, episodes=2, seed=0)["mean |action|"] for _ in range(2)]
    assert sampled[0] != sampled[1]  # sampled actions differ from play to play


def test_the_bilinear_ratio_is_the_layers_output_over_input_norm():
    """The hooks record ``|scale W(h) h| / |h|``: it grows in proportion to ``|h|`` (the layer is quadratic) and to
    the scale, the reason an RPP critic whose activations grow can become dominated by its bilinear terms."""
    import torch

    from symkit.nn import BiLinear

    p = PRESETS["Ant"]
    layer = BiLinear(p.state_rep, scale=0.03)
    ratios, handles = ends.bilinear_ratios(torch.nn.Sequential(layer))
    h = torch.randn(16, p.state_rep.size, generator=torch.Generator().manual_seed(0))
    for factor in (1.0, 10.0):
        layer(factor * h)
    small, large = ratios["0"]
    assert large == pytest.approx(10 * small, rel=1e-5) and 0 < small
    for handle in handles:
        handle.remove()
    layer(h)
    assert len(ratios["0"]) == 2  # removed hooks record nothing
