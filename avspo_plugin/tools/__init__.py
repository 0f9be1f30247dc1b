"""What stands around a training run: the CLI, the CPU lab, analyze, doctor, the CPU verl harness,
math data preparation and evaluation, the docs generators. No training process imports it."""
