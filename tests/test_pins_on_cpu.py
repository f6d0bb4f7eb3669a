"""Every verl internal the project touches is verl 0.9.1's (gdpo_verl.pins), and another verl is refused at run time.

Run: python -m pytest tests/test_pins_on_cpu.py
"""

from __future__ import annotations

import logging
import types

import pytest

from gdpo_verl import pins


@pytest.mark.parametrize("name", sorted(pins.PINNED_SOURCE_SHA256))
def test_every_pinned_verl_object_is_unchanged(name):
    assert pins.source_sha256(pins.resolve(name)) == pins.PINNED_SOURCE_SHA256[name], (
        f"verl's {name} changed: re-read the hook named beside its pin in gdpo_verl/pins.py and port it"
    )


def test_a_changed_or_vanished_object_is_reported_by_name():
    name = "verl.utils.distributed.initialize_global_process_group_ray"
    table = {name: "0" * 64, "verl.utils.distributed.no_such_function": "0" * 64}
    found = pins.mismatched(table)
    assert set(found) == set(table)
    assert (
        found[name].startswith("source sha256 ")
        and "not found (AttributeError" in found["verl.utils.distributed.no_such_function"]
    )
    assert pins.mismatched() == {}


def test_the_resolver_unwraps_ray_actors_and_decorators():
    import ray

    @ray.remote
    class Actor:
        def method(self):
            return 1

    module = types.ModuleType("gdpo_pins_probe")
    module.Actor = Actor
    import sys

    sys.modules["gdpo_pins_probe"] = module
    try:
        assert pins.resolve("gdpo_pins_probe.Actor.method") is Actor.__ray_actor_class__.method
    finally:
        del sys.modules["gdpo_pins_probe"]


def test_installed_verl_is_the_pinned_version():
    import verl

    assert verl.__version__ == pins.VERL_VERSION


def test_another_verl_is_refused_unless_the_user_opts_in_loudly(monkeypatch, caplog):
    import verl

    monkeypatch.setattr(verl, "__version__", "0.10.0")
    monkeypatch.delenv(pins.ALLOW_ENV, raising=False)
    refused = r"verl==0\.9\.1 internals, but verl==0\.10\.0.*GDPO_VERL_ALLOW_VERL=0\.10\.0"
    with pytest.raises(RuntimeError, match=refused):
        pins.check_verl_version("plugin")
    monkeypatch.setenv(pins.ALLOW_ENV, "0.9.9")  # an opt-in for another version does not count
    with pytest.raises(RuntimeError):
        pins.check_verl_version("plugin")
    monkeypatch.setenv(pins.ALLOW_ENV, "0.10.0")
    with caplog.at_level(logging.WARNING, logger="gdpo_verl.pins"):
        pins.check_verl_version("plugin")
    assert "UNCHECKED on verl==0.10.0" in caplog.text


def test_the_plugin_installs_nothing_on_another_verl_and_the_check_says_why(monkeypatch):
    import verl
    from verl.trainer.ppo import core_algos

    from gdpo_verl.verl_glue import check_registered, install

    monkeypatch.setattr(verl, "__version__", "0.10.0")
    monkeypatch.delenv(pins.ALLOW_ENV, raising=False)
    monkeypatch.setitem(core_algos.ADV_ESTIMATOR_REGISTRY, "gdpo", core_algos.compute_gdpo_outcome_advantage)
    with pytest.raises(RuntimeError, match="0.10.0"):
        install()
    assert core_algos.ADV_ESTIMATOR_REGISTRY["gdpo"] is core_algos.compute_gdpo_outcome_advantage
    with pytest.raises(RuntimeError, match="The plugin refused to install: .*verl==0.10.0"):
        check_registered("test")
