"""The recipes against verl 0.9.1, without GPUs: every run script composes its YAML through
`python -m verl.trainer.main_ppo --cfg job`, the composed configs say what the recipes claim and pass
verl's own config validation, the Megatron sizing holds, the shell scripts pass bash -n and shellcheck,
bad settings fail with a clear message, the Slurm and Ray-job scripts run against recording stand-ins,
and the node check (check_cluster.py) runs on a local Ray cluster of its own."""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from main_ppo_config import composed_job
from omegaconf import OmegaConf

from avspo_plugin.config import AVSPOConfig
from recipes.math_data import prepare

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"
FIXTURES = Path(__file__).parent / "fixtures"  # shared with the math data tests
RUN_SCRIPTS = {
    "avspo_paper": "run_avspo_paper.sh",
    "grpo_paper": "run_grpo_paper.sh",
    "avspo_paper_monitor": "run_avspo_paper_monitor.sh",
    "avspo_dapo": "run_avspo_dapo.sh",
    "avspo_megatron_7b": "run_avspo_megatron_7b.sh",
    "avspo_megatron_14b": "run_avspo_megatron_14b.sh",
}
ALL_SCRIPTS = sorted(RECIPES.glob("*.sh"))


def script_env(**overrides):
    env = {key: value for key, value in os.environ.items() if key not in ("MODEL_PATH", "N_GPUS_PER_NODE", "NNODES")}
    env.update(PYTHON=sys.executable, HYDRA_FULL_ERROR="1")
    env.update(overrides)
    return env


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """DATA_DIR laid out as docs/using/recipes.md writes it, from the fixtures."""
    data = tmp_path_factory.mktemp("avspo_data")
    assert prepare.main(["math", "--local", str(FIXTURES / "math_train.jsonl"), "--out", str(data / "math.parquet")]) == 0
    level3 = ["level3-500", "--train", str(data / "math.parquet"), "--out", str(data / "level3_500.parquet")]
    assert prepare.main([*level3, "--pass-rates", str(FIXTURES / "math_level3_pass_rates.jsonl"), "--size", "4"]) == 0
    local = f"--local=math500={FIXTURES / 'math500_test.jsonl'}"
    assert prepare.main(["eval", "--out-dir", str(data / "eval"), "--benchmarks", "math500", local]) == 0
    return data


@pytest.fixture(scope="module")
def dry_runs(data_dir):
    """recipe -> its run script's dry run (the data written)."""
    return {recipe: dry_run(script, data_dir) for recipe, script in RUN_SCRIPTS.items()}


@pytest.fixture(scope="module")
def composed(dry_runs):
    """recipe -> composed config: each run script's dry run prints its main_ppo command, and verl's main_ppo entry
    point composes that command's config (``--cfg job``) in this process (tests/main_ppo_config.py)."""
    configs = {}
    for recipe, script in RUN_SCRIPTS.items():
        run = dry_runs[recipe]
        assert run.returncode == 0, f"{script}: {run.stderr[-3000:]}"
        (command,) = commands(run.stdout)
        assert command[:3] == [sys.executable, "-m", "verl.trainer.main_ppo"], f"{script} does not run main_ppo: {command}"
        arguments = command[3:]
        configs[recipe] = OmegaConf.create(composed_job(arguments))
    return configs


def flat(config):
    def walk(node, prefix):
        if isinstance(node, dict):
            for key, value in node.items():
                yield from walk(value, f"{prefix}{key}.")
        else:
            yield prefix[:-1], node

    return dict(walk(OmegaConf.to_container(config, resolve=False), ""))


