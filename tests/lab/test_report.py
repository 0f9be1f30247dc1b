"""What the lab's reports claim about intervals: bands and "95% CI" only from 3 seeds on."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import PolyCollection

from lab.report import _band, band_caption, fmt, mean_ci, values_text


def bands(ax) -> int:
    return sum(isinstance(c, PolyCollection) for c in ax.collections)


def test_a_band_and_its_claim_need_three_seeds():
    fig, ax = plt.subplots()
    x = np.arange(5)
    assert _band(ax, x, np.random.default_rng(0).random((2, 5)), "two seeds", "C0") is False
    assert bands(ax) == 0 and len(ax.lines) == 1
    assert _band(ax, x, np.random.default_rng(0).random((3, 5)), "three seeds", "C1") is True
    assert bands(ax) == 1
    plt.close(fig)
    assert band_caption([True, True]) == "mean over seeds, band: 95% CI"
    assert "95% CI" not in band_caption([False, False]) and "too few seeds for an interval" in band_caption([False])


def test_cells_and_the_report_header_claim_intervals_only_with_them():
    assert fmt(mean_ci([0.36, 0.5])) == "0.430"
    assert fmt(mean_ci([0.3, 0.4, 0.5])) == "0.400 ± 0.248"
    assert "too few seeds for an interval" in values_text(2) and "±" not in values_text(2)
    assert "95% CI" in values_text(3)
