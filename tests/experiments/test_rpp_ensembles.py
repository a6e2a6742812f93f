"""rpp-ensembles (thesis Sec. 3.5.2): one member's metrics and curves, the measure of its equivariance error, the
config's checks, and the summary and figure of two ensembles. Tiny sizes: the whole file takes seconds."""

import math

import numpy as np
import pytest
import torch

from symkit.lab.experiments import get_experiment
from symkit.lab.experiments.rpp_ensembles import equivariance_error, figures, summarize, train_member
from symkit.nn.rpp import RPPGatedNonlinearity, RPPLinear
from symkit.testing import default_tolerance

EXP = get_experiment("rpp-ensembles")
#: 64 training points, 2 layers of 128 channels, 3 epochs, measured at 0, 2 and (the last) 3
TINY = {"size": "quick", "n_train": 64, "n_test": 32, "ch": 128, "num_layers": 2, "epochs": 3, "batch_size": 32,
        "record_every": 2, "equivariance_inputs": 16, "group_samples": 3}


@pytest.fixture(scope="module")
def member():
    """A member trained on modified inertia (the approximate ensemble) at the tiny sizes."""
    torch.set_num_threads(1)
    return train_member(EXP.make_config(setting="approximate", seed=1, **TINY))


def test_a_member_reports_finite_metrics_and_curves_at_the_recorded_epochs():
    m = EXP.run(EXP.make_config(setting="exact", seed=0, **TINY))
    assert m["curve_epochs"] == [0, 2, 3]  # before training, every record_every epochs, and after the last
    assert len(m["equivariance_curve"]) == len(m["equivariant_fraction_curve"]) == 3
    assert m["equivariance_error"] == m["equivariance_curve"][-1]
    assert m["equivariant_fraction"] == m["equivariant_fraction_curve"][-1]
    for name in ("test_mse", "constant_mse", "equivariance_error", "train_seconds"):
        assert math.isfinite(m[name]) and m[name] > 0, name
    assert all(0 < e < 1 for e in m["equivariance_curve"])  # Eq. 3.3 lies in [0, 1]
    assert all(0.9 < f <= 1 for f in m["equivariant_fraction_curve"])  # the flexible path starts at 1e-3 scale


def test_the_measure_finds_the_flexible_path_and_only_it(member):
    """The trained member's error (its last curve point) is far above float32 rounding; with its flexible path
    zeroed the same model, inputs and group elements give an error at rounding (below 64 eps, symkit's float32
    tolerance), while its outputs are not a multiple of the identity (which every element leaves alone: their
    anisotropic part is above 100 x rounding). A measure that acts with the identity gives 0 for both; one that
    acts on the inputs alone is above rounding for both."""
    rounding = default_tolerance(torch.float32)
    model, probe = member.model, member.probe
    measured = equivariance_error(model, probe, member.rep_in, member.rep_out, member.group, 3, 1)
    assert measured == member.metrics["equivariance_error"]
    assert measured > 100 * rounding
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, RPPLinear):
                module.basic.weight.zero_()
                module.basic.bias.zero_()
            elif isinstance(module, RPPGatedNonlinearity):
                module.basic.zero_()
    zeroed = equivariance_error(model, probe, member.rep_in, member.rep_out, member.group, 3, 1)
    assert zeroed < rounding
    with torch.no_grad():
        out = model(probe)  # (B, 9): 3 x 3 matrices
    identity = torch.eye(3).reshape(-1)
    anisotropic = out - (out @ identity / 3)[:, None] * identity
    assert float(anisotropic.norm() / out.norm()) > 100 * rounding


def test_a_setting_other_than_exact_or_approximate_is_refused():
    refused = "rpp-ensembles: setting must be one of exact, approximate, got 'misspecified'"
    with pytest.raises(ValueError, match=refused):
        EXP.make_config(setting="misspecified")
    with pytest.raises(ValueError, match="size must be one of thesis, quick, got 'paper'"):
        EXP.make_config(size="paper")
    config = EXP.config(setting="windy")  # a config made without the registry's checks
    with pytest.raises(ValueError, match="setting must be one of exact, approximate, got 'windy'"):
        EXP.run(config)


def _rows():
    """Two ensembles of three members (final equivariance errors and test MSEs chosen by hand)."""
    members = {"exact": ([0.01, 0.03, 0.02], [1.0, 2.0, 3.0]), "approximate": ([0.2, 0.08, 0.1], [4.0, 6.0, 5.0])}
    return [{"config": {"setting": s, "epochs": 6}, "n": 3, "scale": "quick", "mean": {}, "stderr": {},
             "by_seed": {seed: {"equivariance_error": e, "test_mse": t} for seed, (e, t) in enumerate(zip(*v))}}
            for s, v in members.items()]


def test_the_summary_gives_median_and_range_per_ensemble_and_the_ratio_of_medians():
    text = summarize(_rows())
    assert "| exact | quick | 3 | 0.02 [0.01, 0.03] | 2 [1, 3] |" in text
    assert "| approximate | quick | 3 | 0.1 [0.08, 0.2] | 5 [4, 6] |" in text
    assert text.index("| exact |") < text.index("| approximate |")
    assert "- quick scale: 5" in text.splitlines()  # 0.1 / 0.02


def test_the_figure_draws_one_panel_for_the_seeds_of_both_ensembles(tmp_path):
    pytest.importorskip("matplotlib")
    runs = [{"config": {"setting": s, "epochs": 2, "seed": seed}, "seed": seed,
             "metrics": {"equivariance_curve": list(np.full(3, 0.01 * (seed + 1))), "curve_epochs": [0, 1, 2]}}
            for s in ("exact", "approximate") for seed in (0, 1)]
    paths = figures(runs, tmp_path)
    assert [p.name for p in paths] == ["rpp-ensembles_curves.png"] and paths[0].stat().st_size > 0


def test_the_claim_holds_when_the_two_ensembles_do_not_overlap():
    from symkit.lab.experiments.rpp_ensembles import claims

    assert claims(_rows()) == {"modified_inertia_members_all_above_exact": True}
    overlapping = _rows()
    overlapping[0]["by_seed"][1]["equivariance_error"] = 0.09  # an exact member above the lowest approximate one
    assert claims(overlapping) == {"modified_inertia_members_all_above_exact": False}
    assert claims(_rows()[:1]) == {}  # one ensemble decides nothing
