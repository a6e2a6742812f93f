"""rpp-levels: its panels, data, groups and decays, and the pendulum panel's learning. The inertia panels' quick runs
and the orderings of thesis Figure 3.2 they show are checked on the runs of the demo, which makes them
(tests/experiments/test_demo.py)."""

import pytest

from symkit.lab.experiments import get_experiment

EXP = get_experiment("rpp-levels")


def test_unknown_values_are_rejected():
    with pytest.raises(ValueError, match="setting must be one of"):
        EXP.run(EXP.make_config(quick=True, setting="windy"))
    with pytest.raises(ValueError, match="dataset must be one of"):
        EXP.run(EXP.make_config(quick=True, dataset="cifar"))


def test_the_pendulum_panels_train_hamiltonian_networks_that_learn_the_windy_flow():
    """The pendulum panels (Fig. 3.2, bottom) train HNNs through rollouts; at the pendulum's ``quick`` sizes (100
    chunks, 32 channels, 300 epochs, in full: not the quick scale's shorter training) an MLP-HNN on the windy
    pendulum reaches a chunk MSE of 0.002 against the constant prediction's 0.068 (seed 0)."""
    from symkit.lab.experiments.pendulum import cached_data
    from symkit.lab.experiments.rpp_levels import sizes

    cfg = EXP.make_config(size="quick", dataset="pendulum", setting="approximate", model="mlp", seed=0)
    assert (sizes(cfg)["epochs"], sizes(cfg)["batch_size"]) == (300, 100)
    m = EXP.run(cfg)
    assert m["test_mse"] < m["constant_mse"] / 10
    assert m["rollout_error"] < m["constant_rollout_error"]
    # the constant prediction z(t) = z0, scored here on the windy test chunks
    n = sizes(cfg)
    test = cached_data(n["n_train"], n["n_test"], n["n_test"], 0, True).test
    assert test.z.shape[0] == 100
    constant = float((test.z - test.z0[:, None, :]).square().mean())
    assert m["constant_mse"] == pytest.approx(constant, rel=1e-6)


def test_each_panel_uses_its_data_and_group():
    from symkit.lab.experiments.rpp_levels import PANELS

    names = {panel: (data, group().name) for panel, (data, group) in PANELS.items()}
    assert names["pendulum", "approximate"][0] == "windy-pendulum"
    assert names["pendulum", "misspecified"] == ("pendulum", "SO(3)")
    assert names["inertia", "misspecified"] == ("inertia", "SL(3)")
    assert names["inertia", "approximate"] == ("modified-inertia", "O(3)")


def test_the_rpp_decays_are_the_authors_per_data_set_unless_set():
    from symkit.lab.experiments.rpp_levels import decays

    assert decays(EXP.make_config(dataset="inertia")) == (1e-3, 1e2)
    assert decays(EXP.make_config(dataset="pendulum")) == (1e-5, 1e-5)
    assert decays(EXP.make_config(dataset="pendulum", basic_wd=3.0)) == (1e-5, 3.0)


def test_each_rpp_decay_reaches_its_own_path():
    """The regression panels' loss adds ``equivariant_wd |beta|^2 + basic_wd |B|^2``: each decay on its own path (the
    parameters read off their names), with two decays far apart so that a swap shows."""
    import torch

    from symkit.groups import O
    from symkit.lab.experiments.rpp_levels import _penalty
    from symkit.nn import network
    from symkit.reps import Scalar, V

    G = O(3)
    torch.manual_seed(0)
    model = network("rpp", 2 * V(G), V(G) + Scalar, G, ch=16, num_layers=2).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "basic" in name:
                p.normal_()
    equivariant = sum(float(p.detach().square().sum()) for name, p in model.named_parameters()
                      if ".equivariant.weight_basis." in name)
    basic = sum(float(p.detach().square().sum()) for name, p in model.named_parameters()
                if name.endswith(("basic.weight", "nonlinearity.basic")))
    assert equivariant > 0.1 and basic > 0.1
    for dataset in ("inertia", "pendulum"):
        penalty = _penalty(EXP.make_config(dataset=dataset, equivariant_wd=2e-3, basic_wd=5.0))
        assert float(penalty(model).detach()) == pytest.approx(2e-3 * equivariant + 5.0 * basic, rel=1e-10)
    assert _penalty(EXP.make_config(model="emlp")) is None


def _levels_rows(mse: dict[tuple[str, str], float], dataset: str = "inertia"):
    return [{"config": {"dataset": dataset, "setting": s, "model": m, "size": "thesis"}, "mean": {"test_mse": v}}
            for (s, m), v in mse.items()]


def test_the_claims_check_fig_3_2_orderings_with_near_as_a_factor_of_two():
    exp = get_experiment("rpp-levels")
    thesis_like = {("exact", "mlp"): 1.9, ("exact", "emlp"): 0.08, ("exact", "rpp"): 0.15,
                   ("approximate", "mlp"): 2.3, ("approximate", "emlp"): 1.6, ("approximate", "rpp"): 0.23,
                   ("misspecified", "mlp"): 1.9, ("misspecified", "emlp"): 700.0, ("misspecified", "rpp"): 2.3}
    checks = exp.claims(_levels_rows(thesis_like))
    assert len(checks) == 5 and all(checks.values())
    far = {**thesis_like, ("exact", "rpp"): 0.17}  # 2.1x the EMLP's: no longer near
    assert [k for k, v in exp.claims(_levels_rows(far)).items() if not v] == ["inertia_exact_rpp_near_emlp"]
    above = {**thesis_like, ("approximate", "rpp"): 1.7}  # above the EMLP when approximate
    assert [k for k, v in exp.claims(_levels_rows(above)).items() if not v] == \
        ["inertia_approximate_rpp_below_emlp_and_mlp"]
    missing = {k: v for k, v in thesis_like.items() if k != ("misspecified", "emlp")}
    assert not any(k.startswith("inertia_misspecified") for k in exp.claims(_levels_rows(missing)))
    both = exp.claims(_levels_rows(thesis_like) + _levels_rows(far, dataset="pendulum"))
    assert both["inertia_exact_rpp_near_emlp"] and not both["pendulum_exact_rpp_near_emlp"]
