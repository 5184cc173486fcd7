"""One-layer models of grouped, few-channel and 5×5 depthwise convolutions, as NNEF and
ONNX twins.

Writes, under the folder given as the first argument, one model folder per layer in the
layout `cargo run --release --example compare` reads (`model.nnef/` with `graph.nnef` and
its `.dat` weights, `model.onnx`, `input.dat`), so that nnefc and ONNX Runtime can be set
side by side on the layers of RegNet/ResNeXt- and EfficientNet-style networks, which the
shared corpus does not have:

    ~/.cache/nnefc-bench/venv/bin/pip install onnx   # the venv `compare` made
    ~/.cache/nnefc-bench/venv/bin/python benches/grouped_layers.py /tmp/layers
    NNEFC_SHARED_MODELS=/tmp/layers cargo run --release --example compare

Each model is `relu(conv(x, w, b))` with random weights and input (fixed seed). Not here:
reference outputs (`compare` times, it does not check; the differential tests check the
same code paths against the interpreter).
"""

import os
import struct
import sys

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    sys.exit("needs the onnx package: pip install onnx (into the venv that runs it)")

# name: (input channels, input side, groups, stride, kernel, output channels)
LAYERS = {
    "grouped16_s2_112": (128, 112, 8, 2, 3, 128),
    "grouped24_s1_28": (192, 28, 8, 1, 3, 192),
    "grouped32_s1_28": (256, 28, 8, 1, 3, 256),
    "grouped32_s2_56": (256, 56, 8, 2, 3, 256),
    "grouped48_s1_28": (384, 28, 8, 1, 3, 384),
    "grouped48_s1_56": (384, 56, 8, 1, 3, 384),
    "grouped64_s1_14": (512, 14, 8, 1, 3, 512),
    "dense16_s2_112": (16, 112, 1, 2, 3, 32),
    "dense32_s2_56": (32, 56, 1, 2, 3, 64),
    "dense24_k5_56": (24, 56, 1, 1, 5, 48),
    # EfficientNet/MnasNet's 5×5 depthwise layers.
    "depthwise5_s2_56": (144, 56, 144, 2, 5, 144),
    "depthwise5_s1_28": (240, 28, 240, 1, 5, 240),
    "depthwise5_s1_14": (672, 14, 672, 1, 5, 672),
    "depthwise5_s2_14": (672, 14, 672, 2, 5, 672),
    "depthwise5_s1_7": (1152, 7, 1152, 1, 5, 1152),
    # MobileNet's 3×3 depthwise layers on the smallest maps.
    "depthwise3_s1_7": (960, 7, 960, 1, 3, 960),
    "depthwise3_s2_14": (576, 14, 576, 2, 3, 576),
    "depthwise3_s2_28": (192, 28, 192, 2, 3, 192),
}


def write_dat(path, a):
    """A float32 NNEF tensor file (1.0 header, 128 bytes)."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    extents = list(a.shape) + [0] * (8 - a.ndim)
    header = b"\x4e\xef\x01\x00" + struct.pack("<II", a.nbytes, a.ndim)
    header += b"".join(struct.pack("<I", e) for e in extents) + struct.pack("<II", 32, 0)
    with open(path, "wb") as f:
        f.write(header + bytes(128 - len(header)) + a.tobytes())


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: grouped_layers.py OUTPUT_FOLDER")
    rng = np.random.default_rng(0)
    for name, (c, side, groups, stride, k, co) in LAYERS.items():
        d = os.path.join(sys.argv[1], name)
        os.makedirs(os.path.join(d, "model.nnef"), exist_ok=True)
        w = (rng.standard_normal((co, c // groups, k, k)) * 0.1).astype(np.float32)
        b = (rng.standard_normal((1, co)) * 0.1).astype(np.float32)
        x = rng.standard_normal((1, c, side, side)).astype(np.float32)
        write_dat(os.path.join(d, "model.nnef", "w.dat"), w)
        write_dat(os.path.join(d, "model.nnef", "b.dat"), b)
        write_dat(os.path.join(d, "input.dat"), x)
        p = k // 2
        graph = f"""version 1.0;
graph G( input ) -> ( output )
{{
    input = external<scalar>(shape = [1, {c}, {side}, {side}]);
    w = variable<scalar>(shape = [{co}, {c // groups}, {k}, {k}], label = 'w');
    b = variable<scalar>(shape = [1, {co}], label = 'b');
    y = conv(input, w, b, border = 'constant', padding = [({p}, {p}), ({p}, {p})], stride = [{stride}, {stride}], groups = {groups});
    output = relu(y);
}}
"""
        with open(os.path.join(d, "model.nnef", "graph.nnef"), "w") as f:
            f.write(graph)
        out = side // stride
        nodes = [
            helper.make_node(
                "Conv",
                ["input", "w", "b"],
                ["y"],
                group=groups,
                pads=[p] * 4,
                strides=[stride, stride],
                kernel_shape=[k, k],
            ),
            helper.make_node("Relu", ["y"], ["output"]),
        ]
        g = helper.make_graph(
            nodes,
            name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, c, side, side])],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, co, out, out])],
            [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b.reshape(co), "b")],
        )
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        onnx.save(m, os.path.join(d, "model.onnx"))
    print(f"{len(LAYERS)} models in {sys.argv[1]}")


if __name__ == "__main__":
    main()
