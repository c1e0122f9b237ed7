-- tocha.onnx: ONNX networks in. tocha.onnx.load(path [, opts]) reads the file (tocha.onnx.read,
-- libtocha's protobuf-c reader) and builds a tocha.Model of tocha's ops, loaded for a batch
-- size, its parameters the file's initializers.
--
--   local m = tocha.onnx.load("resnet18.onnx", { batch_size = 8 })
--   local logits = m:forward({ x })[1]
--   m.onnx.inputs[1].name, m:parameters()["conv1.weight"]
--
-- Shapes are worked out at import for the batch size: what the file computes from shapes
-- (Shape, Gather, Concat, Unsqueeze, ... feeding a Reshape) folds to constants there, so the
-- model is for that batch size (load the file again for another). Every tensor the network
-- computes has opts.dtype; the file's constants and initializers are cast to it; an int64,
-- int32, uint8 or BOOL input stays an integer input, read only as a Gather's indices (an
-- Embedding), through views and by a Cast to floats. A node whose
-- op type is not in M.OPS, or whose attributes tocha's op does not cover, is refused with its
-- name and type; docs/api.md has the table.
local model = require "tocha.model"
local tensor = require "tocha.tensor"
local device = require "tocha.device"
local errors = require "tocha.errors"
local op_base = require "tocha.op"
local onnx_file = require "tocha.onnx_file"
local fold = require "tocha.onnx_fold"
local raise, show = errors.raise, errors.show

local Elementwise = require("tocha.ops.elementwise").Elementwise
local Broadcast = require("tocha.ops.broadcast").Broadcast
local BroadcastConstant = require("tocha.ops.broadcast_constant").BroadcastConstant
local Conv2d = require("tocha.ops.conv2d").Conv2d
local ConvTranspose2d = require("tocha.ops.conv_transpose2d").ConvTranspose2d
local Linear = require("tocha.ops.linear").Linear
local MatMul = require("tocha.ops.batch_matmul").MatMul
local Constant = require("tocha.ops.constant").Constant
local BatchNorm2d = require("tocha.ops.batch_norm").BatchNorm2d
local LayerNorm = require("tocha.ops.norm").LayerNorm
local GroupNorm = require("tocha.ops.norm").GroupNorm
local pool = require "tocha.ops.pool"
local softmax = require "tocha.ops.softmax"
local views = require "tocha.ops.view"
local ChannelCat = require("tocha.ops.channel_cat").ChannelCat
local ChannelChunk = require("tocha.ops.channel_chunk").ChannelChunk
local Reduce = require("tocha.ops.reduction").Reduce
local Upsample = require("tocha.ops.upsample").UpsampleNearest2dForward
local UpsampleBilinear2d = require("tocha.ops.upsample_bilinear").UpsampleBilinear2d
local Pad = require("tocha.ops.pad").Pad
local Embedding = require("tocha.ops.embedding").Embedding
local Cast = require("tocha.ops.cast").Cast
local CumSum = require("tocha.ops.cumsum").CumSum
local strided = require "tocha.ops.strided"

local M = {}
M.read = onnx_file.read

local C_BOOL = 9 -- (ONNX's TensorProto.BOOL)
local INT_TYPES = { [2] = true, [3] = true, [4] = true, [5] = true, [6] = true, [7] = true, [9] = true, [12] = true,
  [13] = true }
-- Constants past this many elements stay tensors (weights); below it they may be read and
-- folded as Lua values (shapes, axes, scales, a windowed attention's masks and bias tables, a
-- standardised convolution's weight: 2.4 M elements in BiT's ResNet-50).
local FOLD_LIMIT = 2 ^ 22

-- ---- the import's state ----

local Import = {}
Import.__index = Import

function Import:fail(n, message)
  -- (kept for load, which raises it again outside the pcall around each converter)
  self.failure = ("%s: node %s (%s): %s"):format(self.path, show(n.name), n.op_type, message)
  raise(self.failure)
end

-- The value of input i of node n (a record: runtime {node, shape [, layout]} or constant {const
-- = true, shape, values | init}), nil where the input is left out. A runtime record's shape is
-- always ONNX's; with layout "nhwc" its node holds a 4-D value channels-last ([N, H, W, C] for
-- shape [N, C, H, W]): the layout the convolutions run fastest in, kept between the ops that
-- take it (convolutions and what joins them, activations, elementwise arithmetic) and handed
-- to every other op as NCHW (one Permute, made once a value), unless keep.
-- lazy: a convolution still open to fusion is handed out as it is (else it is emitted now).
function Import:input(n, i, lazy, keep)
  local name = n.inputs[i]
  if name == nil or name == "" then return nil end
  local v = self.values[name]
  if not v then self:fail(n, ("input %s is made by no earlier node, initializer or graph input"):format(show(name))) end
  if v.pending and not lazy then self:materialize(v) end
  if v.layout and not keep then return self:in_layout(v, nil) end
  return v
end

-- The record of runtime value v in layout ("nhwc", or nil for ONNX's own): v itself, or a
-- Permute of it (made once a value and layout).
function Import:in_layout(v, layout)
  if v.const or v.layout == layout then return v end
  local key = layout or "nchw"
  v.as = v.as or {}
  if not v.as[key] then
    local s = v.shape
    -- a value of one pixel or one channel lies the same in both layouts: a view
    local same = s[2] == 1 or s[3] * s[4] == 1
    local op = same and views.View.new(layout and { s[1], s[3], s[4], s[2] } or s, { dtype = self.dtype })
      or strided.Permute.new(layout and { 1, 3, 4, 2 } or { 1, 4, 2, 3 }, { dtype = self.dtype })
    local hint = (v.node.name or "x") .. "_" .. key
    local r = self:emit({ name = hint, op_type = "Transpose" }, op, { v }, nil, hint)
    v.as[key] = { node = r.node, shape = v.shape, layout = layout }
  end
  return v.as[key]
end

-- The shape a record's node holds: ONNX's, or channels-last.
local function held_shape(v)
  local s = v.shape
  if v.layout == "nhwc" then return { s[1], s[3], s[4], s[2] } end
  return s
end

-- A constant's record: its shape, its values as a Lua list, its ONNX element type.
local function const(shape, values, onnx_type) return { const = true, shape = shape, values = values, onnx_type = onnx_type } end

-- Constant c as x's held layout reads it, where x is held channels-last and c broadcasts to x
-- without widening it: c's values moved to [1 or N, 1 or H, 1 or W, 1 or C] (a per-channel
-- [C, 1, 1] becomes [1, 1, 1, C]), so that an op of x and c needs no Permute of x; else nil.
function Import:held_constant(n, c, x)
  if x.layout ~= "nhwc" or #c.shape > 4 then return nil end
  local s = { 1, 1, 1, 1 }
  for i = 1, #c.shape do s[4 - #c.shape + i] = c.shape[i] end
  for k = 1, 4 do
    if s[k] ~= 1 and s[k] ~= x.shape[k] then return nil end
  end
  local ok, values = pcall(self.values_of, self, n, c, "constant")
  if not ok then return nil end
  local out = {}
  for a = 0, s[1] - 1 do
    for h = 0, s[3] - 1 do
      for w = 0, s[4] - 1 do
        for ch = 0, s[2] - 1 do out[#out + 1] = values[((a * s[2] + ch) * s[3] + h) * s[4] + w + 1] end
      end
    end
  end
  return const({ s[1], s[3], s[4], s[2] }, out, c.onnx_type or (c.init and c.init.data_type))
end

-- The record of op's node over inputs (all in x's layout), an elementwise op: x's shape and
-- layout.
function Import:emit_like(n, op, inputs, x)
  local r = self:emit(n, op, inputs)
  return { node = r.node, shape = x.shape, layout = x.layout }
end

function Import:needed(n, i, what, keep)
  local v = self:input(n, i, false, keep)
  if not v then self:fail(n, ("input %d (%s) is missing"):format(i, what)) end
  return v
end

-- Input i as a tensor the network computes (keep: in the layout it is held in). A constant
-- there (a position table a convolution projects, a grid tiled over the batch) becomes a
-- Constant node holding it, made once a value and placed after the network's first input.
function Import:runtime(n, i, what, keep)
  local v = self:needed(n, i, what or "x", keep)
  if v.const then
    if not self.anchor then
      self:fail(n, ("input %d (%s) is a constant where tocha's op takes a computed tensor"):format(i, what or "x"))
    end
    v.held = v.held or self:hold(n, v, self.anchor)
    return v.held
  end
  return v
end

