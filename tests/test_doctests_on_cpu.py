"""Every docstring example in the project runs: each module whose source shows a ``>>>`` example is collected here,
its examples run with doctest, and a module whose examples doctest would not find (a typo, an example outside a
docstring) fails instead of passing silently.

Run: python -m pytest tests/test_doctests_on_cpu.py
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gdpo_verl", "data_prep")


def _modules_with_examples() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if ">>> " in path.read_text():
                found.append(".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"))
    return found


MODULES = _modules_with_examples()


def test_the_collector_finds_the_modules_with_examples():
    assert {"gdpo_verl.core.contract", "gdpo_verl.core.advantage", "gdpo_verl.verl_env"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = [t for t in finder.find(module) if t.examples]
    assert tests, f"{name} shows '>>> ' examples but doctest finds none in its docstrings"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (output above)"
