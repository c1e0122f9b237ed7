"""The Python side of spec/onnx_spec.lua: small ONNX networks built with the onnx package's
helper (Debian's python3-onnx), their inputs, and their outputs computed here in float64 NumPy,
a reference written apart from tocha's kernels.

    python3 onnx_models.py DIR     # writes DIR/<name>.onnx, DIR/<name>_in<i>.npy, DIR/<name>_out<i>.npy

Each network covers a family of the importer's op types; the weights and inputs are random
(a fixed seed). Also writes files the importer must refuse (DIR/bad_<why>.onnx).
"""
import math
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)
OUT = sys.argv[1]


def rand(*shape, low=-1.0, high=1.0):
    return rng.uniform(low, high, size=shape).astype(np.float32)


def init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def save(name, nodes, inputs, outputs, inits, opset=17, fixed=False):
    """inputs: [(name, array)], outputs: [(name, reference array)]; fixed: the inputs' shapes are
    written whole (a sequence first, the batch after it), else the first dimension is "batch"."""
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, (list(a.shape) if fixed else ["batch"] + list(a.shape[1:])))
         for n, a in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n, _ in outputs],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="onnx_models.py")
    onnx.save(model, f"{OUT}/{name}.onnx")
    for i, (_, a) in enumerate(inputs):
        np.save(f"{OUT}/{name}_in{i + 1}.npy", a.astype(np.float32))
    for i, (_, a) in enumerate(outputs):
        np.save(f"{OUT}/{name}_out{i + 1}.npy", np.asarray(a, dtype=np.float64))


# ---- references, float64 ----

