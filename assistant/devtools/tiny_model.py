"""Builds a tiny Qwen2 model whose output is a fixed script, for testing against real vLLM.

Random weights (vLLM's `--load-format dummy`) make a model that never closes its thinking and
never stops; every test would see the same degenerate case. This model's weights are chosen
instead: its layers add nothing (zero projections), so the last hidden state is the current
token's own embedding, and the output head maps each token of a script to the next one, by a
wide margin. Greedy or sampled, the model follows the script from the prompt's last token:

- thinking on (the prompt ends "assistant\\n"): a long reasoning passage (REASONING_STEPS
  tokens), `</think>`, then the answer, then `<|im_end|>`;
- thinking off (the prompt ends "</think>\\n\\n"): the answer alone;
- a request whose last message holds "[[never-close]]": reasoning that ends without `</think>`
  (a model that never closes its thinking);
- a request whose last message holds "[[delegate]]": a Hermes-style `<tool_call>` of the
  `delegate` tool;
- a request whose last message holds "[[long]]": an answer that never ends (" and so on" over
  and over, to the budget), for cancelling and for keeping the engine busy.

The chat template picks the prompt's last token (one to five newlines, single tokens through
BPE merges), so the markers are the only way a test steers it. The tokenizer is byte-level BPE
with the special tokens the Qwen3 reasoning parser and the Hermes tool parser look for.

Run with the vLLM environment's Python (it needs torch, safetensors and tokenizers):
`.venv-vllm/bin/python -m assistant.devtools.tiny_model OUT_DIR` or as a plain script.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

REASONING_STEPS = 1500
"""Tokens of reasoning with thinking on: long enough that deep requests keep the engine busy."""
ANSWER = ["The", " answer", " is", " ready", "."]
TOOL_CALL = ['{"name":', ' "delegate",', ' "arguments":', ' {"task":', ' "the', ' task"}}']
NEVER_CLOSE = [" Hmm", ",", " still", " pondering", " that", " one"]
LOOP = [" and", " so", " on"]
HIDDEN = 256
SCALE = 40.0
"""Logit of the script's next token (others stay near 0): sampling at temperature 1 follows it."""

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MARKUP = ["<think>", "</think>", "<tool_call>", "</tool_call>"]

TEMPLATE = (
    "{% if messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}"
    "{% if tools %}\n\n# Tools\n<tools>\n{% for tool in tools %}\n{{ tool | tojson }}"
    "{% endfor %}\n</tools>{% endif %}<|im_end|>\n"
    "{% elif tools %}<|im_start|>system\n# Tools\n<tools>\n{% for tool in tools %}\n"
    "{{ tool | tojson }}{% endfor %}\n</tools><|im_end|>\n{% endif %}"
    "{% for m in messages %}{% if m.role != 'system' %}<|im_start|>{{ m.role }}\n"
    "{{ m.content if m.content is string else '' }}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% set last = messages[-1].content if messages[-1].content is string else '' %}"
    "{% if '[[delegate]]' in last %}<think>\n\n</think>\n\n\n\n"
    "{% elif '[[long]]' in last %}<think>\n\n</think>\n\n\n\n\n"
    # (Transformers renders with trim_blocks: the first newline after a tag is dropped)
    "{% elif '[[never-close]]' in last %}\n\n\n"
    "{% elif enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% endif %}{% endif %}"
)


def _byte_level() -> dict[str, int]:
    from tokenizers.pre_tokenizers import ByteLevel

    return {c: i for i, c in enumerate(sorted(ByteLevel.alphabet()))}


def _encode_piece(text: str) -> str:
    """A text piece as a byte-level BPE vocabulary string (space -> 'Ġ', newline -> 'Ċ')."""
    from tokenizers.pre_tokenizers import ByteLevel

    return "".join(piece for piece, _ in ByteLevel(add_prefix_space=False).pre_tokenize_str(text))


