"""Per-reward token-level score tensors: the manager's per-sample values -> ``token_level_scores_<name>`` (bs, T).

The data path (README "Data flow"): reward functions -> ``gdpo_multi`` manager (per sample, in verl's
``reward_extra_info``, encoded by ``gdpo_verl.core.contract``) -> :func:`token_score_tensors` (in the rollout workers,
``gdpo_verl.verl_glue.agent_loop``)
-> one ``token_level_scores_<name>`` tensor per component travelling with the batch -> the ``gdpo`` estimator,
which reads each response's sum (:func:`per_response`), as verl's GRPO reads ``token_level_rewards.sum(-1)``.

Layout of ``token_level_scores_<name>``, float32 (bs, T), T = the batch's response width:
  outcome reward   the value on the response's last valid token (verl's ``rm_scores`` convention), 0 elsewhere;
  process reward   a function returned one value per response token: they sit on the tokens as given
                   (padding is 0), and the response's value is their sum;
  abstention       NaN on the last valid token (the component has no value for that response: ``None``, a
                   missing dict key, or a failure under ``on_error: nan``); the row's sum is then NaN.
A response with no tokens keeps its value on position 0.

Pure torch; no verl.

>>> import torch
>>> infos = [{"fmt": 1.0}, {"fmt": 0.5, TOKENS_PREFIX + "fmt": [0.25, 0.25]}, {"fmt": float("nan")}]
>>> t = token_score_tensors(infos, ["fmt"], torch.tensor([3, 2, 1]), width=3)["token_level_scores_fmt"]
>>> t.tolist()[:2], per_response(t).tolist()[:2], bool(per_response(t)[2].isnan())
([[0.0, 0.0, 1.0], [0.25, 0.25, 0.0]], [1.0, 0.5], True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from gdpo_verl.core.contract import TOKENS_PREFIX, decode_scores, field_name


def token_score_tensors(
    infos: Sequence[Mapping], names: Sequence[str], lengths: torch.Tensor, width: int
) -> dict[str, torch.Tensor]:
    """{``token_level_scores_<name>``: (bs, width) float32} from per-sample ``reward_extra_info`` dicts.

    infos: bs dicts (the manager's output, :func:`gdpo_verl.core.contract.encode_sample`; a missing name or None
    = abstain, a value that is not a number raises); lengths: (bs,) valid response tokens.
    A process reward's token list whose length is not the row's (the earlier outputs of a multi-output agent
    session, which verl gives the session's final reward info) is placed as its sum on the last valid token.
    """
    bs = len(infos)
    lengths = torch.as_tensor(lengths, dtype=torch.int64).reshape(bs)
    last = (lengths - 1).clamp(min=0, max=max(width - 1, 0))
    rows = torch.arange(bs)
    scores = decode_scores(infos, names).to(torch.float32)  # (bs, K)
    out = {}
    for k, name in enumerate(names):
        values = scores[:, k]
        tensor = torch.zeros(bs, width, dtype=torch.float32)
        if width:
            tensor[rows, last] = values
        key = TOKENS_PREFIX + name
        per_token = [
            (i, info[key])
            for i, info in enumerate(infos)
            if isinstance(info, Mapping) and info.get(key) is not None and len(info[key]) == int(lengths[i])
        ]
        if per_token:
            idx = torch.tensor([i for i, _ in per_token])
            seqs = [torch.as_tensor(seq, dtype=torch.float32).reshape(-1) for _, seq in per_token]
            padded = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)[:, :width]
            tensor[idx] = 0.0
            tensor[idx, : padded.shape[1]] = padded
        out[field_name(name)] = tensor
    return out


def per_response(tensor: torch.Tensor) -> torch.Tensor:
    """(bs, T) -> (bs,) float64: each response's value (the sum over its tokens; NaN where it abstains).

    Summed in the tensor's own dtype, as verl's GRPO sums ``token_level_rewards`` (a float64 copy of the whole
    (bs, T) tensor costs 15x the time); a row whose float32 sum overflows is summed again in float64.
    """
    if not tensor.dtype.is_floating_point:
        return tensor.to(torch.float64).sum(dim=-1)
    total = tensor.sum(dim=-1).to(torch.float64)
    overflow = torch.isinf(total)
    if bool(overflow.any()):
        total[overflow] = tensor[overflow].to(torch.float64).sum(dim=-1)
    return total
