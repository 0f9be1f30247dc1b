"""``avspo doctor`` (``--host verl``, the default): is the ``avspo`` estimator registered where verl computes advantages, and if not, why?

verl loads plugins on ``import verl``, swallowing their import errors, and computes advantages in a Ray actor: the
checks run in this process and in a fresh Ray actor, then on the run's composed hydra config. Nothing here imports
``avspo_plugin.verl`` before checking: that import itself registers the estimator.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import sys
import traceback
from importlib import metadata
from typing import Any

from avspo_plugin.config import AVSPOConfig, ConfigError, inert_keys
from avspo_plugin.figures import share
from avspo_plugin.host_versions import VERL, release
from avspo_plugin.launch import evidence_sentence, outlook_at_paper_acr, what_runs
from avspo_plugin.names import ESTIMATOR, MONITOR_STATE_FILE, PLUGIN_MODULE, STATE_FILE
from avspo_plugin.threshold_modes import MEASURE_ONLY_MODE, THRESHOLD_MODES

from .findings import NOT_READY, PYTHON, READY, installed_versions, line, versions_line
from .ray_cluster import connect_ray

ENTRY_POINT_GROUP = "verl.plugins"
ENV_KEYS = ("VERL_USE_EXTERNAL_PLUGINS", "VERL_USE_EXTERNAL_MODULES")
ENTRY_POINTS_SINCE = "0.9"  # the first verl release that loads `verl.plugins` entry points on import
PACKAGED_CONFIG = "pkg://avspo_plugin.verl.config"
VERL_CONFIG, VERL_CONFIG_NAME = "pkg://verl.trainer.config", "ppo_trainer"  # main_ppo's defaults
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # avspo_plugin/
VALIDATED_LINE = "[validate_config] All configuration checks passed"  # printed by verl; the doctor says it itself
AUGMENTED_SHARE_WARNING = 0.5  # below this share of collapsed groups augmented, "may train as GRPO on most steps"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "overrides", nargs="*",
        help="hydra overrides of the run to check, exactly as given to main_ppo (e.g. algorithm.adv_estimator=avspo "
             "+algorithm.avspo.alpha=0.3)",
    )
    parser.add_argument(
        "--config-path", default=VERL_CONFIG,
        help=f"hydra config directory or pkg:// module, as main_ppo's --config-path (default: {VERL_CONFIG}, what "
             f"python -m verl.trainer.main_ppo composes; the plugin's: {PACKAGED_CONFIG})",
    )
    parser.add_argument("--config-name", default=VERL_CONFIG_NAME,
                        help=f"hydra config name, as main_ppo's --config-name (default: {VERL_CONFIG_NAME}; the "
                             "plugin's: avspo_trainer)")
    parser.add_argument("--no-config", action="store_true", help="skip the config check")
    parser.add_argument("--no-ray", action="store_true", help="skip the check in a fresh Ray actor")
    parser.add_argument(
        "--ray-address", default=None,
        help="check in an actor of this running Ray cluster (auto: the one started on this machine by ray start "
             "--head); default: RAY_ADDRESS when set, else a private local instance started and stopped for the check",
    )


def probe() -> dict[str, Any]:
    """This process's view: versions, switches, registration, and the reason when not registered."""
    entry_point = _entry_point()
    report: dict[str, Any] = {
        "pid": os.getpid(),
        "host": os.uname().nodename,
        "python": PYTHON,
        "env": {key: os.environ.get(key) for key in ENV_KEYS},
        "versions": installed_versions(("avspo-plugin", "verl", "torch", "ray")),
        "entry_point": None if entry_point is None else f"{entry_point.name} = {entry_point.value}",
        "verl_imported": imported_verl(),
    }
    try:
        import verl  # noqa: F401  (loads the plugins, as in a training process)

        report["verl_imported"] = imported_verl()
        from verl.trainer.ppo import core_algos
    except Exception:
        report["verl_error"] = traceback.format_exc()
        return report
    registered = core_algos.ADV_ESTIMATOR_REGISTRY.get(ESTIMATOR)
    report["registered"] = bool(getattr(registered, "avspo_estimator", False))
    report["registered_as"] = None if registered is None else f"{registered.__module__}.{registered.__qualname__}"
    if not report["registered"]:
        report["why_not"] = why_not_registered(registered, report)
    if PLUGIN_MODULE in sys.modules:
        # verl loaded the adapter, so importing its parts registers nothing new; the trainer modules are imported, as
        # in a training process, so every hook is placed or reported.
        from avspo_plugin.verl import hooks, versions
        from avspo_plugin.verl.metric_routing import metrics_route
        from avspo_plugin.verl.model_build_fix import TRL_PATCH_NAME, trl_patch_status

        report["hooks"] = hooks.hook_status(load=True)
        report["metrics_route"] = metrics_route()
        report["untested_verl"] = versions.untested_verl(versions.verl_version())
        report["refused_verl"] = versions.refused_verl(versions.verl_version())
        report["trl_patch"] = {TRL_PATCH_NAME: trl_patch_status()}
    return report


