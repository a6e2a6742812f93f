"""The three networks the thesis compares (Sec. 2.6, 3.5.1, 3.6), built by name: :func:`network` with ``"mlp"``,
``"emlp"`` or ``"rpp"``, the one place the experiments and the RL code turn a model name into a module."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from symkit.groups import Group
from symkit.nn.emlp import EMLP, MLP
from symkit.nn.rpp import RPPEMLP
from symkit.reps import Rep

__all__ = ["NETWORKS", "network"]

#: the network names :func:`network` builds, with the options each class takes beyond the shared ones
NETWORKS: dict[str, tuple[str, ...]] = {
    "mlp": ("activation",),
    "emlp": ("bilinear", "bilinear_scale"),
    "rpp": ("subgroup", "bilinear_scale", "basic_init_scale"),
}


def network(kind: str, rep_in: Rep, rep_out: Rep, group: Group, *, ch: int | Rep | Sequence[int | Rep] = 384,
            num_layers: int = 3, device: Any = None, dtype: torch.dtype | None = None, **options: Any) -> nn.Module:
    """The ``kind`` network from ``rep_in`` to ``rep_out``: an :class:`MLP` of ``rep_in.size -> rep_out.size``
    (``ch`` an int, the hidden width), an :class:`EMLP` or an :class:`RPPEMLP` of ``group`` (``ch`` an int, a Rep
    or one per hidden layer). ``options`` go to the class: ``activation`` (MLP); ``bilinear``, ``bilinear_scale``
    (EMLP); ``subgroup``, ``bilinear_scale``, ``basic_init_scale`` (RPP-EMLP). The module is the one its class
    builds from the same arguments, with the same initial values."""
    if kind not in NETWORKS:
        raise ValueError(f"network: kind must be one of {', '.join(map(repr, NETWORKS))}, got {kind!r}")
    unknown = sorted(set(options) - set(NETWORKS[kind]))
    if unknown:
        raise TypeError(f"network: {kind!r} takes no option {', '.join(unknown)}; its options: "
                        f"{', '.join(NETWORKS[kind])}")
    f = {"device": device, "dtype": dtype}
    if kind == "mlp":
        if not isinstance(ch, int) or isinstance(ch, bool):
            raise TypeError(f"network: an MLP's ch is its hidden width (an int), got {type(ch).__name__}")
        return MLP(rep_in.size, rep_out.size, ch=ch, num_layers=num_layers, **f, **options)
    cls = EMLP if kind == "emlp" else RPPEMLP
    return cls(rep_in, rep_out, group, ch=ch, num_layers=num_layers, **f, **options)
