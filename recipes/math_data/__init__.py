"""The math data and evaluation around the reward (``avspo_plugin.math_reward``).

- ``sources``: the datasets (MATH, GSM8K, MATH-500, Minerva, OlympiadBench, AMC, AIME-2024) from a
  local file or the dataset hub, turned into verl's parquet rows.
- ``level3``: the Level3-500 training set (problems a selector model solves 30-50% of the time).
- ``prepare``: ``python -m recipes.math_data.prepare`` (train set, eval sets, Level3-500).
- ``evaluate``: ``python -m recipes.math_data.evaluate`` (pass@1 / avg@k per benchmark and overall).
- ``agreement``: the reward against hand-labelled pairs and verl's own math scorers.
- ``generation``: sampling with vLLM (GPU), imported only where it is needed.
"""