def recipe_defaults(recipe):
    """The YAML composed alone (no script overrides), with hydra's compose API."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(RECIPES), version_base=None):
        return compose(config_name=recipe)


def test_every_recipe_has_a_run_script():
    recipes = {path.stem for path in RECIPES.glob("*.yaml")}
    assert recipes == set(RUN_SCRIPTS) | {"ab_1gpu"}  # ab_1gpu: run_ab_1gpu.sh, two runs (tests/recipes/test_ab_recipe.py)
    assert all((RECIPES / script).is_file() for script in RUN_SCRIPTS.values())


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("recipe", list(RUN_SCRIPTS))
def test_recipe_passes_verls_validation(composed, recipe):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    import avspo_plugin.verl  # noqa: F401  (its hook adds the algorithm.avspo check to validate_config)

    config = composed[recipe]
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    assert not need_reference_policy(config) and not need_critic(config)  # KL 0 and GRPO-style: actor only


@pytest.mark.parametrize("recipe", list(RUN_SCRIPTS))
def test_script_changes_only_the_data_paths(composed, data_dir, recipe):
    # The scripts' defaults for model, GPUs and nodes are the recipe's own values.
    by_script, alone = flat(composed[recipe]), flat(recipe_defaults(recipe))
    assert {key for key in by_script.keys() | alone.keys() if by_script.get(key) != alone.get(key)} == {
        "data.train_files",
        "data.val_files",
    }
    assert by_script["data.train_files"] == [str(data_dir / "level3_500.parquet")]
    assert by_script["data.val_files"] == [str(data_dir / "eval" / "math500.parquet")]
    # Alone, the YAML's data paths are where `prepare` writes, as the scripts' DATA_DIR: no "~", which verl does not expand.
    assert alone["data.train_files"] == "${oc.env:HOME}/data/avspo/level3_500.parquet"
    resolved = OmegaConf.to_container(recipe_defaults(recipe).data, resolve=True)
    assert resolved["val_files"] == os.path.join(os.environ["HOME"], "data/avspo/eval/math500.parquet")


@pytest.mark.parametrize("recipe", list(RUN_SCRIPTS))
def test_no_tilde_path_reaches_verl(recipe):
    """verl does not expand "~": a recipe's config holds such a path only where verl's own defaults put one
    in a part the recipe does not use (the critic, the disabled rollout-skip dumps)."""
    from verl.trainer.ppo.utils import need_critic

    config = recipe_defaults(recipe)
    tilde = {key for key, value in flat(config).items() if isinstance(value, str) and value.startswith("~")}
    assert tilde <= {"critic.model.path", "skip.rollout.dump_dir", "skip.rollout_tq.dump_dir", "skip.async_rollout.dump_dir"}
    assert not need_critic(config)
    assert not any(config.skip[part].enable for part in ("rollout", "rollout_tq", "async_rollout"))


def test_paper_setting(composed):
    config = composed["avspo_paper"]
    assert config.algorithm.adv_estimator == "avspo"
    # The packaged block: every AVSPO key at AVSPOConfig's default but the paper's trigger (the default, never, does
    # not act).
    assert OmegaConf.to_container(config.algorithm.avspo) == AVSPOConfig(threshold_mode="adaptive").to_dict()
    model, actor, rollout = config.actor_rollout_ref.model, config.actor_rollout_ref.actor, config.actor_rollout_ref.rollout
    assert model.path == "Qwen/Qwen2.5-Math-1.5B"
    assert (config.data.train_batch_size, rollout.n, rollout.temperature) == (1, 8, 1.0)
    assert (config.data.max_response_length, rollout.response_length) == (1024, 1024)
    assert (actor.optim.lr, list(actor.optim.betas), actor.optim.weight_decay, actor.optim.clip_grad) == (
        1e-6, [0.9, 0.999], 0.01, 1.0,
    )
    assert (actor.use_kl_loss, actor.kl_loss_coef, config.algorithm.use_kl_in_reward) == (False, 0.0, False)
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.loss_agg_mode) == (0.2, 0.2, "seq-mean-token-mean")
    assert (config.trainer.total_training_steps, config.trainer.n_gpus_per_node, config.trainer.nnodes) == (500, 8, 1)
    assert (actor.strategy, rollout.name) == ("fsdp", "vllm")
    assert (rollout.val_kwargs.temperature, rollout.val_kwargs.do_sample) == (0.1, True)
    assert list(config.trainer.logger) == ["console", "tensorboard"]  # no account needed


def test_reward_function_is_loaded_by_verl(composed):
    from verl.trainer.ppo.reward import get_custom_reward_fn

    score = get_custom_reward_fn(composed["avspo_paper"])
    result = score(data_source="math500", solution_str="so $x = \\boxed{\\frac{7}{2}}$", ground_truth="\\frac72", extra_info={})
    assert (result["score"], result["pred"]) == (1.0, "\\frac{7}{2}")


def test_reward_through_verls_reward_loop(composed):
    """verl 0.9's reward manager, built from the recipe, calls the reward from a worker thread
    (run_in_executor), where math-verify cannot use its signal timeouts: scores must still be right."""
    import asyncio

    import numpy as np
    import torch
    from verl import DataProto
    from verl.trainer.ppo.reward import load_reward_manager

    class ByteTokenizer:
        def decode(self, ids, skip_special_tokens=True):
            return bytes(int(i) for i in ids if int(i)).decode()

    def sample(text, truth, length=64):
        ids = list(text.encode())
        return DataProto.from_dict(
            tensors={
                "responses": torch.tensor([ids + [0] * (length - len(ids))]),
                "attention_mask": torch.tensor([[1] * (4 + len(ids)) + [0] * (length - len(ids))]),
            },
            non_tensors={
                "data_source": np.array(["math500"], dtype=object),
                "reward_model": np.array([{"ground_truth": truth}], dtype=object),
                "extra_info": np.array([{}], dtype=object),
            },
        )

    manager = load_reward_manager(composed["avspo_paper"], ByteTokenizer())
    cases = [
        ("so $\\boxed{\\frac{1}{2}}$", "0.5"), ("The answer is 1<x<2.", "(1,2)"), ("\\boxed{3}", "4"), ("", "1"),
        ("... Step 3: 14-", "14"),  # cut off: the training rule finds no answer
    ]

    async def score_all():
        return await asyncio.gather(*(manager.run_single(sample(text, truth)) for text, truth in cases))

    results = manager.loop.run_until_complete(score_all())
    assert [(r["reward_score"], r["reward_extra_info"]["reason"]) for r in results] == [
        (1.0, "correct: math-verify"), (0.0, "wrong"), (0.0, "wrong"), (0.0, "empty output"), (0.0, "no answer found"),
    ]


def test_grpo_baseline_differs_in_the_estimator_alone(composed):
    avspo, grpo = flat(composed["avspo_paper"]), flat(composed["grpo_paper"])
    assert {key for key in avspo.keys() | grpo.keys() if avspo.get(key) != grpo.get(key)} == {"algorithm.adv_estimator"}
    assert (avspo["algorithm.adv_estimator"], grpo["algorithm.adv_estimator"]) == ("avspo", "grpo")


def test_monitor_only_variant(composed):
    """Measuring without acting has one route: verl's GRPO with the ACR monitor beside it."""
    from avspo_plugin.verl.run_config import monitor_config_from_algorithm, uses_avspo, uses_monitor

    config = composed["avspo_paper_monitor"]
    assert config.algorithm.adv_estimator == "grpo" and uses_monitor(config) and not uses_avspo(config)
    assert monitor_config_from_algorithm(config.algorithm).enable
    grpo = flat(composed["grpo_paper"])
    differences = {key for key, value in flat(config).items() if grpo.get(key) != value}
    assert differences == {key for key in flat(config) if key.startswith("algorithm.avspo_monitor.")} | {
        "trainer.experiment_name"}


def test_dapo_variant(composed):
    config, paper = flat(composed["avspo_dapo"]), flat(composed["avspo_paper"])
    changed = {key: config[key] for key in config if paper.get(key) != config[key]}
    assert changed == {
        "actor_rollout_ref.actor.clip_ratio_high": 0.28,
        "actor_rollout_ref.actor.loss_agg_mode": "token-mean",
        "trainer.experiment_name": "qwen2.5-math-1.5b_level3-500_avspo_dapo-clip-token-mean",
    }
    assert (config["actor_rollout_ref.actor.clip_ratio_low"], config["algorithm.filter_groups.enable"]) == (0.2, False)


