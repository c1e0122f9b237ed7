"""The Python side of spec/peer_onnx_spec.lua: networks no one here wrote, exported to ONNX by
PyTorch itself, with PyTorch's outputs on the same random input.

    python3 peer_onnx.py DIR [SIZE [BATCH]]

For torchvision's ResNet-18, MobileNetV3-Small, MobileNetV2, ConvNeXt-Tiny, DenseNet-121 (its
average pools exported as a Pad and an AveragePool), LR-ASPP (a segmentation network: bilinear
Resize), Swin-T (windowed attention: shifted windows by Slice and Concat, its masks and
relative position bias as constant arithmetic) and `blocks` (a stack of generator and decoder
layers: GroupNorm, bilinear upsampling, reflection and zero padding, InstanceNorm, LeakyReLU), timm's EfficientNet-B0 (torchvision's where timm is not installed) and YOLOv8n (peer_yolo.py's module,
its output the decoded boxes and class scores; SIZE a multiple of 32) and a small torchvision
VisionTransformer (vit: 2 layers, patches of 16), `text` (a transformer text classifier
over int64 token ids: word and position embeddings, two nn.TransformerEncoder layers) and
`bert` (a BERT-style encoder over ids and an int64 attention mask) and `gpt` (nanoGPT's: a
causal mask by masked_fill, a head tied to the token table), each randomly
initialised from seed 0 (its BatchNorms' statistics and affine too), in eval mode, writes
DIR/<name>.onnx (torch.onnx.export, opset 17, the TorchScript exporter), DIR/<name>_in.npy (a
[BATCH, 3, SIZE, SIZE] f32 input from seed 1, 2 and 224 by default; text's and bert's [BATCH, 16]
int64 ids (gpt's too), and bert's mask as DIR/bert_in2.npy) and DIR/<name>_out.npy
(PyTorch's logits in f32, on cuda with TF32 off where there is a GPU, else on the CPU, as
float64). Prints a line a network. PEER_EXPORTER=dynamo exports with torch.export's exporter
(dynamo=True, opset 18; PyTorch 2.9's default) instead.
"""
import os
import sys

import numpy as np
import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
out = sys.argv[1]
size = int(sys.argv[2]) if len(sys.argv) > 2 else 224
batch = int(sys.argv[3]) if len(sys.argv) > 3 else 2
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # cpu: a check off the GPU machine


def networks():
    import torchvision
    yield "resnet18", lambda: torchvision.models.resnet18(weights=None)
    yield "mobilenet_v3_small", lambda: torchvision.models.mobilenet_v3_small(weights=None)
    yield "mobilenet_v2", lambda: torchvision.models.mobilenet_v2(weights=None)
    yield "convnext_tiny", lambda: torchvision.models.convnext_tiny(weights=None)
    try:
        import timm
        yield "efficientnet_b0", lambda: timm.create_model("efficientnet_b0", pretrained=False)
    except ImportError:
        print("efficientnet_b0: timm is not installed: torchvision's")
        yield "efficientnet_b0", lambda: torchvision.models.efficientnet_b0(weights=None)
    yield "densenet121", lambda: torchvision.models.densenet121(weights=None)
    yield "lraspp", lraspp
    yield "swin_t", lambda: torchvision.models.swin_t(weights=None)
    yield "blocks", blocks
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from peer_yolo import YOLOv8n
    yield "yolov8n", YOLOv8n
    yield "vit", vit
    yield "text", text
    yield "bert", bert
    yield "gpt", gpt
    yield "recurrent", recurrent


def vit():
    """torchvision's VisionTransformer, small (2 layers of 4 heads, width 64) at the input's size:
    the class token joined to the patches, attention as exported (products of computed tensors),
    the class token gathered for the head. Its zero-initialised parameters (the class token, the
    head) drawn at random, so that they count."""
    import torchvision
    model = torchvision.models.VisionTransformer(image_size=size, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64,
                                                 mlp_dim=128, num_classes=10)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            if p.abs().max() == 0:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return model


def text():
    """A text classifier as torch.nn writes one: word and learned position embeddings (Gather of
    a table by the int64 token ids, an Add of a constant), two nn.TransformerEncoder layers
    (batch first, 4 heads, width 32, GELU, norm first), the mean over the tokens and a linear
    head. Its input is TOKENS int64 ids below 1000 a row (TEXT_INPUT)."""
    nn = torch.nn

    class Text(nn.Module):
        def __init__(self):
            super().__init__()
            self.words = nn.Embedding(1000, 32)
            self.positions = nn.Parameter(torch.randn(1, TOKENS, 32) * 0.1)
            layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=True,
                                               activation="gelu")
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(32, 5)

        def forward(self, ids):
            return self.head(self.encoder(self.words(ids) + self.positions).mean(1))
    return Text()


