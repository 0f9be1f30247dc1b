"""One exit code for NOT READY on every host (docs/using/verl.md, trl.md, openrlhf.md): 1, the verdict line first."""

from __future__ import annotations

import socket

import pytest

from avspo_plugin.commands.doctor import findings
from avspo_plugin.commands.doctor import trl as trl_doctor
from avspo_plugin.commands.main import main

# Per host, a setup the doctor must call NOT READY: verl with a config that cannot be composed, TRL not installed,
# OpenRLHF not installed (it is not, in this environment: tests/openrlhf/test_doctor.py runs its released packages).
NOT_READY_RUNS = {
    "verl": ["doctor", "--no-ray", "no_such_block.key=1"],
    "trl": ["doctor", "--host", "trl"],
    "openrlhf": ["doctor", "--host", "openrlhf", "--no-ray"],
}


@pytest.mark.parametrize("host", sorted(NOT_READY_RUNS))
def test_not_ready_exits_1_on_every_host(host, monkeypatch, capsys):
    monkeypatch.setattr(trl_doctor, "installed_trl", lambda: None)
    assert main(NOT_READY_RUNS[host]) == findings.NOT_READY == 1
    assert capsys.readouterr().out.startswith("avspo doctor: NOT READY: ")


def test_a_ray_cluster_the_openrlhf_preflight_cannot_join_is_a_finding_not_an_error(monkeypatch, capsys):
    """As verl's fresh-actor check reports it: a [FAIL] line (so NOT READY, exit 1), not the console's error exit 2."""
    from avspo_plugin.commands.doctor.openrlhf import preflight_failed

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"  # nothing listens there once closed
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert preflight_failed(address) is True
    assert (f"[FAIL] preflight: could not join a Ray cluster: ConnectionError('cannot reach the Ray cluster at "
            f"{address} (--ray-address): Connection refused.") in capsys.readouterr().out
