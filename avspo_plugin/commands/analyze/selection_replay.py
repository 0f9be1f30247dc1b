"""What collapse-aware prompt selection would have done on a finished run: a replay over its rollout dump.

Step by step, the prompts the run generated are offered to a :class:`PromptSelector` (in the order of
the steps, prompts identified across steps as the rest of the analysis identifies them: by prompt
text, else by uid). It chooses before it sees the step's rewards, as in a live run, and learns only
from the prompts it kept, as it would have. Since the dump holds every prompt's rewards, the replay
also knows whether each skipped prompt did collapse: its precision and recall are exact here, where
a live run estimates them from the prompts it retried.

What it cannot know: which prompts a live run would have drawn in place of the skipped ones, and how
training on them would have changed later rewards. ``rollouts_saved`` is the responses of the
skipped prompts, out of those the run generated.
"""

from __future__ import annotations

from typing import Any

from avspo_plugin.config import SelectionConfig
from avspo_plugin.core.selection import PromptSelector

from .records import SampleLog


def replay_selection(samples: SampleLog, config: SelectionConfig) -> dict[str, Any]:
    """The replay's totals and per-step series (see the module docstring); ``config.enable`` is taken as on."""
    selector = PromptSelector(config.replace(enable=True))
    totals = dict.fromkeys(("prompts", "skipped", "skipped_collapsed", "rollouts", "rollouts_saved",
                            "rollouts_saved_collapsed", "judged", "judged_collapsed", "predicted",
                            "predicted_collapsed"), 0)  # fmt: skip
    per_step: dict[str, list] = {"step": [], "prompts": [], "skipped": [], "skipped_collapsed": [], "rollouts_saved": []}
    for step in samples.steps:
        visits = selector.visits(step.prompts, step.scores, where=f"step {step.step}")
        predicted = selector.predicted(visits.ids)
        judged = selector.judged(visits.ids)
        keep = selector.choose(visits.ids, step.step)
        kept_rows = keep[visits.row_visit]
        selector.observe(step.prompts[kept_rows], step.scores[kept_rows], step.step)
        skipped = ~keep
        counts = {
            "prompts": len(visits.ids),
            "skipped": int(skipped.sum()),
            "skipped_collapsed": int((skipped & visits.counted).sum()),
            "rollouts": int(visits.size.sum()),
            "rollouts_saved": int(visits.size[skipped].sum()),
            "rollouts_saved_collapsed": int(visits.size[skipped & visits.counted].sum()),
            "judged": int(judged.sum()),
            "judged_collapsed": int((judged & visits.counted).sum()),
            "predicted": int(predicted.sum()),
            "predicted_collapsed": int((predicted & visits.counted).sum()),
        }
        for name, value in counts.items():
            totals[name] += value
        per_step["step"].append(step.step)
        for name in ("prompts", "skipped", "skipped_collapsed", "rollouts_saved"):
            per_step[name].append(counts[name])
    return {
        "settings": config.replace(enable=True).to_dict(),
        **totals,
        "skipped_fraction": _ratio(totals["skipped"], totals["prompts"]),
        "rollouts_saved_fraction": _ratio(totals["rollouts_saved"], totals["rollouts"]),
        # How often a skip was right: the skipped prompt did collapse (its rollouts would have taught nothing).
        "skip_precision": _ratio(totals["skipped_collapsed"], totals["skipped"]),
        # The prediction itself, on every visit of a prompt seen min_collapsed_visits times before.
        "precision": _ratio(totals["predicted_collapsed"], totals["predicted"]),
        "recall": _ratio(totals["predicted_collapsed"], totals["judged_collapsed"]),
        # Rollouts spent on prompts that would have been skipped although they did not collapse.
        "informative_rollouts_lost": totals["rollouts_saved"] - totals["rollouts_saved_collapsed"],
        "per_step": per_step,
    }


def _ratio(numerator: float, denominator: float):
    return None if denominator == 0 else float(numerator) / float(denominator)


