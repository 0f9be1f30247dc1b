"""The pieces of ``avspo_plugin.verl_cpu`` that the end-to-end runs rely on, checked one by one.

The HF generation server runs in this process (no Ray); the checks that need a fresh
``import verl`` (what is registered with and without the opt-in module, the platform,
the gloo process group, the adapter gathering FSDP DTensors) run in one subprocess.
"""

from __future__ import annotations

import asyncio
import math

import pytest
import torch
from fresh_interpreter import VERL_IMPORT_REPORT, run_python

from avspo_plugin.verl_cpu.demo import build_demo_files, task_prompt

SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


@pytest.fixture(scope="module")
def model_files(tmp_path_factory: pytest.TempPathFactory):
    return build_demo_files(tmp_path_factory.mktemp("cpu_support"), train_prompts=8, test_prompts=4)


@pytest.fixture
def server(model_files):
    from verl.workers.config import HFModelConfig, RolloutConfig

    from avspo_plugin.verl_cpu.rollout import HFGenerateServer

    model_config = HFModelConfig(path=str(model_files.model_dir), override_config={"attn_implementation": "sdpa"})
    return HFGenerateServer(RolloutConfig(name="hf", prompt_length=64, response_length=16), model_config, 0)


def prompt_ids(server, a: int = 3, b: int = 4) -> list[int]:
    messages = [{"role": "user", "content": task_prompt(a, b)}]
    return list(server.model_config.tokenizer.apply_chat_template(messages, add_generation_prompt=True)["input_ids"])


def generate(server, ids: list[int], request_id: str):
    return asyncio.run(server.generate(ids, dict(SAMPLING), request_id))


def test_hf_server_samples_each_request_of_a_step_differently_and_reproducibly(server):
    ids = prompt_ids(server)
    server.set_global_steps(1)
    first, second = generate(server, ids, "a"), generate(server, ids, "b")
    assert len(first.token_ids) == 16 and first.extra_fields["global_steps"] == 1
    assert first.token_ids != second.token_ids  # the G samples of a group differ
    server.set_global_steps(1)  # the same step again, as after a resume: the same draws
    assert [generate(server, ids, "c").token_ids, generate(server, ids, "d").token_ids] == [
        first.token_ids,
        second.token_ids,
    ]
    server.set_global_steps(2)
    assert generate(server, ids, "e").token_ids != first.token_ids


def test_hf_server_log_probs_are_the_models_log_probs_of_the_sampled_tokens(server):
    ids = prompt_ids(server)
    server.set_global_steps(0)
    output = generate(server, ids, "a")
    sequence = torch.tensor([ids + output.token_ids])
    with torch.no_grad():
        logits = server.model(sequence).logits[0, len(ids) - 1 : -1]
    expected = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(output.token_ids)[:, None]).squeeze(-1)
    assert output.log_probs == pytest.approx(expected.tolist(), abs=1e-4)


def test_hf_server_generates_with_the_weights_pushed_to_it(server):
    ids = prompt_ids(server)
    state = {name: tensor.clone() for name, tensor in server.model.state_dict().items() if name != "lm_head.weight"}
    state["model.norm.weight"].zero_()  # a zero final norm makes every logit 0: uniform next-token log-probs
    server.update_weights(state)
    server.set_global_steps(1)
    output = generate(server, ids, "a")
    vocabulary = server.model.config.vocab_size
    assert output.log_probs == pytest.approx([-math.log(vocabulary)] * len(output.token_ids), abs=1e-5)


def test_hf_server_rejects_weights_that_do_not_fit_naming_them(server):
    state = dict(server.model.state_dict())
    state["model.layers.9.mlp.up_proj.weight"] = torch.zeros(2, 2)
    with pytest.raises(ValueError, match=r"model\.layers\.9\.mlp\.up_proj\.weight"):
        server.update_weights(state)
    del state["model.layers.9.mlp.up_proj.weight"], state["model.norm.weight"]
    with pytest.raises(ValueError, match=r"missing \['model\.norm\.weight'\]"):
        server.update_weights(state)