def bert():
    """A BERT-style encoder as Hugging Face's modules write one: word, position (a slice of a
    position_ids buffer) and token type embeddings, LayerNorm, two layers of self-attention
    with the additive mask (1 - mask[:, None, None, :]) * -10000 from an int64 attention mask
    (Unsqueeze, Cast, Sub, Mul), exact GELU, the pooler's tanh over the first token and a
    classifier. Its inputs are TOKENS int64 ids and a mask of ones and zeros (the second row's
    last 6 tokens masked)."""
    import math
    nn = torch.nn

    class Layer(nn.Module):
        def __init__(self, d=32, heads=4):
            super().__init__()
            self.heads = heads
            self.query, self.key, self.value, self.out = (nn.Linear(d, d) for _ in range(4))
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.up, self.down = nn.Linear(d, 64), nn.Linear(64, d)

        def forward(self, x, additive):
            b, t, d = x.shape
            hd = d // self.heads

            def split(h):
                return h.view(b, t, self.heads, hd).permute(0, 2, 1, 3)
            scores = torch.matmul(split(self.query(x)), split(self.key(x)).transpose(-1, -2)) / math.sqrt(hd)
            attended = torch.matmul((scores + additive).softmax(-1), split(self.value(x)))
            x = self.norm1(x + self.out(attended.permute(0, 2, 1, 3).reshape(b, t, d)))
            return self.norm2(x + self.down(nn.functional.gelu(self.up(x))))

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.words, self.positions, self.types = nn.Embedding(1000, 32), nn.Embedding(64, 32), nn.Embedding(2, 32)
            self.norm = nn.LayerNorm(32)
            self.layers = nn.ModuleList([Layer(), Layer()])
            self.pooler, self.classifier = nn.Linear(32, 32), nn.Linear(32, 3)
            self.register_buffer("position_ids", torch.arange(64).expand((1, -1)))

        def forward(self, ids, mask):
            t = ids.shape[1]
            x = self.words(ids) + self.positions(self.position_ids[:, :t]) + self.types(torch.zeros_like(ids))
            x = self.norm(x)
            additive = (1.0 - mask[:, None, None, :].to(x.dtype)) * -10000.0
            for layer in self.layers:
                x = layer(x, additive)
            return self.classifier(torch.tanh(self.pooler(x[:, 0])))
    return Bert()


def gpt():
    """A GPT as nanoGPT writes one: token and position embeddings, two pre-norm blocks whose
    attention is one Linear split three ways and a causal mask by masked_fill(-inf) from a tril
    buffer, tanh-approximated GELU, a final LayerNorm and a head tied to the token table, its
    logits over the vocabulary at every position."""
    import math
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, d=32, heads=4):
            super().__init__()
            self.heads = heads
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.register_buffer("causal", torch.tril(torch.ones(TOKENS, TOKENS)).view(1, 1, TOKENS, TOKENS))

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (h.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                       for h in self.qkv(self.norm1(x)).split(d, dim=2))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.causal[:, :, :t, :t] == 0, float("-inf")).softmax(-1)
            x = x + self.proj((att @ v).transpose(1, 2).contiguous().view(b, t, d))
            return x + self.out(nn.functional.gelu(self.fc(self.norm2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens, self.positions = nn.Embedding(1000, 32), nn.Embedding(TOKENS, 32)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.norm = nn.LayerNorm(32)
            self.head = nn.Linear(32, 1000, bias=False)
            self.head.weight = self.tokens.weight

        def forward(self, ids):
            t = ids.shape[1]
            x = self.tokens(ids) + self.positions(torch.arange(0, t, dtype=torch.long, device=ids.device).unsqueeze(0))
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x))
    return GPT()


TOKENS = 16


def text_input():
    return torch.randint(0, 1000, (batch, TOKENS), generator=torch.Generator().manual_seed(1))


def bert_inputs():
    mask = torch.ones(batch, TOKENS, dtype=torch.int64)
    mask[-1, TOKENS - 6:] = 0
    return text_input(), mask


def blocks():
    """Layers of generators and segmentation decoders as torch.nn writes them: GroupNorm (exported
    as InstanceNormalization of the groups, then the affine), bilinear upsampling with aligned
    corners, ReflectionPad2d, InstanceNorm2d with affine, LeakyReLU(0.2), bicubic downsampling by
    a scale factor, ZeroPad2d wider on one
    side, a max pool, global average pooling and a linear classifier."""
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.SiLU(),
                          nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True), nn.ReflectionPad2d(1),
                          nn.Conv2d(16, 8, 3, stride=2), nn.InstanceNorm2d(8, affine=True), nn.LeakyReLU(0.2),
                          nn.Upsample(scale_factor=0.75, mode="bicubic"), nn.ZeroPad2d((0, 1, 0, 1)), nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 10))
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)  # the norms' affine away from 1 and 0
    return model


