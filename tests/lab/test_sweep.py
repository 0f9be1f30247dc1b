"""The sweep's statistics: Fisher intervals, the partial correlation given lr and G, fits over runs and
over configuration means (no training here; `avspo lab sweep` end to end is in test_command.py)."""

import itertools

import numpy as np
import pytest

from avspo_plugin.tools.lab.sweep import (
    READINGS,
    configuration_means,
    correlation_interval,
    fit_line,
    partial_correlation,
    r2_interval,
    sweep_fits,
)


def test_fisher_interval_matches_published_values():
    # r = 0.5, n = 50: the textbook Fisher interval [0.258, 0.683].
    assert correlation_interval(0.5, 50) == pytest.approx([0.2575, 0.6833], abs=1e-4)
    # The one-seed sweep's r = -0.550 over 36 configurations: R^2 in about [0.07, 0.55].
    assert r2_interval(correlation_interval(-0.5498288, 36)) == pytest.approx([0.0729, 0.5535], abs=1e-4)
    # k covariates take k degrees of freedom: the interval of n points given k equals that of n - k points.
    assert correlation_interval(0.3, 20, covariates=2) == pytest.approx(correlation_interval(0.3, 18))
    assert correlation_interval(0.3, 3) is None and correlation_interval(0.3, 5, covariates=2) is None


def test_r2_interval_starts_at_zero_when_the_interval_on_r_contains_zero():
    assert r2_interval([-0.2, 0.5]) == [0.0, 0.25]
    assert r2_interval([-0.6, -0.3]) == pytest.approx([0.09, 0.36])
    assert r2_interval(None) is None


def test_partial_correlation_equals_the_precision_matrix_formula():
    rng = np.random.default_rng(1)
    covariates = np.column_stack([rng.choice([1e-4, 4e-4], 40), rng.choice([4, 8], 40)])
    x = 0.02 * covariates[:, 1] + rng.normal(0, 0.1, 40)
    y = 30 - 2 * covariates[:, 1] + 1e4 * covariates[:, 0] - 10 * x + rng.normal(0, 2, 40)
    precision = np.linalg.inv(np.cov(np.column_stack([x, y, covariates]).T))
    expected = -precision[0, 1] / np.sqrt(precision[0, 0] * precision[1, 1])
    partial = partial_correlation(x, y, covariates)
    assert partial["r"] == pytest.approx(expected, abs=1e-12)
    assert (partial["covariates"], partial["dof"]) == (2, 36)
    assert partial["r_ci95"] == pytest.approx(correlation_interval(expected, 40, covariates=2))


def test_partial_correlation_is_zero_when_the_covariates_explain_a_variable():
    covariates = np.array([[1e-4, 4], [4e-4, 4], [1e-4, 8], [4e-4, 8]] * 3)
    x = 2.0 + covariates[:, 1] / 10
    y = np.arange(12.0)
    assert partial_correlation(x, y, covariates)["r"] == 0.0


def test_intervals_cover_the_true_correlation_95_percent_of_the_time():
    """Coverage over 3000 simulated data sets of 12 points; the partial interval with the plain correlation's
    degrees of freedom (n - 3) would cover about 92%."""
    rng = np.random.default_rng(0)
    n, rho, sims = 12, 0.6, 3000
    plain = partial = 0
    for _ in range(sims):
        covariates = np.column_stack([rng.choice([1e-4, 4e-4], n), rng.choice([4, 8], n)])
        noise = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], n)
        lo, hi = fit_line(noise[:, 0], noise[:, 1])["r_ci95"]
        plain += lo <= rho <= hi
        x = 3 * covariates[:, 1] + 2e3 * covariates[:, 0] + noise[:, 0]
        y = -covariates[:, 1] + 5e3 * covariates[:, 0] + noise[:, 1]
        lo, hi = partial_correlation(x, y, covariates)["r_ci95"]
        partial += lo <= rho <= hi
    assert 0.935 < plain / sims < 0.965
    assert 0.935 < partial / sims < 0.965


def synthetic_points(seeds: int) -> list[dict]:
    rng = np.random.default_rng(2)
    points = []
    for t, g, mix, lr in itertools.product((0.7, 1.0, 1.3), (4, 8), ("easy", "uniform", "hard"), (1e-4, 4e-4)):
        acr = 0.2 + 0.3 * (mix == "hard") + 0.1 * (g == 4) + 0.1 * (t == 0.7)
        for seed in range(seeds):
            early = acr + rng.normal(0, 0.05)
            points.append({
                "label": f"T={t} G={g} mix={mix} lr={lr:g}", "seed": seed, "temperature": t, "group_size": g,
                "mix": mix, "lr": lr, "early_acr": early,
                "final_pct": {r: 60 - 20 * early + 1e4 * lr + rng.normal(0, 3) for r in READINGS},
            })
    return points


def test_fits_over_configuration_means_and_over_runs():
    points = synthetic_points(seeds=3)
    configurations = configuration_means(points)
    assert len(configurations) == 36 and all(c["seeds"] == [0, 1, 2] for c in configurations)
    first = [p for p in points if p["label"] == configurations[0]["label"]]
    assert configurations[0]["early_acr"] == pytest.approx(np.mean([p["early_acr"] for p in first]))
    assert configurations[0]["final_pct"]["greedy"] == pytest.approx(np.mean([p["final_pct"]["greedy"] for p in first]))
    fits = sweep_fits(points, configurations)
    assert set(fits) == set(READINGS)
    for reading, by_unit in fits.items():
        means, runs = by_unit["configurations"], by_unit["runs"]
        assert (means["n"], runs["n"], means["partial"]["dof"], runs["partial"]["dof"]) == (36, 108, 32, 104)
        assert means["slope"] == pytest.approx(
            fit_line([c["early_acr"] for c in configurations], [c["final_pct"][reading] for c in configurations])["slope"]
        )
        assert means["slope"] < 0 and means["r2_ci95"][0] < means["r2"] < means["r2_ci95"][1]
        assert means["partial"]["given"] == ["lr", "group_size"]
        # lr moves final accuracy but not early ACR here: holding it fixed leaves early ACR more to explain.
        assert means["partial"]["r2"] > means["r2"]
        # The same spread over three times the points: the (overconfident) interval over runs is narrower.
        assert np.ptp(runs["r2_ci95"]) < np.ptp(means["r2_ci95"])
