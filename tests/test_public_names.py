"""One path per public name: every public object of symkit is exported by exactly one package face (a package's
``__init__`` or a top-level module), and no two faces export different objects under one name."""

from __future__ import annotations

import importlib
import pkgutil
from collections import defaultdict

import symkit


def _faces() -> dict[str, dict[str, object]]:
    """``{face: {name: object}}`` for every package of symkit and every top-level module with an ``__all__``."""
    faces = {}
    for info in pkgutil.walk_packages(symkit.__path__, "symkit."):
        parts = info.name.split(".")[1:]
        if any(p.startswith("_") for p in parts) or not (info.ispkg or len(parts) == 1):
            continue
        module = importlib.import_module(info.name)
        if hasattr(module, "__all__"):
            faces[info.name] = {name: getattr(module, name) for name in module.__all__}
    return faces


def _is_shared_constant(obj: object) -> bool:
    """Small immutable values (ints, strings, tuples of them) are equal by value, not identity: not counted."""
    return isinstance(obj, (int, float, str, bytes, bool, type(None)))


def test_every_public_object_has_one_face():
    where = defaultdict(set)
    for face, names in _faces().items():
        for name, obj in names.items():
            if not _is_shared_constant(obj):
                where[id(obj)].add(f"{face}.{name}")
    twice = sorted(sorted(paths) for paths in where.values() if len(paths) > 1)
    assert not twice, f"objects exported by more than one face: {twice}"


def test_no_name_means_two_things():
    meanings = defaultdict(dict)
    for face, names in _faces().items():
        for name, obj in names.items():
            meanings[name][face] = obj
    clashes = {name: sorted(faces) for name, faces in meanings.items()
               if len({id(o) for o in faces.values()}) > 1}
    assert not clashes, f"one name, different objects: {clashes}"


def test_the_faces_are_the_packages():
    faces = _faces()
    for package in ("symkit.groups", "symkit.reps", "symkit.actions", "symkit.nn", "symkit.measure", "symkit.marglik",
                    "symkit.pacbayes", "symkit.discover", "symkit.dynamics", "symkit.train", "symkit.testing"):
        assert package in faces and faces[package], package
