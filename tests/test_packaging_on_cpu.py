"""Packaging: every package of the tree ships, and an installed (non-editable) wheel finds its recipes.

The wheel is built from this checkout without build isolation (no network), installed with ``pip --target``
into a temporary directory, and used from another directory: ``python -m gdpo_verl.main --config-name
<recipe> --cfg job`` must compose the recipe from the installed package, not from the checkout.
Run: .venv/bin/python -m pytest tests/test_packaging_on_cpu.py
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from setuptools import find_namespace_packages

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_of_the_tree_is_listed_in_pyproject():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    tree = {p for p in find_namespace_packages(str(ROOT), include=["gdpo_verl*"]) if "__pycache__" not in p}
    shipped_folders = {"gdpo_verl.recipes", "gdpo_verl.recipes.method", "gdpo_verl.data_prep"}
    assert sorted(setuptools["packages"]) == sorted(tree | shipped_folders)
    assert setuptools["package-dir"] == {"gdpo_verl.recipes": "recipes", "gdpo_verl.data_prep": "data_prep"}


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory):
    """The wheel built once from a copy of the checkout and installed with ``pip --target``: (site, elsewhere, the
    build's stderr). Both slow tests use this one install."""
    root = tmp_path_factory.mktemp("wheel")
    wheels, site, elsewhere, source = (root / d for d in ("wheels", "site", "elsewhere", "source"))
    elsewhere.mkdir()
    # build from a copy: an in-tree build would leave build/ and *.egg-info in the checkout
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in ("gdpo_verl", "recipes", "data_prep"):
        shutil.copytree(ROOT / name, source / name, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    build = subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheels.glob("gdpo_verl-*.whl")
    install = subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert install.returncode == 0, install.stderr[-2000:]
    return site, elsewhere, build.stderr


@pytest.mark.slow
def test_installed_wheel_composes_a_recipe_from_another_directory(installed_wheel):
    site, elsewhere, build_stderr = installed_wheel
    assert "Package 'gdpo_verl" not in build_stderr and "license" not in build_stderr.lower(), build_stderr[-2000:]
    assert (site / "gdpo_verl" / "recipes" / "toolcall.yaml").is_file()
    assert (site / "gdpo_verl" / "recipes" / "method" / "grpo.yaml").is_file()
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run([sys.executable, "-c", "import gdpo_verl.recipes as r; print(r.__file__)"],
                           capture_output=True, text=True, cwd=elsewhere, env=env, timeout=60)  # fmt: skip
    assert where.stdout.strip().startswith(str(site)), where.stdout + where.stderr
    out = subprocess.run(
        [sys.executable, "-m", "gdpo_verl.main", "--config-name", "toolcall", "method=grpo", "--cfg", "job"],
        capture_output=True, text=True, cwd=elsewhere, env=env, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "adv_estimator: grpo" in out.stdout and "path: gdpo_verl.rewards.toolcall" in out.stdout


README_COMMANDS = [
    # (the README's command, a piece of what it must print)
    (["-m", "gdpo_verl.main", "--help"], "recipes (--config-name NAME):"),
    (["-m", "gdpo_verl.data_prep.toolcall", "--help"], "usage:"),
    (["-m", "gdpo_verl.data_prep.gsm8k", "--help"], "--train-file"),
    (["-m", "gdpo_verl.data_prep.deepscaler", "--help"], "--train-file"),
    (["-m", "gdpo_verl.data_prep.eurus_code", "--help"], "--train-file"),
    (["-m", "gdpo_verl.tools.evaluate", "--help"], "--task"),
    (["-m", "gdpo_verl.tools.plot", "--help"], "usage:"),
    (["-m", "gdpo_verl.tools.analysis", "distinct", "--rewards", "2", "--rollouts", "2"], "gdpo,2,2,"),
]


@pytest.mark.slow
def test_installed_wheel_runs_the_readme_commands_from_another_directory(installed_wheel):
    site, elsewhere, _ = installed_wheel
    env = {**os.environ, "PYTHONPATH": str(site)}

    def run(*args):
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=elsewhere, env=env,
                              timeout=300)  # fmt: skip

    for args, expected in README_COMMANDS:
        out = run(*args)
        assert out.returncode == 0 and expected in out.stdout, (args, out.stdout[-1500:], out.stderr[-1500:])
    # GSM8K from local files, as the README's offline variant, then a dry run of the gsm8k recipe on them with the
    # demo's model: the wheel's data preparation feeds the wheel's recipe
    for split, n in (("train", 3), ("test", 2)):
        rows = [{"question": f"What is {i} + {i}?", "answer": f"{i} and {i}\n#### {2 * i}"} for i in range(n)]
        (elsewhere / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    prep = run("-m", "gdpo_verl.data_prep.gsm8k", "--train-file", "train.jsonl", "--test-file", "test.jsonl",
               "--out", "data")  # fmt: skip
    assert prep.returncode == 0, prep.stderr[-2000:]
    assert (elsewhere / "data" / "train.parquet").is_file() and (elsewhere / "data" / "test.parquet").is_file()
    assert run("-c", "import gdpo_verl.data_prep as d; print(d.__file__)").stdout.startswith(str(site))
