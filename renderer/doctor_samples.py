"""The `avspo doctor` samples of docs/using/verl.md, trl.md and openrlhf.md, each a recorded run of the command its
page shows (docs/using/samples/doctor-<host>.json), and which recorded samples are outdated.

``python -m renderer record doctor-verl`` (``doctor-trl``, ``doctor-openrlhf``; ``doctor`` for the three) runs the
command with the current code and keeps its output, exit code and what it depends on: the installed versions it
prints, and for verl the AVSPO defaults, the packaged evidence its launch warning quotes
(avspo_plugin/default_evidence.json) and the hook registry it lists. The page shows the output whole, the checkout's
path written ``$PWD``, but for one shortening said under it: a list of hooks printed twice (this process's, then a
fresh Ray actor's) is printed once. A record whose dependencies have changed since (a new default, a new study
landing in the packaged evidence, a hook added, another release installed) is outdated: ``python -m renderer
--check`` names it with the command that records it again (:func:`outdated_records`), as it does the verl demo's
record made under other defaults.

OpenRLHF is not installed here (it needs deepspeed, vllm and flash-attn, which the doctor does not import): its sample
runs with the released package of :data:`OPENRLHF_RELEASE` on ``PYTHONPATH``, unpacked from its wheel.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from avspo_plugin.config import AVSPOConfig
from avspo_plugin.verl.hooks import HOOKS, TRL_PATCH

from .docs_pages import PACKAGED_EVIDENCE, SAMPLES_DIR, VERL_DEMO_RECORD

ROOT = Path(__file__).resolve().parents[1]
USING = ROOT / "docs" / "using"
BEGIN = "<!-- BEGIN SAMPLE {name}: rendered by `python -m renderer` from docs/using/samples/{name}.json -->"
END = "<!-- END SAMPLE {name} -->"
OPENRLHF_RELEASE = "0.11.2"
# What the doctor's environment leaves out, so that the sample shows a plain install: a Ray cluster named by the
# caller's shell, verl's plugin switches.
UNSET = ("RAY_ADDRESS", "VERL_USE_EXTERNAL_PLUGINS", "VERL_USE_EXTERNAL_MODULES")
HOOK_LINE = "      - "


@dataclass(frozen=True)
class DoctorSample:
    host: str
    page: Path
    arguments: tuple[str, ...]
    # The distributions whose versions the output prints (a record made beside other releases is outdated).
    distributions: tuple[str, ...]
    # Whether the output quotes the AVSPO defaults, the packaged evidence and the hook registry (verl's launch check).
    quotes_the_run_config: bool = False

    @property
    def name(self) -> str:
        return f"doctor-{self.host}"

    @property
    def record_path(self) -> Path:
        return SAMPLES_DIR / f"{self.name}.json"

    def markers(self) -> tuple[str, str]:
        return BEGIN.format(name=self.name), END.format(name=self.name)


DOCTOR_SAMPLES = {sample.name: sample for sample in (
    DoctorSample("verl", USING / "verl.md",
                 ("doctor", "algorithm.adv_estimator=avspo", "actor_rollout_ref.rollout.n=8", "data.train_batch_size=256",
                  # the micro-batch sizes a run gives verl (its validate_config asks for them)
                  "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
                  "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
                  "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4"),
                 ("avspo-plugin", "verl", "torch", "ray"), quotes_the_run_config=True),
    DoctorSample("trl", USING / "trl.md", ("doctor", "--host", "trl"),
                 ("avspo-plugin", "trl", "transformers", "accelerate", "torch")),
    DoctorSample("openrlhf", USING / "openrlhf.md", ("doctor", "--host", "openrlhf", "--ray-address", "local"),
                 ("avspo-plugin", "torch", "ray")),
)}  # fmt: skip


def installed_versions(sample: DoctorSample) -> dict[str, str]:
    return {name: metadata.version(name) for name in sample.distributions}


def released(versions: dict[str, str]) -> dict[str, str]:
    """The versions without their local build tag (torch's ``+cpu``): the same release whatever wheel holds it."""
    return {name: version.split("+")[0] for name, version in versions.items()}


def run_config_inputs() -> dict:
    """What verl's launch check quotes: the AVSPO defaults, the packaged evidence, the verl functions it lists."""
    return {"defaults": AVSPOConfig().to_dict(),
            "packaged_evidence": json.loads(PACKAGED_EVIDENCE.read_text(encoding="utf-8")),
            "hooks": [hook.name for hook in HOOKS] + [TRL_PATCH["name"]]}


def record_doctor(name: str) -> dict:
    """Run the sample's command with the current code (a minute for verl, which starts Ray) and write its record."""
    sample = DOCTOR_SAMPLES[name]
    env = {key: value for key, value in os.environ.items() if key not in UNSET}
    with tempfile.TemporaryDirectory() as folder:
        command, shown = [sys.executable, "-m", "avspo_plugin.commands.main", *sample.arguments], "avspo"
        if sample.host == "openrlhf":
            release = unpack_openrlhf(Path(folder))
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(release), env.get("PYTHONPATH")]))
            shown = "PYTHONPATH=$RELEASE avspo"
        run = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
        output = run.stdout.replace(str(ROOT), "$PWD")
        if sample.host == "openrlhf":
            output = output.replace(str(release), "$RELEASE")
    if run.returncode != 0:
        raise RuntimeError(f"{shown} {' '.join(sample.arguments)} failed ({run.returncode}):\n{run.stdout[-3000:]}"
                           f"\n{run.stderr[-3000:]}")
    record = {
        "command": f"{shown} {' '.join(sample.arguments)}",
        "output": output,
        "exit_code": run.returncode,
        "versions": installed_versions(sample),
        **({"openrlhf_release": OPENRLHF_RELEASE} if sample.host == "openrlhf" else {}),
        **(run_config_inputs() if sample.quotes_the_run_config else {}),
        "recorded": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    SAMPLES_DIR.mkdir(parents=True, exist_ok=True)
    sample.record_path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return record


def unpack_openrlhf(folder: Path) -> Path:
    """A folder holding the ``openrlhf`` package and dist-info of OpenRLHF's released wheel (from the package index)."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--python-version",
                    "3.11", "--platform", "manylinux1_x86_64", "--disable-pip-version-check", "--quiet", "--dest",
                    str(folder), f"openrlhf=={OPENRLHF_RELEASE}"], check=True, timeout=600)  # fmt: skip
    (wheel,) = folder.glob("openrlhf-*.whl")
    return extract_openrlhf(wheel, OPENRLHF_RELEASE, folder / "release")


def extract_openrlhf(wheel: Path, version: str, folder: Path) -> Path:
    """``folder`` filled with the ``openrlhf`` package and dist-info of OpenRLHF's wheel ``wheel`` (release
    ``version``): on sys.path, importlib.metadata then finds the release's version (the OpenRLHF tests' too)."""
    purelib = f"openrlhf-{version}.data/purelib/"
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if member.startswith((purelib + "openrlhf/", f"openrlhf-{version}.dist-info/")):
                target = folder / member.removeprefix(purelib)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(member))
    return folder


def shortened(lines: list[str]) -> tuple[list[str], int]:
    """``lines`` with each list of hooks (lines starting ``HOOK_LINE``) that repeats an earlier one printed as one
    line, and the number of lines so left out."""
    kept, seen, left_out, index = [], [], 0, 0
    while index < len(lines):
        end = index
        while end < len(lines) and lines[end].startswith(HOOK_LINE):
            end += 1
        if end == index:
            kept.append(lines[index])
            index += 1
            continue
        block = lines[index:end]
        if block in seen:
            kept.append(f"{HOOK_LINE[:-2]}(the same {len(block)} lines as above)")
            left_out += len(block) - 1
        else:
            kept += block
            seen.append(block)
        index = end
    return kept, left_out


def doctor_sample(name: str) -> str:
    """The page's sample: the recorded command and output, and how it was recorded."""
    sample = DOCTOR_SAMPLES[name]
    record = json.loads(sample.record_path.read_text(encoding="utf-8"))
    lines, left_out = shortened(record["output"].rstrip("\n").splitlines())
    versions = ", ".join(f"{package} {version}" for package, version in record["versions"].items())
    note = (f"Recorded {record['recorded']} by `python -m renderer record {name}` (exit code {record['exit_code']}; "
            f"{versions}). The checkout's path is written `$PWD`")
    if "openrlhf_release" in record:
        note += (f"; `$RELEASE` is a folder holding OpenRLHF {record['openrlhf_release']}'s released package, unpacked "
                 "from its wheel (the doctor reads its source: deepspeed, vllm and flash-attn are not installed)")
    if left_out:
        note += "; a list of hooks the same as one printed above it is shortened to one line"
    return "\n".join(["```", f"$ {record['command']}", *lines, "```", "", note + "."])


def outdated_records() -> dict[Path, str]:
    """Each recorded sample made under other inputs than the current ones: why, and the command that records it again."""
    found = {}
    for name, sample in DOCTOR_SAMPLES.items():
        record = json.loads(sample.record_path.read_text(encoding="utf-8"))
        changed = [what for what, then, now in (
            ("versions", released(record["versions"]), released(installed_versions(sample))),
            *((key, record[key], value) for key, value in run_config_inputs().items() if sample.quotes_the_run_config),
        ) if then != now]  # fmt: skip
        if changed:
            found[sample.record_path] = f"recorded under other {', '.join(changed)}: python -m renderer record {name}"
    if json.loads(VERL_DEMO_RECORD.read_text(encoding="utf-8"))["defaults"] != AVSPOConfig().to_dict():
        found[VERL_DEMO_RECORD] = "recorded under other AVSPO defaults: python -m renderer record verl-demo"
    return found
