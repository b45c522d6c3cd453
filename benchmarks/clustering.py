"""HC §7: directional clustering with a vMF mixture (K = 6, tau = 50), FW Hilbert coresets against Rand (Fig. 5).

Data: `cj.data.synthetic_vmf`, 6 equally weighted components at the axis poles of S^2 (HC §7.2), N train +
1,000 test. pi_hat: EM, then the independent conditionals of Eq. 7.6 (`cj.models.vmf_inference.conditional_pihat`);
J = 500 Fisher features (Eq. 5.7, autodiff gradients in the ambient coordinates of theta = [mu, omega]).
Methods: Rand (uniform subsampling) and FW (HC Algorithm 2), M in {10, 50, 100, 500, 1000}. Posterior
inference: the Gibbs sampler on weighted data (Eq. 7.7 then Eq. 7.6, `cj.models.vmf_inference.gibbs`), started at
the full-data EM fit (which fixes the component labelling), with fewer sweeps than the paper's 100,000.

Metrics (HC §7.3): negative test log-likelihood shifted by its maximum possible value (log C_3(tau) + tau,
the density's peak) and divided by the full-data value; W1 between the coreset's and a full-data run's
samples of theta = [mu, omega], divided by the median pairwise W1 of independent full-data runs; compute
time normalised by the full-data Gibbs time.

Batching: the projections of all trials are one vmapped call; FW of all trials one `jit(vmap)`; the Gibbs
chains of both methods, all trials and all M are one `jit(vmap)` call, coresets padded to the largest M
with zero-weight rows (which Eq. 7.7 ignores), so a single compilation serves every M.

    python benchmarks/clustering.py [--trials 3] [--quick]

writes benchmarks/results/clustering.{json,png} (clustering_quick.* with --quick).
"""

from __future__ import annotations

import functools
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]  # this checkout's coresets_jax, then common
import common  # noqa: E402

import coresets_jax as cj  # noqa: E402
from coresets_jax.models import vmf, vmf_inference  # noqa: E402

K, DIM, TAU = 6, 3, 50.0
MODEL = vmf.vmf_mixture(K, DIM, TAU)


@functools.lru_cache(maxsize=None)
def projector(J):
    def project(key, x, pihat):
        k_theta, k_coord = jax.random.split(key)
        thetas = pihat.sample(k_theta, J)
        return cj.project_fn(MODEL, "fisher", dtype=jnp.float32, chunk_size=1024)(k_coord, x, thetas)

    return jax.jit(jax.vmap(project, in_axes=(0, None, None)))


@functools.lru_cache(maxsize=None)
def constructor(method, M):
    if method == "rand":
        def solve(V, key):
            n = V.shape[0]
            return jax.random.randint(key, (M,), 0, n), jnp.full((M,), n / M, jnp.float32)
    else:
        solve = common.solver_fn(method, M)
    return jax.jit(jax.vmap(solve))


@functools.lru_cache(maxsize=None)
def gibbs_batched(num_samples, num_warmup, unit_counts):
    def chain(key, x, w, init_mu, init_omega):
        return vmf_inference.gibbs_core(key, x, w, init_mu, init_omega, TAU, num_samples, num_warmup, 1, unit_counts)
    return jax.jit(jax.vmap(chain, in_axes=(0, 0, 0, None, None)))


def flat(draws):
    return np.asarray(vmf.pack(vmf.VMFParams(draws.mu, draws.omega)))


