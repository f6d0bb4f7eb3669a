"""Multi-reward manager for verl's reward loop, registered as ``gdpo_multi``.

Select it with ``reward.reward_manager.name=gdpo_multi`` and declare components under ``reward.gdpo``
(see ``gdpo_verl.components``). verl builds one manager per reward worker (a Ray actor); the plugin entry
point registers the class in every process (``gdpo_verl.verl_glue``).

Per sample it returns verl's ``{"reward_score", "reward_extra_info"}``:
  reward_score       the weighted sum of the components after conditions (NaN counts 0), so
                     ``token_level_scores`` is the GRPO baseline's reward on the same components;
  reward_extra_info  every component's raw score under its name (NaN where it abstains), and
                     ``gdpo_error_<name>`` (1.0 where its call failed under ``on_error: nan``, else 0.0).
Every sample carries every key, so verl's "keys from the first sample" rule loses nothing.
"""

from __future__ import annotations

import asyncio
import math
import numbers
from functools import partial

import torch
from verl import DataProto
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from gdpo_verl.components import ERROR_PREFIX, RewardSpec, parse_spec, resolve
from gdpo_verl.core.advantage import apply_conditions, weight_vector

NAME = "gdpo_multi"


class RewardFunctionError(RuntimeError):
    """A reward function raised or timed out under ``on_error: raise``."""


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


def component_value(result, key: str):
    """A component's float from a call result: a number, or a dict entry (missing entry -> NaN, abstain)."""
    if isinstance(result, dict):
        if key not in result:
            return math.nan
        result = result[key]
    if result is None:
        return math.nan
    if isinstance(result, numbers.Real) or hasattr(result, "item"):
        return float(result)
    raise TypeError(f"returned {type(result).__name__} {_clip(repr(result), 80)}, expected a number or a dict")


def weighted_total(spec: RewardSpec, values: dict[str, float]) -> float:
    """sum_k w_k r_k after conditions (paper Eq. 8); missing values count 0. The GRPO baseline's reward."""
    scores = torch.tensor([[values[name] for name in spec.names]], dtype=torch.float64)  # (1, K)
    gated = apply_conditions(scores, spec.gates)
    return float(torch.nan_to_num(gated) @ weight_vector(spec.weights, gated))


class MultiRewardManager(RewardManagerBase):
    """Scores each sample with every declared component; see the module docstring for the output."""

    def __init__(self, config, tokenizer, compute_score=None, reward_router_address=None, reward_model_tokenizer=None):
        super().__init__(config, tokenizer, compute_score)
        self.spec = parse_spec(config.reward.get("gdpo"))
        if not self.spec.components:
            raise ValueError(
                f"reward.reward_manager.name={NAME} needs reward.gdpo.components (a list of "
                "{name, path, fn, weight}); none are declared"
            )
        self.calls = resolve(self.spec)

    async def _call(self, call_id, fn, kwargs: dict):
        """Run one reward function in a worker thread with the configured time-out. Returns (result, error)."""
        try:
            future = asyncio.get_running_loop().run_in_executor(None, partial(fn, **kwargs))
            return await asyncio.wait_for(future, timeout=self.spec.timeout_s), None
        except asyncio.TimeoutError:
            return None, f"timed out after {self.spec.timeout_s} s"
        except Exception as e:  # a reward function's own failure, handled by on_error
            return None, f"{type(e).__name__}: {e}"

    async def run_single(self, data: DataProto) -> dict:
        item = data[-1]  # multi-sequence outputs: score the last sequence, as verl's managers do
        response_ids = item.batch["responses"]
        valid = int(item.batch["attention_mask"][-response_ids.shape[-1] :].sum())
        text = await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.tokenizer.decode(response_ids[:valid], skip_special_tokens=True)
        )
        data_source = item.non_tensor_batch.get("data_source", "unknown")
        kwargs = {
            "data_source": data_source,
            "solution_str": text,
            "ground_truth": item.non_tensor_batch["reward_model"]["ground_truth"],
            "extra_info": item.non_tensor_batch.get("extra_info", None),
            "response_length": valid,
        }
        outcomes = await asyncio.gather(*(self._call(cid, fn, kwargs) for cid, fn in self.calls.items()))
        outcomes = dict(zip(self.calls, outcomes))
        values, extra = {}, {}
        for c in self.spec.components:
            result, error = outcomes[c.call_id]
            if error is None:
                try:
                    values[c.name] = component_value(result, c.key or c.name)
                except TypeError as e:
                    error = str(e)
            if error is not None:
                if self.spec.on_error == "raise":
                    raise RewardFunctionError(
                        f"reward component {c.name!r} ({c.path}:{c.fn}) failed on data_source={data_source!r}: "
                        f"{error}; response: {_clip(text)!r}. Set reward.gdpo.on_error=nan to let it abstain."
                    )
                values[c.name] = math.nan
            extra[c.name] = values[c.name]
            extra[ERROR_PREFIX + c.name] = 0.0 if error is None else 1.0
        return {"reward_score": weighted_total(self.spec, values), "reward_extra_info": extra}
