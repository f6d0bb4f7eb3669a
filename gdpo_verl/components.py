"""Reward components: the ``reward.gdpo`` config block, validated and turned into bound calls.

Used by the multi-reward manager (in every reward worker) and by ``python -m gdpo_verl.main`` (at startup,
before Ray starts). A component is declared as

    reward:
      gdpo:
        on_error: raise          # raise | nan  (nan: the component abstains for that sample, errors are counted)
        timeout_s: 30            # per reward-function call (a positive number of seconds)
        processes: 2             # reward-function worker processes per reward worker (killable calls)
        components:
          - name: format
            path: gdpo_verl.rewards.toolcall   # module path, pkg://module, or a .py file path
            fn: format_reward                  # default compute_score
            key: null                          # when fn returns a dict: the entry to take (default: name)
            weight: 1.0
            condition: null                    # {on: correctness, threshold: 1.0}  (paper Eq. 8)
            kwargs: {}
            cheap: false                       # true: run in a thread, no process hop (fast, trusted functions)

A function is called with whichever of ``data_source, solution_str, ground_truth, extra_info, response_length``
(the response's token count) it accepts
(all of them when it takes ``**kwargs``), plus the component's kwargs (checked against its signature).
Components that share ``path``, ``fn`` and ``kwargs`` share one call per sample; a dict result feeds each of
them through its ``key``. Every value is type-checked here: a bad one raises ``ValueError`` naming the key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gdpo_verl.core.advantage import Condition
from gdpo_verl.core.choices import check_choice, clipped, first_of, real_number, yaml_on
from gdpo_verl.core.contract import (
    MANAGER_NAME,
    MAX_WEIGHT,
    RESERVED_NAMES,
    RESERVED_PREFIXES,
    WEIGHT_BOUND_WHY,
    RewardSettings,
)
from gdpo_verl.reward_calls import BoundCall, bind

ON_ERROR = ("raise", "nan")
PROCESSES_PER_CORE = 4  # reward-function processes per core at most (calls mostly wait on I/O or time-outs)
COMPONENT_KEYS = ("name", "path", "fn", "key", "weight", "condition", "kwargs", "cheap")
#: the rollout workers that turn the manager's records into per-reward tensors (both verl trainers)
AGENT_LOOP_MANAGER = "gdpo_verl.verl_glue.agent_loop.GDPOAgentLoopManager"
AGENT_LOOP_MANAGER_KEY = "actor_rollout_ref.rollout.agent.agent_loop_manager_class"


@dataclass(frozen=True)
class Component:
    """One declared reward component."""

    name: str
    path: str
    fn: str = "compute_score"
    key: str | None = None
    weight: float = 1.0
    condition_on: str | None = None
    threshold: float = 0.0
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    cheap: bool = False

    @property
    def call_id(self) -> tuple:
        """Components with the same call_id share one function call per sample."""
        return (self.path, self.fn, tuple(sorted((k, repr(v)) for k, v in self.kwargs.items())))


@dataclass(frozen=True)
class RewardSpec:
    """The whole ``reward.gdpo`` block."""

    components: tuple[Component, ...]
    on_error: str = "raise"
    timeout_s: float = 30.0
    processes: int = 2

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.components]

    @property
    def weights(self) -> list[float]:
        return [c.weight for c in self.components]

    @property
    def gates(self) -> tuple[Condition, ...]:
        """The conditions as ``gdpo_verl.core.advantage.Condition`` over the components' order."""
        names = self.names
        return tuple(
            Condition(names.index(c.name), names.index(c.condition_on), c.threshold)
            for c in self.components
            if c.condition_on
        )

    @property
    def conditions(self) -> dict[str, dict[str, Any]]:
        """In ``algorithm.gdpo_reward_conditions`` form: {target: {on, threshold}}."""
        return {c.name: {"on": c.condition_on, "threshold": c.threshold} for c in self.components if c.condition_on}

    def settings(self, algorithm=None) -> RewardSettings:
        """The components' :class:`~gdpo_verl.core.contract.RewardSettings`: ``algorithm.gdpo_reward_*`` when that
        config names these components (``python -m gdpo_verl.main`` derives them from the components unless set),
        else the components' own weights and conditions. One source of truth: the GRPO baseline's reward then
        uses the weights GDPO uses, so ``-m method=gdpo,grpo algorithm.gdpo_reward_weights=[...]`` compares like
        with like."""
        own = RewardSettings(keys=tuple(self.names), weights=tuple(self.weights), conditions=self.gates)
        return RewardSettings.from_algorithm(algorithm) if own.names_components_of(algorithm) else own


