"""``avspo advantages``: GRPO and AVSPO advantages side by side on drawn binary-reward batches, no training.

Each step draws G rewards per prompt from Bernoulli(p), p spread from hopeless to trivial, and prints each group's
advantages under plain GRPO and under AVSPO, with the estimator's metrics and threshold.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from avspo_plugin.argument_types import positive_int
from avspo_plugin.config import AVSPOConfig
from avspo_plugin.core import ThresholdState, compute_group_advantages


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prompts", type=positive_int, default=8, help="prompt groups per batch (default 8)")
    parser.add_argument("--group-size", type=positive_int, default=8, help="samples per prompt, G (default 8)")
    parser.add_argument("--steps", type=positive_int, default=4, help="batches to draw (default 4)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the reward draws (default 0)")


def run(args: argparse.Namespace) -> int:
    rng = np.random.default_rng(args.seed)
    pass_rates = np.linspace(0.0, 1.0, args.prompts) ** 3  # more hard prompts than easy ones, as in RLVR
    avspo = AVSPOConfig()
    grpo = avspo.as_monitor()
    avspo_state, grpo_state = ThresholdState.initial(avspo), ThresholdState.initial(grpo)
    labels = np.repeat([f"prompt-{j}" for j in range(args.prompts)], args.group_size)
    for step in range(1, args.steps + 1):
        rewards = torch.tensor(rng.random((args.prompts, args.group_size)) < pass_rates[:, None], dtype=torch.float32)
        plain = compute_group_advantages(rewards.reshape(-1), labels, grpo, grpo_state)
        result = compute_group_advantages(rewards.reshape(-1), labels, avspo, avspo_state)
        grpo_state, avspo_state = plain.state, result.state
        m = result.metrics
        print(
            f"\nstep {step}: ACR {m['acr']:.3f} (all-fail {m['acr_all_fail']:.3f}, all-pass {m['acr_all_pass']:.3f}), "
            f"threshold {m['threshold']:.4f}, triggered {int(m['triggered'])}, K {m['num_virtual']:.0f}, "
            f"effective ACR {m['effective_acr']:.3f}"
        )
        print(f"  {'prompt':<10} {'p(pass)':>7}  {'rewards':<{2 * args.group_size}} {'GRPO adv[0]':>11} {'AVSPO adv[0]':>12}")
        plain_adv = plain.advantages.reshape(args.prompts, args.group_size)
        avspo_adv = result.advantages.reshape(args.prompts, args.group_size)
        for j in range(args.prompts):
            shown = " ".join(str(int(r)) for r in rewards[j])
            print(
                f"  prompt-{j:<3} {pass_rates[j]:>7.2f}  {shown:<{2 * args.group_size}} "
                f"{float(plain_adv[j, 0]):>11.4f} {float(avspo_adv[j, 0]):>12.4f}"
            )
    print(
        "\nCollapsed groups (all rewards equal) get advantage 0 under GRPO; AVSPO adds K virtual rewards to their "
        f"mean/std on the steps it triggers (threshold_mode={avspo.threshold_mode}), so all-fail groups are pushed "
        "down and all-pass groups up."
    )
    return 0
