"""Saving coresets: `save(cs, path, data=data)` and `load(path, data=data)`.

One `.npz` file holds the arrays (`indices`, `weights`, and each `info` entry as `info.NAME`) and, beside them
in the same archive, a JSON document `metadata`: the method and its settings (size, options, norm, J, key,
construction time when the construction recorded them), the number of points, the relative error when
known, the package, JAX and NumPy versions, the time of saving, any extra metadata the caller passes, and a
fingerprint of the data (for each leaf of the data pytree: its path, shape, dtype and a BLAKE2b hash of its
bytes). `load` given data checks that fingerprint and refuses a file built on other data.

Writes are atomic: the archive goes to a temporary file in the target's folder, is flushed to disk, and then
`os.replace`s the target. A save that fails midway leaves the previous file as it was and no temporary
file behind. The archive holds no Python objects (it loads with `allow_pickle=False`).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import platform
import tempfile
import zipfile
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..core.coreset import Coreset
from ..core.rows import take_rows

__all__ = ["FORMAT", "atomic_write", "digest", "fingerprint", "load", "read_metadata", "save"]

FORMAT = "coresets_jax.coreset/1"
_INFO_PREFIX = "info."


def _jsonable(value: Any) -> Any:
    """Plain JSON values for settings: arrays to lists, PRNG keys to their key data, the rest to str."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, (jax.Array, np.ndarray, np.generic)):
        if isinstance(value, jax.Array) and jnp.issubdtype(value.dtype, jax.dtypes.prng_key):
            value = jax.random.key_data(value)
        array = np.asarray(value)
        return array.item() if array.ndim == 0 else array.tolist()
    if isinstance(value, type) or callable(value):
        return getattr(value, "__name__", str(value))
    return str(value)


def fingerprint(data: Any) -> list[dict]:
    """For each leaf of the data pytree: {"leaf", "shape", "dtype", "blake2b"} (hash of its C-order bytes)."""
    leaves, _ = jax.tree_util.tree_flatten_with_path(data)
    if not leaves:
        raise ValueError("data: the data pytree has no arrays to fingerprint")
    out = []
    for path, leaf in leaves:
        array = np.ascontiguousarray(np.asarray(leaf))
        out.append({"leaf": jax.tree_util.keystr(path) or "data", "shape": list(array.shape),
                    "dtype": str(array.dtype),
                    "blake2b": hashlib.blake2b(array.tobytes(), digest_size=16).hexdigest()})
    return out


def _rows_on_host(leaf: Any, picks: np.ndarray) -> np.ndarray:
    """`leaf[picks]` as NumPy. A host-resident array is read in place (on the CPU a jax.Array is a view:
    no copy, no compiled gather); on an accelerator only the picked rows cross to the host."""
    if not isinstance(leaf, jax.Array) or all(d.platform == "cpu" for d in leaf.devices()):
        return np.asarray(leaf)[picks]
    return np.asarray(_take(leaf, jnp.asarray(picks)))


@jax.jit
def _take(leaf, picks):
    return take_rows(leaf, picks)


def digest(data: Any, rows: int = 64) -> str:
    """A cheap identity of a data pytree: every leaf's shape and dtype, and a BLAKE2b hash of `rows` evenly
    spaced rows (a few KiB read, whatever N is, and no gather of a sharded array). Unlike `fingerprint` it
    can miss a change confined to other rows; it catches a coreset used with other data of the same N."""
    hasher = hashlib.blake2b(digest_size=8)
    for leaf in jax.tree_util.tree_leaves(data):
        n = int(np.shape(leaf)[0]) if np.ndim(leaf) else 0
        picks = np.unique(np.linspace(0, max(n - 1, 0), num=min(rows, max(n, 1))).astype(np.int64))
        sample = np.ascontiguousarray(_rows_on_host(leaf, picks) if n else np.asarray(leaf))
        hasher.update(repr((tuple(np.shape(leaf)), str(sample.dtype))).encode())
        hasher.update(sample.tobytes())
    return hasher.hexdigest()