def conv2d(x, w, b=None, stride=(1, 1), pad=(0, 0), dil=(1, 1), groups=1):
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    ho = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, m, ho, wo))
    mg = m // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dil[0]:i * dil[0] + stride[0] * (ho - 1) + 1:stride[0],
                           j * dil[1]:j * dil[1] + stride[1] * (wo - 1) + 1:stride[1]]
                out[:, g * mg:(g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, w[g * mg:(g + 1) * mg, :, i, j])
    if b is not None:
        out += b.astype(np.float64)[None, :, None, None]
    return out


def conv_transpose2d(x, w, b, stride, pad):
    n, c, h, wd = x.shape
    _, m, kh, kw = w.shape
    full = np.zeros((n, m, (h - 1) * stride + kh, (wd - 1) * stride + kw))
    for i in range(h):
        for j in range(wd):
            full[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw] += np.einsum(
                "nc,cmij->nmij", x[:, :, i, j].astype(np.float64), w.astype(np.float64))
    out = full[:, :, pad:full.shape[2] - pad, pad:full.shape[3] - pad]
    return out + b.astype(np.float64)[None, :, None, None]


def batch_norm(x, scale, bias, mean, var, eps):
    s = lambda v: v.astype(np.float64)[None, :, None, None]
    return (x - s(mean)) / np.sqrt(s(var) + eps) * s(scale) + s(bias)


def max_pool(x, k, stride, pad):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    ho = (x.shape[2] + 2 * pad - k) // stride + 1
    wo = (x.shape[3] + 2 * pad - k) // stride + 1
    out = np.full(x.shape[:2] + (ho, wo), -np.inf)
    for i in range(k):
        for j in range(k):
            out = np.maximum(out, xp[:, :, i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride])
    return out


def avg_pool_exclude_pad(x, k, pad):
    """Stride 1; the count of each window's elements inside x (count_include_pad 0)."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ones = np.pad(np.ones_like(x), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    h, w = x.shape[2] + 2 * pad - k + 1, x.shape[3] + 2 * pad - k + 1
    total, count = np.zeros(x.shape[:2] + (h, w)), np.zeros(x.shape[:2] + (h, w))
    for i in range(k):
        for j in range(k):
            total += xp[:, :, i:i + h, j:j + w]
            count += ones[:, :, i:i + h, j:j + w]
    return total / count


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def hardswish(v):
    return v * np.clip(v + 3, 0, 6) / 6


def hardsigmoid(v):
    return np.clip(v + 3, 0, 6) / 6


# ---- a residual block, a classifier's head: Conv, BatchNormalization, Relu, MaxPool, Add,
# GlobalAveragePool, Flatten, Gemm (transB 1), Softmax ----

def residual():
    x = rand(2, 3, 8, 8)
    w1, b1 = rand(8, 3, 3, 3, low=-0.5, high=0.5), rand(8)
    bn = [rand(8, low=0.5, high=1.5), rand(8), rand(8), rand(8, low=0.5, high=2.0)]
    w2 = rand(8, 8, 3, 3, low=-0.3, high=0.3)
    bn2 = [rand(8, low=0.5, high=1.5), rand(8), rand(8), rand(8, low=0.5, high=2.0)]
    fc_w, fc_b = rand(5, 8), rand(5)
    h = np.maximum(batch_norm(conv2d(x, w1, b1, pad=(1, 1)), *bn, 1e-5), 0)
    p = max_pool(h, 3, 2, 1)
    h2 = batch_norm(conv2d(p, w2, pad=(1, 1)), *bn2, 1e-3)
    r = np.maximum(h2 + p, 0)
    g = r.mean(axis=(2, 3))
    logits = g @ fc_w.astype(np.float64).T + fc_b
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs = e / e.sum(axis=1, keepdims=True)
    nodes = [
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], name="/conv1/Conv", pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("BatchNormalization", ["c1", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"],
                         ["b1"], name="/bn1/BatchNormalization", epsilon=1e-5),
        helper.make_node("Relu", ["b1"], ["r1"], name="/relu/Relu"),
        helper.make_node("MaxPool", ["r1"], ["p"], name="/maxpool/MaxPool", kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["p", "conv2.weight"], ["c2"], name="/conv2/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c2", "bn2.weight", "bn2.bias", "bn2.running_mean", "bn2.running_var"],
                         ["b2"], name="/bn2/BatchNormalization", epsilon=1e-3),
        helper.make_node("Add", ["b2", "p"], ["s"], name="/Add"),
        helper.make_node("Relu", ["s"], ["r2"], name="/relu_1/Relu"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="/avgpool/GlobalAveragePool"),
        helper.make_node("Flatten", ["g"], ["f"], name="/Flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="/Softmax", axis=-1),
    ]
    inits = [init("conv1.weight", w1), init("conv1.bias", b1), init("conv2.weight", w2), init("fc.weight", fc_w),
             init("fc.bias", fc_b)]
    for prefix, v in (("bn1", bn), ("bn2", bn2)):
        for suffix, a in zip(("weight", "bias", "running_mean", "running_var"), v):
            inits.append(init(f"{prefix}.{suffix}", a))
    save("residual", nodes, [("x", x)], [("logits", logits), ("probs", probs)], inits)


# ---- ResNet-18's architecture (torchvision's names and layers) at a quarter of its width, on
# 32x32 images: stride-2 stages with 1x1 downsample shortcuts, every residual join ----

def resnet18(width=16, classes=10):
    x = rand(2, 3, 32, 32)
    nodes, inits = [], []
    counter = [0]

    def conv_bn(inp, prefix, bn_prefix, cin, cout, k, stride, pad, relu):
        w = rand(cout, cin, k, k, low=-1, high=1) * np.float32(math.sqrt(3.0 / (cin * k * k)))
        bn = [rand(cout, low=0.5, high=1.5), rand(cout, low=-0.2, high=0.2), rand(cout, low=-0.2, high=0.2),
              rand(cout, low=0.5, high=1.5)]
        counter[0] += 1
        c, b = f"c{counter[0]}", f"b{counter[0]}"
        nodes.append(helper.make_node("Conv", [inp[0], f"{prefix}.weight"], [c], name=f"/{prefix}/Conv", kernel_shape=[k, k],
                                      strides=[stride, stride], pads=[pad] * 4))
        names = [f"{bn_prefix}.{s}" for s in ("weight", "bias", "running_mean", "running_var")]
        nodes.append(helper.make_node("BatchNormalization", [c] + names, [b], name=f"/{bn_prefix}/BatchNormalization"))
        inits.append(init(f"{prefix}.weight", w))
        for name, a in zip(names, bn):
            inits.append(init(name, a))
        y = batch_norm(conv2d(inp[1], w, stride=(stride, stride), pad=(pad, pad)), *bn, 1e-5)
        if relu:
            nodes.append(helper.make_node("Relu", [b], [b + "r"], name=f"/{prefix}/Relu"))
            return b + "r", np.maximum(y, 0)
        return b, y

    h = conv_bn(("x", x.astype(np.float64)), "conv1", "bn1", 3, width, 7, 2, 3, True)
    nodes.append(helper.make_node("MaxPool", [h[0]], ["pool"], name="/maxpool/MaxPool", kernel_shape=[3, 3], strides=[2, 2],
                                  pads=[1, 1, 1, 1]))
    h = ("pool", max_pool(h[1], 3, 2, 1))
    cin = width
    for stage in range(4):
        cout = width * 2 ** stage
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            p = f"layer{stage + 1}.{block}"
            a = conv_bn(h, f"{p}.conv1", f"{p}.bn1", cin, cout, 3, stride, 1, True)
            a = conv_bn(a, f"{p}.conv2", f"{p}.bn2", cout, cout, 3, 1, 1, False)
            short = h
            if stride != 1 or cin != cout:
                short = conv_bn(h, f"{p}.downsample.0", f"{p}.downsample.1", cin, cout, 1, stride, 0, False)
            out = f"{p}.out"
            nodes.append(helper.make_node("Add", [a[0], short[0]], [out + "s"], name=f"/{p}/Add"))
            nodes.append(helper.make_node("Relu", [out + "s"], [out], name=f"/{p}/Relu"))
            h = (out, np.maximum(a[1] + short[1], 0))
            cin = cout
    fc_w, fc_b = rand(classes, cin), rand(classes)
    nodes.append(helper.make_node("GlobalAveragePool", [h[0]], ["gap"], name="/avgpool/GlobalAveragePool"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="/Flatten"))
    nodes.append(helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm", transB=1))
    inits += [init("fc.weight", fc_w), init("fc.bias", fc_b)]
    logits = h[1].mean(axis=(2, 3)) @ fc_w.astype(np.float64).T + fc_b
    save("resnet18", nodes, [("x", x)], [("logits", logits)], inits)


# ---- a mobile block: constant normalisation (Sub, Div), depthwise Conv, HardSwish, SiLU as
# Mul(x, Sigmoid(x)), squeeze-and-excitation (HardSigmoid, a broadcast Mul), AveragePool ----

def mobile():
    x = rand(2, 4, 6, 6, low=-3, high=3)
    mean, std = rand(1, 4, 1, 1), rand(1, 4, 1, 1, low=0.5, high=2)
    dw, dwb = rand(4, 1, 3, 3), rand(4)
    pw = rand(8, 4, 1, 1)
    se_w, se_b = rand(8, 8, 1, 1), rand(8)
    h = (x - mean.astype(np.float64)) / std
    h = hardswish(conv2d(h, dw, dwb, pad=(1, 1), groups=4))
    h = conv2d(h, pw)
    h = h * sigmoid(h)
    s = hardsigmoid(conv2d(h.mean(axis=(2, 3), keepdims=True), se_w, se_b))
    y = avg_pool_exclude_pad(h * s, 3, 1)
    nodes = [
        helper.make_node("Sub", ["x", "mean"], ["n1"], name="norm_sub"),
        helper.make_node("Div", ["n1", "std"], ["n2"], name="norm_div"),
        helper.make_node("Conv", ["n2", "dw.weight", "dw.bias"], ["d"], name="dw", group=4, pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("HardSwish", ["d"], ["hs"], name="hswish"),
        helper.make_node("Conv", ["hs", "pw.weight"], ["q"], name="pw"),
        helper.make_node("Sigmoid", ["q"], ["sq"], name="sig"),
        helper.make_node("Mul", ["q", "sq"], ["silu"], name="silu"),
        helper.make_node("GlobalAveragePool", ["silu"], ["gp"], name="se_pool"),
        helper.make_node("Conv", ["gp", "se.weight", "se.bias"], ["se1"], name="se_conv"),
        helper.make_node("HardSigmoid", ["se1"], ["se2"], name="se_gate", alpha=1.0 / 6, beta=0.5),
        helper.make_node("Mul", ["silu", "se2"], ["scaled"], name="se_scale"),
        helper.make_node("AveragePool", ["scaled"], ["y"], name="smooth", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         count_include_pad=0),
    ]
    inits = [init("mean", mean), init("std", std), init("dw.weight", dw), init("dw.bias", dwb), init("pw.weight", pw),
             init("se.weight", se_w), init("se.bias", se_b)]
    save("mobile", nodes, [("x", x)], [("y", y)], inits)


# ---- a detector's neck: Split, Resize (nearest, by 2), ConvTranspose, Concat, Tanh, Mul by a
# Constant, Pow, a second output ----

def neck():
    x = rand(1, 8, 4, 4)
    wt, bt = rand(4, 6, 2, 2), rand(6)
    a, b = x[:, :4].astype(np.float64), x[:, 4:].astype(np.float64)
    up = a.repeat(2, axis=2).repeat(2, axis=3)
    de = conv_transpose2d(b, wt, bt, 2, 0)
    cat = np.concatenate([up, de], axis=1)
    y = np.tanh(cat) * 0.5
    z = y ** 2
    nodes = [
        helper.make_node("Split", ["x"], ["a", "b"], name="split", axis=1),
        helper.make_node("Constant", [], ["scales"], name="scales",
                         value=helper.make_tensor("s", TensorProto.FLOAT, [4], [1, 1, 2, 2])),
        helper.make_node("Resize", ["a", "", "scales"], ["up"], name="up", mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("ConvTranspose", ["b", "deconv.weight", "deconv.bias"], ["de"], name="deconv", strides=[2, 2],
                         kernel_shape=[2, 2]),
        helper.make_node("Concat", ["up", "de"], ["cat"], name="cat", axis=1),
        helper.make_node("Tanh", ["cat"], ["t"], name="tanh"),
        helper.make_node("Constant", [], ["half"], name="half", value_float=0.5),
        helper.make_node("Mul", ["t", "half"], ["y"], name="scale"),
        helper.make_node("Constant", [], ["two"], name="two", value=helper.make_tensor("p", TensorProto.FLOAT, [], [2.0])),
        helper.make_node("Pow", ["y", "two"], ["z"], name="square"),
    ]
    save("neck", nodes, [("x", x)], [("y", y), ("z", z)], [init("deconv.weight", wt), init("deconv.bias", bt)])


# ---- a sequence head: LayerNormalization, MatMul by a constant, a broadcast Add of a constant,
# Relu, ReduceMean, a Reshape whose shape is computed from Shape (Shape, Gather, Unsqueeze,
# Concat folded), Gemm with transB 0 and alpha, beta, LogSoftmax ----

def head():
    x = rand(2, 3, 5)
    g, bb = rand(5, low=0.5, high=1.5), rand(5)
    w, bias = rand(5, 6), rand(6)
    gw, gc = rand(6, 4), rand(1, 4)
    xd = x.astype(np.float64)
    mu = xd.mean(axis=-1, keepdims=True)
    var = ((xd - mu) ** 2).mean(axis=-1, keepdims=True)
    ln = (xd - mu) / np.sqrt(var + 1e-5) * g + bb
    h = np.maximum(ln @ w.astype(np.float64) + bias, 0)
    m = h.mean(axis=1)
    logits = 0.5 * (m @ gw.astype(np.float64)) + 2.0 * gc
    out = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    nodes = [
        helper.make_node("LayerNormalization", ["x", "ln.weight", "ln.bias"], ["ln"], name="ln", axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["ln", "w"], ["mm"], name="proj"),
        helper.make_node("Add", ["mm", "b"], ["mb"], name="proj_bias"),
        helper.make_node("Relu", ["mb"], ["h"], name="act"),
        helper.make_node("ReduceMean", ["h"], ["m3"], name="mean", axes=[1], keepdims=1),
        helper.make_node("Shape", ["m3"], ["shp"], name="shape"),
        helper.make_node("Constant", [], ["zero"], name="zero", value=helper.make_tensor("z", TensorProto.INT64, [], [0])),
        helper.make_node("Gather", ["shp", "zero"], ["n"], name="batch", axis=0),
        helper.make_node("Constant", [], ["ax"], name="ax", value=helper.make_tensor("a", TensorProto.INT64, [1], [0])),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"], name="unsq"),
        helper.make_node("Constant", [], ["rest"], name="rest", value=helper.make_tensor("r", TensorProto.INT64, [1], [-1])),
        helper.make_node("Concat", ["n1", "rest"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["m3", "target"], ["m"], name="flat"),
        helper.make_node("Gemm", ["m", "gw", "gc"], ["logits"], name="fc", alpha=0.5, beta=2.0),
        helper.make_node("LogSoftmax", ["logits"], ["out"], name="logsoftmax", axis=1),
    ]
    inits = [init("ln.weight", g), init("ln.bias", bb), init("w", w), init("b", bias), init("gw", gw), init("gc", gc)]
    save("head", nodes, [("x", x)], [("out", out)], inits)


# ---- views copied: Transpose (a permutation, then the default reversal), Slice (negative steps,
# clamped ends), a Slice of a shape folded into a Reshape ----

def views():
    x = rand(2, 3, 4, 6)
    t = x.transpose(0, 2, 3, 1)
    s = t[:, 1:-1, 5:0:-2]
    y = s.transpose(3, 2, 1, 0)
    z = x.reshape(2, 3, 24)
    i64 = TensorProto.INT64
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], name="nhwc", perm=[0, 2, 3, 1]),
        helper.make_node("Constant", [], ["st"], name="st", value=helper.make_tensor("a", i64, [2], [1, 5])),
        helper.make_node("Constant", [], ["en"], name="en", value=helper.make_tensor("b", i64, [2], [-1, -2 ** 63])),
        helper.make_node("Constant", [], ["ax"], name="ax", value=helper.make_tensor("c", i64, [2], [1, -2])),
        helper.make_node("Constant", [], ["sp"], name="sp", value=helper.make_tensor("d", i64, [2], [1, -2])),
        helper.make_node("Slice", ["t", "st", "en", "ax", "sp"], ["s"], name="crop"),
        helper.make_node("Transpose", ["s"], ["y"], name="reverse"),
        helper.make_node("Shape", ["x"], ["shp"], name="shape"),
        helper.make_node("Constant", [], ["z0"], name="z0", value=helper.make_tensor("e", i64, [1], [0])),
        helper.make_node("Constant", [], ["z2"], name="z2", value=helper.make_tensor("f", i64, [1], [2])),
        helper.make_node("Slice", ["shp", "z0", "z2"], ["lead"], name="lead"),
        helper.make_node("Constant", [], ["rest"], name="rest", value=helper.make_tensor("g", i64, [1], [-1])),
        helper.make_node("Concat", ["lead", "rest"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["z"], name="flat"),
        # [2, -1, 4] as Where(Not(Equal(Mod(Range(0, 3, 1), 2), 1)), shape[0:3], -1) folds it
        helper.make_node("Constant", [], ["r0"], name="r0", value=helper.make_tensor("h", i64, [], [0])),
        helper.make_node("Constant", [], ["r3"], name="r3", value=helper.make_tensor("i", i64, [], [3])),
        helper.make_node("Constant", [], ["r1"], name="r1", value=helper.make_tensor("j", i64, [], [1])),
        helper.make_node("Range", ["r0", "r3", "r1"], ["idx"], name="range"),
        helper.make_node("Constant", [], ["two"], name="two", value=helper.make_tensor("k", i64, [], [2])),
        helper.make_node("Mod", ["idx", "two"], ["odd"], name="mod"),
        helper.make_node("Equal", ["odd", "r1"], ["is_odd"], name="is_odd"),
        helper.make_node("Not", ["is_odd"], ["even"], name="even"),
        helper.make_node("Constant", [], ["z3"], name="z3", value=helper.make_tensor("l", i64, [1], [3])),
        helper.make_node("Slice", ["shp", "z0", "z3"], ["lead3"], name="lead3"),
        helper.make_node("Where", ["even", "lead3", "rest"], ["target2"], name="target2"),
        helper.make_node("Reshape", ["x", "target2"], ["z2"], name="fold"),
    ]
    save("views", nodes, [("x", x)], [("y", y), ("z", z), ("z2", x.reshape(2, 18, 4))], [])


# ---- Clip with other bounds than ReLU6's, ReduceSum (axes an input), ReduceMax and ReduceMin
# (axes attributes), opset 13 ----

def reductions():
    x = rand(2, 3, 4, 5)
    c = np.clip(x.astype(np.float64), -0.5, 0.7)
    y = c.sum(axis=1, keepdims=True).max(axis=3)
    z = x.astype(np.float64).min(axis=(2, 3))
    f32 = TensorProto.FLOAT
    nodes = [
        helper.make_node("Constant", [], ["lo"], name="lo", value=helper.make_tensor("a", f32, [], [-0.5])),
        helper.make_node("Constant", [], ["hi"], name="hi", value=helper.make_tensor("b", f32, [], [0.7])),
        helper.make_node("Clip", ["x", "lo", "hi"], ["c"], name="clip"),
        helper.make_node("Constant", [], ["ax"], name="ax", value=helper.make_tensor("d", TensorProto.INT64, [1], [1])),
        helper.make_node("ReduceSum", ["c", "ax"], ["s"], name="sum", keepdims=1),
        helper.make_node("ReduceMax", ["s"], ["y"], name="max", axes=[3], keepdims=0),
        helper.make_node("ReduceMin", ["x"], ["z"], name="min", axes=[2, -1], keepdims=0),
    ]
    save("reductions", nodes, [("x", x)], [("y", y), ("z", z)], [], opset=13)


# ---- joins and splits along every axis, and constants folded: what a detector's head does
# (YOLOv8's Detect: its feature maps flattened and joined along the anchors, split unequally
# into boxes and scores, an anchor grid built from constants); the channels-last import keeps a
# convolution's output channels-last through a Slice and a Resize ----

def joins():
    x = rand(2, 4, 4, 6)
    w = rand(8, 4, 1, 1)
    c = conv2d(x, w)                                   # [2, 8, 4, 6]
    sl = c[:, 2:7]                                     # channels 2..6, channels-last in tocha
    up = sl.repeat(2, axis=2).repeat(2, axis=3)        # [2, 5, 8, 12]
    flat = up.reshape(2, 5, 96)
    x3 = x.astype(np.float64).reshape(2, 4, 24)
    cat2 = np.concatenate([flat, np.repeat(x3[:, :1], 5, axis=1)], axis=2)  # [2, 5, 120]
    a, b = cat2[:, :2], cat2[:, 2:]                    # unequal split along axis 1
    grid = np.arange(6, dtype=np.float64).reshape(1, 6)
    anchors = np.broadcast_to(np.concatenate([grid, grid + 0.5], axis=0).T, (6, 2)).T  # [2, 6] folded
    ysum = a[:, :, :6] * anchors[None] + 1.0
    tall = np.concatenate([x.astype(np.float64), c[:, :4]], axis=2)     # along H: [2, 4, 8, 6]
    wide = np.concatenate([c[:, 4:], x.astype(np.float64)], axis=3)     # along W: [2, 4, 4, 12]
    i64, f32 = TensorProto.INT64, TensorProto.FLOAT
    cst = lambda n, t, dims, v: helper.make_node("Constant", [], [n], name=n, value=helper.make_tensor(n + "_v", t, dims, v))
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        cst("s0", i64, [1], [2]), cst("s1", i64, [1], [7]), cst("s_ax", i64, [1], [1]),
        helper.make_node("Slice", ["c", "s0", "s1", "s_ax"], ["sl"], name="slice_channels"),
        cst("scales", f32, [4], [1, 1, 2, 2]),
        helper.make_node("Resize", ["sl", "", "scales"], ["up"], name="up", mode="nearest"),
        cst("flat_shape", i64, [3], [2, 5, 96]),
        helper.make_node("Reshape", ["up", "flat_shape"], ["flat"], name="flatten"),
        cst("x3_shape", i64, [3], [2, 4, 24]),
        helper.make_node("Reshape", ["x", "x3_shape"], ["x3"], name="x3"),
        cst("one0", i64, [1], [0]), cst("one1", i64, [1], [1]), cst("ax1", i64, [1], [1]),
        helper.make_node("Slice", ["x3", "one0", "one1", "ax1"], ["x1"], name="first_channel"),
        helper.make_node("Concat", ["x1", "x1", "x1", "x1", "x1"], ["x5"], name="five", axis=1),
        helper.make_node("Concat", ["flat", "x5"], ["cat2"], name="join_anchors", axis=2),
        cst("sizes", i64, [2], [2, 3]),
        helper.make_node("Split", ["cat2", "sizes"], ["a", "b"], name="split_unequal", axis=1),
        cst("g", f32, [1, 6], list(range(6))),
        cst("half", f32, [1, 6], [0.5] * 6),
        helper.make_node("Add", ["g", "half"], ["g2"], name="grid_half"),
        helper.make_node("Concat", ["g", "g2"], ["gg"], name="grid_rows", axis=0),
        helper.make_node("Transpose", ["gg"], ["ggt"], name="grid_t", perm=[1, 0]),
        cst("eshape", i64, [2], [6, 2]),
        helper.make_node("Expand", ["ggt", "eshape"], ["gge"], name="grid_expand"),
        helper.make_node("Transpose", ["gge"], ["anchors"], name="anchors", perm=[1, 0]),
        cst("z0", i64, [1], [0]), cst("z6", i64, [1], [6]), cst("ax2", i64, [1], [2]),
        helper.make_node("Slice", ["a", "z0", "z6", "ax2"], ["a6"], name="first_anchors"),
        helper.make_node("Mul", ["a6", "anchors"], ["am"], name="scale_by_anchors"),
        cst("one", f32, [], [1.0]),
        helper.make_node("Add", ["am", "one"], ["ysum"], name="plus_one"),
        helper.make_node("Slice", ["c", "one0", "s_four", "ax1"], ["c4"], name="c_first4"),
        cst("s_four", i64, [1], [4]), cst("s_eight", i64, [1], [8]),
        helper.make_node("Slice", ["c", "s_four", "s_eight", "ax1"], ["c8"], name="c_last4"),
        helper.make_node("Concat", ["x", "c4"], ["tall"], name="join_rows", axis=2),
        helper.make_node("Concat", ["c8", "x"], ["wide"], name="join_columns", axis=-1),
    ]
    # (s_four is made after its first reader above: ONNX wants producers first)
    nodes.insert(nodes.index(next(n for n in nodes if n.name == "c_first4")), nodes.pop(nodes.index(next(
        n for n in nodes if n.name == "s_four"))))
    save("joins", nodes, [("x", x)], [("ysum", ysum), ("b", b), ("tall", tall), ("wide", wide)], [init("w", w)])


# ---- LeakyRelu as darknet-style detectors and GAN discriminators write it: after a convolution
# (held channels-last) with alpha 0.1, and with ONNX's default alpha ----

def leaky():
    x = rand(2, 3, 5, 5)
    w = rand(4, 3, 3, 3)
    c = conv2d(x, w, pad=(1, 1))
    a = np.float64(np.float32(0.1))
    y1 = np.where(c > 0, c, c * a)
    x64 = x.astype(np.float64)
    y2 = np.where(x64 > 0, x64, x64 * np.float64(np.float32(0.01)))
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("LeakyRelu", ["c"], ["y1"], name="leaky", alpha=0.1),
        helper.make_node("LeakyRelu", ["x"], ["y2"], name="leaky_default"),
    ]
    save("leaky", nodes, [("x", x)], [("y1", y1), ("y2", y2)], [init("w", w)])


# ---- activations of older and other families: Mish as exporters before opset 18 write it
# (Mul(x, Tanh(Softplus(x))), after a convolution: its epilogue) and as opset 18's op, Elu,
# Celu, Selu, Softplus, PRelu with a per-channel slope (PyTorch's nn.PReLU after a convolution)
# and with one slope, Reciprocal, opset 20's Gelu with the tanh approximation, HardSigmoid with
# ONNX's default constants and others ----

def softplus64(a):
    return np.log1p(np.exp(a))


def activations():
    x = rand(2, 3, 5, 5, low=-3, high=3)
    w = rand(4, 3, 3, 3)
    w2 = rand(4, 3, 1, 1)
    slope = rand(4, 1, 1)
    one = np.array([0.25], dtype=np.float32)
    x64 = x.astype(np.float64)
    c = conv2d(x, w, pad=(1, 1))
    mish = c * np.tanh(softplus64(c))
    mish2 = x64 * np.tanh(softplus64(x64))
    elu = np.where(x64 > 0, x64, np.float64(np.float32(0.5)) * np.expm1(x64))
    celu = np.where(x64 > 0, x64, 2.0 * np.expm1(x64 / 2.0))
    selu = 1.0507009873554805 * np.where(x64 > 0, x64, 1.6732632423543772 * np.expm1(x64))
    sp = softplus64(x64)
    c2 = conv2d(x, w2)
    prelu = np.where(c2 > 0, c2, c2 * slope.astype(np.float64))
    prelu1 = np.where(x64 > 0, x64, x64 * 0.25)
    recip = 1.0 / sp
    gelu_tanh = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3)))
    hsig = np.clip(np.float64(np.float32(0.2)) * c2 + 0.5, 0, 1)
    hsig2 = np.clip(np.float64(np.float32(0.3)) * x64 + np.float64(np.float32(0.4)), 0, 1)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Softplus", ["c"], ["c_sp"], name="mish_softplus"),
        helper.make_node("Tanh", ["c_sp"], ["c_t"], name="mish_tanh"),
        helper.make_node("Mul", ["c", "c_t"], ["mish"], name="mish_mul"),
        helper.make_node("Mish", ["x"], ["mish2"], name="mish_op"),
        helper.make_node("Elu", ["x"], ["elu"], name="elu", alpha=0.5),
        helper.make_node("Celu", ["x"], ["celu"], name="celu", alpha=2.0),
        helper.make_node("Selu", ["x"], ["selu"], name="selu"),
        helper.make_node("Softplus", ["x"], ["sp"], name="softplus"),
        helper.make_node("Conv", ["x", "w2"], ["c2"], name="conv2"),
        helper.make_node("PRelu", ["c2", "prelu.weight"], ["prelu"], name="prelu"),
        helper.make_node("PRelu", ["x", "one"], ["prelu1"], name="prelu_one"),
        helper.make_node("Reciprocal", ["sp"], ["recip"], name="recip"),
        helper.make_node("Gelu", ["x"], ["gelu_tanh"], name="gelu_tanh", approximate="tanh"),
        helper.make_node("HardSigmoid", ["c2"], ["hsig"], name="hard_sigmoid_default"),
        helper.make_node("HardSigmoid", ["x"], ["hsig2"], name="hard_sigmoid", alpha=0.3, beta=0.4),
    ]
    save("activations", nodes, [("x", x)], [("mish", mish), ("mish2", mish2), ("elu", elu), ("celu", celu), ("selu", selu),
                                         ("sp", sp), ("prelu", prelu), ("prelu1", prelu1), ("recip", recip),
                                         ("gelu_tanh", gelu_tanh), ("hsig", hsig), ("hsig2", hsig2)],
         [init("w", w), init("w2", w2), init("prelu.weight", slope), init("one", one)], opset=20)


# ---- pixel shuffles as super-resolution networks write them (DepthToSpace in both modes, of a
# convolution's output; SpaceToDepth) and the norms F.normalize and losses export (ReduceL2,
# ReduceL1, ReduceSumSquare, ReduceProd) ----

def depth_to_space(a, b, mode):
    n, c, h, w = a.shape
    if mode == "DCR":
        t = a.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = a.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (b * b), h * b, w * b)


def shuffles():
    x = rand(2, 8, 4, 6)
    w = rand(12, 8, 3, 3)
    c = conv2d(x, w, pad=(1, 1))
    x64 = x.astype(np.float64)
    dcr = depth_to_space(c, 2, "DCR")
    crd = depth_to_space(x64, 2, "CRD")
    n, ch, h, wd = x.shape
    s2d = x64.reshape(n, ch, h // 2, 2, wd // 2, 2).transpose(0, 3, 5, 1, 2, 4).reshape(n, ch * 4, h // 2, wd // 2)
    l2 = np.sqrt((x64 * x64).sum(axis=(1, 3), keepdims=True))
    l1 = np.abs(x64).sum(axis=2)
    ssq = (c * c).sum(axis=1, keepdims=True)
    prod = (x64[:, :3] + 1.5).prod(axis=-1, keepdims=True)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("DepthToSpace", ["c"], ["dcr"], name="d2s_dcr", blocksize=2),
        helper.make_node("DepthToSpace", ["x"], ["crd"], name="d2s_crd", blocksize=2, mode="CRD"),
        helper.make_node("SpaceToDepth", ["x"], ["s2d"], name="s2d", blocksize=2),
        helper.make_node("ReduceL2", ["x"], ["l2"], name="l2", axes=[1, -1]),
        helper.make_node("ReduceL1", ["x"], ["l1"], name="l1", axes=[2], keepdims=0),
        helper.make_node("ReduceSumSquare", ["c"], ["ssq"], name="ssq", axes=[1]),
    ]
    save("shuffles", nodes, [("x", x)], [("dcr", dcr), ("crd", crd), ("s2d", s2d), ("l2", l2), ("l1", l1), ("ssq", ssq)],
         [init("w", w)], opset=13)
    # ReduceProd (no backward: outside the gradient check)
    nodes = [
        helper.make_node("Constant", [], ["starts"], name="starts", value=helper.make_tensor("sv", TensorProto.INT64, [1], [0])),
        helper.make_node("Constant", [], ["ends"], name="ends", value=helper.make_tensor("ev", TensorProto.INT64, [1], [3])),
        helper.make_node("Constant", [], ["ax1"], name="ax1", value=helper.make_tensor("av", TensorProto.INT64, [1], [1])),
        helper.make_node("Slice", ["x", "starts", "ends", "ax1"], ["x3"], name="first3"),
        helper.make_node("Constant", [], ["shift"], name="shift", value=helper.make_tensor("shv", TensorProto.FLOAT, [], [1.5])),
        helper.make_node("Add", ["x3", "shift"], ["x3s"], name="shifted"),
        helper.make_node("ReduceProd", ["x3s"], ["prod"], name="prod", axes=[-1]),
    ]
    save("product", nodes, [("x", x)], [("prod", prod)], [], opset=13)


# ---- 1-D networks as audio and sequence models write them: Conv1d + BatchNorm1d + ReLU, a
# residual block (Conv1d + Add + ReLU), a MaxPool1d, a depthwise strided and dilated Conv1d, an
# AvgPool1d, a ConvTranspose1d, a global average pool over the sequence ----

def conv1d(x, w, b=None, stride=1, pad=0, dil=1, groups=1):
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, length = x.shape
    m, cg, k = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad)))
    lo = (length + 2 * pad - dil * (k - 1) - 1) // stride + 1
    out = np.zeros((n, m, lo))
    mg = m // groups
    for o in range(m):
        g = o // mg
        for t in range(lo):
            for j in range(k):
                out[:, o, t] += xp[:, g * cg:(g + 1) * cg, t * stride + j * dil] @ w[o, :, j]
    if b is not None:
        out += b.astype(np.float64)[None, :, None]
    return out


def sequence():
    x = rand(2, 4, 16)
    w1, b1 = rand(6, 4, 3), rand(6)
    scale, bias, mean, var = rand(6) + 1.5, rand(6), rand(6), rand(6) + 1.2
    w2 = rand(6, 1, 5)
    wt, bt = rand(6, 3, 4), rand(3)
    c1 = conv1d(x, w1, b1, pad=1)
    bn = (c1 - mean.astype(np.float64)[None, :, None]) / np.sqrt(var.astype(np.float64)[None, :, None] + 1e-5) \
        * scale.astype(np.float64)[None, :, None] + bias.astype(np.float64)[None, :, None]
    r = np.maximum(bn, 0)
    mp = np.maximum(r[:, :, 0::2], r[:, :, 1::2])                     # MaxPool1d(2)
    dw = conv1d(mp, w2, stride=2, pad=3, dil=2, groups=6)              # 8 -> 3
    dp = np.pad(dw, ((0, 0), (0, 0), (1, 1)))
    ap = (dp[:, :, 0:-2] + dp[:, :, 1:-1] + dp[:, :, 2:]) / 3          # AvgPool1d(3, 1, 1), padding counted
    gap = ap.mean(axis=2, keepdims=True)
    # ConvTranspose1d(6 -> 3, k 4, stride 2, pad 1): 3 -> 6
    length = ap.shape[2]
    full = np.zeros((2, 3, (length - 1) * 2 + 4))
    for i in range(length):
        full[:, :, i * 2:i * 2 + 4] += np.einsum("nc,cmk->nmk", ap[:, :, i], wt.astype(np.float64))
    tr = full[:, :, 1:-1] + bt.astype(np.float64)[None, :, None]
    w3 = rand(6, 6, 3)
    res = np.maximum(conv1d(r, w3, pad=1) + r, 0)
    nodes = [
        helper.make_node("Conv", ["r", "c3.weight"], ["c3"], name="c3", pads=[1, 1]),
        helper.make_node("Add", ["c3", "r"], ["c3r"], name="residual"),
        helper.make_node("Relu", ["c3r"], ["res"], name="relu3"),
        helper.make_node("Conv", ["x", "c1.weight", "c1.bias"], ["c1"], name="c1", pads=[1, 1], kernel_shape=[3]),
        helper.make_node("BatchNormalization", ["c1", "bn.weight", "bn.bias", "bn.mean", "bn.var"], ["bn"], name="bn"),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["mp"], name="pool", kernel_shape=[2], strides=[2]),
        helper.make_node("Conv", ["mp", "dw.weight"], ["dw"], name="dw", pads=[3, 3], strides=[2], dilations=[2], group=6),
        helper.make_node("AveragePool", ["dw"], ["ap"], name="avg", kernel_shape=[3], pads=[1, 1], count_include_pad=1),
        helper.make_node("GlobalAveragePool", ["ap"], ["gap"], name="gap"),
        helper.make_node("ConvTranspose", ["ap", "up.weight", "up.bias"], ["tr"], name="up", strides=[2], pads=[1, 1]),
    ]
    nodes = nodes[3:6] + nodes[:3] + nodes[6:]  # (producers first)
    save("sequence", nodes, [("x", x)], [("mp", mp), ("gap", gap), ("tr", tr), ("res", res)],
         [init("c3.weight", w3), init("c1.weight", w1), init("c1.bias", b1), init("bn.weight", scale), init("bn.bias", bias),
          init("bn.mean", mean), init("bn.var", var), init("dw.weight", w2), init("up.weight", wt), init("up.bias", bt)])


# ---- what older model-zoo files hold: LRN (AlexNet's and GoogLeNet's, an odd size; an even
# one, its window lopsided, after a convolution), the variadic Sum, Mean, Max and Min with
# broadcasting and a constant, and an Expand of a computed tensor that a Mul reads ----

def lrn(a, size, alpha, beta, bias):
    c = a.shape[1]
    before, after = (size - 1) // 2, (size - 1) - (size - 1) // 2
    sq = np.pad(a * a, ((0, 0), (before, after), (0, 0), (0, 0)))
    s = sum(sq[:, i:i + c] for i in range(size))
    return a / (bias + alpha / size * s) ** beta


def classic():
    x = rand(2, 6, 4, 5, low=-2, high=2)
    w = rand(5, 6, 1, 1)
    v = rand(1, 6, 1, 5)
    k = np.array([0.25], dtype=np.float32)
    x64 = x.astype(np.float64)
    c = conv2d(x, w)
    lrn5 = lrn(x64, 5, 0.5, 0.75, 2.0)
    lrn4 = lrn(c, 4, 1e-2, 0.6, 1.0)
    total = x64 + v.astype(np.float64) + x64
    mean = (x64 + v.astype(np.float64)) / 2
    most = np.maximum(np.maximum(x64, v.astype(np.float64)), 0.25)
    least = np.minimum(c, 0.25)
    nodes = [
        helper.make_node("LRN", ["x"], ["lrn5"], name="lrn5", size=5, alpha=0.5, beta=0.75, bias=2.0),
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("LRN", ["c"], ["lrn4"], name="lrn4", size=4, alpha=1e-2, beta=0.6),
        helper.make_node("Sum", ["x", "v", "x"], ["total"], name="total"),
        helper.make_node("Mean", ["x", "v"], ["mean"], name="mean"),
        helper.make_node("Max", ["x", "v", "k"], ["most"], name="most"),
        helper.make_node("Min", ["c", "k"], ["least"], name="least"),
    ]
    # an older squeeze-and-excitation: x * s.expand_as(x), s of a pooled 1x1 convolution
    ws = rand(6, 6, 1, 1)
    s_ = sigmoid(conv2d(x64.mean(axis=(2, 3), keepdims=True), ws))
    nodes += [helper.make_node("GlobalAveragePool", ["x"], ["pooled"], name="se_pool"),
              helper.make_node("Conv", ["pooled", "se.weight"], ["se_c"], name="se_conv"),
              helper.make_node("Sigmoid", ["se_c"], ["se_s"], name="se_sigmoid"),
              helper.make_node("Shape", ["x"], ["x_shape"], name="x_shape"),
              helper.make_node("Expand", ["se_s", "x_shape"], ["se_full"], name="se_expand"),
              helper.make_node("Mul", ["x", "se_full"], ["excited"], name="excite")]
    save("classic", nodes, [("x", x)], [("lrn5", lrn5), ("lrn4", lrn4), ("total", total), ("mean", mean), ("most", most),
                                      ("least", least), ("excited", x64 * s_)],
         [init("w", w), init("v", v), init("k", k), init("se.weight", ws)], opset=13)


# ---- what torch.export's exporter writes beside the TorchScript one's: outputs named and never
# read (a MaxPool's Indices, a BatchNormalization's statistics), CastLike of its scalars, ReduceMean
# with its axes an input (opset 18); the functions of constants an exporter folds ----

def exporter18():
    x = rand(2, 3, 6, 6)
    scale, bias, mean, var = rand(3) + 1.5, rand(3), rand(3), rand(3) + 1.2
    half = np.array(0.5, dtype=np.float64)
    x64 = x.astype(np.float64)
    bn = batch_norm(x64, scale, bias, mean, var, 1e-5)
    mp = max_pool(bn, 2, 2, 0)
    y = mp * 0.5
    m = mp.mean(axis=(2, 3), keepdims=True)
    nodes = [
        helper.make_node("BatchNormalization", ["x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                         ["bn", "bn_mean_out", "bn_var_out"], name="bn", training_mode=0),
        helper.make_node("MaxPool", ["bn"], ["mp", "mp_indices"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Constant", [], ["half64"], name="half", value=numpy_helper.from_array(half, "half_v")),
        helper.make_node("CastLike", ["half64", "mp"], ["half32"], name="half_like"),
        helper.make_node("Mul", ["mp", "half32"], ["y"], name="scaled"),
        helper.make_node("Constant", [], ["axes"], name="axes", value=helper.make_tensor("axes_v", TensorProto.INT64, [2], [2, 3])),
        helper.make_node("ReduceMean", ["mp", "axes"], ["m"], name="mean"),
    ]
    # the attention scale as exporters compute it from a shape, and other constants' functions
    c = np.array([0.5, 1.5, 2.5, -0.5, -1.7, 0.0], dtype=np.float32)
    c64 = c.astype(np.float64)
    rounded = np.array([0.0, 2.0, 2.0, -0.0, -2.0, 0.0])
    k = np.sqrt(1 / np.sqrt(6.0))
    z = x64 * k + (np.sin(c64) + np.cos(c64) + np.floor(c64) + np.ceil(c64) + rounded + np.sign(c64)
                   + np.exp(c64) + np.abs(c64) + np.tanh(c64) + 1 / (1 + np.exp(-c64)) + np.maximum(c64, 0))
    nodes += [
        helper.make_node("Shape", ["x"], ["x_shape"], name="x_shape"),
        helper.make_node("Constant", [], ["last"], name="last", value=helper.make_tensor("last_v", TensorProto.INT64, [], [-1])),
        helper.make_node("Gather", ["x_shape", "last"], ["width"], name="width"),
        helper.make_node("Cast", ["width"], ["width_f"], name="width_f", to=TensorProto.FLOAT),
        helper.make_node("Sqrt", ["width_f"], ["root"], name="root"),
        helper.make_node("Reciprocal", ["root"], ["scale"], name="scale"),
        helper.make_node("Sqrt", ["scale"], ["half_scale"], name="half_scale"),
        helper.make_node("Mul", ["x", "half_scale"], ["xs"], name="x_scaled"),
        helper.make_node("Constant", [], ["c"], name="c", value=numpy_helper.from_array(c, "c_v")),
    ]
    parts = []
    for op in ("Sin", "Cos", "Floor", "Ceil", "Round", "Sign", "Exp", "Abs", "Tanh", "Sigmoid", "Relu"):
        nodes.append(helper.make_node(op, ["c"], ["c_" + op], name="c_" + op))
        parts.append("c_" + op)
    nodes += [helper.make_node("Sum", parts, ["folds"], name="folds"),
              helper.make_node("Add", ["xs", "folds"], ["z"], name="z")]
    # GroupNormalization: scale and bias a group (opset 18's) and, where groups are channels, a channel
    g1s, g1b, g3s, g3b = rand(1) + 1.5, rand(1), rand(3) + 1.5, rand(3)

    def group_norm(a, groups, sc, bi, eps):
        n_, c_ = a.shape[:2]
        t = a.reshape(n_, groups, -1)
        t = (t - t.mean(axis=2, keepdims=True)) / np.sqrt(t.var(axis=2, keepdims=True) + eps)
        t = t.reshape(a.shape)
        per = np.repeat(sc.astype(np.float64), c_ // sc.size), np.repeat(bi.astype(np.float64), c_ // bi.size)
        return t * per[0][None, :, None, None] + per[1][None, :, None, None]
    gn1 = group_norm(bn, 1, g1s, g1b, 1e-5)
    gn3 = group_norm(x64, 3, g3s, g3b, np.float64(np.float32(1e-3)))
    nodes += [helper.make_node("GroupNormalization", ["bn", "gn1.weight", "gn1.bias"], ["gn1"], name="gn1", num_groups=1),
              helper.make_node("GroupNormalization", ["x", "gn3.weight", "gn3.bias"], ["gn3"], name="gn3", num_groups=3,
                               epsilon=1e-3)]
    # an MLP over a constant table (Swin V2's continuous position bias), folded, added to x
    table, w1, w2 = rand(3, 6, 2), rand(2, 5), rand(5, 6)
    bias_table = 1 / (1 + np.exp(-(np.maximum(table.astype(np.float64) @ w1, 0) @ w2)))
    nodes += [helper.make_node("MatMul", ["table", "cpb.w1"], ["t1"], name="cpb1"),
              helper.make_node("Relu", ["t1"], ["t1r"], name="cpb_relu"),
              helper.make_node("MatMul", ["t1r", "cpb.w2"], ["t2"], name="cpb2"),
              helper.make_node("Sigmoid", ["t2"], ["t2s"], name="cpb_sigmoid"),
              helper.make_node("Add", ["x", "t2s"], ["biased"], name="biased")]
    save("exporter18", nodes, [("x", x)], [("y", y), ("m", m), ("z", z), ("gn1", gn1), ("gn3", gn3),
                                         ("biased", x64 + bias_table)],
         [init("bn.weight", scale), init("bn.bias", bias), init("bn.running_mean", mean), init("bn.running_var", var),
          init("gn1.weight", g1s), init("gn1.bias", g1b), init("gn3.weight", g3s), init("gn3.bias", g3b),
          init("table", table), init("cpb.w1", w1), init("cpb.w2", w2)], opset=18)


# ---- InstanceNormalization as style-transfer networks write it: after a convolution (held
# channels-last), and over a sequence (N, C, L) ----

def instance_norm(a, scale, bias, eps):
    axes = tuple(range(2, a.ndim))
    mean = a.mean(axis=axes, keepdims=True)
    var = a.var(axis=axes, keepdims=True)
    shape = (1, -1) + (1,) * (a.ndim - 2)
    return (a - mean) / np.sqrt(var + eps) * scale.reshape(shape) + bias.reshape(shape)


def instnorm():
    x = rand(2, 3, 4, 5)
    w = rand(4, 3, 3, 3)
    s1, b1 = rand(4) + 1.5, rand(4)
    s2, b2 = rand(3) + 1.5, rand(3)
    c = conv2d(x, w, pad=(1, 1))
    y1 = instance_norm(c, s1.astype(np.float64), b1.astype(np.float64), np.float64(np.float32(1e-3)))
    y2 = instance_norm(x.astype(np.float64).reshape(2, 3, 20), s2.astype(np.float64), b2.astype(np.float64), 1e-5)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("InstanceNormalization", ["c", "in1.weight", "in1.bias"], ["y1"], name="in1", epsilon=1e-3),
        helper.make_node("Constant", [], ["seq"], name="seq", value=helper.make_tensor("seq_v", TensorProto.INT64, [3], [2, 3, 20])),
        helper.make_node("Reshape", ["x", "seq"], ["xs"], name="as_sequence"),
        helper.make_node("InstanceNormalization", ["xs", "in2.weight", "in2.bias"], ["y2"], name="in2"),
    ]
    save("instnorm", nodes, [("x", x)], [("y1", y1), ("y2", y2)],
         [init("w", w), init("in1.weight", s1), init("in1.bias", b1), init("in2.weight", s2), init("in2.bias", b2)])


# ---- older files' resizing: Upsample of opset 9 (scales an input) and Resize of opset 10 (X,
# scales), both asymmetric, nearest rounding down ----

def legacy_resize():
    x = rand(2, 3, 4, 6)
    x64 = x.astype(np.float64)
    near = x64.repeat(2, axis=2).repeat(2, axis=3)
    lin = resize_linear(x, (8, 9), "asymmetric", scales=[1, 1, 2, 1.5])
    for opset, op in ((9, "Upsample"), (10, "Resize")):
        cst = lambda n, v: helper.make_node("Constant", [], [n], name=n, value=helper.make_tensor(n + "_v", TensorProto.FLOAT, [4], v))
        nodes = [
            cst("s_near", [1, 1, 2, 2]), cst("s_lin", [1, 1, 2, 1.5]),
            helper.make_node(op, ["x", "s_near"], ["near"], name="near", mode="nearest"),
            helper.make_node(op, ["x", "s_lin"], ["lin"], name="lin", mode="linear"),
        ]
        save(f"{op.lower()}{opset}", nodes, [("x", x)], [("near", near), ("lin", lin)], [], opset=opset)


# ---- resizing and padding as segmentation networks and exporters write them: Resize linear by
# sizes and by scales in each coordinate mode (of a convolution's output, which tocha holds
# channels-last, and of the input), a Pad of zeros before an AveragePool (PyTorch's
# AvgPool2d(count_include_pad=True)) and before a Conv, a Pad of nothing, a Conv and a MaxPool
# padded more on one side (TensorFlow's SAME), Pads in every mode (reflect of the channels-last
# conv output, edge and wrap over several dimensions, a crop with a fill value) ----

def source_coordinates(mode, n_in, n_out, s):
    """Each output index's source coordinate along an axis by ONNX's coordinate_transformation_mode
    (s: the axis's scale, out / in unless given), not clamped."""
    o = np.arange(n_out, dtype=np.float64)
    if mode == "align_corners":
        return o * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros(n_out)
    if mode == "asymmetric":
        return o / s
    if mode == "pytorch_half_pixel" and n_out == 1:
        return np.zeros(1)
    return (o + 0.5) / s - 0.5


def resize_linear(a, size, mode, scales=None):
    """ONNX's Resize(mode="linear") over H and W, one axis at a time (bilinear is separable):
    source coordinate by the coordinate transformation mode, clamped to [0, in - 1], its two
    neighbours weighted linearly."""
    a = a.astype(np.float64)
    for axis, n_out in ((2, size[0]), (3, size[1])):
        n_in = a.shape[axis]
        src = source_coordinates(mode, n_in, n_out, scales[axis] if scales is not None else n_out / n_in)
        src = np.clip(src, 0, n_in - 1)
        i0 = np.floor(src).astype(np.int64)
        i1 = np.minimum(i0 + 1, n_in - 1)
        shape = [1, 1, 1, 1]
        shape[axis] = n_out
        lam = (src - i0).reshape(shape)
        a = np.take(a, i0, axis=axis) * (1 - lam) + np.take(a, i1, axis=axis) * lam
    return a


def resize_cubic(a, size, mode, coeff=-0.75, scales=None):
    """ONNX's Resize(mode="cubic", exclude_outside=0) over H and W, one axis at a time: source
    coordinate by the coordinate transformation mode, not clamped, the four inputs around it
    (indices clamped: the edge repeated) weighted by Keys' cubic convolution of coefficient coeff."""
    def keys(d):
        d = np.abs(d)
        near = ((coeff + 2) * d - (coeff + 3)) * d * d + 1
        far = ((coeff * d - 5 * coeff) * d + 8 * coeff) * d - 4 * coeff
        return np.where(d <= 1, near, np.where(d < 2, far, 0.0))
    a = a.astype(np.float64)
    for axis, n_out in ((2, size[0]), (3, size[1])):
        n_in = a.shape[axis]
        src = source_coordinates(mode, n_in, n_out, scales[axis] if scales is not None else n_out / n_in)
        f = np.floor(src).astype(np.int64)
        shape = [1, 1, 1, 1]
        shape[axis] = n_out
        out = 0
        for k in range(-1, 3):
            w = keys(src - (f + k)).reshape(shape)
            out = out + np.take(a, np.clip(f + k, 0, n_in - 1), axis=axis) * w
        a = out
    return a


def avg_pool_include_pad(x, k, pad):
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, w = xp.shape
    y = np.zeros((n, c, h - k + 1, w - k + 1))
    for i in range(k):
        for j in range(k):
            y += xp[:, :, i:i + h - k + 1, j:j + w - k + 1]
    return y / (k * k)


def resize_pad():
    x = rand(2, 3, 5, 7)
    w = rand(6, 3, 1, 1)
    w2 = rand(4, 3, 3, 3)
    c = conv2d(x, w)                                                    # [2, 6, 5, 7]
    up = resize_linear(c, (9, 11), "half_pixel")
    pooled = avg_pool_include_pad(up, 3, 1)
    padded_conv = conv2d(x, w2, pad=(1, 1))
    scaled = resize_linear(x, (7, 4), "asymmetric", scales=[1, 1, 1.5, 0.6])
    corners = resize_linear(c, (8, 3), "align_corners")
    single = resize_linear(x, (1, 4), "pytorch_half_pixel")
    cubic_up = resize_cubic(c, (9, 11), "half_pixel")
    cubic_scaled = resize_cubic(x, (7, 4), "pytorch_half_pixel", coeff=-0.5, scales=[1, 1, 1.5, 0.6])
    plain = np.maximum(x.astype(np.float64), 0)
    x64 = x.astype(np.float64)
    lopsided = conv2d(np.pad(x64, ((0, 0), (0, 0), (0, 1), (0, 2))), w2)       # Conv pads [0, 0, 1, 2]
    # MaxPool 3x3 stride 2, auto_pad SAME_UPPER on 5 x 7: totals 2 and 2... and 3 x 3 on W 7 -> 1 before, 1 after;
    # kernel 2 x 2 stride 2: H 5 -> total 1 (after), W 7 -> total 1 (after)
    mp_in = np.pad(c, ((0, 0), (0, 0), (0, 1), (0, 1)), constant_values=-np.inf)
    same_max = mp_in.reshape(2, 6, 3, 2, 4, 2).max(axis=(3, 5))
    mirror = np.pad(c, ((0, 0), (0, 0), (2, 1), (3, 0)), mode="reflect")      # of the channels-last conv output
    edge = np.pad(x64, ((0, 0), (1, 0), (0, 2), (1, 1)), mode="edge")
    wrap = np.pad(x64, ((0, 0), (0, 0), (2, 2), (3, 1)), mode="wrap")
    cropped = np.pad(x64[:, :, 1:, :-2], ((0, 1), (0, 0), (0, 0), (0, 0)), constant_values=1.5)  # pads -1 and -2 crop
    i64, f32 = TensorProto.INT64, TensorProto.FLOAT
    cst = lambda n, t, dims, v: helper.make_node("Constant", [], [n], name=n, value=helper.make_tensor(n + "_v", t, dims, v))
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        cst("size_up", i64, [4], [2, 6, 9, 11]),
        helper.make_node("Resize", ["c", "", "", "size_up"], ["up"], name="up", mode="linear",
                         coordinate_transformation_mode="half_pixel"),
        cst("pads1", i64, [8], [0, 0, 1, 1, 0, 0, 1, 1]),
        helper.make_node("Pad", ["up", "pads1"], ["up_padded"], name="pool_pad", mode="constant"),
        helper.make_node("AveragePool", ["up_padded"], ["pooled"], name="pool", kernel_shape=[3, 3]),
        cst("pads2", i64, [8], [0, 0, 1, 1, 0, 0, 1, 1]),
        cst("zero", f32, [], [0.0]),
        helper.make_node("Pad", ["x", "pads2", "zero"], ["x_padded"], name="conv_pad"),
        helper.make_node("Conv", ["x_padded", "w2"], ["padded_conv"], name="conv2"),
        cst("scales", f32, [4], [1, 1, 1.5, 0.6]),
        helper.make_node("Resize", ["x", "", "scales"], ["scaled"], name="scaled", mode="linear",
                         coordinate_transformation_mode="asymmetric"),
        cst("size_corners", i64, [4], [2, 6, 8, 3]),
        helper.make_node("Resize", ["c", "", "", "size_corners"], ["corners"], name="corners", mode="linear",
                         coordinate_transformation_mode="align_corners"),
        cst("size_single", i64, [4], [2, 3, 1, 4]),
        helper.make_node("Resize", ["x", "", "", "size_single"], ["single"], name="single", mode="linear",
                         coordinate_transformation_mode="pytorch_half_pixel"),
        helper.make_node("Resize", ["c", "", "", "size_up"], ["cubic_up"], name="cubic_up", mode="cubic"),
        helper.make_node("Resize", ["x", "", "scales"], ["cubic_scaled"], name="cubic_scaled", mode="cubic",
                         cubic_coeff_a=-0.5, coordinate_transformation_mode="pytorch_half_pixel"),
        cst("pads0", i64, [8], [0] * 8),
        helper.make_node("Pad", ["x", "pads0"], ["x_same"], name="no_pad"),
        helper.make_node("Relu", ["x_same"], ["plain"], name="relu"),
        helper.make_node("Conv", ["x", "w2"], ["lopsided"], name="lopsided", pads=[0, 0, 1, 2]),
        helper.make_node("MaxPool", ["c"], ["same_max"], name="same_max", kernel_shape=[2, 2], strides=[2, 2],
                         auto_pad="SAME_UPPER"),
        cst("pads_mirror", i64, [8], [0, 0, 2, 3, 0, 0, 1, 0]),
        helper.make_node("Pad", ["c", "pads_mirror"], ["mirror"], name="mirror", mode="reflect"),
        cst("pads_edge", i64, [8], [0, 1, 0, 1, 0, 0, 2, 1]),
        helper.make_node("Pad", ["x", "pads_edge"], ["edge"], name="edge", mode="edge"),
        cst("pads_wrap", i64, [8], [0, 0, 2, 3, 0, 0, 2, 1]),
        helper.make_node("Pad", ["x", "pads_wrap"], ["wrap"], name="wrap", mode="wrap"),
        cst("pads_crop", i64, [8], [0, 0, -1, 0, 1, 0, 0, -2]),
        cst("fill", f32, [], [1.5]),
        helper.make_node("Pad", ["x", "pads_crop", "fill"], ["cropped"], name="crop"),
    ]
    save("resize_pad", nodes, [("x", x)], [("pooled", pooled), ("padded_conv", padded_conv), ("scaled", scaled),
                                           ("corners", corners), ("single", single), ("plain", plain),
                                           ("lopsided", lopsided), ("same_max", same_max), ("mirror", mirror),
                                           ("edge", edge), ("wrap", wrap), ("cropped", cropped),
                                           ("cubic_up", cubic_up), ("cubic_scaled", cubic_scaled)],
         [init("w", w), init("w2", w2)], opset=19)


# ---- windowed attention's constants as PyTorch exports Swin's: a relative position bias
# gathered from an initializer by a constant index table of two dimensions and transposed, a
# mask built by ScatterND into ConstantOfShape, sliced backwards, differenced by broadcasting,
# compared and selected by Where, all folded at import and added to computed tensors; Pow of
# constants; shape arithmetic through an empty slice; a Dropout whose mask nobody reads ----

def windows():
    x = rand(2, 4, 4, 4)
    table = rand(9, 4)
    idx = rng.integers(0, 9, size=(4, 4))
    bias = table[idx].transpose(2, 0, 1).astype(np.float64)            # [4, 4, 4]
    m = np.zeros((4, 4))
    m[0, 1], m[2, 3] = 1.0, 2.0
    m = m[::-1]
    diff = m[None, :, :] - m[:, None, :]                                # [4, 4, 4]
    mask = np.where(diff == 0, 0.0, -100.0)
    x64 = x.astype(np.float64)
    y = (x64 + bias) * 2.0 ** 3 + mask
    flat = x64.reshape(2, 64)
    i64, f32 = TensorProto.INT64, TensorProto.FLOAT
    cst = lambda n, t, dims, v: helper.make_node("Constant", [], [n], name=n, value=helper.make_tensor(n + "_v", t, dims, v))
    nodes = [
        cst("idx", i64, [4, 4], idx.flatten().tolist()),
        helper.make_node("Gather", ["table", "idx"], ["rel"], name="gather_bias", axis=0),
        helper.make_node("Transpose", ["rel"], ["bias"], name="bias_heads", perm=[2, 0, 1]),
        helper.make_node("Add", ["x", "bias"], ["xb"], name="add_bias"),
        cst("two", f32, [], [2.0]), cst("three", f32, [1], [3.0]),
        helper.make_node("Pow", ["two", "three"], ["eight"], name="pow_const"),
        helper.make_node("Mul", ["xb", "eight"], ["x8"], name="scale"),
        cst("mshape", i64, [2], [4, 4]),
        helper.make_node("ConstantOfShape", ["mshape"], ["zeros"], name="zeros",
                         value=helper.make_tensor("zv", f32, [1], [0.0])),
        cst("where_idx", i64, [2, 2], [0, 1, 2, 3]), cst("upd", f32, [2], [1.0, 2.0]),
        helper.make_node("ScatterND", ["zeros", "where_idx", "upd"], ["marked"], name="scatter"),
        cst("s_start", i64, [1], [-1]), cst("s_end", i64, [1], [-2 ** 63]), cst("s_axis", i64, [1], [0]),
        cst("s_step", i64, [1], [-1]),
        helper.make_node("Slice", ["marked", "s_start", "s_end", "s_axis", "s_step"], ["flipped"], name="flip"),
        cst("ax0", i64, [1], [0]), cst("ax1", i64, [1], [1]),
        helper.make_node("Unsqueeze", ["flipped", "ax0"], ["m_row"], name="m_row"),
        helper.make_node("Unsqueeze", ["flipped", "ax1"], ["m_col"], name="m_col"),
        helper.make_node("Sub", ["m_row", "m_col"], ["diff"], name="diff"),
        cst("zero", f32, [], [0.0]), cst("minus", f32, [], [-100.0]),
        helper.make_node("Equal", ["diff", "zero"], ["same"], name="same"),
        helper.make_node("Where", ["same", "zero", "minus"], ["mask"], name="mask"),
        helper.make_node("Add", ["x8", "mask"], ["y"], name="masked"),
        helper.make_node("Shape", ["x"], ["shp"], name="shape"),
        cst("e_start", i64, [1], [4]), cst("e_end", i64, [1], [2 ** 63 - 1]),
        helper.make_node("Slice", ["shp", "e_start", "e_end"], ["nothing"], name="empty_slice"),
        cst("flat_shape", i64, [2], [2, 64]),
        helper.make_node("Concat", ["flat_shape", "nothing"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat_r"], name="flat"),
        helper.make_node("Dropout", ["flat_r"], ["flat", "unread_mask"], name="drop"),
    ]
    save("windows", nodes, [("x", x)], [("y", y), ("flat", flat)], [init("table", table)])


# ---- Einsum as attention's exporters write it (MaxViT's): "bhid,bhjd->bhij", "bhij,bhjd->bhid"
# and a product of transposes, spaces in the equation ----

def einsum():
    x = rand(2, 3, 4, 5)
    x64 = x.astype(np.float64)
    y = x64 * x64
    e1 = np.einsum("bhid,bhjd->bhij", x64, y)
    e2 = np.einsum("bhij,bhjd->bhid", e1, x64)
    e3 = np.einsum("bhdi,bhdj->bhij", x64, y)
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["y"], name="square"),
        helper.make_node("Einsum", ["x", "y"], ["e1"], name="scores", equation="bhid,bhjd->bhij"),
        helper.make_node("Einsum", ["e1", "x"], ["e2"], name="mix", equation="bhij,bhjd->bhid"),
        helper.make_node("Einsum", ["x", "y"], ["e3"], name="gram", equation="b h d i , b h d j -> b h i j"),
    ]
    save("einsum", nodes, [("x", x)], [("e1", e1), ("e2", e2), ("e3", e3)], [])


# ---- a transformer block as exporters write one: LayerNorm, q, k and v by MatMul with
# initializers, heads by Reshape and Transpose, q k^T and p v as products of computed tensors
# (MatMul of two computed values), the scale a Div, Softmax over the keys, the heads joined
# back, the projection and a residual Add ----

def attention():
    b, l, d, h = 2, 5, 8, 2
    x = rand(b, l, d)
    g, beta = rand(d, low=0.5, high=1.5), rand(d)
    wq, wk, wv, wo = (rand(d, d) for _ in range(4))
    x64 = x.astype(np.float64)
    mu = x64.mean(-1, keepdims=True)
    ln = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + beta
    heads = lambda t: t.reshape(b, l, h, d // h).transpose(0, 2, 1, 3)
    q, k, v = heads(ln @ wq), heads(ln @ wk), heads(ln @ wv)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d // h)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = (p @ v).transpose(0, 2, 1, 3).reshape(b, l, d)
    y = o @ wo + x64
    i64, f32 = TensorProto.INT64, TensorProto.FLOAT
    cst = lambda n, t, dims, v: helper.make_node("Constant", [], [n], name=n, value=helper.make_tensor(n + "_v", t, dims, v))
    nodes = [
        helper.make_node("LayerNormalization", ["x", "ln.weight", "ln.bias"], ["ln"], name="ln", axis=-1, epsilon=1e-5),
        cst("heads", i64, [4], [b, l, h, d // h]),
        cst("joined", i64, [3], [b, l, d]),
        cst("scale", f32, [], [float(np.sqrt(d // h))]),
    ]
    for name in ("q", "k", "v"):
        nodes += [
            helper.make_node("MatMul", ["ln", f"w{name}"], [f"{name}_flat"], name=f"{name}_proj"),
            helper.make_node("Reshape", [f"{name}_flat", "heads"], [f"{name}_split"], name=f"{name}_heads"),
            helper.make_node("Transpose", [f"{name}_split"], [name], name=f"{name}_t", perm=[0, 2, 1, 3]),
        ]
    nodes += [
        helper.make_node("Transpose", ["k"], ["kt"], name="k_transposed", perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="q_kt"),
        helper.make_node("Div", ["scores", "scale"], ["scaled"], name="scaled"),
        helper.make_node("Softmax", ["scaled"], ["p"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["o"], name="p_v"),
        helper.make_node("Transpose", ["o"], ["o_t"], name="o_t", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["o_t", "joined"], ["o_flat"], name="o_join"),
        helper.make_node("MatMul", ["o_flat", "wo"], ["proj"], name="out_proj"),
        helper.make_node("Add", ["proj", "x"], ["y"], name="residual"),
    ]
    # the MLP as PyTorch exports nn.Linear on tokens (MatMul, then Add of the bias) and nn.GELU
    # before opset 20 (x * (1 + erf(x / sqrt 2)) * 0.5, its constants Constant nodes); then a
    # classifier on the mean token: Gemm (transB) and Relu
    w1, b1, w2, b2 = rand(d, 2 * d), rand(2 * d), rand(2 * d, d), rand(d)
    wc, bc = rand(3, d), rand(3)
    erf = np.vectorize(math.erf)
    u = y @ w1 + b1
    y2 = (u * (1 + erf(u / math.sqrt(2))) * 0.5) @ w2 + b2 + y
    cls = np.maximum(y2.mean(1) @ wc.T.astype(np.float64) + bc, 0)
    nodes += [
        cst("sqrt2", f32, [], [math.sqrt(2)]), cst("one", f32, [], [1.0]), cst("half", f32, [], [0.5]),
        helper.make_node("MatMul", ["y", "w1"], ["fc1_mm"], name="fc1_mm"),
        helper.make_node("Add", ["fc1_mm", "b1"], ["u"], name="fc1_bias"),
        helper.make_node("Div", ["u", "sqrt2"], ["u_scaled"], name="gelu_div"),
        helper.make_node("Erf", ["u_scaled"], ["u_erf"], name="gelu_erf"),
        helper.make_node("Add", ["u_erf", "one"], ["u_plus"], name="gelu_add"),
        helper.make_node("Mul", ["u", "u_plus"], ["u_times"], name="gelu_mul"),
        helper.make_node("Mul", ["u_times", "half"], ["act"], name="gelu_half"),
        helper.make_node("MatMul", ["act", "w2"], ["fc2_mm"], name="fc2_mm"),
        helper.make_node("Add", ["fc2_mm", "b2"], ["fc2"], name="fc2_bias"),
        helper.make_node("Add", ["fc2", "y"], ["y2"], name="mlp_residual"),
        helper.make_node("ReduceMean", ["y2"], ["pooled"], name="pool", axes=[1], keepdims=0),
        helper.make_node("Gemm", ["pooled", "wc", "bc"], ["logits"], name="classifier", transB=1),
        helper.make_node("Relu", ["logits"], ["cls"], name="classifier_relu"),
    ]
    inits = [init("ln.weight", g), init("ln.bias", beta), init("wq", wq), init("wk", wk), init("wv", wv), init("wo", wo),
             init("w1", w1), init("b1", b1), init("w2", w2), init("b2", b2), init("wc", wc), init("bc", bc)]
    save("attention", nodes, [("x", x)], [("y2", y2), ("cls", cls)], inits)


# ---- files to refuse ----

def bad():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = init("w", rand(2, 2, 3, 3))

    def write(name, nodes, inits):
        graph = helper.make_graph(nodes, name, [x], [y], inits)
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), f"{OUT}/bad_{name}.onnx")

    write("op", [helper.make_node("Det", ["x"], ["y"], name="mystery")], [])
    write("einsum", [helper.make_node("Einsum", ["x", "x"], ["y"], name="contract", equation="ij,jk->ik")], [])
    write("einsum_diagonal", [helper.make_node("Einsum", ["x", "x"], ["y"], name="diagonal", equation="bcii,bcij->bcij")], [])
    write("pads", [helper.make_node("AveragePool", ["x"], ["y"], name="lopsided", kernel_shape=[3, 3], pads=[0, 0, 1, 1])], [])
    write("pool_indices", [helper.make_node("MaxPool", ["x"], ["p", "i"], name="argmax_pool", kernel_shape=[2, 2]),
                           helper.make_node("Cast", ["i"], ["y"], name="indices_read", to=TensorProto.FLOAT)], [])
    reps = helper.make_node("Constant", [], ["reps"], name="reps", value=helper.make_tensor("reps_v", TensorProto.INT64, [4], [1, 2, 1, 1]))
    write("tile_long", [reps, helper.make_node("Tile", ["x", "reps"], ["y"], name="twice")], [])
    write("blocksize", [helper.make_node("DepthToSpace", ["x"], ["y"], name="shuffle", blocksize=3)], [])
    write("selu", [helper.make_node("Selu", ["x"], ["y"], name="scaled", alpha=2.0)], [])
    seq = helper.make_node("Constant", [], ["seq"], name="seq", value=helper.make_tensor("seq_v", TensorProto.INT64, [3], [1, 2, 16]))
    write("conv1d_weight", [seq, helper.make_node("Reshape", ["x", "seq"], ["x3"], name="as_sequence"),
                            helper.make_node("Conv", ["x3", "w"], ["y"], name="conv1d")], [w])
    write("unknown_input", [helper.make_node("Relu", ["nowhere"], ["y"], name="lost")], [])
    ext = init("w", rand(2, 2, 3, 3))
    ext.ClearField("raw_data")
    ext.data_location = TensorProto.EXTERNAL
    entry = ext.external_data.add()
    entry.key, entry.value = "location", "weights.bin"
    write("external", [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], [ext])
    scale = init("s", rand(4))
    write("axis", [helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="wide", axis=-70368744177665)], [scale])
    tensorless = helper.make_node("Constant", [], ["y"], name="hollow", value=helper.make_tensor("v", TensorProto.FLOAT, [], [1.0]))
    tensorless.attribute[0].ClearField("t")  # its type still says TENSOR
    write("tensorless", [tensorless], [])
    short = init("w", rand(2, 2, 3, 3))
    short.raw_data = short.raw_data[:-4]
    write("short_raw", [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], [short])
    pads = helper.make_node("Constant", [], ["pads"], name="pads",
                            value=helper.make_tensor("pads_v", TensorProto.INT64, [8], [0, 0, 5, 0, 0, 0, 0, 0]))
    write("pad_wrap", [pads, helper.make_node("Pad", ["x", "pads"], ["y"], name="wrap_twice", mode="wrap")], [])
    write("resize_cubic", [helper.make_node("Constant", [], ["sc"], name="sc", value=helper.make_tensor(
        "sc_v", TensorProto.FLOAT, [4], [1, 1, 2, 2])), helper.make_node("Resize", ["x", "", "sc"], ["y"], name="smooth",
                                                                          mode="cubic", exclude_outside=1)], [])
    write("gru_reset", [helper.make_node("GRU", ["x", "w", "w"], ["y"], name="reset_first", hidden_size=2)], [w])
    write("lstm_clip", [helper.make_node("LSTM", ["x", "w", "w"], ["y"], name="clipped", hidden_size=2, clip=3.0)], [w])


def masked():
    """A causal mask as GPT's exporters write it, Where(tril == 0, -inf, scores) before a
    Softmax, and a Where that keeps x where a constant condition holds and fills 0.5 elsewhere."""
    x = rand(2, 2, 4, 4)
    causal = np.tril(np.ones((4, 4), dtype=np.float32)).reshape(1, 1, 4, 4)
    cond = (causal == 0)
    keep = rng.integers(0, 2, size=(1, 2, 1, 4)).astype(bool)
    scores = np.where(cond, -np.inf, x)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    nodes = [helper.make_node("Equal", ["tril", "zero"], ["cond"], name="upper"),
             helper.make_node("Where", ["cond", "ninf", "x"], ["s"], name="mask_future"),
             helper.make_node("Softmax", ["s"], ["y1"], name="attend", axis=-1),
             helper.make_node("Where", ["keep", "x", "half"], ["y2"], name="keep_some")]
    save("masked", nodes, [("x", x)], [("y1", e / e.sum(-1, keepdims=True)), ("y2", np.where(keep, x, 0.5))],
         [init("tril", causal), init("zero", np.array(0.0, dtype=np.float32)),
          init("ninf", np.array(-np.inf, dtype=np.float32)), init("keep", keep), init("half", np.array(0.5, dtype=np.float32))])


def tokens():
    """A text model's front: int64 token ids (negative ones count from the table's end, as
    ONNX's Gather) picking rows of a word table plus a position table, and of a table of
    [2, 3] rows through a Relu; an int64 attention mask made the additive mask; a uint8 image
    and a BOOL mask cast to floats (bytes.onnx); and the files that misuse an integer input."""
    ids = rng.integers(-20, 20, size=(2, 6)).astype(np.int64)
    mask = rng.integers(0, 2, size=(2, 6)).astype(np.int64)
    words, shapes, pos = rand(20, 4), rand(20, 2, 3), rand(6, 4)
    nodes = [helper.make_node("Gather", ["words.weight", "ids"], ["e"], name="words"),
             helper.make_node("Add", ["e", "pos"], ["y1"], name="place"),
             helper.make_node("Gather", ["shapes.weight", "ids"], ["s"], name="shapes", axis=0),
             helper.make_node("Relu", ["s"], ["y2"], name="rectify"),
             # an attention mask as BERT's exporters write it: (1 - mask[:, None, None, :]) * -100
             helper.make_node("Unsqueeze", ["mask", "axes"], ["m4"], name="spread"),
             helper.make_node("Cast", ["m4"], ["mf"], name="as_float", to=TensorProto.FLOAT),
             helper.make_node("Sub", ["one", "mf"], ["keep"], name="invert"),
             helper.make_node("Mul", ["keep", "big"], ["y3"], name="scale")]
    ins = [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 6]),
           helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", 6])]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y1", "y2", "y3")]
    inits = [init("words.weight", words), init("shapes.weight", shapes), init("pos", pos),
             init("axes", np.array([1, 2], dtype=np.int64)), init("one", np.array(1.0, dtype=np.float32)),
             init("big", np.array(-100.0, dtype=np.float32))]
    graph = helper.make_graph(nodes, "tokens", ins, outs, inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), f"{OUT}/tokens.onnx")
    np.save(f"{OUT}/tokens_in1.npy", ids)
    np.save(f"{OUT}/tokens_out1.npy", (words[ids] + pos).astype(np.float64))
    np.save(f"{OUT}/tokens_out2.npy", np.maximum(shapes[ids], 0).astype(np.float64))
    np.save(f"{OUT}/tokens_in2.npy", mask)
    np.save(f"{OUT}/tokens_out3.npy", ((1.0 - mask[:, None, None, :]) * -100.0).astype(np.float64))
    # a uint8 image scaled to [0, 1] and a BOOL mask made floats: u8 inputs, cast
    img = rng.integers(0, 256, size=(2, 3, 4, 4)).astype(np.uint8)
    keep = rng.integers(0, 2, size=(2, 4)).astype(bool)
    nodes = [helper.make_node("Cast", ["img"], ["imgf"], name="image_floats", to=TensorProto.FLOAT),
             helper.make_node("Div", ["imgf", "full"], ["y1"], name="to_unit"),
             helper.make_node("Cast", ["keep"], ["keepf"], name="mask_floats", to=TensorProto.FLOAT),
             helper.make_node("Mul", ["keepf", "gain"], ["y2"], name="weigh")]
    graph = helper.make_graph(nodes, "bytes", [helper.make_tensor_value_info("img", TensorProto.UINT8, ["batch", 3, 4, 4]),
                                               helper.make_tensor_value_info("keep", TensorProto.BOOL, ["batch", 4])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y1", "y2")],
                              [init("full", np.array(255.0, dtype=np.float32)), init("gain", np.array(2.5, dtype=np.float32))])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), f"{OUT}/bytes.onnx")
    np.save(f"{OUT}/bytes_in1.npy", img)
    np.save(f"{OUT}/bytes_in2.npy", keep.astype(np.uint8))
    np.save(f"{OUT}/bytes_out1.npy", (img.astype(np.float32) / np.float32(255)).astype(np.float64))
    np.save(f"{OUT}/bytes_out2.npy", (keep.astype(np.float32) * 2.5).astype(np.float64))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])
    for name, nodes, inputs in [
            ("int_relu", [helper.make_node("Relu", ["ids"], ["y"], name="rectify_ids")], ins[:1]),
            ("gather_axis", [helper.make_node("Gather", ["words.weight", "ids"], ["y"], name="columns", axis=1)], ins[:1]),
            ("gather_float", [helper.make_node("Gather", ["words.weight", "x"], ["y"], name="by_floats")], [x])]:
        graph = helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                  [init("words.weight", words)])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), f"{OUT}/bad_{name}.onnx")


