"""Data and V sharded over a mesh with Explicit axes, `jax.make_mesh`'s default in JAX 0.10.

The package's programs are written for Auto axes (notes.md). Its public functions move concrete inputs on
Explicit axes onto the same mesh with Auto axes (`core.mesh.on_auto_mesh`), and its pure cores traced under
a user's `jax.jit` run under `jax.sharding.auto_axes` (`core.mesh.with_auto_axes`). Before, every one of
them raised `ShardingTypeError` or a mesh mismatch on such input. The multi-device checks run in a
subprocess with two forced host devices and compare with the same calls on unsharded data.
"""

import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from host_devices import run_with_host_devices

from coresets_jax.core import mesh as _mesh

SCRIPT = textwrap.dedent(r"""
    import json
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P
    import coresets_jax as cj

    assert jax.device_count() == 2
    mesh = jax.make_mesh((2,), ("n",))
    assert mesh.axis_types == (jax.sharding.AxisType.Explicit,)
    put = lambda a: jax.device_put(a, NamedSharding(mesh, P("n", *([None] * (a.ndim - 1)))))
    key = jax.random.key(0)
    model = cj.models.logistic_regression()
    ds = cj.data.synthetic_logistic(jax.random.key(1), 2000)
    plain = ds.train
    explicit = jax.tree.map(put, plain)
    out = {}
    diff = lambda a, b: float(np.max(np.abs(np.asarray(a) - np.asarray(b))))

    a0, a1 = cj.laplace(model, plain, key=key), cj.laplace(model, explicit, key=key)
    out["laplace"] = max(diff(a0.mean, a1.mean) / float(np.max(np.abs(np.asarray(a0.mean)))),
                         diff(a0.cov, a1.cov) / float(np.max(np.abs(np.asarray(a0.cov)))))
    thetas = a0.sample(key, 64)
    V0, V1 = cj.project(model, plain, thetas, key=key), cj.project(model, explicit, thetas, key=key)
    out["project"] = diff(V0, V1)
    out["project_devices"] = len(V1.sharding.device_set)
    Vx = put(V0)
    for method in ("giga", "omp"):
        c0, c1 = cj.build(V0, 30, method, key), cj.build(Vx, 30, method, key)
        out["build_" + method] = diff(c0.dense(2000), c1.dense(2000)) / float(np.max(np.asarray(c0.weights)))
    c0 = cj.coreset(model, plain, size=30, method="omp", key=key)
    c1 = cj.coreset(model, explicit, size=30, method="omp", key=key)
    # pi_hat's fit differs by rounding (reduced over two shards), so V does, and OMP's float32 path may take
    # another row at a near-tie: compare the two coresets' errors, not their rows
    out["coreset_errors"] = [float(c0.info["relative_error"]), float(c1.info["relative_error"])]
    p0 = cj.sample(model, plain, key, weights=c0, num_samples=200, num_warmup=200)
    p1 = cj.sample(model, explicit, key, weights=c1, num_samples=200, num_warmup=200)
    # the coreset's weights differ by rounding, and chains amplify any difference: compare in posterior sd
    out["sample_mean_z"] = diff(p0.samples.mean((0, 1)), p1.samples.mean((0, 1))) / float(np.min(p0.samples.std((0, 1))))
    k0, k1 = cj.certify(model, plain, c0, p0.samples), cj.certify(model, explicit, c1, p1.samples)
    out["certify_kl"] = [float(k0.kl), float(k1.kl)]

    # the pure cores under the user's own jit
    solve = cj.build_fn("omp", size=30)
    out["jit_build_fn"] = diff(jax.jit(solve)(Vx, key).dense(2000), solve(V0, key).dense(2000)) \
        / float(np.max(np.asarray(c0.weights)))
    out["jit_build_fn_all_gathers"] = jax.jit(solve).lower(Vx, key).as_text().count("all-gather")
    pf = cj.project_fn(model)
    Vj = jax.jit(pf)(key, explicit, thetas)
    out["jit_project_fn"] = diff(Vj, pf(key, plain, thetas))
    out["jit_project_fn_spec"] = str(Vj.sharding.spec)
    lf = cj.laplace_fn(model)
    out["jit_laplace_fn"] = diff(jax.jit(lf)(explicit, jnp.zeros(3)).mean, lf(plain, jnp.zeros(3)).mean) \
        / float(np.max(np.abs(np.asarray(a0.mean))))
    print("JSON" + json.dumps(out))
""")


@pytest.fixture(scope="module")
def two_devices():
    return run_with_host_devices(SCRIPT, 2)


@pytest.mark.slow
def test_public_functions_take_data_on_explicit_axes(two_devices):
    r = two_devices
    # the same float32 operations, reduced in another order over two shards
    assert r["laplace"] <= 1e-3 and r["project"] <= 1e-5, r  # relative to the largest entry
    assert r["project_devices"] == 2, r  # V stays split over the mesh
    assert r["build_giga"] <= 1e-3 and r["build_omp"] <= 1e-3, r  # the same V: the same coreset
    e0, e1 = r["coreset_errors"]
    assert 0 < e0 < 0.05 and 0.5 <= e1 / e0 <= 2, r
    assert r["sample_mean_z"] <= 0.5, r  # Monte Carlo error of a mean from 2 x 200 draws: ~0.07 sd
    assert r["certify_kl"][1] == pytest.approx(r["certify_kl"][0], rel=1e-2, abs=1e-6), r


@pytest.mark.slow
def test_pure_cores_under_a_users_jit_on_explicit_axes(two_devices):
    r = two_devices
    assert r["jit_build_fn"] <= 1e-3 and r["jit_build_fn_all_gathers"] == 0, r
    assert r["jit_project_fn"] <= 1e-5 and r["jit_project_fn_spec"].startswith("P('n'"), r
    assert r["jit_laplace_fn"] <= 1e-3, r


def test_on_auto_mesh_moves_only_concrete_arrays_on_explicit_axes():
    mesh = jax.make_mesh((1,), ("n",))
    auto = _mesh.auto_mesh(mesh)
    x = jax.device_put(jnp.arange(6.0).reshape(3, 2), jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("n")))
    y = jnp.ones(3)
    tree = {"x": x, "y": y, "name": "rows"}
    moved = _mesh.on_auto_mesh(tree)
    assert moved["x"].sharding.mesh.axis_types == (jax.sharding.AxisType.Auto,)
    assert moved["x"].sharding.spec == x.sharding.spec and moved["x"].sharding.mesh.devices.tolist() == auto.devices.tolist()
    np.testing.assert_array_equal(moved["x"], x)
    assert moved["y"] is y and moved["name"] == "rows"
    plain = {"y": y}
    assert _mesh.on_auto_mesh(plain) is plain  # nothing to move: the same object, no copy

    seen = []

    @jax.jit
    def traced(a):
        seen.append(_mesh.on_auto_mesh(a) is a)  # a tracer is never moved
        return a

    traced(x)
    assert seen == [True]
