"""``python -m gdpo_verl.main``: config composition, derived estimator keys, start-up validation, multirun.

Run: .venv/bin/python -m pytest tests/test_main_config_on_cpu.py
"""

import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.compose import compose_config as compose_cfg

from gdpo_verl.main import apply_components, validate


def test_demo_components_become_estimator_keys_weights_and_conditions():
    cfg = compose_cfg("demo", ["reward.gdpo.components.1.weight=2.5"])
    apply_components(cfg)
    assert list(cfg.algorithm.gdpo_reward_keys) == ["format", "correctness", "brevity"]
    assert list(cfg.algorithm.gdpo_reward_weights) == [1.0, 2.5, 1.0]
    assert dict(cfg.algorithm.gdpo_reward_conditions["brevity"]) == {"on": "correctness", "threshold": 1.0}


@pytest.mark.parametrize(
    "overrides, match",
    [
        (["+algorithm.gdpo_reward_weights=[1.0]"], r"gdpo_reward_weights has 1 values .* gdpo_reward_keys has 3"),
        (["reward.gdpo.components.2.condition.on=speed"], r"condition.on='speed' is not another component"),
        (["reward.gdpo.components.0.path=no_such_module_xyz"], r"\(format\).*cannot import .*no_such_module_xyz"),
        (["reward.gdpo.components.0.fn=nope"], r"no function 'nope'; callables there: .*format_reward"),
        (["reward.gdpo.components=[]"], r"needs at least one entry in reward.gdpo.components"),
        (["reward.gdpo.on_error=ignore"], r"on_error='ignore' is unknown; valid values: raise, nan"),
        (["algorithm.gdpo_final_norm=batch"], r"gdpo_final_norm='batch'.*valid values: token, sequence, none"),
        (["+algorithm.gdpo_reward_keys=[a,b,c]"], r"disagrees with reward.gdpo.components names"),
        (["reward.reward_manager.name=gdpo"], r"needs algorithm.gdpo_reward_keys"),
        # values that used to pass start-up and break at run time
        (["+reward.gdpo.components.0.kwargs={nope: 1}"], r"kwargs \['nope'\] are not parameters of .*format_reward"),
        (["+reward.gdpo.components.0.kwargs={solution_str: x}"], r"kwargs \['solution_str'\] shadow call arguments"),
        (["reward.gdpo.timeout_s=nan"], r"timeout_s=nan must be a finite number"),
        (["reward.gdpo.timeout_s=true"], r"timeout_s=True must be a number, not bool"),
        (["reward.gdpo.timeout_s=0"], r"timeout_s=0 must be a positive number"),
        (["+reward.gdpo.components.0.key=5"], r"key must be a non-empty string"),
        (["reward.gdpo.components.0.name=uid"], r"name='uid' collides with a key verl"),
        (["algorithm.adv_estimator=grpo", "reward.gdpo.components.0.weight=nan"], r"weight=nan must be a finite"),
        (["reward.gdpo.components.2.condition.threshold=nan"], r"threshold=nan must be a finite number"),
        (["reward.gdpo.components.2.condition.threshold=abc"], r"threshold='abc' must be a number, not str"),
        (["+reward.gdpo.components.1.condition={on: brevity, threshold: 1}"], r"conditions form a cycle"),
        (["algorithm.gdpo_epsilon=-1"], r"gdpo_epsilon=-1 must be a positive number"),
        (["algorithm.gdpo_reward_weights=[1.0,abc,1.0]"], r"gdpo_reward_weights\[1\]='abc' must be a number"),
        (["reward.gdpo.components.0.fn=123"], r"fn must be a function name \(a string\); got 123"),
        (["+reward.gdpo.components.0.kwargs=[1,2]"], r"kwargs must be a mapping of parameter names"),
        (["reward.gdpo.components.0.cheap=maybe"], r"cheap must be true or false"),
    ],
)
def test_bad_config_errors_name_the_bad_value(overrides, match):
    overrides = [o.replace("+algorithm", "algorithm") for o in overrides]
    cfg = compose_cfg("demo", ["launch.demo=false", "actor_rollout_ref.model.path=/tmp/none", *overrides])
    with pytest.raises((ValueError, ImportError), match=match):
        validate(cfg)


