"""Built-in models with closed forms for testing."""

from .bradley_terry import bradley_terry
from .gaussian import gaussian_mean, gaussian_mean_fisher_vectors, gaussian_mean_posterior
from .glm import logistic_regression, poisson_regression
from .linear_regression import linear_regression, linear_regression_posterior
from . import rbf, spike_and_slab, vmf
from .rbf import exact_centered_vectors, rbf_basis, rbf_features, rbf_posterior, rbf_regression
from .vmf import vmf_mixture

__all__ = [
    "bradley_terry",
    "gaussian_mean",
    "gaussian_mean_fisher_vectors",
    "gaussian_mean_posterior",
    "linear_regression",
    "linear_regression_posterior",
    "logistic_regression",
    "poisson_regression",
    "exact_centered_vectors",
    "rbf",
    "rbf_basis",
    "rbf_features",
    "rbf_posterior",
    "rbf_regression",
    "spike_and_slab",
    "vmf",
    "vmf_mixture",
]