@pytest.mark.parametrize(
    "recipe, model, tp, pp, rollout_tp, nodes",
    [("avspo_megatron_7b", "Qwen/Qwen2.5-Math-7B", 2, 1, 2, 1), ("avspo_megatron_14b", "Qwen/Qwen2.5-14B", 4, 2, 4, 1)],
)
def test_megatron_recipes(composed, recipe, model, tp, pp, rollout_tp, nodes):
    config = composed[recipe]
    actor, rollout = config.actor_rollout_ref.actor, config.actor_rollout_ref.rollout
    assert config.model_engine == "megatron"
    assert (actor.strategy, config.actor_rollout_ref.ref.strategy) == ("megatron", "megatron")
    assert config.actor_rollout_ref.model.path == model
    assert (actor.megatron.tensor_model_parallel_size, actor.megatron.pipeline_model_parallel_size) == (tp, pp)
    assert actor.megatron.use_distributed_optimizer is True
    assert rollout.tensor_model_parallel_size == rollout_tp
    assert (config.trainer.nnodes, config.trainer.n_gpus_per_node) == (nodes, 8)
    # The paper's training setting otherwise.
    assert (config.algorithm.adv_estimator, config.data.train_batch_size, rollout.n) == ("avspo", 1, 8)
    assert (actor.optim.lr, actor.clip_ratio, config.trainer.total_training_steps) == (1e-6, 0.2, 500)


