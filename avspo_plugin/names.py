"""The names users meet in every host, defined once; the adapters import them from here."""

# The advantage estimator: algorithm.adv_estimator in verl, --advantage_estimator in OpenRLHF.
ESTIMATOR = "avspo"
# The verl adapter's module: what verl imports (entry point or VERL_USE_EXTERNAL_MODULES) to load the plugin.
PLUGIN_MODULE = "avspo_plugin.verl"
# Before each core metric's name (acr, threshold, ...) in the host's logs: avspo/acr.
METRIC_PREFIX = "avspo/"
# The AVSPO state (threshold, warnings) saved beside each checkpoint.
STATE_FILE = "avspo_state.json"
# The ACR monitor's state (warning streaks) saved beside each checkpoint of a run with algorithm.avspo_monitor.
MONITOR_STATE_FILE = "avspo_monitor_state.json"


def install_line(extras: str) -> str:
    """How to install the package with ``extras``: from a checkout (it is not on PyPI), under the constraints file."""
    return f'pip install -c constraints.txt ".[{extras}]" in the avspo checkout'
