-- tocha.ChannelBiasAdd: y = x + bias[c] along dimension 2 (NCHW's channels; x of 2 or more
-- dimensions), with its parameter "bias" of C values, forward and backward, every float dtype:
-- kernels/channel_bias_add.cu for the forward, reduction.cu's tocha_reduce for the backward (dx =
-- dy copied while the bias gradient is summed over the batch and the plane, in f32 for halves).
-- A RuntimeOp written here, so that it joins a tocha.Model as a layer with a parameter.
--
--   local bias = tocha.ChannelBiasAdd.new()            -- f32
--   local y = bias:forward(x, b)                        -- x [B, C, H, W], b [C]
--   local dx, db = bias:backward(dy)
--
-- The backward has three launches (the bias gradient of each (batch, channel) row of the plane,
-- finished over splits of the row where it is long, then summed over the batch), planned from
-- the shape alone as tocha.Reduce's are; a launch with nothing to do has a grid of 0 CTAs. Its
-- workspace (op:workspace_bytes) comes after the bias in `params`.
local device = require "tocha.device"
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local reduction = require "tocha.ops.reduction" -- the backward is a reduction: its plan and arguments
local raise = errors.raise

local M = {}

local ChannelBiasAdd = op.class("ChannelBiasAdd")
M.ChannelBiasAdd = ChannelBiasAdd

local address, input_of, one_input, launch_index = op.address, op.input_of, op.one_input, op.launch_index

-- ChannelBiasAdd.new([dtype [, block]]): dtype f32 (default), f64, f16 or bf16; block threads a
-- CTA, a power of two (default 256).
function ChannelBiasAdd.new(dtype_name, block)
  local dt = op.float_dtype(dtype_name, "dtype")
  block = reduction.block(block)
  local ctype = dtype.ctype(dt)
  local self = setmetatable({ kind = "channel_bias_add", dtype = dt, block_size = block,
    id = ("channel_bias_add__%s__%d"):format(dt, block) }, ChannelBiasAdd)
  self.kernel = kernel.new { source = op.source("channel_bias_add.cu"), name = "tocha_channel_bias_add",
    template_args = ctype, params = ("%s* x, %s* bias, %s* y, i64 total, i64 channels, i64 plane"):format(dt, dt, dt) }
  self.grad_kernel = kernel.new { source = op.source("reduction.cu"), name = "tocha_reduce",
    template_args = ctype .. ", 0",
    params = ("u8* x, i32 x_acc, u8* y, i32 y_acc, %s* copy, i64 outer, i64 n, i64 inner, i64 splits, f64 divisor, i32 rows"):format(dt) }
  self.backward_kernel = self.grad_kernel
  return self
end

-- x's shape as batch, channels, plane; checked.
local function split(shape, what)
  if type(shape) ~= "table" or #shape < 2 or #shape > 8 then
    raise(what .. ": expected a shape of 2 to 8 sizes (dimension 2 is the channels)")
  end
  local plane = 1
  for i, s in ipairs(shape) do
    if type(s) ~= "number" or s ~= math.floor(s) or s < 1 then
      raise(("%s[%d]: expected a positive size, got %s"):format(what, i, errors.show(s)))
    end
    if i > 2 then plane = plane * s end
  end
  return shape[1], shape[2], plane
end