def imported_verl() -> dict[str, str | None]:
    """The folder of the ``verl`` that ``import verl`` finds here, and its ``__version__`` once imported."""
    spec = None
    with contextlib.suppress(ImportError, ValueError):
        spec = importlib.util.find_spec("verl")
    version = getattr(sys.modules.get("verl"), "__version__", None)
    return {"path": next(iter(spec.submodule_search_locations or []), None) if spec is not None else None,
            "version": None if version is None else str(version)}


def why_not_registered(registered: Any, report: dict[str, Any]) -> list[str]:
    """The reasons ``avspo`` is not registered in this process, most specific first."""
    if registered is not None:
        return [
            f"the name {ESTIMATOR!r} belongs to {report['registered_as']}, another plugin's estimator; "
            "remove that plugin or rename its estimator"
        ]
    reasons = []
    verl_version = report["versions"]["verl"]
    entry_point = _entry_point()
    policy = (os.environ.get("VERL_USE_EXTERNAL_PLUGINS") or "auto").strip().lower()
    if entry_point is None:
        reasons.append(
            f"no {ESTIMATOR!r} entry point in group {ENTRY_POINT_GROUP}: avspo-plugin is not installed in this "
            f"Python environment ({sys.executable}); pip install it there"
        )
    if verl_version and release(verl_version) < release(ENTRY_POINTS_SINCE):
        reasons.append(
            f"verl {verl_version} does not load {ENTRY_POINT_GROUP} entry points (verl >= 0.9 does): set "
            f"VERL_USE_EXTERNAL_MODULES={PLUGIN_MODULE} in every process (for Ray: "
            f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES={PLUGIN_MODULE})"
        )
    elif policy == "none":
        reasons.append(
            "VERL_USE_EXTERNAL_PLUGINS=none turns verl's entry-point loading off: unset it, or set "
            f"VERL_USE_EXTERNAL_MODULES={PLUGIN_MODULE}"
        )
    elif policy != "auto" and ESTIMATOR not in {name.strip() for name in policy.split(",")}:
        reasons.append(f"VERL_USE_EXTERNAL_PLUGINS={policy} does not name {ESTIMATOR!r}: add it to the list")
    if entry_point is not None and not reasons:
        try:
            entry_point.load()
        except Exception:
            reasons.append(
                f"loading the entry point {entry_point.value} raises (verl caught this on import and logged it "
                "only at DEBUG level):\n" + traceback.format_exc()
            )
        else:
            reasons.append(
                f"the entry point {entry_point.value} loads without error now but was not loaded when verl was "
                "imported (was the package installed after this process imported verl?)"
            )
    return reasons


class ProbeActor:
    """A fresh Ray actor that runs :func:`probe` in its own process."""

    def probe(self) -> dict[str, Any]:
        return probe()