def _versions() -> dict:
    from .. import __version__
    return {"coresets_jax": __version__, "jax": jax.__version__, "numpy": np.__version__,
            "python": platform.python_version()}


def _error_of(cs: Coreset) -> Optional[float]:
    error = cs.info.get("relative_error") if isinstance(cs.info, dict) else None
    if error is not None and np.ndim(error) == 0:
        return float(error)
    return None


def _write_archive(fileobj, arrays: dict) -> None:
    np.savez(fileobj, **arrays)


def save(cs: Coreset, path: str | os.PathLike, data: Any = None, **metadata) -> str:
    """Write `cs` to `path` (an `.npz` archive with its metadata), atomically.

    Args:
      cs: a `Coreset` (batched ones too: the arrays keep their batch axes).
      path: the file to write; it is replaced only once the new archive is complete.
      data: the data pytree the coreset indexes; its fingerprint is stored so `load` can check it.
      **metadata: extra JSON-serialisable entries to store (e.g. `dataset="biketrips"`).

    Array entries of `cs.info` are stored as arrays, the others (the automatic size's `path`) as JSON, and
    `cs.certificate`, when there is one, with all its fields but the model.

    Returns:
      The path written.
    """
    if not isinstance(cs, Coreset):
        raise ValueError(f"cs: expected a cj.Coreset, got {type(cs).__name__}")
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"path: {path!r} is a directory; give a file name such as coreset.npz")
    if not os.path.isdir(folder):
        raise ValueError(f"path: the folder {folder!r} does not exist")
    info = cs.info if isinstance(cs.info, dict) else {}
    arrays = {"indices": np.asarray(cs.indices), "weights": np.asarray(cs.weights)}
    info_json = {}  # entries that are no array (the automatic size's path: a list of dicts) go as JSON
    for name, value in info.items():
        array = _plain_array(value)
        if array is None:
            info_json[str(name)] = _jsonable(value)
        else:
            arrays[_INFO_PREFIX + str(name)] = array
    certificate = _certificate_entries(getattr(cs, "certificate", None), arrays)
    settings = getattr(cs, "settings", None) or {}
    try:
        extra = json.loads(json.dumps(metadata))
    except (TypeError, ValueError) as err:
        raise ValueError(f"metadata: extra entries must be JSON-serialisable: {err}") from None
    document = {
        "format": FORMAT,
        "method": cs.method,
        "size": cs.capacity,
        "num_points": _jsonable(cs.num_points),
        "relative_error": _error_of(cs),
        "settings": _jsonable(dict(settings)),
        "versions": _versions(),
        "saved_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "data": None if data is None else fingerprint(data),
        "extra": extra,
        "info_json": info_json,
        "certificate": certificate,
    }
    arrays["metadata"] = np.asarray(json.dumps(document))
    atomic_write(path, lambda f: _write_archive(f, arrays))
    return path


_CERTIFICATE_PREFIX = "certificate."


def _plain_array(value: Any) -> Optional[np.ndarray]:
    """`value` as a numeric or boolean array (what `load` turns back into a `jax.Array`), or None (strings,
    object arrays: stored as JSON)."""
    if isinstance(value, jax.Array) and jnp.issubdtype(value.dtype, jax.dtypes.prng_key):
        value = jax.random.key_data(value)
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):  # ragged lists and the like
        return None
    return array if array.dtype.kind in "biufc" else None


def _certificate_entries(cert: Any, arrays: dict) -> Optional[dict]:
    """A `cj.Certificate`'s fields: arrays into `arrays` (prefixed), the rest as JSON; its model is not
    stored (a function)."""
    if cert is None:
        return None
    fields = {}
    for field in dataclasses.fields(cert):
        value = getattr(cert, field.name)
        if field.name == "model":
            continue
        if isinstance(value, (np.ndarray, jax.Array)):
            arrays[_CERTIFICATE_PREFIX + field.name] = np.asarray(value)
        else:
            fields[field.name] = _jsonable(value)
    return {"class": type(cert).__name__, "fields": fields}


