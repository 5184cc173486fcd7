"""Whole public CNNs beyond the shared corpus, as NNEF and ONNX twins with expected outputs.

Writes, under the folder given as the first argument, one folder per torchvision
architecture in the corpus layout (`model.nnef/`, `model.onnx`, `input.dat`,
`expected.dat`), made the way the shared corpus was made: seeded random weights (and
batch-norm statistics, so that no normalization is an identity), ONNX opset 14, then the
Khronos `nnef_tools` converter (with `--fold-constants`, which needs `onnxsim`; without
it the converter cannot convert ShuffleNet's split of dynamic shape); the expected output
is ONNX Runtime's on the ONNX file.

    python3 -m venv ~/.cache/nnefc-bench/torch-venv
    ~/.cache/nnefc-bench/torch-venv/bin/pip install torch torchvision onnx onnxruntime \
        onnxscript onnxsim nnef-tools nnef
    ~/.cache/nnefc-bench/torch-venv/bin/python benches/public_models.py /tmp/public
    cargo run --release --bin nnefc -- run /tmp/public/efficientnet_b0/model.nnef \
        -i input=/tmp/public/efficientnet_b0/input.dat --output-dir /tmp/out \
        --compare /tmp/public/efficientnet_b0/expected.dat
    NNEFC_SHARED_MODELS=/tmp/public cargo run --release --example compare

The architectures are the ones the corpus lacks: EfficientNet (5x5 depthwise,
squeeze-excitation, swish), MnasNet (5x5 depthwise), RegNet (grouped convs), ShuffleNet v2 (channel
shuffle by reshape/transpose, split), MobileNet v3 (hard swish and hard sigmoid, spelled
out as add/clamp/div/mul because the converter has neither) and
ResNeXt (grouped bottlenecks). torch with PyPI's wheels is several GB; this is a
benchmark and conformance tool, not a test dependency. Names on the command line after
the folder restrict the set.
"""

import json
import os
import subprocess
import sys

import numpy as np

from grouped_layers import write_dat  # the same folder; the NNEF tensor writer

try:
    import onnxruntime as ort
    import torch
    import torchvision
except ImportError:
    sys.exit(
        "needs torch, torchvision, onnx, onnxruntime, onnxscript, onnxsim, nnef-tools and nnef: "
        "pip install them into the venv that runs this script"
    )

MODELS = [
    "efficientnet_b0",
    "mnasnet1_0",
    "regnet_x_400mf",
    "regnet_y_400mf",
    "shufflenet_v2_x1_0",
    "mobilenet_v3_large",
    "resnext50_32x4d",
]


class HardSigmoid(torch.nn.Module):
    """relu6(x + 3) / 6 in ops the converter knows (it has no HardSigmoid)."""

    def forward(self, x):
        return torch.clamp(x + 3.0, 0.0, 6.0) / 6.0


class HardSwish(torch.nn.Module):
    """x * relu6(x + 3) / 6 in ops the converter knows (it has no HardSwish)."""

    def forward(self, x):
        return x * torch.clamp(x + 3.0, 0.0, 6.0) / 6.0


def spell_out_hard_activations(module):
    for child_name, child in module.named_children():
        if isinstance(child, torch.nn.Hardsigmoid):
            setattr(module, child_name, HardSigmoid())
        elif isinstance(child, torch.nn.Hardswish):
            setattr(module, child_name, HardSwish())
        else:
            spell_out_hard_activations(child)


def build(name):
    """The architecture with seeded weights and non-trivial batch-norm statistics."""
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    spell_out_hard_activations(model)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
                m.weight.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(n, generator=g) * 0.1)
    return model


def make(root, name):
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    model = build(name)
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32))
    onnx_path = os.path.join(d, "model.onnx")
    torch.onnx.export(
        model, (x,), onnx_path, opset_version=14, dynamo=False,
        input_names=["input"], output_names=["output"],
    )
    nnef_path = os.path.join(d, "model.nnef")
    subprocess.run(
        [sys.executable, "-m", "nnef_tools.convert", "--input-format", "onnx",
         "--output-format", "nnef", "--input-model", onnx_path, "--output-model", nnef_path,
         "--keep-io-names", "--fold-constants"],
        check=True, stdout=subprocess.DEVNULL,
    )
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    y = sess.run(None, {"input": x.numpy()})[0]
    write_dat(os.path.join(d, "input.dat"), x.numpy())
    write_dat(os.path.join(d, "expected.dat"), y)
    ops = {}
    with open(os.path.join(nnef_path, "graph.nnef")) as f:
        for line in f:
            if "=" in line and "(" in line:
                op = line.split("=", 1)[1].strip().split("(")[0].split("<")[0].strip()
                ops[op] = ops.get(op, 0) + 1
    meta = {"name": name, "input_shape": list(x.shape), "output_shape": list(y.shape),
            "ops": ops, "source": "torchvision architecture, seeded random weights; "
            "ONNX opset 14 -> nnef_tools.convert --fold-constants"}
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"{name}: {sum(ops.values())} operations, max |expected| {np.abs(y).max():.3g}")


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: public_models.py OUTPUT_FOLDER [MODEL...]")
    names = sys.argv[2:] or MODELS
    for name in names:
        make(sys.argv[1], name)


if __name__ == "__main__":
    main()
