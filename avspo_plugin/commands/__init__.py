"""The ``avspo`` console script (main.py) and its commands that users run on their own setups and runs: doctor (is the
plugin registered, is the config right), analyze (ACR diagnostics of finished runs), advantages (GRPO and AVSPO on
drawn batches). No training process imports them."""
