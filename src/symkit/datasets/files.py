"""Finding the user's data files: the data folder (an argument, else ``$SYMKIT_DATA``) and
the published checksums of the original archives.

symkit never downloads data. A file that carries the name and the exact size of a published archive (MNIST's and
Fashion-MNIST's ``.gz`` files, CIFAR-10's ``cifar-10-binary.tar.gz``) is checked against the archive's published MD5,
so a damaged copy is named instead of silently read. Files of other sizes (a subset the user made, a recompressed
copy) carry no known checksum; their own format checks apply (the idx header's declared size, whole CIFAR records).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["KNOWN_ARCHIVES", "check_known_archive", "data_dir_of", "md5_of"]

#: (folder kind, file name) -> (size in bytes, MD5) of the archives as their authors publish them
KNOWN_ARCHIVES: dict[tuple[str, str], tuple[int, str]] = {
    ("mnist", "train-images-idx3-ubyte.gz"): (9_912_422, "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
    ("mnist", "train-labels-idx1-ubyte.gz"): (28_881, "d53e105ee54ea40749a09fcbcd1e9432"),
    ("mnist", "t10k-images-idx3-ubyte.gz"): (1_648_877, "9fb629c4189551a2d022fa330f9573f3"),
    ("mnist", "t10k-labels-idx1-ubyte.gz"): (4_542, "ec29112dd5afa0611ce80d1b7f02629c"),
    ("fashion-mnist", "train-images-idx3-ubyte.gz"): (26_421_880, "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
    ("fashion-mnist", "train-labels-idx1-ubyte.gz"): (29_515, "25c81989df183df01b3e8a0aad5dffbe"),
    ("fashion-mnist", "t10k-images-idx3-ubyte.gz"): (4_422_102, "bef4ecab320f06d8554ea6380940ec79"),
    ("fashion-mnist", "t10k-labels-idx1-ubyte.gz"): (5_148, "bb300cfdad3c16e7a12a480ee83cd310"),
    ("cifar10", "cifar-10-binary.tar.gz"): (170_052_171, "c32a1d4ab5d03f1284b67883e8d87530"),
}


def data_dir_of(data_dir: str | os.PathLike | None = None) -> Path:
    """``data_dir``, else ``$SYMKIT_DATA``; raises ``ValueError`` when neither is set and ``FileNotFoundError`` when
    the folder does not exist. (``symkit reproduce --data-dir`` passes its folder on as ``data_dir``.)"""
    chosen = data_dir if data_dir not in (None, "") else os.environ.get("SYMKIT_DATA")
    if not chosen:
        raise ValueError("no data directory: pass data_dir, use --data-dir, or set SYMKIT_DATA to the folder holding "
                         "the files")
    path = Path(chosen)
    if not path.is_dir():
        raise FileNotFoundError(f"data directory {str(path)!r} does not exist or is not a folder")
    return path


def md5_of(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """The MD5 of a file, read in chunks."""
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def check_known_archive(kind: str, path: str | os.PathLike) -> None:
    """Raise ``ValueError`` naming ``path`` when it has the name and size of a published archive of ``kind`` but not
    its MD5 (a damaged or altered copy); files of any other name or size pass (module docstring)."""
    path = Path(path)
    known = KNOWN_ARCHIVES.get((kind, path.name))
    if known is None or path.stat().st_size != known[0]:
        return
    got = md5_of(path)
    if got != known[1]:
        raise ValueError(f"{path}: MD5 {got} differs from the published {known[1]} of {path.name} ({kind}); the file "
                         "is damaged: copy it again")
