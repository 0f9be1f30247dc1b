"""Which Ray cluster a doctor check runs in: a private local instance, unless ``--ray-address`` (``auto``: ``ray start
--head`` here) or ``RAY_ADDRESS`` names one. ``ray.init`` to an address that does not answer retries for minutes, so
joining is bounded: a TCP connection, then ``ray.init``, each within :func:`connect_timeout_s` seconds."""

from __future__ import annotations

import contextlib
import math
import os
import socket
import threading
from collections.abc import Callable

CONNECT_TIMEOUT_S = 30.0
TIMEOUT_VARIABLE = "AVSPO_RAY_CONNECT_TIMEOUT_S"
PRIVATE_INSTANCE = "a private Ray instance started for the check"


def connect_timeout_s() -> float:
    """The bound on joining a cluster: ``AVSPO_RAY_CONNECT_TIMEOUT_S`` when set, else :data:`CONNECT_TIMEOUT_S`."""
    text = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    if not text:
        return CONNECT_TIMEOUT_S
    with contextlib.suppress(ValueError):
        if math.isfinite(value := float(text)) and value > 0:
            return value
    raise ValueError(f"{TIMEOUT_VARIABLE}={text!r}: expected a number of seconds above 0")


def connect_ray(address: str | None, runtime_env: dict | None = None) -> str:
    """Start or join the cluster the check runs in, with ``runtime_env`` for this job; returns where, in words.
    ConnectionError: the address does not answer; TimeoutError: Ray cannot join it in time (each naming it)."""
    import ray  # here, not at the top: `avspo doctor --host trl` loads this module and runs without Ray

    timeout_s = connect_timeout_s()
    common = {"include_dashboard": False, "log_to_driver": False, "runtime_env": runtime_env}
    given = "--ray-address" if address else "RAY_ADDRESS"
    address = address or os.environ.get("RAY_ADDRESS") or "local"
    if address == "local":
        ray.init(address="local", num_cpus=1, **common)
        return PRIVATE_INSTANCE
    if address == "auto":
        where = f"the Ray cluster running on this machine (address auto, {given})"
    else:
        where = f"the Ray cluster at {address} ({given})"
        _answers(address, where, timeout_s)
    _within(timeout_s, where, lambda: ray.init(address=address, **common))
    return where


def _answers(address: str, where: str, timeout_s: float) -> None:
    """A TCP connection to a ``[ray://]host:port`` address within ``timeout_s``; a ConnectionError naming it when
    none opens (any other address is left to ray.init, bounded all the same)."""
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as err:
        reason = f"no answer within {timeout_s:g} s" if isinstance(err, TimeoutError) else err.strerror or str(err)
        raise ConnectionError(
            f"cannot reach {where}: {reason}. Start the cluster (ray start --head), correct the address, or unset "
            "RAY_ADDRESS and leave out --ray-address to check in a private Ray instance"
        ) from None


def _within(timeout_s: float, where: str, join: Callable[[], object]) -> None:
    """Run ``join`` (a ``ray.init``, which cannot be interrupted) in a daemon thread and wait at most ``timeout_s``
    for it; a TimeoutError names the address when it is still running then."""
    errors: list[BaseException] = []

    def attempt() -> None:
        try:
            join()
        except BaseException as err:
            errors.append(err)

    thread = threading.Thread(target=attempt, name="avspo-ray-join", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TimeoutError(
            f"{where} answers but Ray could not join it within {timeout_s:g} s (is it a Ray head's GCS port, "
            f"of the same Ray version?); set {TIMEOUT_VARIABLE} to wait longer"
        )
    if errors:
        raise errors[0]
