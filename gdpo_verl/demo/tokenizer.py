"""The demo's tiny tokenizer: byte-level, character by character, built offline with ``tokenizers``.

Vocabulary (266 ids): 8 special tokens (pad, bos, eos ``<|end|>``, unk and the chat-role markers), the
256 byte-level symbols of GPT-2/Qwen2 byte-level BPE (one per byte, so every string encodes and decodes
exactly; a space is ``Ġ``), no merges, and the answer tags ``<a>`` and ``</a>`` as added (non-special)
tokens, so a full answer ``<a>7</a>`` is 3 tokens. Normalizer, pre-tokenizer and decoder are the ones
transformers' ``Qwen2Tokenizer`` builds. That matters: ``AutoTokenizer.from_pretrained`` on a directory
whose ``config.json`` says ``qwen2`` (the model directory verl loads) rebuilds the tokenizer as a
``Qwen2Tokenizer`` from this vocabulary, and the identical pipeline makes both give the same ids.

The chat template is one line per turn, without newlines::

    <|bos|><|user|>3+4=<|end|><|assistant|>          (8 tokens, generation prompt included)

Assistant turns end with ``<|end|>``, which is the eos token, so generation stops there. Decoding with
``skip_special_tokens=True`` (verl's reward path) gives back exactly the response text.
Try it: ``python -m gdpo_verl.demo.tokenizer OUT_DIR``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from gdpo_verl.demo.rewards import ANSWER_CLOSE, ANSWER_OPEN

PAD, BOS, EOS, UNK = "<|pad|>", "<|bos|>", "<|end|>", "<|unk|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>", "<|tool|>")
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK, *ROLE_TOKENS)
TAG_TOKENS = (ANSWER_OPEN, ANSWER_CLOSE)
MAX_LENGTH = 128
# transformers' Qwen2Tokenizer pre-tokenization regex (GPT-4 style, digits one by one).
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def build_tokenizer() -> PreTrainedTokenizerFast:
    """The demo tokenizer (deterministic: same ids on every machine)."""
    symbols = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {token: i for i, token in enumerate((*SPECIAL_TOKENS, *symbols))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    backend.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAG_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        chat_template=CHAT_TEMPLATE,
        model_max_length=MAX_LENGTH,
    )


def save_tokenizer(out_dir: str | Path) -> PreTrainedTokenizerFast:
    """Build the tokenizer and ``save_pretrained`` it into ``out_dir``; returns it."""
    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(str(out_dir))
    return tokenizer


if __name__ == "__main__":
    tok = save_tokenizer(sys.argv[1])
    prompt = tok.apply_chat_template([{"role": "user", "content": "3+4="}], add_generation_prompt=True, tokenize=False)
    print(f"vocab {len(tok)}; prompt {prompt!r} -> {tok(prompt, add_special_tokens=False)['input_ids']}")
