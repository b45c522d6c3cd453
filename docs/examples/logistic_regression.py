"""Logistic regression

The synthetic logistic regression of Campbell & Broderick's Hilbert coresets paper (§7.2): x ~ N(0, I_2)
with an intercept column, theta = (3, 3, 0), N = 10,000 rows. `cj.coreset(..., tol=...)` chooses the size;
a uniform subsample of the same size shows what the choice of rows and weights buys, and full-data NUTS is
the reference that a coreset lets you skip (its certificate needs no full-data MCMC).
"""

import jax
import matplotlib.pyplot as plt
import numpy as np

import coresets_jax as cj
from coresets_jax import plots

key = jax.random.key(0)
X, y = data = cj.data.synthetic_logistic(key, 10_000).train
model = cj.models.logistic_regression(prior_scale=1.0)

cs = cj.coreset(model, data, key=key, tol=0.01)
print(cs)
M = cs.capacity

# The same number of rows drawn uniformly, each weighted N / M, with its own certificate.
uniform = cj.coreset(model, data, size=M, method="uniform", key=key, certify=True)
cert = uniform.certificate
print(f"uniform, M = {M}: certificate {cert.verdict} (khat {cert.khat:.2f}, KL {cert.kl:.3g})")

# MCMC on the M rows, and on all N rows for comparison.
on_coreset = cj.sample(model, data, key, weights=cs, num_samples=500, num_warmup=500)
on_uniform = cj.sample(model, data, key, weights=uniform, num_samples=500, num_warmup=500)
full = cj.sample(model, data, key, num_samples=500, num_warmup=500)
floor = cj.metrics.wasserstein1(full.samples[0], full.samples[1])   # two full-data chains: Monte Carlo noise
for name, post in (("OMP coreset", on_coreset), ("uniform", on_uniform)):
    w1 = cj.metrics.wasserstein1(post.flat_samples, full.flat_samples)
    print(f"{name}, M = {M}: W1 to the full-data posterior / Monte Carlo floor {float(w1) / float(floor):.2g}")

plots.coreset_points(X, cs.indices, cs.weights, labels=y, title=f"OMP coreset, M = {M}")
plots.marginals(full.samples, {"OMP coreset": on_coreset.samples, "uniform": on_uniform.samples},
                names=["x1", "x2", "intercept"], title="posterior marginals")
