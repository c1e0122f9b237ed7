"""PyTorch's side of bench/networks.lua.

    python3 bench/networks_torch.py export DIR   # the ONNX files and PyTorch's outputs
    python3 bench/networks_torch.py time DIR     # PyTorch timed; DIR/torch.csv, DIR/report.md

export: torchvision's ResNet-18 at 224 x 224 and YOLOv8n (spec/support/peer_yolo.py's module
after Ultralytics', its Detect head decoding boxes and scores) at 640 x 640 (random weights from
seed 0, their BatchNorms' statistics drawn too, eval mode) written by torch.onnx.export (opset
17) for batch 1 and 64 (DIR/<network>_b<batch>.onnx), an input from seed 1 and PyTorch's f32
outputs (TF32 off).
time: for each of tocha's rows (DIR/tocha.csv), PyTorch's eager forward (torch.no_grad,
NCHW), the same captured as a CUDA graph and replayed, and eager in channels_last (cuDNN's
layout for halves), each the median of device-event times with the device held busy before
(bench/torch_timing.py), and the peak memory of an eager forward beyond the weights.
"""
import csv
import statistics
import sys

import numpy as np
import torch
import torchvision

sys.path.insert(0, __file__.rsplit("/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/../spec/support")
from torch_timing import time_launches  # noqa: E402
from peer_yolo import YOLOv8n  # noqa: E402

DTYPES = {"f32": torch.float32, "tf32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False  # f32 rows as tocha's f32; tf32 rows turn both on (time_rows)


def lively(model):
    """BatchNorm statistics and affine drawn at random, so that folding them matters."""
    g = torch.Generator().manual_seed(2)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.weight.data = torch.rand(c, generator=g) + 0.5
            m.bias.data = torch.rand(c, generator=g) * 0.4 - 0.2
            m.running_mean = torch.randn(c, generator=g) * 0.1
            m.running_var = torch.rand(c, generator=g) + 0.5
    return model.eval()


def make(network):
    torch.manual_seed(0)
    return lively(torchvision.models.resnet18(weights=None) if network == "resnet18" else YOLOv8n())


SIZES = {"resnet18": 224, "yolov8n": 640}


def export(folder):
    for network, size in SIZES.items():
        export_one(folder, network, size)


def export_one(folder, network, size):
    model = make(network)
    for batch in (1, 64):
        x = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(1))
        kwargs = dict(input_names=["x"], output_names=["logits"], opset_version=17)
        try:
            torch.onnx.export(model, (x,), f"{folder}/{network}_b{batch}.onnx", dynamo=False, **kwargs)
        except TypeError:
            torch.onnx.export(model, (x,), f"{folder}/{network}_b{batch}.onnx", **kwargs)
        on = "cuda" if torch.cuda.is_available() else "cpu"  # (a CPU export serves a run on sim)
        with torch.no_grad():
            y = model.to(on)(x.to(on)).double().cpu().numpy()
        model.cpu()
        np.save(f"{folder}/{network}_b{batch}_in.npy", x.numpy())
        np.save(f"{folder}/{network}_b{batch}_out.npy", y)
        print(f"{network} batch {batch}: exported")


def time_rows(folder, launches=20):
    rows = list(csv.DictReader(open(f"{folder}/tocha.csv")))
    out = []
    for r in rows:
        batch, dt = int(r["batch"]), DTYPES[r["dtype"]]
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = r["dtype"] == "tf32"
        model = make(r["network"]).cuda().to(dt)
        x = torch.tensor(np.load(f"{folder}/{r['network']}_b{batch}_in.npy")).cuda().to(dt)
        with torch.no_grad():
            eager = time_launches(lambda k: model(x), launches)
            static_x = x.clone()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    model(static_x)
            torch.cuda.current_stream().wait_stream(s)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                model(static_x)
            replay = time_launches(lambda k: graph.replay(), launches)
            cl = model.to(memory_format=torch.channels_last)
            xc = x.to(memory_format=torch.channels_last)
            channels_last = time_launches(lambda k: cl(xc), launches)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            model(x)
            torch.cuda.synchronize()
            memory = (torch.cuda.max_memory_allocated() - base) / 2 ** 20
        weights = sum(p.numel() * p.element_size() for p in model.parameters()) / 2 ** 20
        out.append(dict(r, torch_eager_ms=eager, torch_graph_ms=replay, torch_channels_last_ms=channels_last,
                        torch_memory_mb=memory + weights))
        print(f"{r['network']} b{batch} {r['dtype']}: eager {eager:.4f} ms, graph {replay:.4f} ms, "
              f"channels_last {channels_last:.4f} ms")
    keys = list(out[0].keys())
    with open(f"{folder}/torch.csv", "w") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        w.writerows(out)
    lines = [f"# Networks: tocha beside PyTorch {torch.__version__} on {torch.cuda.get_device_name()}", "",
             "| network | batch | dtype | tocha forward ms | tocha graph ms | torch eager ms | torch graph ms | "
             "torch channels_last ms | best torch / tocha graph | tocha MB | torch MB |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in out:
        best = min(r["torch_eager_ms"], r["torch_graph_ms"], r["torch_channels_last_ms"])
        lines.append(f"| {r['network']} | {r['batch']} | {r['dtype']} | {float(r['forward_ms']):.4f} | "
                     f"{float(r['graph_ms']):.4f} | {r['torch_eager_ms']:.4f} | {r['torch_graph_ms']:.4f} | "
                     f"{r['torch_channels_last_ms']:.4f} | {best / float(r['graph_ms']):.2f} | "
                     f"{float(r['memory_mb']):.1f} | {r['torch_memory_mb']:.1f} |")
    open(f"{folder}/report.md", "w").write("\n".join(lines) + "\n")
    print(f"wrote {folder}/report.md")


if __name__ == "__main__":
    if sys.argv[1] == "export":
        export(sys.argv[2])
    else:
        time_rows(sys.argv[2])