def sizing(config):
    """What each GPU gets per step (docs/using/recipes.md, "Sizing"): the Megatron layout and the work per rank."""
    actor, rollout = config.actor_rollout_ref.actor, config.actor_rollout_ref.rollout
    gpus = config.trainer.nnodes * config.trainer.n_gpus_per_node
    model_parallel = actor.megatron.tensor_model_parallel_size * actor.megatron.pipeline_model_parallel_size
    model_parallel *= actor.megatron.context_parallel_size
    assert gpus % model_parallel == 0 and gpus % rollout.tensor_model_parallel_size == 0
    dp = gpus // model_parallel
    sequences = config.data.train_batch_size * rollout.n
    assert sequences % dp == 0 and (sequences // dp) % actor.ppo_micro_batch_size_per_gpu == 0
    micro_batches = sequences // dp // actor.ppo_micro_batch_size_per_gpu
    pp = actor.megatron.pipeline_model_parallel_size
    return {
        "gpus": gpus,
        "dp": dp,
        "sequences per rank": sequences // dp,
        "micro-batches per rank": micro_batches,
        "pipeline bubble": (pp - 1) / (micro_batches + pp - 1),
        "vllm replicas": gpus // rollout.tensor_model_parallel_size,
        "sequences per replica": sequences / (gpus // rollout.tensor_model_parallel_size),
    }


TWO_NODE_14B = ["trainer.nnodes=2", "data.train_batch_size=2", "actor_rollout_ref.actor.ppo_mini_batch_size=2"]


def test_megatron_sizing(composed, data_dir):
    """The arithmetic of docs/using/recipes.md: with one prompt (8 sequences) per step the 14B recipe fills one
    node (every GPU in the one TP 4 x PP 2 replica, 8 micro-batches, 2 vLLM replicas of 4 sequences);
    its two-node form doubles the prompts so each GPU keeps that work; two nodes with one prompt would
    halve it."""
    from hydra import compose, initialize_config_dir
    from verl.utils.config import validate_config

    import avspo_plugin.verl  # noqa: F401

    assert sizing(composed["avspo_megatron_7b"]) == {
        "gpus": 8, "dp": 4, "sequences per rank": 2, "micro-batches per rank": 1, "pipeline bubble": 0.0,
        "vllm replicas": 4, "sequences per replica": 2.0,
    }
    one_node = sizing(composed["avspo_megatron_14b"])
    assert one_node == {
        "gpus": 8, "dp": 1, "sequences per rank": 8, "micro-batches per rank": 8, "pipeline bubble": 1 / 9,
        "vllm replicas": 2, "sequences per replica": 4.0,
    }
    paths = [f"data.train_files=[{data_dir / 'level3_500.parquet'}]", f"data.val_files=[{data_dir / 'eval' / 'math500.parquet'}]"]
    with initialize_config_dir(config_dir=str(RECIPES), version_base=None):
        two_nodes = compose(config_name="avspo_megatron_14b", overrides=paths + TWO_NODE_14B)
        one_prompt_on_two_nodes = compose(config_name="avspo_megatron_14b", overrides=paths + ["trainer.nnodes=2"])
    validate_config(two_nodes, use_reference_policy=False, use_critic=False)
    assert sizing(two_nodes) == {**one_node, "gpus": 16, "dp": 2, "vllm replicas": 4}
    halved = sizing(one_prompt_on_two_nodes)
    assert (halved["sequences per rank"], halved["sequences per replica"]) == (4, 2.0)


# ---------------------------------------------------------------- shell scripts


@pytest.mark.parametrize("script", ALL_SCRIPTS, ids=lambda path: path.name)
def test_bash_syntax(script):
    run = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_shellcheck():
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    run = subprocess.run(
        [shellcheck, "-x", "--severity=style", *[str(path.relative_to(ROOT)) for path in ALL_SCRIPTS]],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def dry_run(script, data_dir, *args, **env):
    base = {"DATA_DIR": str(data_dir), "DRY_RUN": "1"}
    return subprocess.run(
        ["bash", str(RECIPES / script), *args], env=script_env(**{**base, **env}),
        capture_output=True, text=True, timeout=60,
    )


def commands(stdout):
    """The commands a DRY_RUN printed, as a shell reads them: one a line, the # lines around them comments, a
    trailing & (a step that runs in the background) not part of the command."""
    lines = [line for line in stdout.splitlines() if line and not line.startswith("#")]
    return [[word for word in shlex.split(line) if word != "&"] for line in lines]


def header(stdout):
    """{what: text} of the dry run's `# estimated cost: ...` and `# writes: ...` lines."""
    return dict(line[2:].split(": ", 1) for line in stdout.splitlines()
                if line.startswith(("# estimated cost: ", "# writes: ")))


@pytest.mark.parametrize("recipe", list(RUN_SCRIPTS))
def test_dry_run_says_what_it_costs_and_writes_where_verl_will_write(composed, dry_runs, recipe):
    """The header's folders are the composed config's own: its checkpoints and TensorBoard folders, every
    save_freq steps; the cost is the recipes page's estimate, said to be one."""
    config, said = composed[recipe], header(dry_runs[recipe].stdout)
    trainer = config.trainer
    checkpoints = f"checkpoints/{trainer.project_name}/{trainer.experiment_name}"
    assert trainer.default_local_dir == checkpoints
    assert said["writes"].startswith(f"a checkpoint every {trainer.save_freq} steps in {checkpoints}/global_step_<N>/ ")
    assert f"TensorBoard events in tensorboard_log/{trainer.project_name}/{trainer.experiment_name}/" in said["writes"]
    assert "tensorboard" in trainer.logger
    assert said["estimated cost"].endswith('(estimated, not measured: docs/using/recipes.md, "9. Cost per step")')
    assert f"{trainer.total_training_steps} steps" in said["estimated cost"]


@pytest.mark.parametrize(
    "env, message",
    [
        # Missing data stops a real run (DRY_RUN=0: it stops before anything is launched), naming the command that writes it.
        ({"DRY_RUN": "0", "DATA_DIR": "/nonexistent/avspo"},
         "TRAIN_FILES: no such file: /nonexistent/avspo/level3_500.parquet\n"
         "  Write it with (docs/using/recipes.md, \"2. Data\"):\n"
         f"    PYTHONPATH={ROOT} {sys.executable} -m recipes.math_data.prepare math --out /nonexistent/avspo/math_train.parquet\n"
         f"    PYTHONPATH={ROOT} {sys.executable} -m recipes.math_data.prepare level3-500 --train "
         "/nonexistent/avspo/math_train.parquet --model Qwen/Qwen2.5-Math-1.5B --out /nonexistent/avspo/level3_500.parquet"),
        ({"DRY_RUN": "0", "VAL_FILES": "/nonexistent/math500.parquet"},
         "VAL_FILES: no such file: /nonexistent/math500.parquet\n  Write it with (docs/using/recipes.md, \"2. Data\"):\n"
         f"    PYTHONPATH={ROOT} {sys.executable} -m recipes.math_data.prepare eval --out-dir /nonexistent --benchmarks math500"),
        ({"TRAIN_FILES": " "}, "TRAIN_FILES is empty"),
        ({"MODEL_PATH": "/nonexistent/Qwen2.5-Math-1.5B"}, "MODEL_PATH: no such folder: /nonexistent/Qwen2.5-Math-1.5B"),
        ({"MODEL_PATH": "not a model"}, "neither an existing folder nor a hub id"),
        ({"N_GPUS_PER_NODE": "eight"}, "N_GPUS_PER_NODE must be a positive integer"),
        ({"PLUGIN_LOAD": "magic"}, "PLUGIN_LOAD must be entry-point or env"),
        # Passed on as given, a path with ~ would reach verl unexpanded.
        ({"CHECK_PATHS": "0", "TRAIN_FILES": "~/data/l3.parquet"}, "TRAIN_FILES: '~/data/l3.parquet' starts with ~"),
        ({"CHECK_PATHS": "0", "MODEL_PATH": "~/models/q"}, "MODEL_PATH: '~/models/q' starts with ~"),
    ],
)
def test_missing_or_bad_settings_fail_clearly(data_dir, env, message):
    run = dry_run("run_avspo_paper.sh", data_dir, **env)
    assert run.returncode != 0
    assert message in run.stderr
    assert run.stdout == ""


def test_dry_run_prints_the_command_before_the_data_exists(tmp_path):
    """DRY_RUN=1 with no data file: the command is printed, each missing file is a note naming the command that
    writes it, and the script exits 0."""
    empty = tmp_path / "no_data"
    run = dry_run("run_avspo_paper.sh", empty)
    assert run.returncode == 0, run.stderr
    [argv] = commands(run.stdout)
    assert f"data.train_files=['{empty / 'level3_500.parquet'}']" in argv
    assert f"data.val_files=['{empty / 'eval' / 'math500.parquet'}']" in argv
    assert f"prepare level3-500 --train {empty / 'math_train.parquet'}" in run.stderr
    assert f"prepare eval --out-dir {empty / 'eval'} --benchmarks math500" in run.stderr
    assert run.stderr.count("note (DRY_RUN: the command is printed all the same)") == 2
    # Pasted as printed, the line is the command: bash reads each argument back as the script passed it.
    (line,) = [line for line in run.stdout.splitlines() if not line.startswith("#")]
    echoed = subprocess.run(["bash", "-c", f"printf '%s\\n' {line.partition(' ')[2]}"], capture_output=True, text=True)
    assert echoed.stdout.splitlines() == argv[1:]


def test_settings_reach_the_command(data_dir, tmp_path):
    model = tmp_path / "my-model"
    model.mkdir()
    run = dry_run(
        "run_avspo_megatron_7b.sh", data_dir, "trainer.logger=[console]",
        MODEL_PATH=str(model), N_GPUS_PER_NODE="4", NNODES="2", PLUGIN_LOAD="env",
    )
    assert run.returncode == 0, run.stderr
    [argv] = commands(run.stdout)
    # PLUGIN_LOAD=env: the variable on the command line (this process) and in Ray's runtime env (its workers).
    assert argv[:9] == [
        "env", "VERL_USE_EXTERNAL_MODULES=avspo_plugin.verl",
        sys.executable, "-m", "verl.trainer.main_ppo", "--config-path", str(RECIPES), "--config-name", "avspo_megatron_7b",
    ]
    assert argv[9:] == [
        f"data.train_files=['{data_dir / 'level3_500.parquet'}']",
        f"data.val_files=['{data_dir / 'eval' / 'math500.parquet'}']",
        f"actor_rollout_ref.model.path={model}",
        "trainer.n_gpus_per_node=4",
        "trainer.nnodes=2",
        "trainer.logger=[console]",
        "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES=avspo_plugin.verl",
    ]
    # Two nodes with the recipe's one prompt per step: a note on sizing, not an error.
    assert "note: NNODES=2" in run.stderr and "data.train_batch_size" in run.stderr
    scaled = dry_run("run_avspo_megatron_7b.sh", data_dir, "data.train_batch_size=2", NNODES="2")
    assert scaled.returncode == 0 and "note: NNODES" not in scaled.stderr


def test_wandb_logger_needs_a_login(data_dir, tmp_path):
    """The recipes log to console + tensorboard; asking for wandb without a login stops before anything starts."""
    home = tmp_path / "home"
    home.mkdir()
    no_login = {"HOME": str(home), "WANDB_API_KEY": "", "WANDB_MODE": "", "NETRC": ""}
    run = dry_run("run_avspo_paper.sh", data_dir, "trainer.logger=[console,wandb]", **no_login)
    assert run.returncode != 0 and run.stdout == ""
    assert "trainer.logger includes wandb, but wandb has no login here" in run.stderr
    assert "wandb login" in run.stderr and "trainer.logger=[console,tensorboard]" in run.stderr
    assert dry_run("run_avspo_paper.sh", data_dir, **no_login).returncode == 0  # the default logger needs none
    (home / ".netrc").write_text("machine api.wandb.ai\n  login user\n  password 0123\n")
    assert dry_run("run_avspo_paper.sh", data_dir, "trainer.logger=[console,wandb]", **no_login).returncode == 0
    offline = {**no_login, "WANDB_MODE": "offline", "HOME": str(tmp_path)}
    assert dry_run("run_avspo_paper.sh", data_dir, "trainer.logger=[console,wandb]", **offline).returncode == 0


def test_ray_job_submission(data_dir):
    run = dry_run("submit_ray_job.sh", data_dir, DRY_RUN="0")
    assert run.returncode != 0 and "RAY_ADDRESS is not set" in run.stderr
    # The dry run needs no cluster: a stand-in address, said to be one.
    run = dry_run("submit_ray_job.sh", data_dir)
    assert run.returncode == 0, run.stderr
    assert "# RAY_ADDRESS is not set: http://<head-node>:8265 stands for the cluster's dashboard" in run.stdout
    assert [command[:5] for command in commands(run.stdout)] == [
        ["ray", "job", "submit", "--address", "http://<head-node>:8265"]] * 2
    run = dry_run("submit_ray_job.sh", data_dir, "trainer.total_training_steps=5", RAY_ADDRESS="http://head:8265", PLUGIN_LOAD="env")
    assert run.returncode == 0, run.stderr
    check, train = commands(run.stdout)
    runtime_env = '{"env_vars": {"RAY_OVERRIDE_JOB_RUNTIME_ENV": "1", "VERL_USE_EXTERNAL_MODULES": "avspo_plugin.verl"}}'
    submit = ["ray", "job", "submit", "--address", "http://head:8265", "--runtime-env-json", runtime_env, "--"]
    # First the check job, with the run's runtime env, on every node of the cluster.
    assert check == [*submit, sys.executable, str(RECIPES / "check_cluster.py")]
    assert train[: len(submit)] == submit
    entrypoint = train[len(submit) :]
    assert entrypoint[entrypoint.index("--config-name") + 1] == "avspo_megatron_14b"
    assert entrypoint[-1] == "trainer.total_training_steps=5"
    # MODEL_PATH / NNODES / N_GPUS_PER_NODE unset: the recipe's own values stay.
    assert not [arg for arg in entrypoint if arg.startswith(("actor_rollout_ref.model.path=", "trainer.nnodes="))]
    # Node counts, a wandb logger and TENSORBOARD_DIR reach the check and the job.
    run = dry_run(
        "submit_ray_job.sh", data_dir, "trainer.logger=[console,wandb]", RAY_ADDRESS="http://head:8265",
        NNODES="2", N_GPUS_PER_NODE="8", TENSORBOARD_DIR="/shared/tb",
    )
    check, train = commands(run.stdout)
    assert check[-5:] == ["--nodes", "2", "--gpus-per-node", "8", "--wandb"]
    assert '"TENSORBOARD_DIR": "/shared/tb"' in check[check.index("--runtime-env-json") + 1]
    assert commands(dry_run("submit_ray_job.sh", data_dir, RAY_ADDRESS="http://h:8265", CHECK_NODES="0").stdout)[0][-1] != str(
        RECIPES / "check_cluster.py"
    )


def test_ray_job_stops_when_a_node_is_not_ready(data_dir, tmp_path):
    """The check job fails (a node lacks the plugin): the run is not submitted, and the message says why."""
    ray = tmp_path / "ray"
    ray.write_text(
        '#!/usr/bin/env bash\necho "ray $*" >>"$CALLS"\n'
        'if [[ "${*: -1}" == *check_cluster.py ]]; then echo "not ready: gpu-b: cannot import avspo_plugin"; exit 1; fi\n'
    )
    ray.chmod(0o755)
    calls = tmp_path / "calls.log"
    run = subprocess.run(
        ["bash", str(RECIPES / "submit_ray_job.sh")],
        env=script_env(DATA_DIR=str(data_dir), RAY_ADDRESS="http://head:8265", RAY=str(ray), CALLS=str(calls)),
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode != 0
    assert "not ready: gpu-b: cannot import avspo_plugin" in run.stdout
    assert "the cluster at http://head:8265 is not ready for this run" in run.stderr
    assert len(calls.read_text().splitlines()) == 1  # the training job was never submitted


SLURM_FAKES = {
    "scontrol": 'printf "gpu-a\\ngpu-b\\ngpu-c\\n"',
    # Records each step with its options; runs the per-node report once per node, as Slurm would.
    "srun": 'node=""; opts=()\nwhile [[ $1 == -* ]]; do opts+=("$1"); if [[ $1 == -w ]]; then node=$2; shift; fi; shift; done\n'
    'echo "srun@${node:-all} ${opts[*]} :: $*" >>"$CALLS"\n'
    'if [[ $1 == bash ]]; then for n in gpu-a gpu-b gpu-c; do SLURMD_NODENAME=$n "$@"; done; fi',
    "hostname": 'case $SLURMD_NODENAME in gpu-a) echo "10.0.0.7 fe80::1";; gpu-b) echo 10.0.0.8;; *) echo 10.0.0.9;; esac',
    "nvidia-smi": 'echo "nvidia-smi@$SLURMD_NODENAME $*" >>"$CALLS"\n'
    'n=4; if [[ $SLURMD_NODENAME == "${SHORT_NODE:-}" ]]; then n=2; fi\n'
    'for ((i = 0; i < n; i++)); do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-$i)"; done',
    "ray": 'echo "ray $*" >>"$CALLS"',
    "fakepython": "exit 0",  # the cluster-ready probe
}


def run_slurm(data_dir, tmp_path, **env):
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    for name, body in SLURM_FAKES.items():
        (bin_dir / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    base = dict(
        DATA_DIR=str(data_dir), DRY_RUN="0", CALLS=str(log), PATH=f"{bin_dir}:{os.environ['PATH']}",
        PYTHON=str(bin_dir / "fakepython"), SLURM_JOB_ID="42", SLURM_JOB_NUM_NODES="3", SLURM_JOB_NODELIST="gpu-[a-c]",
        SLURM_GPUS_ON_NODE="4", SLURM_CPUS_PER_TASK="64", SLURM_SUBMIT_DIR=str(ROOT), RECIPE="avspo_megatron_14b",
    )
    run = subprocess.run(
        ["bash", str(RECIPES / "run_slurm.sh"), "data.train_batch_size=3"], env=script_env(**{**base, **env}),
        capture_output=True, text=True, timeout=120,
    )
    return run, (log.read_text().splitlines() if log.exists() else [])


def test_slurm_script_starts_ray_and_submits(data_dir, tmp_path):
    """run_slurm.sh with scontrol, srun, nvidia-smi and ray replaced by recorders: every step states its CPUs
    and GPUs, every node's GPUs are counted with nvidia-smi before Ray starts, head and workers start on
    the right nodes with the right counts, and the job goes to the head's dashboard after the check job."""
    run, calls = run_slurm(data_dir, tmp_path)
    assert run.returncode == 0, run.stderr
    steps = [call for call in calls if call.startswith("srun@")]
    assert len(steps) == 4  # the per-node report, the head, two workers
    for step in steps:
        options = step.split(" :: ")[0]
        assert "--cpus-per-task=" in options and "--gpus-per-node=4" in options, step
    assert steps[0].startswith("srun@all --nodes=3 --ntasks=3 --ntasks-per-node=1 --cpus-per-task=1 --gpus-per-node=4")
    assert [call for call in calls if call.startswith("nvidia-smi@")] == [f"nvidia-smi@gpu-{n} -L" for n in "abc"]
    head = [call for call in steps if call.startswith("srun@gpu-a") and "--head" in call]
    assert head and "--cpus-per-task=64" in head[0]
    assert "ray start --block --head --node-ip-address=10.0.0.7 --port=6379" in head[0]
    assert "--num-cpus=64 --num-gpus=4" in head[0]
    for worker in ("gpu-b", "gpu-c"):
        assert any(
            c.startswith(f"srun@{worker} ") and "ray start --block --address=10.0.0.7:6379" in c and "--num-gpus=4" in c
            for c in steps
        ), calls
    check, train = (call.split() for call in calls if call.startswith("ray job submit"))
    assert check[:5] == ["ray", "job", "submit", "--address", "http://10.0.0.7:8265"]
    assert check[-4:] == ["--nodes", "3", "--gpus-per-node", "4"]
    assert train[:5] == ["ray", "job", "submit", "--address", "http://10.0.0.7:8265"]
    assert "trainer.nnodes=3" in train and "trainer.n_gpus_per_node=4" in train


def test_slurm_script_stops_when_a_node_lacks_gpus(data_dir, tmp_path):
    run, calls = run_slurm(data_dir, tmp_path, SHORT_NODE="gpu-b")
    assert run.returncode != 0
    assert "not every node has its GPUs (N_GPUS_PER_NODE=4)" in run.stderr
    assert "gpu-b: nvidia-smi -L lists 2 GPU(s), 4 needed" in run.stderr and "gpu-a:" not in run.stderr
    assert not [call for call in calls if "ray start" in call]  # nothing started


def test_slurm_script_outside_slurm_runs_nothing_and_its_dry_run_prints_the_job(data_dir):
    run = dry_run("run_slurm.sh", data_dir, DRY_RUN="0")
    assert run.returncode != 0 and "not inside a Slurm allocation" in run.stderr and "DRY_RUN=1" in run.stderr
    run = dry_run("run_slurm.sh", data_dir, "data.train_batch_size=2", NNODES="2", RECIPE="avspo_megatron_14b")
    assert run.returncode == 0, run.stderr
    report, head, worker, check, train = commands(run.stdout)
    assert report[:6] == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--cpus-per-task=1", "--gpus-per-node=8"]
    assert head[:8] == ["srun", "--nodes=1", "--ntasks=1", "--cpus-per-task=64", "--gpus-per-node=8", "-w", "node1", "ray"]
    assert "--head" in head and "--node-ip-address=<node1-address>" in head
    assert "-w" in worker and worker[worker.index("-w") + 1] == "node2" and "--address=<node1-address>:6379" in worker
    assert check[:5] == train[:5] == ["ray", "job", "submit", "--address", "http://<node1-address>:8265"]
    assert check[-4:] == ["--nodes", "2", "--gpus-per-node", "8"]
    assert "trainer.nnodes=2" in train and train[-1] == "data.train_batch_size=2"
    assert "# not inside an allocation: node1 node2 and <node1-address> stand for" in run.stdout
    said = header(run.stdout)
    assert "qwen2.5-14b_level3-500_avspo_megatron" in said["writes"] and "estimated, not measured" in said["estimated cost"]


# ---------------------------------------------------------------- check_cluster.py


def load_check_cluster():
    import importlib.util

    spec = importlib.util.spec_from_file_location("check_cluster", RECIPES / "check_cluster.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_check_cluster_names_each_nodes_problem(monkeypatch, tmp_path):
    check = load_check_cluster()
    nodes = [
        {"host": "gpu-a (10.0.0.7)", "gpus": 8.0, "problems": []},
        {"host": "gpu-b (10.0.0.8)", "gpus": 4.0, "problems": ["cannot import avspo_plugin: ModuleNotFoundError"]},
    ]
    assert check.cluster_problems(nodes, 1, 8) == ["gpu-b (10.0.0.8): cannot import avspo_plugin: ModuleNotFoundError"]
    assert check.cluster_problems(nodes, 2, 8)[0].startswith("1 node(s) with at least 8 GPUs, 2 needed")
    # A module that does not import is this node's problem, with the error.
    monkeypatch.setattr(check, "REQUIRED_MODULES", {"avspo_plugin": "avspo-plugin", "avspo_plugin_no_such_module": None})
    report = check.node_report(check_wandb=False)
    assert report["problems"] == [
        "cannot import avspo_plugin_no_such_module: ModuleNotFoundError: No module named 'avspo_plugin_no_such_module'"
    ]
    for key in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    assert "no wandb login" in check.wandb_login_problem()
    (tmp_path / "netrc").write_text("machine api.wandb.ai login user password 0123\n")
    assert check.wandb_login_problem() is None


def test_check_cluster_on_a_local_ray_cluster(tmp_path):
    """The check as a driver on a Ray cluster of its own (one node, no GPU): the node's task imports the
    plugin, math-verify and verl and finds avspo registered; asking for a GPU per node fails, naming the count."""
    env = script_env(WANDB_MODE="offline", RAY_ADDRESS="", PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    run = subprocess.run(
        [sys.executable, str(RECIPES / "check_cluster.py"), "--address", "local", "--gpus-per-node", "1", "--wandb"],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "avspo_plugin 0.1.0, avspo_plugin.math_reward.reward ok, math_verify 0.9.0, verl 0.9.1;" in run.stdout
    assert "not ready: 0 node(s) with at least 1 GPUs, 1 needed" in run.stdout
    # Imports, registration and the wandb login are fine: the GPUs are the one problem.
    assert [line for line in run.stdout.splitlines() if line.startswith("not ready:")] == [
        line for line in run.stdout.splitlines() if line.startswith("not ready: 0 node(s)")
    ]
    assert "cluster not ready: 1 problem(s)" in run.stdout


def test_recipe_yaml_files_are_plain_yaml():
    # Every recipe names its hydra searchpath (verl's configs and the packaged avspo block) and composes
    # ppo_trainer, then the avspo block; the shared fragment has none (Hydra allows it only in the primary config).
    for path in RECIPES.glob("*.yaml"):
        document = yaml.safe_load(path.read_text())
        assert document["hydra"]["searchpath"] == ["pkg://verl.trainer.config", "pkg://avspo_plugin.verl.config"], path
        assert document["defaults"][:2] == ["ppo_trainer", "avspo_algorithm"], path
        assert document["defaults"][-1] == "_self_", path
    assert "hydra" not in yaml.safe_load((RECIPES / "shared" / "paper_setting.yaml").read_text())


# The one-GPU A/B (recipes/ab_1gpu.yaml, run_ab_1gpu.sh): its dry run prints two main_ppo commands per seed and the
# `avspo analyze` that compares them seed by seed; verl's main_ppo composes each command's config and verl's
# validation passes it; the two runs of a seed differ in the estimator alone (and where each writes); AVSPO's run
# takes every algorithm.avspo key at its default (the paper's method); the data comes from the `prepare gsm8k` and
# `prepare eval` steps.
AB_SCRIPT = RECIPES / "run_ab_1gpu.sh"


def ab_dry_run(**env: str) -> subprocess.CompletedProcess:
    settings = {key: value for key, value in os.environ.items() if key not in ("MODEL_PATH", "N_GPUS_PER_NODE", "NNODES")}
    settings.update(PYTHON=sys.executable, DRY_RUN="1", **env)
    return subprocess.run(["bash", str(AB_SCRIPT)], env=settings, capture_output=True, text=True, timeout=60)


def arm_free(argument: str, arm: str) -> str:
    """A run's argument with its arm's name (estimator, metrics file, checkpoint folder) replaced by ARM."""
    return argument.replace(f"adv_estimator={arm}", "adv_estimator=ARM").replace(f"/{arm}.seed", "/ARM.seed")


@pytest.fixture(scope="module")
def ab(tmp_path_factory):
    """The dry run on data written by `prepare gsm8k` and `prepare eval --benchmarks gsm8k` (from the fixtures), and
    verl's composed config of each of its two runs."""
    data, out = tmp_path_factory.mktemp("avspo_data"), tmp_path_factory.mktemp("ab_1gpu")
    gsm8k = str(FIXTURES / "gsm8k_test.jsonl")
    assert prepare.main(["gsm8k", "--local", gsm8k, "--out", str(data / "gsm8k_train.parquet")]) == 0
    assert prepare.main(["eval", "--out-dir", str(data / "eval"), "--benchmarks", "gsm8k", f"--local=gsm8k={gsm8k}"]) == 0
    run = ab_dry_run(DATA_DIR=str(data), OUT_DIR=str(out), SEEDS="2", STEPS="40")
    assert run.returncode == 0, run.stderr
    print(run.stdout)  # the dry run, as a user sees it
    *runs, analyze = commands(run.stdout)
    assert len(runs) == 4  # two seeds, two arms each
    grpo, avspo = runs[:2]
    for seed, (grpo_seed, avspo_seed) in enumerate(zip(runs[::2], runs[1::2]), start=1):
        assert f"data.seed={seed}" in grpo_seed and f"actor_rollout_ref.rollout.seed={seed}" in avspo_seed
        assert [arm_free(arg, "grpo") for arg in grpo_seed] == [arm_free(arg, "avspo") for arg in avspo_seed]
    configs = {}
    for name, command in (("grpo", grpo), ("avspo", avspo)):
        assert command[:2] == ["env", f"VERL_FILE_LOGGER_PATH={out / name}.seed1.metrics.jsonl"], command
        assert command[2:5] == [sys.executable, "-m", "verl.trainer.main_ppo"], command
        configs[name] = OmegaConf.create(composed_job(command[5:]))
    return {"data": data, "out": out, "configs": configs, "analyze": analyze, "stdout": run.stdout, "stderr": run.stderr}



@pytest.mark.filterwarnings("ignore:Disabled critic")
def test_ab_runs_pass_verls_validation(ab):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    import avspo_plugin.verl  # noqa: F401  (its hook adds the algorithm.avspo check to validate_config)

    for config in ab["configs"].values():
        validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
        assert not need_reference_policy(config) and not need_critic(config)


def test_ab_runs_differ_in_the_estimator_alone(ab):
    grpo, avspo = (flat(ab["configs"][name]) for name in ("grpo", "avspo"))
    assert {key for key in grpo.keys() | avspo.keys() if grpo.get(key) != avspo.get(key)} == {
        "algorithm.adv_estimator", "trainer.default_local_dir"}
    assert (grpo["algorithm.adv_estimator"], avspo["algorithm.adv_estimator"]) == ("grpo", "avspo")
    # AVSPO at its defaults: the paper's method.
    assert OmegaConf.to_container(ab["configs"]["avspo"].algorithm.avspo) == AVSPOConfig().to_dict()
    # The same seeds: data order and vLLM sampling.
    assert (avspo["data.seed"], avspo["actor_rollout_ref.rollout.seed"]) == (1, 1)


def test_ab_setting_is_one_gpu_a_small_open_model_and_gsm8k(ab):
    config, data = ab["configs"]["avspo"], ab["data"]
    assert config.actor_rollout_ref.model.path == "Qwen/Qwen2.5-0.5B-Instruct"
    assert (config.trainer.n_gpus_per_node, config.trainer.nnodes) == (1, 1)
    assert list(config.data.train_files) == [str(data / "gsm8k_train.parquet")]
    assert list(config.data.val_files) == [str(data / "eval" / "gsm8k.parquet")]
    assert config.reward.custom_reward_function.path == "pkg://avspo_plugin.math_reward.reward"
    assert "file" in config.trainer.logger and config.trainer.total_training_steps == 40  # STEPS=40
    assert (config.data.train_batch_size, config.actor_rollout_ref.rollout.n) == (64, 8)


def test_ab_analyze_compares_the_two_runs_metrics(ab):
    out = ab["out"]
    assert ab["analyze"] == ["avspo", "analyze", *(f"{arm}@{seed}={out}/{arm}.seed{seed}.metrics.jsonl"
                                                   for seed in (1, 2) for arm in ("grpo", "avspo")),
                             "--accuracy", "val-core/gsm8k/acc/mean@1", "--out", f"{out}/analysis"]
    # The GRPO run logs ACR through the monitor (what analyze reads); the AVSPO run logs it itself.
    from avspo_plugin.verl.run_config import uses_avspo, uses_monitor

    grpo, avspo = ab["configs"]["grpo"], ab["configs"]["avspo"]
    assert uses_monitor(grpo) and not uses_avspo(grpo) and uses_avspo(avspo) and not uses_monitor(avspo)
    said = header(ab["stdout"])
    assert said["writes"].startswith(f"{out}/grpo.seed<s>.metrics.jsonl and {out}/avspo.seed<s>.metrics.jsonl for "
                                     f"s = 1..2 (each run's metrics), {out}/analysis/ (analysis.md, analysis.json and")
    assert "1-1.5 hours per run" in said["estimated cost"] and "2 seed(s) here" in said["estimated cost"]
    assert ab["stderr"].count("no such file") == 0  # the data the prepare steps wrote is what the runs read


@pytest.mark.parametrize("setting", ["SEEDS=0", "SEEDS=two", "STEPS=-5"])
def test_ab_refuses_a_count_that_is_not_a_whole_number_naming_it(tmp_path, setting):
    name, value = setting.split("=")
    run = ab_dry_run(DATA_DIR=str(tmp_path), OUT_DIR=str(tmp_path / "out"), **{name: value})
    assert run.returncode == 1 and f"error: {setting}: a whole number" in run.stderr


def test_ab_dry_run_without_data_names_the_commands_that_write_it(tmp_path):
    run = ab_dry_run(DATA_DIR=str(tmp_path), OUT_DIR=str(tmp_path / "out"))
    assert run.returncode == 0 and len(commands(run.stdout)) == 7, run.stderr  # SEEDS=3 by default: 6 runs, analyze
    # Each missing file is one note, though both runs read it.
    assert run.stderr.count(f"prepare gsm8k --out {tmp_path / 'gsm8k_train.parquet'}") == 1
    assert run.stderr.count(f"prepare eval --out-dir {tmp_path / 'eval'} --benchmarks gsm8k") == 1
