"""`avspo doctor` and an unreachable Ray cluster: every attempt to join one is bounded in time and names the address.

Only loopback addresses: a free local port (nothing listens), or a local socket that is not Ray.
"""

import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from avspo_plugin.commands.doctor import ray_cluster
from avspo_plugin.commands.main import main


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_address_nothing_listens_on_is_refused_at_once_by_name():
    import ray

    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(ConnectionError, match=rf"^cannot reach the Ray cluster at {address} \(--ray-address\): "
                                              r"Connection refused\. Start the cluster"):
        ray_cluster.connect_ray(address)
    assert time.monotonic() - started < 5 and not ray.is_initialized()


def test_doctor_with_an_unreachable_ray_address_returns_within_the_bound(monkeypatch, capsys):
    address = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv("RAY_ADDRESS", address)
    started = time.monotonic()
    assert main(["doctor", "--no-config"]) == 1
    assert time.monotonic() - started < ray_cluster.CONNECT_TIMEOUT_S
    out = capsys.readouterr().out
    assert f"[FAIL] fresh Ray actor: could not run the check: ConnectionError('cannot reach the Ray cluster at {address} " \
           "(RAY_ADDRESS): Connection refused." in out


JOIN_A_SOCKET_THAT_IS_NOT_RAY = textwrap.dedent("""
    import socket, time
    from avspo_plugin.commands.doctor.ray_cluster import connect_ray
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    started = time.monotonic()
    try:
        connect_ray(f"127.0.0.1:{listener.getsockname()[1]}")
    except TimeoutError as err:
        print(f"{time.monotonic() - started:.1f}", err)
""")


def test_joining_an_address_that_answers_but_is_not_ray_stops_at_the_bound():
    """ray.init would retry for minutes; it runs in a daemon thread the process leaves behind, so in a subprocess."""
    env = {**os.environ, ray_cluster.TIMEOUT_VARIABLE: "2"}
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-c", JOIN_A_SOCKET_THAT_IS_NOT_RAY], capture_output=True, text=True,
                         env=env, timeout=120)
    waited, message = run.stdout.split(" ", 1)
    # At least the bound, and not the minutes ray.init would retry for (a loaded machine only adds seconds).
    assert 2 <= float(waited) < 30, run.stdout + run.stderr
    assert "(--ray-address) answers but Ray could not join it within 2 s" in message
    assert f"set {ray_cluster.TIMEOUT_VARIABLE} to wait longer" in message
    assert time.monotonic() - started < 60  # the process ends although the join is still running


@pytest.mark.parametrize("text", ["soon", "0", "-1", "nan"])
def test_a_bad_timeout_setting_is_named(monkeypatch, text):
    monkeypatch.setenv(ray_cluster.TIMEOUT_VARIABLE, text)
    with pytest.raises(ValueError, match=rf"{ray_cluster.TIMEOUT_VARIABLE}='{text}': expected a number of seconds"):
        ray_cluster.connect_timeout_s()


def test_by_default_the_check_starts_a_private_instance_and_joins_only_a_cluster_the_user_names(monkeypatch):
    """Whatever runs on this machine, no address given is a private instance; the one given is named with where it was
    given. ray.init records its arguments here: no cluster is started or joined."""
    import ray

    calls = []
    monkeypatch.setattr(ray, "init", lambda **kwargs: calls.append(kwargs))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert ray_cluster.connect_ray(None) == ray_cluster.PRIVATE_INSTANCE
    assert calls[-1]["address"] == "local"
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    assert ray_cluster.connect_ray(None) == "the Ray cluster running on this machine (address auto, RAY_ADDRESS)"
    assert ray_cluster.connect_ray("local") == ray_cluster.PRIVATE_INSTANCE  # --ray-address comes first
    assert [call["address"] for call in calls] == ["local", "auto", "local"]
