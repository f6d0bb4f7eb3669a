"""The evaluator (gdpo_verl.tools.evaluate): per-task metrics, checkpoint discovery and labels, tables, and its
consistency with the demo's own greedy reward rates (gdpo_verl.demo.evaluate) on the same model and problems.

Run: python -m pytest tests/test_evaluate_on_cpu.py   (the demo-model tests build the demo assets once, ~1 min)
"""

import csv
import json
import math

import pandas as pd
import pytest

from gdpo_verl.generation import Generation
from gdpo_verl.tools import evaluate as ev

TOOL_GT = '<think>look it up</think>\n<tool_call>\n{"name": "weather", "parameters": {"city": "Paris"}}\n</tool_call>'
TOOL_NEAR = '<think>hm</think>\n<tool_call>\n{"name": "weather", "parameters": {"city": "Rome"}}\n</tool_call>'


def test_toolcall_accuracy_is_an_exact_match_and_format_its_own_rate():
    task = ev.TASKS["toolcall"]
    gens = [Generation(TOOL_GT, 20), Generation(TOOL_NEAR, 20), Generation("no tags at all", 3), Generation("", 0)]
    result = ev.score(task, gens, [TOOL_GT] * 4, budget=4000)
    # exact calls: 1 of 4; right layout: 2 of 4 (the near miss has the layout but a wrong parameter value)
    assert result == {"format": 50.0, "accuracy": 25.0, "n": 4.0}


def test_gsm8k_metrics():
    gens = [Generation("<think>6*7</think>\n<answer>42</answer>", 9), Generation("<answer>-42</answer>", 5)]
    result = ev.score(ev.TASKS["gsm8k"], gens, ["#### 42", "#### -42"], budget=4000)
    assert result == {"accuracy": 100.0, "format": 50.0, "integer": 50.0, "n": 2.0}


def test_deepscaler_accuracy_uses_math_verify_and_over_length_counts_tokens():
    gens = [
        Generation("<think>x</think> \\boxed{\\frac12}", 4001),  # right, but over the 4000-token budget
        Generation("<think>x</think> \\boxed{0.5}", 4000),  # right, exactly at the budget
        Generation("<think>x</think> \\boxed{2}", 10),
    ]
    result = ev.score(ev.TASKS["deepscaler"], gens, ["\\frac{1}{2}"] * 3, budget=4000)
    assert result["accuracy"] == pytest.approx(200 / 3) and result["over_length"] == pytest.approx(100 / 3)
    assert ev.score(ev.TASKS["deepscaler"], gens, ["\\frac{1}{2}"] * 3, budget=5000)["over_length"] == 0.0


def test_samples_are_scored_against_their_own_problem():
    # 2 problems x 2 samples, prompt-major: the first two responses belong to problem 0
    gens = [Generation("<a>7</a>", 1), Generation("<a>8</a>", 1), Generation("<a>5</a>", 1), Generation("<a>5</a>", 1)]
    result = ev.score(ev.TASKS["demo"], gens, ["7", "5"], budget=0)
    assert result["correctness"] == 75.0 and result["format"] == 100.0


def test_tables_markdown_csv_and_the_papers_column():
    task = ev.TASKS["toolcall"]
    results = [{"format": 80.5, "accuracy": 31.25, "n": 80.0}, {"format": 70.0, "accuracy": 29.0, "n": 80.0}]
    markdown, rows = ev.tables(task, ["gdpo-seed0", "grpo-seed0"], results)
    lines = markdown.splitlines()
    assert lines[0] == "| metric (%) | gdpo-seed0 | grpo-seed0 | " + task.paper_label + " |"
    assert "BFCL-v3" in task.paper_label and "different benchmark" in task.paper_label
    assert lines[2] == "| format | 80.50 | 70.00 | GRPO 76.33 / GDPO 80.66 |"
    assert lines[3] == "| accuracy | 31.25 | 29.00 | GRPO 30.18 / GDPO 32.81 |"
    assert lines[4] == "| n | 80 | 80 |  |"
    assert rows[0][1:3] == ["gdpo-seed0", "grpo-seed0"] and rows[2][:3] == ["accuracy", "31.25", "29.00"]
    gsm_markdown, _ = ev.tables(ev.TASKS["gsm8k"], ["a"], [{"accuracy": 1.0, "format": 2.0, "integer": 3.0, "n": 1}])
    assert gsm_markdown.splitlines()[0] == "| metric (%) | a |"  # no paper number for this task: no column


