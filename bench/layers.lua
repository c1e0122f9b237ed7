-- bench/layers.lua: the memory-bound layers on the shapes real networks run: BatchNorm2d
-- (training forward and backward, inference forward), GroupNorm, LayerNorm and RMSNorm,
-- MaxPool2d, AvgPool2d and AdaptiveAvgPool2d, bilinear upsampling, padding (reflect and
-- zeros), Softmax and LogSoftmax, Dropout, Embedding (a word table by token ids), a residual add
-- and a squeeze-and-excitation channel scale (tocha.Broadcast), and the losses cross_entropy
-- and mse with their gradients; forward and, where the op has one, backward; f32 and bf16.
-- Each op is called directly as a user calls it (docs/api.md), its outputs preallocated
-- wherever the call takes them (y, dx, da and db; the parameters' gradients, the losses and the
-- ops' workspaces are allocated by the call itself). Median device time over N launches (two
-- input sets in turn), GB/s of the bytes the case must move (each input read once, each output
-- written once: the `bytes` rule beside each family below, in elements of the dtype unless
-- said), % of the device's copy bandwidth. Each case's results are checked against the same
-- call on sim, on a small shape, before it is timed. bench/layers_torch.py times PyTorch's same
-- layer on each case and writes the report beside this one's.
--   tocha bench/layers.lua [--out DIR] [--launches N] [--only PATTERN]
-- (--only: the families whose name matches one of the comma-separated Lua patterns)
local tocha = require "tocha"
local timing = require "bench.timing"

local opts = timing.arguments(arg, { out = "results/tmp-layers", launches = 30, only = "" })
os.execute("mkdir -p '" .. opts.out .. "'")
local device = tocha.default_device()
print(("benchmark on %s (%s), %d launches each"):format(device.name, device.product, opts.launches))
local copy_gbps = timing.copy_rate(device)

local numel = timing.numel

-- ---- inputs ----

-- A maker of one input set's tensors of dtype dt on dev, the k-th of a set drawn from seed
-- base + k. With via_sim each is drawn on sim and copied, so that the check's two devices hold
-- the same values; for timing each is drawn on dev itself (sim would take minutes to draw a
-- large tensor).
local function maker(dt, dev, base, via_sim)
  local at = via_sim and "sim" or dev
  local function place(t)
    if at == dev then return t end
    local moved = t:to(dev)
    t:free()
    return moved
  end
  local new = {}
  function new.randn(shape, k) return place(tocha.randn(shape, { dtype = dt, device = at, seed = base + k })) end
  function new.rand(shape, k, low, high)
    return place(tocha.rand(shape, { dtype = dt, device = at, seed = base + k, low = low, high = high }))
  end
  function new.empty(shape) return tocha.empty(shape, { dtype = dt, device = dev }) end
  -- i64 class indices 1..classes (1-based, as tocha.loss takes them); high stays half a class
  -- under classes + 1 so that no f32 rounding reaches it.
  function new.classes(shape, k, classes)
    local u = tocha.rand(shape, { device = at, seed = base + k, low = 1, high = classes + 0.5 })
    local t = u:floor():cast("i64")
    return place(t)
  end
  -- A parameter or buffer of a norm: weights and variances positive and near 1.
  function new.param(name, shape, k)
    if name == "weight" or name == "running_var" then return new.rand(shape, k, 0.5, 1.5) end
    return new.randn(shape, k)
  end
  return new
end

