"""One process of the two-process test (tests/test_multiprocess.py); not collected by pytest.

Usage: python _multiprocess_worker.py PORT PROCESS_ID OUT.npz. Both processes hold half of the rows
(`jax.make_array_from_process_local_data`), run `cj.project` and `cj.build` on the global arrays, and
process 0 also computes the single-process result on its own device and writes both to OUT.npz.
"""

import sys

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")

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

# float32 as by default (x64 off) for FW, GIGA and OMP. A-IHT II's top-k steps amplify rounding
# (tests/test_sharding.py), so it is compared in float64 over 30 iterations, and OMP in float64 too.
RUNS = [("frank_wolfe", "frank_wolfe", False, {}), ("giga", "giga", False, {}), ("omp", "omp", False, {}),
        ("omp64", "omp", True, {}), ("iht2", "iht2", True, {"max_iter": 30})]
results = {}
for norm in ("fisher", "l2"):
    V = cj.project(model, data, thetas, norm=norm, key=key)
    results[f"V_{norm}"] = multihost_utils.process_allgather(V, tiled=True)
    results[f"V_{norm}_sharded"] = np.asarray(cj.sharding.leading_mesh(V) is not None)
    if process_id == 0:
        results[f"V_{norm}_single"] = np.asarray(cj.project(model, (X, y), thetas, norm=norm, key=key))
V = cj.project(model, data, thetas, norm="fisher", key=key)
V_single = cj.project(model, (X, y), thetas, norm="fisher", key=key) if process_id == 0 else None
for name, method, f64, opts in RUNS:
    with jax.enable_x64(f64):
        Vm = V.astype(jnp.float64) if f64 else V
        cs = cj.build(Vm, SIZE, method, key=key, **opts)
        results[f"{name}_indices"] = multihost_utils.process_allgather(cs.indices, tiled=True)
        results[f"{name}_weights"] = multihost_utils.process_allgather(cs.weights, tiled=True)
        if process_id == 0:
            ref = cj.build(V_single.astype(jnp.float64) if f64 else V_single, SIZE, method, key=key, **opts)
            results[f"{name}_indices_single"] = np.asarray(ref.indices)
            results[f"{name}_weights_single"] = np.asarray(ref.weights)
if process_id == 0:
    np.savez(out, **{k: np.asarray(v) for k, v in results.items()})
multihost_utils.sync_global_devices("done")