def test_find_model_in_a_verl_checkpoint_directory(tmp_path):
    run = tmp_path / "run"
    for step in (5, 10):
        hf = run / "checkpoints" / f"global_step_{step}" / "actor" / "huggingface"
        hf.mkdir(parents=True)
        (hf / "config.json").write_text("{}")
        (hf / "model.safetensors").write_bytes(b"")
    latest = run / "checkpoints" / f"global_step_{10}" / "actor" / "huggingface"
    assert ev.find_model(str(run)) == str(latest)  # a gdpo_verl.main run: its checkpoints/, the highest step
    assert ev.find_model(str(run / "checkpoints")) == str(latest)
    (run / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("5")
    assert ev.find_model(str(run)).endswith("global_step_5/actor/huggingface")  # verl's own pointer wins
    assert ev.find_model(str(latest)) == str(latest)  # a Hugging Face model directory itself
    assert ev.find_model("Qwen/Qwen2.5-1.5B-Instruct") == "Qwen/Qwen2.5-1.5B-Instruct"  # a hub name, untouched
    (latest / "model.safetensors").unlink()
    with pytest.raises(ValueError, match="hf_model.*model_merger"):
        ev.find_model(str(latest.parent.parent))
    with pytest.raises(ValueError, match="neither"):
        ev.find_model(str(tmp_path))


def test_label_from_the_runs_hydra_config(tmp_path):
    run = tmp_path / "outputs" / "12-00-00"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text("seed: 2\nalgorithm:\n  adv_estimator: grpo\n")
    ckpt = run / "checkpoints" / "global_step_3" / "actor" / "huggingface"
    ckpt.mkdir(parents=True)
    assert ev.checkpoint_label(str(ckpt)) == "grpo-seed2"
    assert ev.checkpoint_label(str(tmp_path / "outputs")) == "outputs"


def test_options_are_validated():
    with pytest.raises(ValueError, match="valid values: bfcl, toolcall, gsm8k, deepscaler, code, demo"):
        ev.evaluate("gsm8", ["m"], "x.parquet")
    with pytest.raises(ValueError, match="valid values: auto, hf, vllm"):
        ev.evaluate("demo", ["m"], "x.parquet", backend="tgi")
    with pytest.raises(ValueError, match="samples"):
        ev.evaluate("demo", ["m"], "x.parquet", samples=4, temperature=0.0)
    with pytest.raises(ValueError, match="one --label per checkpoint"):
        ev.evaluate("demo", ["a", "b"], "x.parquet", labels=["only one"])
    for top_p in (0.0, 1.5):
        with pytest.raises(ValueError, match=r"--top-p .*\(0, 1\]"):
            ev.evaluate("deepscaler", ["m"], "x.parquet", top_p=top_p)


def test_avg_at_k_and_pass_at_k():
    # 3 problems x 2 samples, prompt-major. correctness per sample: [1, 0], [0, 0], [1, 1]
    answers = ["7", "8", "1", "2", "5", "5"]
    gens = [Generation(f"<a>{a}</a>", 1) for a in answers]
    result = ev.score(ev.TASKS["demo"], gens, ["7", "5", "5"], budget=0)
    assert result["correctness"] == 50.0  # avg@2: 3 right of 6
    assert result["pass@2"] == pytest.approx(200 / 3)  # problems 0 and 2 have a right sample
    assert "pass@2" not in ev.score(ev.TASKS["demo"], gens[:3], ["7", "8", "1"], budget=0)  # one sample: no pass@k


def test_seeds_of_a_method_get_a_mean_and_a_95_percent_interval():
    task = ev.TASKS["gsm8k"]
    labels = ["gdpo-seed0", "gdpo-seed1", "gdpo-seed2", "grpo-seed0"]
    results = [{"accuracy": a, "format": 90.0, "integer": 80.0, "n": 100.0} for a in (30.0, 32.0, 34.0, 25.0)]
    markdown, rows = ev.tables(task, labels, results)
    assert rows[0] == ["metric (%)", *labels, "gdpo (mean ± 95% CI)"]  # one seed of grpo: no interval column
    # mean 32, sample std 2, t(0.975, 2 df) = 4.303: half-width 4.303 * 2 / sqrt(3) = 4.97
    assert rows[1] == ["accuracy", "30.00", "32.00", "34.00", "25.00", "32.00 ± 4.97 (n=3)"]
    assert rows[2][-1] == "90.00 ± 0.00 (n=3)"
    assert ev.method_of("grpo_nostd-seed12") == "grpo_nostd" and ev.method_of("base") == "base"
    assert ev.method_of("run-seedling") == "run-seedling"


def test_per_task_decoding_defaults_and_overrides(monkeypatch):
    calls = []

    def fake_generate(model, prompts, budget, temperature, samples, seed, backend, batch_size, top_p):
        calls.append((temperature, top_p, samples))
        return [Generation("<a>1</a>", 1)] * (len(prompts) * samples)

    monkeypatch.setattr(ev, "generate", fake_generate)
    monkeypatch.setattr(ev, "find_model", lambda c: c)
    monkeypatch.setattr(ev, "load_rows", lambda data, limit, task: ([[{"role": "user", "content": "q"}]], ["1"]))
    ev.evaluate("deepscaler", ["m"], None, labels=["x"])
    ev.evaluate("demo", ["m"], None, labels=["x"])
    ev.evaluate("deepscaler", ["m"], None, labels=["x"], temperature=1.0, top_p=0.9, samples=4)
    ev.evaluate("deepscaler", ["m"], None, labels=["x"], temperature=0.0)  # greedy: one sample
    assert calls == [(0.6, 0.95, 16), (0.0, 1.0, 1), (1.0, 0.9, 4), (0.0, 0.95, 1)]


def test_code_pass_at_1_runs_every_test_and_bug_ratio_counts_responses():
    import json

    # 20 tests of doubling; the first program is wrong only on the 18th (beyond the training reward's 16 tests),
    # the second crashes on one input, the third is right everywhere
    inputs = [f"{i}\n" for i in range(20)]
    tests = json.dumps({"inputs": inputs, "outputs": [f"{2 * i}\n" for i in range(20)]})
    late_miss = "```python\nx = int(input())\nprint(0 if x == 17 else 2 * x)\n```"
    crash = "```python\nx = int(input())\nprint(2 * x if x != 3 else 1 // 0)\n```"
    right = "```python\nprint(2 * int(input()))\n```"
    gens = [Generation(text, 10) for text in (late_miss, crash, right)]
    result = ev.score(ev.TASKS["code"], gens, [tests] * 3, budget=4000)
    assert result["pass@1"] == pytest.approx(100 / 3)  # only the third passes every test
    assert result["bug_ratio"] == pytest.approx(100 / 3)  # one response of three crashes (on one test of 20)


@pytest.fixture(scope="module")
def demo_assets():
    from gdpo_verl.demo.assets import ensure_demo_assets

    return ensure_demo_assets()


@pytest.mark.slow
def test_greedy_evaluation_reproduces_the_demos_own_reward_rates(demo_assets, tmp_path):
    # The same model, the same problems (the demo's val split), greedy decoding: the evaluator's rates must equal
    # those of gdpo_verl.demo.evaluate.reward_rates (one batch there, batches of 16 here: greedy is per row).
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gdpo_verl.demo.evaluate import reward_rates
    from gdpo_verl.demo.task import Problem

    labels, results, markdown = ev.evaluate(
        "demo", [demo_assets.model_dir], demo_assets.val_parquet, labels=["warm start"], out_dir=tmp_path
    )
    frame = pd.read_parquet(demo_assets.val_parquet)
    problems = [Problem(*map(int, p[0]["content"].rstrip("=").split("+"))) for p in frame["prompt"]]
    assert [p.answer for p in problems] == [r["ground_truth"] for r in frame["reward_model"]]
    model = AutoModelForCausalLM.from_pretrained(demo_assets.model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(demo_assets.model_dir)
    rates = reward_rates(model, tokenizer, problems, temperature=0.0)
    (result,) = results
    assert result["n"] == len(problems) == 32
    for key in ("format", "correctness", "brevity"):
        assert round(result[key] / 100, 3) == rates[key], (key, result, rates)
    assert 0 < result["correctness"] < 100 and result["format"] == 100.0  # greedy: well formed, mostly right
    # the files: the markdown printed, the CSV with the same numbers, a PNG
    assert (tmp_path / "results.md").read_text() == markdown
    with open(tmp_path / "results.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["metric (%)", "warm start"]
    assert {r[0]: float(r[1]) for r in rows[1:]} == pytest.approx({**{k: result[k] for k in result}}, abs=0.006)
    assert (tmp_path / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_command_line_side_by_side_with_limit_and_sampling(demo_assets, tmp_path, capsys):
    ev.main(
        [
            "--task", "demo", demo_assets.model_dir, demo_assets.model_dir, "--label", "gdpo", "--label", "grpo",
            "--data", demo_assets.val_parquet, "--limit", "5", "--samples", "3", "--temperature", "1.0",
            "--out", str(tmp_path),
        ]
    )  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| metric (%) | gdpo | grpo |"
    n_row = [line for line in lines if line.startswith("| n |")]
    assert n_row == ["| n | 15 | 15 |"]  # 5 problems x 3 samples
    # the same seed for both columns: the same model gives the same sampled responses, so the same rates
    for line in filter(None, lines[2:]):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[1] == cells[2] and not math.isnan(float(cells[1]))


def test_a_run_directory_leads_to_its_checkpoints_or_says_where_they_went(tmp_path, monkeypatch):
    run, store = tmp_path / "outputs" / "12-00-00", tmp_path / "ckpt"
    (run / ".hydra").mkdir(parents=True)
    (run / "metrics.jsonl").write_text("")
    saved = "trainer:\n  default_local_dir: ${oc.env:GDPO_CKPT,checkpoints}/gdpo_verl/gdpo-seed0\n"
    (run / ".hydra" / "config.yaml").write_text(saved)
    monkeypatch.setenv("GDPO_CKPT", str(store))
    with pytest.raises(ValueError, match=rf"is a training run directory, but its checkpoints go to {store}/gdpo_verl/"
                                         r"gdpo-seed0 \(trainer.default_local_dir\).*trainer.save_freq=N"):  # fmt: skip
        ev.find_model(str(run))
    hf = store / "gdpo_verl" / "gdpo-seed0" / "global_step_4" / "actor" / "huggingface"
    hf.mkdir(parents=True)
    (hf / "config.json").write_text("{}")
    (hf / "model.safetensors").write_bytes(b"")
    assert ev.find_model(str(run)) == str(hf)  # followed to $GDPO_CKPT
    monkeypatch.delenv("GDPO_CKPT")  # the demo: checkpoints/... relative, so under the run directory
    with pytest.raises(ValueError, match=rf"its checkpoints go to {run}/checkpoints .*default -1 saves none"):
        ev.find_model(str(run))


@pytest.mark.parametrize("path", ["./no/such/run", "/no/such/checkpoint", "runs/2026/no-such"])
def test_a_local_looking_path_that_does_not_exist_is_not_a_hub_name(path):
    with pytest.raises(ValueError, match=rf"{path}: no such directory"):
        ev.find_model(path)


def test_save_generations_writes_every_scored_response(tmp_path, monkeypatch):
    data = tmp_path / "val.parquet"
    pd.DataFrame(
        {"prompt": [[{"role": "user", "content": "2+3="}], [{"role": "user", "content": "1+1="}]],
         "reward_model": [{"ground_truth": "5"}, {"ground_truth": "2"}]}
    ).to_parquet(data)  # fmt: skip
    replies = [Generation("<a>5</a>", 4), Generation("7", 1), Generation("<a>2</a>", 4), Generation("<a>3</a>", 4)]
    monkeypatch.setattr(ev, "generate", lambda model, prompts, *a: replies)
    labels, results, _ = ev.evaluate("demo", ["org/model"], data, labels=["a/b c"], out_dir=tmp_path / "out",
                                     samples=2, temperature=1.0, keep_generations=True)  # fmt: skip
    lines = (tmp_path / "out" / "generations-0-a_b_c.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [(r["problem"], r["sample"], r["prompt"], r["ground_truth"], r["response"]) for r in records] == [
        (0, 0, "2+3=", "5", "<a>5</a>"), (0, 1, "2+3=", "5", "7"), (1, 0, "1+1=", "2", "<a>2</a>"),
        (1, 1, "1+1=", "2", "<a>3</a>"),
    ]  # fmt: skip
    assert [r["metrics"]["correctness"] for r in records] == [1.0, 0.0, 1.0, 0.0]
    assert results[0]["correctness"] == 50.0 and records[1]["metrics"]["format"] == 0.0
    with pytest.raises(ValueError, match="--save-generations needs an output folder"):
        ev.evaluate("demo", ["org/model"], data, keep_generations=True)
