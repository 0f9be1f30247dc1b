"""The math reward verl's reward workers call (``reward.compute_score``): ``answer`` extracts and normalises the final
answer, ``verify`` runs math-verify safely from any thread. Data and evaluation: ``recipes.math_data``.
"""