def run(n, trials, Ms, J, ns, nw, full_runs, w1_points):
    ds = cj.data.synthetic_vmf(jax.random.key(75), n=n, num_test=1000, tau=TAU)
    x, test = ds.X, ds.Xt
    t0 = time.perf_counter()
    pihat = vmf_inference.conditional_pihat(jax.random.key(1), x, K, TAU)
    fit = vmf_inference.em(jax.random.key(1), x, None, K, TAU)
    pihat_s = time.perf_counter() - t0
    init = fit.params
    # Full-data Gibbs: `full_runs` independent chains (reference samples and the W1 normalisation).
    fkeys = jax.random.split(jax.random.key(2), full_runs)
    tm = common.time_fn(gibbs_batched(ns, nw, True), fkeys, jnp.broadcast_to(x, (full_runs,) + x.shape),
                        jnp.ones((full_runs, n), x.dtype), init.mu, init.omega, repeats=1)
    full = flat(tm["output"])
    full_s = tm["median_s"] / full_runs
    tll_max = float(vmf.log_vmf_normalizer(TAU, DIM) + TAU)
    tll_full = float(np.median([cj.metrics.test_log_likelihood(MODEL, test, s) for s in full]))
    w1_ref = cj.metrics.median_pairwise_wasserstein1(list(full), max_points=w1_points)
    res = {"N": n, "K": K, "tau": TAU, "J": J, "M": list(Ms), "trials": trials,
           "gibbs": {"num_samples": ns, "num_warmup": nw, "paper": "100,000 steps, 50,000 warm-up, thinning 5"},
           "full_runs": full_runs, "pihat_s": pihat_s, "full_gibbs_s_per_run": full_s,
           "full_gibbs_compile_s": tm["compile_s"], "test_ll_full": tll_full, "test_ll_max": tll_max,
           "w1_reference": w1_ref, "em_mode_error_rad": float(np.mean(np.arccos(np.clip(
               np.max(np.concatenate([np.eye(3), -np.eye(3)]) @ np.asarray(init.mu).T, 1), -1, 1))))}
    tkeys = jax.random.split(jax.random.key(3), trials)
    tp = common.time_fn(projector(J), tkeys, x, pihat, repeats=0)
    V = tp["output"]
    proj_s = tp["compile_s"] / trials
    Mmax = max(Ms)
    rows, ws, tags, build = [], [], [], {}
    for method, label in (("rand", "Rand"), ("frank_wolfe", "FW")):
        for M in Ms:
            tc = common.time_fn(constructor(method, M), V, jax.random.split(jax.random.key(M), trials), repeats=1)
            idx, w = tc["output"]
            build[(label, M)] = tc["median_s"] / trials + (0.0 if method == "rand" else pihat_s + proj_s)
            pad = Mmax - M
            rows.append(jnp.pad(idx, ((0, 0), (0, pad))))
            ws.append(jnp.pad(w.astype(x.dtype), ((0, 0), (0, pad))))
            tags += [(label, M, t, int(np.sum(np.asarray(w[t]) > 0))) for t in range(trials)]
    idx, w = jnp.concatenate(rows), jnp.concatenate(ws)
    gkeys = jax.random.split(jax.random.key(4), idx.shape[0])
    tg = common.time_fn(gibbs_batched(ns, nw, False), gkeys, x[idx], w, init.mu, init.omega, repeats=0)
    draws = flat(tg["output"])
    gibbs_s = tg["compile_s"] / idx.shape[0]  # one call, compilation included, per chain (an upper bound)
    out = {"nll_normalized": {}, "w1_normalized": {}, "time_normalized": {}, "num_points": {}}
    for label in ("Rand", "FW"):
        for M in Ms:
            sel = [i for i, (lab, m, _, _) in enumerate(tags) if lab == label and m == M]
            nll = [float((tll_max - cj.metrics.test_log_likelihood(MODEL, test, draws[i])) / (tll_max - tll_full))
                   for i in sel]
            w1 = [float(cj.metrics.normalized_wasserstein1(
                      cj.metrics.wasserstein1(draws[i], full[j % full_runs], max_points=w1_points), w1_ref))
                  for j, i in enumerate(sel)]
            out["nll_normalized"].setdefault(label, {})[str(M)] = common.summary(nll)
            out["w1_normalized"].setdefault(label, {})[str(M)] = common.summary(w1)
            out["time_normalized"].setdefault(label, {})[str(M)] = (build[(label, M)] + gibbs_s) / full_s
            out["num_points"].setdefault(label, {})[str(M)] = float(np.median([tags[i][3] for i in sel]))
    res.update(out)
    res["coreset_gibbs_s_per_chain_upper"] = gibbs_s
    return res, (x, w[:1], idx[:1], init, ns, nw)