def probe_in_ray_actor(address: str | None = None, runtime_env: dict | None = None) -> dict[str, Any]:
    """:func:`probe` in a new actor of the running Ray session, else of :func:`connect_ray`'s; ``ray`` says where."""
    import ray  # here, not at the top: `avspo doctor --host trl` loads this module and runs without Ray

    started = not ray.is_initialized()
    where = connect_ray(address) if started else "this process's Ray session"
    actor = None
    try:
        actor = ray.remote(num_cpus=0)(ProbeActor).options(runtime_env=runtime_env or {}).remote()
        return {**ray.get(actor.probe.remote(), timeout=600), "ray": where}
    finally:
        if actor is not None:
            ray.kill(actor)
        if started:
            ray.shutdown()


def compose_config(config_path: str, config_name: str, overrides: list[str]):
    """The run's config as ``main_ppo --config-path ... --config-name ... overrides`` composes it."""
    from hydra import compose, initialize_config_dir, initialize_config_module

    if config_path == PACKAGED_CONFIG:
        # By path: importing avspo_plugin.verl (what pkg:// does) registers the estimator, and may be what fails.
        config_path = os.path.join(PACKAGE_ROOT, "verl", "config")
    if config_path.startswith("pkg://"):
        context = initialize_config_module(config_path.removeprefix("pkg://"), version_base=None)
    else:
        context = initialize_config_dir(os.path.abspath(config_path), version_base=None)
    with context:
        return compose(config_name, overrides=list(overrides))


def config_findings(config: Any) -> list[tuple[str, str]]:
    """(level, text) findings about a composed verl config; level is ok, warn or FAIL."""
    # Here, after the registration checks: importing the verl adapter registers the estimator.
    from omegaconf import OmegaConf

    from avspo_plugin.verl import run_config as rc
    from avspo_plugin.verl.hooks import hooks_for
    from avspo_plugin.verl.launch_guards import group_filtering_problem, uses_group_filtering
    from avspo_plugin.verl.monitor import launch_notes

    algorithm = config.algorithm
    misspelt = rc.misspelt_block_problem(algorithm)
    if misspelt is not None:
        return [("FAIL", misspelt)]
    estimator = algorithm.get("adv_estimator")
    try:
        features = rc.features_of(config)
        monitor = rc.monitor_config_from_algorithm(algorithm)
        avspo = rc.avspo_config_from_algorithm(algorithm) if rc.AVSPO in features else None
    except ConfigError as err:
        return [("FAIL", str(err))]
    if not features:
        return [("warn", f"algorithm.adv_estimator={estimator}: this run uses nothing of avspo: keep the estimator and "
                         "see collapse with algorithm.avspo_monitor.enable=true, or set algorithm.adv_estimator=avspo")]
    findings = []
    if avspo is not None:
        findings.append(("ok", "algorithm.avspo is valid; " + _not_default(avspo)))
        findings += [("warn", inert.message(rc.avspo_key_name))
                     for inert in inert_keys(avspo, rc.given_avspo_keys(algorithm))]
        findings += estimator_notes(avspo, OmegaConf.select(config, "actor_rollout_ref.rollout.n"),
                                    OmegaConf.select(config, "data.train_batch_size"))
    if rc.MONITOR in features:
        findings.append(("ok", f"algorithm.avspo_monitor is on beside algorithm.adv_estimator={estimator} (advantages "
                               f"untouched); {_not_default(monitor)}"))
    findings += [("warn", note) for note in launch_notes(config)]
    if uses_group_filtering(config):
        problem = group_filtering_problem(config)
        findings.append(("FAIL", problem) if problem else (
            "ok", "algorithm.filter_groups.enable=true: verl evicts the zero-variance groups before the estimator sees "
                  "them; collapse is counted on the groups as generated, before filtering"
                  + (f" (algorithm.avspo.threshold_mode={MEASURE_ONLY_MODE}: monitor only)" if avspo else ""),
        ))
    if algorithm.get("use_kl_in_reward"):
        findings.append(("warn", "algorithm.use_kl_in_reward=True: ACR then measures rewards that include the KL penalty"))
    if avspo is not None and algorithm.get("norm_adv_by_std_in_grpo") is False:
        findings.append(("ok", "algorithm.norm_adv_by_std_in_grpo=false: advantages are not divided by the group std"))
    trainer = config.trainer
    use_v1 = trainer.get("use_v1", False)
    sync_steps = OmegaConf.select(config, f"trainer.v1.{OmegaConf.select(config, 'trainer.v1.trainer_mode')}.parameter_sync_step")
    state_files = [name for feature, name in ((rc.AVSPO, STATE_FILE), (rc.MONITOR, MONITOR_STATE_FILE))
                   if feature in features]
    findings.append((
        "ok",
        f"trainer: {'v1 (default)' if use_v1 else 'legacy RayPPOTrainer'}"
        + (f", parameter_sync_step={sync_steps} (avspo/* folds the calls of a step)" if use_v1 and sync_steps else "")
        + f"; loggers {list(trainer.get('logger') or [])} receive avspo/*"
        + "".join(f"; state saved in {trainer.default_local_dir}/global_step_<N>/{name}" for name in state_files)
        + f" (resume_mode={trainer.resume_mode})",
    ))
    hooks = dict.fromkeys(hook.name for feature in features for hook in hooks_for(rc.trainer_of(config), feature))
    findings.append(("ok", f"verl functions this run wraps ({', '.join(rc.FEATURE_SETTING[f] for f in features)}): "
                           f"{len(hooks)}: {', '.join(hooks)}"))
    return findings


