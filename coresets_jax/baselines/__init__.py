"""Baselines that users pick instead of a coreset: subsampling MCMC (SGLD, SGHMC) with control variates."""

from .sgmcmc import SGMCMCResult, cv_grad_estimator, sgmcmc

__all__ = ["SGMCMCResult", "cv_grad_estimator", "sgmcmc"]
