"""PyTorch's factory conventions for symkit modules: ``device=`` and ``dtype=`` keywords, the default dtype when no
dtype is given, and random initial values drawn on the CPU (seeded generators and the global RNG are CPU
generators) and then moved, so a model built on any device, ``meta`` included, starts from the same numbers."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["Resettable", "factory", "index_tensor", "on", "place"]


def factory(device: Any = None, dtype: torch.dtype | None = None) -> dict[str, Any]:
    """``{"device": device, "dtype": dtype or torch.get_default_dtype()}`` for ``torch.zeros(..., **f)`` and
    ``nn.Linear(..., **f)``."""
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    return {"device": device, "dtype": torch.get_default_dtype() if dtype is None else dtype}


def on(t: torch.Tensor, f: dict[str, Any]) -> torch.Tensor:
    """A floating tensor made on the CPU, moved to the factory's device and dtype."""
    return t.to(device=f["device"], dtype=f["dtype"])


def index_tensor(values: Any, device: Any = None) -> torch.Tensor:
    """Integer indices as a tensor for ``index_select`` / ``index_add`` / ``index_put``: int32 where every value
    fits (half the memory of int64, which a model holds for its whole life), int64 otherwise; always a copy (the
    values may be a cached plan's array)."""
    t = values.detach() if isinstance(values, torch.Tensor) else torch.from_numpy(np.array(values))  # a copy
    if t.is_floating_point() or t.is_complex():
        raise TypeError(f"index_tensor: expected integer indices, got {t.dtype}")
    small = t.numel() == 0 or (int(t.max()) < 2**31 - 1 and int(t.min()) >= -(2**31))
    return t.to(device=device, dtype=torch.int32 if small else torch.long, copy=True)


def place(module: torch.nn.Module, device: Any = None, dtype: torch.dtype | None = None) -> None:
    """Move a module built on the CPU (with the default dtype) to ``device`` and ``dtype`` at the end of its
    ``__init__``: the initial values are those of a CPU build, on every device (``meta`` included)."""
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    if device is not None or dtype is not None:
        module.to(device=device, dtype=dtype)


class Resettable:
    """Mixin: ``reset_parameters()`` for a module whose initial values are drawn in its ``__init__``.

    The constructor's arguments are recorded (by the outermost ``__init__``); ``reset_parameters()`` builds the module
    again from them and copies the new module's parameters and buffers in place, so the values are drawn exactly as
    at construction (from the global RNG, a ``seed=`` argument, or the advanced state of a ``generator=`` argument);
    modules passed to the constructor (a wrapped model) are reset first, as they were built first.
    Parameters keep their identity, device and dtype (optimisers holding them stay valid).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" not in cls.__dict__:
            return
        init = cls.__init__

        def recording_init(self: Any, *args: Any, **kw: Any) -> None:
            outermost = "_init_call" not in self.__dict__
            if outermost:
                object.__setattr__(self, "_init_call", (args, kw))
            init(self, *args, **kw)

        recording_init.__doc__, recording_init.__wrapped__ = init.__doc__, init  # type: ignore[attr-defined]
        cls.__init__ = recording_init  # type: ignore[method-assign]

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Draw the initial values again, as the constructor does (class docstring)."""
        args, kw = self.__dict__["_init_call"]
        for value in (*args, *kw.values()):  # modules passed in (a wrapped model) were drawn first: reset them first
            if isinstance(value, torch.nn.Module) and hasattr(value, "reset_parameters"):
                value.reset_parameters()
        if any(t.is_meta for t in (*self.parameters(), *self.buffers())):  # type: ignore[attr-defined]
            return  # a module moved to meta after construction holds no values to draw again
        fresh = type(self)(*args, **kw)
        self.load_state_dict(fresh.state_dict())  # type: ignore[attr-defined]
