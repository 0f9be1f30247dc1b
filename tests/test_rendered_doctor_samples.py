"""The `avspo doctor` samples of the host pages are recorded runs (renderer/doctor_samples.py): current with the
defaults, evidence, hooks and versions they print, and named, with the command that records them again, once they are
not."""

import json
import shutil

from avspo_plugin.verl.hooks import HOOKS, TRL_PATCH
from renderer import doctor_samples
from renderer.docs_pages import PACKAGED_EVIDENCE
from renderer.doctor_samples import DOCTOR_SAMPLES, outdated_records, shortened


def test_every_recorded_sample_is_current():
    assert outdated_records() == {}


def test_each_record_is_a_ready_doctor_run_of_the_command_its_page_shows():
    for name, sample in DOCTOR_SAMPLES.items():
        record = json.loads(sample.record_path.read_text())
        assert record["exit_code"] == 0 and record["output"].startswith("avspo doctor: READY"), name
        assert record["command"].endswith("avspo " + " ".join(sample.arguments))
        assert str(doctor_samples.ROOT) not in record["output"]  # the checkout's path is written $PWD


def test_the_verl_sample_lists_the_registrys_hooks_and_quotes_the_packaged_evidence():
    output = json.loads(DOCTOR_SAMPLES["doctor-verl"].record_path.read_text())["output"]
    listed = [line.split(": ")[0].removeprefix(doctor_samples.HOOK_LINE) for line in output.splitlines()
              if line.startswith(doctor_samples.HOOK_LINE)]
    expected = [hook.name for hook in HOOKS] + [TRL_PATCH["name"]]
    assert listed == expected * 2  # this process, then a fresh Ray actor
    assert json.loads(PACKAGED_EVIDENCE.read_text())["acting_evidence"] in output


def test_a_repeated_list_of_hooks_is_printed_once():
    hooks_a = ["      - a: in place", "      - b: ready"]
    lines = ["head", *hooks_a, "middle", *hooks_a, "other", "      - a: missing", "tail"]
    kept, left_out = shortened(lines)
    assert kept == ["head", *hooks_a, "middle", "      (the same 2 lines as above)", "other", "      - a: missing", "tail"]
    assert left_out == 1
    assert shortened(["x", *hooks_a]) == (["x", *hooks_a], 0)


def test_a_record_made_under_other_evidence_or_versions_is_named_with_its_command(tmp_path, monkeypatch):
    for sample in DOCTOR_SAMPLES.values():
        shutil.copy(sample.record_path, tmp_path)
    monkeypatch.setattr(doctor_samples, "SAMPLES_DIR", tmp_path)
    verl = tmp_path / "doctor-verl.json"
    record = json.loads(verl.read_text())
    record["packaged_evidence"]["acting_evidence"] = "an older sentence"
    verl.write_text(json.dumps(record))
    trl = tmp_path / "doctor-trl.json"
    record = json.loads(trl.read_text())
    record["versions"]["trl"] = "1.5.0"
    trl.write_text(json.dumps(record))
    assert outdated_records() == {
        verl: "recorded under other packaged_evidence: python -m renderer record doctor-verl",
        trl: "recorded under other versions: python -m renderer record doctor-trl",
    }


def test_a_local_build_tag_is_the_same_release():
    assert doctor_samples.released({"torch": "2.13.0+cpu", "trl": "1.16.0"}) == {"torch": "2.13.0", "trl": "1.16.0"}
