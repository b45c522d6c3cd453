"""Where the time goes, stage by stage, in two GPU findings that had no explanation: NumPyro's NUTS on all
rows did not finish within 120 s at N = 10^6 on an H100, and Coreset MCMC's time per iteration grew 2.2x
from N = 10^4 to 10^7 there while its loop holds no N-sized array.

`nuts` (one fresh process per N; vs_peers.py's logistic10 model and data, the data on the device):
- `init`: `numpyro.infer.util.initialize_model`, as `MCMC.run` calls it;
- `potential_closed`: `jit(value_and_grad)` of that potential, the data closed over (NumPyro's default,
  `jit_model_args=False`): compile, first and warm call;
- `potential_args`: the same log density written in JAX with the data as arguments of the program;
- `mcmc_short`, `mcmc_full`: `MCMC(NUTS)` with 2 vectorized chains, 20 + 20 and vs_peers' 400 + 400, with
  the number of leapfrog steps (`num_steps`), so that seconds per gradient follow from the difference.
Each stage prints its line as it ends, so a stage stopped at the time limit leaves those before it.

`loop` (one process): Coreset MCMC as published (M = 100, the hot start off) compiled for this backend at
N = 10^4 and 10^7. Records the compiled program's instructions whose shape has N rows (with the computation
they sit in) and the time per iteration as coreset_mcmc_scale.py measures it.

`--matmul-precision float32` runs the NumPyro parts with JAX_DEFAULT_MATMUL_PRECISION set: full float32
products instead of JAX's GPU default, TensorFloat-32 (investigations/tf32_emulation.py), the test of
whether TF32 is what makes NUTS's trees reach their maximum depth at large N.
`seeds`: NumPyro NUTS as vs_peers.py runs it (400 + 400, 2 vectorized chains), cold, one process per seed at
the first of --ns: seconds, leapfrog steps per draw, the adapted step size and inverse mass matrix.
`gather`: a loop of 2,000 draws of 200 random rows of an (N, 10) array (a dot and a sum each), random and
sorted row order, at --loop-ns: what Coreset MCMC's loop reads from the data, alone.

JAX's compile log is kept per stage. Writes OUT/gpu_stages.json and the compiled loops' HLO text,
OUT/loop_hlo_N.txt.gz.

    python benchmarks/investigations/gpu_stages.py --out OUT [--parts loop nuts seeds gather] [--ns 500000 1000000]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import common  # noqa: E402

NUTS_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import jax, jax.numpy as jnp, numpy as np
import vs_peers
from cold_start import LOG
scope = {}
exec(LOG + vs_peers.MODEL_CODE, scope)
n = int(sys.argv[1])
def emit(stage, **kw):
    print("STAGE" + json.dumps({"stage": stage, **kw, "log": scope["compile_log"]()}), flush=True)
    scope["start_log"]()
scope["start_log"]()
import logging
logging.getLogger("jax._src.interpreters.pxla").disabled = True  # its "Compiling ..." lines
X, y, _ = vs_peers.make_data("logistic", 10, n)
X, y = jax.device_put(X), jax.device_put(y)
jax.block_until_ready((X, y))
emit("data", seconds=time.perf_counter() - t0, device=str(jax.devices()[0]), jax=jax.__version__)
fn = scope["logistic"]
from numpyro.infer.util import initialize_model
t = time.perf_counter()
init = initialize_model(jax.random.key(0), fn, model_args=(X, y))
jax.block_until_ready(init.param_info.z)
emit("init", seconds=time.perf_counter() - t)

def timed(f, arg, *rest):
    t = time.perf_counter(); c = jax.jit(f).lower(arg, *rest).compile(); compile_s = time.perf_counter() - t
    t = time.perf_counter(); jax.block_until_ready(c(arg, *rest)); first = time.perf_counter() - t
    warm = []
    for _ in range(5):
        t = time.perf_counter(); jax.block_until_ready(c(arg, *rest)); warm.append(time.perf_counter() - t)
    return {"compile_s": compile_s, "first_s": first, "warm_s": float(np.median(warm))}

theta = jnp.zeros(10, jnp.float32)
closed = jax.value_and_grad(lambda u: init.potential_fn({"theta": u}))
emit("potential_closed", **timed(closed, theta))
def nlp(u, X, y):
    eta = X @ u
    return -(jnp.sum(y * eta - jnp.logaddexp(0.0, eta)) - 0.5 * jnp.sum(u ** 2))
emit("potential_args", **timed(jax.value_and_grad(nlp), theta, X, y))

from numpyro.infer import MCMC, NUTS
for stage, (w, d) in (("mcmc_short", (20, 20)), ("mcmc_full", (400, 400))):
    t = time.perf_counter()
    mcmc = MCMC(NUTS(fn), num_warmup=w, num_samples=d, num_chains=2, chain_method="vectorized",
                progress_bar=False)
    mcmc.run(jax.random.key(1), X, y, extra_fields=("num_steps",))
    steps = np.asarray(mcmc.get_extra_fields()["num_steps"])
    jax.block_until_ready(mcmc.get_samples()["theta"])
    # num_steps covers the kept draws; warm-up steps are not returned, so the per-gradient figure below uses
    # the sampling phase's mean steps for the whole run (warm-up trees are usually at least as deep)
    emit(stage, seconds=time.perf_counter() - t, warmup=w, draws=d, mean_steps=float(steps.mean()),
         max_steps=int(steps.max()))
"""

