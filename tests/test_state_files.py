"""State files beside checkpoints: written whole or not at all, read back with every field's type checked,
and a damaged file named with what to do. verl's AVSPO state here; TRL's in
tests/trl/test_trainer.py."""

import json
import os
import re
from pathlib import Path

import pytest
import torch

from avspo_plugin.allowed import Number
from avspo_plugin.config import AVSPOConfig, ConfigError
from avspo_plugin.core import AVSPOSession
from avspo_plugin.names import STATE_FILE
from avspo_plugin.state_files import StateFileError, check_fields, write_json
from avspo_plugin.verl import checkpoint


def avspo_state():
    session = AVSPOSession()
    session.group_advantages(torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]), list("aaaabbbb"), AVSPOConfig())
    session.close_step(step=1)
    return session.state_dict()


def avspo_state_with(field: tuple[str, ...], value):
    """A valid saved AVSPO state with the field at path ``field`` set to ``value``."""
    state = avspo_state()
    *outer, last = field
    target = state
    for key in outer:
        target = target[key]
    target[last] = value
    return state


# ------------------------------------------------------------------ writing


def test_write_is_atomic_and_flushed_to_disk(tmp_path, monkeypatch):
    flushed = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (flushed.append(os.path.realpath(f"/proc/self/fd/{fd}")), real_fsync(fd)))
    path = write_json(str(tmp_path / "deeper" / "state.json"), {"a": 1})
    assert json.loads(Path(path).read_text()) == {"a": 1} and os.listdir(tmp_path / "deeper") == ["state.json"]
    # the temporary file, then the folder that holds the rename
    assert flushed[0].startswith(f"{path}.tmp-") and flushed[-1] == str(tmp_path / "deeper")


