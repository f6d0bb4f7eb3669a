"""Reward components: the ``reward.gdpo`` config block, validated and turned into callables.

Used by the multi-reward manager (in every reward worker) and by ``python -m gdpo_verl.main`` (at startup,
before Ray starts). A component is declared as

    reward:
      gdpo:
        on_error: raise          # raise | nan  (nan: the component abstains for that sample, errors are counted)
        timeout_s: 30            # per reward-function call; null for none
        components:
          - name: format
            path: gdpo_verl.rewards.toolcall   # module path, pkg://module, or a .py file path
            fn: format_reward                  # default compute_score
            key: null                          # when fn returns a dict: the entry to take (default: name)
            weight: 1.0
            condition: null                    # {on: correctness, threshold: 1.0}  (paper Eq. 8)
            kwargs: {}

A function is called with whichever of ``data_source, solution_str, ground_truth, extra_info`` it accepts
(all of them when it takes ``**kwargs``), plus the component's kwargs. Components that share ``path`` and
``fn`` and ``kwargs`` share one call per sample; a dict result feeds each of them through its ``key``.
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gdpo_verl.core.advantage import Condition
from gdpo_verl.core.choices import check_choice

ON_ERROR = ("raise", "nan")
CALL_ARGS = ("data_source", "solution_str", "ground_truth", "extra_info", "response_length")  # response_length: tokens
ERROR_PREFIX = "gdpo_error_"  # reward_extra_info key of a component's error flag, written by the manager


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

    @property
    def call_id(self) -> tuple:
        """Components with the same call_id share one function call per sample."""
        return (self.path, self.fn, tuple(sorted((k, repr(v)) for k, v in self.kwargs.items())))


@dataclass(frozen=True)
class RewardSpec:
    """The whole ``reward.gdpo`` block."""

    components: tuple[Component, ...]
    on_error: str = "raise"
    timeout_s: float | None = 30.0

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


def _plain(value):
    """OmegaConf containers -> plain Python (no hard dependency on omegaconf here)."""
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(value):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover
        pass
    return value


def yaml_on(condition):
    """YAML 1.1 reads an unquoted ``on`` key as the boolean True; take it back as ``"on"``."""
    if isinstance(condition, Mapping) and True in condition and "on" not in condition:
        condition = {("on" if k is True else k): v for k, v in condition.items()}
    return condition


def parse_spec(block) -> RewardSpec:
    """Validate a ``reward.gdpo`` mapping; every error names the bad key and value and the fix."""
    block = _plain(block) or {}
    on_error = check_choice("reward.gdpo.on_error", block.get("on_error", "raise"), ON_ERROR)
    timeout = block.get("timeout_s", 30.0)
    if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ValueError(f"reward.gdpo.timeout_s={timeout!r} must be a positive number of seconds or null")
    raw = block.get("components") or []
    if not isinstance(raw, list):
        raise ValueError(f"reward.gdpo.components must be a list of components; got {type(raw).__name__}")
    components = []
    for i, item in enumerate(raw):
        where = f"reward.gdpo.components[{i}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{where} must be a mapping with at least name and path; got {item!r}")
        unknown = set(item) - {"name", "path", "fn", "key", "weight", "condition", "kwargs"}
        if unknown:
            raise ValueError(
                f"{where} has unknown keys {sorted(unknown)}; valid keys: name, path, fn, key, weight, condition, "
                "kwargs"
            )
        name, path = item.get("name"), item.get("path")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.name must be a non-empty string; got {name!r}")
        if not isinstance(path, str) or not path:
            raise ValueError(f"{where} ({name}).path must name a module or .py file; got {path!r}")
        try:
            weight = float(item.get("weight", 1.0))
        except (TypeError, ValueError):
            raise ValueError(f"{where} ({name}).weight must be a number; got {item.get('weight')!r}") from None
        condition = yaml_on(item.get("condition") or {})
        if condition and (not isinstance(condition, Mapping) or "on" not in condition):
            raise ValueError(f"{where} ({name}).condition must look like {{on: <component>, threshold: <float>}}")
        components.append(
            Component(
                name=name,
                path=path,
                fn=item.get("fn") or "compute_score",
                key=item.get("key"),
                weight=weight,
                condition_on=condition.get("on") if condition else None,
                threshold=float(condition.get("threshold", 0.0)) if condition else 0.0,
                kwargs=dict(item.get("kwargs") or {}),
            )
        )
    names = [c.name for c in components]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f"reward.gdpo.components has duplicate names {duplicated}; names must be distinct")
    for c in components:
        if c.condition_on is not None and (c.condition_on not in names or c.condition_on == c.name):
            raise ValueError(
                f"reward.gdpo.components ({c.name}).condition.on={c.condition_on!r} is not another component; "
                f"valid values: {', '.join(n for n in names if n != c.name)}"
            )
    return RewardSpec(components=tuple(components), on_error=on_error, timeout_s=timeout)


def load_function(path: str, name: str) -> Callable:
    """Import ``name`` from a module path (``pkg.mod`` or ``pkg://pkg.mod``) or a ``.py`` file path."""
    try:
        if path.endswith(".py") or os.sep in path or path.startswith("file://"):
            from verl.utils.import_utils import load_extern_object

            return load_extern_object(module_path=path, object_name=name)
        module = importlib.import_module(path.removeprefix("pkg://").replace("/", "."))
    except Exception as e:
        raise ImportError(f"cannot import reward function module {path!r}: {type(e).__name__}: {e}") from e
    if not hasattr(module, name):
        public = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise ImportError(f"reward module {path!r} has no function {name!r}; callables there: {public}")
    return getattr(module, name)


def bind(fn: Callable, kwargs: Mapping[str, Any]) -> Callable[..., Any]:
    """Wrap ``fn`` so it can always be called with every ``CALL_ARGS`` argument, passing only what it accepts."""
    params = inspect.signature(fn).parameters
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    accepted = [a for a in CALL_ARGS if takes_all or a in params]
    fixed = dict(kwargs)

    def call(**available):
        return fn(**{a: available[a] for a in accepted}, **fixed)

    call.__name__ = getattr(fn, "__name__", "reward_fn")
    return call


def resolve(spec: RewardSpec) -> dict[tuple, Callable]:
    """Import every distinct function once: {call_id: bound callable}. Raises ImportError naming the component."""
    calls = {}
    for c in spec.components:
        if c.call_id in calls:
            continue
        try:
            calls[c.call_id] = bind(load_function(c.path, c.fn), c.kwargs)
        except ImportError as e:
            raise ImportError(f"reward.gdpo.components ({c.name}): {e}") from e
    return calls
