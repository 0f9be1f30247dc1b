"""``avspo analyze``: ACR diagnostics of finished GRPO runs from their dumps and logs (docs/using/analyze.md)."""
