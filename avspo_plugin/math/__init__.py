"""The math RLVR pipeline around the recipes: reward, data preparation, selection, evaluation.

- ``answer``: final-answer extraction under two rules (training: a closed ``\\boxed{}`` or a finished
  "The answer is X." sentence; the paper's evaluation: also the last number) and the grading form
  (currency, units, percent, thousands separators, several parts) a MATH grader compares.
- ``verify``: math-verify with timeouts that also work in the reward threads verl runs.
- ``reward``: the verl reward function ``compute_score`` (``reward.custom_reward_function``).
- ``agreement``: the reward against hand-labelled pairs and verl's own math scorers.
- ``sources``: the datasets (MATH, GSM8K, MATH-500, Minerva, OlympiadBench, AMC, AIME-2024) from a
  local file or the dataset hub, turned into verl's parquet rows.
- ``prepare``: ``python -m avspo_plugin.math.prepare`` (train set, eval sets, Level3-500 selection).
- ``evaluate``: ``python -m avspo_plugin.math.evaluate`` (pass@1 / avg@k per benchmark and overall).

vLLM and ``datasets`` are imported only inside the functions that need them.
"""
