"""What the project measured and the rules it reads runs by, shared by ``avspo analyze``, the lab and the renderer.

``regimes``: which kind of collapse dominates a run (the lab's study names its bases by it, analyze a user's run);
``forecast_models``: the pre-registered forecast of a run's final score from early ACR, fitted by the lab's sweep and
by ``avspo analyze --fit-final``; ``lab_evidence``: what the lab's sweep measured, read from its packaged fit file
(``lab_sweep_fit.json``, which the renderer writes).
"""
