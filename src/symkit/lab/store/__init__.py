"""The SQLite results store: one row per run, safe with concurrent writers (see :mod:`symkit.lab.store.db`)."""

from symkit.lab.store.db import (
    DEFAULT_STORE,
    RunRecord,
    Store,
    StoreError,
    canonical_json,
    config_hash,
    default_store_path,
    to_jsonable,
)

__all__ = [
    "DEFAULT_STORE",
    "RunRecord",
    "Store",
    "StoreError",
    "canonical_json",
    "config_hash",
    "default_store_path",
    "to_jsonable",
]
