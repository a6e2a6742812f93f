"""The rpp-inertia experiment at its quick size: the misspecified-group ordering of thesis Figure 3.2."""

import pytest

from symkit.experiments import get_experiment


def test_misspecified_group_hurts_emlp_but_not_rpp():
    exp = get_experiment("rpp-inertia")
    mse = {}
    for model in ("mlp", "emlp", "rpp"):
        mse[model] = exp.run(exp.make_config(quick=True, setting="misspecified", model=model, seed=0))["test_mse"]
    # SL(3) equivariance is wrong for inertia: the EMLP cannot fit it, the RPP falls back on its flexible path
    assert mse["emlp"] > 2 * mse["mlp"]
    assert mse["rpp"] < 0.5 * mse["emlp"]


def test_unknown_setting_is_rejected():
    exp = get_experiment("rpp-inertia")
    with pytest.raises(ValueError, match="setting must be one of"):
        exp.run(exp.make_config(quick=True, setting="windy"))
