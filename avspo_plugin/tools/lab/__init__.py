"""The CPU lab: a small RL-from-verifiable-rewards run that shows advantage collapse and compares methods.

settings.py (every setting and its default), task.py (problems, verifier), policy.py (tiny
Qwen2, sampling, log-probs), methods.py (the compared advantage estimators), train.py (warm-up
and the RL loop, top to bottom), experiment.py (many runs in worker processes), report.py (what is
written), study.py and tuning.py (the study), sweep.py and sweep_analysis.py (the ACR-predictor sweep),
command.py (``avspo lab``). See docs/lab.md.
"""
