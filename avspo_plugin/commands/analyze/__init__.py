"""``avspo analyze``: ACR diagnostics of GRPO runs that already happened, from verl rollout/validation dumps and
tracker logs (verl's ``file`` backend, TensorBoard, wandb exports, TRL and OpenRLHF logs); per-sample rewards go
through :mod:`avspo_plugin.core`. docs/using/analyze.md describes inputs and outputs.
"""