def verl_validation_findings(config: Any) -> list[tuple[str, str]]:
    """verl's own check of the config, as ``main_ppo`` runs it before Ray starts; what verl printed: warnings."""
    try:
        from verl.trainer.main_ppo import auto_set_device, need_critic, need_reference_policy, validate_config
    except ImportError as err:
        return [("warn", f"verl's own config check (main_ppo's validate_config) cannot be run with this verl: {err}")]
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            auto_set_device(config)
            validate_config(config=config, use_reference_policy=need_reference_policy(config),
                            use_critic=need_critic(config))
    except Exception as err:  # one line: hydra's instantiation errors span several
        flat = f"{type(err).__name__}: {' '.join(str(err).split())}" if str(err) else type(err).__name__
        return [("FAIL", f"verl refuses this config (validate_config, which main_ppo calls before Ray starts): {flat}")]
    notices = [text.strip() for text in printed.getvalue().splitlines()
               if text.strip() and not text.startswith(VALIDATED_LINE)]
    return [("ok", "verl's validate_config accepts it, as main_ppo checks it before Ray starts"),
            *(("warn", f"verl's validate_config: {notice}") for notice in notices)]


def estimator_notes(avspo: AVSPOConfig, n: int | None, prompts: int | None) -> list[tuple[str, str]]:
    """(level, text) findings on what runs for ``prompts`` prompts per step in groups of ``n``, and its trigger."""
    n, notes = None if n is None else int(n), []
    if n is not None and n < 2:
        notes.append(("warn", f"algorithm.adv_estimator=avspo with actor_rollout_ref.rollout.n={n}: each prompt has a "
                              "single response, so no group can collapse or be augmented (avspo/groups 0); set "
                              "rollout.n >= 2 for groups"))
    notes.append(("ok", f"this run: {what_runs(avspo, prompts, n)}"))
    mode = THRESHOLD_MODES[avspo.threshold_mode]
    if mode.can_stay_shut:
        notes.append(trigger_note(avspo, n, prompts))
    elif mode.launch_note is not None:
        notes.append(("ok", mode_note(avspo, prompts)))
    notes.append(("ok", f"evidence: {evidence_sentence()}"))
    return notes


def mode_note(avspo: AVSPOConfig, prompts: int | None) -> str:
    """The threshold mode's launch_note for ``prompts`` prompts per step (None: not set)."""
    batch = f"{prompts} prompts per step (data.train_batch_size)" if prompts else "a step's prompts"
    mode = THRESHOLD_MODES[avspo.threshold_mode]
    return f"algorithm.avspo.threshold_mode={mode.name}: " + mode.launch_note.format(batch=batch, **avspo.to_dict())


