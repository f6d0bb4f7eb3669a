"""Multi-reward manager for verl's reward loop, registered as ``gdpo_multi``: reward functions -> per-reward scores.

Select it with ``reward.reward_manager.name=gdpo_multi`` and declare components under ``reward.gdpo``
(see ``gdpo_verl.components``). verl builds one manager per reward worker (a Ray actor); the plugin entry
point registers the class in every process (``gdpo_verl.verl_glue``). Calls run through
``gdpo_verl.reward_calls`` (killable worker processes with a time-out that holds; ``cheap`` components in threads).

Per sample it returns verl's ``{"reward_score", "reward_extra_info"}``:
  reward_score       the weighted sum of the components after conditions (missing counts 0), with the weights and
                     conditions GDPO uses (``algorithm.gdpo_reward_*``), so ``token_level_scores`` is the GRPO
                     baseline's reward on the same components;
  reward_extra_info  every component's raw score under its name (NaN where it abstains), and per component the
                     flags ``gdpo_error_<name>`` (its call failed, under ``on_error: nan``), ``gdpo_nonfinite_<name>``
                     (it returned inf or NaN; also an error) and ``gdpo_missing_<name>`` (its dict result lacked the
                     component's key), each 1.0 or 0.0; for a process reward also ``gdpo_tokens_<name>``.
Every sample carries every key but ``gdpo_tokens_*``, so verl's "keys from the first sample" rule loses nothing.
The rollout workers (``gdpo_verl.verl_glue.agent_loop``) turn these into the per-reward tensors
``token_level_scores_<name>`` that travel with the batch to the estimator (``gdpo_verl.core.token_scores``).

Process (token-level) rewards: a function may return, for a component, one number per response token (a list,
tuple, 1-D numpy array or tensor whose length is ``response_length``); the values land in that component's tensor
as given and the component's value (its key in reward_extra_info, the group step) is their sum, as verl's GRPO
sums ``token_level_rewards``. A sequence of another length, or with a non-finite value, is a failure.

What counts as a failure (goes through ``on_error``): any exception (``SystemExit`` included), a time-out, a value
that is not a real number, None, per-token numbers or a dict (a string, a 2-D array, ...), a number that does not
fit a float (``10**400``), and inf or NaN. ``raise`` stops with ``RewardFunctionError`` naming the component, its
function, the data source and a clipped response; ``nan`` makes the component abstain for that sample. ``None`` (or a
dict without the key, for mixed data sources) is a deliberate abstention, not a failure.
"""

from __future__ import annotations

import asyncio
import logging
import math

import torch
from verl import DataProto
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from gdpo_verl.components import RewardSpec, check_data_path, parse_spec, resolve
from gdpo_verl.core.contract import MANAGER_NAME, ComponentValue, encode_sample
from gdpo_verl.reward_calls import RewardCaller, Unusable

NAME = MANAGER_NAME
logger = logging.getLogger(__name__)


class RewardFunctionError(RuntimeError):
    """A reward function raised or timed out under ``on_error: raise``."""


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


def _per_token(values: list[float], length: int | None) -> ComponentValue:
    """A process reward's per-token values (floats): ``length`` long (when known), finite, within float32."""
    if length is not None and len(values) != length:
        return ComponentValue(error=f"returned {len(values)} per-token values for a response of {length} tokens")
    tensor = torch.tensor(values, dtype=torch.float64)
    if not bool(torch.isfinite(tensor).all()):
        return ComponentValue(error="returned per-token values that are not all finite", nonfinite=True)
    if bool(torch.isinf(tensor.to(torch.float32)).any()):
        return ComponentValue(error="returned per-token values too large for float32", nonfinite=True)
    return ComponentValue(value=float(tensor.sum()), tokens=tuple(values))


