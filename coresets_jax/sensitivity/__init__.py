"""Sensitivity-based (uniform-norm) coresets: LR Algorithm 1 for logistic regression (`logistic`, with the
k-means++ bound of `clustering`), HC Eq. 6.3 for the Gaussian mean (`gaussian`), and the sampling step they
share (`sampling`, HC Eq. 2.5).

LR Algorithm 1 is also a registered construction, "sensitivity", so `cj.coreset(model, data, M,
"sensitivity", key=key)`, `cj.merged_coreset` and `cj.stream_coreset` run it like any other method.
"""

from ..registry import Construction, register
from .clustering import KMeans, kmeans, kmeans_fn
from .gaussian import gaussian_mean_coreset, gaussian_mean_sensitivity, gaussian_mean_sensitivity_core
from .logistic import logistic_sensitivity, sensitivity_construction, sensitivity_coreset
from .sampling import sensitivity_sample, sensitivity_sample_core

__all__ = ["KMeans", "gaussian_mean_coreset", "gaussian_mean_sensitivity", "gaussian_mean_sensitivity_core",
           "kmeans", "kmeans_fn", "logistic_sensitivity", "sensitivity_construction", "sensitivity_coreset",
           "sensitivity_sample", "sensitivity_sample_core"]

register(Construction("sensitivity", sensitivity_construction, needs="posterior", random=True,
                      description="LR Algorithm 1: sensitivity sampling for logistic regression (k-means++ "
                                  "bound of Lemma 3.1)"))
