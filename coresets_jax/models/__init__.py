"""Built-in models with closed forms for testing."""

from .gaussian import gaussian_mean, gaussian_mean_fisher_vectors, gaussian_mean_posterior
from .glm import logistic_regression, poisson_regression

__all__ = [
    "gaussian_mean",
    "gaussian_mean_fisher_vectors",
    "gaussian_mean_posterior",
    "logistic_regression",
    "poisson_regression",
]
