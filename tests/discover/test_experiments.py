"""Quick configs of the registered sharing experiments, each checked for a real property of its result."""

from symkit.lab.experiments import get_experiment


def test_gaussian_quick_penalties_help():
    exp = get_experiment("sharing-gaussian")
    both = exp.run(exp.make_config(quick=True, dims=4, penalties="both"))
    none = exp.run(exp.make_config(quick=True, dims=4, penalties="none", brute_force=False))
    # Table 1's ordering and the baselines: penalties cut PD and MSE; brute force beats No sharing
    assert both["pd"] < none["pd"] - 0.5
    assert both["mse"] < none["mse"]
    assert both["mse_brute"] < both["mse_no_sharing"]
    assert both["pd_oracle"] == 0 and both["pd_no_sharing"] == 3


def test_shift_quick_recovers_toeplitz_sharing():
    exp = get_experiment("sharing-shift")
    for size in (6, 15):
        r = exp.run(exp.make_config(quick=True, a_size=size))
        assert r["pd_median"] == 0, r["pd_per_seed"]  # Fig. 8: PD 0 at 6x6 and 15x15
        assert r["mse"] < r["mse_no_sharing"]
        assert r["implied_exact"] >= 0.5  # the discovered sharing is named as the shift (Toeplitz) scheme


def test_sum_quick_recovers_permutation_invariance():
    """Fig. 7: the deep-net search (implicit hypergradients) finds the one-cluster sharing at length 4."""
    exp = get_experiment("sharing-sum")
    r = exp.run(exp.make_config(quick=True, length=4))
    assert r["pd"] == 0, r["labels"]
    assert r["implied_group"] == "S(4)"
    assert r["pd_no_sharing"] == 3
    assert r["mse"] < 1.0  # the label variance is about 26.7 for length 4


def test_sum_quick_recovers_the_even_odd_sharing_of_the_negated_sum():
    """Fig. 7's negated variant (even positions negated): the search finds the two clusters even / odd, which a search
    collapsed to one cluster misses (partition distance 1)."""
    exp = get_experiment("sharing-sum")
    r = exp.run(exp.make_config(quick=True, length=4, variant="negated"))
    assert r["pd"] == 0, r["labels"]
    assert r["labels"][0] == r["labels"][2] != r["labels"][1] == r["labels"][3], r["labels"]
    assert r["implied_group"] == "S_even x S_odd (4)"
    assert r["pd_no_sharing"] == 2
    assert r["mse"] < 1.0  # the label variance is about 26.7 here too
