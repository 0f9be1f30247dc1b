"""What the project measured and the rules it reads runs by, shared by ``avspo analyze``, the lab and the renderer.

``regimes``: which kind of collapse dominates a run (the lab's study names its bases by it, analyze a user's run);
``forecast_models``: the pre-registered models of a run's final score from early ACR, which ``avspo analyze
--fit-final`` fits on a user's own runs and the lab's sweep (lab/research/forecast.py) on its own.
"""
