"""The Python side of spec/peer_train_spec.lua: PyTorch replays the first steps of a run of
examples/train_digits.lua and compares its losses with tocha's.

    python3 peer_train.py RUN DATA STEPS   # RUN: train_digits.lua's --out folder; DATA: examples/data

The same network (torch.nn layers of the example's names and shapes), the same initial
parameters (RUN/initial.safetensors), the same batches (RUN/batches.npy), the same learning
rate schedule (a cosine from 3e-3 over the run's steps) and AdamW's defaults beside it, on cuda
in f32 with TF32 off. Prints each step's two losses; exits 1 when one differs from tocha's by
more than 1e-4 relative.
"""
import math
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from peer_files import read_safetensors  # noqa: E402

run, data, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.deterministic = True
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # cpu: a check off the GPU machine


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1, stride=2)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        x = torch.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


net = Net().to(dev)
initial, _ = read_safetensors(f"{run}/initial.safetensors")
net.load_state_dict({k: v.to(dev) for k, v in initial.items()})
images = torch.tensor(np.load(f"{data}/digits_images.npy"), dtype=torch.float32, device=dev) / 16
labels = torch.tensor(np.load(f"{data}/digits_labels.npy").astype(np.int64), device=dev)
batches = torch.tensor(np.load(f"{run}/batches.npy"), device=dev)
total = batches.shape[0]
theirs = [float(line.split(",")[1]) for line in open(f"{run}/loss.csv").read().split("\n")[1:] if line]
opt = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=1e-2)
worst = 0.0
for step in range(steps):
    for g in opt.param_groups:
        g["lr"] = 3e-3 * 0.5 * (1 + math.cos(math.pi * step / total))
    rows = batches[step]
    loss = nn.functional.cross_entropy(net(images[rows].unsqueeze(1)), labels[rows])
    opt.zero_grad()
    loss.backward()
    opt.step()
    mine = loss.item()
    rel = abs(mine - theirs[step]) / abs(mine)
    worst = max(worst, rel)
    print(f"step {step + 1}: torch {mine:.9g} tocha {theirs[step]:.9g} relative {rel:.2e}")
print(f"worst relative difference over {steps} steps: {worst:.2e}")
sys.exit(0 if worst <= 1e-4 else 1)