def trigger_note(avspo: AVSPOConfig, group_size: int | None, prompts: int | None) -> tuple[str, str]:
    """(level, text) on a mode whose trigger can stay shut (adaptive, fixed), this batch (:mod:`.launch`'s outlook)."""
    head = mode_note(avspo, prompts)
    advice = ("++algorithm.avspo.threshold_mode=always augments every collapsed group at every step, in any batch "
              "(docs/method/method.md).")
    if not prompts:
        return "warn", (f"{head}; data.train_batch_size is not set, so how often that happens is not known here: with "
                        f"many prompts per step seldom. {advice}")
    low, high = outlook_at_paper_acr(avspo, int(prompts), group_size)
    batch = (f"{prompts} prompt{'s' if prompts != 1 else ''} per step (data.train_batch_size) in groups of "
             f"actor_rollout_ref.rollout.n={group_size if group_size is not None else '(not set)'}")
    outlook = (f"at the ACR of the paper's GRPO runs with G = 8 ({low.acr:g}-{high.acr:g}) the trigger opens on "
               f"{share(low.open_steps, high.open_steps)} of steps and augments "
               f"{share(low.augmented_groups, high.augmented_groups)} of the collapsed groups")
    if prompts == 1:
        return "ok", (f"{head}. With {batch} a step's ACR is 0 or 1, so every step whose group collapsed opens it, as "
                      f"in the paper: {outlook}")
    if high.augmented_groups >= AUGMENTED_SHARE_WARNING:
        return "ok", f"{head}. With {batch}, {outlook}"
    return "warn", (f"{head}. With {batch}, {outlook}: this run may train as GRPO on most steps (avspo/triggered says "
                    f"which; a warning comes after stagnation_steps={avspo.stagnation_steps} such steps). {advice}")


def _not_default(config: Any) -> str:
    defaults = type(config)()
    changed = [f"{key}={value!r}" for key, value in config.to_dict().items() if getattr(defaults, key) != value]
    return f"not default: {', '.join(changed)}" if changed else "all defaults"


def run(args: argparse.Namespace) -> int:
    local = probe()
    print("avspo doctor")
    print(f"  versions: {versions_line(local['versions'], local['python'])}")
    print(f"  entry point: {ENTRY_POINT_GROUP} {local['entry_point'] or 'NOT INSTALLED'}")
    env = ", ".join(f"{key}={'(unset)' if value is None else value}" for key, value in local["env"].items())
    print(f"  env: {env}")
    failed = _print_imported_verl("this process", local)
    failed |= _print_registration("this process", local)
    config = None
    if not args.no_config:
        stock = (args.config_path, args.config_name) == (VERL_CONFIG, VERL_CONFIG_NAME)
        where = (f"{args.config_name} from {args.config_path}"
                 + (" (what python -m verl.trainer.main_ppo composes)" if stock else "")
                 + (f" with {' '.join(args.overrides)}" if args.overrides else ""))
        try:
            config = compose_config(args.config_path, args.config_name, args.overrides)
        except Exception as err:
            failed |= line("FAIL", f"config {where}: cannot compose: {err}")
        if config is not None:
            print(f"  config {where}:")
            try:
                findings = config_findings(config)
            except ImportError as err:
                findings = [("FAIL", f"cannot check algorithm.avspo: importing {PLUGIN_MODULE} fails: {err}")]
            if not any(level == "FAIL" for level, _ in findings):  # verl's launch would stop at the plugin's check
                findings += verl_validation_findings(config)
            for level, text in findings:
                failed |= line(level, text, indent=4)
    if not args.no_ray:
        try:
            remote = probe_in_ray_actor(args.ray_address, _user_runtime_env(config))
        except Exception as err:
            line("FAIL", f"fresh Ray actor: could not run the check: {err!r}")
            return NOT_READY
        where = f"a fresh Ray actor (pid {remote['pid']} on {remote['host']}, in {remote['ray']})"
        if remote["python"] == local["python"]:
            line("ok", f"{where} runs this Python: {remote['python']}")
        else:  # its workers would import another environment's packages than the ones checked here
            failed |= line("FAIL", f"{where} runs another Python, {remote['python']}, than this process's "
                                   f"{local['python']}: Ray's workers use another environment (a runtime_env's "
                                   "py_executable or conda, another node's install), so what is checked here is not "
                                   "what the run will import; start Ray from this environment")
        failed |= _print_registration(where, remote)
        if remote.get("versions") != local.get("versions"):
            line("warn", f"the Ray actor has other versions: {versions_line(remote['versions'], remote['python'])}")
    return NOT_READY if failed else READY


