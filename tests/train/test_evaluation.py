"""symkit.train.accuracy: the top-1 share over batches, the module's mode kept, bad labels refused."""

import pytest
import torch
from torch import nn

from symkit.train import accuracy, predict


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 8), nn.Dropout(0.5), nn.Linear(8, 3))


def test_accuracy_is_the_share_of_correct_top1_predictions_in_any_batching():
    model, x = _model(), torch.randn(37, 5)
    y = predict(model, x).argmax(1)
    y[:10] = (y[:10] + 1) % 3  # 10 of 37 made wrong on purpose
    for batch_size in (1, 5, 37, 512):
        assert accuracy(model, x, y, batch_size=batch_size) == 27 / 37


def test_accuracy_evaluates_in_eval_mode_and_hands_the_module_back_as_it_came():
    model, x = _model(), torch.randn(64, 5)
    y = predict(model, x).argmax(1)  # eval-mode predictions: dropout off
    model.train()
    assert accuracy(model, x, y) == 1.0 and model.training  # with dropout on, some of 64 would flip
    model.eval()
    accuracy(model, x, y)
    assert not model.training


def test_accuracy_takes_plain_callables_and_refuses_labels_that_are_not_class_indices():
    x = torch.randn(6, 3)
    assert accuracy(lambda t: t, x, x.argmax(1)) == 1.0
    with pytest.raises(ValueError, match="class indices"):
        accuracy(lambda t: t, x, x.argmax(1).float())
    with pytest.raises(ValueError, match="one per row of x"):
        accuracy(lambda t: t, x, x.argmax(1)[:5])
    with pytest.raises(ValueError, match="no examples"):
        accuracy(lambda t: t, x[:0], x[:0].argmax(1))