-- ---- the RuntimeOp (tocha.op's defaults for the rest) ----

function ChannelBiasAdd:param_names() return { "bias" } end
function ChannelBiasAdd:param_shapes(input_shapes)
  local _, channels = split(one_input(input_shapes), "inputs[1]")
  return { { channels } }
end
function ChannelBiasAdd:n_backward_launches() return 3 end

function ChannelBiasAdd:compute_concrete_output_shape(input_shapes)
  local shape = one_input(input_shapes)
  split(shape, "inputs[1]")
  local out = {}
  for i, s in ipairs(shape) do out[i] = s end
  return out
end

local function elements(shape)
  local batch, channels, plane = split(shape, "output_shape")
  return batch * channels * plane, channels, plane
end

function ChannelBiasAdd:grid(output_shape)
  local total = elements(output_shape)
  local per = math.max(1, 16 / dtype.size(self.dtype))
  return { math.max(1, math.min(math.ceil(total / per / self.block_size), 2 ^ 31 - 1)), 1, 1 }
end

function ChannelBiasAdd:pack_args(inputs, params, output, output_shape)
  local x, shape = input_of(inputs)
  local total, channels, plane = elements(output_shape or shape)
  params = op.list(params, "params")
  if params[1] == nil then raise("params: expected {bias}") end
  return { x, address(params[1], "params[1]"), address(output, "output"), total, channels, plane }
end

-- The backward's launches for x's shape: {pass, src, dst} descriptions over the buffers dy (in),
-- dx (copy), db (out) and the workspace's two halves a and b; and the workspace's bytes.
function ChannelBiasAdd:backward_plan(shape)
  local batch, channels, plane = split(shape, "inputs[1]")
  local rows = reduction.plan(batch * channels, plane, 1, self.block_size, self.dtype)
  local acc = self.dtype == "f64" and 8 or 4
  local a = reduction.partial_bytes(rows, self.dtype)
  if #rows == 1 and batch > 1 then a = batch * channels * acc end
  local b = (#rows == 2 and batch > 1) and batch * channels * acc or 0
  local steps = {}
  for i, p in ipairs(rows) do steps[i] = { pass = p } end
  if batch > 1 then
    steps[#steps + 1] = { pass = { outer = 1, n = batch, inner = channels, splits = 1, rows = 0, acc = true } }
  end
  -- Buffers: the first step reads dy, each later one the previous one's output; the last writes
  -- db; the others alternate between the halves a and b.
  local slots = { "a", "b" }
  for i, step in ipairs(steps) do
    step.src = i == 1 and "dy" or steps[i - 1].dst
    step.dst = i == #steps and "db" or slots[(i - 1) % 2 + 1]
  end
  return steps, a + b, a
end

function ChannelBiasAdd:workspace_bytes(input_shapes)
  local _, bytes = self:backward_plan(one_input(input_shapes))
  return bytes
end

function ChannelBiasAdd:backward_grid_for_launch(i, input_shapes)
  local steps = self:backward_plan(one_input(input_shapes))
  launch_index(i, 3)
  if not steps[i] then return { 0, 0, 0 } end
  return reduction.pass_grid(steps[i].pass, self.block_size, self.dtype)
end
ChannelBiasAdd.backward_grid = function(self, ...) return self:backward_grid_for_launch(1, ...) end
ChannelBiasAdd.pack_backward_args = function(self, ...) return self:pack_backward_args_for_launch(1, ...) end

-- Launch i's arguments; buffers by name (dy, dx, db: addresses; ws: the workspace's).
local function step_args(steps, half, i, buffers)
  local step = steps[i]
  local function at(name)
    if name == "a" then return buffers.ws end
    if name == "b" then return buffers.ws + half end
    return buffers[name]
  end
  local src_acc = (step.src == "a" or step.src == "b") and 1 or 0
  local dst_acc = (step.dst == "a" or step.dst == "b") and 1 or 0
  return reduction.args(step.pass, at(step.src), src_acc, at(step.dst), dst_acc, i == 1 and buffers.dx or 0, 1)
end

function ChannelBiasAdd:pack_backward_args_for_launch(i, inputs, params, _, _, grad_output, _, grad_inputs, grad_params)
  local _, shape = input_of(inputs)
  local steps, bytes, half = self:backward_plan(shape)
  launch_index(i, 3)
  if not steps[i] then return {} end
  params = op.list(params, "params")
  local ws = params[2] or 0
  if bytes > 0 and address(ws, "params[2]") == 0 then
    raise("params: the backward needs its workspace (op:workspace_bytes) after the bias")
  end
  grad_inputs, grad_params = op.list(grad_inputs, "grad_inputs"), op.list(grad_params, "grad_params")
  return step_args(steps, half, i, { dy = address(grad_output, "grad_output"), dx = address(grad_inputs[1], "grad_inputs[1]"),
    db = address(grad_params[1], "grad_params[1]"), ws = address(ws, "params[2]") })
end

-- ---- direct calls ----

local check_tensor, same_shape = op.check_tensor, op.same_shape

local function run_forward(self, x, bias, y)
  local _, channels = split(x:shape(), "x")
  check_tensor(self, bias, "bias", x)
  same_shape(bias, { channels }, "bias", "one value a channel of x")
  if y == nil then y = op.alloc_like(x:shape(), x) end
  check_tensor(self, y, "y", x)
  same_shape(y, x:shape(), "y", "x's")
  op.check_aliasing({ { y, "y" } }, { { x, "x" }, { bias, "bias" } })
  local shape = x:shape()
  op.launch_packed(self.kernel, device.wrap(x.dev), self:grid(shape), self:block(),
    self:pack_args({ x }, { bias }, y, shape))
  return y
end

-- op:forward(x, bias [, y [, opts]]) -> y, allocated when not given. opts.stream: the stream.
function ChannelBiasAdd:forward(x, bias, y, opts)
  check_tensor(self, x, "x")
  local r = op.on_stream(opts, x, run_forward, self, x, bias, y)
  return r
end

local function run_backward(self, dy, dx, db)
  local shape = dy:shape()
  local _, channels = split(shape, "dy")
  if dx == nil then dx = op.alloc_like(shape, dy) end
  check_tensor(self, dx, "dx", dy)
  same_shape(dx, shape, "dx", "dy's")
  if db == nil then db = op.alloc_like({ channels }, dy) end
  check_tensor(self, db, "dbias", dy)
  same_shape(db, { channels }, "dbias", "one value a channel of dy")
  op.check_aliasing({ { dx, "dx" }, { db, "dbias" } }, { { dy, "dy" } })
  local steps, bytes, half = self:backward_plan(shape)
  reduction.run_launches(self.grad_kernel, device.wrap(dy.dev), self.block_size, #steps, bytes,
    function(i) return reduction.pass_grid(steps[i].pass, self.block_size, self.dtype) end,
    function(i, ws) return step_args(steps, half, i, { dy = dy.data, dx = dx.data, db = db.data, ws = ws }) end)
  return dx, db
end

-- op:backward(dy [, dx [, dbias [, opts]]]) -> dx, dbias (allocated when not given).
function ChannelBiasAdd:backward(dy, dx, db, opts)
  check_tensor(self, dy, "dy")
  local a, b = op.on_stream(opts, dy, run_backward, self, dy, dx, db)
  return a, b
end

op.finish(ChannelBiasAdd)
return M
