"""What the published Sparse VI (`method="sparse_vi"`, Campbell & Beronov 2019 with the settings IHT §5 uses:
S = 100 draws, 100 weight iterations per added point, step 1/t) costs, beside OMP at the same size.

Without a closed-form posterior, every weight iteration draws pi_w with a fresh NUTS chain (100 warm-up steps,
100 draws) on the current coreset, so the cost grows as size x 100 chains, each as long as NUTS's
trajectories on that coreset posterior, plus size x 100 passes over the N rows at 100 draws. The IHT paper
ran it on 500-row subsamples for this reason (iht-coresets.md §5). Each cell runs in a fresh process
(compilation included) with a wall-clock cap, and reports:
  - the construction's seconds (or that it passed the cap);
  - the certificate of the coreset (`cj.certify` on 2 x (500 + 500) NUTS draws): KL estimate and verdict;
  - the same for OMP at the same size, in the same process.
Problems: phishing and ds1 (logistic regression, the shared 500-row files, as in IHT §5) and a negative
binomial regression written as a NumPyro model (N = 2,000, D = 5: a dispersion parameter with a log link,
the case where the published method ran for over 25 minutes at N = 5,000, M = 50).

    python benchmarks/investigations/sparse_vi_cost.py [--sizes 10 20] [--cap 900]
Writes results/sparse_vi_cost.{json,png} (*_quick: phishing at M = 3, its Sparse VI with 5 weight iterations).
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import common  # noqa: E402

PROBLEMS = ("phishing", "ds1", "negbin")

CHILD = r"""
import json, os, sys, time, warnings
import jax, jax.numpy as jnp, numpy as np
import coresets_jax as cj
name, size, iters, data_dir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if name == "negbin":
    import numpyro, numpyro.distributions as dist
    rng = np.random.default_rng(11)
    X = np.c_[np.ones(2000), rng.normal(size=(2000, 3))].astype(np.float32)
    mu = np.exp(X @ np.array([0.5, 0.3, -0.2, 0.1]))
    y = rng.negative_binomial(2.0, 2.0 / (2.0 + mu)).astype(np.float32)

    def negbin(X, y=None):
        beta = numpyro.sample("beta", dist.Normal(0.0, 2.0).expand([X.shape[1]]).to_event(1))
        conc = numpyro.sample("conc", dist.Gamma(2.0, 1.0))
        with numpyro.plate("N", X.shape[0]):
            numpyro.sample("y", dist.NegativeBinomial2(jnp.exp(X @ beta), conc), obs=y)

    model, data = cj.from_numpyro(negbin, jnp.asarray(X), jnp.asarray(y))
else:
    ds = cj.load_npz(os.path.join(data_dir, name + ".npz"))
    model, data = cj.models.logistic_regression(), (ds.X, ds.y)
key = jax.random.key(0)
out = {"N": int(jax.tree_util.tree_leaves(data)[0].shape[0])}
for method, options in (("sparse_vi", {"num_iters": iters}), ("omp", {})):
    t0 = time.perf_counter()
    cs = cj.coreset(model, data, size=size, method=method, key=key, **options)
    jax.block_until_ready(cs.weights)
    seconds = time.perf_counter() - t0
    post = cj.sample(model, data, jax.random.key(1), weights=cs, num_samples=500, num_warmup=500, num_chains=2,
                     warn=False)
    cert = cj.certify(model, data, cs, post.samples)
    out[method] = {"seconds": seconds, "points": cs.num_points, "kl": float(cert.kl), "verdict": cert.verdict}
print("JSON" + json.dumps(out))
"""


def main(argv=None, *, quick=None, out_dir=None):
    def extra(p):
        p.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
        p.add_argument("--sizes", nargs="+", type=int, default=[10, 20])
        p.add_argument("--cap", type=float, default=900.0, help="seconds per cell (one fresh process)")
        p.add_argument("--data-dir", default=common.DATA_DIR)

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    problems, sizes, iters = (("phishing",), (3,), 5) if args.quick else (args.problems, args.sizes, 100)
    rows = []
    for name in problems:
        for size in sizes:
            row = {"problem": name, "size": size, "num_iters": iters, "cap_s": args.cap}
            try:
                row.update(common.child(CHILD, name, size, iters, args.data_dir, timeout=args.cap))
            except common.subprocess.TimeoutExpired:
                row["over_cap"] = True
            rows.append(row)
            svi, omp = row.get("sparse_vi"), row.get("omp")
            print(f"{name:<9} M {size:>3}: " + (f"sparse_vi {svi['seconds']:7.1f} s KL {svi['kl']:.3g} "
                                                 f"({svi['verdict']}); omp {omp['seconds']:5.1f} s KL "
                                                 f"{omp['kl']:.3g} ({omp['verdict']})" if svi else
                                                 f"over the {args.cap:.0f} s cap"), flush=True)
    result = {"environment": common.environment(), "quick": bool(args.quick), "rows": rows}
    stem = "sparse_vi_cost_quick" if args.quick else "sparse_vi_cost"
    plot(rows, args.out, stem)
    path = common.write_json(result, args.out, stem)
    print("wrote", path)
    return result


def plot(rows, out_dir, stem):
    fig, axes = common.figure(1, 1, size=(5.5, 3.8))
    ax = axes[0][0]
    for name in dict.fromkeys(r["problem"] for r in rows):
        done = [r for r in rows if r["problem"] == name and "sparse_vi" in r]
        if done:
            ax.plot([r["size"] for r in done], [r["sparse_vi"]["seconds"] for r in done], "o-",
                    label=f"{name}: sparse_vi")
            ax.plot([r["size"] for r in done], [r["omp"]["seconds"] for r in done], "x--", label=f"{name}: omp")
    ax.set_yscale("log")
    ax.set_xlabel("coreset size M")
    ax.set_ylabel("construction seconds (first call)")
    ax.legend(fontsize=7)
    common.save_figure(fig, out_dir, stem)


if __name__ == "__main__":
    main()
