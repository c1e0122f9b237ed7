"""The Python side of spec/peer_yolo_spec.lua: YOLOv8n written as a PyTorch module after
Ultralytics' own (ultralytics/nn/modules: Conv, Bottleneck, C2f, SPPF, DFL, Detect; the layer
list of yolov8.yaml at scale n), loads tocha's parameters by name and runs tocha's input.

    python3 peer_yolo.py DIR   # DIR/yolo.safetensors, DIR/x.npy, DIR/y.npy (tocha's output)

(peer_onnx.py imports its YOLOv8n to export it.)

Prints the parameter count and the largest differences (boxes over the largest box value,
scores absolute); exits 1 when the boxes differ by more than 1e-4 of the largest or a score by
more than 1e-4.
"""
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from peer_files import read_safetensors  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


class Conv(nn.Module):
    def __init__(self, c1, c2, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c, shortcut):
        super().__init__()
        self.cv1, self.cv2, self.add = Conv(c, c, 3), Conv(c, c, 3), shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    def __init__(self, c1, c2, n, shortcut):
        super().__init__()
        self.c = c2 // 2
        self.cv1 = Conv(c1, 2 * self.c, 1)
        self.cv2 = Conv((2 + n) * self.c, c2, 1)
        self.m = nn.ModuleList(Bottleneck(self.c, shortcut) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).chunk(2, 1))
        y.extend(m(y[-1]) for m in self.m)
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2):
        super().__init__()
        c = c1 // 2
        self.cv1, self.cv2, self.m = Conv(c1, c, 1), Conv(4 * c, c2, 1), nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        y = [self.cv1(x)]
        y.extend(self.m(y[-1]) for _ in range(3))
        return self.cv2(torch.cat(y, 1))


class DFL(nn.Module):
    def __init__(self, c1=16):
        super().__init__()
        self.conv = nn.Conv2d(c1, 1, 1, bias=False).requires_grad_(False)
        self.conv.weight.data[:] = torch.arange(c1, dtype=torch.float).view(1, c1, 1, 1)
        self.c1 = c1

    def forward(self, x):
        b, _, a = x.shape
        return self.conv(x.view(b, 4, self.c1, a).transpose(2, 1).softmax(1)).view(b, 4, a)


class Detect(nn.Module):
    def __init__(self, nc, ch):
        super().__init__()
        self.nc, self.reg_max, self.stride = nc, 16, (8, 16, 32)
        c2, c3 = max(16, ch[0] // 4, 64), max(ch[0], min(nc, 100))
        self.cv2 = nn.ModuleList(nn.Sequential(Conv(x, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 64, 1)) for x in ch)
        self.cv3 = nn.ModuleList(nn.Sequential(Conv(x, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, nc, 1)) for x in ch)
        self.dfl = DFL(16)

    def forward(self, xs):
        b = xs[0].shape[0]
        points, strides = [], []
        for x, s in zip(xs, self.stride):
            h, w = x.shape[2:]
            sy, sx = torch.meshgrid(torch.arange(h, device=x.device) + 0.5, torch.arange(w, device=x.device) + 0.5,
                                    indexing="ij")
            points.append(torch.stack((sx, sy), -1).view(-1, 2))
            strides.append(torch.full((h * w, 1), s, device=x.device))
        anchors, stride = torch.cat(points).transpose(0, 1), torch.cat(strides).transpose(0, 1)
        feats = [torch.cat((self.cv2[i](x), self.cv3[i](x)), 1) for i, x in enumerate(xs)]
        cat = torch.cat([f.view(b, 64 + self.nc, -1) for f in feats], 2)
        box, cls = cat.split((64, self.nc), 1)
        lt, rb = self.dfl(box).chunk(2, 1)
        x1y1, x2y2 = anchors.unsqueeze(0) - lt, anchors.unsqueeze(0) + rb
        dbox = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * stride
        return torch.cat((dbox, cls.sigmoid()), 1)


class Placeholder(nn.Module):  # Upsample and Concat: no parameters
    pass


class YOLOv8n(nn.Module):
    def __init__(self, nc=80):
        super().__init__()
        self.model = nn.ModuleList([
            Conv(3, 16, 3, 2), Conv(16, 32, 3, 2), C2f(32, 32, 1, True), Conv(32, 64, 3, 2), C2f(64, 64, 2, True),
            Conv(64, 128, 3, 2), C2f(128, 128, 2, True), Conv(128, 256, 3, 2), C2f(256, 256, 1, True), SPPF(256, 256),
            Placeholder(), Placeholder(), C2f(384, 128, 1, False), Placeholder(), Placeholder(), C2f(192, 64, 1, False),
            Conv(64, 64, 3, 2), Placeholder(), C2f(192, 128, 1, False), Conv(128, 128, 3, 2), Placeholder(),
            C2f(384, 256, 1, False), Detect(nc, (64, 128, 256))])

    def forward(self, x):
        m, up = self.model, nn.functional.interpolate
        for i in range(4):
            x = m[i](x)
        p3 = m[4](x)
        p4 = m[6](m[5](p3))
        p5 = m[9](m[8](m[7](p4)))
        n12 = m[12](torch.cat((up(p5, scale_factor=2, mode="nearest"), p4), 1))
        n15 = m[15](torch.cat((up(n12, scale_factor=2, mode="nearest"), p3), 1))
        n18 = m[18](torch.cat((m[16](n15), n12), 1))
        n21 = m[21](torch.cat((m[19](n18), p5), 1))
        return m[22]([n15, n18, n21])


def main(folder):
    net = YOLOv8n()
    print(f"parameters: {sum(p.numel() for p in net.parameters())}")
    state, _ = read_safetensors(f"{folder}/yolo.safetensors")
    net.load_state_dict(state, strict=True)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # cpu: a check off the GPU machine
    net = net.to(dev).eval()
    x = torch.tensor(np.load(f"{folder}/x.npy"), device=dev)
    theirs = np.load(f"{folder}/y.npy").astype(np.float64)
    with torch.no_grad():
        mine = net(x).double().cpu().numpy()
    boxes = np.abs(mine[:, :4] - theirs[:, :4]).max() / np.abs(mine[:, :4]).max()
    scores = np.abs(mine[:, 4:] - theirs[:, 4:]).max()
    print(f"output {mine.shape}: boxes differ by {boxes:.3g} of the largest, scores by {scores:.3g}")
    return 0 if boxes <= 1e-4 and scores <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
