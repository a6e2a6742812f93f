"""The on-disk basis cache returns only checked bases: every kind of bad entry is detected, recomputed and
replaced, including entries whose header is valid but whose basis misses a column, has a corrupted column, or
whose rank is wrong (each is checked against a count that solves nothing); blocks with no such count are not
stored at all."""

import os
import zipfile

import numpy as np
import pytest

from symkit.groups import SO, SU, D, O, S, SO2eR3, Sp
from symkit.linalg import cache as cache_mod
from symkit.reps import T, V, clear_memory_cache
from symkit.reps import solve as solve_mod
from symkit.reps.core import canonical_counts


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
    if bad == "drop_column":  # a self-consistent header: caught by the rank, counted without solving
        _plant(entry, np.ascontiguousarray(good[:, :-1]))
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


def _key(rep, method, what):
    ((leaves, _),) = canonical_counts(rep)
    return solve_mod._disk_key(leaves[0].G, leaves, method, what)


def test_a_planted_brauer_rank_and_a_basis_missing_its_last_column_are_recomputed(fresh_cache):
    """SO(3) T(4) has 3 invariants: a stored rank of 2 and a basis of 2 of the 3 columns, each with a valid header
    (so every file-level check passes, and the 2 columns are exact, orthonormal invariants), are caught by the
    coupling path count, recomputed and overwritten."""
    rep = T(4, 0, SO(3))
    truth = _solve(rep, "brauer")
    assert truth.shape == (81, 3) and rep.rank(method="brauer") == 3
    rank_entry = fresh_cache / f"{_key(rep, 'brauer', 'rank')}.npz"
    basis_entry = fresh_cache / f"{_key(rep, 'brauer', 'basis')}.npz"
    _plant(rank_entry, np.array([2], dtype=np.int64))
    _plant(basis_entry, np.ascontiguousarray(truth[:, :-1]))
    clear_memory_cache()
    assert rep.rank(method="brauer") == 3
    got = _solve(rep, "brauer")
    assert _same_span(got, truth)
    assert np.load(rank_entry)["payload"].tolist() == [3]
    assert _same_span(np.load(basis_entry)["payload"], truth)
    _plant(rank_entry, np.array([4], dtype=np.int64))  # a rank above the truth is caught too
    clear_memory_cache()
    assert rep.rank(method="brauer") == 3


# (rep, method) on paths whose bases are cached, each with a count that solves nothing: characters of a finite
# group (D(4) T(4): 4 invariants), the Schur-Weyl count (Sp(1), SU(2) complex), tuple orbits (S(4) on the dense
# path), coupling paths (O(3) T(4) on the dense path)
COUNTED = [(T(4, 0, D(4)), "dense"), (T(4, 0, D(4)), "auto"), (T(4, 0, Sp(1)), "dense"), (T(2, 2, SU(2)), "dense"),
           (T(3, 0, S(4)), "dense"), (T(4, 0, O(3)), "dense"), (T(2, 2, SO(3)), "weight")]


@pytest.mark.parametrize("rep,method", COUNTED, ids=lambda x: x if isinstance(x, str) else repr(x))
@pytest.mark.parametrize("bad", ["drop_last_column", "corrupt_last_column"])
def test_a_wrong_basis_with_a_valid_header_is_recomputed(fresh_cache, rep, method, bad):
    truth = _solve(rep, method)
    (entry,) = _entries(fresh_cache)
    good = np.load(entry)["payload"]
    assert _same_span(good, truth) and good.shape[1] >= 2
    if bad == "drop_last_column":  # still orthonormal and invariant: only the rank can tell
        planted = np.ascontiguousarray(good[:, :-1])
    else:  # the last column swapped for a unit vector orthogonal to the others: the rank is right
        x = np.random.default_rng(1).standard_normal(good.shape[0]).astype(good.dtype)
        x -= good[:, :-1] @ (good[:, :-1].conj().T @ x)
        planted = np.ascontiguousarray(np.concatenate([good[:, :-1], (x / np.linalg.norm(x))[:, None]], axis=1))
    _plant(entry, planted)
    got = _solve(rep, method)
    assert got.shape == truth.shape and _same_span(got, truth)
    (entry2,) = _entries(fresh_cache)
    assert _same_span(np.load(entry2)["payload"], truth)


def test_d4_t4_dense_entry_of_three_columns_gives_four(fresh_cache):
    rep = T(4, 0, D(4))
    truth = _solve(rep, "auto")
    assert truth.shape == (16, 4)
    _plant(fresh_cache / f"{_key(rep, 'dense', 'basis')}.npz", np.ascontiguousarray(truth[:, :3]))
    assert _solve(rep, "auto").shape == (16, 4)
    assert rep.rank() == 4


def test_a_block_with_no_independent_count_is_not_stored_and_a_planted_one_is_ignored(fresh_cache):
    """SO(2) embedded in R^3 is a Lie group symkit has no count for: nothing is written, and an entry planted under
    its key (a valid header, 2 of its 3 invariant columns) is not used."""
    G = SO2eR3()
    rep = T(2, 0, G)
    truth = _solve(rep, "dense")
    assert truth.shape == (9, 3)
    assert not _entries(fresh_cache)
    entry = fresh_cache / f"{_key(rep, 'dense', 'basis')}.npz"
    _plant(entry, np.ascontiguousarray(truth[:, :2]))
    assert _solve(rep, "dense").shape == (9, 3)
    assert not entry.exists()  # removed, never replaced