# ---- typed data: initializers in the typed fields (not raw_data), each narrowed or widened as
# ONNX stores it; spec/onnx_spec.lua reads them back ----

def typed():
    T = TensorProto
    inits = [
        helper.make_tensor("f16", T.FLOAT16, [3], [1.5, -2.0, 0.25]),
        helper.make_tensor("bf16", T.BFLOAT16, [3], [1.5, -2.0, 0.25]),
        helper.make_tensor("i8", T.INT8, [2], [-3, 7]),
        helper.make_tensor("u8", T.UINT8, [2], [200, 3]),
        helper.make_tensor("bool", T.BOOL, [3], [1, 0, 1]),
        helper.make_tensor("i32", T.INT32, [2], [-70000, 5]),
        helper.make_tensor("i64", T.INT64, [2, 1], [2 ** 40, -5]),
        helper.make_tensor("f64", T.DOUBLE, [2], [0.1, 2.5]),
        helper.make_tensor("f32", T.FLOAT, [1], [1.25]),
        helper.make_tensor("scalar", T.FLOAT, [], [4.0]),
        helper.make_tensor("empty", T.FLOAT, [0, 3], []),
    ]
    node = helper.make_node("Identity", ["x"], ["y"], name="pass", note=b"a\x00b",
                            sizes=[3, -4], gains=[0.5, 2.0], modes=["up", "down"], gain=1.5, count=-9)
    graph = helper.make_graph([node], "typed", [helper.make_tensor_value_info("x", T.FLOAT, ["n", 2])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [None, 2])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="typed"),
              f"{OUT}/typed.onnx")