def build(out: Path) -> None:
    import numpy as np
    import torch
    from safetensors.torch import save_file
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = _byte_level()
    nl = _encode_piece("\n")
    merges = [(nl, nl), (nl * 2, nl), (nl * 2, nl * 2), (nl * 2, nl * 3)]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    reasoning = ["Let", " me", " think", " this", " through", ":"]
    reasoning += [f" step-{i}" for i in range(REASONING_STEPS - len(reasoning))]
    pieces = [_encode_piece(t) for t in [*reasoning, *ANSWER, *TOOL_CALL, *NEVER_CLOSE, *LOOP]]
    for piece in pieces:
        vocab.setdefault(piece, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP])
    ids = tok.get_vocab()
    vocab_size = (len(ids) + 63) // 64 * 64

    def seq(texts: list[str]) -> list[int]:
        return [ids[_encode_piece(t)] for t in texts]

    eos, think_end, tool_start = ids["<|im_end|>"], ids["</think>"], ids["<tool_call>"]
    one, two, three, four, five = (ids[nl * n] for n in (1, 2, 3, 4, 5))
    answer = seq(ANSWER)
    # each script: the token that starts it, then what follows each token
    scripts = [
        [one, *seq(reasoning), think_end, two, *answer, eos],  # thinking on (and resumed)
        [three, *seq(NEVER_CLOSE), eos],
        [four, tool_start, *seq(TOOL_CALL), ids["</tool_call>"], eos],
        [five, *seq(LOOP), seq(LOOP)[0]],
    ]
    nxt: dict[int, int] = {}
    for script in scripts:
        for a, b in itertools.pairwise(script):
            assert nxt.get(a, b) == b, f"{tok.id_to_token(a)!r} would have two successors"
            nxt[a] = b
    # after <|im_end|> (ignore_eos, as the doctor's queue probe asks), the script starts again
    nxt[eos] = one

    rng = np.random.default_rng(0)
    emb = rng.standard_normal((vocab_size, HIDDEN)).astype(np.float32)
    emb /= np.sqrt((emb**2).mean(axis=1, keepdims=True))  # RMS 1: the final norm keeps it
    head = np.zeros((vocab_size, HIDDEN), dtype=np.float32)
    for a, b in nxt.items():
        head[b] += SCALE * emb[a] / HIDDEN
    layer = "model.layers.0."
    h, kv = HIDDEN, HIDDEN // 2
    zeros = {
        "self_attn.q_proj.weight": (h, h),
        "self_attn.k_proj.weight": (kv, h),
        "self_attn.v_proj.weight": (kv, h),
        "self_attn.o_proj.weight": (h, h),
        "self_attn.q_proj.bias": (h,),
        "self_attn.k_proj.bias": (kv,),
        "self_attn.v_proj.bias": (kv,),
        "mlp.gate_proj.weight": (h * 2, h),
        "mlp.up_proj.weight": (h * 2, h),
        "mlp.down_proj.weight": (h, h * 2),
    }
    tensors = {layer + k: torch.zeros(shape) for k, shape in zeros.items()}
    tensors |= {
        layer + "input_layernorm.weight": torch.ones(h),
        layer + "post_attention_layernorm.weight": torch.ones(h),
        "model.norm.weight": torch.ones(h),
        "model.embed_tokens.weight": torch.from_numpy(emb),
        "lm_head.weight": torch.from_numpy(head),
    }
    out.mkdir(parents=True, exist_ok=True)
    save_file(
        {k: v.to(torch.bfloat16).contiguous() for k, v in tensors.items()},
        str(out / "model.safetensors"),
    )
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": h,
        "intermediate_size": h * 2,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "hidden_act": "silu",
        "max_position_embeddings": 65536,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "vocab_size": vocab_size,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": eos,
    }
    (out / "config.json").write_text(json.dumps(config, indent=1))
    (out / "generation_config.json").write_text(json.dumps({"eos_token_id": eos}))
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "eos_token": "<|im_end|>",
                "pad_token": "<|endoftext|>",
                "bos_token": None,
                "model_max_length": 65536,
                "chat_template": TEMPLATE,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    build(Path(sys.argv[1]))
