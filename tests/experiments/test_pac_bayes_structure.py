"""pac-bayes-structure on tiny settings (300 training digits, a few epochs): every data variant runs and is bounded,
shuffled pixels are one fixed permutation an MLP is blind to, shuffled labels leave the test error at chance, full
batch takes one step per epoch, bad settings are refused, and the summary shows medians over seeds."""

import copy
import math

import pytest
import torch

from symkit.lab.experiments import get_experiment
from symkit.lab.experiments.pac_bayes_structure import (
    DATA,
    MODELS,
    build_model,
    noisy_labels,
    pixel_permutation,
    shuffle_pixels,
    structure_data,
)
from symkit.pacbayes import catoni_bound, point_mass_kl_bits
from symkit.train import Trainer

EXP = get_experiment("pac-bayes-structure")
TINY = {"epochs": 2, "quant_epochs": 1, "n_train": 300}


@pytest.fixture(scope="module")
def tiny_runs():
    return {(m, d): EXP.run(EXP.make_config(quick=True, model=m, data=d, **TINY)) for m in MODELS for d in DATA}


def test_every_model_and_data_variant_is_bounded(tiny_runs):
    for (model, data), m in tiny_runs.items():
        assert m["n"] == 300, (model, data)
        for key in ("bound", "quantized_train_error", "quantized_test_error"):
            assert 0.0 <= m[key] <= 1.0 and math.isfinite(m[key]), (model, data, key)
        assert 0 < m["message_bits"] < 5000
        assert m["bound"] == catoni_bound(m["quantized_train_error"], point_mass_kl_bits(m["message_bits"]), 300)
        assert m["steps_per_epoch"] == 3  # 300 digits in batches of 128
    # the two models are of about the same size (module docstring: 16,602 and 16,660 weights)
    assert tiny_runs["cnn", "images"]["num_params"] == 16602 and tiny_runs["mlp", "images"]["num_params"] == 16660


def test_shuffled_pixels_are_one_fixed_permutation_of_every_image():
    (x, y), (xt, yt) = structure_data(EXP.make_config(data="images"))
    (xs, ys), (xst, yst) = structure_data(EXP.make_config(data="shuffled-pixels"))
    again = structure_data(EXP.make_config(data="shuffled-pixels"))
    perm = pixel_permutation(64, 3000)  # seed 0
    assert torch.equal(perm.sort().values, torch.arange(64)) and not torch.equal(perm, torch.arange(64))
    for original, shuffled in ((x, xs), (xt, xst)):  # train and test alike: output pixel k is input pixel perm[k]
        assert torch.equal(shuffled.reshape(len(shuffled), 64), original.reshape(len(original), 64)[:, perm])
    assert torch.equal(again[0][0], xs) and torch.equal(again[1][0], xst)
    assert torch.equal(ys, y) and torch.equal(yst, yt)
    # on several channels, each channel gets the same permutation of positions
    rgb = torch.randn(5, 3, 4, 4, generator=torch.Generator().manual_seed(0))
    p16 = pixel_permutation(16, 1)
    out = shuffle_pixels(rgb, p16)
    for c in range(3):
        assert torch.equal(out[:, c].reshape(5, 16), rgb[:, c].reshape(5, 16)[:, p16])


def test_an_mlp_is_blind_to_shuffled_pixels_up_to_its_first_layer():
    (x, _), _ = structure_data(EXP.make_config(data="images", n_train=100))
    perm = pixel_permutation(64, 3000)
    mlp = build_model(EXP.make_config(model="mlp"), (1, 8, 8))
    permuted = copy.deepcopy(mlp)
    first = next(m for m in permuted.modules() if isinstance(m, torch.nn.Linear))
    with torch.no_grad():
        first.weight.copy_(first.weight[:, perm])
        logits, on_shuffled = mlp(x), permuted(shuffle_pixels(x, perm))
        unpermuted = mlp(shuffle_pixels(x, perm))
    assert torch.allclose(on_shuffled, logits, atol=1e-5, rtol=0)
    assert (unpermuted - logits).abs().max() > 1e-2  # the permutation does change the inputs