-- A Constant node holding constant record v (a scalar as [1]), placed after the record `after`
-- (a model's nodes are made from others; the Constant never reads it).
function Import:hold(n, v, after)
  local shape = { 1 }
  for k, size in ipairs(v.shape) do shape[k] = size end
  local r = self:emit(n, Constant.new(shape, { dtype = self.dtype }), { after }, { constant = v },
    (n.name ~= "" and n.name or n.op_type:lower()) .. "_constant")
  return { node = r.node, shape = r.shape }
end

-- Input i as a constant's Lua values (and the record).
function Import:constant(n, i, what)
  local v = self:needed(n, i, what)
  if not v.const then
    self:fail(n, ("input %d (%s) must be a constant: tocha folds only what the file fixes at import"):format(i, what))
  end
  return self:values_of(n, v, what), v
end

function Import:values_of(n, v, what)
  if v.values then return v.values end
  if v.tensor then -- a fold computed by tensor math, read back where a fold reads it
    if v.tensor:numel() > FOLD_LIMIT then
      self:fail(n, ("%s: a constant of %d elements where tocha reads small ones (shapes, axes)"):format(what, v.tensor:numel()))
    end
    v.values = v.tensor:contiguous():view({ v.tensor:numel() }):tolist()
    return v.values
  end
  if v.lazy then -- a fold computed when first read (a weight's statistics that only a training-mode
    v.values = v.lazy() -- batch norm's unread running outputs take are never computed)
    v.lazy = nil
    return v.values
  end
  if v.from and not v.transpose and not v.scale then -- a constant seen in another shape
    v.values = self:values_of(n, v.from, what)
    return v.values
  end
  if v.init.numel > FOLD_LIMIT then
    self:fail(n, ("%s: a constant of %d elements where tocha reads small ones (shapes, axes)"):format(what, v.init.numel))
  end
  v.values = v.init:values()
  return v.values
end

-- The tocha tensor of a constant, of the model's dtype, for a parameter.
function Import:tensor_of(v, dt)
  dt = dt or self.dtype
  if v.tensor then return v.tensor:cast(dt) end
  if v.from and not v.transpose and not v.scale then return self:tensor_of(v.from, dt):view(v.shape) end -- (a weight read 2-D)
  if v.init and v.init:dtype() then return v.init:to_tensor({ device = self.device, dtype = dt }) end
  local shape = #v.shape > 0 and v.shape or { 1 }
  local values = v.values or self:values_of({ name = "?", op_type = "?" }, v, "constant") -- (a lazy fold)
  local flat = tensor.tensor(values, { dtype = "f64", device = "sim" })
  return flat:view(shape):cast(dt):to(self.device.name)
end

-- The kind of value each attribute the converters read must have (a file may give another).
local ATTRIBUTE_KINDS = {
  auto_pad = "string", pads = "ints", strides = "ints", dilations = "ints", group = "int", output_shape = "ints",
  output_padding = "ints", training_mode = "int", epsilon = "float", transA = "int", transB = "int", alpha = "float",
  beta = "float", approximate = "string", kernel_shape = "ints", ceil_mode = "int", count_include_pad = "int",
  allowzero = "int", axis = "int", axes = "ints", start = "int", ["end"] = "int", to = "int", split = "ints",
  keepdims = "int", min = "float", max = "float", mode = "string", coordinate_transformation_mode = "string",
  nearest_mode = "string", equation = "string", fmod = "int", reduction = "string", antialias = "int",
  exclude_outside = "int", perm = "ints", starts = "ints", ends = "ints", blocksize = "int", size = "int", bias = "float",
  num_groups = "int", noop_with_empty_axes = "int", exclusive = "int", reverse = "int", direction = "string",
  hidden_size = "int", layout = "int", clip = "float", input_forget = "int", linear_before_reset = "int",
  activations = "strings", cubic_coeff_a = "float",
}

local function is_int(v) return type(v) == "number" and v == math.floor(v) and math.abs(v) < 2 ^ 53 end

-- Attribute name of node n (default where the node has none), checked to be of its kind.
function Import:attr(n, name, default)
  local a = n.attributes[name]
  if a == nil then return default end
  local kind = ATTRIBUTE_KINDS[name]
  local fits = kind == "string" and type(a) == "string" or kind == "float" and type(a) == "number"
    or kind == "int" and is_int(a)
  if (kind == "ints" or kind == "strings") and type(a) == "table" and not a.unsupported then
    fits = true
    for _, v in ipairs(a) do fits = fits and (kind == "ints" and is_int(v) or kind == "strings" and type(v) == "string") end
  end
  if not fits then self:fail(n, ("attribute %s: expected %s, got %s"):format(name, kind == "ints" and "a list of integers"
    or kind == "strings" and "a list of strings"
    or kind == "int" and "an integer" or kind == "float" and "a number" or "a string", show(a))) end
  return a
end

-- A unique node name from a hint (an initializer's module path, the ONNX node's name).
function Import:unique(hint)
  local name = tostring(hint):gsub("%s", "_"):gsub("%.%.+", "."):gsub("^%.+", ""):gsub("%.+$", "")
  if name == "" then name = "node" end
  local base, k = name, 1
  while self.names[name] do
    k = k + 1
    name = ("%s_%d"):format(base, k)
  end
  self.names[name] = true
  return name
end

-- The name a layer's node takes: its weight's initializer name without ".weight", so that its
-- parameters keep PyTorch's names; else the ONNX node's name.
function Import:layer_name(n, weight)
  weight = weight and (weight.from or weight)
  local name = weight and weight.init and weight.init.name or ""
  local stem = name:match("^(.+)%.weight$")
  return stem or (n.name ~= "" and n.name) or (n.op_type .. "_" .. n.index)
end

-- The node of op over runtime inputs: shape worked out now (a message names the ONNX node);
-- params: name -> constant record for the parameters to set after load.
function Import:emit(n, op, inputs, params, hint)
  local nodes, shapes = {}, {}
  for i, v in ipairs(inputs) do
    -- an integer input only where the op takes that dtype (an Embedding's indices, a Cast's x, a
    -- view of it), as the model's load checks
    if v.integer and (op.input_dtype and op:input_dtype(i) or op.dtype) ~= v.integer then
      self:fail(n, ("input %d is the integer input %s (%s): tocha reads a computed integer tensor only as the indices of a "
        .. "Gather from a constant table, or cast to floats"):format(i, show(v.node.name), v.integer))
    end
    nodes[i], shapes[i] = v.node, held_shape(v)
  end
  local ok, shape = pcall(op.compute_concrete_output_shape, op, shapes)
  if not ok then self:fail(n, tostring(shape):gsub("^.-: ", "", 1)) end
  local node = model.node(op, unpack(nodes)):named(self:unique(hint or (n.name ~= "" and n.name) or n.op_type))
  for pname, src in pairs(params or {}) do self.params[#self.params + 1] = { node = node, name = pname, src = src } end
  return { node = node, shape = shape }
end

-- The record of g(x, c) for a scalar c (c first where constant_first): one BroadcastConstant
-- launch in x's layout (a scalar lies the same in both).
function Import:scalar_op(n, x, fn, c, constant_first)
  local op = BroadcastConstant.new(fn, { 1 }, { dtype = self.dtype, constant_first = constant_first })
  local r = self:emit(n, op, { x }, { constant = { const = true, shape = { 1 }, values = { c }, onnx_type = 1 } })
  return { node = r.node, shape = x.shape, layout = x.layout }
end

-- ---- fusion: a convolution or a linear layer and what follows it, as one launch ----
--
-- A Conv's output is held open (a record with `pending`, the convolution's plan) while the
-- nodes after it can join its launch: a BatchNormalization (folded into the weight and bias by
-- tocha.nn.fold_batch_norm), an Add of a computed tensor of its shape (the epilogue's residual)
-- and an activation (the epilogue's F), each only where it is the value's one reader, so that
-- no one reads what the fused launch no longer writes. Whatever else reads the value emits the
-- convolution as planned so far. `stage` counts what joined: a record of an earlier stage is
-- one its reader has absorbed, never emitted. A Gemm's or MatMul's Linear is held open the same
-- way (`pending.linear`) for its bias (an Add of a constant), a residual and an activation (a
-- transformer's fc + GELU and proj + x, a head's fc + ReLU).

-- Whether v is an open convolution that the value `name`, read `reads` times in all, lets a
-- reader join (without an activation yet).
function Import:open(v, name, reads)
  return self.fuse and v and v.pending and not v.pending.node and v.stage == v.pending.stage and v.pending.act == "identity"
    and (self.uses[name] or 0) == (reads or 1)
end

-- The record of an open convolution after one more node joined it.
local function joined(v)
  v.pending.stage = v.pending.stage + 1
  return { pending = v.pending, stage = v.pending.stage, shape = v.shape }
end

local reshaped -- x seen with another shape (the shape converters' below)
local expanded -- computed x broadcast to a shape (Expand's and Tile's, below)

-- Emits v's convolution (once) with everything that joined it.
function Import:materialize(v)
  local p = v.pending
  if p.node then v.node = p.node return end
  if v.stage ~= p.stage then error("tocha.onnx: a fused value was read after its reader absorbed it", 0) end
  if p.linear then
    local op = Linear.new(p.in_features, p.out_features, { bias = p.b ~= nil, dtype = self.dtype, activation = p.act,
      residual = p.residual ~= nil })
    local r = self:emit(p.n, op, { p.x, p.residual }, { weight = p.w, bias = p.b }, p.name)
    p.node, v.node = r.node, r.node
    return
  end
  local weight, bias = p.w, p.b
  if p.bn then
    local function t(rec) return self:tensor_of(rec, "f32") end
    local w2, b2 = require("tocha.fusion").fold_batch_norm(t(p.w), p.b and t(p.b) or nil, { weight = t(p.bn.scale),
      bias = t(p.bn.bias), running_mean = t(p.bn.mean), running_var = t(p.bn.var), eps = p.bn.eps })
    weight, bias = { const = true, shape = w2:shape(), tensor = w2 }, { const = true, shape = b2:shape(), tensor = b2 }
  end
  local opts = {}
  for k, o in pairs(p.opts) do opts[k] = o end
  opts.bias, opts.activation, opts.residual = bias ~= nil, p.act, p.residual ~= nil
  local nhwc = not p.lifted and self.nhwc or nil -- (a 1-D convolution's [N, C, 1, L] stays in ONNX's layout)
  opts.layout = nhwc or "nchw"
  local op = Conv2d.new(p.in_channels, p.out_channels, p.kernel, opts)
  local x, residual = self:in_layout(p.x, nhwc), p.residual and self:in_layout(p.residual, nhwc)
  if p.lifted and residual then residual = reshaped(self, p.n, residual, p.lifted.shape4) end
  local r = self:emit(p.n, op, { x, residual }, { weight = weight, bias = bias }, p.name)
  if p.lifted then r = reshaped(self, p.n, { node = r.node, shape = p.lifted.shape4 }, p.lifted.shape3) end
  p.node, v.node, v.layout = r.node, r.node, nhwc
end

function Import:set(n, k, v) if n.outputs[k] and n.outputs[k] ~= "" then self.values[n.outputs[k]] = v end end

local numel = op_base.numel

local function copy(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = v end
  return out
end

-- A 0-based ONNX axis (negative from the end) as a 1-based dimension of rank r; one outside
-- [-r, r - 1] (or [-r, r] with past_end) is refused, naming what.
function Import:axis(n, a, r, what, past_end)
  local top = past_end and r or r - 1
  if a < -r or a > top then self:fail(n, ("%s %d is outside [%d, %d] for %d dimensions"):format(what, a, -r, top, r)) end
  return a < 0 and r + a + 1 or a + 1
end

-- ---- converters: op type -> function(import, node) ----

local OPS = {}

local function pair_pads(self, n, pads, rank)
  pads = pads or {}
  local half = rank - 2
  local p = {}
  for d = 1, half do
    local b, e = pads[d] or 0, pads[d + half] or 0
    if b ~= e then self:fail(n, ("asymmetric padding (pads %s) is not supported"):format(table.concat(pads, ", "))) end
    p[d] = b
  end
  return p
end

-- The pads of a windowed 2-D op before ({top, left}) and after ({bottom, right}) H and W:
-- explicit, or from auto_pad (SAME_UPPER puts an odd total's extra pixel after, SAME_LOWER
-- before).
local function window_sides(self, n, x, k, s, d)
  local auto = self:attr(n, "auto_pad", "NOTSET")
  if auto == "NOTSET" then
    local pads = self:attr(n, "pads") or {}
    if #pads ~= 0 and #pads ~= 4 then self:fail(n, ("pads: expected 4 values, got %d"):format(#pads)) end
    return { pads[1] or 0, pads[2] or 0 }, { pads[3] or 0, pads[4] or 0 }
  end
  if auto == "VALID" then return { 0, 0 }, { 0, 0 } end
  if auto ~= "SAME_UPPER" and auto ~= "SAME_LOWER" then self:fail(n, "auto_pad " .. show(auto) .. " is not ONNX's") end
  local before, after = {}, {}
  for i = 1, 2 do
    local size = x.shape[i + 2]
    local total = math.max((math.ceil(size / s[i]) - 1) * s[i] + (k[i] - 1) * d[i] + 1 - size, 0)
    local small = math.floor(total / 2)
    before[i], after[i] = auto == "SAME_UPPER" and small or total - small, auto == "SAME_UPPER" and total - small or small
  end
  return before, after
end

-- x and the padding {h, w} a windowed op takes for its sides (window_sides, plus those of a Pad
-- folded into it): the op's own padding where the sides are equal and within limit (a pool's:
-- half its kernel; nil for none), else x padded by a Pad op of `fill` first (the part one side
-- has over the other, or, past the limit, all of it). fill nil: such padding is refused.
function Import:window_padding(n, x, before, after, fill, limit)
  if x.unpadded then
    local q = x.pre_pads
    before, after = { before[1] + q[1], before[2] + q[2] }, { after[1] + q[3], after[2] + q[4] }
    x = x.unpadded
  end
  local p, extra, any = {}, { {}, {} }, false
  for i = 1, 2 do
    p[i] = math.min(before[i], after[i])
    if limit and p[i] > limit[i] then p[i] = 0 end
    extra[1][i], extra[2][i] = before[i] - p[i], after[i] - p[i]
    any = any or extra[1][i] ~= 0 or extra[2][i] ~= 0
  end
  if not any then return x, p end
  if fill == nil then
    self:fail(n, ("padding %d, %d before and %d, %d after H and W: tocha pads both sides alike here"):format(before[1],
      before[2], after[1], after[2]))
  end
  local t, l, b, r = extra[1][1], extra[1][2], extra[2][1], extra[2][2]
  local list = x.layout == "nhwc" and { 0, 0, l, r, t, b } or { l, r, t, b }
  local op = Pad.new(list, { value = fill, dtype = self.dtype })
  local hint = { name = (n.name or "x") .. "_pad", op_type = "Pad" }
  local rec = self:emit(hint, op, { x }, nil, hint.name)
  local s = x.shape
  return { node = rec.node, shape = { s[1], s[2], s[3] + t + b, s[4] + l + r }, layout = x.layout }, p
end

local function spatial(self, n, x)
  if #x.shape ~= 4 then self:fail(n, ("tocha's op is 2-D: x has %d dimensions, not 4"):format(#x.shape)) end
end

OPS.Conv = function(self, n)
  local x = self:runtime(n, 1, nil, true)
  spatial(self, n, x)
  local w, b = self:needed(n, 2, "W"), self:input(n, 3)
  if not w.const then self:fail(n, "W must be an initializer") end
  local k = { w.shape[3], w.shape[4] }
  local s, d = self:attr(n, "strides", { 1, 1 }), self:attr(n, "dilations", { 1, 1 })
  local groups = self:attr(n, "group", 1)
  local before, after = window_sides(self, n, x, k, s, d)
  local padding
  x, padding = self:window_padding(n, x, before, after, 0)
  local opts = { stride = s, dilation = d, groups = groups, padding = padding, dtype = self.dtype }
  local plain = Conv2d.new(x.shape[2], w.shape[1], k, opts) -- (NCHW: the shape ONNX gives it)
  local ok, shape = pcall(plain.compute_concrete_output_shape, plain, { x.shape })
  if not ok then self:fail(n, tostring(shape):gsub("^.-: ", "", 1)) end
  -- held open: what reads it may join its launch (Import:materialize emits it)
  local p = { n = n, x = x, w = w, b = b, opts = opts, in_channels = x.shape[2], out_channels = w.shape[1], kernel = k,
    act = "identity", stage = 0, name = self:layer_name(n, w) }
  self:set(n, 1, { pending = p, stage = 0, shape = shape })
end

OPS.ConvTranspose = function(self, n)
  local x = self:runtime(n, 1)
  spatial(self, n, x)
  local w, b = self:needed(n, 2, "W"), self:input(n, 3)
  if not w.const then self:fail(n, "W must be an initializer") end
  if self:attr(n, "output_shape") then self:fail(n, "output_shape is not supported (give pads and output_padding)") end
  if self:attr(n, "auto_pad", "NOTSET") ~= "NOTSET" then self:fail(n, "auto_pad is not supported (give pads)") end
  local groups = self:attr(n, "group", 1)
  local op = ConvTranspose2d.new(x.shape[2], w.shape[2] * groups, { w.shape[3], w.shape[4] },
    { stride = self:attr(n, "strides", { 1, 1 }), dilation = self:attr(n, "dilations", { 1, 1 }), groups = groups,
      padding = pair_pads(self, n, self:attr(n, "pads"), 4), output_padding = self:attr(n, "output_padding", { 0, 0 }),
      bias = b ~= nil, dtype = self.dtype })
  self:set(n, 1, self:emit(n, op, { x }, { weight = w, bias = b }, self:layer_name(n, w)))
end

-- Whether an output of n past the first is read (a statistics or mask output an exporter names
-- and nothing reads is ignored).
function Import:reads_extra_outputs(n)
  for k = 2, #n.outputs do
    if n.outputs[k] ~= "" and (self.uses[n.outputs[k]] or 0) > 0 then return true end
  end
  return false
end

-- A training-mode BatchNormalization of a constant: a weight standardisation (timm's StdConv2d
-- and ScaledStdConv2d: BiT, NFNet), folded (its running statistics' outputs are unread).
-- Computed in f64 by tocha's tensor math on the model's device (a weight is millions of values:
-- too many for Lua lists); the result is held as that tensor.
local function standardised(self, n, x)
  if self:reads_extra_outputs(n) then self:fail(n, "the running statistics' outputs (training mode) are not supported") end
  local scale, bias = self:needed(n, 2, "scale"), self:needed(n, 3, "B")
  local c = x.shape[2]
  for _, v in ipairs({ scale, bias }) do
    if not v.const or numel(v.shape) ~= c then
      self:fail(n, ("scale and B must be constants of one value a channel of X [%s]"):format(table.concat(x.shape, ", ")))
    end
  end
  local rest = numel(x.shape) / (x.shape[1] * c)
  local w = self:tensor_of(x, "f64"):contiguous():view({ x.shape[1], c, rest })
  local mean = w:mean({ 1, 3 }, true)
  local centred = w - mean
  local var = (centred * centred):mean({ 1, 3 }, true)
  local y = centred / (var + self:attr(n, "epsilon", 1e-5)):sqrt() * self:tensor_of(scale, "f64"):view({ 1, c, 1 })
    + self:tensor_of(bias, "f64"):view({ 1, c, 1 })
  return { const = true, shape = copy(x.shape), tensor = y:view(x.shape), onnx_type = 1 }
end

OPS.BatchNormalization = function(self, n)
  local v = self:input(n, 1, true)
  if v and v.const and #v.shape >= 2 and self:attr(n, "training_mode", 0) ~= 0 then return self:set(n, 1, standardised(self, n, v)) end
  local consts = true
  for i = 2, 5 do consts = consts and self:input(n, i) ~= nil and self:input(n, i).const end
  if self:open(v, n.inputs[1]) and not v.pending.linear and not v.pending.bn and not v.pending.residual and consts
      and not self:reads_extra_outputs(n)
      and self:attr(n, "training_mode", 0) == 0 then
    v.pending.bn = { scale = self:input(n, 2), bias = self:input(n, 3), mean = self:input(n, 4), var = self:input(n, 5),
      eps = self:attr(n, "epsilon", 1e-5) }
    return self:set(n, 1, joined(v))
  end
  local x = self:runtime(n, 1, nil, true) -- channels-last stays so: the op takes either layout
  if self:attr(n, "training_mode", 0) ~= 0 then self:fail(n, "training_mode 1 is not supported (export in eval mode)") end
  if self:reads_extra_outputs(n) then self:fail(n, "the running statistics' outputs (training mode) are not supported") end
  local scale, bias = self:needed(n, 2, "scale"), self:needed(n, 3, "B")
  local mean, var = self:needed(n, 4, "input_mean"), self:needed(n, 5, "input_var")
  for _, c in ipairs({ scale, bias, mean, var }) do
    if not c.const then self:fail(n, "its statistics and affine must be initializers") end
  end
  local op = BatchNorm2d.new(x.shape[2], { eps = self:attr(n, "epsilon", 1e-5), dtype = self.dtype, layout = x.layout })
  op:train(false)
  local r = self:emit(n, op, { x }, { weight = scale, bias = bias, running_mean = mean, running_var = var },
    self:layer_name(n, scale))
  self:set(n, 1, { node = r.node, shape = x.shape, layout = x.layout })
end

-- Gemm and MatMul with a constant right operand: tocha.Linear (weight [out, in]).
local function linear(self, n, x, w, transposed, bias, alpha, beta)
  if not w.const or #w.shape ~= 2 then self:fail(n, "the weight must be an initializer of 2 dimensions") end
  local out_f = transposed and w.shape[1] or w.shape[2]
  local in_f = transposed and w.shape[2] or w.shape[1]
  if x.shape[#x.shape] ~= in_f then
    self:fail(n, ("x's last dimension is %d, the weight takes %d"):format(x.shape[#x.shape], in_f))
  end
  if bias and numel(bias.shape) ~= out_f then
    self:fail(n, ("C has %d elements, not one an output (%d)"):format(numel(bias.shape), out_f))
  end
  local weight = { const = true, shape = { out_f, in_f }, from = w, transpose = not transposed, scale = alpha }
  local b = bias and { const = true, shape = { out_f }, from = bias, scale = beta } or nil
  local plain = Linear.new(in_f, out_f, { bias = bias ~= nil, dtype = self.dtype })
  local ok, shape = pcall(plain.compute_concrete_output_shape, plain, { x.shape })
  if not ok then self:fail(n, tostring(shape):gsub("^.-: ", "", 1)) end
  -- held open: an activation after it may join its epilogue (Import:materialize emits it)
  local p = { linear = true, n = n, x = x, w = weight, b = b, in_features = in_f, out_features = out_f,
    name = self:layer_name(n, w), act = "identity", stage = 0 }
  self:set(n, 1, { pending = p, stage = 0, shape = shape })
end

OPS.Gemm = function(self, n)
  local x = self:runtime(n, 1, "A")
  if #x.shape ~= 2 then self:fail(n, "A must have 2 dimensions") end
  if self:attr(n, "transA", 0) ~= 0 then self:fail(n, "transA 1 is not supported") end
  linear(self, n, x, self:needed(n, 2, "B"), self:attr(n, "transB", 0) == 1, self:input(n, 3),
    self:attr(n, "alpha", 1), self:attr(n, "beta", 1))
end

-- MatMul: with B an initializer, a Linear; of two computed tensors (attention's q k^T and p v),
-- a MatMul over the batch dimensions (B's equal to A's, or one matrix).
-- Einsum of two computed tensors that is a batched matrix product: the same batch letters
-- leading both operands and the output, then the product's letters in any placement (A [..., i,
-- k] or [..., k, i], B [..., k, j] or [..., j, k], out [..., i, j]; attention's "bhid,bhjd->bhij"
-- and "bhij,bhjd->bhid"): a MatMul, an operand's last two dimensions swapped by a Permute first
-- where it lies the other way.
OPS.Einsum = function(self, n)
  local eq = (self:attr(n, "equation") or ""):gsub("%s", "")
  local a, b, out = eq:match("^(%a+),(%a+)%->(%a+)$")
  local r = a and #a or 0
  if not a or #b ~= r or #out ~= r or r < 2 or a:sub(1, r - 2) ~= b:sub(1, r - 2) or a:sub(1, r - 2) ~= out:sub(1, r - 2) then
    self:fail(n, ("equation %s: tocha takes batched matrix products (\"bhik,bhkj->bhij\" and its transposes)"):format(show(eq)))
  end
  local i, j = out:sub(r - 1, r - 1), out:sub(r, r)
  local ta, tb = a:sub(r - 1), b:sub(r - 1)
  local k = ta:sub(1, 1) == i and ta:sub(2, 2) or ta:sub(1, 1)
  local ok = i ~= j and k ~= i and k ~= j and (ta == i .. k or ta == k .. i) and (tb == k .. j or tb == j .. k)
  if not ok then
    self:fail(n, ("equation %s: tocha takes batched matrix products (\"bhik,bhkj->bhij\" and its transposes)"):format(show(eq)))
  end
  local x, y = self:runtime(n, 1, "A"), self:runtime(n, 2, "B")
  if #x.shape ~= r or #y.shape ~= r then
    self:fail(n, ("equation %s names %d dimensions an operand; A has %d, B %d"):format(show(eq), r, #x.shape, #y.shape))
  end
  -- x or y with its last two dimensions swapped (a Permute node)
  local function swapped(v, what)
    local dims, shape = {}, {}
    for d = 1, r do dims[d], shape[d] = d, v.shape[d] end
    dims[r - 1], dims[r] = r, r - 1
    shape[r - 1], shape[r] = v.shape[r], v.shape[r - 1]
    local hint = { name = (n.name or "einsum") .. "_" .. what, op_type = "Transpose" }
    return { node = self:emit(hint, strided.Permute.new(dims, { dtype = self.dtype }), { v }, nil, hint.name).node, shape = shape }
  end
  if ta == k .. i then x = swapped(x, "a_t") end
  if tb == j .. k then y = swapped(y, "b_t") end
  local op = MatMul.new(x.shape[r], y.shape[r], { dtype = self.dtype })
  self:set(n, 1, self:emit(n, op, { x, y }))
end

OPS.MatMul = function(self, n)
  local a, b = self:needed(n, 1, "A"), self:needed(n, 2, "B")
  if a.const and b.const then -- (an MLP over a constant table, as Swin V2's position bias)
    local out, shape = fold.matmul(self:values_of(n, a, "A"), a.shape, self:values_of(n, b, "B"), b.shape, 2 ^ 26)
    if not out then self:fail(n, shape) end
    return self:set(n, 1, const(shape, out, 1))
  end
  local x, w = self:runtime(n, 1, "A"), b
  if w.const then return linear(self, n, x, w, false, nil, 1, 1) end
  if #x.shape < 2 or #w.shape < 2 then self:fail(n, "a product of vectors: tocha multiplies matrices (2 or more dimensions)") end
  local op = MatMul.new(x.shape[#x.shape], w.shape[#w.shape], { dtype = self.dtype })
  self:set(n, 1, self:emit(n, op, { x, w }))
end

local UNARY = { Relu = "relu", Sigmoid = "sigmoid", Tanh = "tanh", Exp = "exp", Log = "log", Sqrt = "sqrt", Neg = "neg",
  Abs = "abs", HardSwish = "hardswish", Erf = "erf", Softplus = "softplus", Mish = "mish" }
-- The activations a convolution's epilogue applies (tocha.matmul.ACTIVATIONS).
local EPILOGUE = require("tocha.matmul").ACTIVATIONS

-- The unary functions of constants, folded (an exporter's scale arithmetic: the 1 / sqrt(head
-- size) of scaled dot-product attention as Sqrt of a Cast of a Shape).
local function sigmoid(v) return 1 / (1 + math.exp(-v)) end
local FOLD_UNARY = {
  Relu = function(v) return v > 0 and v or 0 end, Sigmoid = sigmoid, Tanh = math.tanh, Exp = math.exp, Log = math.log,
  Sqrt = math.sqrt, Neg = function(v) return -v end, Abs = math.abs, Reciprocal = function(v) return 1 / v end,
  Floor = math.floor, Ceil = math.ceil, Sin = math.sin, Cos = math.cos,
  Round = function(v) -- halves to even, as ONNX's
    local f = math.floor(v)
    local d = v - f
    if d ~= 0.5 then return math.floor(v + 0.5) end
    return f % 2 == 0 and f or f + 1
  end,
  Sign = function(v) return v > 0 and 1 or v < 0 and -1 or v end,
}

-- Node n's unary function of a constant input, folded; false where the input is computed.
function Import:folded_unary(n)
  local x = self:input(n, 1, true)
  local f = FOLD_UNARY[n.op_type]
  if not (x and x.const and f) then return false end
  local out = {}
  for i, v in ipairs(self:values_of(n, x, "X")) do out[i] = f(v) end
  self:set(n, 1, const(copy(x.shape), out, x.onnx_type or (x.init and x.init.data_type)))
  return true
end

-- y = fn(input 1): folded where input 1 is a constant; joined to an open convolution or linear
-- layer where it can be (its value read `reads` times in all: 1, or the chain's reads where a
-- pattern of several nodes makes fn); else an Elementwise.
local function activation(self, n, fn, reads)
  if self:folded_unary(n) then return end
  local v = self:input(n, 1, true)
  if EPILOGUE[fn] and self:open(v, n.inputs[1], reads) then
    v.pending.act = fn
    return self:set(n, 1, joined(v))
  end
  local x = self:runtime(n, 1, nil, true)
  self:set(n, 1, self:emit_like(n, Elementwise.new(fn, self.dtype), { x }, x))
end

-- Whether Sigmoid node n is half of a SiLU: its one reader is Mul(x, Sigmoid(x)).
function Import:silu_half(n)
  local out = n.outputs[1]
  if (self.uses[out] or 0) ~= 1 then return false end
  local reader = (self.readers[out] or {})[1]
  return reader ~= nil and reader.op_type == "Mul" and #reader.inputs == 2
    and ((reader.inputs[1] == out and reader.inputs[2] == n.inputs[1]) or (reader.inputs[2] == out and reader.inputs[1] == n.inputs[1]))
end

-- Whether Softplus node n starts a Mish as exporters before opset 18 write it: Mul(x,
-- Tanh(Softplus(x))), each of Softplus and Tanh read once.
function Import:mish_start(n)
  local t = self:sole_reader(n.outputs[1], "Tanh")
  local m = t and self:sole_reader(t.outputs[1], "Mul")
  return m ~= nil and #m.inputs == 2 and ((m.inputs[1] == t.outputs[1] and m.inputs[2] == n.inputs[1])
    or (m.inputs[2] == t.outputs[1] and m.inputs[1] == n.inputs[1]))
end

for op_type, fn in pairs(UNARY) do
  OPS[op_type] = function(self, n)
    if op_type == "Sigmoid" and self:silu_half(n) then -- the Mul makes the SiLU
      return self:set(n, 1, { silu_half = true, shape = self:input(n, 1, true).shape })
    end
    if op_type == "Softplus" and self:mish_start(n) then -- the Tanh, then the Mul, make the Mish
      return self:set(n, 1, { mish_part = true, shape = self:input(n, 1, true).shape })
    end
    if op_type == "Tanh" and (self.values[n.inputs[1]] or {}).mish_part then
      return self:set(n, 1, { silu_half = true, mish = true, shape = self.values[n.inputs[1]].shape })
    end
    activation(self, n, fn)
  end
end

-- Elu(alpha), Celu(alpha): Elementwise elu and celu with alpha baked in; Selu with ONNX's
-- default alpha and gamma (PyTorch's constants, as float32) only; in x's layout.
local function with_alpha(fn, default)
  return function(self, n)
    local x = self:runtime(n, 1, nil, true)
    local op = Elementwise.new(fn, self.dtype, nil, { alpha = self:attr(n, "alpha", default) })
    self:set(n, 1, self:emit_like(n, op, { x }, x))
  end
end
OPS.Elu, OPS.Celu = with_alpha("elu", 1), with_alpha("celu", 1)
OPS.Selu = function(self, n)
  local alpha, gamma = self:attr(n, "alpha", 1.6732632), self:attr(n, "gamma", 1.0507010)
  if math.abs(alpha - 1.6732632423543772) > 1e-6 or math.abs(gamma - 1.0507009873554805) > 1e-6 then
    self:fail(n, ("alpha %g and gamma %g: tocha's selu is PyTorch's (1.6733, 1.0507)"):format(alpha, gamma))
  end
  activation(self, n, "selu")
end

-- HardSigmoid: PyTorch's (alpha 1/6, beta 0.5) is Elementwise hardsigmoid (or a convolution's
-- epilogue); other constants (ONNX's default 0.2, Keras's) max(0, min(1, alpha x + beta)) as
-- four BroadcastConstant launches.
OPS.HardSigmoid = function(self, n)
  local alpha, beta = self:attr(n, "alpha", 0.2), self:attr(n, "beta", 0.5)
  if math.abs(alpha - 1 / 6) <= 1e-6 and math.abs(beta - 0.5) <= 1e-6 then return activation(self, n, "hardsigmoid") end
  local x = self:runtime(n, 1, "X", true)
  for _, step in ipairs({ { "mul", alpha }, { "add", beta }, { "max", 0 }, { "min", 1 } }) do
    x = self:scalar_op(n, x, step[1], step[2])
  end
  self:set(n, 1, x)
end

-- LeakyRelu(alpha): Elementwise leaky_relu with alpha as its negative slope (the float the file
-- holds, widened), in x's layout.
OPS.LeakyRelu = function(self, n)
  local x = self:runtime(n, 1, nil, true)
  local op = Elementwise.new("leaky_relu", self.dtype, nil, { negative_slope = self:attr(n, "alpha", 0.01) })
  self:set(n, 1, self:emit_like(n, op, { x }, x))
end

-- Clip: relu6 where it is Clip(0, 6) (MobileNetV2's ReLU6: joins a convolution's epilogue),
-- relu where it is Clip(0, none), else a max then a min against the bounds.
OPS.Clip = function(self, n)
  local low, high
  if self.opset < 11 then
    low, high = self:attr(n, "min", -math.huge), self:attr(n, "max", math.huge)
  else
    low = self:input(n, 2) and self:constant(n, 2, "min")[1] or -math.huge
    high = self:input(n, 3) and self:constant(n, 3, "max")[1] or math.huge
  end
  if self:needed(n, 1, "input").const then -- (an exporter's "same" padding arithmetic)
    local values, rec = self:constant(n, 1, "input")
    local out = {}
    for i, v in ipairs(values) do out[i] = math.min(math.max(v, low), high) end
    return self:set(n, 1, const(copy(rec.shape), out, rec.onnx_type or (rec.init and rec.init.data_type)))
  end
  if low == 0 and high == 6 then return activation(self, n, "relu6") end
  if low == 0 and high == math.huge then return activation(self, n, "relu") end
  local x = self:runtime(n, 1, "input")
  for _, bound in ipairs({ { "max", low, -math.huge }, { "min", high, math.huge } }) do
    if bound[2] ~= bound[3] then
      x = self:scalar_op(n, x, bound[1], bound[2])
    end
  end
  self:set(n, 1, x)
end

OPS.Gelu = function(self, n)
  local approximate = self:attr(n, "approximate", "none")
  if approximate ~= "none" and approximate ~= "tanh" then
    self:fail(n, ("approximate %s: expected \"none\" or \"tanh\""):format(show(approximate)))
  end
  activation(self, n, approximate == "tanh" and "gelu_tanh" or "gelu")
end

-- The number a scalar constant holds (an initializer, or a Constant node's value, converted
-- here if its turn has not come), or nil.
function Import:scalar(name)
  local v = self.values[name]
  local p = self.producer[name]
  if not v and p and p.op_type == "Constant" then
    OPS.Constant(self, p)
    v = self.values[name]
  end
  if not v or not v.const or numel(v.shape) ~= 1 then return nil end
  local ok, values = pcall(self.values_of, self, p or { name = name, op_type = "?" }, v, name)
  return ok and values[1] or nil
end

-- The one reader of value `name` when it is of op type `op_type` and reads it once, else nil.
function Import:sole_reader(name, op_type)
  local r = (self.readers[name] or {})[1]
  if (self.uses[name] or 0) ~= 1 or not r or r.op_type ~= op_type then return nil end
  return r
end

-- The other input of binary node r than `name` (nil where both are it).
local function other_input(r, name)
  if r.inputs[1] == name and r.inputs[2] ~= name then return r.inputs[2] end
  if r.inputs[2] == name and r.inputs[1] ~= name then return r.inputs[1] end
  return nil
end

local function near(v, want) return v ~= nil and math.abs(v - want) <= 1e-5 * math.abs(want) end

-- The exact GELU as exporters write it before opset 20's Gelu: x * (1 + erf(x / sqrt 2)) * 0.5
-- (PyTorch's nn.GELU), or (x * 0.5) * (1 + erf(...)), the division also a Mul by 1 / sqrt 2. From
-- the chain's first node n (its x the input `at`): the nodes it holds after n and the last one,
-- or nil where n does not start one (each value in it read once, by the next).
function Import:gelu_chain(n)
  local x
  for k = 1, 2 do
    local c = self:scalar(n.inputs[3 - k])
    if n.op_type == "Div" and k == 1 and near(c, math.sqrt(2)) then x = n.inputs[1] end
    if n.op_type == "Mul" and near(c, 1 / math.sqrt(2)) then x = n.inputs[k] end
  end
  if not x or (self.uses[x] or 0) ~= 2 then return nil end
  local erf = self:sole_reader(n.outputs[1], "Erf")
  local plus = erf and self:sole_reader(erf.outputs[1], "Add")
  if not plus or not near(self:scalar(other_input(plus, erf.outputs[1]) or ""), 1) then return nil end
  local times = self:sole_reader(plus.outputs[1], "Mul")
  local other = times and other_input(times, plus.outputs[1])
  if not other then return nil end
  if other == x then -- (x * (1 + erf)) * 0.5
    local half = self:sole_reader(times.outputs[1], "Mul")
    if half and near(self:scalar(other_input(half, times.outputs[1]) or ""), 0.5) then return x, { erf, plus, times, half }, half end
    return nil
  end
  local h = self.producer[other] -- (x * 0.5) * (1 + erf), x * 0.5 read by times alone
  if h and h.op_type == "Mul" and (self.uses[other] or 0) == 1 and other_input(h, x) and near(self:scalar(other_input(h, x)), 0.5) then
    return x, { erf, plus, times, h }, times
  end
  return nil
end

-- Div or Mul starting an exact GELU's chain: one gelu of x (joined to an open convolution or
-- linear layer where it can be), the chain's other nodes skipped; else the arithmetic.
local function gelu_or(arith)
  return function(self, n)
    local x, rest, last = self:gelu_chain(n)
    if not x then return arith(self, n) end
    for _, r in ipairs(rest) do self.done[r] = true end
    local node = { name = last.name, op_type = "Gelu", inputs = { x }, outputs = last.outputs, attributes = {}, index = last.index }
    activation(self, node, "gelu", 2)
  end
end

local function alias(self, n)
  if self:reads_extra_outputs(n) then self:fail(n, "its second output (a mask) is read, which tocha does not support") end
  self:set(n, 1, self:needed(n, 1, "input"))
end
OPS.Identity, OPS.Dropout = alias, alias

-- Pad: all zeros, the identity. A constant pad of zeros on H and W whose one reader is a Conv
-- or an AveragePool folds into that reader's padding (PyTorch exports AvgPool2d(
-- count_include_pad=True, padding=p) as such a pair; Import:window_padding takes it back). Any
-- other is a tocha.Pad in the layout x is held in (modes constant, reflect, edge as replicate,
-- wrap as circular).
local PAD_READERS = { Conv = true, AveragePool = true }
local PAD_MODES = { constant = "constant", reflect = "reflect", edge = "replicate", wrap = "circular" }
OPS.Pad = function(self, n)
  local x = self:runtime(n, 1, nil, true)
  local mode = self:attr(n, "mode", "constant")
  if not PAD_MODES[mode] then self:fail(n, ("mode %s is not ONNX's"):format(show(mode))) end
  local pads = self:input(n, 2) and self:constant(n, 2, "pads") or self:attr(n, "pads")
  if not pads then self:fail(n, "pads are missing") end
  if self:input(n, 4) then self:fail(n, "the axes input is not supported (give pads for every dimension)") end
  local rank = #x.shape
  if #pads ~= 2 * rank then self:fail(n, ("%d pads for %d dimensions"):format(#pads, rank)) end
  local zero = true
  for _, v in ipairs(pads) do zero = zero and v == 0 end
  if zero then return self:set(n, 1, x) end
  local value = self:input(n, 3) and self:constant(n, 3, "constant_value")[1] or n.attributes.value or 0 -- (opset < 11: value)
  if type(value) ~= "number" then self:fail(n, "constant_value: expected a number") end
  local shape = {}
  for d = 1, rank do shape[d] = x.shape[d] + pads[d] + pads[rank + d] end
  local reader = (self.readers[n.outputs[1]] or {})[1]
  local foldable = mode == "constant" and value == 0 and rank == 4 and pads[1] == 0 and pads[2] == 0 and pads[5] == 0
    and pads[6] == 0 and (self.uses[n.outputs[1]] or 0) == 1 and reader and PAD_READERS[reader.op_type]
  for _, v in ipairs(pads) do foldable = foldable and v >= 0 end
  if foldable then
    return self:set(n, 1, { node = x.node, shape = shape, layout = x.layout, unpadded = x,
      pre_pads = { pads[3], pads[4], pads[7], pads[8] } })
  end
  -- PyTorch's order: pairs from the last dimension held back
  local held = x.layout == "nhwc" and { 1, 3, 4, 2 } or {}
  local list = {}
  for k = rank, 1, -1 do
    local d = held[k] or k
    list[#list + 1], list[#list + 2] = pads[d], pads[rank + d]
  end
  local ok, op = pcall(Pad.new, list, { mode = PAD_MODES[mode], value = mode == "constant" and value or nil,
    dtype = self.dtype })
  if not ok then self:fail(n, tostring(op):gsub("^.-: ", "", 1)) end
  local r = self:emit(n, op, { x })
  self:set(n, 1, { node = r.node, shape = shape, layout = x.layout })
end

-- ---- arithmetic: computed tensors, constants, or one of each ----

local FOLD = {
  Add = function(a, b) return a + b end, Sub = function(a, b) return a - b end,
  Mul = function(a, b) return a * b end, Div = function(a, b) return a / b end,
  Equal = function(a, b) return a == b and 1 or 0 end,
  Mod = function(a, b) return a - math.floor(a / b) * b end, -- (fmod 0: the divisor's sign, integers)
}

local folded_binary -- (below)

-- Elementwise over two constants, broadcast as NumPy does (integer Div truncates), computed when
-- first read (a weight standardisation's centred weight feeds only running statistics no one
-- reads).
local function fold_binary(self, n, fn)
  local va, vb = self:needed(n, 1, "A"), self:needed(n, 2, "B")
  for i, v in ipairs({ va, vb }) do
    if not v.const then self:fail(n, ("input %d (%s) must be a constant"):format(i, i == 1 and "A" or "B")) end
  end
  local shape, why = fold.broadcast_shape({ va.shape, vb.shape })
  if not shape then self:fail(n, why) end
  local r = const(shape, nil, va.onnx_type or (va.init and va.init.data_type))
  r.lazy = function() return (folded_binary(self, n, fn)) end
  return r
end

-- fold_binary's values and shape.
folded_binary = function(self, n, fn)
  local a, va = self:constant(n, 1, "A")
  local b, vb = self:constant(n, 2, "B")
  local ints = INT_TYPES[va.onnx_type or (va.init and va.init.data_type)]
  local g = fn
  if ints and n.op_type == "Div" then
    g = function(x, y)
      local r = fn(x, y)
      return r < 0 and math.ceil(r) or math.floor(r)
    end
  end
  local out, shape = fold.map(g, { { a, va.shape }, { b, vb.shape } }, FOLD_LIMIT)
  if not out then self:fail(n, shape) end
  return out, shape
end

-- An operand an Expand passed through (record.expanded_to, the shape it stands for) must give
-- the same result shape unexpanded: the other operand covers what the Expand would have added.
function Import:check_expanded(n, a, b)
  for _, pair in ipairs({ { a, b }, { b, a } }) do
    local e, o = pair[1], pair[2]
    if e.expanded_to then
      local want = fold.broadcast_shape({ e.expanded_to, o.shape })
      local got = fold.broadcast_shape({ e.shape, o.shape })
      if not (want and got and #want == #got and op_base.same_sizes(want, got)) then
        self:fail(n, ("an Expand of a computed tensor to [%s] whose other operand [%s] does not cover it"):format(
          table.concat(e.expanded_to, ", "), table.concat(o.shape, ", ")))
      end
    end
  end
end

-- The converter of a binary op of fn (registered as OPS[op_type] where op_type is given).
local function binary(op_type, fn, fold_as)
  local converter = function(self, n)
    local a, b = self:needed(n, 1, "A", true), self:needed(n, 2, "B", true)
    self:check_expanded(n, a, b)
    if a.const and b.const then return self:set(n, 1, fold_binary(self, n, FOLD[fold_as or op_type])) end
    if a.layout and a.layout == b.layout and op_base.same_sizes(a.shape, b.shape) then -- both held channels-last
      return self:set(n, 1, self:emit_like(n, Elementwise.new(fn, self.dtype), { a, b }, a))
    end
    if a.const ~= b.const then -- a computed tensor held channels-last and a constant: in its layout
      local x = a.const and b or a
      local held = self:held_constant(n, a.const and a or b, x)
      if held then
        local op = BroadcastConstant.new(fn, held.shape, { dtype = self.dtype, constant_first = a.const })
        local r = self:emit(n, op, { x }, { constant = held })
        return self:set(n, 1, { node = r.node, shape = x.shape, layout = x.layout })
      end
    end
    a, b = self:in_layout(a, nil), self:in_layout(b, nil)
    if a.const or b.const then
      local c, x = a.const and a or b, a.const and b or a
      local op = BroadcastConstant.new(fn, #c.shape > 0 and c.shape or { 1 }, { dtype = self.dtype, constant_first = a.const })
      return self:set(n, 1, self:emit(n, op, { x }, { constant = c }))
    end
    local same = #a.shape == #b.shape and op_base.same_sizes(a.shape, b.shape)
    self:set(n, 1, self:emit(n, same and Elementwise.new(fn, self.dtype) or Broadcast.new(fn, self.dtype), { a, b }))
  end
  if op_type then OPS[op_type] = converter end
  return converter
end
binary("Add", "add")

-- Add(conv, r), r computed and of conv's shape: r joins the convolution as its residual.
-- Add(linear, c), c a constant of one value an output feature: c joins a Linear without a bias
-- as its bias (PyTorch exports nn.Linear on tokens as MatMul, then Add).
local add = OPS.Add
OPS.Add = function(self, n)
  for k = 1, 2 do
    local v, c = self:input(n, k, true), self:input(n, 3 - k, true)
    local p = v and v.pending
    if self:open(v, n.inputs[k]) and p.linear and not p.b and c and c.const and #c.shape <= #v.shape
        and numel(c.shape) == p.out_features and c.shape[#c.shape] == p.out_features then
      p.b = { const = true, shape = { p.out_features }, from = c }
      return self:set(n, 1, joined(v))
    end
  end
  for k = 1, 2 do
    local v, other = self:input(n, k, true), self:input(n, 3 - k, true)
    if self:open(v, n.inputs[k]) and not v.pending.residual and other and not other.const and not other.silu_half
        and n.inputs[1] ~= n.inputs[2] then
      other = self:input(n, 3 - k, false, not v.pending.linear) -- (a convolution's in its layout)
      if #other.shape == #v.shape and op_base.same_sizes(other.shape, v.shape) then
        v.pending.residual = other
        return self:set(n, 1, joined(v))
      end
    end
  end
  add(self, n)
end
-- Equal and Where: folded (the shape arithmetic an exporter writes for an Expand: Where(Equal(s,
-- -1), ones, s)); of computed tensors, refused.
OPS.Equal = function(self, n)
  local r = fold_binary(self, n, FOLD.Equal)
  r.onnx_type = 9
  self:set(n, 1, r)
end

-- Mod (fmod 0), Not and Range: folded, as the shape arithmetic of windowed attention writes them.
OPS.Mod = function(self, n)
  if self:attr(n, "fmod", 0) ~= 0 then self:fail(n, "fmod 1 is not supported") end
  self:set(n, 1, fold_binary(self, n, FOLD.Mod))
end

OPS.Not = function(self, n)
  local v, rec = self:constant(n, 1, "X")
  local out = {}
  for i, e in ipairs(v) do out[i] = e == 0 and 1 or 0 end
  self:set(n, 1, const(copy(rec.shape), out, 9))
end

OPS.Range = function(self, n)
  local start, rec = self:constant(n, 1, "start")
  local limit, delta = self:constant(n, 2, "limit")[1], self:constant(n, 3, "delta")[1]
  start = start[1]
  if delta == 0 then self:fail(n, "delta 0") end
  local count = math.max(math.ceil((limit - start) / delta), 0)
  if count > FOLD_LIMIT then self:fail(n, ("%d values where tocha folds small constants"):format(count)) end
  local out = {}
  for i = 1, count do out[i] = start + (i - 1) * delta end
  self:set(n, 1, const({ count }, out, rec.onnx_type or (rec.init and rec.init.data_type)))
end

-- Where: of constants, folded; of a constant condition and fill and a computed tensor (a causal
-- mask's masked_fill(scores, -inf)), Broadcast's masked_fill of the computed tensor with one
-- constant that holds the fill where the fill is taken and NaN where the tensor is.
local function masked_where(self, n)
  local cond, cond_rec = self:constant(n, 1, "condition")
  local computed = self:input(n, 2).const and 3 or 2
  local fill, fill_rec = self:constant(n, 5 - computed, computed == 2 and "Y" or "X")
  for _, v in ipairs(fill) do
    if v ~= v then self:fail(n, "a NaN fill of a computed tensor is not supported") end
  end
  local pick = computed == 2 and function(c, f) return c ~= 0 and 0 / 0 or f end
    or function(c, f) return c ~= 0 and f or 0 / 0 end
  local out, shape = fold.map(pick, { { cond, cond_rec.shape }, { fill, fill_rec.shape } }, FOLD_LIMIT)
  if not out then self:fail(n, shape) end
  local x = self:in_layout(self:runtime(n, computed, computed == 2 and "X" or "Y"), nil)
  local op = BroadcastConstant.new("masked_fill", #shape > 0 and shape or { 1 }, { dtype = self.dtype })
  return self:set(n, 1, self:emit(n, op, { x }, { constant = const(#shape > 0 and shape or { 1 }, out, 1) }))
end

OPS.Where = function(self, n)
  local x, y = self:needed(n, 2, "X"), self:needed(n, 3, "Y")
  if self:needed(n, 1, "condition").const and x.const ~= y.const then return masked_where(self, n) end
  local operands, records = {}, {}
  for i, what in ipairs({ "condition", "X", "Y" }) do
    local values, rec = self:constant(n, i, what)
    operands[i], records[i] = { values, rec.shape }, rec
  end
  local out, shape = fold.map(function(c, x, y) return c ~= 0 and x or y end, operands, FOLD_LIMIT)
  if not out then self:fail(n, shape) end
  local x = records[2]
  self:set(n, 1, const(shape, out, x.onnx_type or (x.init and x.init.data_type)))
end

-- ScatterND of constants (reduction none): folded (a windowed attention's mask).
OPS.ScatterND = function(self, n)
  if self:attr(n, "reduction", "none") ~= "none" then self:fail(n, "only reduction none is supported") end
  local data, dv = self:constant(n, 1, "data")
  local idx, iv = self:constant(n, 2, "indices")
  local upd = self:constant(n, 3, "updates")
  local out, shape = fold.scatter_nd(data, dv.shape, idx, iv.shape, upd)
  if not out then self:fail(n, shape) end
  self:set(n, 1, const(copy(shape), out, dv.onnx_type or (dv.init and dv.init.data_type)))
end

-- CumSum: of a constant (a sinusoidal position table built from a mask of ones), folded; of a
-- computed tensor (a position embedding counted along a mask input: DETR's), tocha.CumSum.
OPS.CumSum = function(self, n)
  local x = self:needed(n, 1, "x")
  local axis = self:constant(n, 2, "axis")
  if #axis ~= 1 then self:fail(n, "axis must be one number") end
  local exclusive, reverse = self:attr(n, "exclusive", 0) == 1, self:attr(n, "reverse", 0) == 1
  if not x.const then
    local op = CumSum.new(self:axis(n, axis[1], #x.shape, "axis"), { exclusive = exclusive, reverse = reverse,
      dtype = self.dtype })
    return self:set(n, 1, self:emit(n, op, { x }))
  end
  local values, rec = self:constant(n, 1, "x")
  local shape = #rec.shape > 0 and rec.shape or { #values }
  local out = fold.cumsum(values, shape, self:axis(n, axis[1], #shape, "axis"), exclusive, reverse)
  self:set(n, 1, const(copy(rec.shape), out, rec.onnx_type or (rec.init and rec.init.data_type)))
end

-- Tile: of a constant, folded; of a computed tensor, only along dimensions of size 1, where it is
-- an Expand (read by broadcasting arithmetic alone).
OPS.Tile = function(self, n)
  local x = self:needed(n, 1, "input")
  local repeats = self:constant(n, 2, "repeats")
  if #repeats ~= #x.shape then self:fail(n, ("%d repeats for %d dimensions"):format(#repeats, #x.shape)) end
  if not x.const then
    local to = {}
    for d, s in ipairs(x.shape) do
      if repeats[d] ~= 1 and s ~= 1 then
        self:fail(n, ("repeating dimension %d of size %d of a computed tensor is not supported (size 1 only)"):format(d - 1, s))
      end
      to[d] = s * repeats[d]
    end
    if #to == #x.shape and op_base.same_sizes(to, x.shape) then return self:set(n, 1, x) end
    return self:set(n, 1, expanded(self, n, x, to))
  end
  local out, shape = fold.tile(self:values_of(n, x, "input"), x.shape, repeats, FOLD_LIMIT)
  if not out then self:fail(n, shape) end
  self:set(n, 1, const(shape, out, x.onnx_type or (x.init and x.init.data_type)))
end

binary("Sub", "sub")
binary("Div", "div")
binary("Mul", "mul")

-- Sum, Mean, Max and Min of any count of inputs, broadcasting: a chain of binary nodes (a pair
-- at a time, in the file's order), each converted as Add is (so that constants fold and a
-- computed tensor's layout is kept where it can be); Mean is the Sum times 1 / count.
FOLD.Max, FOLD.Min = math.max, math.min
local PAIRS = { Sum = OPS.Add, Mean = OPS.Add, Max = binary(nil, "max", "Max"), Min = binary(nil, "min", "Min") }
local plain_mul = OPS.Mul
local function variadic(self, n)
  if #n.inputs < 1 then self:fail(n, "no inputs") end
  local function step(inputs, out)
    return { name = n.name, op_type = n.op_type, index = n.index, inputs = inputs, outputs = { out }, attributes = {} }
  end
  local acc = n.inputs[1]
  for i = 2, #n.inputs do
    local out = ("%s\0%s_%d"):format(n.outputs[1], n.op_type, i)
    PAIRS[n.op_type](self, step({ acc, n.inputs[i] }, out))
    acc = out
  end
  if n.op_type == "Mean" and #n.inputs > 1 then
    local out = n.outputs[1] .. "\0mean"
    self.values[out .. "_scale"] = const({ 1 }, { 1 / #n.inputs }, 1)
    plain_mul(self, step({ acc, out .. "_scale" }, out))
    acc = out
  end
  self:set(n, 1, self.values[acc])
end
OPS.Sum, OPS.Mean, OPS.Max, OPS.Min = variadic, variadic, variadic, variadic

local mul = OPS.Mul
-- Mul(x, Sigmoid(x)) is a SiLU and Mul(x, Tanh(Softplus(x))) a Mish (the halves were marked
-- when their turn came): joined to an open convolution or linear layer that makes x, else one
-- Elementwise.
OPS.Mul = function(self, n)
  for k = 1, 2 do
    local half, p = self.values[n.inputs[k]], self.producer[n.inputs[k]]
    local fn, x_name
    if p and p.op_type == "Sigmoid" then fn, x_name = "silu", p.inputs[1]
    elseif half and half.mish then fn, x_name = "mish", self.producer[p.inputs[1]].inputs[1] end
    if fn and x_name == n.inputs[3 - k] then
      local v = self:input(n, 3 - k, true)
      if self:open(v, n.inputs[3 - k], 2) then
        v.pending.act = fn
        return self:set(n, 1, joined(v))
      end
      local x = self:runtime(n, 3 - k, nil, true)
      return self:set(n, 1, self:emit_like(n, Elementwise.new(fn, self.dtype), { x }, x))
    end
  end
  mul(self, n)
end

-- PRelu(x, slope): x for x > 0, else slope x, the slope broadcast to x as NumPy does (PyTorch
-- exports nn.PReLU's weight as [C, 1, 1]): converted as Add is, with tocha's "prelu" (a constant
-- slope, a buffer of the node, moved to x's channels-last layout where x is held so).
FOLD.PRelu = function(a, b) return a > 0 and a or a * b end
binary("PRelu", "prelu")

-- Floor, Ceil, Round, Sign, Sin and Cos of constants, folded (of computed tensors, refused).
for _, op_type in ipairs({ "Floor", "Ceil", "Round", "Sign", "Sin", "Cos" }) do
  OPS[op_type] = function(self, n)
    if not self:folded_unary(n) then self:fail(n, ("%s of a computed tensor is not supported"):format(op_type)) end
  end
end

-- Reciprocal(x) = 1 / x: folded, or a BroadcastConstant div with the constant 1 first.
OPS.Reciprocal = function(self, n)
  if self:folded_unary(n) then return end
  self:set(n, 1, self:scalar_op(n, self:runtime(n, 1, "X", true), "div", 1, true))
end

OPS.Div = gelu_or(OPS.Div)
OPS.Mul = gelu_or(OPS.Mul)

OPS.Pow = function(self, n)
  local base = self:needed(n, 1, "X")
  if base.const then return self:set(n, 1, fold_binary(self, n, function(a, b) return a ^ b end)) end
  local x = self:runtime(n, 1)
  local e = self:constant(n, 2, "Y")
  if #e ~= 1 then self:fail(n, "the exponent must be one number") end
  if e[1] == 1 then return self:set(n, 1, x) end
  if e[1] == 2 then return self:set(n, 1, self:emit(n, Elementwise.new("mul", self.dtype), { x, x })) end
  if e[1] == 0.5 then return self:set(n, 1, self:emit(n, Elementwise.new("sqrt", self.dtype), { x })) end
  self:fail(n, ("exponent %g: tocha takes 0.5, 1 and 2"):format(e[1]))
end

-- ---- pooling ----

-- A pool's options and the x it reads: its padding as pool2d takes it (equal sides, at most half
-- the dilated kernel), the rest a Pad of `fill` before it (nil: refused).
local function pool_options(self, n, x, fill)
  spatial(self, n, x)
  local k = self:attr(n, "kernel_shape")
  if not k or #k ~= 2 then self:fail(n, "kernel_shape must give 2 sizes") end
  local s, d = self:attr(n, "strides", { 1, 1 }), self:attr(n, "dilations", { 1, 1 })
  local ceil = self:attr(n, "ceil_mode", 0) == 1
  local before, after = window_sides(self, n, x, k, s, d)
  if ceil and (x.unpadded or before[1] ~= after[1] or before[2] ~= after[2]) then
    self:fail(n, "ceil_mode with padding unequal on its sides or a Pad before it")
  end
  local limit = { math.floor(((k[1] - 1) * d[1] + 1) / 2), math.floor(((k[2] - 1) * d[2] + 1) / 2) }
  local padding
  x, padding = self:window_padding(n, x, before, after, fill, limit)
  return { kernel_size = k, stride = s, padding = padding, ceil_mode = ceil, dtype = self.dtype }, d, x
end

-- A pool over x in the layout x is held in (o: the pool's options, its layout set here).
local function pooled(self, n, class, o, x)
  o.layout = x.layout
  local r = self:emit(n, class.new(o), { x })
  if x.layout == "nhwc" then r.shape, r.layout = { r.shape[1], r.shape[4], r.shape[2], r.shape[3] }, "nhwc" end
  self:set(n, 1, r)
end

OPS.MaxPool = function(self, n)
  if self:reads_extra_outputs(n) then self:fail(n, "the Indices output is not supported") end
  local o, d, x = pool_options(self, n, self:runtime(n, 1, nil, true), -math.huge)
  o.dilation = d
  pooled(self, n, pool.MaxPool2d, o, x)
end

OPS.AveragePool = function(self, n)
  local x = self:runtime(n, 1, nil, true)
  -- padding that counts in the divisor is zeros, which a Pad before the pool may take; a Pad of
  -- zeros folded into the pool counts, so the pool's own padding must count too
  local counts = self:attr(n, "count_include_pad", 0) == 1
  if x.unpadded and not counts then
    local pads = self:attr(n, "pads") or {}
    for _, v in ipairs(pads) do
      if v ~= 0 then self:fail(n, "a folded Pad with padding that does not count (count_include_pad 0)") end
    end
    if self:attr(n, "auto_pad", "NOTSET") ~= "NOTSET" then self:fail(n, "a folded Pad with auto_pad") end
    counts = true
  end
  local o, _, padded = pool_options(self, n, x, counts and 0 or nil)
  o.count_include_pad = counts
  x = padded
  pooled(self, n, pool.AvgPool2d, o, x)
end

OPS.GlobalAveragePool = function(self, n)
  local x = self:runtime(n, 1, nil, true)
  spatial(self, n, x)
  pooled(self, n, pool.AdaptiveAvgPool2d, { output_size = 1, dtype = self.dtype }, x)
end

OPS.GlobalMaxPool = function(self, n)
  local x = self:runtime(n, 1, nil, true)
  spatial(self, n, x)
  pooled(self, n, pool.MaxPool2d, { kernel_size = { x.shape[3], x.shape[4] }, dtype = self.dtype }, x)
end

-- ---- shapes ----

-- x seen with shape (a view node; none where the shape is x's).
function reshaped(self, n, x, shape)
  if numel(shape) ~= numel(x.shape) then
    self:fail(n, ("a shape of %d elements for a tensor of %d"):format(numel(shape), numel(x.shape)))
  end
  if op_base.same_sizes(shape, x.shape) and #shape == #x.shape then return x end
  if x.const then
    local r = const(copy(shape), x.values, x.onnx_type or (x.init and x.init.data_type))
    if not x.values then r.from = x end -- (read when needed: a large initializer seen as a weight)
    return r
  end
  local r = self:emit(n, views.View.new(shape, { dtype = x.integer or self.dtype }), { x })
  r.integer = x.integer
  return r
end

OPS.Reshape = function(self, n)
  local x = self:needed(n, 1, "data")
  local want = self:constant(n, 2, "shape")
  local shape, infer = {}, nil
  for i, s in ipairs(want) do
    if s == 0 and self:attr(n, "allowzero", 0) == 0 then s = x.shape[i] end
    if s == -1 then infer = i s = 1 end
    shape[i] = s
  end
  if infer then shape[infer] = numel(x.shape) / numel(shape) end
  self:set(n, 1, reshaped(self, n, x, shape))
end

-- DepthToSpace (PyTorch's pixel_shuffle, mode CRD; ONNX's default DCR) and SpaceToDepth
-- (pixel_unshuffle's order, ONNX's): a View to 6 dimensions, one Permute, a View back.
OPS.DepthToSpace = function(self, n)
  local x = self:runtime(n, 1, "input")
  spatial(self, n, x)
  local b, mode = self:attr(n, "blocksize"), self:attr(n, "mode", "DCR")
  local N, C, H, W = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
  if not b or b < 1 or C % (b * b) ~= 0 then
    self:fail(n, ("blocksize %s: the %d channels are not a multiple of its square"):format(show(b), C))
  end
  local c = C / (b * b)
  local split, dims
  if mode == "DCR" then split, dims = { N, b, b, c, H, W }, { 1, 4, 5, 2, 6, 3 }
  elseif mode == "CRD" then split, dims = { N, c, b, b, H, W }, { 1, 2, 5, 3, 6, 4 }
  else self:fail(n, ("mode %s: expected DCR or CRD"):format(show(mode))) end
  local moved = self:emit(n, strided.Permute.new(dims, { dtype = self.dtype }), { reshaped(self, n, x, split) })
  self:set(n, 1, reshaped(self, n, moved, { N, c, H * b, W * b }))
end

OPS.SpaceToDepth = function(self, n)
  local x = self:runtime(n, 1, "input")
  spatial(self, n, x)
  local b = self:attr(n, "blocksize")
  local N, C, H, W = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
  if not b or b < 1 or H % b ~= 0 or W % b ~= 0 then
    self:fail(n, ("blocksize %s must divide H %d and W %d"):format(show(b), H, W))
  end
  local split = reshaped(self, n, x, { N, C, H / b, b, W / b, b })
  local moved = self:emit(n, strided.Permute.new({ 1, 4, 6, 2, 3, 5 }, { dtype = self.dtype }), { split })
  self:set(n, 1, reshaped(self, n, moved, { N, C * b * b, H / b, W / b }))
end

OPS.Flatten = function(self, n)
  local x = self:needed(n, 1, "input")
  local a = self:axis(n, self:attr(n, "axis", 1), #x.shape, "axis", true) - 1
  local outer = 1
  for i = 1, a do outer = outer * x.shape[i] end
  self:set(n, 1, reshaped(self, n, x, { outer, numel(x.shape) / outer }))
end

-- The axes of Squeeze/Unsqueeze/ReduceMean: the attribute (older opsets) or input 2.
local function axes(self, n)
  local a = self:attr(n, "axes")
  if a then return a end
  if self:input(n, 2) then return (self:constant(n, 2, "axes")) end
  return nil
end

OPS.Unsqueeze = function(self, n)
  local x = self:needed(n, 1, "data")
  local ax = axes(self, n) or self:fail(n, "axes are missing")
  local rank = #x.shape + #ax
  local at = {}
  for _, a in ipairs(ax) do
    local d = self:axis(n, a, rank, "axis")
    if at[d] then self:fail(n, ("axis %d is given twice"):format(a)) end
    at[d] = true
  end
  local shape, k = {}, 1
  for i = 1, rank do
    if at[i] then shape[i] = 1 else shape[i] = x.shape[k] k = k + 1 end
  end
  self:set(n, 1, reshaped(self, n, x, shape))
end

OPS.Squeeze = function(self, n)
  local x = self:needed(n, 1, "data")
  local ax = axes(self, n)
  local drop = {}
  for i, s in ipairs(x.shape) do if not ax and s == 1 then drop[i] = true end end
  for _, a in ipairs(ax or {}) do
    local d = self:axis(n, a, #x.shape, "axis")
    if x.shape[d] ~= 1 then self:fail(n, ("axis %d has size %d, not 1"):format(a, x.shape[d])) end
    drop[d] = true
  end
  local shape = {}
  for i, s in ipairs(x.shape) do if not drop[i] then shape[#shape + 1] = s end end
  self:set(n, 1, reshaped(self, n, x, shape))
end

OPS.Shape = function(self, n)
  local x = self:needed(n, 1, "data")
  local r = #x.shape
  -- start and end are clamped to [0, r], as ONNX says
  local function clamp(v) return math.max(0, math.min(r, v < 0 and r + v or v)) end
  local s, e = clamp(self:attr(n, "start", 0)) + 1, clamp(self:attr(n, "end", r))
  local out = {}
  for i = math.max(s, 1), e do out[#out + 1] = x.shape[i] end
  self:set(n, 1, const({ #out }, out, 7))
end

OPS.Constant = function(self, n)
  local a = n.attributes
  if a.value then
    local t = a.value
    return self:set(n, 1, { const = true, shape = t:shape(), init = t, onnx_type = t.data_type })
  end
  if a.value_float then return self:set(n, 1, const({}, { a.value_float }, 1)) end
  if a.value_int then return self:set(n, 1, const({}, { a.value_int }, 7)) end
  if a.value_floats then return self:set(n, 1, const({ #a.value_floats }, copy(a.value_floats), 1)) end
  if a.value_ints then return self:set(n, 1, const({ #a.value_ints }, copy(a.value_ints), 7)) end
  self:fail(n, "a Constant needs value, value_float(s) or value_int(s)")
end

-- Computed x written out broadcast to shape `to` (XCiT's position encoding tiled over the
-- batch, then reshaped): a Broadcast masked_fill of x by a Constant of NaNs of that shape (x is
-- taken everywhere; the backward sums x's gradient over the dimensions it repeats).
function Import:broadcast_to(n, x, to)
  local fill = { const = true, shape = copy(to), tensor = tensor.full(to, 0 / 0, { dtype = self.dtype, device = self.device }) }
  return self:emit(n, Broadcast.new("masked_fill", self.dtype), { x, self:hold(n, fill, self.anchor or x) })
end

local BROADCASTING = { Add = true, Sub = true, Mul = true, Div = true, Sum = true, Max = true, Min = true, Mean = true }

-- Node n's output: computed v (input 1) expanded to shape `to`. Where only broadcasting
-- arithmetic reads it (an older squeeze-and-excitation's x * s.expand_as(x)), v itself, each
-- reader checked to give the expanded shape's result; else written out (broadcast_to).
function expanded(self, n, v, to)
  local name = n.outputs[1]
  local readers = self.readers[name] or {}
  local ok = #readers > 0 and not self.graph_outputs[name]
  for _, reader in ipairs(readers) do ok = ok and BROADCASTING[reader.op_type] end
  if not ok then return self:broadcast_to(n, self:runtime(n, 1, "input"), to) end
  local rec = {}
  for k, x in pairs(v) do rec[k] = x end
  rec.expanded_to = to
  return rec
end

-- Expand of a constant (anchor grids, strides): folded, broadcast as NumPy does (the shape may
-- also be smaller than the input's: ONNX's bidirectional rule). A computed input only where the
-- shape leaves it as it is.
OPS.Expand = function(self, n)
  local v = self:needed(n, 1, "input")
  local want = self:constant(n, 2, "shape")
  local r = math.max(#v.shape, #want)
  local out = {}
  for i = 1, r do
    local a, b = v.shape[i - (r - #v.shape)] or 1, want[i - (r - #want)] or 1
    if a ~= b and a ~= 1 and b ~= 1 then
      self:fail(n, ("shape %s does not broadcast with the input's %s"):format(table.concat(want, "x"),
        table.concat(v.shape, "x")))
    end
    out[i] = a == 1 and b or a
  end
  if not v.const then
    if #out == #v.shape and op_base.same_sizes(out, v.shape) then return self:set(n, 1, v) end
    return self:set(n, 1, expanded(self, n, v, out))
  end
  local count = numel(out)
  if count > FOLD_LIMIT then self:fail(n, ("%d elements: tocha folds constants of at most %d"):format(count, FOLD_LIMIT)) end
  local values = self:values_of(n, v, "input")
  local res = {}
  for e = 0, count - 1 do -- the input's element under output element e
    local rest, src, stride = e, 0, 1
    for d = r, 1, -1 do
      local i = rest % out[d]
      rest = (rest - i) / out[d]
      local dim = d - (r - #v.shape)
      if dim >= 1 then
        if v.shape[dim] ~= 1 then src = src + i * stride end
        stride = stride * v.shape[dim]
      end
    end
    res[e + 1] = values[src + 1]
  end
  self:set(n, 1, const(out, res, v.onnx_type or (v.init and v.init.data_type)))
end

OPS.ConstantOfShape = function(self, n)
  local shape = self:constant(n, 1, "input")
  local count = numel(shape)
  if count > FOLD_LIMIT then self:fail(n, ("%d elements: tocha folds constants of at most %d"):format(count, FOLD_LIMIT)) end
  local v, t = 0, 1
  if n.attributes.value then v, t = n.attributes.value:values()[1], n.attributes.value.data_type end
  local out = {}
  for i = 1, count do out[i] = v end
  self:set(n, 1, const(copy(shape), out, t))
end

-- Rows of a constant table picked by the integer input's indices (a word or position embedding:
-- Gather(table, ids) along axis 0): an Embedding of the table's rows, each the rest of its
-- dimensions flattened (0-based indices, negative ones from the end, as ONNX's).
local function embedding(self, n, table_rec, idx)
  if not idx.integer then
    self:fail(n, "indices: a computed tensor of floats: tocha gathers by an integer input (i64 or i32) of the model")
  end
  local shape = table_rec.shape
  if #shape < 1 then self:fail(n, "data: a scalar has no rows to gather") end
  if self:axis(n, self:attr(n, "axis", 0), #shape, "axis") ~= 1 then
    self:fail(n, "a Gather of a constant by computed indices takes axis 0 (the table's rows)")
  end
  local rest = {}
  for d = 2, #shape do rest[#rest + 1] = shape[d] end
  local op = Embedding.new(shape[1], numel(rest), { dtype = self.dtype, index_dtype = idx.integer, base = 0, wrap = true })
  local r = self:emit(n, op, { idx }, { weight = table_rec }, self:layer_name(n, table_rec))
  local out = copy(idx.shape)
  for _, s in ipairs(rest) do out[#out + 1] = s end
  if #rest == 1 then return self:set(n, 1, { node = r.node, shape = out }) end
  return self:set(n, 1, reshaped(self, n, { node = r.node, shape = r.shape }, out))
end

-- Gather: of a list, folded; of a computed tensor with one constant index (a transformer's
-- class token, x[:, 0]), a Slice of that index along the axis viewed without it; of a constant
-- table by the integer input, an Embedding.
OPS.Gather = function(self, n)
  local x = self:needed(n, 1, "data")
  if x.const and not self:needed(n, 2, "indices").const then return embedding(self, n, x, self:input(n, 2)) end
  if not x.const then
    local idx, iv = self:constant(n, 2, "indices")
    local a = self:axis(n, self:attr(n, "axis", 0), #x.shape, "axis")
    if #idx ~= 1 or #iv.shape > 1 then self:fail(n, "a Gather of a computed tensor takes one index") end
    local k = idx[1] < 0 and idx[1] + x.shape[a] or idx[1]
    if k < 0 or k >= x.shape[a] then self:fail(n, ("index %d out of range of %d"):format(idx[1], x.shape[a])) end
    local part = self:emit(n, strided.Slice.new({ k }, { k + 1 }, { axes = { a }, dtype = self.dtype }), { x })
    local shape = {}
    for d = 1, #x.shape do
      if d ~= a then shape[#shape + 1] = x.shape[d] elseif #iv.shape == 1 then shape[#shape + 1] = 1 end
    end
    return self:set(n, 1, reshaped(self, n, part, shape))
  end
  local data, dv = self:constant(n, 1, "data")
  local idx, iv = self:constant(n, 2, "indices")
  local shape = #dv.shape > 0 and dv.shape or { #data }
  local out, out_shape = fold.gather(data, shape, self:axis(n, self:attr(n, "axis", 0), #shape, "axis"), idx, iv.shape,
    FOLD_LIMIT)
  if not out then self:fail(n, out_shape) end
  self:set(n, 1, const(out_shape, out, dv.onnx_type or (dv.init and dv.init.data_type)))
end

-- Cast(input, to) and CastLike(input, target) (the exporter of torch.export writes the second
-- for its scalars): a constant converted (integers truncated), a computed float passed through
-- (every computed tensor has the model's dtype), an integer input cast to the model's dtype.
local function cast(self, n, x, to)
  if x.integer and onnx_file.DTYPES[to] and not INT_TYPES[to] then -- an integer input (a mask) made floats
    return self:set(n, 1, self:emit(n, Cast.new(x.integer, self.dtype), { x }))
  end
  if x.integer and onnx_file.DTYPES[to] == x.integer then return self:set(n, 1, x) end
  if not x.const then
    if onnx_file.DTYPES[to] and not INT_TYPES[to] then return self:set(n, 1, x) end -- computed in the model's dtype
    self:fail(n, ("a cast of a computed tensor to %s is not supported"):format(onnx_file.type_name(to)))
  end
  local values = self:values_of(n, x, "input")
  local out = {}
  for i, v in ipairs(values) do out[i] = INT_TYPES[to] and (v < 0 and math.ceil(v) or math.floor(v)) or v end
  self:set(n, 1, const(copy(x.shape), out, to))
end
OPS.Cast = function(self, n) cast(self, n, self:needed(n, 1, "input"), self:attr(n, "to")) end
OPS.CastLike = function(self, n)
  local target = self:needed(n, 2, "target_type", true)
  local to = target.const and (target.onnx_type or (target.init and target.init.data_type)) or 1 -- (FLOAT: computed)
  cast(self, n, self:needed(n, 1, "input"), to)
end

-- Along axis a of a shape: the product of the dimensions before it, and after it.
local function around(shape, a)
  local outer, inner = 1, 1
  for i = 1, a - 1 do outer = outer * shape[i] end
  for i = a + 1, #shape do inner = inner * shape[i] end
  return outer, inner
end

-- The records of computed values to join or split along ONNX axis a (1-based), each as a view
-- [outer, size along a, inner], in the layout they share: channels-last where all are held so
-- and a is the channels (their last dimension then), else ONNX's. Gives the views, the axis
-- in the held shape, and the layout.
function Import:along(n, records, a)
  local nhwc = a == 2
  for _, v in ipairs(records) do nhwc = nhwc and v.layout == "nhwc" end
  local layout = nhwc and "nhwc" or nil
  local views_of, pa = {}, nhwc and 4 or a
  for i, v in ipairs(records) do
    local r = self:in_layout(v, layout)
    local held = held_shape(r)
    local outer, inner = around(held, pa)
    views_of[i] = { node = self:emit(n, views.View.new({ outer, held[pa], inner }, { dtype = self.dtype }), { r }).node,
      shape = { outer, held[pa], inner } }
  end
  return views_of, pa, layout
end

-- A record of view v3 ([outer, size, inner]) seen as ONNX shape `shape` held in layout.
function Import:unview(n, v3, shape, layout)
  local held = held_shape({ shape = shape, layout = layout })
  local r = self:emit(n, views.View.new(held, { dtype = self.dtype }), { v3 })
  return { node = r.node, shape = shape, layout = layout }
end

-- Concat: of constants, folded (any axis); of computed tensors, ChannelCat over each input
-- viewed as [outer, size along the axis, inner] (any axis; channels-last kept for the channels).
OPS.Concat = function(self, n)
  local first = self:needed(n, 1, "inputs[1]", true)
  local rank = #first.shape
  local a = self:axis(n, self:attr(n, "axis") or self:fail(n, "axis is missing"), rank, "axis")
  local records, all_const = {}, true
  for i = 1, #n.inputs do
    records[i] = self:needed(n, i, ("inputs[%d]"):format(i), true)
    if #records[i].shape ~= rank then self:fail(n, ("inputs[%d] has %d dimensions, inputs[1] %d"):format(i, #records[i].shape, rank)) end
    if not records[i].const then all_const = false end
  end
  local shape = copy(first.shape)
  shape[a] = 0
  for i, v in ipairs(records) do
    for d = 1, rank do
      if d ~= a and v.shape[d] ~= first.shape[d] then
        self:fail(n, ("inputs[%d] is %s where inputs[1] is %s beside the axis"):format(i, table.concat(v.shape, "x"),
          table.concat(first.shape, "x")))
      end
    end
    shape[a] = shape[a] + v.shape[a]
  end
  if all_const then
    local count = numel(shape)
    if count > FOLD_LIMIT then self:fail(n, ("%d elements: tocha folds constants of at most %d"):format(count, FOLD_LIMIT)) end
    local outer, inner = around(shape, a)
    local out = {}
    for o = 0, outer - 1 do
      for i, v in ipairs(records) do
        local values, run = self:values_of(n, v, ("inputs[%d]"):format(i)), v.shape[a] * inner
        for e = 1, run do out[#out + 1] = values[o * run + e] end
      end
    end
    return self:set(n, 1, const(shape, out, first.onnx_type or (first.init and first.init.data_type)))
  end
  -- a constant joined to computed tensors (a class token): a Constant node holding it, placed
  -- after the first computed input
  local anchor
  for _, v in ipairs(records) do if not v.const and not anchor then anchor = v end end
  for i, v in ipairs(records) do
    if v.const then records[i] = self:hold(n, v, anchor) end
  end
  local parts, _, layout = self:along(n, records, a)
  local acc = parts[1]
  for i = 2, #parts do acc = self:emit(n, ChannelCat.new(self.dtype), { acc, parts[i] }) end
  self:set(n, 1, self:unview(n, acc, shape, layout))
end

OPS.Transpose = function(self, n)
  local x = self:needed(n, 1, "data")
  local r = #x.shape
  local perm = self:attr(n, "perm")
  if not perm then
    perm = {}
    for i = 1, r do perm[i] = r - i end -- ONNX's default: the dimensions reversed
  end
  if #perm ~= r then self:fail(n, ("perm has %d entries for %d dimensions"):format(#perm, r)) end
  local dims = {}
  for i, p in ipairs(perm) do dims[i] = self:axis(n, p, r, "perm entry") end
  local op = strided.Permute.new(dims, { dtype = self.dtype })
  if x.const then -- (an anchor grid, say) folded
    local values = self:values_of(n, x, "data")
    if numel(x.shape) > FOLD_LIMIT then self:fail(n, "a constant too large to fold") end
    local out, shape = fold.view(values, op:view(x.shape))
    return self:set(n, 1, const(copy(shape), out, x.onnx_type or (x.init and x.init.data_type)))
  end
  self:set(n, 1, self:emit(n, op, { x }))
end

-- Slice: starts, ends, axes and steps as inputs (opset 10 on) or attributes (before); a
-- constant list is folded.
-- ONNX's dimension d of a 4-D value held channels-last: where it lies in the held shape.
local NHWC_DIM = { 1, 4, 2, 3 }

OPS.Slice = function(self, n)
  local x = self:needed(n, 1, "data", true)
  local starts, ends, along, steps
  if self.opset < 10 then
    starts, ends, along = self:attr(n, "starts"), self:attr(n, "ends"), self:attr(n, "axes")
    if not starts or not ends then self:fail(n, "starts and ends are missing") end
  else
    starts, ends = self:constant(n, 2, "starts"), self:constant(n, 3, "ends")
    along = self:input(n, 4) and self:constant(n, 4, "axes") or nil
    steps = self:input(n, 5) and self:constant(n, 5, "steps") or nil
  end
  local r = #x.shape
  local dims = {}
  for i = 1, #starts do dims[i] = along and self:axis(n, along[i], r, "axis") or i end
  if #ends ~= #starts or (along and #along ~= #starts) or (steps and #steps ~= #starts) then
    self:fail(n, "starts, ends, axes and steps must be as long as one another")
  end
  local op = strided.Slice.new(starts, ends, { axes = dims, steps = steps, dtype = self.dtype })
  if x.const then -- the file's constants (shape arithmetic, index tables): folded
    local out, shape = fold.view(self:values_of(n, x, "data"), op:view(x.shape, true))
    return self:set(n, 1, const(copy(shape), out, x.onnx_type or (x.init and x.init.data_type)))
  end
  if x.layout == "nhwc" then -- sliced where it lies, kept channels-last
    local held = {}
    for i, d in ipairs(dims) do held[i] = NHWC_DIM[d] end
    local shape = op:view(x.shape).shape
    op = strided.Slice.new(starts, ends, { axes = held, steps = steps, dtype = self.dtype })
    return self:set(n, 1, { node = self:emit(n, op, { x }).node, shape = shape, layout = "nhwc" })
  end
  self:set(n, 1, self:emit(n, op, { x }))
end

-- Split of a computed tensor along any axis into the given sizes (or equal parts): ChannelChunk
-- over the input viewed as [outer, size along the axis, inner] where the parts are equal, a
-- Slice of that view for each part otherwise (channels-last kept for the channels).
OPS.Split = function(self, n)
  local x = self:runtime(n, 1, "input", true)
  local a = self:axis(n, self:attr(n, "axis", 0), #x.shape, "axis")
  local parts = #n.outputs
  local sizes = self:attr(n, "split") or (self:input(n, 2) and (self:constant(n, 2, "split")))
  if sizes then
    local total = 0
    for _, s in ipairs(sizes) do total = total + s end
    if #sizes ~= parts or total ~= x.shape[a] then
      self:fail(n, ("split %s: %d parts of %d along the axis, for %d outputs of %d"):format(table.concat(sizes, ", "),
        #sizes, total, parts, x.shape[a]))
    end
  else
    if x.shape[a] % parts ~= 0 then self:fail(n, ("%d do not split into %d equal parts"):format(x.shape[a], parts)) end
    sizes = {}
    for k = 1, parts do sizes[k] = x.shape[a] / parts end
  end
  local equal = true
  for k = 2, parts do equal = equal and sizes[k] == sizes[1] end
  local v3, _, layout = self:along(n, { x }, a)
  local from = 0
  for k = 1, parts do
    local op = equal and ChannelChunk.new(parts, k, self.dtype)
      or strided.Slice.new({ from }, { from + sizes[k] }, { axes = { 2 }, dtype = self.dtype })
    local part = self:emit(n, op, { v3[1] })
    local shape = copy(x.shape)
    shape[a] = sizes[k]
    self:set(n, k, self:unview(n, part, shape, layout))
    from = from + sizes[k]
  end
end

-- ---- the rest ----

local function soft(class)
  return function(self, n)
    local x = self:runtime(n, 1, "input")
    local default = (self.opset >= 13) and -1 or 1
    local a = self:attr(n, "axis", default)
    a = self:axis(n, a, #x.shape, "axis")
    if self.opset < 13 and a ~= #x.shape then
      self:fail(n, "before opset 13 softmax flattens from axis; tocha takes the last axis only")
    end
    self:set(n, 1, self:emit(n, class.new(a, self.dtype), { x }))
  end
end
OPS.Softmax, OPS.LogSoftmax = soft(softmax.Softmax), soft(softmax.LogSoftmax)

-- The dimensions (1-based, ascending) a Reduce* node n reduces of an input of `rank`: its axes,
-- or every one where it gives none (or an empty list without noop_with_empty_axes).
local function reduced_dims(self, n, rank)
  local ax = axes(self, n)
  local dims, seen = {}, {}
  if not ax or (#ax == 0 and self:attr(n, "noop_with_empty_axes", 0) == 0) then
    for d = 1, rank do dims[d] = d end
    return dims
  end
  for _, a in ipairs(ax) do
    local d = self:axis(n, a, rank, "axis")
    if seen[d] then self:fail(n, ("axis %d is given twice"):format(a)) end
    seen[d], dims[#dims + 1] = true, d
  end
  table.sort(dims)
  return dims
end

-- A Reduce* node's reduction of a constant (a weight standardisation's statistics), computed
-- when first read.
local function folded_reduction(self, n, mode, pre, post)
  local x = self:needed(n, 1, "data")
  local dims = reduced_dims(self, n, #x.shape)
  local kept, shape = {}, {}
  for _, d in ipairs(dims) do kept[d] = true end
  for d, s in ipairs(x.shape) do
    if not kept[d] then shape[#shape + 1] = s elseif self:attr(n, "keepdims", 1) == 1 then shape[#shape + 1] = 1 end
  end
  local r = const(shape, nil, x.onnx_type or (x.init and x.init.data_type))
  r.lazy = function() return (fold.reduce(self:values_of(n, x, "data"), x.shape, dims, mode, pre, post)) end
  return r
end

-- Reduce over the axes a dimension at a time; `pre` an Elementwise function applied first
-- ("square": x * x; "abs"), `post` one applied to the result ("sqrt"): ReduceL2 is
-- sqrt(sum(x * x)), ReduceL1 sum(|x|), ReduceSumSquare sum(x * x), as ONNX defines them.
local function reduction(mode, pre, post) return function(self, n)
  if self:needed(n, 1, "data").const then return self:set(n, 1, folded_reduction(self, n, mode, pre, post)) end
  local x = self:runtime(n, 1, "data")
  if pre == "square" then x = self:emit(n, Elementwise.new("mul", self.dtype), { x, x })
  elseif pre then x = self:emit(n, Elementwise.new(pre, self.dtype), { x }) end
  local keep = self:attr(n, "keepdims", 1) == 1
  local acc = x
  local dims = reduced_dims(self, n, #x.shape)
  for _, d in ipairs(dims) do acc = self:emit(n, Reduce.new(mode, d, self.dtype), { acc }) end
  if not keep then
    local shape, drop = {}, {}
    for _, d in ipairs(dims) do drop[d] = true end
    for i, s in ipairs(acc.shape) do if not drop[i] then shape[#shape + 1] = s end end
    if #shape == 0 then shape = { 1 } end
    acc = reshaped(self, n, acc, shape)
  end
  if post then acc = self:emit(n, Elementwise.new(post, self.dtype), { acc }) end
  self:set(n, 1, acc)
end end
OPS.ReduceMean, OPS.ReduceSum = reduction("mean"), reduction("sum")
OPS.ReduceMax, OPS.ReduceMin, OPS.ReduceProd = reduction("max"), reduction("min"), reduction("prod")
OPS.ReduceL2, OPS.ReduceL1 = reduction("sum", "square", "sqrt"), reduction("sum", "abs")
OPS.ReduceSumSquare = reduction("sum", "square")

-- InstanceNormalization: GroupNorm with a group a channel (each sample's channel normalized
-- over its own elements), its scale and bias the affine parameters.
OPS.InstanceNormalization = function(self, n)
  local x = self:runtime(n, 1)
  local scale, bias = self:needed(n, 2, "scale"), self:needed(n, 3, "B")
  if #x.shape < 3 then self:fail(n, ("x has %d dimensions: expected N, C and at least one more"):format(#x.shape)) end
  local c = x.shape[2]
  local op = GroupNorm.new(c, c, { eps = self:attr(n, "epsilon", 1e-5), dtype = self.dtype })
  self:set(n, 1, self:emit(n, op, { x }, { weight = scale, bias = bias }, self:layer_name(n, scale)))
end

-- GroupNormalization (opset 18: scale and bias a group, which this spreads over the group's
-- channels; opset 21: a channel): GroupNorm.
OPS.GroupNormalization = function(self, n)
  local x = self:runtime(n, 1, "X")
  local scale, bias = self:needed(n, 2, "scale"), self:needed(n, 3, "bias")
  if #x.shape < 3 then self:fail(n, ("x has %d dimensions: expected N, C and at least one more"):format(#x.shape)) end
  local c, groups = x.shape[2], self:attr(n, "num_groups")
  if type(groups) ~= "number" or groups < 1 or c % groups ~= 0 then
    self:fail(n, ("num_groups %s does not divide the %d channels"):format(show(groups), c))
  end
  local function per_channel(v, what)
    if not v.const then self:fail(n, what .. " must be a constant") end
    if numel(v.shape) == c then return v end
    if numel(v.shape) ~= groups then self:fail(n, ("%s has %d values: expected %d or %d"):format(what, numel(v.shape), groups, c)) end
    local values, out = self:values_of(n, v, what), {}
    for k = 1, c do out[k] = values[math.floor((k - 1) / (c / groups)) + 1] end
    return const({ c }, out, 1)
  end
  local op = GroupNorm.new(groups, c, { eps = self:attr(n, "epsilon", 1e-5), dtype = self.dtype })
  self:set(n, 1, self:emit(n, op, { x }, { weight = per_channel(scale, "scale"), bias = per_channel(bias, "bias") },
    self:layer_name(n, scale)))
end

OPS.LayerNormalization = function(self, n)
  local x = self:runtime(n, 1)
  local scale, bias = self:needed(n, 2, "Scale"), self:input(n, 3)
  local a = self:axis(n, self:attr(n, "axis", -1), #x.shape, "axis")
  local normalized = {}
  for i = a, #x.shape do normalized[#normalized + 1] = x.shape[i] end
  if #n.outputs > 1 and (n.outputs[2] ~= "" or (n.outputs[3] and n.outputs[3] ~= "")) then
    self:fail(n, "the Mean and InvStdDev outputs are not supported")
  end
  local op = LayerNorm.new(normalized, { eps = self:attr(n, "epsilon", 1e-5), bias = bias ~= nil, dtype = self.dtype })
  self:set(n, 1, self:emit(n, op, { x }, { weight = scale, bias = bias }, self:layer_name(n, scale)))
end

-- A Resize's (or the older Upsample's) scales or sizes and its coordinate mapping: Resize from
-- opset 11 as its inputs and attributes say; Resize of opset 10 and Upsample (scales its second
-- input, or before opset 9 an attribute) map asymmetrically, nearest rounding down.
local function resize_args(self, n)
  if n.op_type == "Resize" and self.opset >= 11 then
    local scales = self:input(n, 3) and self:constant(n, 3, "scales") or nil
    local sizes = self:input(n, 4) and self:constant(n, 4, "sizes") or nil
    return scales, sizes, self:attr(n, "coordinate_transformation_mode", "half_pixel"),
      self:attr(n, "nearest_mode", "round_prefer_floor")
  end
  local scales
  if n.op_type == "Upsample" and self.opset < 9 then
    scales = n.attributes.scales
    if type(scales) ~= "table" then self:fail(n, "attribute scales: expected a list of numbers") end
    for _, v in ipairs(scales) do if type(v) ~= "number" then self:fail(n, "attribute scales: expected a list of numbers") end end
  else
    scales = self:constant(n, 2, "scales")
  end
  return scales, nil, "asymmetric", "floor"
end

-- Resize(mode="linear" or "cubic") over the spatial dimensions: tocha.UpsampleBilinear2d
-- (bilinear or bicubic of cubic_coeff_a), in x's layout, to the sizes given or by the scales
-- given (the source coordinate o / scale, as ONNX says).
local function resize_linear(self, n, x, scales, sizes, ct, cubic)
  local what = cubic and "cubic" or "linear"
  if ct ~= "half_pixel" and ct ~= "pytorch_half_pixel" and ct ~= "align_corners" and ct ~= "asymmetric" then
    self:fail(n, ("coordinate_transformation_mode %s: tocha's %s resize takes half_pixel, pytorch_half_pixel, "
      .. "align_corners or asymmetric"):format(ct, what))
  end
  if self:attr(n, "antialias", 0) ~= 0 then self:fail(n, ("antialias: tocha's %s resize does not filter"):format(what)) end
  if cubic and self:attr(n, "exclude_outside", 0) ~= 0 then
    self:fail(n, "exclude_outside 1: tocha's cubic resize repeats the edge, as PyTorch's bicubic (exclude_outside 0)")
  end
  scales = scales or {}
  if sizes and #sizes ~= 4 or not sizes and #scales ~= 4 then self:fail(n, "expected 4 scales or 4 sizes (N, C, H, W)") end
  if sizes and (sizes[1] ~= x.shape[1] or sizes[2] ~= x.shape[2]) or not sizes and (scales[1] ~= 1 or scales[2] ~= 1) then
    self:fail(n, "only the spatial dimensions may be resized")
  end
  local opts = { coordinates = ct, dtype = self.dtype, layout = x.layout or "nchw", mode = cubic and "bicubic" or nil,
    cubic_a = cubic and self:attr(n, "cubic_coeff_a", -0.75) or nil }
  if sizes then opts.size = { sizes[3], sizes[4] } else opts.scale = { scales[3], scales[4] } end
  local up = UpsampleBilinear2d.new(opts)
  local r = self:emit(n, up, { x })
  local s = x.shape
  local out = up:compute_concrete_output_shape({ x.layout == "nhwc" and { s[1], s[3], s[4], s[2] } or s })
  if x.layout == "nhwc" then out = { out[1], out[4], out[2], out[3] } end
  self:set(n, 1, { node = r.node, shape = out, layout = x.layout })
end

OPS.Resize = function(self, n)
  local x = self:runtime(n, 1, nil, true)
  spatial(self, n, x)
  local mode = self:attr(n, "mode", "nearest")
  local scales, sizes, ct, nm = resize_args(self, n)
  if mode == "linear" or mode == "bilinear" or mode == "cubic" then
    return resize_linear(self, n, x, scales, sizes, ct, mode == "cubic")
  end
  if mode ~= "nearest" then self:fail(n, ("mode %s: tocha resizes by nearest neighbour, linearly or cubically"):format(mode)) end
  local floor_like = (ct == "asymmetric" and nm == "floor") or ((ct == "half_pixel" or ct == "pytorch_half_pixel")
    and (nm == "round_prefer_floor" or nm == "round_prefer_ceil"))
  if not floor_like then
    self:fail(n, ("coordinate_transformation_mode %s with nearest_mode %s is not nearest upsampling by whole factors"):format(ct, nm))
  end
  scales = scales or {}
  local f = {}
  for i = 1, 4 do
    local r = sizes and sizes[i] / x.shape[i] or scales[i]
    if not r then self:fail(n, "scales or sizes are missing") end
    f[i] = r
  end
  if f[1] ~= 1 or f[2] ~= 1 then self:fail(n, "only the spatial dimensions may be scaled") end
  for i = 3, 4 do
    if f[i] < 1 or f[i] ~= math.floor(f[i]) then self:fail(n, ("scale %g: tocha upsamples by whole factors"):format(f[i])) end
  end
  local up = Upsample.new(f[3], f[4], nil, self.dtype, { layout = x.layout or "nchw" })
  local r = self:emit(n, up, { x })
  self:set(n, 1, { node = r.node, shape = { x.shape[1], x.shape[2], x.shape[3] * f[3], x.shape[4] * f[4] }, layout = x.layout })
end
OPS.Upsample = OPS.Resize -- (opsets 7 to 9: scales as an attribute, then an input; modes nearest and linear)

-- LRN (AlexNet's and GoogLeNet's local response normalization across channels), as ONNX
-- defines it: y = x / (bias + alpha / size * sum of x^2 over the channels c - floor((size - 1) /
-- 2) to c + ceil((size - 1) / 2))^beta. Composed of tocha's ops: x * x, its channel windows
-- summed by an AvgPool2d (padding counted) over x^2 viewed [N, 1, C, H W] (a Pad first where size
-- is even and the window lopsided), then bias + alpha * mean, raised to beta as exp(beta log),
-- and x divided by it.
OPS.LRN = function(self, n)
  local x = self:runtime(n, 1, "X")
  spatial(self, n, x)
  local size = self:attr(n, "size")
  if type(size) ~= "number" or size < 1 then self:fail(n, "size must be a positive count of channels") end
  local alpha, beta, bias = self:attr(n, "alpha", 1e-4), self:attr(n, "beta", 0.75), self:attr(n, "bias", 1)
  local N, C, H, W = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
  local before, after = math.floor((size - 1) / 2), math.ceil((size - 1) / 2)
  local dt = self.dtype
  local sq = reshaped(self, n, self:emit(n, Elementwise.new("mul", dt), { x, x }), { N, 1, C, H * W })
  local pad = before
  if before ~= after then
    sq = self:emit(n, Pad.new({ 0, 0, before, after }, { dtype = dt }), { sq })
    pad = 0
  end
  local mean = self:emit(n, pool.AvgPool2d.new { kernel_size = { size, 1 }, stride = 1, padding = { pad, 0 },
    count_include_pad = true, dtype = dt }, { sq })
  local v = reshaped(self, n, mean, { N, C, H, W })
  v = self:scalar_op(n, self:scalar_op(n, v, "mul", alpha), "add", bias)
  v = self:emit(n, Elementwise.new("log", dt), { v })
  v = self:emit(n, Elementwise.new("exp", dt), { self:scalar_op(n, v, "mul", beta) })
  self:set(n, 1, self:emit(n, Elementwise.new("div", dt), { x, v }))
end

-- ---- 1-D convolutions, pools and batch norms: run as their 2-D ops over [N, C, 1, L] ----
--
-- A node over x [N, C, L] (Conv1d's, MaxPool1d's, BatchNorm1d's) is converted as a 2-D node of
-- the same type over x viewed [N, C, 1, L]: its windows' attributes widened by a leading 1 (pads
-- by zeros on H), a weight [O, I, K] read as [O, I, 1, K], kept in ONNX's layout (a view of
-- [N, C, L] needs no copy; channels-last would take a Permute on each side), and its output
-- [N, O, 1, L'] viewed [N, O, L']. A 1-D convolution is held open as a 2-D one is: the
-- BatchNormalization, residual Add and activation after it join its launch.

local function widened(attributes)
  local out = {}
  for k, v in pairs(attributes) do out[k] = v end
  for _, name in ipairs({ "kernel_shape", "strides", "dilations" }) do
    if type(out[name]) == "table" and #out[name] == 1 then out[name] = { 1, out[name][1] } end
  end
  if type(out.output_padding) == "table" and #out.output_padding == 1 then out.output_padding = { 0, out.output_padding[1] } end
  if type(out.pads) == "table" and #out.pads == 2 then out.pads = { 0, out.pads[1], 0, out.pads[2] } end
  return out
end

local function lifted(handler, weighted)
  return function(self, n)
    local x = self:input(n, 1, true)
    if not x or x.const or #x.shape ~= 3 then return handler(self, n) end
    if n.op_type == "BatchNormalization" and self:open(x, n.inputs[1]) and not x.pending.linear then
      return handler(self, n) -- folded into the 1-D convolution before it
    end
    x = self:input(n, 1, false, true) -- (an open convolution emitted)
    local function tmp(what) return ("%s\0lifted_%s"):format(n.outputs[1], what) end
    local n2 = { name = n.name, op_type = n.op_type, domain = n.domain, index = n.index, inputs = {}, outputs = {},
      attributes = widened(n.attributes) }
    for i, name in ipairs(n.inputs) do n2.inputs[i] = name end
    for i, name in ipairs(n.outputs) do n2.outputs[i] = name end
    local N, C, L = x.shape[1], x.shape[2], x.shape[3]
    n2.inputs[1], n2.outputs[1] = tmp("x"), tmp("y")
    self.values[n2.inputs[1]] = reshaped(self, n, self:in_layout(x, nil), { N, C, 1, L })
    if weighted then
      local w = self:needed(n, 2, "W")
      if not w.const or #w.shape ~= 3 then self:fail(n, "W must be an initializer of 3 dimensions for a 1-D x") end
      n2.inputs[2] = tmp("w")
      self.values[n2.inputs[2]] = { const = true, shape = { w.shape[1], w.shape[2], 1, w.shape[3] }, from = w }
    end
    local layout, nhwc = self.layout, self.nhwc
    self.layout, self.nhwc = "nchw", nil
    local ok, err = pcall(handler, self, n2)
    self.layout, self.nhwc = layout, nhwc
    if not ok then error(err, 0) end
    local y = self.values[n2.outputs[1]]
    local shape3 = { y.shape[1], y.shape[2], y.shape[4] }
    if y.pending then -- a convolution, held open as a 2-D one is (Import:materialize views its output back)
      y.pending.lifted = { shape4 = y.shape, shape3 = shape3 }
      return self:set(n, 1, { pending = y.pending, stage = y.stage, shape = shape3 })
    end
    self:set(n, 1, reshaped(self, n, y, shape3))
  end
end
OPS.Conv, OPS.ConvTranspose = lifted(OPS.Conv, true), lifted(OPS.ConvTranspose, true)
OPS.MaxPool, OPS.AveragePool = lifted(OPS.MaxPool), lifted(OPS.AveragePool)
OPS.GlobalAveragePool, OPS.GlobalMaxPool = lifted(OPS.GlobalAveragePool), lifted(OPS.GlobalMaxPool)
OPS.BatchNormalization = lifted(OPS.BatchNormalization)

require("tocha.onnx_recurrent").install(OPS)

M.OPS = {}
for name in pairs(OPS) do M.OPS[#M.OPS + 1] = name end
table.sort(M.OPS)

-- ---- the model ----

-- The parameter tensor of a constant record, of the parameter's shape (the file may add 1s:
-- Gemm's C [1, out]), transposed and scaled where Gemm says so.
local function parameter_value(self, rec, want, want_dtype)
  local src = rec.from or rec
  local t = self:tensor_of(src, want_dtype)
  if rec.transpose then t = t:t() end
  if rec.scale and rec.scale ~= 1 then t = t:mul(rec.scale) end
  if t:numel() ~= numel(want) then return nil end
  return t:contiguous():view(want)
end

-- tocha.onnx.load(path [, {batch_size = 1, device, dtype = "f32", input_shapes = {name = shape},
-- fuse = true, layout = "nhwc"}]): the network as a tocha.Model, loaded (m:load(batch_size,
-- device)) in inference mode, its parameters the file's. m.onnx is the file (tocha.onnx.read's).
-- input_shapes gives the shape of an input whose dimensions beyond the batch the file leaves
-- open. fuse: each Conv with the BatchNormalization, residual Add and activation after it as one
-- Conv2d launch (false: a node for each of the file's). layout: where the convolutions keep
-- their activations, "nhwc" (channels-last: the layout their implicit GEMMs read, the default)
-- or "nchw" (ONNX's); the model's inputs and outputs are as the file gives them either way.
function M.load(path, opts)
  if type(path) ~= "string" then raise("path: expected a file name, got " .. show(path)) end
  opts = op_base.options(opts, { batch_size = true, device = true, dtype = true, input_shapes = true, fuse = "boolean",
    layout = true }, "tocha.onnx.load")
  local layout = opts.layout or "nhwc"
  if layout ~= "nhwc" and layout ~= "nchw" then raise("layout: expected \"nhwc\" or \"nchw\", got " .. show(layout)) end
  local batch = opts.batch_size or 1
  if type(batch) ~= "number" or batch < 1 or batch ~= math.floor(batch) then
    raise("batch_size: expected a positive integer, got " .. show(batch))
  end
  local dt = op_base.float_dtype(opts.dtype, "dtype")
  local dev = device.get(opts.device)
  local f = M.read(path)
  for _, n in ipairs(f.nodes) do
    if n.domain ~= "" and n.domain ~= "ai.onnx" then
      raise(("%s: node %s (%s) is of domain %s, not ONNX's"):format(path, show(n.name), n.op_type, show(n.domain)))
    end
  end
  local self = setmetatable({ path = path, file = f, dtype = dt, device = dev, values = {}, producer = {}, names = {}, done = {},
    params = {}, opset = f.opsets[""] or f.opsets["ai.onnx"] or 1, fuse = opts.fuse ~= false, layout = layout,
    nhwc = layout == "nhwc" and "nhwc" or nil }, Import)
  for name, init in pairs(f.initializers) do
    self.values[name] = { const = true, shape = init:shape(), init = init, onnx_type = init.data_type }
  end
  local inputs = {}
  for _, v in ipairs(f.inputs) do
    if not f.initializers[v.name] then
      local given = opts.input_shapes and opts.input_shapes[v.name]
      local shape = given and copy(given) or (v.shape and copy(v.shape))
      if not shape then raise(("%s: input %s has no shape in the file: give it in input_shapes"):format(path, show(v.name))) end
      local model_shape = copy(shape)
      for i, s in ipairs(shape) do
        if s < 0 then
          if i ~= 1 then
            raise(("%s: input %s: dimension %d (%s) is open: give the shape in input_shapes"):format(path, show(v.name), i,
              v.dim_names and v.dim_names[i] or "?"))
          end
          shape[1], model_shape[1] = batch, -1
        end
      end
      -- an integer input keeps its dtype (a text model's token ids: an Embedding's indices; a
      -- uint8 image or a BOOL mask, u8: cast to floats)
      local integer = (v.dtype == "i64" or v.dtype == "i32" or v.dtype == "u8") and v.dtype
        or v.elem_type == C_BOOL and "u8" or nil
      local node = model.input(model_shape, { dtype = integer or dt, name = self:unique(v.name) })
      inputs[#inputs + 1] = node
      self.values[v.name] = { node = node, shape = shape, integer = integer }
      self.anchor = self.anchor or self.values[v.name]
    end
  end
  self.uses, self.readers, self.graph_outputs = {}, {}, {}
  for _, n in ipairs(f.nodes) do
    for _, o in ipairs(n.outputs) do self.producer[o] = n end
    for _, i in ipairs(n.inputs) do
      self.uses[i] = (self.uses[i] or 0) + 1
      self.readers[i] = self.readers[i] or {}
      table.insert(self.readers[i], n)
    end
  end
  for _, v in ipairs(f.outputs) do
    self.uses[v.name] = (self.uses[v.name] or 0) + 1
    self.graph_outputs[v.name] = true
  end
  for _, n in ipairs(f.nodes) do
    local convert = not self.done[n] and OPS[n.op_type] or function() end
    if not OPS[n.op_type] then
      raise(("%s: node %s: op type %s is not one tocha imports (tocha.onnx.OPS lists them)"):format(path, show(n.name),
        show(n.op_type)))
    end
    for k, a in pairs(n.attributes) do
      if type(a) == "table" and a.unsupported then self:fail(n, ("attribute %s: graphs and sparse tensors are not supported"):format(k)) end
    end
    -- An error of one of tocha's ops (a size it refuses) is named by the file and the node; a
    -- plain Lua error is a bug here and passes on as it is.
    self.failure = nil
    local ok, err = pcall(convert, self, n)
    if not ok then
      if self.failure then raise(self.failure) end
      local text = tostring(err)
      local bare = text:match("^[^\n]-:%d+: tocha[%w_.:]*: (.*)$") or text:match("^tocha[%w_.:]*: (.*)$")
      if not bare then error(err, 0) end
      self:fail(n, bare)
    end
  end
  local outputs = {}
  for i, v in ipairs(f.outputs) do
    local r = self.values[v.name]
    if not r then raise(("%s: output %s is made by no node"):format(path, show(v.name))) end
    if r.const then raise(("%s: output %s is a constant, not computed from the inputs"):format(path, show(v.name))) end
    if r.pending then self:materialize(r) end
    r = self:in_layout(r, nil)
    if r.node.op and r.node.op.is_view then -- a model's outputs are tensors of their own
      r = self:emit({ name = v.name, op_type = "output" }, Elementwise.new("identity", dt), { r }, nil, "output_" .. i)
    end
    outputs[i] = r.node
  end
  local m = model.new(inputs, outputs)
  m:train(false)
  m:load(batch, dev.name)
  local by_name = m:parameters()
  for _, p in ipairs(self.params) do
    if p.src then
      local full = p.node.name .. "." .. p.name
      local t = by_name[full]
      if t then -- (a node no output reads is not in the model)
        local v = parameter_value(self, p.src, t:shape(), t:dtype())
        if not v then
          raise(("%s: %s: the file's tensor has %s elements, the parameter's shape is %s"):format(path, full,
            numel((p.src.from or p.src).shape), op_base.shape_text(t:shape())))
        end
        t:copy(v)
      end
    end
  end
  m.onnx = f
  return m
end

errors.register(M, "onnx.")
return M
