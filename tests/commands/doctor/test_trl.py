"""``avspo doctor --host trl``: versions, supported or not, whether AVSPOGRPOTrainer applies; exit codes."""

import pytest
from release_wheels import distribution_metadata
from trl import GRPOTrainer

from avspo_plugin.commands.doctor import trl as doctor
from avspo_plugin.commands.main import main


def test_the_installed_trl_applies(capsys):
    assert main(["doctor", "--host", "trl"]) == 0
    out = capsys.readouterr().out
    assert "versions: avspo-plugin " in out and ", trl 1.16.0, transformers " in out
    assert "[ok] TRL 1.16.0 is supported (TRL 1.6.0 to 1.16.0)" in out
    assert ("[ok] AVSPOGRPOTrainer applies: it overrides GRPOTrainer._calculate_rewards, "
            "GRPOTrainer._generate_and_score_completions, ") in out  # fmt: skip
    assert "[FAIL]" not in out


@pytest.mark.parametrize("version, code, verdict", [
    ("1.17.0", 0, "[warn] TRL 1.17.0 is newer than the tested range (TRL 1.6.0 to 1.16.0): the adapter's checks of "
                  "the code it relies on pass, but whether it behaves as in the tested releases is untested"),
    ("1.5.1", 1, "[FAIL] TRL 1.5.1 is not supported: the adapter supports TRL 1.6.0 to 1.16.0 (releases before 1.6.0 "
                 "differ in the code it relies on)"),
])
def test_a_newer_trl_release_is_a_warning_and_an_older_one_does_not_apply(
    tmp_path, monkeypatch, capsys, version, code, verdict
):
    """A TRL distribution of another version first on the path (host_versions' policy, the same for every host):
    the metadata that importlib.metadata finds, the installed TRL's code."""
    monkeypatch.syspath_prepend(str(distribution_metadata(tmp_path, "trl", version)))  # importlib's caches invalidated
    assert main(["doctor", "--host", "trl"]) == code
    assert verdict in capsys.readouterr().out


def test_a_changed_private_method_does_not_apply(monkeypatch, capsys):
    """A TRL whose _calculate_rewards took other parameters: the override would not receive them."""
    monkeypatch.setattr(GRPOTrainer, "_calculate_rewards", lambda self, inputs, prompts: None)
    assert main(["doctor", "--host", "trl"]) == 1
    out = capsys.readouterr().out
    assert ("[FAIL] GRPOTrainer._calculate_rewards(self, inputs, prompts) differs from the override "
            "(self, inputs, prompts, completions, completion_ids_list)") in out  # fmt: skip


def test_trl_not_installed(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "installed_trl", lambda: None)
    assert main(["doctor", "--host", "trl"]) == 1
    assert ("[FAIL] TRL is not installed in this Python environment: pip install -c constraints.txt \".[trl]\" in the "
            "avspo checkout") in capsys.readouterr().out


def test_the_host_option_is_in_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["doctor", "--help"])
    assert "--host {verl,trl,openrlhf}" in capsys.readouterr().out


def test_an_override_that_hands_on_args_and_kwargs_applies_while_its_named_parameters_match(monkeypatch, capsys):
    """train(self, resume_from_checkpoint, *args, **kwargs) takes whatever GRPOTrainer.train takes after its first."""
    assert main(["doctor", "--host", "trl"]) == 0
    assert "GRPOTrainer.train with their parameters" in capsys.readouterr().out
    monkeypatch.setattr(GRPOTrainer, "train", lambda self, checkpoint=None, trial=None: None)
    assert main(["doctor", "--host", "trl"]) == 1
    assert ("[FAIL] GRPOTrainer.train(self, checkpoint, trial) differs from the override "
            "(self, resume_from_checkpoint, *args, **kwargs)") in capsys.readouterr().out


def test_the_first_line_is_the_verdict(monkeypatch, capsys):
    """Ready or not comes first, then the detail; not ready names the first failed check."""
    assert main(["doctor", "--host", "trl"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "avspo doctor: READY" and lines[1] == "avspo doctor --host trl"
    monkeypatch.setattr(doctor, "installed_trl", lambda: None)
    assert main(["doctor", "--host", "trl"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("avspo doctor: NOT READY: TRL is not installed in this Python environment: "
                        "pip install -c constraints.txt \".[trl]\" in the avspo checkout")
    assert lines[1] == "avspo doctor --host trl"


def test_third_party_warnings_are_folded_into_one_line_and_shown_when_a_check_fails(monkeypatch, capsys):
    """What the libraries write on stderr while the checks import them (Python warnings, loggers, file descriptor 2)
    is one line after the detail when the checks pass, and in full when one fails."""
    import os
    import warnings

    def checks_that_import_noisy_libraries(status):
        def run(args):
            warnings.warn("torchtitan engine is not available", UserWarning, stacklevel=1)
            os.write(2, b"WARNING:No supported accelerator detected.\n")
            print("  [ok] the check")
            if status:
                print("  [FAIL] the other check: broken")
            return status
        return run

    monkeypatch.setattr(doctor, "run", checks_that_import_noisy_libraries(0))
    assert main(["doctor", "--host", "trl"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[:2] == ["avspo doctor: READY", "  [ok] the check"]
    assert len(lines) == 3 and lines[2].startswith("  (2 third-party warning(s) on stderr while the checks imported")
    assert 'e.g. "UserWarning: torchtitan engine is not available"' in lines[2] and "not about avspo, not shown" in lines[2]
    assert "torchtitan" not in captured.err
    monkeypatch.setattr(doctor, "run", checks_that_import_noisy_libraries(1))
    assert main(["doctor", "--host", "trl"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "avspo doctor: NOT READY: the other check: broken"
    assert "third-party output on stderr during the checks (it may bear on the failure):" in out
    assert "    WARNING:No supported accelerator detected." in out
