"""Packaging: every package of the tree ships, and an installed (non-editable) wheel finds its recipes.

The wheel is built from this checkout without build isolation (no network), installed with ``pip --target``
into a temporary directory, and used from another directory: ``python -m gdpo_verl.main --config-name
<recipe> --cfg job`` must compose the recipe from the installed package, not from the checkout.
Run: .venv/bin/python -m pytest tests/test_packaging_on_cpu.py
"""

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
    assert sorted(setuptools["packages"]) == sorted(tree | {"gdpo_verl.recipes"})
    assert setuptools["package-dir"] == {"gdpo_verl.recipes": "recipes"}


@pytest.mark.slow
def test_installed_wheel_composes_a_recipe_from_another_directory(tmp_path):
    wheels, site, elsewhere, source = (tmp_path / d for d in ("wheels", "site", "elsewhere", "source"))
    elsewhere.mkdir()
    # build from a copy: an in-tree build would leave build/ and *.egg-info in the checkout
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in ("gdpo_verl", "recipes"):
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