def test_hf_server_refuses_requests_it_cannot_serve_naming_what(server):
    ids = prompt_ids(server)
    with pytest.raises(ValueError, match=r"\['presence_penalty'\]"):
        asyncio.run(server.generate(ids, {**SAMPLING, "presence_penalty": 0.5}, "a"))
    with pytest.raises(ValueError, match="text only; request b"):
        asyncio.run(server.generate(ids, dict(SAMPLING), "b", image_data=[object()]))


# After the plain-import probe's report (what `import verl` loaded and registered), in the same process:
# the platform, verl's process group, the adapter pushing FSDP shards to a stand-in server.
CPU_PLATFORM_AND_ADAPTER = VERL_IMPORT_REPORT + """
    import asyncio, os, socket
    import torch
    import verl
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    from verl.utils.device import get_device_id, get_device_name, get_nccl_backend, get_torch_device
    from verl.utils.distributed import initialize_global_process_group_ray
    from verl.workers.config import RolloutConfig
    from verl.workers.rollout.base import get_rollout_class
    from verl.workers.rollout.replica import get_rollout_replica_class

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    initialize_global_process_group_ray()  # as verl's workers call it: no backend given
    backend = torch.distributed.get_backend()

    class Server:  # records what the adapter pushes
        def __init__(self):
            self.calls = []
        def __getattr__(self, method):
            server = self
            class Method:
                def remote(self, *args):
                    server.calls.append((method, args))
                    future = asyncio.get_event_loop().create_future()
                    future.set_result(None)
                    return future
            return Method()

    mesh = init_device_mesh(get_device_name(), (1,))
    weights = [("w", distribute_tensor(torch.arange(6.0).reshape(3, 2), mesh, [Shard(0)])), ("b", torch.ones(2))]
    adapter = get_rollout_class("hf")(config=RolloutConfig(name="hf"), model_config=None, device_mesh=mesh)
    adapter._server = Server()
    asyncio.run(adapter.update_weights(iter(weights), global_steps=7))
    (_, (pushed,)), steps = adapter._server.calls
    print(json.dumps({
        **verl_import,
        "device": get_device_name(), "device_id": str(get_device_id()), "backend": backend,
        "comm": get_nccl_backend(), "free_memory": get_torch_device().mem_get_info()[0] > 0,
        "engine_device": os.environ.get("VERL_ENGINE_DEVICE"),
        "replica": get_rollout_replica_class("hf").__name__,
        "pushed": {name: [type(t).__name__, t.tolist()] for name, t in pushed.items()}, "steps": list(steps),
    }))
"""


@pytest.fixture(scope="module")
def cpu_process() -> dict:
    """CPU_PLATFORM_AND_ADAPTER's report from a fresh interpreter with the CPU support asked for and selected."""
    return run_python(
        CPU_PLATFORM_AND_ADAPTER, {"VERL_USE_EXTERNAL_MODULES": "avspo_plugin.verl_cpu", "VERL_PLATFORM": "cpu"}
    )


def test_cpu_support_is_loaded_when_asked_for(cpu_process):
    # Without VERL_USE_EXTERNAL_MODULES a plain `import verl` loads none of it: the registration test checks that
    # (tests/verl/test_registration.py), on the same probe.
    assert cpu_process["registered"] and cpu_process["cpu_support_loaded"]
    assert cpu_process["cpu_support_registered"] == [True, True, True]


def test_cpu_platform_gloo_process_group_and_adapter_gathering_fsdp_shards(cpu_process):
    result = cpu_process
    assert result["device"] == "cpu" and result["device_id"] == "cpu" and result["free_memory"]
    assert result["backend"] == "gloo" and result["comm"] == "gloo"
    assert result["engine_device"] == "cuda"  # verl's FSDP engine, which runs on the platform's device
    assert result["replica"] == "HFReplica"
    assert result["pushed"] == {"w": ["Tensor", [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]], "b": ["Tensor", [1.0, 1.0]]}
    assert result["steps"] == ["set_global_steps", [7]]
