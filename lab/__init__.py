"""The CPU lab: a small RL-from-verifiable-rewards run that shows advantage collapse and compares methods.

A research harness of the checkout, not of the installed package: it uses the package's core (and verl's losses and
estimators) and runs from the repository's root with ``python -m lab`` (make demo).

The demo (``python -m lab``), top to bottom: settings.py (every setting and its default), task.py (problems, verifier),
policy.py (tiny Qwen2, sampling, log-probs), methods.py (the compared advantage estimators), train.py (warm-up and
the RL loop), experiment.py (many runs in worker processes), report.py (what is written), command.py (``python -m
lab`` and its actions). research/ holds the study, its tuning and the sweep, built on these. See docs/evidence/lab.md.
"""
