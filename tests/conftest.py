"""Test-suite tiers.

`-m "not slow"` is the fast set a developer runs; `-m slow` holds the statistical and compile-heavy tests
(each over about 10 s of CPU on this 2-core machine, measured with `--durations`), which CI runs as well.
Tests mark themselves with `@pytest.mark.slow`; the ones listed here were measured slow and are marked in
one place, by node-id prefix, so the list can be re-derived from a `--durations=60` run.
"""

import pytest

MEASURED_SLOW = (
    "test_sharding.py",  # one 4-device subprocess compiling every method: about 130 s
    "test_scale.py",
    "test_coreset_mcmc.py::test_coreset_mcmc_through_coreset_merged_and_stream",
    "test_quasi_newton.py::test_quasi_newton_through_coreset_merged_and_stream",
    "test_vmf.py::test_em_and_weighted_gibbs_recover_poles",
    "test_vmf.py::test_model_loglik_matches_numpy_and_pihat_samples",
    "test_iht.py::test_iht_section_5_1_miniature",
    "test_iht.py::test_two_starts_dominate_each_start",
    "test_iht.py::test_iht_invariants",
    "test_iht.py::test_nnls_debias_solves_nnls_on_its_support",
    "test_iht.py::test_default_debias_dominates_each_rule",
    "test_inference.py::test_nuts_matches_long_rwmh_on_logistic_regression",
    "test_inference.py::test_recovers_exact_gaussian_posterior[full-nuts]",
    "test_inference.py::test_recovers_exact_gaussian_posterior[coreset-nuts]",
    "test_inference.py::test_new_coreset_of_same_capacity_does_not_recompile",
    "test_inference.py::test_to_arviz_summary",
    "test_inference.py::test_thinning_and_dense_weights",
    "test_cli.py::test_run_writes_table_json_coresets_and_plots",
    "test_cli.py::test_npz_data_and_legacy_method_keys",
    "test_architecture.py::test_build_fn_vmaps_over_keys_and_over_V[iht2]",
    "test_architecture.py::test_whole_trial_vmaps_over_keys",
    "test_architecture.py::test_weighted_density_is_defined_once_and_masks_zero_weight_rows",
    "test_architecture.py::test_toy_vector_method_through_build_coreset_merged_stream",
    "test_storage_dtype.py::test_bfloat16_storage_keeps_solution_quality",
    "test_streaming.py::test_stream_of_16_chunks_close_to_one_shot",
    "test_streaming.py::test_checkpoint_from_other_settings_is_refused_and_size_above_n",
    "test_sensitivity.py::test_mean_sensitivity_flat_in_n",
    "test_fidelity.py::test_cone_target_recovered_by_iht2_and_omp",
    "test_models.py::test_laplace_on_logistic_finds_the_mode_and_subsample_is_close",
    "test_linear_regression.py::test_sample_recovers_weighted_linear_regression",
    "test_perf_invariants.py::test_exact_low_rank_same_support_and_weights[iht2]",
    "test_perf_invariants.py::test_frank_wolfe_cache_matches_from_scratch_after_100_iterations",
    "test_omp.py::test_refit_improves_every_solver",
    "test_rbf.py::test_weighted_posterior_matches_numpy",
    "test_rbf.py::test_exact_centered_vectors_match_monte_carlo_gram",
    "test_frank_wolfe.py::test_frank_wolfe_gaussian_kl_falls_with_M_and_obeys_theorem_4_4",
    "test_numpyro.py::test_logistic_matches_builtin_vectors_and_coreset",
    "test_metrics.py::test_laplace_kl_exact_for_linear_regression",
    "test_generators.py::test_logistic_and_poisson_hc_7_2",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        node = item.nodeid.split("tests/", 1)[-1]
        if any(node.startswith(prefix) for prefix in MEASURED_SLOW):
            item.add_marker(pytest.mark.slow)
        if "test_benchmarks_quick.py" in item.nodeid:
            item.add_marker(pytest.mark.bench)
