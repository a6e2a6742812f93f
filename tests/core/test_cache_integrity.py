"""The on-disk basis cache returns only checked bases: every kind of bad entry is detected, recomputed and
replaced (issue: the cache trusted any array with the right number of rows)."""

import os
import zipfile

import numpy as np
import pytest

from symkit.groups import SO, Sp
from symkit.linalg import cache as cache_mod
from symkit.reps import T, V, clear_memory_cache
from symkit.reps import solve as solve_mod


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    d = tmp_path / "bases"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("SYMKIT_CACHE_DIR", str(d))
    monkeypatch.setenv("SYMKIT_CACHE", "1")
    monkeypatch.setattr(solve_mod, "DISK_CACHE_MIN_SECONDS", 0.0)
    clear_memory_cache()
    yield d
    clear_memory_cache()


def _solve(rep, method):
    clear_memory_cache()
    return rep.equivariant_basis(method=method)


def _entries(d):
    """The basis entries (2-D payloads; the Brauer path also stores its rank, a 1-D entry)."""
    out = []
    for p in sorted(d.iterdir()):
        if p.suffix == ".npz":
            try:
                if np.load(p)["payload"].ndim != 2:
                    continue
            except Exception:
                pass
            out.append(p)
    return out


def _plant(path, payload, **header_overrides):
    head = {"format": cache_mod.CACHE_VERSION, "dtype": str(payload.dtype), "shape": list(payload.shape),
            "sha256": cache_mod._digest(payload)}
    head.update(header_overrides)
    import json

    with open(path, "wb") as f:
        np.savez(f, payload=payload, header=np.frombuffer(json.dumps(head).encode(), dtype=np.uint8))


def _same_span(A, B):
    return A.shape == B.shape and np.allclose(A @ A.conj().T, B @ B.conj().T, atol=1e-9)


# (rep, method): a Brauer block (rank known cheaply) and a dense block of a non-compact group
CASES = [(T(2, 2, SO(3)), "brauer"), (V(Sp(2)) ** 2, "dense")]


@pytest.mark.parametrize("rep,method", CASES, ids=["brauer", "dense"])
@pytest.mark.parametrize(
    "bad",
    ["drop_column", "extra_column", "random", "nan", "float32", "bad_checksum", "truncated", "old_format",
     "not_a_zip", "wrong_version"],
)
def test_a_planted_bad_entry_is_recomputed_and_replaced(fresh_cache, rep, method, bad):
    truth = _solve(rep, method)
    (entry,) = _entries(fresh_cache)
    good = np.load(entry)["payload"]
    assert _same_span(good, truth)
    rng = np.random.default_rng(0)
    if bad == "drop_column":
        dropped = np.ascontiguousarray(good[:, :-1])
        if method == "brauer":  # a self-consistent header: caught by the rank, which the Brauer path knows cheaply
            _plant(entry, dropped)
        else:  # no cheap rank on the dense path: the header (shape, sha256) of the complete basis catches it
            _plant(entry, dropped, shape=list(good.shape), sha256=cache_mod._digest(good))
    elif bad == "extra_column":
        extra = np.linalg.qr(np.concatenate([good, rng.standard_normal((good.shape[0], 1))], 1))[0]
        _plant(entry, extra)
    elif bad == "random":
        _plant(entry, np.linalg.qr(rng.standard_normal(good.shape))[0])
    elif bad == "nan":
        p = good.copy()
        p[0, 0] = np.nan
        _plant(entry, p)
    elif bad == "float32":
        _plant(entry, good.astype(np.float32))
    elif bad == "bad_checksum":
        p = good.copy()
        p[0, 0] += 1e-3
        _plant(entry, p, sha256=cache_mod._digest(good))
    elif bad == "truncated":
        data = entry.read_bytes()
        entry.write_bytes(data[: len(data) // 2])
    elif bad == "old_format":
        entry.unlink()
        np.save(entry.with_suffix(".npy"), rng.standard_normal(good.shape))
    elif bad == "not_a_zip":
        entry.write_bytes(b"not a basis")
    elif bad == "wrong_version":
        _plant(entry, good, format="0")
    got = _solve(rep, method)
    assert _same_span(got, truth)
    assert np.isfinite(got).all() and got.dtype == np.float64
    assert rep.rank() == truth.shape[1]
    (entry2,) = _entries(fresh_cache)  # the bad entry was replaced by a good one
    assert not list(fresh_cache.glob("*.npy"))
    assert _same_span(np.load(entry2)["payload"], truth)
    assert zipfile.is_zipfile(entry2)


def test_a_good_entry_is_used_without_solving(fresh_cache, monkeypatch):
    rep = V(Sp(2)) ** 2
    truth = _solve(rep, "dense")
    monkeypatch.setattr(solve_mod, "dense_nullspace", lambda *a: pytest.fail("solved although cached"))
    assert _same_span(_solve(rep, "dense"), truth)


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_directory_others_can_write_is_not_used(fresh_cache, monkeypatch):
    os.chmod(fresh_cache, 0o777)
    monkeypatch.setattr(cache_mod, "_WARNED", set())
    rep = V(Sp(2)) ** 2
    with pytest.warns(RuntimeWarning, match="writable by others"):
        truth = _solve(rep, "dense")
    assert not _entries(fresh_cache)  # nothing written where others could replace it
    _plant(fresh_cache / "planted.npz", np.zeros((16, 1)))
    assert _same_span(_solve(rep, "dense"), truth)


def test_cache_roundtrip_and_header():
    key = cache_mod.cache_key("x")
    assert len(key) == 40 and key != cache_mod.cache_key("y")
