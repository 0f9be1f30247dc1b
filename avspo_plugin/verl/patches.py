"""What the plugin installs in a process when verl loads it, and why.

verl gives a registered estimator no way to log metrics, to check its config before the
first rollout, to keep state across a resume, or to see agent-loop sessions; it has no way to
choose prompts before generation, and no place for a monitor beside another estimator. Loading
the plugin therefore wraps, in memory (verl's files stay as installed), the verl functions listed
in :data:`HOOKS`. Only the launcher's checks and the trainers' ``__init__`` / ``_load_checkpoint``
are wrapped in every verl process (``Hook.always``); the trainer's ``__init__`` hook then places, in
the trainer process, the hooks of the features its config uses (``algorithm.adv_estimator=avspo``,
``algorithm.avspo_monitor.enable=true``, ``algorithm.avspo_selection.enable=true``;
:func:`features_of`, :func:`place_hooks`), so a run of another estimator without them touches
nothing else of verl:

* ``verl.utils.config.validate_config`` (the launcher's config check in ``main_ppo``): checks
  ``algorithm.avspo`` and every hook the run's trainer needs before Ray starts.
* ``verl.trainer.constants_ppo.get_ppo_ray_runtime_env`` (the Ray runtime env of ``run_ppo``):
  adds this module to ``VERL_USE_EXTERNAL_MODULES`` so the trainer process imports it with
  errors raised, never swallowed as verl does for entry points.
* the trainers' ``__init__`` (legacy ``RayPPOTrainer`` and the default ``PPOTrainer`` of
  ``verl.trainer.ppo.v1``): checks the config and the hooks again and makes sure ``avspo`` is
  registered in the trainer process, before any worker or rollout starts. verl's experimental
  fully-async trainer saves checkpoints without its parent's method, so configs of it (an
  ``async_training`` block) are refused, in the launcher and again when it loads a checkpoint.
* the v1 trainer's ``step`` (one global step, however many mini-batch updates): closes the AVSPO
  step (Eq. 12 once per step, the warnings fed with the step's ACR and ``actor/entropy``), and the
  monitor's.
* ``verl.trainer.ppo.ray_trainer.compute_advantage`` (and the v1 utils' binding of it), which both
  trainers call with exactly the rows any estimator gets: the ACR monitor
  (:mod:`avspo_plugin.verl.monitor`) counts them there.
* the v1 ``compute_advantage_for_multi_trajectories``: ``avspo`` sees one row per agent-loop
  session, as GRPO does (:mod:`avspo_plugin.verl.multi_output`).
* the trainers' ``_save_checkpoint`` / ``_load_checkpoint``: the AVSPO state (and the monitor's)
  beside verl's checkpoint, written before verl records the checkpoint as the latest.
* ``verl.utils.tracking.Tracking.log``: the step's ``avspo/*`` metrics merged into what the
  trainer logs (the estimator's through verl's own channel instead, when the installed verl has
  that of ``patches/verl-estimator-metrics.patch``, ``core_algos.register_adv_est_metrics``).
* prompt selection (:mod:`avspo_plugin.verl.selection`): the trainers' dataloader builders
  (legacy ``RayPPOTrainer._create_dataloader``, v1 ``PPOTrainer._init_dataloader``) rebuild the
  training dataloader over the selecting sampler; the rewards reach it through the legacy
  ``compute_advantage`` and the v1 ``compute_advantage_for_multi_trajectories``, the v1 uids
  through ``PPOTrainer._fetch_one_gen_batch``; its state goes with the checkpoint hooks above.

Each target is checked when its module loads: a missing function, or one whose parameters are
not those the wrapper relies on, is a warning naming it and the installed verl version, and a run
that uses a feature needing it refuses to start (:func:`require_hooks`). The trainer modules are heavy,
so their checks wait until something imports them (a post-import hook); every patch is applied
once per process, whichever copy of this package asks. A module function placed after other verl
modules imported it by name (``from ... import compute_advantage``) is wrapped there too.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import numbers
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import verl
from verl.trainer.ppo import core_algos

from ..config import ConfigError
from ..host_versions import VERL, UnsupportedHostVersion
from ..import_patching import after_import, is_patched, rebind, wrap
from ..names import ESTIMATOR, METRIC_PREFIX, PLUGIN_MODULE
from . import checkpoint, selection
from .estimator import avspo_config_from_algorithm, compute_avspo_outcome_advantage, config_entry, session
from .model_build_fix import skip_missing_trl_value_head, trl_installed
from .monitor import launch_notes, monitor, monitor_config_from_algorithm, uses_monitor
from .monitor import observe as observe_for_monitor
from .multi_output import session_advantages
from .selection import selection_config_from_algorithm, uses_selection

ENTROPY_KEY = "actor/entropy"
# verl.trainer.ppo.v1.replay_buffer.FILTER_GROUPS_REWARD_METRIC: the filter metric that is the sequence reward.
FILTER_GROUPS_REWARD_METRIC = "reward"
# verl.trainer.ppo.v1.replay_buffer.DAPO_FILTERED_REWARD_COUNTS_KEY: {shared value: groups} of the groups
# its group filtering evicted in the step, in the step's metrics until the trainer logs them.
DAPO_FILTERED_REWARD_COUNTS_KEY = "_dapo_filtered_reward_counts"
EXTERNAL_MODULES_ENV = "VERL_USE_EXTERNAL_MODULES"
# Name of the upstream channel (patches/verl-estimator-metrics.patch) in verl's core_algos.
METRICS_CHANNEL = "register_adv_est_metrics"

logger = logging.getLogger("avspo_plugin.verl")


# verl releases whose hooks the test suite or compat/check_verl.sh exercised (docs/compatibility.md).
KNOWN_GOOD_VERL = VERL.tested

# threshold_mode of a run that only measures (plain GRPO advantages, every metric).
MONITOR_ONLY = "never"

# What a hook serves: the estimator (algorithm.adv_estimator=avspo), prompt selection, the ACR monitor.
AVSPO = "avspo"
SELECTION = "selection"
MONITOR = "monitor"
FEATURES = (AVSPO, SELECTION, MONITOR)
# How each feature is named in the refusal of a run that lacks its hooks.
FEATURE_SETTING = {
    AVSPO: "algorithm.adv_estimator=avspo",
    SELECTION: "algorithm.avspo_selection.enable=true",
    MONITOR: "algorithm.avspo_monitor.enable=true",
}


class RegistrationError(RuntimeError):
    """The name ``avspo`` is taken in verl's registry by an estimator that is not this package's."""


class HookError(RuntimeError):
    """A verl function the run needs could not be hooked (absent, or not the shape the plugin knows)."""


# ----------------------------------------------------------------------------------------------
# Registration


def register_estimator() -> None:
    """Register ``avspo`` in verl's registry, unless this package's estimator already holds the name.

    verl raises when a name is registered twice with different function objects, which happens
    when this file is imported as two module objects; any copy's estimator is equivalent (they
    share the process's session), so the first one stays.
    """
    registry = core_algos.ADV_ESTIMATOR_REGISTRY
    existing = registry.get(ESTIMATOR)
    if existing is None:
        core_algos.register_adv_est(ESTIMATOR)(compute_avspo_outcome_advantage)
    elif not getattr(existing, "avspo_estimator", False):
        raise RegistrationError(
            f"verl already has an advantage estimator named {ESTIMATOR!r}: "
            f"{getattr(existing, '__module__', '?')}.{getattr(existing, '__qualname__', existing)}, "
            "which is not avspo_plugin's; remove the other plugin or rename its estimator"
        )


def uses_avspo(config: Any) -> bool:
    """Whether a full verl config (DictConfig or dict) selects ``algorithm.adv_estimator=avspo``."""
    algorithm = config_entry(config, "algorithm")
    return str(config_entry(algorithm, "adv_estimator")) == ESTIMATOR


def trainer_of(config: Any) -> str:
    """Which verl trainer a full config runs: ``v1`` (``trainer.use_v1``, verl 0.9's default) or ``legacy``."""
    return "v1" if config_entry(config_entry(config, "trainer"), "use_v1") else "legacy"


def features_of(config: Any) -> tuple[str, ...]:
    """What of the plugin a full verl config uses: AVSPO (the estimator), SELECTION (prompt selection),
    MONITOR (the ACR monitor beside another estimator)."""
    used = {AVSPO: uses_avspo(config), SELECTION: uses_selection(config), MONITOR: uses_monitor(config)}
    return tuple(name for name in FEATURES if used[name])


def sessions_of(config: Any) -> list:
    """The sessions a full verl config feeds: the estimator's (avspo), the monitor's (another estimator)."""
    return [live for live, used in ((session(), uses_avspo(config)), (monitor(), uses_monitor(config))) if used]


def refuse_unsupported_trainer(config: Any) -> None:
    """verl's experimental fully-async trainer (configs with ``async_training``) is refused for avspo and for
    prompt selection (it builds its own dataloader and saves checkpoints without the trainer's method)."""
    if uses_selection(config) and config_entry(config, "async_training") is not None:
        raise HookError(
            "algorithm.avspo_selection does not run in verl's experimental fully-async trainer "
            "(verl.experimental.fully_async_policy); use verl's default trainer (trainer.use_v1=true)."
        )
    if uses_avspo(config) and config_entry(config, "async_training") is not None:
        raise HookError(
            "algorithm.adv_estimator=avspo does not run in verl's experimental fully-async trainer "
            "(verl.experimental.fully_async_policy): its FullyAsyncTrainer saves checkpoints without the trainer "
            "method that keeps the AVSPO state (tau, warning streaks), so a resumed run would silently restart the "
            "adaptive threshold. Use verl's default trainer (trainer.use_v1=true), whose "
            "trainer.v1.trainer_mode=separate_async is asynchronous too."
        )


def uses_group_filtering(config: Any) -> bool:
    """Whether a full verl config turns DAPO's group filtering on (``algorithm.filter_groups.enable``)."""
    return bool(config_entry(config_entry(config_entry(config, "algorithm"), "filter_groups"), "enable"))


def group_filtering_problem(config: Any) -> str | None:
    """Why a config that augments with AVSPO, or selects prompts, under DAPO's group filtering cannot run
    (None when it can)."""
    metric = config_entry(config_entry(config_entry(config, "algorithm"), "filter_groups"), "metric")
    if uses_selection(config) and uses_group_filtering(config) and str(metric) != FILTER_GROUPS_REWARD_METRIC:
        return (
            f"algorithm.avspo_selection.enable=true cannot run with algorithm.filter_groups.metric={metric}: verl "
            "evicts the groups whose filter metric is constant before the advantage step, and prompt selection "
            "learns from those evicted groups by their shared reward; with another metric than "
            f"{FILTER_GROUPS_REWARD_METRIC!r} it would read a group as collapsed whose rewards may differ. Set "
            f"algorithm.filter_groups.metric={FILTER_GROUPS_REWARD_METRIC}, or turn one of them off."
        )
    if not (uses_avspo(config) and uses_group_filtering(config)):
        return None
    mode = avspo_config_from_algorithm(config_entry(config, "algorithm")).threshold_mode
    if mode == MONITOR_ONLY:
        return None
    return (
        f"algorithm.adv_estimator=avspo with algorithm.avspo.threshold_mode={mode} cannot run with "
        "algorithm.filter_groups.enable=true (DAPO's group filtering): verl evicts the zero-variance groups "
        "(every response rewarded alike) before the advantage estimator sees them, and AVSPO's augmentation acts "
        "only on those collapsed groups, so it would never trigger and the run would silently be GRPO. Either turn "
        f"filtering off, or keep it with algorithm.avspo.threshold_mode={MONITOR_ONLY} (monitor only), which works "
        "with filtering: collapse is then counted on the groups as generated, before filtering."
    )


def refuse_with_group_filtering(config: Any) -> None:
    """Raise ConfigError for AVSPO's augmentation or prompt selection combined with DAPO's group filtering."""
    problem = group_filtering_problem(config)
    if problem is not None:
        raise ConfigError(problem)


def untested_verl(version: str) -> str | None:
    """Why ``version`` of verl is outside the tested range (host_versions.VERL; None when inside). An untested
    release runs with this warning (a hook it lacks still refuses the run); a known-broken one is refused by
    :func:`check_verl_release`."""
    try:
        return None if VERL.known_broken(version) else VERL.untested(version)
    except ValueError:
        return f"verl {version} is not a version number; the plugin is tested with verl {VERL.tested_range()}"


def refused_verl(version: str) -> str | None:
    """Why ``version`` of verl is refused (older than host_versions.VERL.broken_below), None when it is not."""
    try:
        VERL.require(version, PLUGIN_MODULE)
    except UnsupportedHostVersion as err:
        return str(err)
    except ValueError:
        return None
    return None


def tested_range() -> str:
    return VERL.tested_range()


_warned_versions: set[str] = set()


def check_verl_release() -> None:
    """host_versions' policy for the imported verl: refused when known broken (UnsupportedHostVersion), a warning
    once per process when untested."""
    version = verl_version()
    refused = refused_verl(version)
    if refused is not None:
        raise UnsupportedHostVersion(refused)
    problem = untested_verl(version)
    if problem is not None and version not in _warned_versions:
        _warned_versions.add(version)
        logger.warning("avspo_plugin: %s", problem)


def check_launch_config(config: Any) -> None:
    """The launcher's check (no Ray yet): ``algorithm.avspo`` valid, the trainer's hooks in place.

    Raises ConfigError or HookError.
    """
    refuse_unsupported_trainer(config)
    if uses_avspo(config):
        avspo_config_from_algorithm(config.algorithm)
    refuse_with_group_filtering(config)
    if features_of(config):
        check_verl_release()
    # Read even when off: a misspelt key of a block the user wrote is an error, not a silent default.
    selection_config_from_algorithm(config_entry(config, "algorithm"))
    monitor_config_from_algorithm(config_entry(config, "algorithm"))
    for feature in features_of(config):
        require_hooks(trainer_of(config), feature)


def prepare_trainer(config: Any) -> None:
    """The trainer process's check, before workers start: registered here, config valid and in
    force, every hook of the run's trainer in place."""
    refuse_unsupported_trainer(config)
    selection_config_from_algorithm(config_entry(config, "algorithm"))
    refuse_with_group_filtering(config)
    place_hooks(config)
    if uses_selection(config):
        require_hooks(trainer_of(config), SELECTION)
    for note in launch_notes(config):
        logger.warning(note)
    if uses_monitor(config):
        monitor().configure(config.algorithm)
        require_hooks(trainer_of(config), MONITOR)
    if not uses_avspo(config):
        return
    # verl's own unit tests clear the registry; a run must not depend on the import order.
    register_estimator()
    session().configure(config.algorithm)
    require_hooks(trainer_of(config), AVSPO)
    logger.info("avspo estimator registered in process %d with %s", os.getpid(), session().config)


def refuse_unhooked_overrides(trainer_class: type, config: Any) -> None:
    """Raise HookError when ``trainer_class`` (a subclass of a hooked verl trainer) overrides a method the run
    needs hooked without calling the parent's: the plugin's hook would never run.

    "Calls the parent's" is read from the override's code: it names the method (``super().<name>(...)`` or
    ``Parent.<name>(self, ...)``).
    """
    for feature in features_of(config):
        # Either trainer's hooks: the class, not trainer.use_v1, says which verl trainer it extends.
        for hook in hooks_for(None, feature):
            hooked = _hooked_class(trainer_class, hook)
            if hooked is None:
                continue
            override = inspect.getattr_static(trainer_class, hook.attribute, None)
            if override is None or is_patched(override) or _calls_by_name(override, hook.attribute):
                continue
            owner = next(cls for cls in trainer_class.__mro__ if hook.attribute in cls.__dict__)
            raise HookError(
                f"{FEATURE_SETTING[feature]} cannot run with the trainer class {_qualified(trainer_class)}: "
                f"{_qualified(owner)}.{hook.attribute} overrides {hook.name} without calling it, so the plugin's hook "
                f"({hook.purpose}) would never run. Call super().{hook.attribute}(...) in the override, or run verl's "
                f"{_qualified(hooked)}."
            )


def _hooked_class(trainer_class: type, hook: Hook) -> type | None:
    """The verl class of ``hook`` among ``trainer_class``'s bases, when it is a hooked method of a trainer."""
    if hook.owner is None or hook.attribute == "__init__":
        return None
    for cls in trainer_class.__mro__[1:]:
        if cls.__name__ == hook.owner and cls.__module__ == hook.module:
            return cls
    return None


def _calls_by_name(function: Any, name: str) -> bool:
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    stack = [code] if code is not None else []
    while stack:
        code = stack.pop()
        if name in code.co_names:
            return True
        stack.extend(const for const in code.co_consts if inspect.iscode(const))
    return False


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# ----------------------------------------------------------------------------------------------
# Metrics


def selection_metrics() -> dict[str, float]:
    """The ``avspo/selection/*`` metrics since the last log, when this process's trainer selects prompts."""
    run = selection.active()
    return {} if run is None else run.pop_metrics()


def step_metrics(data: Mapping, step: int | None, live=None) -> dict[str, float]:
    """The ``avspo/*`` metrics of the step being logged: the calls of ``live`` (default: the estimator's
    session) since the last log, folded into one step, with the warning flags (the entropy one fed from
    ``actor/entropy``).

    A checkpoint saved during this step (verl saves before it logs) gets the state again, with the
    step's entropy observed.
    """
    live = session() if live is None else live
    metrics = live.pop_metrics(step=step, entropy=_number(data.get(ENTROPY_KEY)))
    folder = live.take_checkpoint_folder()
    if folder is not None:
        checkpoint.write_state(folder, live.state_dict(), live.state_file)
    return {METRIC_PREFIX + name: value for name, value in metrics.items()}


def verl_metrics_channel() -> Callable | None:
    """verl's estimator metrics channel (``core_algos.register_adv_est_metrics``), if this verl has it."""
    return getattr(core_algos, METRICS_CHANNEL, None)


def metrics_route() -> str:
    """How ``avspo/*`` metrics reach verl's tracker in this process."""
    if verl_metrics_channel() is not None:
        return f"verl's estimator metrics channel (core_algos.{METRICS_CHANNEL})"
    return "the Tracking.log hook"


def collect_for_verl(metrics: Mapping, global_step: int | None = None, **kwargs: Any) -> dict[str, float]:
    """The metrics function given to verl's channel: called once per logged step, before logging."""
    return step_metrics(metrics, global_step)


collect_for_verl.avspo_estimator = True


def _log_with_avspo_metrics(original: Callable) -> Callable:
    @functools.wraps(original)
    def log(self, data, step, *args, **kwargs):
        backend = kwargs.get("backend", args[0] if args else None)
        # A log to a subset of backends is not the step's main log: leave the metrics pending.
        if backend is None and isinstance(data, Mapping):
            # The estimator's metrics take verl's own channel where it has one; the monitor's never do (the
            # channel calls the metrics function of the run's estimator, which is not ours).
            extra = {
                **(step_metrics(data, step) if verl_metrics_channel() is None else {}),
                **step_metrics(data, step, monitor()),
                **selection_metrics(),
            }
            if extra:
                data = {**data, **extra}
        return original(self, data, step, *args, **kwargs)

    return log


# ----------------------------------------------------------------------------------------------
# Launcher and trainer hooks


def _validate_config_with_avspo(original: Callable) -> Callable:
    @functools.wraps(original)
    def validate_config(config, *args, **kwargs):
        check_launch_config(config)
        return original(config, *args, **kwargs)

    return validate_config


def _runtime_env_with_plugin(original: Callable) -> Callable:
    @functools.wraps(original)
    def get_ppo_ray_runtime_env(*args, **kwargs):
        runtime_env = original(*args, **kwargs)
        config = kwargs.get("config", args[0] if args else None)
        if config is not None and features_of(config):
            refuse_unsupported_trainer(config)
            env_vars = runtime_env.setdefault("env_vars", {})
            current = env_vars.get(EXTERNAL_MODULES_ENV, os.environ.get(EXTERNAL_MODULES_ENV, ""))
            env_vars[EXTERNAL_MODULES_ENV] = with_plugin_module(current)
        return runtime_env

    return get_ppo_ray_runtime_env


def with_plugin_module(modules: str) -> str:
    """A ``VERL_USE_EXTERNAL_MODULES`` value that also imports this plugin (kept once, order kept)."""
    names = [name.strip() for name in modules.split(",") if name.strip()]
    if PLUGIN_MODULE not in names:
        names.append(PLUGIN_MODULE)
    return ",".join(names)


def _trainer_init(original: Callable) -> Callable:
    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        config = kwargs.get("config", args[0] if args else None)
        prepare_trainer(config)
        refuse_unhooked_overrides(type(self), config)
        return original(self, *args, **kwargs)

    return __init__


def _v1_step(original: Callable) -> Callable:
    @functools.wraps(original)
    def step(self, metrics, *args, **kwargs):
        batch = original(self, metrics, *args, **kwargs)
        for live in sessions_of(self.config):
            # Groups verl's group filtering evicted never reach the estimator: counted here, so the
            # step's ACR and its split are over the groups as generated.
            filtered = metrics.get(DAPO_FILTERED_REWARD_COUNTS_KEY)
            if isinstance(filtered, Mapping) and filtered:
                live.avspo.observe_filtered_groups(filtered, int(self.config.actor_rollout_ref.rollout.n))
            # One global step is one step of Eq. 12, whatever parameter_sync_step splits it into; it
            # closes before verl saves the step's checkpoint.
            live.close_step(step=self.global_steps, entropy=_number(metrics.get(ENTROPY_KEY)))
        return batch

    return step


def _multi_trajectories_with_avspo(original: Callable) -> Callable:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def compute_advantage_for_multi_trajectories(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        run = selection.active()
        if run is not None and run.trainer == "v1":
            data = arguments["data"]
            run.observe_uids(list(data.non_tensor_batch["uid"]), selection.sequence_scores(data))
        if str(arguments["adv_estimator"]) != ESTIMATOR:
            return original(*args, **kwargs)
        data, batch_keys = arguments.pop("data"), arguments.pop("batch_keys")
        # verl's own compute_advantage, as its GRPO route calls it, on each session's final output.
        compute = sys.modules[original.__module__].compute_advantage
        return session_advantages(data, batch_keys, functools.partial(compute, **arguments))

    return compute_advantage_for_multi_trajectories


def _trainer_save_checkpoint(original: Callable) -> Callable:
    @functools.wraps(original)
    def _save_checkpoint(self, *args, **kwargs):
        run = selection.active()
        if run is not None:
            path = selection.write_state(checkpoint.saved_step_folder(self.config.trainer, self.global_steps), run)
            logger.info("prompt-selection state saved to %s", path)
        for live in sessions_of(self.config):
            live.close_step(step=self.global_steps)
            folder = checkpoint.saved_step_folder(self.config.trainer, self.global_steps)
            # Before verl records this folder as the latest checkpoint: a run killed in between resumes
            # from the previous one, never from a folder without AVSPO state.
            path = checkpoint.write_state(folder, live.state_dict(), live.state_file)
            live.await_log(folder)
            logger.info("AVSPO state saved to %s", path)
        return original(self, *args, **kwargs)

    return _save_checkpoint


def _trainer_load_checkpoint(original: Callable) -> Callable:
    @functools.wraps(original)
    def _load_checkpoint(self, *args, **kwargs):
        refuse_unsupported_trainer(self.config)  # FullyAsyncTrainer inherits this method, not _save_checkpoint's hook
        result = original(self, *args, **kwargs)
        run = selection.active()
        if run is not None and getattr(self, "global_steps", 0):
            folder = checkpoint.resumed_step_folder(self.config.trainer, self.global_steps)
            if selection.read_state(folder, run):
                logger.info("prompt-selection state restored from %s", folder)
        for live in sessions_of(self.config) if getattr(self, "global_steps", 0) else ():
            folder = checkpoint.resumed_step_folder(self.config.trainer, self.global_steps)
            state = checkpoint.read_state(folder, live.state_file)
            if state is not None:
                live.load_state_dict(state)
                logger.info("AVSPO state restored from %s: %s", folder, checkpoint.describe_state(live.state_dict()))
        return result

    return _load_checkpoint


def _dataloader_with_selection(kind: str) -> Callable[[Callable], Callable]:
    def make_wrapper(original: Callable) -> Callable:
        @functools.wraps(original)
        def build(self, *args, **kwargs):
            result = original(self, *args, **kwargs)
            selection.attach(self, kind)
            return result

        return build

    return make_wrapper


def _evict_with_selection(original: Callable) -> Callable:
    @functools.wraps(original)
    def _evict_terminal_groups(self, global_steps, partition_id, eviction_reasons, *args, **kwargs):
        run = selection.active()
        if run is not None and run.trainer == "v1":
            # (stale, DAPO-filtered, failed uids, counts): the filtered ones, each with the reward its group shared.
            filtered = eviction_reasons[1]
            shared = getattr(self, "_dapo_classification_cache", {}).get(partition_id, {})
            values = {uid: shared[uid] for uid in filtered if shared.get(uid) is not None}
            if len(values) != len(filtered):
                logger.warning(
                    "prompt selection: verl evicted %d group(s) whose shared reward this verl does not expose "
                    "(ReplayBuffer._dapo_classification_cache); they are not learnt from", len(filtered) - len(values),
                )  # fmt: skip
            run.observe_evicted(values)
        return original(self, global_steps, partition_id, eviction_reasons, *args, **kwargs)

    return _evict_terminal_groups


def _fetch_with_prompt_ids(original: Callable) -> Callable:
    @functools.wraps(original)
    def _fetch_one_gen_batch(self, *args, **kwargs):
        batch = original(self, *args, **kwargs)
        run = selection.active()
        if run is not None:
            uids = list(batch["uid"])
            columns = {key: list(batch[key]) for key in (run.config.id_key, "extra_info") if key in batch.keys()}
            run.remember(uids, columns, len(uids))
        return batch

    return _fetch_one_gen_batch


def _compute_advantage_observed(original: Callable) -> Callable:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def compute_advantage(*args, **kwargs):
        arguments = signature.bind(*args, **kwargs).arguments
        data = arguments["data"]
        run = selection.active()
        # The v1 trainer reaches this function through compute_advantage_for_multi_trajectories, observed there.
        if run is not None and run.trainer == "legacy":
            rows = data.non_tensor_batch
            ids = selection.ids_of_rows(rows, len(data), run.config.id_key, "the step's batch")
            run.observe(ids, selection.sequence_scores(data))
        # Both trainers reach this function with exactly the rows the estimator gets.
        observe_for_monitor(data, arguments.get("config"), arguments["adv_estimator"])
        return original(*args, **kwargs)

    return compute_advantage


@dataclass(frozen=True)
class Hook:
    """``module.owner.attribute`` (owner None: a module function) is wrapped by ``make_wrapper``.

    parameters: the leading parameter names the wrapper relies on (checked when the module loads);
    trainer: the verl trainer whose runs need it (``v1``, ``legacy``; None: both);
    features: what needs it (AVSPO: runs of the estimator; SELECTION: runs with prompt selection).
    """

    module: str
    owner: str | None
    attribute: str
    make_wrapper: Callable[[Callable], Callable]
    purpose: str
    parameters: tuple[str, ...] = ()
    trainer: str | None = None
    features: tuple[str, ...] = FEATURES
    # Placed in every verl process when its module loads (the checks that must see every run); the others
    # only in the trainer process of a run whose config uses their feature (:func:`place_hooks`).
    always: bool = False

    @property
    def name(self) -> str:
        return ".".join(part for part in (self.module, self.owner, self.attribute) if part)

    def target(self, module) -> Any:
        return module if self.owner is None else getattr(module, self.owner, None)

    def problem(self, module) -> str | None:
        """Why this hook cannot be placed in ``module`` (None when it can, or is placed)."""
        owner = self.target(module)
        if owner is None:
            return f"{self.module} has no {self.owner}"
        original = owner.__dict__.get(self.attribute) if isinstance(owner, type) else getattr(owner, self.attribute, None)
        if original is None:
            return f"{self.module}.{self.owner + '.' if self.owner else ''}{self.attribute} does not exist"
        if is_patched(original):
            return None
        try:
            names = tuple(inspect.signature(original).parameters)
        except (TypeError, ValueError):
            return f"{self.name} has no readable signature"
        if names[: len(self.parameters)] != self.parameters:
            return f"{self.name} takes {names}, not the {self.parameters} the plugin's wrapper relies on"
        return None

    def check(self, module) -> None:
        """When ``module`` loads: a hook that cannot be placed is recorded and reported; an ``always`` hook is placed."""
        problem = self.problem(module)
        if problem is None:
            HOOK_PROBLEMS.pop(self.name, None)
            if self.always:
                self.place(module)
            return
        HOOK_PROBLEMS[self.name] = problem
        # Prompt selection is opt-in and checked with verl 0.9.1 only: its hooks missing from another verl
        # concern only runs that turn it on (which then refuse to start), so they are not a warning for all.
        logger.log(
            logging.WARNING if AVSPO in self.features else logging.INFO,
            "avspo_plugin cannot hook %s (%s) in verl %s: %s. Runs with %s will refuse to start; the plugin's "
            "hooks are known to work with verl %s.",
            self.name, self.purpose, verl_version(), problem, " or ".join(FEATURE_SETTING[f] for f in self.features),
            ", ".join(KNOWN_GOOD_VERL) if AVSPO in self.features else "0.9.1",
        )  # fmt: skip

    def place(self, module=None) -> None:
        """Wrap the target (importing its module first); a module function is also wrapped in every loaded verl
        module that imported it by name. A hook that cannot be placed stays unplaced: require_hooks reports it."""
        module = importlib.import_module(self.module) if module is None else module
        if self.problem(module) is not None:
            return
        owner = self.target(module)
        original = getattr(owner, self.attribute)
        if wrap(owner, self.attribute, self.make_wrapper) and self.owner is None:
            rebind(original, getattr(owner, self.attribute), "verl")


_TRAINER_CLASSES = (("verl.trainer.ppo.ray_trainer", "RayPPOTrainer", "legacy"), ("verl.trainer.ppo.v1.trainer_base", "PPOTrainer", "v1"))
_MULTI_TRAJECTORY_PARAMETERS = (
    "data", "batch_keys", "adv_estimator", "gamma", "lam", "num_repeat", "norm_adv_by_std_in_grpo", "config",
)  # fmt: skip

HOOKS: tuple[Hook, ...] = (
    Hook("verl.utils.config", None, "validate_config", _validate_config_with_avspo,
         "checks algorithm.avspo and these hooks before Ray starts", ("config",), always=True),
    Hook("verl.trainer.constants_ppo", None, "get_ppo_ray_runtime_env", _runtime_env_with_plugin,
         "imports the plugin in the trainer process with errors raised", always=True),
    Hook("verl.utils.tracking", "Tracking", "log", _log_with_avspo_metrics,
         "logs avspo/* metrics", ("self", "data", "step")),
    *(
        Hook(module, owner, attribute, make_wrapper, purpose, parameters, trainer, always=always)
        for module, owner, trainer in _TRAINER_CLASSES
        for attribute, make_wrapper, purpose, parameters, always in (
            ("__init__", _trainer_init, "checks the run and places the hooks it uses before any worker starts",
             ("self", "config"), True),
            ("_save_checkpoint", _trainer_save_checkpoint, "saves the AVSPO state with the checkpoint", ("self",), False),
            # Always: verl's experimental fully-async trainer inherits it without passing through __init__'s hook.
            ("_load_checkpoint", _trainer_load_checkpoint, "restores the AVSPO state on resume", ("self",), True),
        )
    ),
    Hook("verl.trainer.ppo.v1.trainer_base", "PPOTrainer", "step", _v1_step,
         "one step of Eq. 12 (and of the monitor's warnings) per global step", ("self", "metrics"), trainer="v1",
         features=(AVSPO, MONITOR)),
    # Placed in every process that loads verl's v1 utils, trainer or not: a script calling verl's function with
    # the avspo estimator gets GRPO's session grouping, never one sample per output. Other estimators pass through.
    Hook("verl.trainer.ppo.v1.utils", None, "compute_advantage_for_multi_trajectories", _multi_trajectories_with_avspo,
         "groups agent-loop sessions as GRPO does; feeds prompt selection the step's rewards",
         _MULTI_TRAJECTORY_PARAMETERS, trainer="v1", features=(AVSPO, SELECTION), always=True),
    Hook("verl.trainer.ppo.ray_trainer", "RayPPOTrainer", "_create_dataloader", _dataloader_with_selection("legacy"),
         "draws the training prompts through prompt selection",
         ("self", "train_dataset", "val_dataset", "collate_fn", "train_sampler"), trainer="legacy",
         features=(SELECTION,)),
    Hook("verl.trainer.ppo.v1.trainer_base", "PPOTrainer", "_init_dataloader", _dataloader_with_selection("v1"),
         "draws the training prompts through prompt selection", ("self",), trainer="v1", features=(SELECTION,)),
    Hook("verl.trainer.ppo.v1.replay_buffer", "ReplayBuffer", "_evict_terminal_groups", _evict_with_selection,
         "shows prompt selection the groups DAPO's group filtering evicts before the advantage step",
         ("self", "global_steps", "partition_id", "eviction_reasons"), trainer="v1", features=(SELECTION,)),
    Hook("verl.trainer.ppo.v1.trainer_base", "PPOTrainer", "_fetch_one_gen_batch", _fetch_with_prompt_ids,
         "tells prompt selection each prompt's per-step uid", ("self",), trainer="v1", features=(SELECTION,)),
    Hook("verl.trainer.ppo.ray_trainer", None, "compute_advantage", _compute_advantage_observed,
         "shows the ACR monitor (both trainers) and prompt selection (legacy) the rows the estimator gets",
         ("data", "adv_estimator"), features=(SELECTION, MONITOR)),
)  # fmt: skip

# Hook name -> why it could not be placed, for the hooks whose module loaded.
HOOK_PROBLEMS: dict[str, str] = {}
# The status of a hook that can be placed and waits for a run that uses it.
READY = "ready (placed when a run uses it)"
PLACEABLE = ("in place", READY)


def place_hooks(config: Any) -> list[str]:
    """Place, in this process, the hooks a full verl config's run uses (its features, its trainer); their names."""
    hooks = {hook.name: hook for feature in features_of(config) for hook in hooks_for(trainer_of(config), feature)}
    for hook in hooks.values():
        hook.place()
    return list(hooks)


def verl_version() -> str:
    """The version of the verl this process imported (a source checkout on PYTHONPATH included)."""
    version = getattr(verl, "__version__", None)
    if version:
        return str(version)
    try:
        return metadata.version("verl")
    except metadata.PackageNotFoundError:
        return "(unknown)"


def hooks_for(trainer: str | None, feature: str | None = None) -> list[Hook]:
    """The hooks a run of ``trainer`` (``v1``, ``legacy``; None: both) needs for ``feature`` (None: any)."""
    return [
        hook for hook in HOOKS
        if (trainer is None or hook.trainer in (None, trainer)) and (feature is None or feature in hook.features)
    ]  # fmt: skip


def hook_status(trainer: str | None = None, load: bool = True, feature: str | None = None) -> dict[str, str]:
    """Each hook of ``trainer``'s runs of ``feature``: ``in place``, ``not loaded`` (its module not imported;
    load=False) or why it is missing.

    load: import the hooks' verl modules first (what the trainer process does before training).
    """
    status = {}
    for hook in hooks_for(trainer, feature):
        module = sys.modules.get(hook.module)
        if module is None and load:
            try:
                module = importlib.import_module(hook.module)
            except ImportError as err:
                status[hook.name] = f"its module does not import: {err!r}"
                continue
        if module is None:
            status[hook.name] = "not loaded"
        elif hook.name in HOOK_PROBLEMS:
            status[hook.name] = HOOK_PROBLEMS[hook.name]
        else:
            owner = hook.target(module)
            placed = owner is not None and is_patched(getattr(owner, hook.attribute, None))
            status[hook.name] = "in place" if placed else hook.problem(module) or READY
    return status


def require_hooks(trainer: str, feature: str = AVSPO) -> None:
    """Raise HookError unless every hook a run of ``trainer`` needs for ``feature`` is in place (imports their modules)."""
    missing = {name: state for name, state in hook_status(trainer, feature=feature).items() if state not in PLACEABLE}
    if missing:
        details = "; ".join(f"{name}: {state}" for name, state in missing.items())
        raise HookError(
            f"{FEATURE_SETTING[feature]} cannot run on verl {verl_version()} with the {trainer} trainer: "
            f"{len(missing)} verl function(s) the plugin must wrap are missing or changed ({details}). Without "
            f"them the run would silently differ from what avspo promises. Known to work: verl "
            f"{', '.join(KNOWN_GOOD_VERL)}; run `avspo doctor` for the full report."
        )


def _use_metrics_channel(module) -> None:
    channel = verl_metrics_channel()
    if channel is None:
        return
    registered = getattr(module, "ADV_ESTIMATOR_METRICS_REGISTRY", {}).get(ESTIMATOR)
    if not getattr(registered, "avspo_estimator", False):
        channel(ESTIMATOR)(collect_for_verl)


def install() -> None:
    """Register the estimator and install every hook in this process (idempotent)."""
    register_estimator()
    for module_name, callback in (
        ("verl.trainer.ppo.core_algos", _use_metrics_channel),
        # Only beside trl: verl's model build reaches for trl's value-head class only when trl is installed.
        *((("verl.models.transformers.monkey_patch", skip_missing_trl_value_head),) if trl_installed() else ()),
        *((hook.module, hook.check) for hook in HOOKS),
    ):
        after_import(module_name, functools.partial(_run_patch, callback))


def _run_patch(callback: Callable, module) -> None:
    # A patch that fails must not break verl's import; it is reported, `avspo doctor` shows which
    # hooks are missing, and an avspo run refuses to start without them.
    try:
        callback(module)
    except Exception as err:
        for hook in HOOKS:
            if hook.module == module.__name__ and getattr(callback, "__self__", None) is hook:
                HOOK_PROBLEMS[hook.name] = f"patching raised {err!r}"
        logger.warning("avspo_plugin could not patch %s; its hook is missing", module.__name__, exc_info=True)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    try:  # 0-d tensors and numpy scalars
        return float(value.item())
    except (AttributeError, TypeError, ValueError, RuntimeError):
        return None