def _plain(value):
    """OmegaConf containers -> plain Python (no hard dependency on omegaconf here)."""
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(value):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover
        pass
    return value


def _condition_cycle(components) -> list[str] | None:
    """The names along a cycle of conditions (a -> b -> ... -> a), or None."""
    on = {c.name: c.condition_on for c in components if c.condition_on}
    for start in on:
        seen, name = [start], on[start]
        while name in on and name not in seen:
            seen.append(name)
            name = on[name]
        if name == start:
            return [*seen, start]
    return None


def _component(item, i: int) -> Component:
    where = f"reward.gdpo.components[{i}]"
    if not isinstance(item, Mapping):
        raise ValueError(f"{where} must be a mapping with at least name and path; got {clipped(item)}")
    unknown = set(item) - set(COMPONENT_KEYS)
    if unknown:
        raise ValueError(
            f"{where} has unknown keys {first_of(sorted(map(str, unknown)))}; valid keys: {', '.join(COMPONENT_KEYS)}"
        )
    name, path = item.get("name"), item.get("path")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}.name must be a non-empty string; got {clipped(name)}")
    where = f"{where} ({name})"
    if name in RESERVED_NAMES or name.startswith(RESERVED_PREFIXES):
        raise ValueError(
            f"{where}.name={name!r} collides with a key verl or the manager puts on every sample; rename it"
        )
    if not isinstance(path, str) or not path:
        raise ValueError(f"{where}.path must name a module or .py file; got {clipped(path)}")
    fn = item.get("fn") or "compute_score"
    if not isinstance(fn, str):
        raise ValueError(f"{where}.fn must be a function name (a string); got {clipped(fn)}")
    key = item.get("key")
    if key is not None and (not isinstance(key, str) or not key):
        raise ValueError(f"{where}.key must be a non-empty string (the dict entry to take) or null; got {clipped(key)}")
    kwargs = item.get("kwargs") or {}
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        raise ValueError(f"{where}.kwargs must be a mapping of parameter names to values; got {clipped(kwargs)}")
    cheap = item.get("cheap", False)
    if not isinstance(cheap, bool):
        raise ValueError(f"{where}.cheap must be true or false; got {clipped(cheap)}")
    condition = yaml_on(item.get("condition") or {})
    if condition and (not isinstance(condition, Mapping) or not isinstance(condition.get("on"), str)):
        raise ValueError(
            f"{where}.condition must look like {{on: <component>, threshold: <float>}}; got {clipped(condition)}"
        )
    return Component(
        name=name,
        path=path,
        fn=fn,
        key=key,
        weight=real_number(item.get("weight", 1.0), f"{where}.weight", at_most=MAX_WEIGHT, why=WEIGHT_BOUND_WHY),
        condition_on=condition.get("on") if condition else None,
        threshold=real_number(condition.get("threshold", 0.0), f"{where}.condition.threshold") if condition else 0.0,
        kwargs=dict(kwargs),
        cheap=cheap,
    )