SEED_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import jax, numpy as np
import vs_peers
from numpyro.infer import MCMC, NUTS
scope = {}
exec(vs_peers.MODEL_CODE, scope)
n, seed = int(sys.argv[1]), int(sys.argv[2])
X, y, _ = vs_peers.make_data("logistic", 10, n)
X, y = jax.device_put(X), jax.device_put(y)
jax.block_until_ready((X, y))
t = time.perf_counter()
mcmc = MCMC(NUTS(scope["logistic"]), num_warmup=400, num_samples=400, num_chains=2, chain_method="vectorized",
            progress_bar=False)
mcmc.run(jax.random.key(seed), X, y, extra_fields=("num_steps",))
jax.block_until_ready(mcmc.get_samples()["theta"])
seconds = time.perf_counter() - t
steps = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["num_steps"])
adapt = mcmc.last_state.adapt_state
imm = np.asarray(adapt.inverse_mass_matrix[("theta",)] if isinstance(adapt.inverse_mass_matrix, dict)
                 else adapt.inverse_mass_matrix)
draws = np.asarray(mcmc.get_samples(group_by_chain=True)["theta"])
print("STAGE" + json.dumps({"stage": f"seed_{seed}", "N": n, "seed": seed, "seconds": seconds,
      "process_s": time.perf_counter() - t0, "mean_steps_per_chain": steps.mean(1).tolist(),
      "max_steps": int(steps.max()), "step_size": np.asarray(adapt.step_size).tolist(),
      "inverse_mass_diag_range_per_chain": [[float(v.min()), float(v.max())] for v in imm.reshape(2, -1)],
      "posterior_sd_range": [float(draws.std((0, 1)).min()), float(draws.std((0, 1)).max())]}), flush=True)
"""

GATHER_CHILD = r"""
import json, sys, time
import jax, jax.numpy as jnp, numpy as np
for n in map(int, sys.argv[1:]):
    X = jax.random.normal(jax.random.key(0), (n, 10))
    def run(key, X, sort):
        def body(i, carry):
            acc, k = carry
            k, sub = jax.random.split(k)
            idx = jax.random.randint(sub, (200,), 0, X.shape[0])
            idx = jnp.sort(idx) if sort else idx
            return acc + jnp.sum(jnp.tanh(X[idx] @ jnp.ones(10))), k
        return jax.lax.fori_loop(0, 2000, body, (0.0, key))[0]
    for sort in (False, True):
        f = jax.jit(run, static_argnums=2)
        jax.block_until_ready(f(jax.random.key(1), X, sort))
        ts = []
        for r in range(3):
            t = time.perf_counter(); jax.block_until_ready(f(jax.random.key(r + 2), X, sort)); ts.append(time.perf_counter() - t)
        print("STAGE" + json.dumps({"stage": f"gather_{n}_{'sorted' if sort else 'random'}", "N": n,
              "per_iteration_ms": 1e3 * float(np.median(ts)) / 2000}), flush=True)
    del X
