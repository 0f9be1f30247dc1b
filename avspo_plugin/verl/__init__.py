"""verl adapter: the ``avspo`` advantage estimator, registered in verl's registry on import.

verl loads this module in every process that imports verl, through the ``verl.plugins`` entry
point (verl >= 0.9) or ``VERL_USE_EXTERNAL_MODULES=avspo_plugin.verl`` (verl 0.6.1 - 0.8.x).
Importing it registers the estimator and installs the hooks of :mod:`avspo_plugin.verl.hooks`
(config check before the first rollout, ``avspo/*`` metrics in verl's tracker, state in verl's
checkpoints, the ACR monitor beside other estimators, prompt selection). See docs/using/verl.md.

Its modules, by concern:

* ``run_config``: what a run's config asks of the plugin (its blocks read and checked, the features it uses);
* ``process``: the sessions the plugin keeps in one process, in one object, and the one place a step closes;
* ``guards``: launch-time guards (the trainer, DAPO's group filtering, the verl release);
* ``hooks``: the hook registry, where each hook is placed, its status, and the launcher's and trainers' entry checks;
* ``estimator``, ``multi_output``, ``monitor``, ``selection`` (with ``sampler``), ``checkpoint``,
  ``metric_routing``: each feature, with the wrappers of verl's functions it needs;
* ``model_build_fix``: verl's model build beside trl 1.x.

``config/`` holds the packaged hydra configs, which verl reads as YAML; renderer/verl_hydra_configs.py
generates them.

Every verl function the plugin touches, and the module of its wrapper (docs/using/verl.md has the same table;
a test checks both against the registry of :mod:`avspo_plugin.verl.hooks` and its trl patch):

| verl function | when it runs | needed by | wrapper in | why verl 0.9 offers no extension point |
|---|---|---|---|---|
| `verl.utils.config.validate_config` | launch, before Ray starts | every feature (every process) | `hooks` | the only place that sees the whole config before Ray starts; no validator registry |
| `verl.trainer.constants_ppo.get_ppo_ray_runtime_env` | launch | every feature (every process) | `guards` | the trainer process imports plugins with errors swallowed; the runtime env is the one way to import it loudly there |
| `verl.trainer.ppo.ray_trainer.RayPPOTrainer.__init__` | trainer start, before workers | every feature (every process) | `hooks` | no trainer start callback |
| `verl.trainer.ppo.v1.trainer_base.PPOTrainer.__init__` | trainer start, before workers | every feature (every process) | `hooks` | no trainer start callback |
| `verl.trainer.ppo.ray_trainer.RayPPOTrainer._load_checkpoint` | resume | every feature (every process) | `checkpoint` | checkpoints have no callback for extra state |
| `verl.trainer.ppo.v1.trainer_base.PPOTrainer._load_checkpoint` | resume | every feature (every process) | `checkpoint` | checkpoints have no callback for extra state |
| `verl.trainer.ppo.v1.utils.compute_advantage_for_multi_trajectories` | each advantage step (v1) | estimator, selection (every process) | `multi_output` | its GRPO-only trajectory grouping is a name check inside the function |
| `verl.utils.tracking.Tracking.log` | each logged step | every feature | `metric_routing` | the estimator registry takes a function, not its metrics (an upstream channel is proposed in patches/) |
| `verl.trainer.ppo.ray_trainer.RayPPOTrainer._save_checkpoint` | each checkpoint | every feature | `checkpoint` | checkpoints have no callback for extra state |
| `verl.trainer.ppo.v1.trainer_base.PPOTrainer._save_checkpoint` | each checkpoint | every feature | `checkpoint` | checkpoints have no callback for extra state |
| `verl.trainer.ppo.v1.trainer_base.PPOTrainer.step` | end of each global step (v1) | estimator, monitor | `process` | no end-of-step callback; one step of Eq. 12 spans several mini-batch calls |
| `verl.trainer.ppo.ray_trainer.compute_advantage` | each advantage step | monitor, selection | `monitor` | no observer of the rows an estimator gets |
| `verl.trainer.ppo.ray_trainer.RayPPOTrainer._create_dataloader` | trainer start | selection | `selection` | `create_rl_sampler` reads no sampler class from the config |
| `verl.trainer.ppo.v1.trainer_base.PPOTrainer._init_dataloader` | trainer start | selection | `selection` | `create_rl_sampler` reads no sampler class from the config |
| `verl.trainer.ppo.v1.trainer_base.PPOTrainer._fetch_one_gen_batch` | each generation batch (v1) | selection | `selection` | no callback with the per-step uids |
| `verl.trainer.ppo.v1.replay_buffer.ReplayBuffer._evict_terminal_groups` | each DAPO filtering (v1) | selection | `selection` | no observer of the groups it evicts |
| `verl.models.transformers.monkey_patch.is_trl_available` | model build, only where trl lacks `AutoModelForCausalLMWithValueHead` | every FSDP run beside trl >= 1.0 | `model_build_fix` | verl's own check, which breaks the build beside trl 1.x |
"""

from ..names import ESTIMATOR
from .estimator import compute_avspo_outcome_advantage, pop_metrics, session
from .hooks import install as _install
from .monitor import monitor
from .run_config import avspo_config_from_algorithm

_install()

__all__ = [
    "ESTIMATOR", "avspo_config_from_algorithm", "compute_avspo_outcome_advantage", "monitor", "pop_metrics", "session",
]  # fmt: skip