def _certificate_from(entry: Optional[dict], archive) -> Any:
    """The `cj.Certificate` that `_certificate_entries` stored, or None."""
    if not entry:
        return None
    from ..certification import Certificate
    known = {field.name for field in dataclasses.fields(Certificate)}
    values = {name: value for name, value in entry["fields"].items() if name in known}
    for key in archive.files:
        if key.startswith(_CERTIFICATE_PREFIX) and key[len(_CERTIFICATE_PREFIX):] in known:
            values[key[len(_CERTIFICATE_PREFIX):]] = np.asarray(archive[key])
    if "probs" in values:
        values["probs"] = tuple(values["probs"])
    return Certificate(**values)


def atomic_write(path: str | os.PathLike, write) -> None:
    """Write a file atomically: `write(f)` into a temporary file in the same folder, fsync, then
    `os.replace`. A failure midway leaves the previous file intact and no temporary file behind.

    The one atomic write of the package: saved coresets, streaming checkpoints, the CLI's results.json and
    the benchmarks' JSON all go through it. `f` is opened in binary mode."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def read_metadata(path: str | os.PathLike) -> dict:
    """The JSON metadata stored with a saved coreset (no check of the data)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"path: no such file {path!r}")
    try:
        with np.load(path, allow_pickle=False) as archive:
            text = str(archive["metadata"]) if "metadata" in archive else None
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as err:
        raise ValueError(f"path: {path!r} is not a readable coreset file: {err}") from None
    if text is None:
        raise ValueError(f"path: {path!r} is not a saved coreset (no metadata)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"path: {path!r} has unreadable metadata: {err}") from None


def _compare(stored: list[dict], given: list[dict]) -> list[str]:
    if len(stored) != len(given):
        return [f"the file's data had {len(stored)} leaves ({[s['leaf'] for s in stored]}), the given data "
                f"has {len(given)} ({[g['leaf'] for g in given]})"]
    problems = []
    for s, g in zip(stored, given):
        for field in ("leaf", "shape", "dtype"):
            if s[field] != g[field]:
                problems.append(f"leaf {s['leaf']}: {field} {s[field]} in the file, {g[field]} given")
        if not problems and s["blake2b"] != g["blake2b"]:
            problems.append(f"leaf {s['leaf']}: same shape and dtype but different values (hash "
                            f"{s['blake2b'][:8]}... in the file, {g['blake2b'][:8]}... given)")
    return problems


def load(path: str | os.PathLike, data: Any = None) -> Coreset:
    """Read a coreset written by `save`.

    Args:
      path: the `.npz` file.
      data: the data pytree to use it with. When given, its fingerprint must match the one stored, or a
        `ValueError` names each leaf whose shape, dtype or values differ.

    Returns:
      The `Coreset` (its `settings`, when the class has them, are restored from the metadata), with its
      `info` and its `certificate` (whose `model` is None) as saved.
    """
    document = read_metadata(path)
    if document.get("format") != FORMAT:
        raise ValueError(f"path: {os.fspath(path)!r} has format {document.get('format')!r}, expected {FORMAT!r}")
    if data is not None:
        if document.get("data") is None:
            raise ValueError(f"data: {os.fspath(path)!r} was saved without a data fingerprint, so it cannot "
                             "be checked; load it without data=")
        problems = _compare(document["data"], fingerprint(data))
        if problems:
            raise ValueError("data: differs from the data the coreset was built on: " + "; ".join(problems))
    with np.load(os.fspath(path), allow_pickle=False) as archive:
        indices = jnp.asarray(archive["indices"])
        weights = jnp.asarray(archive["weights"])
        info = {key[len(_INFO_PREFIX):]: jnp.asarray(archive[key]) for key in archive.files
                if key.startswith(_INFO_PREFIX)}
        info.update(document.get("info_json") or {})
        certificate = _certificate_from(document.get("certificate"), archive)
    cs = Coreset(indices, weights, info, document.get("method", ""))
    if "settings" in {f.name for f in dataclasses.fields(Coreset)}:
        cs = dataclasses.replace(cs, settings=document.get("settings") or {})
    if certificate is not None:
        cs = cs.with_certificate(certificate)
    return cs
