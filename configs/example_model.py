"""Your own model for `coresets-jax run` (configs/numpyro_model.yaml, configs/custom_model.yaml).

`model: example_model:numpyro_logistic` in a config imports this module (it sits beside the configs: the
config's folder is searched after sys.path) and calls the function with `model_options` as keyword
arguments. The function returns either

- a NumPyro model function, which the job calls as `fn(X, y)` through `cj.from_numpyro(fn, X, y)`
  (X: the (N, D) features, with the intercept column when `intercept: true`; y: the (N,) labels), or
- a `cj.Model`, whose log-likelihood gets one datum `(x_n, y_n)` (the data pytree is `(X, y)`); give it
  `dim=D`.
"""

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

import coresets_jax as cj


def numpyro_logistic(prior_scale: float = 1.0):
    """Bayesian logistic regression as a NumPyro model; labels y in {0, 1}."""
    def model(X, y=None):
        beta = numpyro.sample("beta", dist.Normal(0.0, prior_scale).expand([X.shape[1]]).to_event(1))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)

    return model


def robust_logistic(dim: int = 3, df: float = 3.0):
    """Logistic regression with a Student-t prior, as a cj.Model; labels y in {0, 1}."""
    def log_likelihood(theta, datum):
        x, y = datum
        return -jax.nn.softplus(-(2.0 * y - 1.0) * jnp.dot(x, theta))

    def log_prior(theta):
        return jnp.sum(dist.StudentT(df).log_prob(theta))

    return cj.Model(log_likelihood, log_prior, dim=dim, name="robust_logistic")
