"""OpenRLHF's real code on constructed experiences, run for tests/openrlhf in a process of its own.

The patched 0.11.2 release runs in a subprocess (``python host.py patched ...``); the unmodified
releases run in an actor of a small Ray cluster that a subprocess starts with avspo's worker setup
hook (``python host.py runtime ...``, :class:`RuntimeRouteHost`). Both return the same report
(:func:`route_report`), which the tests
compare with the core and with each other.

OpenRLHF imports deepspeed, flash_attn and vllm at module level. Here, and only here, they are
empty stub modules; that is also why this never runs in pytest's own process, where other
packages would then take them for installed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import io
import math
import re
import runpy
import shlex
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import torch

HEAVY_MODULES = ("deepspeed", "flash_attn", "vllm")
TRAIN_MODULE = "openrlhf.cli.train_ppo_ray"
SAMPLES = 4  # n_samples_per_prompt in every scenario
ACTIONS = 6  # response tokens per experience row
CHUNKS = (3, 5, 2, 7, 4, 3)  # rows per experience, cycled: uneven micro-batches


class _StubModule(types.ModuleType):
    """Every attribute is a fresh placeholder class: usable as a base class, a type hint, a call."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        placeholder = type(name, (), {"__init__": lambda self, *args, **kwargs: None})
        setattr(self, name, placeholder)
        return placeholder


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in HEAVY_MODULES:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        module.__version__ = "0.0.0"
        return module

    def exec_module(self, module):
        pass


