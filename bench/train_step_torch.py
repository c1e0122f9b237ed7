"""PyTorch's side of bench/train_step.lua: one training step of torchvision's ResNet-18 at 224 x
224 for each of tocha's rows (DIR/train_tocha.csv: batch, dtype and tocha's layout), timed as tocha's is (the
median of device-event times over 20 steps after 5, bench/torch_timing.py), in eager NCHW and in
channels_last (cuDNN's layout for halves): the forward in training mode, cross entropy on random
labels, the backward, an AdamW step (lr 1e-3, weight decay 1e-2, PyTorch's default foreach
implementation), the model and optimizer in the row's dtype (model.to(dtype), no autocast).
TF32 off, as tocha's f32 is f32. Writes DIR/train_torch.csv and DIR/train_report.md.

    python3 bench/train_step_torch.py DIR
"""
import csv
import sys

import torch
import torchvision

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from torch_timing import time_launches  # noqa: E402

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def step_ms(batch, dt, channels_last, steps=20):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).cuda().to(dt).train()
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=dt)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (batch,), device="cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(k):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), labels)
        loss.backward()
        opt.step()

    return time_launches(step, steps)


def main(folder):
    rows = list(csv.DictReader(open(f"{folder}/train_tocha.csv")))
    out, timed = [], {}
    for r in rows:
        batch, dt = int(r["batch"]), DTYPES[r["dtype"]]
        key = (batch, r["dtype"])  # PyTorch's pair, timed once for tocha's layouts
        if key not in timed:
            timed[key] = step_ms(batch, dt, False), step_ms(batch, dt, True)
            print(f"{r['network']} b{batch} {r['dtype']}: eager {timed[key][0]:.3f} ms, "
                  f"channels_last {timed[key][1]:.3f} ms")
        eager, cl = timed[key]
        out.append(dict(r, torch_eager_ms=eager, torch_channels_last_ms=cl))
    with open(f"{folder}/train_torch.csv", "w") as f:
        w = csv.DictWriter(f, list(out[0].keys()))
        w.writeheader()
        w.writerows(out)
    lines = [f"# A training step: tocha beside PyTorch {torch.__version__} on {torch.cuda.get_device_name()}", "",
             "| network | batch | dtype | tocha layout | tocha ms | torch eager ms | torch channels_last ms | "
             "tocha / best torch time |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in out:
        best = min(r["torch_eager_ms"], r["torch_channels_last_ms"])
        lines.append(f"| {r['network']} | {r['batch']} | {r['dtype']} | {r.get('layout', 'nchw')} | "
                     f"{float(r['step_ms']):.3f} | "
                     f"{r['torch_eager_ms']:.3f} | {r['torch_channels_last_ms']:.3f} | {float(r['step_ms']) / best:.2f} |")
    open(f"{folder}/train_report.md", "w").write("\n".join(lines) + "\n")
    print(f"wrote {folder}/train_report.md")


if __name__ == "__main__":
    main(sys.argv[1])
