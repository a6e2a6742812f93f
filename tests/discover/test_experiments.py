"""Quick configs of the registered sharing experiments, each checked for a real property of its result."""

from symkit.experiments import get_experiment


def test_gaussian_quick_penalties_help():
    exp = get_experiment("sharing-gaussian")
    both = exp.run(exp.make_config(quick=True, dims=4, penalties="both"))
    none = exp.run(exp.make_config(quick=True, dims=4, penalties="none", brute_force=False))
    # Table 1's ordering and the baselines: penalties cut PD and MSE; brute force beats No sharing
    assert both["pd"] < none["pd"] - 0.5
    assert both["mse"] < none["mse"]
    assert both["mse_brute"] < both["mse_no_sharing"]
    assert both["pd_oracle"] == 0 and both["pd_no_sharing"] == 3
