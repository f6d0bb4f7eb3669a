"""Several FSDP ranks and several Ray nodes on CPU: the preset's topology, and training end to end with each.

Fast: how the CPU preset sizes Ray from ``trainer.nnodes``/``trainer.n_gpus_per_node`` (composed exactly as
``python -m gdpo_verl.main`` does), joins an existing cluster (``RAY_ADDRESS``) without Ray resources, and refuses
impossible combinations naming the values and the fix.
Slow (Ray, training): ``trainer.n_gpus_per_node=2`` trains 2 steps (FSDP over gloo, two HF rollout replicas) and
the advantages the estimator computed for each batch equal those of the same rows in another order (what a
one-rank run, which gathers in another order, computes); a two-node Ray cluster started on this machine with the
commands of recipes/README.md trains 2 steps with ``trainer.nnodes=2 trainer.n_gpus_per_node=1``.
Run: .venv/bin/python -m pytest tests/test_topology_on_cpu.py -m "not slow"   (seconds)
     .venv/bin/python -m pytest tests/test_topology_on_cpu.py                 (about N minutes on 2 cores)
"""

import pytest
from helpers.compose import compose_config as compose_cfg

from gdpo_verl.main import validate

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
