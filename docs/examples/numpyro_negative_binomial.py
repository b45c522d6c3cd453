"""A NumPyro model: negative-binomial regression

Over-dispersed counts, written as an ordinary NumPyro model: y_n ~ NegativeBinomial(mean exp(x_n beta),
concentration phi), with a half-normal prior on phi. `cj.from_numpyro` turns it into a `cj.Model` (theta
holds beta and log phi, unconstrained) and the data; the coreset, its sampling and ArviZ's summary then
work as for a built-in model. N = 5,000 rows; the figure compares the coreset posterior with the values the
data were drawn from.
"""

import arviz as az
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpyro
import numpyro.distributions as dist

import coresets_jax as cj


def negative_binomial(X, y=None):
    beta = numpyro.sample("beta", dist.Normal(0.0, 2.0).expand([X.shape[1]]).to_event(1))
    phi = numpyro.sample("phi", dist.HalfNormal(5.0))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.NegativeBinomial2(jnp.exp(X @ beta), phi), obs=y)


kx, ky, key = jax.random.split(jax.random.key(2), 3)
N = 5_000
X = jnp.concatenate([jax.random.normal(kx, (N, 2)), jnp.ones((N, 1))], axis=1)   # two features, an intercept
beta_true, phi_true = jnp.array([0.8, -0.5, 1.0]), 2.0
y = dist.NegativeBinomial2(jnp.exp(X @ beta_true), phi_true).sample(ky)

model, data = cj.from_numpyro(negative_binomial, X, y=y)
cs = cj.coreset(model, data, key=key, tol=0.05)
print(cs)

post = cj.sample(model, data, key, weights=cs, num_samples=500, num_warmup=500)
idata = cj.to_arviz(post, model=model)
print(az.summary(idata, kind="stats"))

draws = idata.posterior
truth = [("beta[0]", draws["beta"].values[..., 0], 0.8), ("beta[1]", draws["beta"].values[..., 1], -0.5),
         ("beta[2]", draws["beta"].values[..., 2], 1.0), ("phi", draws["phi"].values, phi_true)]
fig, axes = plt.subplots(1, 4, figsize=(12, 2.8))
for ax, (label, values, true) in zip(axes, truth):
    ax.hist(values.ravel(), 40, density=True, alpha=0.6, label=f"coreset of {cs.num_points} rows")
    ax.axvline(true, color="k", ls="--", label="value drawn from")
    ax.set_title(label)
axes[0].legend(fontsize=7)
fig.tight_layout()
