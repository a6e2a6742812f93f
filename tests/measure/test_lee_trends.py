"""The lee-trends experiment's quick config produces coherent measurements."""

import math

import pytest

from symkit.lab.experiments import get_experiment
from symkit.lab.experiments.lee_trends import CATEGORIES, TRANSFORMS


def check_lee_metrics(m, arch):
    for t in TRANSFORMS:  # no quick model is invariant to any of them (a constant model scores 0 on all)
        assert m[f"lee_{t}"] > 0 and math.isfinite(m[f"lee_{t}"]), (t, m[f"lee_{t}"])
    # layer-wise shares are a partition of the summed norms and the exact decomposition closes (float32)
    assert sum(m[f"layer_frac_{c}"] for c in CATEGORIES) == pytest.approx(1.0, abs=1e-5)
    assert m["layer_residual"] < 1e-4
    assert 0 <= m["layer_cum_q1"] <= m["layer_cum_q2"] <= m["layer_cum_q3"] <= 1 + 1e-6
    # sum of norms >= norm of the sum (triangle inequality, Eq. 4.6)
    assert m["layer_sum_norms_over_norm"] >= 1 - 1e-5
    # the gap ratios are the ratios of the split values
    assert m["gap_shifted_over_test_rotate"] == pytest.approx(m["lee_shifted_rotate"] / m["lee_rotate"])
    for split in ("train", "test", "shifted"):
        assert m[f"lee_logits_{split}_translate_x"] > 0
    if arch == "cnn":
        assert m["layer_frac_embedding"] == 0 and m["layer_frac_mixing"] == 0 and m["layer_frac_conv"] > 0
    else:
        assert m["layer_frac_embedding"] > 0 and m["layer_frac_mixing"] > 0 and m["layer_frac_conv"] == 0
    # a fraction of (evaluated images x 8 shifts) top-1 predictions: a trained model changes some but not all of
    # them under shifts of up to 2 pixels (quick seed 0: cnn 6 of 128, mixer 78, vit 90)
    changed = m["shift_changed"] * 8 * get_experiment("lee-trends").make_config(quick=True).n_eval
    assert 0 < m["shift_changed"] < 1 and changed == pytest.approx(round(changed), abs=1e-9), m["shift_changed"]
    assert m["sample_translation_error"] > 0
    if arch == "cnn":  # pooled convolutions keep most predictions under small shifts (the thesis's Sec. 4.5 contrast)
        assert m["shift_changed"] < 0.25, m["shift_changed"]


def test_quick_mixer_run():
    exp = get_experiment("lee-trends")
    m = exp.run(exp.make_config(quick=True, arch="mixer"))
    check_lee_metrics(m, "mixer")
    assert m["test_acc"] > 0.5  # chance is 0.1; 150 Adam steps reach ~0.8


@pytest.mark.parametrize("arch", ["cnn", "vit"])
def test_quick_runs(arch):
    exp = get_experiment("lee-trends")
    m = exp.run(exp.make_config(quick=True, arch=arch))
    check_lee_metrics(m, arch)
    assert m["test_acc"] > 0.3, m["test_acc"]  # chance is 0.1: the measured models have learned (cnn 0.93, vit 0.48)


def test_bad_arch():
    exp = get_experiment("lee-trends")
    with pytest.raises(ValueError, match="arch must be one of"):
        exp.run(exp.make_config(quick=True, arch="mlp"))


def _trend_row(arch, train, test, shifted, tops, **fracs):
    mean = {"lee_train_translate_x": train, "lee_translate_x": test, "lee_shifted_translate_x": shifted,
            **{f"layer_frac_{k}": v for k, v in fracs.items()}}
    return {"config": {"arch": arch}, "mean": mean, "by_seed": {i: {"layer_top": t} for i, t in enumerate(tops)}}


def test_the_claims_read_fig_4_4_and_4_7():
    exp = get_experiment("lee-trends")
    thesis_like = [_trend_row("cnn", 0.1, 0.2, 20, ["features.6"] * 3, conv=0.3, nonlinearity=0.45, pooling=0.25),
                   _trend_row("mixer", 0.01, 0.7, 27, ["blocks.0.tokens", "embed.proj", "embed.proj"]),
                   _trend_row("vit", 0.9, 2.6, 65, ["embed.proj"] * 3)]
    assert set(exp.claims(thesis_like).values()) == {True} and len(exp.claims(thesis_like)) == 4
    one_of_three = [*thesis_like[:2], _trend_row("vit", 0.9, 2.6, 65, ["blocks.1.attn", "embed.proj", "norm"])]
    assert exp.claims(one_of_three)["patch_embedding_largest_layer_of_vit_and_mixer"] is False
    conv_heavy = [_trend_row("cnn", 0.1, 0.2, 20, ["features.0"], conv=0.6, nonlinearity=0.3, pooling=0.1)]
    assert exp.claims(conv_heavy)["cnn_nonlinearity_and_pooling_above_conv"] is False
    no_gap = [_trend_row("vit", 2.6, 2.6, 65, ["embed.proj"])]  # test no worse than train: no gap
    assert exp.claims(no_gap)["less_equivariant_on_test_than_train"] is False