# ---- constants an exporter computes in the graph, folded at import: a weight standardisation
# (timm's StdConv2d, BiT and NFNet: a training-mode BatchNormalization of the reshaped weight,
# its running statistics computed and never read), Clip of a constant ("same" padding
# arithmetic), CumSum of a mask of ones projected by a convolution (EdgeNeXt's position
# encoding: a constant a computed op reads), Tile of a constant and of a computed tensor along a
# dimension of size 1 (read by arithmetic, and by a Reshape: written out), ReduceMax of a
# constant ----

def folds():
    x = rand(2, 3, 5, 5)
    w = rand(4, 3, 3, 3)
    gain = rand(4, low=0.5, high=1.5)
    eps = 1e-5
    w64 = w.astype(np.float64).reshape(4, 27)
    ws = (w64 - w64.mean(1, keepdims=True)) / np.sqrt(w64.var(1, keepdims=True) + eps) * gain.astype(np.float64)[:, None]
    y1 = conv2d(x, ws.reshape(4, 3, 3, 3), pad=(1, 1))
    clip = np.clip(np.array([-2.0, 0.5, 3.0, 7.0]), 0.0, 4.0).reshape(1, 4, 1, 1)
    ones = np.ones((1, 5, 5))
    rows = np.cumsum(ones, axis=1)
    back = np.flip(np.cumsum(np.flip(ones, 2), axis=2), 2) - ones           # exclusive, reverse
    pos = (rows * 0.1 + back * 0.01)[:, None]                                 # [1, 1, 5, 5]
    pw, pb = rand(4, 1, 1, 1), rand(4)
    y = y1 + clip + conv2d(pos, pw, pb)
    row = rand(1, 1, 1, 5)
    gap = x.astype(np.float64).mean((2, 3), keepdims=True)
    table = rand(2, 3)
    z = x * np.tile(gap, (1, 1, 5, 5)) + np.tile(row.astype(np.float64), (1, 1, 5, 1)) + table.astype(np.float64).max()
    i64, f32 = TensorProto.INT64, TensorProto.FLOAT
    cst = lambda n, t, dims, v: helper.make_node("Constant", [], [n], name=n, value=helper.make_tensor(n + "_v", t, dims, v))
    nodes = [
        cst("w_flat", i64, [3], [1, 4, 27]),
        helper.make_node("Reshape", ["w", "w_flat"], ["w_r"], name="std/reshape"),
        helper.make_node("ReduceMean", ["w_r"], ["mean0"], name="std/mean", axes=[0, 2], keepdims=0),
        helper.make_node("ReduceMean", ["w_r"], ["mean1"], name="std/mean_kept", axes=[0, 2], keepdims=1),
        helper.make_node("Sub", ["w_r", "mean1"], ["centred"], name="std/centre"),
        helper.make_node("Mul", ["centred", "centred"], ["square"], name="std/square"),
        helper.make_node("ReduceMean", ["square"], ["var0"], name="std/var", axes=[0, 2], keepdims=0),
        helper.make_node("BatchNormalization", ["w_r", "gain", "shift", "mean0", "var0"], ["ws", "run_mean", "run_var"],
                         name="std/bn", epsilon=eps, momentum=1.0, training_mode=1),
        cst("w_shape", i64, [4], [4, 3, 3, 3]),
        helper.make_node("Reshape", ["ws", "w_shape"], ["w_std"], name="std/back"),
        helper.make_node("Conv", ["x", "w_std"], ["y1"], name="std/conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        cst("c_raw", f32, [4], [-2.0, 0.5, 3.0, 7.0]), cst("c_lo", f32, [], [0.0]), cst("c_hi", f32, [], [4.0]),
        helper.make_node("Clip", ["c_raw", "c_lo", "c_hi"], ["c_clip"], name="clip_const"),
        cst("c_shape", i64, [4], [1, 4, 1, 1]),
        helper.make_node("Reshape", ["c_clip", "c_shape"], ["c4"], name="clip_view"),
        helper.make_node("Add", ["y1", "c4"], ["y1c"], name="add_clip"),
        cst("ones", f32, [1, 5, 5], [1.0] * 25), cst("ax1", i64, [], [1]), cst("ax2", i64, [], [2]),
        helper.make_node("CumSum", ["ones", "ax1"], ["rows"], name="cumsum_rows"),
        helper.make_node("CumSum", ["ones", "ax2"], ["back"], name="cumsum_back", exclusive=1, reverse=1),
        cst("tenth", f32, [], [0.1]), cst("hundredth", f32, [], [0.01]),
        helper.make_node("Mul", ["rows", "tenth"], ["rows_s"], name="rows_scale"),
        helper.make_node("Mul", ["back", "hundredth"], ["back_s"], name="back_scale"),
        helper.make_node("Add", ["rows_s", "back_s"], ["pos3"], name="pos_sum"),
        cst("ax_u", i64, [1], [1]),
        helper.make_node("Unsqueeze", ["pos3", "ax_u"], ["pos"], name="pos_4d"),
        helper.make_node("Conv", ["pos", "pw", "pb"], ["pe"], name="pos_proj", kernel_shape=[1, 1]),
        helper.make_node("Add", ["y1c", "pe"], ["y"], name="add_pos"),
        helper.make_node("GlobalAveragePool", ["x"], ["gap"], name="gap"),
        cst("reps", i64, [4], [1, 1, 5, 5]),
        helper.make_node("Tile", ["gap", "reps"], ["gap_t"], name="tile_computed"),
        helper.make_node("Mul", ["x", "gap_t"], ["xg"], name="scale_by_gap"),
        cst("row", f32, [1, 1, 1, 5], row.flatten().tolist()), cst("row_reps", i64, [4], [1, 1, 5, 1]),
        helper.make_node("Tile", ["row", "row_reps"], ["grid"], name="tile_const"),
        helper.make_node("Add", ["xg", "grid"], ["xgg"], name="add_grid"),
        helper.make_node("ReduceMax", ["table"], ["top"], name="max_const", keepdims=0),
        helper.make_node("Add", ["xgg", "top"], ["z"], name="add_top"),
        cst("reps2", i64, [4], [1, 1, 2, 2]), cst("flat12", i64, [2], [2, 12]),
        helper.make_node("Tile", ["gap", "reps2"], ["gap2"], name="tile_then_view"),
        helper.make_node("Reshape", ["gap2", "flat12"], ["tiled"], name="tiled_flat"),
    ]
    nodes += [cst("ax3", i64, [], [3]),
              helper.make_node("CumSum", ["x", "ax3"], ["running"], name="cumsum_computed", exclusive=1, reverse=1)]
    x64 = x.astype(np.float64)
    running = np.flip(np.cumsum(np.flip(x64, 3), axis=3), 3) - x64                 # exclusive, reverse, of x
    tiled = np.tile(gap, (1, 1, 2, 2)).reshape(2, 12)
    save("folds", nodes, [("x", x)], [("y", y), ("z", z), ("tiled", tiled), ("running", running)],
         [init("w", w), init("gain", gain), init("shift", np.zeros(4, np.float32)), init("pw", pw), init("pb", pb),
          init("table", table)])


def onnx_recurrent(kind, x, w, r, b, h0, c0, direction, relu=False):
    """ONNX's LSTM, GRU (linear_before_reset 1) and RNN as its operator page writes them, in the
    file's gate order (LSTM i, o, f, c; GRU z, r, h): Y [T, dirs, B, H], Y_h, Y_c [dirs, B, H]."""
    x = x.astype(np.float64)
    T, batch, _ = x.shape
    dirs, _, hidden = r.shape
    sig = lambda v: 1 / (1 + np.exp(-v))
    y = np.zeros((T, dirs, batch, hidden))
    y_h, y_c = np.zeros((dirs, batch, hidden)), np.zeros((dirs, batch, hidden))
    for d in range(dirs):
        wd, rd = w[d].astype(np.float64), r[d].astype(np.float64)
        wb = b[d, :wd.shape[0]].astype(np.float64) if b is not None else np.zeros(wd.shape[0])
        rb = b[d, wd.shape[0]:].astype(np.float64) if b is not None else np.zeros(wd.shape[0])
        h = h0[d].astype(np.float64) if h0 is not None else np.zeros((batch, hidden))
        c = c0[d].astype(np.float64) if c0 is not None else np.zeros((batch, hidden))
        steps = range(T - 1, -1, -1) if direction == "reverse" or d == 1 else range(T)
        blk = lambda m, k: m[..., k * hidden:(k + 1) * hidden]
        for t in steps:
            xw, hr = x[t] @ wd.T + wb, h @ rd.T + rb
            if kind == "LSTM":
                i, o = sig(blk(xw, 0) + blk(hr, 0)), sig(blk(xw, 1) + blk(hr, 1))
                f, cc = sig(blk(xw, 2) + blk(hr, 2)), np.tanh(blk(xw, 3) + blk(hr, 3))
                c = f * c + i * cc
                h = o * np.tanh(c)
            elif kind == "GRU":
                z, rr = sig(blk(xw, 0) + blk(hr, 0)), sig(blk(xw, 1) + blk(hr, 1))
                hh = np.tanh(blk(xw, 2) + rr * blk(hr, 2))
                h = (1 - z) * hh + z * h
            else:
                a = xw + hr
                h = np.maximum(a, 0) if relu else np.tanh(a)
            y[t, d] = h
        y_h[d], y_c[d] = h, c
    return y, y_h, y_c


def recurrent():
    """A bidirectional LSTM (zero state, with biases) whose two directions are joined into a
    GRU's input (its initial state a constant), then a reverse RNN of ReLU with no bias whose
    initial state is the GRU's last h: PyTorch's export pattern (Transpose, Reshape, Squeeze)."""
    T, batch, feat, h1, h2 = 5, 3, 4, 6, 5
    x = rand(T, batch, feat)
    w1, r1, b1 = rand(2, 4 * h1, feat), rand(2, 4 * h1, h1), rand(2, 8 * h1)
    w2, r2, b2 = rand(1, 3 * h2, 2 * h1), rand(1, 3 * h2, h2), rand(1, 6 * h2)
    g0 = rand(1, batch, h2)
    w3, r3 = rand(1, h2, h2), rand(1, h2, h2)
    y1, y1_h, y1_c = onnx_recurrent("LSTM", x, w1, r1, b1, None, None, "bidirectional")
    seq = y1.transpose(0, 2, 1, 3).reshape(T, batch, 2 * h1)
    y2, y2_h, _ = onnx_recurrent("GRU", seq, w2, r2, b2, g0, None, "forward")
    y3, y3_h, _ = onnx_recurrent("RNN", y2[:, 0], w3, r3, None, y2_h, None, "reverse", relu=True)
    i64 = TensorProto.INT64
    cst = lambda n, dims, v: helper.make_node("Constant", [], [n], name=n, value=helper.make_tensor(n + "_v", i64, dims, v))
    nodes = [
        helper.make_node("LSTM", ["x", "w1", "r1", "b1"], ["y1", "y1_h", "y1_c"], name="lstm", hidden_size=h1,
                         direction="bidirectional"),
        helper.make_node("Transpose", ["y1"], ["y1_t"], name="lstm_join", perm=[0, 2, 1, 3]),
        cst("seq_shape", [3], [T, batch, 2 * h1]),
        helper.make_node("Reshape", ["y1_t", "seq_shape"], ["seq"], name="lstm_flat"),
        helper.make_node("GRU", ["seq", "w2", "r2", "b2", "", "g0"], ["y2", "y2_h"], name="gru", hidden_size=h2,
                         linear_before_reset=1),
        cst("ax1", [1], [1]),
        helper.make_node("Squeeze", ["y2", "ax1"], ["y2_s"], name="gru_squeeze"),
        helper.make_node("RNN", ["y2_s", "w3", "r3", "", "", "y2_h"], ["y3", "y3_h"], name="rnn", hidden_size=h2,
                         direction="reverse", activations=["Relu"]),
    ]
    save("recurrent", nodes, [("x", x)], [("y3", y3), ("y3_h", y3_h), ("y1_h", y1_h), ("y1_c", y1_c)],
         [init("w1", w1), init("r1", r1), init("b1", b1), init("w2", w2), init("r2", r2), init("b2", b2), init("g0", g0),
          init("w3", w3), init("r3", r3)], fixed=True)


typed()
folds()
recurrent()
views()
reductions()
joins()
leaky()
activations()
shuffles()
sequence()
classic()
exporter18()
instnorm()
legacy_resize()
resize_pad()
windows()
einsum()
attention()
resnet18()
residual()
mobile()
neck()
head()
bad()
masked()
tokens()
print("wrote", OUT)