def run_main(*args, cwd=None, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "gdpo_verl.main", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


@pytest.mark.slow
def test_cfg_job_prints_components_and_weights_without_starting_ray():
    out = run_main("--cfg", "job", "algorithm.adv_estimator=gdpo")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "name: correctness" in out.stdout and "fn: brevity_reward" in out.stdout and "weight: 1.0" in out.stdout
    assert "adv_estimator: gdpo" in out.stdout and "Started a local Ray instance" not in out.stdout + out.stderr


@pytest.mark.slow
def test_bad_config_fails_fast_before_ray_naming_the_key():
    start = time.monotonic()
    out = run_main("launch.demo=false", "actor_rollout_ref.model.path=/tmp/none", "reward.gdpo.components.0.fn=nope")
    assert out.returncode != 0
    assert "no function 'nope'" in out.stderr and "Started a local Ray instance" not in out.stdout + out.stderr
    assert time.monotonic() - start < 120


@pytest.mark.slow
def test_multirun_runs_each_job_in_its_own_directory(tmp_path):
    out = run_main(
        "-m",
        "method=grpo,saw,gd2po",  # the method presets (recipes/method/) sweep as one Hydra group
        "seed=3",
        "launch.dry_run=true",
        "launch.probe_rewards=false",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("[gdpo-verl] dry run ok")]
    assert [ln.split()[4:6] for ln in lines] == [
        ["adv_estimator=grpo", "method=grpo"],
        ["adv_estimator=gdpo", "method=saw"],
        ["adv_estimator=gd2po", "method=gd2po"],
    ]
    dirs = {ln.rsplit("output_dir=", 1)[1].split(" (not created")[0] for ln in lines}
    assert len(dirs) == 3 and all(str(tmp_path) in d and not Path(d).exists() for d in dirs)  # a dry run writes nothing


@pytest.mark.slow
def test_launch_keys_work_from_yaml_as_well_as_the_command_line(tmp_path):
    # launch.device and launch.dry_run set in the YAML of a user's own config (no launch.* on the command line):
    # the CPU preset is applied (rollout hf) and nothing trains.
    demo = (Path(__file__).resolve().parents[1] / "recipes" / "demo.yaml").read_text()
    assert "launch:\n  demo: true\n" in demo
    launch = f"launch:\n  demo: true\n  device: cpu\n  dry_run: true\n  output_dir: {tmp_path / 'out'}\n"
    (tmp_path / "mine.yaml").write_text(demo.replace("launch:\n  demo: true\n", launch))
    out = run_main("--config-dir", str(tmp_path), "--config-name", "mine", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "[gdpo-verl] dry run ok" in out.stdout and "rollout=hf" in out.stdout
    assert "Started a local Ray instance" not in out.stdout + out.stderr
    bad = run_main("--config-dir", str(tmp_path), "--config-name", "mine", "launch.device=tpu", cwd=tmp_path)
    assert bad.returncode != 0 and "launch.device='tpu' is unknown; valid values: auto, cpu, gpu" in bad.stderr


@pytest.mark.slow
def test_cpu_rollout_engine_follows_launch_rollout_or_the_rollout_name(tmp_path):
    for choice in ("launch.rollout=vllm", "actor_rollout_ref.rollout.name=vllm", "launch.rollout=hf"):
        out = run_main("launch.device=cpu", "launch.dry_run=true", f"launch.output_dir={tmp_path / 'out'}", choice)
        assert out.returncode == 0, out.stderr[-2000:]
        engine = choice.rsplit("=", 1)[1]
        dtype = "float32" if engine == "vllm" else "fp32"  # the engine's own preset, whichever key chose it
        assert f"rollout={engine} rollout_dtype={dtype} " in out.stdout, out.stdout
    bad = run_main("launch.device=cpu", "launch.dry_run=true", "launch.rollout=sglang")
    assert bad.returncode != 0 and "launch.rollout='sglang' is unknown; valid values: hf, vllm" in bad.stderr


PROBED = """
def raises_on_string_truth(solution_str, ground_truth):
    return float(int(ground_truth + 1) > 0)  # a number was expected: the demo's ground truth is a string

def typo(solution_str, ground_truth):
    return {"correctness": 1.0, "format": 0.0}

def fine(solution_str, ground_truth):
    return 1.0
"""


@pytest.mark.parametrize(
    "fn, match",
    [
        ("raises_on_string_truth", r"reward probe: component 'r' .*failed on row 0 .*ground_truth='\d+'.*TypeError"),
        ("typo", r"lacked on all 4 probed rows; the keys it returned: \['correctness', 'format'\]"),
    ],
)
def test_reward_probe_fails_before_ray_on_the_real_ground_truth(tmp_path, fn, match):
    from gdpo_verl.main import prepare

    module = tmp_path / "probed.py"
    module.write_text(PROBED)
    comps = f"reward.gdpo.components=[{{name: r, path: {module}, fn: {fn}}}]"
    cfg = compose_cfg("demo", [comps, f"launch.output_dir={tmp_path / 'out'}"])
    with pytest.raises(ValueError, match=match):
        prepare(cfg)
    ok = compose_cfg("demo", [comps.replace(fn, "fine"), f"launch.output_dir={tmp_path / 'out'}"])
    prepare(ok)  # the same config with a healthy function passes
    env = ok.ray_kwargs.ray_init.runtime_env.env_vars  # verl's file and tensorboard loggers write into the run
    assert (env.VERL_FILE_LOGGER_PATH, env.TENSORBOARD_DIR) == (
        f"{tmp_path}/out/metrics.jsonl",
        f"{tmp_path}/out/tensorboard",
    )
    skipped = compose_cfg("demo", [comps, f"launch.output_dir={tmp_path / 'out'}", "launch.probe_rewards=false"])
    prepare(skipped)  # and the probe can be switched off


def test_help_lists_recipes_launch_keys_and_overrides_without_composing(tmp_path):
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "gdpo_verl.main", "--help"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    recipes = [
        line.split()[0] for line in text.split("recipes (--config-name NAME):\n")[1].split("\n\n")[0].splitlines()
    ]
    assert recipes == ["code", "deepscaler", "demo", "demo_toolcall_scale", "gsm8k", "toolcall"]
    for key in ("device: auto", "dry_run: false", "verbose: false", "probe_rewards: true", "--cfg job", "method=grpo"):
        assert key in text, key
    assert "== Config ==" not in text and len(text.splitlines()) < 60  # not Hydra's help with the whole config
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "verl" not in imported and "torch" not in imported  # answers without loading verl (under a second)
