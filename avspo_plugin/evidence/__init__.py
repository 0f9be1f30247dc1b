"""What the project measured and the rules it reads runs by, shared by ``avspo analyze`` and the lab (whose
reports the renderer reads).

``regimes``: which kind of collapse dominates a run (the lab's study names its bases by it, analyze a user's run).
The pre-registered forecast models are the lab's research (lab/research/forecast_models.py), not the package's.
"""
