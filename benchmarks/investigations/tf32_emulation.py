"""What TensorFloat-32 dot products would do to a full-data log density, emulated in NumPy on the CPU.

JAX computes float32 dot products on recent NVIDIA GPUs (A100, H100, H200) in TF32 by default: each operand
is rounded to 10 explicit mantissa bits (docs.jax.dev, "Matmul precision"). A model's `X @ theta` then sees
theta on a grid of relative spacing 2^-10 to 2^-11, whatever N, while the posterior sd shrinks as N^-1/2.
This script measures, on vs_peers.py's logistic regression (D = 10):
- the grid: the TF32 spacing of each coordinate of the posterior mode over the posterior sd (Laplace);
- the error of the log density, U_tf32(theta) - U(theta), at 200 Laplace draws: its spread across draws
  (the part a sampler's accept/reject and step-size adaptation see) and its largest pairwise difference;
- the acceptance cap: the mean of min(1, exp(-(e_i - e_j))) over pairs of draws, the acceptance rate a
  trajectory that ends one posterior sd or more from its start cannot exceed however small the step (NUTS's
  U-turn rule makes its trajectories that long). Where the cap is below the step-size adaptation's target
  (0.8 in NumPyro and BlackJAX), dual averaging drives the step size down without reaching the target, and
  the trees grow to their maximum depth (1,023 leapfrog steps).
Everything in float64 except the rounding of X and theta to TF32 (round to nearest even on the float32 bits).

    python benchmarks/investigations/tf32_emulation.py [--ns 100000 500000 1000000 5000000]
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import numpy as np  # noqa: E402

import common  # noqa: E402
import vs_peers  # noqa: E402


def to_tf32(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to TF32's 10 explicit mantissa bits (nearest, ties to even), as float32."""
    bits = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    drop = 13  # 23 - 10 mantissa bits
    half = (1 << (drop - 1)) - 1 + ((bits >> drop) & 1)
    out = ((bits + half) >> drop) << drop
    return out.astype(np.uint32).view(np.float32)


def potential(X, y, thetas):
    """-log posterior up to a constant, float64, for each row of thetas (prior N(0, 1))."""
    out = []
    for t in thetas:
        eta = X @ t
        out.append(np.sum(np.logaddexp(0.0, eta) - y * eta) + 0.5 * t @ t)
    return np.array(out)


def laplace(X, y, iters=30):
    theta = np.zeros(X.shape[1])
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(X @ theta)))
        g = X.T @ (p - y) + theta
        H = (X * (p * (1 - p))[:, None]).T @ X + np.eye(X.shape[1])
        step = np.linalg.solve(H, g)
        theta -= step
        if np.max(np.abs(step)) < 1e-12:
            break
    return theta, np.linalg.inv(H)


def main(argv=None, *, quick=None, out_dir=None):
    def extra(p):
        p.add_argument("--ns", nargs="+", type=int, default=[100_000, 500_000, 1_000_000, 5_000_000])
        p.add_argument("--draws", type=int, default=200)

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    ns = (20_000, 100_000) if args.quick else args.ns
    rows = []
    for n in ns:
        X32, y32, _ = vs_peers.make_data("logistic", 10, n)
        X, y = X32.astype(np.float64), y32.astype(np.float64)
        mode, cov = laplace(X, y)
        sd = np.sqrt(np.diag(cov))
        rng = np.random.default_rng(0)
        thetas = rng.multivariate_normal(mode, cov, size=args.draws)
        exact = potential(X, y, thetas)
        Xt = to_tf32(X32).astype(np.float64)
        tf32 = potential(Xt, y, to_tf32(thetas.astype(np.float32)).astype(np.float64))
        err = tf32 - exact
        ulp = 2.0 ** (np.floor(np.log2(np.abs(mode))) - 10)  # TF32's spacing at the mode, coordinate-wise
        diff = err[:, None] - err[None, :]
        cap = float(np.mean(np.minimum(1.0, np.exp(-diff))[~np.eye(len(err), dtype=bool)]))
        row = {"N": n, "acceptance_cap": cap, "posterior_sd_median": float(np.median(sd)),
               "grid_over_sd_median": float(np.median(ulp / sd)), "grid_over_sd_max": float(np.max(ulp / sd)),
               "error_spread_nats": float(np.std(err)), "error_range_nats": float(np.ptp(err)),
               "exact_spread_nats": float(np.std(exact))}
        rows.append(row)
        print(f"N = {n:>9,}: TF32 grid / posterior sd median {row['grid_over_sd_median']:.2f} "
              f"(max {row['grid_over_sd_max']:.2f}); log-density error sd {row['error_spread_nats']:.2f} nats, "
              f"range {row['error_range_nats']:.1f} (the draws' own spread {row['exact_spread_nats']:.1f}); "
              f"acceptance cap {cap:.2f}",
              flush=True)
    result = {"environment": common.environment(), "draws": args.draws, "rows": rows}
    common.write_json(result, args.out, common.stem("tf32_emulation", args.quick))
    return result


if __name__ == "__main__":
    main()