def test_shuffled_labels_leave_the_test_error_at_chance():
    (_, y), (_, yt) = structure_data(EXP.make_config(data="images"))
    (_, ys), (_, yst) = structure_data(EXP.make_config(data="shuffled-labels"))
    for original, shuffled in ((y, ys), (yt, yst)):  # the same classes, most moved
        assert torch.equal(original.sort().values, shuffled.sort().values)
        assert (original != shuffled).double().mean() > 0.7
    real = EXP.run(EXP.make_config(quick=True, model="mlp", data="images"))
    shuffled = EXP.run(EXP.make_config(quick=True, model="mlp", data="shuffled-labels"))
    assert real["quantized_test_error"] < 0.3  # the model learns the digits when the labels are theirs
    # chance is 0.9; 359 test digits give a standard error of 0.016, so 0.8 is six of them below it
    assert shuffled["quantized_test_error"] > 0.8 and shuffled["bound"] > 0.99


@pytest.mark.parametrize(("optimizer", "sizes"), [("full-batch", [300] * 5), ("sgd", [128, 128, 44] * 5)])
def test_full_batch_takes_one_step_per_epoch(optimizer, sizes, monkeypatch):
    seen = []
    step = Trainer._step

    def recording(self, batch, result):
        seen.append(len(batch[0]))
        return step(self, batch, result)

    monkeypatch.setattr(Trainer, "_step", recording)
    m = EXP.run(EXP.make_config(model="mlp", optimizer=optimizer, epochs=3, quant_epochs=2, n_train=300))
    assert seen == sizes  # 3 epochs of subspace training, 2 of quantisation-aware training
    assert m["steps_per_epoch"] == len(sizes) // 5


def test_the_sweep_gives_full_batch_six_times_the_passes():
    quick = EXP.points(True)
    assert {(p["model"], p["data"]) for p in quick if p["optimizer"] == "sgd"} == {(m, d) for m in MODELS
                                                                                    for d in DATA}
    assert [p for p in quick if p["optimizer"] == "full-batch"] == [
        {"model": "cnn", "data": "images", "optimizer": "full-batch", "epochs": 6 * EXP.quick["epochs"]}]
    assert [p["epochs"] for p in EXP.points(False) if "epochs" in p] == [6 * EXP.make_config().epochs]


def test_bad_settings_are_refused(monkeypatch):
    monkeypatch.delenv("SYMKIT_DATA", raising=False)
    for setting, message in ((dict(model="resnet"), "model must be one of"),
                             (dict(data="rotated"), "data must be one of"),
                             (dict(optimizer="adam"), "optimizer must be one of"),
                             (dict(width=14), "use a multiple of 4"),
                             (dict(source="cifar10"), "no data directory"),
                             (dict(epochs=0), "epochs=0 .* must be >=1")):
        with pytest.raises(ValueError, match=message):
            EXP.make_config(**setting)


def test_the_summary_shows_medians_and_full_batch_beside_sgd():
    def row(model, data, optimizer, bounds):
        by_seed = {s: {"bound": b, "quantized_test_error": 0.1, "quantized_train_error": 0.1, "message_bits": 1000.0,
                       "steps_per_epoch": 1 if optimizer == "full-batch" else 12} for s, b in enumerate(bounds)}
        return {"config": {"model": model, "data": data, "optimizer": optimizer, "epochs": 60},
                "n": len(bounds), "mean": {"bound": sum(bounds) / len(bounds)}, "by_seed": by_seed}

    text = EXP.summarize([row("cnn", "images", "sgd", [0.5, 0.9, 0.6]), row("mlp", "images", "sgd", [0.7]),
                          row("cnn", "images", "full-batch", [0.65, 0.62, 0.7])])
    assert "| cnn | 60.0 (10.0; 3 seeds) | – | – |" in text  # the median, not the mean (66.7)
    assert "| mlp | 70.0 (10.0; 1 seed) | – | – |" in text
    assert "| cnn | images | sgd | 3 | 60 | 12 | 10.0 | 10.0 | 1000 | 60.0 |" in text
    assert "| cnn | images | full-batch | 3 | 60 | 1 | 10.0 | 10.0 | 1000 | 65.0 |" in text