def _print_imported_verl(where: str, report: dict[str, Any]) -> bool:
    """Print which verl the process imports; True when there is none."""
    imported = report["verl_imported"]
    if imported["path"] is None:
        return line("FAIL", f"verl imported in {where}: none found on sys.path")
    line("ok", f"verl imported in {where}: {imported['version'] or 'version unknown'} from {imported['path']}")
    installed = report["versions"]["verl"]
    if installed and imported["version"] and installed != imported["version"]:
        line("warn", f"the pip-installed verl is {installed}, but {where} imports verl {imported['version']} from "
                     f"{imported['path']} (PYTHONPATH or the working directory comes first)")
    return False


def _print_registration(where: str, report: dict[str, Any]) -> bool:
    """Print one process's registration, its hooks and verl release; True when it is a failure."""
    if "verl_error" in report:
        return line("FAIL", f"{where}: import verl failed:\n{_indent(report['verl_error'])}")
    if not report["registered"]:
        line("FAIL", f"avspo NOT registered in {where}. Why:")
        print("\n".join(_indent(reason, "      - ") for reason in report["why_not"]))
        return True
    line("ok", f"avspo registered in {where}: {report['registered_as']}")
    if "hooks" not in report:
        return False
    hooks = {**report["hooks"], **report["trl_patch"]}
    missing = [name for name, state in hooks.items() if not state.startswith(("in place", "not needed", "ready"))]
    placed = sum(state.startswith("in place") for state in hooks.values())
    ready = sum(state.startswith("ready") for state in hooks.values())
    line("FAIL" if missing else "ok",
         f"hooks in {where}: {placed} of {len(hooks)} in place, {ready} ready (placed by the trainer of a run that "
         f"uses them), {len(hooks) - placed - ready - len(missing)} not needed, {len(missing)} missing; metrics via "
         f"{report['metrics_route']}")
    for name, state in hooks.items():
        print(f"      {'MISSING' if name in missing else '-'} {name}: {state}")
    verl_version, known = report["verl_imported"]["version"], VERL.tested
    if report.get("refused_verl"):
        return line("FAIL", report["refused_verl"])
    if report["untested_verl"]:
        line("warn", report["untested_verl"])
    elif verl_version in known:
        line("ok", f"verl {verl_version}: the hooks are checked with verl {', '.join(known)}")
    else:
        line("warn", f"verl {verl_version} is not a version the plugin was checked with ({', '.join(known)})")
    return bool(missing)


def _user_runtime_env(config: Any) -> dict | None:
    """The runtime env the run's config gives Ray (ray_kwargs.ray_init.runtime_env), if any."""
    if config is None:
        return None
    from omegaconf import OmegaConf

    runtime_env = OmegaConf.select(config, "ray_kwargs.ray_init.runtime_env")
    return OmegaConf.to_container(runtime_env, resolve=True) if runtime_env else None


def _entry_point() -> metadata.EntryPoint | None:
    return next((ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == ESTIMATOR), None)


def _indent(text: str, prefix: str = "      ") -> str:
    """``text`` with ``prefix`` before its first line and as much space before the others."""
    first, *rest = text.rstrip().splitlines() or [""]
    return "\n".join([prefix + first] + [" " * len(prefix) + more for more in rest])
