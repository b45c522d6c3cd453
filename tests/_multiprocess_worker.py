"""One process of the two-process test (tests/test_multiprocess.py); not collected by pytest.

Usage: python _multiprocess_worker.py PORT PROCESS_ID OUT.npz. Both processes hold half of the rows
(`jax.make_array_from_process_local_data`), run `cj.project` and `cj.build` on the global arrays, and
process 0 also computes the single-process result on its own device and writes both to OUT.npz.
"""

import sys

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.config.update("jax_enable_x64", True)  # float64 only where asked (A-IHT II below)

port, process_id, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=process_id,
                           initialization_timeout=120)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import coresets_jax as cj  # noqa: E402

N, SIZE = 2000, 40
assert jax.process_count() == 2 and jax.device_count() == 2 and jax.local_device_count() == 1
key = jax.random.key(0)
model = cj.models.logistic_regression()
ds = cj.data.synthetic_logistic(jax.random.key(1), N)  # every process can make it; each keeps its half
X, y = np.asarray(ds.X), np.asarray(ds.y)
mine = slice(process_id * N // 2, (process_id + 1) * N // 2)
mesh = cj.sharding.make_data_mesh()
data = (jax.make_array_from_process_local_data(NamedSharding(mesh, P("data", None)), X[mine]),
        jax.make_array_from_process_local_data(NamedSharding(mesh, P("data")), y[mine]))
assert data[0].shape == (N, 3) and not data[0].is_fully_addressable
thetas = 0.3 * jax.random.normal(jax.random.key(2), (60, 3)) + jnp.array([3.0, 3.0, 0.0])

# A-IHT II's top-k steps amplify rounding (tests/test_sharding.py): compare it in float64, over 30 iterations.
OPTIONS = {"frank_wolfe": {}, "giga": {}, "omp": {}, "omp64": {}, "iht2": {"max_iter": 30}}
results = {}
for norm in ("fisher", "l2"):
    V = cj.project(model, data, thetas, norm=norm, key=key)
    results[f"V_{norm}"] = multihost_utils.process_allgather(V, tiled=True)
    results[f"V_{norm}_sharded"] = np.asarray(cj.sharding.leading_mesh(V) is not None)
    if process_id == 0:
        results[f"V_{norm}_single"] = np.asarray(cj.project(model, (X, y), thetas, norm=norm, key=key))
V = cj.project(model, data, thetas, norm="fisher", key=key)
V_single = cj.project(model, (X, y), thetas, norm="fisher", key=key) if process_id == 0 else None
for method, opts in OPTIONS.items():
    f64 = method in ("iht2", "omp64")
    Vm = V.astype(jnp.float64) if f64 else V
    cs = cj.build(Vm, SIZE, method.replace("64", ""), key=key, **opts)
    results[f"{method}_indices"] = multihost_utils.process_allgather(cs.indices, tiled=True)
    results[f"{method}_weights"] = multihost_utils.process_allgather(cs.weights, tiled=True)
    if process_id == 0:
        Vs = V_single.astype(jnp.float64) if f64 else V_single
        ref = cj.build(Vs, SIZE, method.replace("64", ""), key=key, **opts)
        results[f"{method}_indices_single"] = np.asarray(ref.indices)
        results[f"{method}_weights_single"] = np.asarray(ref.weights)
if process_id == 0:
    np.savez(out, **{k: np.asarray(v) for k, v in results.items()})
multihost_utils.sync_global_devices("done")
