"""The demo's tiny causal LM: a randomly initialised Qwen2 (transformers ``Qwen2Config``), float32.

Default size: hidden 64, 2 layers, 2 query heads / 2 key-value heads (head dim 32: vLLM's CPU attention takes head
dims 32, 64 and >= 80, so ``rollout.name=vllm`` can serve it), MLP 256, tied embeddings, 128 positions; 148,800
parameters with the demo tokenizer's 266-token vocabulary, so
one forward/backward of a 64 x 20 batch takes about 50 ms on one CPU core. Uses ``sdpa`` attention
(no FlashAttention on CPU). Logits have shape ``(batch, seq, vocab)``.
Build one with ``python -m gdpo_verl.demo.model OUT_DIR`` (random weights, demo tokenizer ids).
"""

from __future__ import annotations

import sys

import torch
from transformers import PreTrainedTokenizerBase, Qwen2Config, Qwen2ForCausalLM

from gdpo_verl.demo.settings import ModelSize


def build_model(tokenizer: PreTrainedTokenizerBase, size: ModelSize | None = None, seed: int = 0) -> Qwen2ForCausalLM:
    """A seeded random tiny Qwen2 (default ``ModelSize()``) whose vocabulary and special ids match ``tokenizer``."""
    size = size if size is not None else ModelSize()
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=size.hidden,
        intermediate_size=size.mlp,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        num_key_value_heads=size.kv_heads,
        max_position_embeddings=size.max_positions,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        attn_implementation="sdpa",
        dtype="float32",
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(torch.float32)
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


if __name__ == "__main__":
    from gdpo_verl.demo.tokenizer import save_tokenizer

    tok = save_tokenizer(sys.argv[1])
    lm = build_model(tok)
    lm.save_pretrained(sys.argv[1])
    print(f"saved {sum(p.numel() for p in lm.parameters()):,} parameters and the tokenizer to {sys.argv[1]}")