def stub_heavy_modules() -> None:
    if not any(isinstance(finder, _StubFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _StubFinder())


_loaded_sources: list[str] = []


def load_release(src: str) -> SimpleNamespace:
    """Import the OpenRLHF modules the tests use from ``src``, after forgetting any other copy."""
    for name in [name for name in sys.modules if name == "openrlhf" or name.startswith("openrlhf.")]:
        del sys.modules[name]
    sys.path[:] = [src] + [p for p in sys.path if p not in _loaded_sources]
    _loaded_sources.append(src)
    importlib.invalidate_caches()
    return SimpleNamespace(
        experience_maker=importlib.import_module("openrlhf.trainer.ppo_utils.experience_maker"),
        ppo_trainer=importlib.import_module("openrlhf.trainer.ppo_trainer"),
        experience=importlib.import_module("openrlhf.trainer.ppo_utils.experience"),
        kl_controller=importlib.import_module("openrlhf.trainer.ppo_utils.kl_controller"),
        utils=importlib.import_module("openrlhf.utils"),
        logging_utils=importlib.import_module("openrlhf.utils.logging_utils"),
    )


# ── Parsing train_ppo_ray's command line, stopping where training would begin ──


class _Parsed(BaseException):
    """Stops a launch once it has parsed its arguments: a signal, like SystemExit, that the avspo CLI's
    handling of errors (which catches Exception) lets through."""

    def __init__(self, args):
        super().__init__("parsed")
        self.namespace = args


@contextlib.contextmanager
def _stop_at_strategy(release: SimpleNamespace, ray_init_calls: list):
    """train() calls ray.init (recorded here, not run) and then get_strategy(args), which stops it.

    The runtime route's preflight, which runs right after ray.init, is recorded in the same list as
    "preflight" (tests/openrlhf/test_preflight.py runs it on a real Ray cluster).
    """
    import ray

    from avspo_plugin.openrlhf import preflight

    saved = ray.init, ray.is_initialized, release.utils.get_strategy, sys.argv, preflight.check_nodes

    def get_strategy(args):
        raise _Parsed(args)

    ray.is_initialized = lambda: False
    ray.init = lambda *args, **kwargs: ray_init_calls.append(kwargs)
    preflight.check_nodes = lambda *args, **kwargs: ray_init_calls.append("preflight")
    release.utils.get_strategy = get_strategy
    try:
        yield
    finally:
        ray.init, ray.is_initialized, release.utils.get_strategy, sys.argv, preflight.check_nodes = saved


def parse_patched(release: SimpleNamespace, argv: list[str]):
    """train_ppo_ray (the patched source) run as __main__: its parsed args and ray.init keyword arguments."""
    calls: list = []
    with _stop_at_strategy(release, calls):
        sys.argv = [TRAIN_MODULE, *argv]
        try:
            runpy.run_module(TRAIN_MODULE, run_name="__main__", alter_sys=True)
        except _Parsed as parsed:
            return parsed.namespace, calls
    raise AssertionError("train_ppo_ray finished without reaching get_strategy")


def parse_with_cli(release: SimpleNamespace, argv: list[str]):
    """``avspo openrlhf ARGV`` (the runtime route): its parsed args and ray.init keyword arguments."""
    from avspo_plugin.commands.main import main

    calls: list = []
    with _stop_at_strategy(release, calls):
        try:
            main(["openrlhf", *argv])
        except _Parsed as parsed:
            return parsed.namespace, calls
    raise AssertionError("avspo openrlhf finished without reaching get_strategy")


def outcome(parse, release: SimpleNamespace, argv: list[str]) -> dict:
    """What the command line does when it does not parse: exit status or exception, and the text shown."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            parse(release, argv)
        except SystemExit as exit_:
            return {"exit": exit_.code, "stdout": out.getvalue(), "stderr": err.getvalue()}
        except Exception as error:
            return {"error": type(error).__name__, "message": str(error)}
    return {"parsed": True}


# ── Constructed experiences ──


def prompt_rewards(kind: str, prompts: int, seed: int) -> torch.Tensor:
    """(prompts * SAMPLES,) float32 rewards in prompt order; the first prompts' groups are collapsed."""
    gen = torch.Generator().manual_seed(seed)
    if kind == "binary":
        pass_rate = torch.linspace(0.0, 1.0, prompts).unsqueeze(1)  # row 0 all fail, last row all pass
        rewards = (torch.rand(prompts, SAMPLES, generator=gen) < pass_rate).float()
    else:  # graded: quarters in [0, 1], two collapsed groups at 0.5 and at 0
        rewards = torch.randint(0, 5, (prompts, SAMPLES), generator=gen).float() / 4
        rewards[0] = 0.5
        rewards[1] = 0.0
    return rewards.reshape(-1)


def make_experiences(release: SimpleNamespace, rewards: torch.Tensor, seed: int, with_kl: bool) -> list:
    """Experiences as dynamic batching leaves them: rows shuffled, uneven sizes, index = rollout row."""
    gen = torch.Generator().manual_seed(seed + 1000)
    rows = torch.randperm(len(rewards), generator=gen)
    experiences, start, chunk = [], 0, 0
    while start < len(rows):
        take = rows[start : start + CHUNKS[chunk % len(CHUNKS)]]
        start, chunk = start + len(take), chunk + 1
        lengths = torch.randint(1, ACTIONS + 1, (len(take),), generator=gen)
        # The first two prompts' samples share one length: a length penalty keeps their groups collapsed.
        lengths[take < 2 * SAMPLES] = ACTIONS
        action_mask = torch.arange(ACTIONS).unsqueeze(0) < lengths.unsqueeze(1)
        kl = torch.rand(len(take), ACTIONS, generator=gen) * 0.1 if with_kl else torch.zeros(len(take), ACTIONS)
        experiences.append(
            release.experience.Experience(
                index=take.tolist(),
                rewards=rewards[take].clone(),
                kl=kl,
                action_mask=action_mask,
                response_length=lengths.float(),
                truncated=lengths == ACTIONS,
                info={"reward": rewards[take].clone()},
            )
        )
    return experiences


def summary(experiences: list) -> list[dict]:
    return [
        {
            "index": list(e.index),
            "action_mask": e.action_mask,
            "advantages": e.advantages,
            "returns": e.returns,
            "return": e.info["return"],
            "group_reward_std": e.info["group_reward_std"],
            "reward": e.info["reward"],
        }
        for e in experiences
    ]


def run_steps(release: SimpleNamespace, args, batches: list[tuple[str, int, int]], kl_coef: float) -> list[dict]:
    """Each batch (kind, prompts, seed) through compute_advantages_and_returns and the rollout stats."""
    from avspo_plugin.openrlhf import SESSION

    SESSION.reset()
    maker = release.experience_maker.RemoteExperienceMaker(
        None, None, None, None, release.kl_controller.FixedKLController(kl_coef), SimpleNamespace(args=args), None
    )
    trainer = object.__new__(release.ppo_trainer.BasePPOTrainer)
    steps = []
    for kind, prompts, seed in batches:
        experiences = make_experiences(release, prompt_rewards(kind, prompts, seed), seed, with_kl=kl_coef > 0)
        experiences = maker.compute_advantages_and_returns(experiences)
        steps.append({"experiences": summary(experiences), "stats": trainer._compute_rollout_stats(experiences)})
    return steps


# ── The report ──

DOTTED_BASE = ["--rollout.n_samples_per_prompt", str(SAMPLES)]
# Reward shaping that OpenRLHF applies around the group step: overlong penalty, reward clip.
DOTTED_SHAPING = [
    "--rollout.max_new_tokens", str(ACTIONS),
    "--reward.overlong_buffer_len", "3",
    "--reward.clip_range", "-0.8", "0.8",
    "--algo.advantage.avspo.reward_low", "-1",
]  # fmt: skip
AVSPO = ["--algo.advantage.estimator", "avspo"]
GROUP_NORM = ["--algo.advantage.estimator", "group_norm"]
MODE = "--algo.advantage.avspo.threshold_mode"

# name -> (command line, batches, KL coefficient)
DOTTED_SCENARIOS = {
    "trigger": (AVSPO + [MODE, "always"], [("binary", 6, 1)], 0.0),
    "never": (AVSPO + [MODE, "never"], [("binary", 8, 2)], 0.05),
    "group_norm": (GROUP_NORM, [("binary", 8, 2)], 0.05),
    "shaped_never": (AVSPO + DOTTED_SHAPING + [MODE, "never"], [("graded", 6, 2)], 0.05),
    "shaped_group_norm": (GROUP_NORM + DOTTED_SHAPING, [("graded", 6, 2)], 0.05),
    "shaped_trigger": (AVSPO + DOTTED_SHAPING + [MODE, "always"], [("graded", 6, 2)], 0.05),
    "adaptive": (AVSPO + [MODE, "adaptive", "--algo.advantage.avspo.threshold_init", "0.2"],
                 [("binary", 8, s) for s in (3, 4, 5)], 0.0),
}
OPTIONS = AVSPO + DOTTED_BASE + [
    "--algo.advantage.avspo.strategy", "opposite",
    "--algo.advantage.avspo.num_virtual", "2",
    "--algo.advantage.avspo.norm_by_std", "false",
]  # fmt: skip
BAD_ALPHA = AVSPO + DOTTED_BASE + ["--algo.advantage.avspo.alpha", "2"]
ONE_SAMPLE = AVSPO + ["--rollout.n_samples_per_prompt", "1"]


def route_report(release: SimpleNamespace, parse, tb_dir: str) -> dict:
    """One route (patched source or runtime route) on a 0.11-style release: CLI, advantages, stats, state, logs."""
    from avspo_plugin.openrlhf import SESSION

    report: dict = {"scenarios": {}}
    parser_methods = dict(vars(argparse.ArgumentParser))
    for name, (argv, batches, kl_coef) in DOTTED_SCENARIOS.items():
        args, _ = parse(release, DOTTED_BASE + argv)
        report["scenarios"][name] = run_steps(release, args, batches, kl_coef)

    args, ray_init_calls = parse(release, OPTIONS)
    report["options"] = dict(vars(args.algo.advantage.avspo))
    report["estimator"] = args.algo.advantage.estimator
    report["ray_init"] = ray_init_calls
    report["help"] = outcome(parse, release, ["--help"])
    report["bad_alpha"] = outcome(parse, release, BAD_ALPHA)
    report["one_sample"] = outcome(parse, release, ONE_SAMPLE)
    report["argument_parser_restored"] = dict(vars(argparse.ArgumentParser)) == parser_methods

    # The threshold state after the adaptive scenario goes into a checkpoint's client_states and
    # comes back; the step's status dict goes to TensorBoard through OpenRLHF's own logger.
    args, _ = parse(release, DOTTED_BASE + DOTTED_SCENARIOS["adaptive"][0])
    args.ckpt.save_steps = math.inf
    args.logger.tensorboard_dir = tb_dir
    run_steps(release, args, DOTTED_SCENARIOS["adaptive"][1], 0.0)
    trainer = object.__new__(release.ppo_trainer.BasePPOTrainer)
    trainer.args, trainer.wandb_logger = args, None
    trainer.tensorboard_logger = release.logging_utils.TensorboardLogger(args)
    client_states = {"episode": 0, "global_step": 3}
    # The actor's status adds its mean token entropy when --actor.entropy_coef is set.
    logs = {**report["scenarios"]["adaptive"][-1]["stats"], "entropy_loss": 0.2}
    trainer.save_logs_and_checkpoints(3, logs, client_states)
    report["logged"] = logs
    saved_state = SESSION.state_dict()
    trainer.tensorboard_logger.close()
    SESSION.reset()
    trainer.restore_best_checkpoint_state(client_states)
    report["checkpoint"] = {"saved": saved_state, "client_states": client_states, "restored": SESSION.state_dict()}
    report["tensorboard_tags"] = scalar_tags(Path(tb_dir) / args.logger.wandb.run_name)
    return report


def scalar_tags(log_dir: Path) -> list[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(log_dir))
    accumulator.Reload()
    return sorted(accumulator.Tags()["scalars"])


FLAT_BASE = ["--n_samples_per_prompt", str(SAMPLES)]
FLAT_SCENARIOS = {
    "trigger": (["--advantage_estimator", "avspo", "--avspo_threshold_mode", "always"], [("binary", 6, 1)], 0.0),
    "never": (["--advantage_estimator", "avspo", "--avspo_threshold_mode", "never"], [("binary", 8, 2)], 0.05),
    "group_norm": (["--advantage_estimator", "group_norm"], [("binary", 8, 2)], 0.05),
}


def flat_report(release: SimpleNamespace) -> dict:
    """The runtime route on a release with flat flag names (0.9.9 - 0.10.1)."""
    report: dict = {"scenarios": {}}
    for name, (argv, batches, kl_coef) in FLAT_SCENARIOS.items():
        args, _ = parse_with_cli(release, FLAT_BASE + argv)
        report["scenarios"][name] = run_steps(release, args, batches, kl_coef)
    args, _ = parse_with_cli(release, FLAT_BASE + FLAT_SCENARIOS["trigger"][0])
    report["threshold_mode"] = args.avspo_threshold_mode
    return report


def documented_command(doc: str) -> list[str]:
    """The arguments of the ``avspo openrlhf`` command shown in docs/using/openrlhf.md."""
    block = re.search(r"```bash\n(avspo openrlhf .*?)```", Path(doc).read_text(), flags=re.S)
    return shlex.split(block.group(1).replace("\\\n", " "))[2:]


class RuntimeRouteHost:
    """Ray actor: unmodified releases in a worker whose setup hook ran before anything imported OpenRLHF."""

    def report(self, dotted_src: str, flat_src: str, tb_dir: str, doc: str) -> dict:
        from avspo_plugin.import_patching import is_patched, is_watched
        from avspo_plugin.openrlhf import versions, worker_setup

        hooked_before_import = "openrlhf" not in sys.modules and all(is_watched(name) for name in worker_setup.PATCHES)
        stub_heavy_modules()
        release = load_release(dotted_src)
        installed = {
            "compute_advantages_and_returns": is_patched(
                release.experience_maker.RemoteExperienceMaker.compute_advantages_and_returns
            ),
            **{
                method: is_patched(getattr(release.ppo_trainer.BasePPOTrainer, method))
                for method in ("_compute_rollout_stats", "save_logs_and_checkpoints", "restore_best_checkpoint_state")
            },
        }
        report = {"hooked_before_import": hooked_before_import, "installed": installed}
        # The release's version, read from its dist-info as in an installed OpenRLHF.
        report["checked_versions"] = [versions.check_openrlhf()]
        report["dotted"] = route_report(release, parse_with_cli, tb_dir)
        args, _ = parse_with_cli(release, documented_command(doc))
        report["documented_command"] = {
            "estimator": args.algo.advantage.estimator,
            "n_samples_per_prompt": args.rollout.n_samples_per_prompt,
            "threshold_mode": args.algo.advantage.avspo.threshold_mode,
        }
        report["flat"] = flat_report(load_release(flat_src))
        report["checked_versions"].append(versions.check_openrlhf())
        return report


def run_runtime_route(dotted_src: str, flat_src: str, tb_dir: str, doc: str) -> dict:
    """The runtime route's report from an actor of a small local Ray cluster carrying avspo's setup hook."""
    import ray

    from avspo_plugin.openrlhf.worker_setup import SETUP_HOOK

    ray.init(
        address="local",
        num_cpus=1,
        object_store_memory=128 * 1024**2,
        include_dashboard=False,
        runtime_env={"worker_process_setup_hook": SETUP_HOOK},
    )
    try:
        actor = ray.remote(RuntimeRouteHost).remote()
        return ray.get(actor.report.remote(dotted_src, flat_src, tb_dir, doc), timeout=540)
    finally:
        ray.shutdown()


def main() -> None:
    """``host.py patched SRC OUT TB_DIR`` or ``host.py runtime SRC FLAT_SRC DOC OUT TB_DIR``: report saved to OUT."""
    route, *paths = sys.argv[1:]
    if route == "patched":
        src, out, tb_dir = paths
        stub_heavy_modules()
        report = route_report(load_release(src), parse_patched, tb_dir)
    else:
        src, flat_src, doc, out, tb_dir = paths
        report = run_runtime_route(src, flat_src, tb_dir, doc)
    torch.save(report, out)


if __name__ == "__main__":
    main()
