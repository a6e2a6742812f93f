"""``first_floating``: the tensor a layer's input checks read its dtype from, found without walking the network."""

import torch
from torch import nn

from symkit.nn._inputs import check_input, first_floating


class _Counting(nn.Module):
    """A module whose ``parameters()`` generator counts how many tensors it hands out."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(2, 2, dtype=torch.float64) for _ in range(n))
        self.handed_out = 0

    def parameters(self, recurse: bool = True):
        for p in super().parameters(recurse):
            self.handed_out += 1
            yield p


def test_the_first_floating_parameter_is_found_without_reading_the_others():
    net = _Counting(50)
    assert first_floating(net) is net.layers[0].weight
    assert net.handed_out == 1  # the other 99 parameters were never reached
    check_input(lambda: "net", net, torch.zeros(3, 2, dtype=torch.float64), 2)
    assert net.handed_out == 2


def test_integer_tensors_are_skipped_and_buffers_are_read_after_parameters():
    m = nn.Module()
    m.register_buffer("index", torch.arange(3))
    assert first_floating(m) is None
    m.register_buffer("scale", torch.ones(3, dtype=torch.float16))
    assert first_floating(m) is m.scale
    m.weight = nn.Parameter(torch.ones(2, dtype=torch.float64))
    assert first_floating(m) is m.weight  # a parameter before any buffer
