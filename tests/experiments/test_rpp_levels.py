"""rpp-levels at its quick size (N = 500, 128 channels, 300 epochs): every model learns, and the orderings of thesis
Figure 3.2 that this size shows. Measured (seed 0): exact MLP 4.35, EMLP 2.88, RPP 2.69; approximate 5.18, 4.25,
3.45; misspecified EMLP 63.4, RPP 9.03 (a constant predictor: 11.0 and 13.5). With the authors' inertia priors the
RPP is not close to the MLP when the group is misspecified (docs/emlp.md); that ordering is not asserted."""

import pytest

from symkit.experiments import get_experiment

EXP = get_experiment("rpp-levels")


@pytest.fixture(scope="module")
def mse():
    out = {}
    for setting in ("exact", "approximate", "misspecified"):
        for model in ("mlp", "emlp", "rpp"):
            if (setting, model) == ("misspecified", "mlp"):
                continue  # the same data and model as the exact MLP
            metrics = EXP.run(EXP.make_config(quick=True, setting=setting, model=model, seed=0))
            out[setting, model] = metrics["test_mse"]
            out[setting, "constant"] = metrics["constant_mse"]
    out["misspecified", "mlp"] = out["exact", "mlp"]
    return out


def test_every_model_with_a_right_or_approximate_group_learns(mse):
    for setting in ("exact", "approximate"):
        for model in ("mlp", "emlp", "rpp"):
            assert mse[setting, model] < 0.6 * mse[setting, "constant"], (setting, model, mse)


def test_exact_symmetry_rpp_is_as_good_as_the_emlp_and_both_beat_the_mlp(mse):
    assert mse["exact", "rpp"] < 1.2 * mse["exact", "emlp"]
    assert max(mse["exact", "rpp"], mse["exact", "emlp"]) < 0.85 * mse["exact", "mlp"]


def test_approximate_symmetry_rpp_beats_both(mse):
    assert mse["approximate", "rpp"] < 0.9 * min(mse["approximate", "emlp"], mse["approximate", "mlp"])


def test_misspecified_group_breaks_the_emlp_but_not_the_rpp(mse):
    assert mse["misspecified", "emlp"] > 3 * mse["misspecified", "constant"]
    assert mse["misspecified", "rpp"] < 0.2 * mse["misspecified", "emlp"]
    assert mse["misspecified", "rpp"] < mse["misspecified", "constant"]


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
