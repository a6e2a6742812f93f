"""The SQLite results store: one row per run, safe with concurrent writers (see :mod:`symkit.store.db`)."""

from symkit.store.db import (
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