def lraspp():
    """torchvision's LR-ASPP segmentation network (MobileNetV3-Large), its per-pixel class scores
    (the "out" of its dictionary) resized bilinearly to the input's size."""
    import torchvision

    class Scores(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torchvision.models.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None)

        def forward(self, x):
            return self.net(x)["out"]
    return Scores()


SEQUENCE = 12  # steps of the recurrent network's input, [SEQUENCE, batch, 16]


def recurrent():
    """A sequence model as torch.nn writes one: a two-layer bidirectional LSTM, a GRU over its
    output (batch first: the exporter transposes), and a linear head over the GRU's last state
    beside the mean of the LSTM's output."""
    nn = torch.nn

    class Recurrent(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(16, 32, num_layers=2, bidirectional=True)
            self.gru = nn.GRU(64, 24, batch_first=True)
            self.head = nn.Linear(24 + 64, 5)

        def forward(self, x):
            y, _ = self.lstm(x)
            _, h = self.gru(y.transpose(0, 1))
            return self.head(torch.cat([h[0], y.mean(0)], 1))
    return Recurrent()


def export(model, inputs, path):
    names = ["x"] + [f"x{i + 1}" for i in range(1, len(inputs))]
    if os.environ.get("PEER_EXPORTER") == "dynamo":  # torch.export's exporter (the default from PyTorch 2.9)
        torch.onnx.export(model, inputs, path, dynamo=True, input_names=names, output_names=["logits"], opset_version=18,
                          external_data=False)
        return
    kwargs = dict(input_names=names, output_names=["logits"], opset_version=17, do_constant_folding=True)
    try:
        torch.onnx.export(model, inputs, path, dynamo=False, **kwargs)
    except TypeError:  # a torch without the dynamo switch exports through TorchScript anyway
        torch.onnx.export(model, inputs, path, **kwargs)


def lively(model):
    """BatchNorm statistics and affine drawn at random (a fresh network's are 0, 1, 1, 0, which
    fold away and leave logits near 0 in the deeper networks)."""
    g = torch.Generator().manual_seed(2)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.weight.data = torch.rand(c, generator=g) + 0.5
            m.bias.data = torch.rand(c, generator=g) * 0.4 - 0.2
            m.running_mean = torch.randn(c, generator=g) * 0.1
            m.running_var = torch.rand(c, generator=g) + 0.5
    return model


only = [n for n in os.environ.get("PEER_ONNX_ONLY", "").split(",") if n]  # a few networks, when named
for name, make in networks():
    if only and name not in only:
        continue
    torch.manual_seed(0)
    model = lively(make()).eval()
    if name == "bert":
        inputs = bert_inputs()
    elif name in ("text", "gpt"):
        inputs = (text_input(),)
    elif name == "recurrent":
        inputs = (torch.randn(SEQUENCE, batch, 16, generator=torch.Generator().manual_seed(1)),)
    else:
        inputs = (torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(1)),)
    export(model, inputs, f"{out}/{name}.onnx")
    with torch.no_grad():
        y = model.to(dev)(*(x.to(dev) for x in inputs)).double().cpu().numpy()
    for i, x in enumerate(inputs):  # images as f32; token ids and masks stay int64
        np.save(f"{out}/{name}_in{'' if i == 0 else i + 1}.npy", x.numpy() if x.dtype == torch.int64 else x.numpy().astype(np.float32))
    np.save(f"{out}/{name}_out.npy", y)
    print(f"{name}: exported, logits {tuple(y.shape)}, largest |logit| {np.abs(y).max():.4g}")