def plot(res, out_dir, stem):
    fig, axes = common.figure(1, 3, size=(4.4, 3.6))
    for label, ls in (("FW", "-"), ("Rand", "--")):
        Ms = res["M"]
        axes[0, 0].loglog(Ms, [res["w1_normalized"][label][str(M)]["median"] for M in Ms], ls, marker="o",
                          label=label)
        tt = [res["time_normalized"][label][str(M)] for M in Ms]
        axes[0, 1].loglog(tt, [res["w1_normalized"][label][str(M)]["median"] for M in Ms], ls, marker="o",
                          label=label)
        axes[0, 2].loglog(tt, [max(res["nll_normalized"][label][str(M)]["median"], 1e-3) for M in Ms], ls,
                          marker="o", label=label)
    axes[0, 0].set_xlabel("M")
    axes[0, 0].set_ylabel("W1 / full-data W1")
    axes[0, 0].set_title(f"HC Fig. 5: vMF mixture, N = {res['N']}", fontsize=9)
    axes[0, 1].set_xlabel("time / full-data Gibbs time")
    axes[0, 1].set_ylabel("W1 / full-data W1")
    axes[0, 2].set_xlabel("time / full-data Gibbs time")
    axes[0, 2].set_ylabel("normalised NLL (1 = full data)")
    for a in axes[0]:
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=8)
    common.save_figure(fig, out_dir, stem)


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    args = common.resolve(argv, quick, out_dir, __doc__)
    if args.quick:
        n, trials, Ms, J, ns, nw, full_runs, w1_points, batch = 300, args.trials or 2, (10,), 50, 20, 20, 2, 50, 2
    else:
        # 3 trials (paper: 50), 3 sizes and 200 + 200 sweeps (paper: 100,000): the multinomial label draws of
        # Eq. 7.7 dominate on the shared CPU.
        n, trials, Ms, J = 9000, args.trials or 3, (10, 100, 1000), 500
        ns, nw, full_runs, w1_points, batch = 200, 200, 4, 200, 4
    t0 = time.perf_counter()
    res, (x, w, idx, init, ns_, nw_) = run(n, trials, Ms, J, ns, nw, full_runs, w1_points)
    # Gibbs chains batched against a loop of single chains (one FW coreset of the largest M); not in the
    # quick (CI) run, where its two extra compilations would dominate.
    rows = x[idx[0]]

    def chain(key):
        return vmf_inference.gibbs_core(key, rows, w[0], init.mu, init.omega, TAU, ns_, nw_, 1, False).mu

    sp = None if args.quick else common.batched_speedup(chain, jax.random.split(jax.random.key(9), batch))
    res = {"experiment": "HC §7 directional clustering (Fig. 5)", "quick": bool(args.quick), "paper_trials": 50,
           "environment": common.environment(), **res,
           "batched_speedup": {} if sp is None else {
               f"gibbs on a {max(Ms)}-slot coreset": {k: v for k, v in sp.items() if k != "output"}},
           "wall_s": time.perf_counter() - t0}
    print(f"  W1/ref at M = {Ms[-1]}: FW {res['w1_normalized']['FW'][str(Ms[-1])]['median']:.2f}, Rand "
          f"{res['w1_normalized']['Rand'][str(Ms[-1])]['median']:.2f}"
          + ("" if sp is None else f"; batched vs loop {sp['speedup']:.2f}x"),
          flush=True)
    stem = common.stem("clustering", args.quick)
    common.write_json(res, args.out, stem)
    plot(res, args.out, stem)
    return res


if __name__ == "__main__":
    main()