def component_value(result, key: str, length: int | None = None) -> ComponentValue:
    """A component's value from a call's plain result (``gdpo_verl.reward_calls.to_plain``, made in the worker):
    a float, None (abstain), a list of floats (a process reward, ``length`` of them when given), ``Unusable``, or a
    dict of these. Plain data only, so nothing here can raise or hang on a hostile object.

    >>> component_value({"format": 1.0, "correctness": 0.5}, "correctness").value
    0.5
    >>> component_value({"format": 1.0}, "correctness").missing_from
    ('format',)
    >>> component_value(float("inf"), "x").error
    'returned inf, which is not finite'
    >>> from gdpo_verl.reward_calls import to_plain
    >>> component_value(to_plain("1.0"), "x").error
    "returned str '1.0', expected a real number, None, per-token numbers or a dict"
    >>> component_value([0.5, 0.25], "x", length=2).value, component_value([1.0, 2.0, 3.0], "x", length=2).error
    (0.75, 'returned 3 per-token values for a response of 2 tokens')
    """
    if isinstance(result, dict):
        if key not in result:
            return ComponentValue(missing_from=tuple(sorted(result)))
        result = result[key]
    if isinstance(result, Unusable):  # what the worker could not turn into numbers
        return ComponentValue(error=result.reason)
    if result is None:
        return ComponentValue()
    if isinstance(result, list):
        return _per_token(result, length)
    if type(result) is not float:  # not from to_plain: refuse rather than read it
        return ComponentValue(error=f"returned {type(result).__name__}, which is not plain data (a bug)")
    if not math.isfinite(result):
        return ComponentValue(error=f"returned {result}, which is not finite", nonfinite=True)
    return ComponentValue(value=result)


class ComponentScorer:
    """Every component of a ``reward.gdpo`` spec on one sample: shared calls once, each through ``on_error``'s rules.

    Used by the manager in each reward worker and by the start-up reward probe of ``python -m gdpo_verl.main``.
    """

    def __init__(self, spec: RewardSpec):
        self.spec = spec
        self.calls = resolve(spec)
        self.cheap = {
            cid: all(c.cheap for c in spec.components if c.call_id == cid) for cid in self.calls
        }  # a call is cheap only when every component sharing it says so
        self.caller = RewardCaller(processes=spec.processes)

    async def score(self, kwargs: dict) -> dict[str, ComponentValue]:
        """{component name: its value} for one sample; ``kwargs`` are the call arguments."""
        timeout = self.spec.timeout_s
        outcomes = await asyncio.gather(
            *(self.caller.call(call, kwargs, timeout, cheap=self.cheap[cid]) for cid, call in self.calls.items())
        )
        outcomes = dict(zip(self.calls, outcomes))
        values = {}
        for c in self.spec.components:
            outcome = outcomes[c.call_id]
            values[c.name] = (
                ComponentValue(error=outcome.error)
                if outcome.error
                else component_value(outcome.value, c.key or c.name, kwargs.get("response_length"))
            )
        return values

    def close(self) -> None:
        self.caller.close()


class MultiRewardManager(RewardManagerBase):
    """Scores each sample with every declared component; see the module docstring for the output."""

    def __init__(self, config, tokenizer, compute_score=None, reward_router_address=None, reward_model_tokenizer=None):
        super().__init__(config, tokenizer, compute_score)
        check_data_path(config)
        self.spec = parse_spec(config.reward.get("gdpo"))
        if not self.spec.components:
            raise ValueError(
                f"reward.reward_manager.name={NAME} needs reward.gdpo.components (a list of "
                "{name, path, fn, weight}); none are declared"
            )
        self.scorer = ComponentScorer(self.spec)
        self.settings = self.spec.settings(config.get("algorithm"))

    async def run_single(self, data: DataProto) -> dict:
        item = data[-1]  # multi-sequence outputs: score the last sequence, as verl's managers do
        response_ids = item.batch["responses"]
        valid = int(item.batch["attention_mask"][-response_ids.shape[-1] :].sum())
        # decoded inline: never queued behind reward calls
        text = self.tokenizer.decode(response_ids[:valid], skip_special_tokens=True)
        data_source = item.non_tensor_batch.get("data_source", "unknown")
        kwargs = {
            "data_source": data_source,
            "solution_str": text,
            "ground_truth": item.non_tensor_batch["reward_model"]["ground_truth"],
            "extra_info": item.non_tensor_batch.get("extra_info", None),
            "response_length": valid,
        }
        scored = await self.scorer.score(kwargs)
        for c in self.spec.components:
            got = scored[c.name]
            if got.error is not None and self.spec.on_error == "raise":
                raise RewardFunctionError(
                    f"reward component {c.name!r} ({c.path}:{c.fn}) failed on data_source={data_source!r}: "
                    f"{got.error}; response: {_clip(text)!r}. Set reward.gdpo.on_error=nan to let it abstain."
                )
            if got.missing_from is not None:
                logger.debug("component %r: %s:%s returned no key %r; its keys: %s", c.name, c.path, c.fn,
                             c.key or c.name, list(got.missing_from))  # fmt: skip
        values = torch.tensor([[scored[name].value for name in self.settings.keys]], dtype=torch.float64)  # (1, K)
        total = float(self.settings.total(values)[0])
        return {"reward_score": total, "reward_extra_info": encode_sample(scored)}
