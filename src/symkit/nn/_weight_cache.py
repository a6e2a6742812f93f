"""Inference caches for layers whose weights are assembled from their parameters (``W = Q beta``, ``A + B``, the
bilinear layer's gathered weights): in ``eval()`` mode without gradients the assembled tensors are kept and reused
until a parameter changes, so inference costs the products with the input alone (escnn does the same).

A cached value is kept with the parameter tensors it was built from (their identity, version counters and storage:
a tensor swapped in by ``torch.func.functional_call`` or a ``p.data`` replacement is seen) and dropped by every
``train()`` / ``eval()`` call. Writes that bump no version counter (torch's fused optimisers, ``p.data`` writes
such as Polyak averaging or an EMA) are seen at the next ``eval()``; a layer kept in eval mode while such writes
reach it (a target network) sets ``cache_weights = False``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch

__all__ = ["WeightCache"]

T = TypeVar("T")


class WeightCache:
    """Mixin (before ``nn.Module`` in the bases) for a module that assembles its weights from its parameters:
    ``self._cached(build)`` returns ``build()``, computed once per parameter state in eval mode without gradients
    (module docstring)."""

    #: cache the assembled weights in eval mode without gradients; set False on a layer whose parameters are written
    #: behind autograd's back while it stays in eval mode (a Polyak-averaged target network)
    cache_weights: bool = True

    def train(self, mode: bool = True) -> Any:
        """Set the mode (``eval()`` calls it too) and drop the cached weights: an ``eval()`` after training always
        starts from the current parameters, whatever wrote them."""
        self.__dict__.pop("_eval_cache", None)
        return super().train(mode)  # type: ignore[misc]

    def _cached(self, build: Callable[[], T]) -> T:
        """``build()``, computed every call while training or recording gradients, cached otherwise."""
        if self.training or torch.is_grad_enabled() or not self.cache_weights:
            return build()
        params = tuple(self.parameters())  # type: ignore[attr-defined]
        try:
            state = tuple((p._version, p.data_ptr()) for p in params)
        except RuntimeError:  # tensors without storage (torch.func transforms): nothing to key a cache on
            return build()
        cache = self.__dict__.get("_eval_cache")
        # the cache holds the parameter tensors it was built from, so a tensor swapped in later (functional_call,
        # a fresh tensor each call) can never pass for one of them by reusing a freed one's memory
        if cache is None or cache[0] != state or any(a is not b for a, b in zip(cache[2], params, strict=True)):
            cache = (state, build(), params)
            self.__dict__["_eval_cache"] = cache
        return cache[1]
