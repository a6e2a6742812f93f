"""rpp-levels: its panels, data, groups and decays, and the pendulum panel's learning. The inertia panels' quick runs
and the orderings of thesis Figure 3.2 they show are checked on the runs of the demo, which makes them
(tests/experiments/test_demo.py)."""

import pytest

from symkit.experiments import get_experiment

EXP = get_experiment("rpp-levels")


def test_unknown_values_are_rejected():
    with pytest.raises(ValueError, match="setting must be one of"):
        EXP.run(EXP.make_config(quick=True, setting="windy"))
    with pytest.raises(ValueError, match="dataset must be one of"):
        EXP.run(EXP.make_config(quick=True, dataset="cifar"))


def test_the_pendulum_panels_train_hamiltonian_networks_that_learn_the_windy_flow():
    """The pendulum panels (Fig. 3.2, bottom) train HNNs through rollouts; at the quick size (100 chunks, 32
    channels, 300 epochs) an MLP-HNN on the windy pendulum reaches a chunk MSE of 0.002 against the constant
    prediction's 0.068 (seed 0)."""
    m = EXP.run(EXP.make_config(quick=True, dataset="pendulum", setting="approximate", model="mlp", seed=0))
    assert m["test_mse"] < m["constant_mse"] / 10
    assert m["rollout_error"] < m["constant_rollout_error"]


def test_each_panel_uses_its_data_and_group():
    from symkit.experiments.rpp_levels import PANELS

    names = {panel: (data, group().name) for panel, (data, group) in PANELS.items()}
    assert names["pendulum", "approximate"][0] == "windy-pendulum"
    assert names["pendulum", "misspecified"] == ("pendulum", "SO(3)")
    assert names["inertia", "misspecified"] == ("inertia", "SL(3)")
    assert names["inertia", "approximate"] == ("modified-inertia", "O(3)")


def test_the_rpp_decays_are_the_authors_per_data_set_unless_set():
    from symkit.experiments.rpp_levels import decays

    assert decays(EXP.make_config(dataset="inertia")) == (1e-3, 1e2)
    assert decays(EXP.make_config(dataset="pendulum")) == (1e-5, 1e-5)
    assert decays(EXP.make_config(dataset="pendulum", basic_wd=3.0)) == (1e-5, 3.0)