def _bound_row(model, data, optimizer, bounds):
    mean = sum(bounds) / len(bounds)
    stderr = (sum((b - mean) ** 2 for b in bounds) / (len(bounds) - 1) / len(bounds)) ** 0.5 if len(bounds) > 1 \
        else None
    return {"config": {"model": model, "data": data, "optimizer": optimizer, "epochs": 60}, "n": len(bounds),
            "mean": {"bound": mean}, "stderr": {"bound": stderr},
            "by_seed": {s: {"bound": b} for s, b in enumerate(bounds)}}


def test_the_claims_check_each_ordering_of_fig_5_3_and_table_a23():
    thesis_like = [_bound_row("cnn", "images", "sgd", [0.30, 0.32, 0.31]),
                   _bound_row("mlp", "images", "sgd", [0.60, 0.62, 0.61]),
                   _bound_row("cnn", "shuffled-pixels", "sgd", [0.70, 0.72, 0.71]),
                   _bound_row("mlp", "shuffled-pixels", "sgd", [0.61, 0.60, 0.62]),
                   _bound_row("cnn", "shuffled-labels", "sgd", [0.99, 1.0, 0.995]),
                   _bound_row("mlp", "shuffled-labels", "sgd", [1.0, 1.0, 1.0]),
                   _bound_row("cnn", "images", "full-batch", [0.31, 0.33, 0.32])]
    checks = EXP.claims(thesis_like)
    assert checks == {"cnn_bound_below_mlp_on_images": True, "shuffled_pixels_raise_cnn_bound": True,
                      "shuffled_pixels_put_cnn_bound_above_mlp": True,
                      "mlp_bound_as_it_was_with_shuffled_pixels": True, "shuffled_labels_vacuous": True,
                      "full_batch_about_sgd": True}
    # each departure fails its own check alone
    flipped = [_bound_row("cnn", "images", "sgd", [0.65, 0.66, 0.64]), *thesis_like[1:6],
               _bound_row("cnn", "images", "full-batch", [0.66, 0.65, 0.64])]
    assert [k for k, v in EXP.claims(flipped).items() if not v] == ["cnn_bound_below_mlp_on_images"]
    moved = [*thesis_like[:3], _bound_row("mlp", "shuffled-pixels", "sgd", [0.45, 0.46, 0.44]), *thesis_like[4:]]
    assert [k for k, v in EXP.claims(moved).items() if not v] == ["mlp_bound_as_it_was_with_shuffled_pixels"]
    learned = [*thesis_like[:4], _bound_row("cnn", "shuffled-labels", "sgd", [0.5, 0.6, 0.55]), *thesis_like[5:]]
    assert [k for k, v in EXP.claims(learned).items() if not v] == ["shuffled_labels_vacuous"]
    apart = [*thesis_like[:6], _bound_row("cnn", "images", "full-batch", [0.50, 0.52, 0.51])]
    assert [k for k, v in EXP.claims(apart).items() if not v] == ["full_batch_about_sgd"]
    # only the checks whose settings ran
    assert EXP.claims(thesis_like[:2]) == {"cnn_bound_below_mlp_on_images": True}


def test_label_noise_redraws_that_share_of_the_training_labels_only():
    (x, y), (xt, yt) = structure_data(EXP.make_config(data="images"))
    (xn, yn), (xnt, ynt) = structure_data(EXP.make_config(data="images", label_noise=0.2))
    assert torch.equal(xn, x) and torch.equal(xnt, xt) and torch.equal(ynt, yt)  # images and test labels kept
    chosen = round(0.2 * len(y))
    changed = int((yn != y).sum())
    # every redrawn label differs from the true one with probability 0.9: 259 of 288 expected, sd 5, so about 29
    # redraws land on the true class (at least 10 asked: 3.7 sd below); a redraw that always picks another class
    # changes all 288
    assert 0.8 * chosen <= changed <= chosen - 10
    assert torch.equal(noisy_labels(y, 0.2, 6000), yn) and not torch.equal(noisy_labels(y, 0.2, 6001), yn)
    assert torch.equal(noisy_labels(y, 0.0, 1), y) and yn.min() >= 0 and yn.max() <= 9
    with pytest.raises(ValueError, match="label_noise must be a share below 1"):
        EXP.run(EXP.make_config(label_noise=1.0))


