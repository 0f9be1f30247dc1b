"""The gates a base must pass before methods are compared on it, on synthetic GRPO runs whose figures are known."""

import pytest

from lab.research.gates import GATE_NAMES, failed, grpo_gates, passed

BASE = {"accuracy": 0.40, "greedy": 0.70, "by_tier": {"2": 0.6, "3": 0.4, "4": 0.3, "5": 0.3}}


def run(gain=0.15, greedy=0.02, acr=0.4, fail=0.25, pass_=0.15, tier_gain=None, fail_tiers=None, clip=0.0,
        held_out=0, steps=10):
    tier_gain = tier_gain or {"2": 0.1, "3": 0.15, "4": 0.2, "5": 0.15}
    fail_tiers = fail_tiers or {"2": 0.0, "3": 0.05, "4": 0.1, "5": 0.1}
    half = steps // 2
    series = {
        # The second half differs, so that a gate that read the whole run would read other values.
        "acr": [acr] * half + [0.9] * half,
        "acr_all_fail": [fail] * half + [0.0] * half,
        "acr_all_pass": [pass_] * half + [0.9] * half,
        "clip_bound": [clip] * steps,
        "grad_norm": [1.0] * steps,
        "held_out_drawn": [0.0] * (steps - 1) + [float(held_out)],
        **{f"all_fail_tier{t}": [v] * half + [0.0] * half for t, v in fail_tiers.items()},
    }
    evals = {"accuracy": [BASE["accuracy"], BASE["accuracy"] + gain], "greedy": [BASE["greedy"], BASE["greedy"] + greedy],
             "by_tier": [BASE["by_tier"], {t: BASE["by_tier"][t] + g for t, g in tier_gain.items()}]}
    return {"steps": series, "evals": evals}


def test_a_base_where_grpo_learns_passes_every_gate():
    gates = grpo_gates(BASE, [run(), run(gain=0.12), run(gain=0.2)], grad_clip=5.0)
    assert list(gates) == list(GATE_NAMES) and passed(gates)
    assert gates["grpo_gain"]["value"] == pytest.approx((0.15 + 0.12 + 0.2) / 3)
    assert gates["acr_first_half"]["value"] == pytest.approx(0.4)
    assert gates["both_regimes"]["detail"] == {"all_fail": pytest.approx(0.25), "all_pass": pytest.approx(0.15)}
    assert gates["learnable_all_fail"]["value"] == pytest.approx(1.0)
    assert gates["clip_rate"]["detail"]["grad_clip"] == 5.0


@pytest.mark.parametrize("runs, gate", [
    ([run(gain=0.08)] * 3, "grpo_gain"),  # too small a mean gain
    ([run(gain=0.3), run(gain=0.3), run(gain=0.02), run(gain=0.02), run(gain=0.3)], "grpo_gain_per_seed"),  # 60% of seeds
    ([run(greedy=-0.01)] * 3, "greedy_change"),
    ([run(acr=0.65)] * 3, "acr_first_half"),
    ([run(acr=0.15)] * 3, "acr_first_half"),
    ([run(pass_=0.04)] * 3, "both_regimes"),
    ([run(fail=0.03)] * 3, "both_regimes"),
    # Most all-fail groups come from tier 5, which no run lifts: the collapse is not one RL can learn from.
    ([run(tier_gain={"2": 0.2, "3": 0.2, "4": 0.2, "5": 0.0}, fail_tiers={"2": 0, "3": 0.02, "4": 0.03, "5": 0.2})] * 3,
     "learnable_all_fail"),
    ([run(clip=0.2)] * 3, "clip_rate"),
    ([run(), run(held_out=1), run()], "held_out_unseen"),
])
def test_each_gate_fails_alone(runs, gate):
    gates = grpo_gates(BASE, runs, grad_clip=5.0)
    assert failed(gates) == [gate]


def test_gates_need_runs():
    with pytest.raises(ValueError, match="at least one GRPO run"):
        grpo_gates(BASE, [], grad_clip=1.0)
