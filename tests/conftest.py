"""Test-suite tiers.

`-m "not slow"` is the fast set a developer runs; `-m slow` holds the statistical and compile-heavy tests
(each over about 10 s of CPU on this 2-core machine, measured with `--durations`), which CI runs as well.
Tests mark themselves with `@pytest.mark.slow`; the ones listed here were measured slow and are marked in
one place, by node-id prefix, so the list can be re-derived from a `--durations=60` run.
"""

import os
from pathlib import Path

# A persistent XLA compilation cache shared by the xdist workers, the subprocess tests and later runs: the
# suite is compile-bound, and a warm cache makes a re-run about 3x faster (measured in README.md). A user's
# own JAX_COMPILATION_CACHE_DIR wins. Set before jax is imported, so subprocesses inherit it too.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".jax_cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

import pytest  # noqa: E402

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
    # statistical or compile-heavy, over ~3.5 s each in the fast set (moved so that a developer's warm-cache
    # fast set runs in under a minute; README "Tests: how long they take")
    "test_inference.py::test_recovers_exact_gaussian_posterior",
    "test_inference.py::test_sample_weighted_fn_is_jittable_with_traced_weights",
    "test_sparse_vi.py::test_sparse_vi_gaussian_beats_uniform_and_respects_constraints",
    "test_frank_wolfe.py::test_pipeline_reproducible_and_better_than_uniform",
    "test_frank_wolfe.py::test_fixed_step_rule_obeys_eq_4_12",
    "test_frank_wolfe.py::test_importance_sampling_is_unbiased_and_matches_eq_4_1",
    "test_frank_wolfe.py::test_frank_wolfe_beats_uniform_by_10x_at_M_50",
    "test_sensitivity.py::test_sensitivity_coreset_api_and_size_from_tolerance",
    "test_sensitivity.py::test_lemma_3_1_bound",
    "test_sensitivity.py::test_sensitivity_sample_is_unbiased",
    "test_sensitivity.py::test_kmeans_recovers_separated_clusters",
    "test_rbf.py::test_basis_layout_and_features",
    "test_architecture.py::test_build_fn_vmaps_over_keys_and_over_V",
    "test_architecture.py::test_toy_methods_through_the_cli_config",
    "test_architecture.py::test_step_chains_follow_a_changing_target_to_the_closed_form_posterior",
    "test_architecture.py::test_toy_posterior_method_through_coreset_merged_stream",
    "test_architecture.py::test_laplace_fn_vmaps_over_datasets",
    "test_iht.py::test_iht_objective_matches_numpy_float64",
    "test_bad_inputs.py::test_zero_one_labels_give_the_plus_minus_posterior",
    "test_generators.py::test_vmf_six_poles",
    "test_generators.py::test_rbf_coordinates",
    "test_progress.py::test_solver_driver_and_projection_unchanged",
    "test_vmf.py::test_sampler_mean_resultant_length",
    "test_vmf.py::test_normalizer_closed_form_d3_and_huge_tau",
    "test_streaming.py::test_memory_mapped_source_matches_generator",
    "test_fidelity.py::test_omp_reselection_matches_numpy_twin",
    "test_fidelity.py::test_auto_compress_policy_keeps_the_greedy_path_on_exact_low_rank_V",
    "test_perf_invariants.py::test_repeated_calls_do_not_recompile",
    "test_perf_invariants.py::test_error_change_bounded_by_discarded_energy",
    "test_metrics.py::test_gaussian_kl_matches_numpy_both_directions",
    "test_omp.py::test_omp_exact_on_rank_5",
    "test_quasi_newton.py::test_one_step_with_exact_samples_matches_numpy_newton_and_reaches_the_posterior",
    "test_quasi_newton.py::test_kl_change_estimate_matches_the_closed_form_gaussian_kl",
    "test_coreset_mcmc.py::test_kl_gradient_is_unbiased_against_the_closed_form_covariance",
    "test_progress.py::test_sample_reports_warmup_and_sampling",
    "test_progress.py::test_coreset_mcmc_reports_its_iterations",
)

# Slow tests that CI skips to stay within its 15 minutes on 2 cores (the heaviest, each of whose properties a
# cheaper CI test also touches). Run them by hand: `python -m pytest -m extended tests`. Clean-clone times
# on the shared 2-core machine (2026-11-22): test_sharding.py 240 s (one 4-device subprocess compiling every
# method), the rest 33-51 s each.
EXTENDED = (
    "test_sharding.py",  # CI keeps test_scale.py's sharded equality and test_multiprocess.py
    "test_inference.py::test_nuts_matches_long_rwmh_on_logistic_regression",  # CI: exact Gaussian posteriors
    "test_cli.py::test_sample_adds_posterior_quality",  # CI: test_run_writes_table_json_coresets_and_plots
    "test_quasi_newton.py::test_quasi_newton_through_coreset_merged_and_stream",  # CI: test_architecture's
    "test_coreset_mcmc.py::test_coreset_mcmc_through_coreset_merged_and_stream",  # posterior merge + stream
    "test_architecture.py::test_build_fn_vmaps_over_keys_and_over_V[iht2]",  # CI: [uniform], [giga], iht_quick
    "test_numpyro.py::test_halfnormal_posterior_matches_numpyro_nuts",  # CI: ..._prior_has_the_jacobian
    "test_iht.py::test_iht_section_5_1_miniature",  # CI: test_iht_invariants, test_default_debias_...
    "test_iht.py::test_two_starts_dominate_each_start",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        node = item.nodeid.split("tests/", 1)[-1]
        if any(node.startswith(prefix) for prefix in MEASURED_SLOW):
            item.add_marker(pytest.mark.slow)
        if any(node.startswith(prefix) for prefix in EXTENDED):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.extended)
        if "test_benchmarks_quick.py" in item.nodeid:
            item.add_marker(pytest.mark.bench)