@pytest.mark.parametrize("failure", ["dump", "rename"])
def test_a_write_that_fails_leaves_the_previous_file_and_no_temporary_file(tmp_path, monkeypatch, failure):
    path = tmp_path / STATE_FILE
    write_json(str(path), {"step": 1})
    if failure == "rename":
        monkeypatch.setattr(os, "replace", lambda *args: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises((TypeError, OSError)):
        write_json(str(path), {"step": object() if failure == "dump" else 2})
    assert json.loads(path.read_text()) == {"step": 1} and os.listdir(tmp_path) == [STATE_FILE]


def test_verl_states_round_trip(tmp_path):
    state = avspo_state()
    assert checkpoint.write_state(str(tmp_path), state) == str(tmp_path / STATE_FILE)
    assert checkpoint.read_state(str(tmp_path)) == state


# ------------------------------------------------------------------ reading damaged files

DAMAGED = {
    "empty": (lambda text: "", "is empty: it is damaged or was cut short while written"),
    "cut short": (lambda text: text[: len(text) // 2], r"is not valid JSON \(.*\): it is damaged or was cut short"),
    "not UTF-8": (lambda text: "\udcff" + text, r"is not UTF-8 text \(byte offset 0\)"),
}


def write_damaged(path, text, damage):
    path.write_bytes(damage(text).encode("utf-8", "surrogateescape"))


@pytest.mark.parametrize("damage", DAMAGED)
def test_a_damaged_avspo_state_names_the_file_and_what_to_do(tmp_path, damage):
    path = tmp_path / STATE_FILE
    change, problem = DAMAGED[damage]
    write_damaged(path, json.dumps(avspo_state()), change)
    with pytest.raises(StateFileError, match=rf"^{path} {problem}.*To start the AVSPO state afresh, delete {path} "
                                             r".*or resume from an earlier checkpoint \(trainer.resume_mode=resume_path"):
        checkpoint.read_state(str(tmp_path))


@pytest.mark.parametrize(
    "field, value, message",
    [
        (("threshold", "tau"), "0.3", "field threshold.tau should be a number, found str '0.3'"),
        (("threshold", "step"), 2.5, "field threshold.step should be an integer, found float 2.5"),
        (("threshold", "prev_reward_mean"), [0.5], "field threshold.prev_reward_mean should be null or a number"),
        (("warnings", "stagnation", "fired_step"), True, "field warnings.stagnation.fired_step should be null or an integer, found bool True"),
        (("logged_steps",), None, "field logged_steps should be an integer, found NoneType None"),
        (("warnings", "entropy_collapse"), None, "field warnings.entropy_collapse should be an object"),
        (("threshold",), "x", "field threshold should be null or an object, found str 'x'"),
    ],
)
def test_every_field_of_the_avspo_state_has_its_type_checked(tmp_path, field, value, message):
    state = avspo_state_with(field, value)
    (tmp_path / STATE_FILE).write_text(json.dumps(state))
    with pytest.raises(StateFileError, match=rf"{tmp_path / STATE_FILE} cannot be resumed: avspo checkpoint state: "
                                             rf"{message}.*delete"):
        checkpoint.read_state(str(tmp_path))
    with pytest.raises(ValueError, match=message):  # the same check wherever the state comes from (OpenRLHF)
        AVSPOSession().load_state_dict(state)


def test_a_missing_nested_field_is_named(tmp_path):
    state = avspo_state()
    del state["warnings"]["stagnation"]["streak"]
    (tmp_path / STATE_FILE).write_text(json.dumps(state))
    with pytest.raises(StateFileError, match=r"field warnings.stagnation.streak is missing \(it should be an integer\)"):
        checkpoint.read_state(str(tmp_path))


# ------------------------------------------------------------------ every field's range

INT64 = "an integer >= 0 and <= 2**63 - 1"
WARNINGS = ("stagnation", "entropy_collapse", "inert_trigger")


@pytest.mark.parametrize(
    "field, value, allowed",
    [
        (("threshold", "tau"), float("nan"), "a finite number"),
        (("threshold", "tau"), 1.5, "a number in [0.0, 1.0]"),
        (("threshold", "tau"), -0.25, "a number in [0.0, 1.0]"),
        (("threshold", "prev_reward_mean"), float("inf"), "a finite number"),
        (("threshold", "prev_reward_mean"), float("nan"), "a finite number"),
        (("threshold", "step"), -3, INT64),
        (("threshold", "step"), 2**63, INT64),
        (("logged_steps",), -1, INT64),
        *((("warnings", name, "streak"), -2, INT64) for name in WARNINGS),
        *((("warnings", name, "fired_step"), -1, INT64) for name in WARNINGS),
    ],
    ids=lambda x: ".".join(x) if isinstance(x, tuple) else repr(x),
)
def test_every_field_of_the_avspo_state_has_its_range_checked(tmp_path, field, value, allowed):
    state = avspo_state_with(field, value)
    path = tmp_path / STATE_FILE
    path.write_text(json.dumps(state))  # Python's JSON writes and reads NaN and Infinity
    message = f"field {'.'.join(field)} is {value!r}; allowed: {allowed}"
    with pytest.raises(StateFileError, match=rf"^{path} cannot be resumed: avspo checkpoint state: {re.escape(message)}\. "
                                             "To start the AVSPO state afresh"):
        checkpoint.read_state(str(tmp_path))
    with pytest.raises(ValueError, match=re.escape(message)):
        AVSPOSession().load_state_dict(state)


def test_a_number_of_the_right_type_is_named_with_its_range_not_its_type():
    spec = {"a": (None, Number(0.0, 1.0))}
    with pytest.raises(ValueError, match=r"^s: field a is 1.5; allowed: a number in \[0.0, 1.0\]$"):
        check_fields({"a": 1.5}, spec, "s")
    with pytest.raises(ValueError, match=r"^s: field a is nan; allowed: a finite number$"):
        check_fields({"a": float("nan")}, spec, "s")
    with pytest.raises(ValueError, match=r"^s: field a should be null or a number, found str '0.5'$"):
        check_fields({"a": "0.5"}, spec, "s")
    check_fields({"a": None}, spec, "s")
    check_fields({"a": 1}, spec, "s")


@pytest.mark.parametrize("key, value", [("alpha", 2.0), ("num_virtual", 0), ("threshold_mode", "sometimes"),
                                        ("threshold_min", float("nan"))])
def test_a_saved_setting_is_refused_in_the_words_its_config_key_uses(key, value):
    """One vocabulary: the state field that saves a key declares the key's own check, so both say the same."""
    with pytest.raises(ConfigError) as config_error:
        AVSPOConfig(**{key: value})
    allowed = str(config_error.value).split(" is invalid: allowed ", 1)[1]
    state = avspo_state()
    state["settings"][key] = value
    with pytest.raises(ValueError, match=re.escape(f"field settings.{key} is {value!r}; allowed: {allowed}")):
        AVSPOSession().load_state_dict(state)
