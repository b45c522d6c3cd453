"""cj.save / cj.load: round trip, data fingerprint, atomic writes."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax import io as cj_io


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.normal(size=(300, 3)), jnp.float32)
    y = jnp.asarray(rng.choice([-1.0, 1.0], 300), jnp.float32)
    V = jnp.asarray(rng.normal(size=(300, 20)), jnp.float32) + 1.0
    cs = cj.build(V, 25, "giga")
    return (X, y), V, cs


def test_round_trip_keeps_arrays_and_metadata(tmp_path, problem):
    data, V, cs = problem
    path = tmp_path / "cs.npz"
    assert cj.save(cs, path, data=data, dataset="unit-test") == str(path)
    back = cj.load(path, data=data)
    np.testing.assert_array_equal(back.indices, cs.indices)
    np.testing.assert_array_equal(back.weights, cs.weights)
    assert back.method == "giga" and set(back.info) == set(cs.info)
    np.testing.assert_allclose(cj.relative_error(V, back), cj.relative_error(V, cs))
    meta = cj_io.read_metadata(path)
    assert meta["method"] == "giga" and meta["size"] == 25 and meta["num_points"] == cs.num_points
    assert meta["versions"]["jax"] == jax.__version__ and meta["extra"] == {"dataset": "unit-test"}
    assert [leaf["shape"] for leaf in meta["data"]] == [[300, 3], [300]]
    assert [leaf["dtype"] for leaf in meta["data"]] == ["float32", "float32"]


def test_fingerprint_mismatch_names_the_difference(tmp_path, problem):
    (X, y), _, cs = problem
    path = tmp_path / "cs.npz"
    cj.save(cs, path, data=(X, y))
    with pytest.raises(ValueError, match=r"\[0\].*shape \[300, 3\] in the file, \[299, 3\] given"):
        cj.load(path, data=(X[:-1], y))
    with pytest.raises(ValueError, match=r"\[1\].*different values"):
        cj.load(path, data=(X, y.at[7].set(-y[7])))
    with pytest.raises(ValueError, match="dtype float32 in the file, float16 given"):
        cj.load(path, data=(X.astype(jnp.float16), y))
    with pytest.raises(ValueError, match="leaves"):
        cj.load(path, data=X)
    assert cj.load(path).num_points == cs.num_points  # no data: no check


def test_failed_save_leaves_previous_file_and_no_temp(tmp_path, problem, monkeypatch):
    data, _, cs = problem
    path = tmp_path / "cs.npz"
    cj.save(cs, path, data=data)
    before = path.read_bytes()

    def disk_full(fileobj, arrays):
        fileobj.write(b"PK\x03\x04 half an archive")
        raise OSError("No space left on device")

    monkeypatch.setattr(cj_io, "_write_archive", disk_full)
    other = cj.Coreset(cs.indices[::-1], cs.weights, {}, "omp")
    with pytest.raises(OSError, match="No space"):
        cj.save(other, path, data=data)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["cs.npz"]
    assert cj.load(path, data=data).method == "giga"


def test_bad_paths_and_metadata(tmp_path, problem):
    data, _, cs = problem
    with pytest.raises(ValueError, match="directory"):
        cj.save(cs, tmp_path, data=data)
    with pytest.raises(ValueError, match="does not exist"):
        cj.save(cs, tmp_path / "nope" / "cs.npz")
    with pytest.raises(ValueError, match="JSON"):
        cj.save(cs, tmp_path / "cs.npz", note=object())
    assert not os.listdir(tmp_path)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable coreset"):
        cj.load(tmp_path / "junk.npz")
    with pytest.raises(ValueError, match="no such file"):
        cj.load(tmp_path / "missing.npz")


def test_settings_are_stored_as_json(tmp_path, problem):
    data, _, cs = problem
    settings = {"norm": "fisher", "num_features": 20, "key": jax.random.key(3), "time_s": 0.5,
                "options": {"max_iter": 10}}
    cs2 = cj.Coreset(cs.indices, cs.weights, cs.info, cs.method, settings)
    cj.save(cs2, tmp_path / "s.npz", data=data)
    meta = cj_io.read_metadata(tmp_path / "s.npz")
    assert meta["settings"]["norm"] == "fisher" and meta["settings"]["options"] == {"max_iter": 10}
    assert meta["settings"]["key"] == np.asarray(jax.random.key_data(jax.random.key(3))).tolist()
    json.dumps(meta)
    assert cj.load(tmp_path / "s.npz", data=data).settings["options"] == {"max_iter": 10}


def test_round_trip_keeps_the_size_path_and_the_certificate(tmp_path):
    """A coreset of `cj.coreset(..., tol=...)` carries a path (a list of dicts, no array) and a certificate:
    both come back from the file (before, `cj.load` refused the path's object array)."""
    rng = np.random.default_rng(1)
    y = jnp.asarray(rng.normal(size=(400, 2)) + 1.0, jnp.float32)
    model = cj.models.gaussian_mean(2)
    w = np.zeros(400)
    w[:50] = 8.0
    draws = rng.normal(size=(2, 100, 2)) * 0.07 + np.asarray(y[:50]).mean(axis=0)
    cert = cj.certify(model, y, jnp.asarray(w), draws)
    path_entries = [{"size": 16, "points": 16, "kl": 0.31, "kl_se": 0.02, "khat": 0.4, "seconds": 1.5},
                    {"size": 32, "points": 30, "kl": 0.05, "kl_se": 0.01, "khat": float("nan"), "seconds": 2.0}]
    cs = cj.Coreset(jnp.arange(50, dtype=jnp.int32), jnp.asarray(w[:50], jnp.float32),
                    {"path": path_entries, "relative_error": jnp.asarray(0.01), "chosen": "32"}, "omp")
    cs = cs.with_certificate(cert)
    cj.save(cs, tmp_path / "auto.npz", data=y)
    back = cj.load(tmp_path / "auto.npz", data=y)
    assert back.info["path"][0] == path_entries[0] and np.isnan(back.info["path"][1]["khat"])
    assert back.info["chosen"] == "32" and float(back.info["relative_error"]) == pytest.approx(0.01)
    got = back.certificate
    assert got is not None and got.model is None
    assert (got.verdict, got.kl, got.khat, got.ess, got.reff, got.probs) == \
        (cert.verdict, cert.kl, cert.khat, cert.ess, cert.reff, tuple(cert.probs))
    for name in ("weights", "log_ratio", "draws"):
        np.testing.assert_array_equal(getattr(got, name), getattr(cert, name))
    if cert.mean is not None:
        np.testing.assert_array_equal(got.mean, cert.mean)
    assert got.brief() == cert.brief()
