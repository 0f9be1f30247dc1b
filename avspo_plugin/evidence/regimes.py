"""Collapse regimes: which kind of collapsed group dominates. One rule for the lab's study, which names its base
policies by it, and for ``avspo analyze``, which names a user's run by it and points to the study's row for that
regime in docs/evidence/results.md.
"""

from __future__ import annotations

REGIMES = ("all_fail", "mixed", "all_pass")
REGIME_TITLES = {"all_fail": "all-fail dominant", "mixed": "mixed", "all_pass": "all-pass dominant"}
DOMINANCE = 2.0  # a kind of collapse dominates when its share is at least this many times the other's
# Below this share of collapsed groups (or rollouts) collapse is too rare to have a regime that matters.
MIN_COLLAPSED = 0.05
DECISION_TABLE = "docs/evidence/results.md#decision-table"


def collapse_regime(all_fail: float, all_pass: float) -> str:
    """``all_fail`` when all_fail >= DOMINANCE x all_pass, ``all_pass`` when all_pass >= DOMINANCE x all_fail,
    else ``mixed``; all_fail and all_pass are shares (of groups or rollouts) in [0, 1], not both 0."""
    for name, share in (("all_fail", all_fail), ("all_pass", all_pass)):
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"{name} share {share!r} is not in [0, 1]")
    if all_fail == 0.0 and all_pass == 0.0:
        raise ValueError("no collapsed group (all_fail and all_pass shares both 0): no regime")
    if all_fail >= DOMINANCE * all_pass:
        return "all_fail"
    if all_pass >= DOMINANCE * all_fail:
        return "all_pass"
    return "mixed"