def parse_spec(block) -> RewardSpec:
    """Validate a ``reward.gdpo`` mapping; every error names the bad key and value and the fix."""
    block = _plain(block) or {}
    on_error = check_choice("reward.gdpo.on_error", block.get("on_error", "raise"), ON_ERROR)
    timeout = real_number(block.get("timeout_s", 30.0), "reward.gdpo.timeout_s", positive=True)
    processes = block.get("processes", 2)
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ValueError(f"reward.gdpo.processes={clipped(processes)} must be a whole number >= 1")
    cores = os.cpu_count() or 1
    if processes > cores * PROCESSES_PER_CORE:
        raise ValueError(
            f"reward.gdpo.processes={processes} is more than {PROCESSES_PER_CORE} x this machine's {cores} cores "
            f"({cores * PROCESSES_PER_CORE}): every process is started up front; use at most that many"
        )
    raw = block.get("components") or []
    if not isinstance(raw, list):
        raise ValueError(f"reward.gdpo.components must be a list of components; got {type(raw).__name__}")
    components = [_component(item, i) for i, item in enumerate(raw)]
    names = [c.name for c in components]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f"reward.gdpo.components has duplicate names {first_of(duplicated)}; names must be distinct")
    for c in components:
        if c.condition_on is not None and (c.condition_on not in names or c.condition_on == c.name):
            raise ValueError(
                f"reward.gdpo.components ({c.name}).condition.on={c.condition_on!r} is not another component; "
                f"valid values: {', '.join(n for n in names if n != c.name)}"
            )
    cycle = _condition_cycle(components)
    if cycle:
        raise ValueError(f"reward.gdpo.components: the conditions form a cycle {' -> '.join(cycle)}; break it")
    return RewardSpec(components=tuple(components), on_error=on_error, timeout_s=timeout, processes=processes)


def _select(config, dotted: str):
    for part in dotted.split("."):
        config = config.get(part) if isinstance(config, Mapping) or hasattr(config, "get") else None
        if config is None:
            return None
    return config


def uses_per_reward_tensors(config) -> bool:
    """True when the run's reward manager is ``gdpo_multi`` (per-reward tensors); other managers (upstream-style
    ``compute_score`` dicts) take the scalar path."""
    return str(_select(config, "reward.reward_manager.name") or "") == MANAGER_NAME


def check_data_path(config) -> None:
    """What the ``gdpo_multi`` data path needs beyond ``reward.gdpo``, refused with the value and the fix: the
    rollout workers that write the per-reward tensors, and no colocated reward model. Called by the manager in
    every reward worker and by ``python -m gdpo_verl.main`` at start-up."""
    chosen = _select(config, AGENT_LOOP_MANAGER_KEY)
    if chosen != AGENT_LOOP_MANAGER:
        raise ValueError(
            f"reward.reward_manager.name={MANAGER_NAME} needs {AGENT_LOOP_MANAGER_KEY}={AGENT_LOOP_MANAGER} (the "
            f"rollout workers that put the per-reward tensors in the batch); it is {chosen!r}. Compose "
            "gdpo_trainer (every recipe does) or set it"
        )
    reward_model = _select(config, "reward.reward_model") or {}
    if reward_model.get("enable", False) and not reward_model.get("enable_resource_pool", False):
        raise ValueError(
            f"reward.reward_model.enable=true with enable_resource_pool=false (a colocated reward model) is refused "
            f"with reward.reward_manager.name={MANAGER_NAME}: verl then scores each batch after the rollout "
            "(trainer _compute_reward_colocate) and writes the extra keys as separate fields, outside the rollout "
            "workers that build the per-reward tensors. Use reward.reward_model.enable_resource_pool=true, or "
            "reward.reward_model.enable=false with rule-based components"
        )


def resolve(spec: RewardSpec) -> dict[tuple, BoundCall]:
    """Import every distinct function once and check its kwargs: {call_id: BoundCall}.

    Raises ImportError or ValueError naming the component.
    """
    calls = {}
    for i, c in enumerate(spec.components):
        if c.call_id in calls:
            continue
        where = f"reward.gdpo.components[{i}] ({c.name})"
        try:
            calls[c.call_id] = bind(c.path, c.fn, c.kwargs, where)
        except ImportError as e:
            raise ImportError(f"{where}: {e}") from e
    return calls