-- The tensors of a set, for freeing and for telling apart the ones a call allocated.
local function tensors_of(set, list)
  list = list or {}
  for _, v in pairs(set) do
    if tocha.is_tensor(v) then list[#list + 1] = v elseif type(v) == "table" then tensors_of(v, list) end
  end
  return list
end

-- ---- the families of cases ----
-- Each: name, the PyTorch call layers_torch.py times (text for the CSV), make(dt, x, y) -> op,
-- setup(op, new, x, y) -> a set of inputs and preallocated outputs, one function a pass
-- (forward, backward, or "forward+backward" for a loss, whose call gives both) returning the
-- call's outputs, a bytes rule a pass, and shapes: {x, y or false, small x, small y or false}
-- (small: the check's shape, and the timed one on sim, whose tensors must stay small; rows keep
-- their real length, so that the check runs the kernels' same mapping: a warp or a CTA a row).

-- The arguments of a norm's call: x, its parameters (op:param_names() order), then the rest.
local function norm_args(s, ...)
  local args = { s.x }
  for _, p in ipairs(s.params) do args[#args + 1] = p end
  for i = 1, select("#", ...) do args[#args + 1] = select(i, ...) end
  return args
end

local function norm_setup(op, new, x)
  local s = { x = new.randn(x, 1), y = new.empty(x), dy = new.randn(x, 2), dx = new.empty(x), params = {} }
  local shapes = op:param_shapes({ x }, x)
  for i, name in ipairs(op:param_names()) do s.params[i] = new.param(name, shapes[i], 10 + i) end
  s.forward_args, s.backward_args = norm_args(s, s.y), norm_args(s, s.dy, s.dx)
  return s
end
local function norm_forward(op, s) return { op:forward(unpack(s.forward_args)) } end
local function norm_backward(op, s) return { op:backward(unpack(s.backward_args)) } end

local function pool_setup(op, new, x)
  local out = op:compute_concrete_output_shape({ x })
  return { x = new.randn(x, 1), y = new.empty(out), dy = new.randn(out, 2), dx = new.empty(x) }
end
local function pool_forward(op, s) return { op:forward(s.x, s.y) } end
local function pool_backward(op, s) return { op:backward(s.x, s.dy, s.dx) } end

-- The backward of softmax and dropout reads the forward's output (or draw): setup runs it once.
local function once_setup(op, new, x)
  local s = { x = new.randn(x, 1), y = new.empty(x), dy = new.randn(x, 2), dx = new.empty(x) }
  op:forward(s.x, s.y)
  return s
end
local function softmax_backward(op, s) return { op:backward(s.x, s.y, s.dy, s.dx) } end
local function dropout_backward(op, s) return { op:backward(s.x, s.dy, s.dx) } end

local function broadcast_setup(op, new, a, b)
  local out = op:compute_concrete_output_shape({ a, b })
  return { a = new.randn(a, 1), b = new.randn(b, 2), y = new.empty(out), dy = new.randn(out, 3), da = new.empty(a),
    db = new.empty(b) }
end
local function broadcast_forward(op, s) return { op:forward(s.a, s.b, s.y) } end
local function broadcast_backward(op, s) return { op:backward(s.a, s.b, s.dy, s.da, s.db) } end

local BN_SHAPES = { { { 32, 64, 112, 112 }, false, { 3, 6, 5, 7 }, false }, { { 32, 256, 56, 56 }, false, { 2, 5, 7, 6 }, false },
  { { 32, 1024, 14, 14 }, false, { 2, 9, 4, 4 }, false }, { { 16, 256, 80, 80 }, false, { 3, 4, 6, 5 }, false } }
-- The same, channels-last ([N, H, W, C]; the small ones with whole and partial column tiles).
local BN_NHWC_SHAPES = { { { 32, 112, 112, 64 }, false, { 3, 6, 5, 64 }, false }, { { 32, 56, 56, 256 }, false, { 2, 5, 7, 160 }, false },
  { { 32, 14, 14, 1024 }, false, { 2, 4, 4, 264 }, false }, { { 16, 80, 80, 256 }, false, { 3, 6, 5, 24 }, false } }
local ROW_SHAPES = { { { 8192, 768 }, false, { 3, 768 }, false }, { { 4096, 4096 }, false, { 2, 4096 }, false } }
local LOGIT_SHAPES = { { { 8192, 1000 }, false, { 5, 1000 }, false }, { { 65536, 80 }, false, { 9, 80 }, false },
  { { 4096, 32000 }, false, { 2, 32000 }, false } }
local UNET = { { 8, 128, 128, 128 }, false, { 2, 3, 12, 10 }, false }

-- Bytes rules, functions of (x, y, size, op): n = x's elements, C its channels (dimension 2;
-- the last channels-last),
-- H the normalized size (x's last dimension), nout the pool's output elements.
local function times(k) return function(x, _, sz) return k * numel(x) * sz end end
local function nout(op, x) return numel(op:compute_concrete_output_shape({ x })) end
local function pool_bytes(x, _, sz, op) return (numel(x) + nout(op, x)) * sz end
local function max_pool_bytes(x, _, sz, op) return (2 * numel(x) + nout(op, x)) * sz end
local FAMILIES = {
  { name = "BatchNorm2d train", torch = "F.batch_norm(x, rm, rv, w, b, training=True)",
    make = function(dt, x) return tocha.BatchNorm2d.new(x[2], { dtype = dt }) end,
    setup = norm_setup, forward = norm_forward, backward = norm_backward, shapes = BN_SHAPES,
    -- forward: x, w, b, rm, rv read, y, rm, rv written: 2n + 6C; backward: x, dy, w read, dx,
    -- dw, db written: 3n + 3C (the batch's statistics recomputed from x or kept: C-sized)
    bytes = { forward = function(x, _, sz) return (2 * numel(x) + 6 * x[2]) * sz end,
      backward = function(x, _, sz) return (3 * numel(x) + 3 * x[2]) * sz end } },
  { name = "BatchNorm2d eval", torch = "F.batch_norm(x, rm, rv, w, b, training=False)",
    make = function(dt, x) return tocha.BatchNorm2d.new(x[2], { dtype = dt }):train(false) end,
    setup = norm_setup, forward = norm_forward, shapes = BN_SHAPES,
    -- x, w, b, rm, rv read, y written: 2n + 4C
    bytes = { forward = function(x, _, sz) return (2 * numel(x) + 4 * x[2]) * sz end } },
  { name = "BatchNorm2d train nhwc", torch = "F.batch_norm(x, rm, rv, w, b, training=True), x channels_last",
    make = function(dt, x) return tocha.BatchNorm2d.new(x[4], { dtype = dt, layout = "nhwc" }) end,
    setup = norm_setup, forward = norm_forward, backward = norm_backward, shapes = BN_NHWC_SHAPES,
    bytes = { forward = function(x, _, sz) return (2 * numel(x) + 6 * x[4]) * sz end,
      backward = function(x, _, sz) return (3 * numel(x) + 3 * x[4]) * sz end } },
  { name = "BatchNorm2d eval nhwc", torch = "F.batch_norm(x, rm, rv, w, b, training=False), x channels_last",
    make = function(dt, x) return tocha.BatchNorm2d.new(x[4], { dtype = dt, layout = "nhwc" }):train(false) end,
    setup = norm_setup, forward = norm_forward, shapes = BN_NHWC_SHAPES,
    bytes = { forward = function(x, _, sz) return (2 * numel(x) + 4 * x[4]) * sz end } },
  { name = "GroupNorm 32", torch = "F.group_norm(x, 32, w, b)",
    make = function(dt, x) return tocha.GroupNorm.new(32, x[2], { dtype = dt }) end,
    setup = norm_setup, forward = norm_forward, backward = norm_backward,
    -- the check's groups of 1024 elements or more, as the real ones: a CTA a group, not a warp
    shapes = { { { 8, 256, 64, 64 }, false, { 2, 64, 23, 29 }, false }, { { 8, 512, 32, 32 }, false, { 2, 96, 19, 19 }, false } },
    -- forward: x, w, b read, y written: 2n + 2C; backward: x, dy, w read, dx, dw, db: 3n + 3C
    bytes = { forward = function(x, _, sz) return (2 * numel(x) + 2 * x[2]) * sz end,
      backward = function(x, _, sz) return (3 * numel(x) + 3 * x[2]) * sz end } },
  { name = "LayerNorm", torch = "F.layer_norm(x, (H,), w, b)",
    make = function(dt, x) return tocha.LayerNorm.new({ x[#x] }, { dtype = dt }) end,
    setup = norm_setup, forward = norm_forward, backward = norm_backward, shapes = ROW_SHAPES,
    -- forward: 2n + 2H; backward: x, dy, w read, dx, dw, db written: 3n + 3H
    bytes = { forward = function(x, _, sz) return (2 * numel(x) + 2 * x[#x]) * sz end,
      backward = function(x, _, sz) return (3 * numel(x) + 3 * x[#x]) * sz end } },
  { name = "RMSNorm", torch = "F.rms_norm(x, (H,), w)",
    make = function(dt, x) return tocha.RMSNorm.new({ x[#x] }, { dtype = dt }) end,
    setup = norm_setup, forward = norm_forward, backward = norm_backward, shapes = ROW_SHAPES,
    -- forward: x, w read, y written: 2n + H; backward: x, dy, w read, dx, dw written: 3n + 2H
    bytes = { forward = function(x, _, sz) return (2 * numel(x) + x[#x]) * sz end,
      backward = function(x, _, sz) return (3 * numel(x) + 2 * x[#x]) * sz end } },
  { name = "MaxPool2d 3x3 s2 p1", torch = "F.max_pool2d(x, 3, 2, 1)",
    make = function(dt) return tocha.MaxPool2d.new { kernel_size = 3, stride = 2, padding = 1, dtype = dt } end,
    setup = pool_setup, forward = pool_forward, backward = pool_backward,
    shapes = { { { 32, 64, 112, 112 }, false, { 2, 3, 13, 11 }, false } },
    -- forward: x read, y written: n + nout; backward: x (where each window's maximum is) and dy
    -- read, dx written: 2n + nout (PyTorch reads the forward's i64 indices instead of x)
    bytes = { forward = pool_bytes, backward = max_pool_bytes } },
  { name = "MaxPool2d 2x2", torch = "F.max_pool2d(x, 2)",
    make = function(dt) return tocha.MaxPool2d.new { kernel_size = 2, dtype = dt } end,
    setup = pool_setup, forward = pool_forward, backward = pool_backward, shapes = { UNET },
    bytes = { forward = pool_bytes, backward = max_pool_bytes } },
  { name = "AvgPool2d 2x2", torch = "F.avg_pool2d(x, 2)",
    make = function(dt) return tocha.AvgPool2d.new { kernel_size = 2, dtype = dt } end,
    setup = pool_setup, forward = pool_forward, backward = pool_backward, shapes = { UNET },
    -- backward: dy read, dx written: n + nout (x is not needed)
    bytes = { forward = pool_bytes, backward = pool_bytes } },
  { name = "AdaptiveAvgPool2d 1x1", torch = "F.adaptive_avg_pool2d(x, 1)",
    make = function(dt) return tocha.AdaptiveAvgPool2d.new { output_size = 1, dtype = dt } end,
    setup = pool_setup, forward = pool_forward, backward = pool_backward,
    shapes = { { { 32, 2048, 7, 7 }, false, { 2, 5, 7, 7 }, false }, { { 32, 512, 7, 7 }, false, { 3, 4, 7, 7 }, false } },
    bytes = { forward = pool_bytes, backward = pool_bytes } },
  { name = "UpsampleBilinear2d 2x", torch = "F.interpolate(x, scale_factor=2, mode='bilinear')",
    make = function(dt) return tocha.UpsampleBilinear2d.new { scale = 2, dtype = dt } end,
    setup = pool_setup, forward = pool_forward, backward = pool_backward,
    -- a U-Net decoder's and an FPN's upsampling: forward n + nout, backward nout + n
    shapes = { { { 16, 256, 64, 64 }, false, { 2, 3, 7, 9 }, false }, { { 8, 64, 128, 128 }, false, { 2, 2, 5, 6 }, false } },
    bytes = { forward = pool_bytes, backward = pool_bytes } },
  { name = "UpsampleBilinear2d to 512", torch = "F.interpolate(x, size=(512, 512), mode='bilinear')",
    make = function(dt) return tocha.UpsampleBilinear2d.new { size = 512, dtype = dt } end,
    setup = pool_setup, forward = pool_forward, backward = pool_backward,
    -- a segmentation head's scores to the image's size
    shapes = { { { 8, 21, 64, 64 }, false, { 1, 2, 8, 8 }, false } },
    bytes = { forward = pool_bytes, backward = pool_bytes } },
  { name = "Pad reflect 1", torch = "F.pad(x, (1, 1, 1, 1), mode='reflect')",
    make = function(dt) return tocha.Pad.new({ 1, 1, 1, 1 }, { mode = "reflect", dtype = dt }) end,
    setup = pool_setup, forward = pool_forward, backward = pool_backward,
    -- a generator's residual block: forward n + nout, backward nout + n
    shapes = { { { 8, 256, 64, 64 }, false, { 2, 3, 5, 6 }, false } },
    bytes = { forward = pool_bytes, backward = pool_bytes } },
  { name = "Pad zeros 1", torch = "F.pad(x, (1, 1, 1, 1))",
    make = function(dt) return tocha.Pad.new({ 1, 1, 1, 1 }, { dtype = dt }) end,
    setup = pool_setup, forward = pool_forward, backward = pool_backward,
    shapes = { { { 32, 64, 112, 112 }, false, { 2, 3, 7, 6 }, false } },
    bytes = { forward = pool_bytes, backward = pool_bytes } },
  { name = "Softmax", torch = "torch.softmax(x, -1)",
    make = function(dt) return tocha.Softmax.new(-1, dt) end,
    setup = once_setup, forward = pool_forward, backward = softmax_backward, shapes = LOGIT_SHAPES,
    -- forward: 2n; backward: y, dy read, dx written: 3n
    bytes = { forward = times(2), backward = times(3) } },
  { name = "LogSoftmax", torch = "torch.log_softmax(x, -1)",
    make = function(dt) return tocha.LogSoftmax.new(-1, dt) end,
    setup = once_setup, forward = pool_forward, backward = softmax_backward, shapes = LOGIT_SHAPES,
    bytes = { forward = times(2), backward = times(3) } },
  { name = "Dropout 0.1", torch = "F.dropout(x, 0.1, training=True)",
    make = function(dt) return tocha.Dropout.new(0.1, { seed = 7, dtype = dt }) end,
    setup = once_setup, forward = pool_forward, backward = dropout_backward,
    shapes = { { { 16, 256, 80, 80 }, false, { 2, 3, 8, 8 }, false } },
    -- forward: x read, y written: 2n; backward: dy read, dx written: 2n (tocha draws the mask
    -- again from its seed; PyTorch's forward writes a mask and its backward reads it)
    bytes = { forward = times(2), backward = times(2) } },
  { name = "add residual", torch = "torch.add(a, b, out=y)",
    make = function(dt) return tocha.Broadcast.new("add", dt) end,
    setup = broadcast_setup, forward = broadcast_forward, backward = broadcast_backward,
    shapes = { { { 32, 256, 56, 56 }, { 32, 256, 56, 56 }, { 2, 3, 5, 7 }, { 2, 3, 5, 7 } } },
    -- forward: a, b read, y written: 3n; backward: dy read, da, db written: 3n
    bytes = { forward = times(3), backward = times(3) } },
  { name = "mul channel scale", torch = "torch.mul(x, s, out=y)",
    make = function(dt) return tocha.Broadcast.new("mul", dt) end,
    setup = broadcast_setup, forward = broadcast_forward, backward = broadcast_backward,
    shapes = { { { 32, 256, 56, 56 }, { 32, 256, 1, 1 }, { 2, 3, 5, 7 }, { 2, 3, 1, 1 } } },
    -- forward: x, s read, y written: 2n + NC; backward: x, s, dy read, dx, ds written: 3n + 2NC
    bytes = { forward = function(x, y, sz) return (2 * numel(x) + numel(y)) * sz end,
      backward = function(x, y, sz) return (3 * numel(x) + 2 * numel(y)) * sz end } },
  { name = "Embedding", torch = "F.embedding(ids, w)",
    make = function(dt, _, y) return tocha.Embedding.new(y[1], y[2], { dtype = dt }) end,
    setup = function(op, new, x, y)
      local out = op:compute_concrete_output_shape({ x })
      return { ids = new.classes(x, 1, y[1]), w = new.randn(y, 2), y = new.empty(out), dy = new.randn(out, 3),
        dw = new.empty(y) }
    end,
    forward = function(op, s) return { op:forward(s.ids, s.w, s.y) } end,
    backward = function(op, s) return { op:backward(s.ids, s.w, s.dy, s.dw) } end,
    -- x the ids' shape, y the table's [V, D]: BERT's word table over 32 x 512 tokens, GPT-2's over
    -- 8 x 1024
    shapes = { { { 32, 512 }, { 30522, 768 }, { 2, 7 }, { 50, 16 } }, { { 8, 1024 }, { 50257, 768 }, { 3, 5 }, { 20, 8 } } },
    -- forward: the i64 ids (8 bytes each) and N rows read, N rows written: 8N bytes + 2ND;
    -- backward: ids and dy read, the whole table's gradient written: 8N bytes + ND + VD
    bytes = { forward = function(x, y, sz) return 8 * numel(x) + 2 * numel(x) * y[2] * sz end,
      backward = function(x, y, sz) return 8 * numel(x) + (numel(x) * y[2] + numel(y)) * sz end } },
  { name = "cross_entropy", torch = "F.cross_entropy(x, t) and its gradient",
    make = function() return tocha.loss.cross_entropy end,
    setup = function(_, new, x) return { x = new.randn(x, 1), t = new.classes({ x[1] }, 2, x[2]) } end,
    ["forward+backward"] = function(loss, s) return { loss(s.x, s.t) } end,
    shapes = { { { 8192, 1000 }, { 8192 }, { 5, 1000 }, { 5 } }, { { 65536, 80 }, { 65536 }, { 9, 80 }, { 9 } } },
    -- logits read, dlogits written: 2NC; the i64 targets read: 8N bytes; the loss: 1
    bytes = { ["forward+backward"] = function(x, _, sz) return (2 * numel(x) + 1) * sz + 8 * x[1] end } },
  { name = "mse", torch = "F.mse_loss(x, t) and its gradient",
    make = function() return tocha.loss.mse end,
    setup = function(_, new, x, y) return { x = new.randn(x, 1), t = new.randn(y, 2) } end,
    ["forward+backward"] = function(loss, s) return { loss(s.x, s.t) } end,
    shapes = { { { 16, 256, 80, 80 }, { 16, 256, 80, 80 }, { 2, 3, 5, 7 }, { 2, 3, 5, 7 } } },
    -- x, t read, dx written: 3n; the loss: 1
    bytes = { ["forward+backward"] = function(x, _, sz) return (3 * numel(x) + 1) * sz end } },
}

local PASSES = { "forward", "backward", "forward+backward" }
local DTYPES = { "f32", "bf16" }

-- ---- check and time ----

-- The case's call on device against the same call on sim, on the small shapes.
local function check(family, pass, dt, x, y)
  local want_op, got_op = family.make(dt, x, y), family.make(dt, x, y)
  local want_set = family.setup(want_op, maker(dt, "sim", 0, false), x, y)
  local got_set = family.setup(got_op, maker(dt, device.name, 0, true), x, y)
  local want, got = family[pass](want_op, want_set), family[pass](got_op, got_set)
  for i = 1, #want do
    local r = tocha.compare(got[i]:to("sim"):cast("f64"), want[i]:cast("f64"), { rtol = 1e-2, atol = 1e-2 })
    if not r.ok then
      error(("%s %s %s: output %d: %d elements differ from sim's (max abs %g)"):format(family.name, pass, dt, i, r.mismatched,
        r.max_abs))
    end
  end
  for _, set in ipairs({ want_set, got_set, want, got }) do for _, t in ipairs(tensors_of(set)) do t:free() end end
end

local rows = {}
for _, dt in ipairs(DTYPES) do
  local size = dt == "f32" and 4 or 2
  for _, family in ipairs(FAMILIES) do
    for _, shapes in ipairs(timing.selected(family.name, opts.only) and family.shapes or {}) do
      local x, y, small_x, small_y = shapes[1], shapes[2], shapes[3], shapes[4]
      if device.kind == "sim" then x, y = small_x, small_y end
      for _, pass in ipairs(PASSES) do
        if family[pass] then
          check(family, pass, dt, small_x, small_y)
          local op = family.make(dt, x, y)
          local sets = { family.setup(op, maker(dt, device.name, 100, false), x, y),
            family.setup(op, maker(dt, device.name, 200, false), x, y) }
          local own = tensors_of(sets, {})
          local function owned(t)
            for _, o in ipairs(own) do if o == t then return true end end
            return false
          end
          local bytes = family.bytes[pass](x, y, size, op)
          local call = family[pass]
          local ms = timing.time_launches(device, function(k)
            -- outputs the call allocated itself (parameters' gradients, losses) go back at once
            for _, t in ipairs(call(op, sets[k % 2 + 1])) do if not owned(t) then t:free() end end
          end, opts.launches)
          local gbps = bytes / (ms * 1e6)
          local row = { name = family.name, pass = pass, dtype = dt, x = table.concat(x, "x"),
            y = y and table.concat(y, "x") or "", torch = family.torch, bytes = bytes, ms = ms, gbps = gbps,
            pct_copy = 100 * gbps / copy_gbps }
          rows[#rows + 1] = row
          print(("%-22s %-16s %-5s %-16s %9.4f ms %8.1f GB/s %6.1f%% of copy"):format(family.name, pass, dt, row.x, ms, gbps,
            row.pct_copy))
          for s = 1, 2 do for _, t in ipairs(tensors_of(sets[s])) do t:free() end end
        end
      end
    end
  end
end

timing.write_csv(opts.out .. "/tocha.csv", { "name", "pass", "dtype", "x", "y", "torch", "bytes", "ms", "gbps", "pct_copy" },
  rows)
print("wrote " .. opts.out .. "/tocha.csv")
