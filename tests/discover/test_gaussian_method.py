"""The Gaussian experiments: brute force (Ours*, Figs. 2-3) and the relaxed method against Table 1 (notes §7.3)."""

import numpy as np
import pytest

from symkit.datasets.sharing import gaussian_shared_means
from symkit.discover import brute_force_search, cluster_average, labels_to_assignment, partition_distance


def _brute(k, n_train, seeds=200, lam=1e-2):
    data = [gaussian_shared_means(k, 1, n=100, n_train=n_train, seed=s, legacy=True) for s in range(seeds)]
    Y = np.stack([d.y for d in data])
    ybar_T, V = Y[:, :n_train].mean(1), Y[:, n_train:]

    def score(labels):
        val = ((V - cluster_average(labels, ybar_T)[:, None, :]) ** 2).mean((1, 2))
        return val + lam * np.sqrt(labels_to_assignment(labels).sum(0)).sum()

    best, _ = brute_force_search(k, score)
    theta = np.stack([cluster_average(b, y) for b, y in zip(best, Y.mean(1))])
    mse = (theta**2).sum(1).mean()  # theta_gt = 0 for rank 1
    pd = np.mean([partition_distance(b, np.zeros(k, int)) for b in best])
    return mse, pd, (Y.mean(1) ** 2).sum(1).mean()


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_brute_force_beats_no_sharing(k):
    mse, pd, mse_none = _brute(k, 30)
    assert mse < mse_none and pd < k - 1  # Fig. 2: Ours* beats No sharing in MSE and PD (no sharing PD = K - 1)


def test_brute_force_pd_grows_with_training_fraction():
    """Fig. 3: with full sharing, more training (less validation) data makes the discovered scheme worse."""
    _, pd_small, _ = _brute(5, 10)
    _, pd_large, _ = _brute(5, 90)
    assert pd_small + 0.3 < pd_large


TABLE1 = [(2, "none", 0.019, 0.915, 0.03), (2, "entropy", 0.016, 0.385, 0.07), (2, "both", 0.014, 0.145, 0.05),
          (4, "none", 0.035, 2.05, 0.069), (4, "entropy", 0.033, 1.68, 0.070), (4, "both", 0.025, 0.49, 0.095),
          (6, "none", 0.050, 3.35, 0.075), (6, "entropy", 0.048, 3.36, 0.094), (6, "both", 0.028, 0.59, 0.132)]


def test_table1_reproduces():
    """Table 1 at full size: the paper's 200 data sets (reference generator, seeds 0-199), 1000 RMSprop steps, three
    restarts, as the paper; about 30 s, vectorised over the data sets.

    MSE: |MSE - paper| <= 0.004 (about one 95% half-width; the data sets are the paper's, so the MSE, set mostly by
    the data, agrees to 0.001 in every row). PD: |PD - paper| <= 2 sqrt(h^2 + h_paper^2), two 95% half-widths of the
    difference of the two estimates. The closest row is K = 2 without penalties (0.975 against 0.915, limit 0.074):
    there the unpenalised A ends near-uniform (row max ~0.505) on about half of the data sets, and hardening by row
    argmax splits or merges those by margins of ~1e-2 down to exact ties, so that row moves with the precision
    (float32 gives ~0.95) and is not a test of the method. The ablation: PD(both) < PD(entropy) <= PD(none) + CIs,
    MSE(both) < MSE(none) for each K. A dropped penalty makes its row equal the row above: the strict ordering fails
    (rank penalty), or the PD bound at K = 2 and 4 (entropy penalty)."""
    from symkit.lab.experiments import get_experiment

    exp = get_experiment("sharing-gaussian")
    got = {}
    for k, pen, mse, pd, ci in TABLE1:
        r = exp.run(exp.make_config(dims=k, penalties=pen, brute_force=False))
        got[k, pen] = r
        assert abs(r["mse"] - mse) <= 0.004, (k, pen, r["mse"])
        assert abs(r["pd"] - pd) <= 2 * np.hypot(r["pd_ci"], ci), (k, pen, r["pd"], r["pd_ci"])
    for k in (2, 4, 6):
        both, ent, none = got[k, "both"], got[k, "entropy"], got[k, "none"]
        assert both["pd"] < ent["pd"] <= none["pd"] + none["pd_ci"] + ent["pd_ci"]
        assert both["mse"] < none["mse"]
