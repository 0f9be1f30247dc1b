"""The math reward, as verl's reward workers import it (data and evaluation: ``recipes.math_data``).

- ``answer``: final-answer extraction under two rules (training: a closed ``\\boxed{}`` or a finished
  "The answer is X." sentence; the paper's evaluation: also the last number) and the grading form
  (currency, units, percent, thousands separators, several parts) a MATH grader compares; linear in
  the output's length, whatever the output.
- ``verify``: math-verify with timeouts that also work in the reward threads verl runs.
- ``reward``: the verl reward function ``compute_score`` (``reward.custom_reward_function``).
"""
