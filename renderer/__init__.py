"""Every generated page, table, block and YAML file of the checkout, from its one source (the config dataclasses, the
metric tables, the evidence JSON); ``python -m renderer`` writes them all, tests/test_rendered.py checks each."""
