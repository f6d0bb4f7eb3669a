"""``python -m gdpo_verl.tools.reproduce``: the sweep's commands, resuming, the wiring to the evaluator, and (slow)
the whole path on the CPU demo: 2 methods x 2 seeds of 2 training steps each, then the table with mean and CI.

Run: python -m pytest tests/test_reproduce_on_cpu.py   (the slow test trains: run it under the heavy-job lock)
"""

import sys

import pytest

from gdpo_verl.tools import reproduce as rp


def test_train_command_selects_method_seed_output_and_hf_weights(tmp_path):
    cmd = rp.train_command("toolcall", "grpo_nostd", 2, tmp_path / "r", ["trainer.total_epochs=1"])
    assert cmd[:5] == [sys.executable, "-m", "gdpo_verl.main", "--config-name", "toolcall"]
    assert cmd[5:8] == ["method=grpo_nostd", "seed=2", f"launch.output_dir={tmp_path / 'r'}"]
    assert "hf_model" in cmd[8] and cmd[-1] == "trainer.total_epochs=1"  # the caller's overrides win (last)
    assert rp.train_command("demo", "saw", 0, tmp_path, [])[5] == "method=saw"  # the demo has the method group too


def test_every_recipe_method_is_swept_and_the_method_group_composes_on_the_demo():
    from helpers.compose import compose_config

    from gdpo_verl.tools.evaluate import TASKS as EVAL_TASKS

    assert set(rp.EVAL_TASK.values()) <= set(EVAL_TASKS) and set(rp.EVAL_TASK) == set(rp.TASKS)
    for method in rp.METHODS:
        cfg = compose_config("demo", [f"method={method}"])
        assert cfg.launch.method == method and cfg.trainer.experiment_name == f"{method}-seed0"


def fake_run(run_dir):
    hf = run_dir / "checkpoints" / "global_step_2" / "actor" / "huggingface"
    hf.mkdir(parents=True)
    (hf / "config.json").write_text("{}")
    (hf / "model.safetensors").write_bytes(b"")


def test_sweep_resumes_and_evaluates_every_final_checkpoint(tmp_path, monkeypatch):
    trained, evaluated = [], {}
    for name in ("gdpo-seed0", "gdpo-seed1", "grpo-seed0"):  # grpo-seed1 is missing: only it is trained
        fake_run(tmp_path / "runs" / name)

    def fake_train_process(cmd, stdout, stderr):
        run_dir = tmp_path / "runs" / "grpo-seed1"
        trained.append(cmd)
        fake_run(run_dir)
        return type("Done", (), {"returncode": 0})()

    def fake_evaluate(task, checkpoints, data, labels, out_dir, **options):
        evaluated.update(task=task, checkpoints=checkpoints, labels=labels, out_dir=out_dir, options=options)
        return labels, [], "TABLE"

    monkeypatch.setattr(rp.subprocess, "run", fake_train_process)
    monkeypatch.setattr("gdpo_verl.tools.evaluate.evaluate", fake_evaluate)
    monkeypatch.setenv("GDPO_DATA", str(tmp_path / "data"))
    markdown = rp.reproduce("gsm8k", [0, 1], ["gdpo", "grpo"], tmp_path, ["x=1"], limit=5)
    assert markdown == "TABLE" and len(trained) == 1 and "method=grpo" in trained[0] and "seed=1" in trained[0]
    assert evaluated["labels"] == ["gdpo-seed0", "gdpo-seed1", "grpo-seed0", "grpo-seed1"]
    assert evaluated["checkpoints"] == [str(tmp_path / "runs" / name) for name in evaluated["labels"]]
    assert evaluated["task"] == "gsm8k" and evaluated["out_dir"] == tmp_path / "table"
    assert evaluated["options"] == {"limit": 5}


def test_a_failed_run_stops_the_sweep_with_its_log(tmp_path, monkeypatch):
    def failing(cmd, stdout, stderr):
        stdout.write("line 1\nTraceback: boom\n")
        return type("Done", (), {"returncode": 1})()

    monkeypatch.setattr(rp.subprocess, "run", failing)
    with pytest.raises(
        RuntimeError, match=r"(?s)training gdpo-seed0 failed \(exit 1.*train.log\nline 1\nTraceback: boom"
    ):
        rp.reproduce("gsm8k", [0], ["gdpo"], tmp_path)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--task", "gsm", "--seeds", "0"], "valid values: toolcall, gsm8k, deepscaler, code, demo"),
        (["--task", "gsm8k", "--seeds", "0", "--methods", "ppo"], "valid values: gdpo, gd2po, saw, rvpo, grpo, grpo_"),
        (["--task", "gsm8k", "--seeds", "1", "1"], "distinct seeds"),
    ],
)
def test_bad_options_are_one_line_errors(argv, message, tmp_path):
    with pytest.raises(SystemExit, match=message):
        rp.main([*argv, "--out", str(tmp_path)])


DEMO_FAST = [
    "trainer.total_training_steps=2", "trainer.total_epochs=100", "trainer.val_before_train=false",
    "trainer.test_freq=-1", "trainer.save_freq=2", "data.train_batch_size=4", "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16", "++ray_kwargs.ray_init.include_dashboard=false",
]  # fmt: skip


@pytest.mark.slow
def test_demo_from_training_to_table(tmp_path, capsys):
    out = tmp_path / "repro"
    rp.main(["--task", "demo", "--seeds", "0", "1", "--methods", "gdpo", "grpo", "--out", str(out),
             "--limit", "8", *DEMO_FAST])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header == ["metric (%)", "gdpo-seed0", "gdpo-seed1", "grpo-seed0", "grpo-seed1",
                      "gdpo (mean ± 95% CI)", "grpo (mean ± 95% CI)"]  # fmt: skip
    n_row = [c.strip() for c in next(line for line in lines if line.startswith("| n |")).strip("|").split("|")]
    assert n_row[1:5] == ["8"] * 4  # 8 problems, greedy: one response each
    assert "(n=2)" in next(line for line in lines if line.startswith("| correctness |"))
    for name in ("gdpo-seed0", "gdpo-seed1", "grpo-seed0", "grpo-seed1"):
        assert (out / "runs" / name / "metrics.jsonl").is_file()
        assert list((out / "runs" / name / "checkpoints").glob("global_step_2"))
    assert {p.name for p in (out / "table").iterdir()} == {"results.md", "results.csv", "results.png"}
