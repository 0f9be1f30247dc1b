"""The lab's research harness, built on the demo's training loop (the modules of the lab above this folder).

study.py (the powered comparison, docs/evidence/study.md), gates.py (what GRPO must show on a base first), statistics.py
(paired tests, Holm, minimum detectable effects), study_report.py (study.md and its plots); tuning.py (tuning GRPO
on the study's bases, docs/evidence/tuning/); sweep.py, sweep_analysis.py and sweep_report.py (does early ACR predict the
final gain, docs/evidence/sweep.md); command.py (``python -m lab study``, ``tune``, ``sweep``, ``sharpening``).
"""
