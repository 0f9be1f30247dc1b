"""How figures are printed wherever the package (and the lab) states one: a share in percent, a range of shares, a
signed difference."""

from __future__ import annotations


def share(low: float, high: float) -> str:
    """A range of shares in percent, one figure where both print the same."""
    return f"{percent(low)} to {percent(high)}" if percent(low) != percent(high) else percent(low)


def percent(value: float) -> str:
    if 0 < value < 0.005:
        return "under 1%"
    if 0.995 < value < 1:
        return "over 99%"
    return f"{value:.0%}"


def signed(value: float) -> str:
    """A signed figure with 3 decimals, more where 3 would print a nonzero value as 0 (so a bound's side of 0 shows)."""
    return f"{value:+.3f}" if value == 0 or abs(value) >= 0.0005 else f"{value:+.2g}"
