"""``avspo analyze``: ACR diagnostics of GRPO runs that already happened.

Readers turn verl rollout/validation dumps and tracker logs (verl's ``file``
backend, TensorBoard, wandb exports, TRL and OpenRLHF logs) into per-step
timelines; per-sample rewards go through :mod:`avspo_plugin.core`, so the ACR
reported here is the one the estimator logs. The subcommand lives in
:mod:`avspo_plugin.commands.analyze.command`; docs/using/analyze.md describes inputs and outputs.
"""