def _width_row(width, bounds, errors, noise=0.2, intrinsic_dim=200):
    row = _bound_row("cnn", "images", "sgd", bounds)
    errors_row = _bound_row("cnn", "images", "sgd", errors)
    row["config"].update(width=width, label_noise=noise, intrinsic_dim=intrinsic_dim)
    row["mean"]["quantized_test_error"] = errors_row["mean"]["bound"]
    row["stderr"]["quantized_test_error"] = errors_row["stderr"]["bound"]
    for seed, error in enumerate(errors):
        row["by_seed"][seed]["quantized_test_error"] = error
    return row


def test_figure_a7_asks_for_a_peak_inside_the_widths_on_every_curve():
    from symkit.lab.experiments.pac_bayes_structure import figure_a7_claims

    peaked = [_width_row(4, [0.8, 0.82], [0.3, 0.3]), _width_row(8, [0.9, 0.88], [0.4, 0.42]),
              _width_row(16, [0.7, 0.72], [0.2, 0.2])]
    assert figure_a7_claims(peaked) == {"bound_climbs_and_comes_down_again_with_width": True,
                                        "test_error_climbs_and_comes_down_again_with_width": True}
    falling = [_width_row(4, [0.9], [0.5]), _width_row(8, [0.8], [0.4]), _width_row(16, [0.8], [0.3]),
               _width_row(32, [0.7], [0.35])]  # the bound only falls; the test error climbs at the end only
    assert figure_a7_claims(falling) == {"bound_climbs_and_comes_down_again_with_width": False,
                                         "test_error_climbs_and_comes_down_again_with_width": False}
    bound_only = [_width_row(4, [0.8, 0.82], [0.5, 0.5]), _width_row(8, [0.9, 0.88], [0.4, 0.42]),
                  _width_row(16, [0.7, 0.72], [0.2, 0.2])]  # each curve read from its own metric
    assert figure_a7_claims(bound_only) == {"bound_climbs_and_comes_down_again_with_width": True,
                                            "test_error_climbs_and_comes_down_again_with_width": False}
    # a peak within the seeds' spread is no peak: 0.80 +- 0.05 above 0.78 +- 0.01
    noisy = [_width_row(4, [0.78, 0.76, 0.80], [0.3]), _width_row(8, [0.75, 0.85, 0.80], [0.4]),
             _width_row(16, [0.77, 0.75, 0.79], [0.2])]
    assert figure_a7_claims(noisy)["bound_climbs_and_comes_down_again_with_width"] is False
    # a curve at another intrinsic dimension is a curve of its own: the peak must be on both
    other = [_width_row(w, [b], [e], intrinsic_dim=1000) for w, b, e in ((4, 0.9, 0.5), (8, 0.8, 0.4), (16, 0.7, 0.3))]
    assert figure_a7_claims(peaked + other)["bound_climbs_and_comes_down_again_with_width"] is False
    # runs without label noise, or on fewer than three widths, decide nothing
    assert figure_a7_claims([_width_row(w, [0.5], [0.1], noise=0.0) for w in (4, 8, 16)]) == {}
    assert figure_a7_claims(peaked[:2]) == {}


def test_label_noise_runs_stay_out_of_fig_5_3_and_table_a23():
    clean = [_bound_row("cnn", "images", "sgd", [0.30, 0.32, 0.31]), _bound_row("mlp", "images", "sgd", [0.60, 0.62])]
    noisy = _width_row(16, [0.9, 0.95, 0.92], [0.5, 0.5, 0.5])
    noisy["config"]["model"] = "mlp"  # would be the mlp's lowest bound... were it counted
    noisy["by_seed"] = {s: {**m, "bound": 0.1} for s, m in noisy["by_seed"].items()}
    assert EXP.claims(clean + [noisy]) == EXP.claims(clean) == {"cnn_bound_below_mlp_on_images": True}
    for r in clean + [noisy]:
        for m in r["by_seed"].values():
            m.update(quantized_test_error=0.1, quantized_train_error=0.1, message_bits=1000.0, steps_per_epoch=12)
    assert EXP.summarize(clean + [noisy]) == EXP.summarize(clean)