"""

LOOP_CHILD = r"""
import json, re, sys, time
import jax, numpy as np
import coresets_jax as cj
import coreset_mcmc_scale
model = cj.models.logistic_regression()
import collections, gzip, os
for n in map(int, sys.argv[2:]):
    data = cj.data.synthetic_binary(jax.random.key(1), n, 10).train
    f = jax.jit(cj.coreset_fn(model, "coreset_mcmc", 100, num_iters=2000, hot_start=False, num_draws=10))
    text = f.lower(jax.random.key(0), data).compile().as_text()
    if sys.argv[1] != "-":  # not in a quick run
        with gzip.open(os.path.join(sys.argv[1], f"loop_hlo_{n}.txt.gz"), "wt") as fh:
            fh.write(text)
    hits, comp = [], None
    for line in text.splitlines():
        s = line.strip()
        if s.endswith("{") and " -> " in s and " = " not in s:  # a computation's header
            comp = s.split(" ")[1] if s.startswith("ENTRY") else s.split(" ")[0]
        if re.search(r"[\[,]%d[\],]" % n, s):
            hits.append([comp, s[:240]])
    bodies = set(re.findall(r"body=(%?[\w.-]+)", text))  # the while loops' bodies (fusions called there not followed)
    row = coreset_mcmc_scale.per_iteration(model, data, 100, 500, 1500, 2)
    print("STAGE" + json.dumps({"stage": f"loop_{n}", "N": n, "hlo_lines": len(text.splitlines()),
                                "n_sized": len(hits), "n_sized_in_loop_bodies": sum(1 for h in hits if h[0] in bodies),
                                "per_computation": collections.Counter(h[0] for h in hits).most_common(25),
                                "in_loop_bodies": [h for h in hits if h[0] in bodies][:40], **row}), flush=True)
    del data
"""


def run(code, args, timeout, matmul_precision=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), HERE, os.environ.get("PYTHONPATH", "")]),
               CORESETS_JAX_PROGRESS="0", CORESETS_JAX_NO_CACHE="1", PYTHONUNBUFFERED="1")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    if matmul_precision:  # JAX's default for float32 products (TF32 on recent NVIDIA GPUs when unset)
        env["JAX_DEFAULT_MATMUL_PRECISION"] = matmul_precision
    proc = subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdout=subprocess.PIPE, text=True,
                            env=env, cwd=os.path.dirname(HERE))
    t = time.perf_counter()
    try:
        out, _ = proc.communicate(timeout=timeout)
        status = f"exit {proc.returncode}"
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        status = f"stopped at its {timeout:.0f} s limit"
    stages = [json.loads(line[5:]) for line in out.splitlines() if line.startswith("STAGE")]
    for s in stages:
        print(json.dumps(s)[:1500], flush=True)
    return {"status": status, "wall_s": time.perf_counter() - t, "stages": stages}


def main(argv=None, *, quick=None, out_dir=None):
    def extra(p):
        p.add_argument("--ns", nargs="+", type=int, default=[500_000, 1_000_000])
        p.add_argument("--limit", type=float, default=240.0, help="seconds for each NUTS process")
        p.add_argument("--loop-ns", nargs="+", type=int, default=[10_000, 10_000_000])
        p.add_argument("--loop-limit", type=float, default=150.0)
        p.add_argument("--parts", nargs="+", default=["loop", "nuts"], help="loop, nuts, seeds, gather")
        p.add_argument("--seeds", nargs="+", type=int, default=[0, 2, 3])
        p.add_argument("--matmul-precision", default=None,
                       help="JAX_DEFAULT_MATMUL_PRECISION for the NumPyro runs, e.g. float32 (unset: JAX's default)")

    a = common.resolve(argv, quick, out_dir, __doc__, extra)
    if a.quick:  # a smoke run of every part at small N
        a.ns, a.loop_ns, a.seeds, a.parts = [5_000], [1_000, 5_000], [0], ["loop", "gather", "nuts", "seeds"]
    os.makedirs(a.out, exist_ok=True)
    stem = common.stem("gpu_stages", a.quick)
    result = {"environment": common.environment(), "argv": sys.argv[1:], "matmul_precision": a.matmul_precision}
    for part in a.parts:
        if part == "seeds":
            for seed in a.seeds:
                print(f"== NumPyro NUTS at N = {a.ns[0]:,}, seed {seed}, cold", flush=True)
                result[f"seed_{seed}"] = run(SEED_CHILD, [a.ns[0], seed], a.limit, a.matmul_precision)
        elif part == "gather":
            result["gather"] = run(GATHER_CHILD, a.loop_ns, a.loop_limit)
        elif part == "loop":
            print(f"== loop at N = {a.loop_ns}", flush=True)
            result["loop"] = run(LOOP_CHILD, ["-" if a.quick else a.out, *a.loop_ns], a.loop_limit)
        else:
            for n in a.ns:
                print(f"== NumPyro NUTS at N = {n:,}", flush=True)
                result[f"nuts_{n}"] = run(NUTS_CHILD, [n], a.limit, a.matmul_precision)
        common.write_json(result, a.out, stem)  # after every part: a call stopped later keeps what was measured
    print("wrote", os.path.join(a.out, stem + ".json"))
    return result


if __name__ == "__main__":
    main()
