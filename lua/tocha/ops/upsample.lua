-- tocha.upsample: teeny-kernels' kernels, UpsampleNearest2dForward and UpsampleNearest2dBackward:
-- kernels/upsample_nearest2d_{forward,backward}.cu with the dtype, the scales and the block
-- width baked in, the forward a RuntimeOp (tocha.op) whose backward is the backward kernel.
--
--   local up = tocha.UpsampleNearest2dForward.new(2, 2, 128)        -- f32 unless a dtype is given
--   local y  = up:forward(x)        -- x [B, C, H, W] -> y [B, C, 2H, 2W]
--   local dx = up:backward(x, dy)   -- through UpsampleNearest2dBackward(2, 2, block_iw)
--   local cl = tocha.UpsampleNearest2dForward.new(2, 2, nil, "f16", { layout = "nhwc" })
--   cl:forward(x)                   -- x [B, H, W, C] -> y [B, 2H, 2W, C] (channels last)
--
-- Fields, as teeny-kernels' are: name, id ("upsample_nearest2d_forward__f32__2__2__128"), scale_h,
-- scale_w, block_ow / block_iw, kernel_source (the plan and the .cu file), entry_point_source,
-- source (kernel_source .. "\n\n" .. entry_point_source), entry_point_name, hash (of source),
-- and args_signature, the parameter list a raw launch of .kernel is checked against; layout
-- ("nchw" or "nhwc"; teeny-kernels' is NCHW, and NHWC kernels' ids end in "__nhwc"). Every
-- method of teeny-kernels' RuntimeOp trait is callable on the forward kernel, with launch
-- indices counted from 1 as Lua counts.
--
-- How a launch is cut into threads' work is kernels/upsample_plan.h, compiled ahead of each
-- kernel; M.plan below is its arithmetic for sizing grids (spec/upsample_plan_spec.lua runs the
-- header's on the device beside it, case by case). The kernels loop with a grid stride, so the
-- grid only decides how many threads share the work, never what is written.
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local tensor = require "tocha.tensor"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local raise = errors.raise

local M = {}

-- The block width new() takes when given none. The kernels give each thread one 16-byte vector
-- or run per step of a flat grid-stride loop, so the width only decides how CTAs fill the SMs;
-- on the H200, over every seventh case of the three suites at widths 32 to 1024
-- (bench/upsample.lua --quick --blocks), 128 is the best median for both kernels in both
-- layouts, within 0.7% of every width from 64 to 512, and no case's best beats it by more than
-- the noise of its size.
local DEFAULT_BLOCK = 128
-- The largest scale the kernels are built for: their loops unroll over the scales.
local MAX_SCALE = 64
local INT32_MAX = 2 ^ 31 - 1

-- ---- the plan: kernels/upsample_plan.h's arithmetic, for the grids ----

local plan = {}
M.plan = plan

-- One launch's rows in elements: in_rows (B * C * H, or B * H in NHWC), width (an output row:
-- OW, or OW * C), in_width (an input row: W, or W * C) and pixel (1, or C).
function plan.rows(nhwc, b, c, h, w, ow)
  local pixel = nhwc and c or 1
  return { in_rows = b * h * (nhwc and 1 or c), width = ow * pixel, in_width = w * pixel, pixel = pixel }
end

-- Whether the forward stores each input row's 16-byte vectors to all its output rows (rows of
-- whole vectors, y on a 16-byte boundary as tocha's allocations are).
function plan.forward_whole_rows(rows, elem_size) return rows.width * elem_size % 16 == 0 end

-- The forward's 16-byte vectors: the input rows' when rows are whole vectors, else the flat
-- output's.
function plan.forward_vectors(rows, elem_size, scale_h)
  local v = 16 / elem_size
  if plan.forward_whole_rows(rows, elem_size) then return rows.in_rows * (rows.width / v) end
  return math.ceil(rows.in_rows * scale_h * rows.width / v)
end

-- The backward's run, the dx elements one thread sums and stores together: 16 bytes in NHWC;
-- in NCHW the largest power of two of elements whose dy share of a row is at most 16 bytes.
function plan.backward_run(elem_size, scale_w, nhwc)
  local v = 16 / elem_size
  if nhwc then return v end
  local k = 1
  while 2 * k * scale_w <= v do k = 2 * k end
  return k
end

-- The backward's runs over dx.
function plan.backward_runs(rows, run) return math.ceil(rows.in_rows * rows.in_width / run) end

-- The runs one backward thread takes per step of its loop (the header says why).
function plan.backward_batch(elem_size, scale_h, scale_w, nhwc)
  local run = plan.backward_run(elem_size, scale_w, nhwc)
  local loads = nhwc and scale_h * scale_w or scale_h * math.ceil(run * scale_w * elem_size / 16)
  if not nhwc then return loads == 1 and 2 or 1 end
  return loads >= 4 and 1 or math.ceil(4 / loads)
end

-- ---- constants and kernels ----

local LAYOUTS = { nchw = true, nhwc = true }
local DIMS = { nchw = "[B, C, H, W]", nhwc = "[B, H, W, C]" }
local H_AXIS = { nchw = 3, nhwc = 2 } -- 1-based axis of H; W follows it

local function check_scale(v, what)
  op.integer(v, what)
  if v < 1 or v > MAX_SCALE then
    raise(("%s: expected an integer from 1 to %d, got %d"):format(what, MAX_SCALE, v))
  end
  return v
end

local function check_block(v, what)
  op.integer(v, what)
  if v < 32 or v > 1024 or v % 32 ~= 0 then
    raise(("%s: expected a multiple of 32 from 32 to 1024, got %d"):format(what, v))
  end
  return v
end

-- The options table of new(): { layout = "nchw" | "nhwc", block_iw = n (forward only) }.
local function options(opts, keys)
  if opts == nil then return {} end
  if type(opts) ~= "table" then raise(("options: expected a table, got %s"):format(type(opts))) end
  for k in pairs(opts) do
    if not keys[k] then raise(("options: unknown option %s"):format(errors.show(k))) end
  end
  if opts.layout ~= nil and not LAYOUTS[opts.layout] then
    raise(("layout: expected \"nchw\" or \"nhwc\", got %s"):format(
      type(opts.layout) == "string" and ("\"" .. opts.layout .. "\"") or type(opts.layout)))
  end
  return opts
end

-- The kernel object of one direction ("forward" or "backward"): the fields above, its tocha
-- kernel, and how its launches are cut (`block`, the elements' size, the layout).
local function make(class, direction, scale_h, scale_w, block, dtype_name, layout)
  local name = "upsample_nearest2d_" .. direction
  local nhwc = layout == "nhwc"
  local source = op.source("upsample_plan.h") .. "\n" .. op.source(name .. ".cu")
  local src, dst = "x", "y"
  if direction == "backward" then src, dst = "dy", "dx" end
  local k = kernel.new {
    source = source,
    name = name,
    template_args = ("%s, %d, %d, %d%s"):format(dtype.ctype(dtype_name), scale_h, scale_w, block, nhwc and ", true" or ""),
    params = ("%s* %s, %s* %s, i32 B, i32 C, i32 H, i32 W, i32 OH, i32 OW"):format(dtype_name, src, dtype_name, dst),
  }
  return setmetatable({
    name = name,
    id = ("%s__%s__%d__%d__%d%s"):format(name, dtype_name, scale_h, scale_w, block, nhwc and "__nhwc" or ""),
    dtype = dtype_name,
    elem_size = dtype.size(dtype_name),
    scale_h = scale_h,
    scale_w = scale_w,
    layout = layout,
    nhwc = nhwc,
    block_size = block,
    kernel = k,
    kernel_source = source,
    entry_point_source = k.entry_point_source,
    source = k.source,
    entry_point_name = k.entry_point_name,
    hash = k:hash(),
    args_signature = k.params,
  }, class)
end

-- ---- shapes and grids ----

-- B, C, H, W of a 4-D shape in k's layout.
local function bchw(k, s)
  if k.nhwc then return s[1], s[4], s[2], s[3] end
  return s[1], s[2], s[3], s[4]
end

-- Checks an input shape (B, C, H, W in k's layout) and derives k's output shape; names the
-- argument. A row of the output (OW, or OW * C in NHWC) must fit in 32 bits.
local function output_shape(k, input, what)
  if #input ~= 4 then
    raise(("%s: expected a 4-D tensor %s, got %d-D"):format(what, DIMS[k.layout], #input))
  end
  for i = 1, 4 do
    if input[i] < 1 or input[i] > INT32_MAX then
      raise(("%s: size %d of dimension %d is outside 1..2147483647"):format(what, input[i], i))
    end
  end
  local h = H_AXIS[k.layout]
  local out = { input[1], input[2], input[3], input[4] }
  out[h], out[h + 1] = input[h] * k.scale_h, input[h + 1] * k.scale_w
  local row = k.nhwc and out[3] * out[4] or out[4]
  if out[h] > INT32_MAX or out[h + 1] > INT32_MAX or row > INT32_MAX then
    raise(("%s: the output %s has %s past 2147483647"):format(what, op.shape_text(out),
      row > INT32_MAX and out[h + 1] <= INT32_MAX and "a row (OW x C elements)" or "a dimension"))
  end
  return out
end

-- The input shape whose output is `output`, checked: 4-D, H and W multiples of the scales.
local function input_of_output(k, output)
  if #output ~= 4 then raise(("output_shape: expected 4-D, got %d-D"):format(#output)) end
  for i = 1, 4 do
    if output[i] < 1 or output[i] > INT32_MAX then
      raise(("output_shape: size %d of dimension %d is outside 1..2147483647"):format(output[i], i))
    end
  end
  local h = H_AXIS[k.layout]
  if output[h] % k.scale_h ~= 0 or output[h + 1] % k.scale_w ~= 0 then
    raise(("output_shape: height %d and width %d must be multiples of the scales %d and %d")
      :format(output[h], output[h + 1], k.scale_h, k.scale_w))
  end
  local input = { output[1], output[2], output[3], output[4] }
  input[h], input[h + 1] = output[h] / k.scale_h, output[h + 1] / k.scale_w
  return input
end

-- k's grid for an input (forward: x; backward: dx) of sizes b, c, h, w and output width ow:
-- the plan's work (vectors, or batches of runs) over k's block, at least one CTA, at most the
-- grid's limit.
local function grid_of(k, b, c, h, w, ow)
  local rows = plan.rows(k.nhwc, b, c, h, w, ow)
  local work, batch
  if k.name == "upsample_nearest2d_forward" then
    work, batch = plan.forward_vectors(rows, k.elem_size, k.scale_h), 1
  else
    work = plan.backward_runs(rows, plan.backward_run(k.elem_size, k.scale_w, k.nhwc))
    batch = plan.backward_batch(k.elem_size, k.scale_h, k.scale_w, k.nhwc)
  end
  local ctas = math.ceil(work / (batch * k.block_size))
  return { math.max(1, math.min(ctas, INT32_MAX)), 1, 1 }
end

local function grid_of_shape(k, input, output)
  local b, c, h, w = bchw(k, input)
  return grid_of(k, b, c, h, w, output[H_AXIS[k.layout] + 1])
end

-- The kernel's Args: src, dst, then B, C, H, W, OH, OW; `input` must be the input of `output`.
local function pack(k, input, output, src, dst)
  local want = output_shape(k, input, "inputs[1]")
  if not op.same_sizes(want, output) then
    raise(("output_shape: %s is not the output of inputs[1] %s"):format(op.shape_text(output), op.shape_text(input)))
  end
  local b, c, h, w = bchw(k, input)
  local oh = H_AXIS[k.layout]
  return { src, dst, b, c, h, w, output[oh], output[oh + 1] }
end

-- ---- direct calls ----

local function need_tensor(v, k, what)
  op.live_tensor(v, what)
  if v.ndim ~= 4 then raise(("%s: expected a 4-D tensor %s, got %d-D"):format(what, DIMS[k.layout], v.ndim)) end
end

local function check_dtype(k, t, what)
  op.live_tensor(t, what)
  if t.elem_type ~= k.dtype_id then
    raise(("%s: expected dtype %s (the kernel's), got %s"):format(what, k.dtype, t:dtype()))
  end
end

-- What a direct call on an input of a given shape launches: that shape's four sizes, the
-- output's (out), the grid and the kernel's B, C, H, W, OH, OW. k keeps the last one, so that
-- calls on one shape (a loop, a network's forward) compare four sizes instead of planning
-- again. `what` names the input in errors.
local function shape_plan(k, input, what)
  local d, p = input.dims, k.last
  if p and input.ndim == 4 and p[1] == d[0] and p[2] == d[1] and p[3] == d[2] and p[4] == d[3] then return p end
  local in_shape = input:shape()
  local out = output_shape(k, in_shape, what)
  local b, c, h, w = bchw(k, in_shape)
  local oh = H_AXIS[k.layout]
  p = { in_shape[1], in_shape[2], in_shape[3], in_shape[4], out = out, grid = grid_of(k, b, c, h, w, out[oh + 1]),
    b = b, c = c, h = h, w = w, oh = out[oh], ow = out[oh + 1] }
  k.last = p
  return p
end

local function has_sizes(t, sizes)
  local d = t.dims
  return t.ndim == 4 and d[0] == sizes[1] and d[1] == sizes[2] and d[2] == sizes[3] and d[3] == sizes[4]
end

-- Launches k from src to dst, `input` (the tensor on the input side: x, or dx) shaped as the
-- output's input, after the checks every direct call makes (names of src and dst as given).
local function launch(k, src, dst, input, output_of, names)
  check_dtype(k, src, names[1])
  check_dtype(k, dst, names[2])
  local p = shape_plan(k, input, output_of)
  local output = input == src and dst or src
  if not has_sizes(output, p.out) then
    raise(("%s: expected shape %s (%s), got %s"):format(output == dst and names[2] or names[1], op.shape_text(p.out),
      output == dst and "the forward's output" or "the forward's output for dx", op.shape_text(output:shape())))
  end
  if src.dev ~= dst.dev then
    raise(("%s: tensor is on %s, %s on %s"):format(names[2], device.wrap(dst.dev).name, names[1], device.wrap(src.dev).name))
  end
  op.check_aliasing_pair(dst, names[2], src, names[1])
  k.kernel:launch(p.grid, k.block_size, src, dst, p.b, p.c, p.h, p.w, p.oh, p.ow)
end

-- ---- UpsampleNearest2dBackward ----

local Backward = {}
Backward.__index = Backward
Backward.__tostring = function(k) return "tocha.UpsampleNearest2dBackward " .. k.id end
M.UpsampleNearest2dBackward = Backward

local function new_backward(scale_h, scale_w, block_iw, dtype_name, layout)
  local self = make(Backward, "backward", scale_h, scale_w, block_iw, dtype_name, layout)
  self.block_iw = block_iw
  self.dtype_id = dtype.id(dtype_name)
  return self
end

-- UpsampleNearest2dBackward.new(scale_h, scale_w [, block_iw [, dtype [, options]]]): without
-- block_iw, DEFAULT_BLOCK (128, the fastest measured); options { layout }.
function Backward.new(scale_h, scale_w, block_iw, dtype_name, opts)
  check_scale(scale_h, "scale_h")
  check_scale(scale_w, "scale_w")
  check_block(block_iw == nil and DEFAULT_BLOCK or block_iw, "block_iw")
  dtype_name = dtype_name or "f32"
  dtype.id(dtype_name)
  opts = options(opts, { layout = true })
  return new_backward(scale_h, scale_w, block_iw or DEFAULT_BLOCK, dtype_name, opts.layout or "nchw")
end

-- dx = the gradient for dy (allocated when not given, its H and W those of dy over the scales).
local function run_backward(self, dy, dx)
  if dx == nil then
    need_tensor(dy, self, "dy")
    local shape = dy:shape()
    local h = H_AXIS[self.layout]
    if shape[h] % self.scale_h ~= 0 or shape[h + 1] % self.scale_w ~= 0 then
      raise(("dy: height %d and width %d must be multiples of the scales %d and %d")
        :format(shape[h], shape[h + 1], self.scale_h, self.scale_w))
    end
    shape[h], shape[h + 1] = shape[h] / self.scale_h, shape[h + 1] / self.scale_w
    dx = op.alloc_like(shape, dy)
  end
  launch(self, dy, dx, dx, "dx", { "dy", "dx" })
  return dx
end

-- k:run(dy [, dx [, opts]]): dx = the gradient for dy. opts.stream: the stream to queue it on
-- (else the current one).
function Backward:run(dy, dx, opts)
  op.live_tensor(dy, "dy")
  local r = op.on_stream(opts, dy, run_backward, self, dy, dx)
  return r
end
Backward.backward = Backward.run

-- ---- UpsampleNearest2dForward ----

local Forward = op.class("UpsampleNearest2dForward")
M.UpsampleNearest2dForward = Forward
Forward.kind = "upsample"

-- UpsampleNearest2dForward.new(scale_h, scale_w [, block_ow [, dtype [, block_iw] [, options]]])
-- block_iw is the backward kernel's block width; it defaults to block_ow when block_ow is
-- given. Without them, each is DEFAULT_BLOCK (128, the fastest measured).
-- options: { layout = "nchw" (the default) or "nhwc", block_iw = n }, in block_iw's place or
-- after it.
function Forward.new(scale_h, scale_w, block_ow, dtype_name, block_iw, opts)
  if type(block_iw) == "table" and opts == nil then block_iw, opts = nil, block_iw end
  check_scale(scale_h, "scale_h")
  check_scale(scale_w, "scale_w")
  check_block(block_ow == nil and DEFAULT_BLOCK or block_ow, "block_ow")
  opts = options(opts, { layout = true, block_iw = true })
  if block_iw == nil then block_iw = opts.block_iw end
  if block_iw == nil then block_iw = block_ow or DEFAULT_BLOCK end
  check_block(block_iw, "block_iw")
  block_ow = block_ow or DEFAULT_BLOCK
  dtype_name = dtype_name or "f32"
  dtype.id(dtype_name)
  local layout = opts.layout or "nchw"
  local self = make(Forward, "forward", scale_h, scale_w, block_ow, dtype_name, layout)
  self.block_ow = block_ow
  self.dtype_id = dtype.id(dtype_name)
  self.backward_kernel = new_backward(scale_h, scale_w, block_iw, dtype_name, layout)
  self.grad_kernel = self.backward_kernel.kernel -- what a model launches with pack_backward_args
  return self
end

local function run_forward(self, x, y)
  if y == nil then
    need_tensor(x, self, "x")
    local out = shape_plan(self, x, "x").out
    y = tensor.alloc_4d(out[1], out[2], out[3], out[4], x.elem_type, device.wrap(x.dev))
  end
  launch(self, x, y, x, "x", { "x", "y" })
  return y
end

-- up:forward(x [, y [, opts]]): y = upsample(x); y is allocated on x's device when not given.
-- opts.stream: the stream to queue it on (else the current one).
function Forward:forward(x, y, opts)
  op.live_tensor(x, "x")
  local r = op.on_stream(opts, x, run_forward, self, x, y)
  return r
end

local function run_gradient(self, x, dy, dx)
  if dx == nil then
    need_tensor(x, self, "x")
    dx = op.alloc_like(x:shape(), x)
  elseif tensor.is_tensor(x) and tensor.is_tensor(dx) then
    tensor.same_shape(x, dx, "dx")
  end
  launch(self.backward_kernel, dy, dx, dx, "dx", { "dy", "dx" })
  return dx
end

-- up:backward(x, dy [, dx [, opts]]): dx, the gradient for dy, shaped like x; opts as forward's.
function Forward:backward(x, dy, dx, opts)
  op.live_tensor(dy, "dy")
  local r = op.on_stream(opts, dy, run_gradient, self, x, dy, dx)
  return r
end

-- ---- the RuntimeOp (tocha.op's defaults for the rest) ----

-- (Each method keeps its frame, no tail call, so that errors name it.)
function Forward:compute_concrete_output_shape(input_shapes)
  local out = output_shape(self, op.sizes(op.one_input(input_shapes), "inputs[1]"), "inputs[1]")
  return out
end

function Forward:grid(output_shape_)
  local output = op.sizes(output_shape_, "output_shape")
  local grid = grid_of_shape(self, input_of_output(self, output), output)
  return grid
end

function Forward:backward_grid(input_shapes, output_shape_)
  local input = op.sizes(op.one_input(input_shapes), "inputs[1]")
  if output_shape_ ~= nil then op.sizes(output_shape_, "output_shape") end
  local k = self.backward_kernel
  local grid = grid_of_shape(k, input, output_shape(k, input, "inputs[1]"))
  return grid
end

function Forward:backward_block() return { self.backward_kernel.block_size, 1, 1 } end

-- The one input of a pack method, a tensor or {address, shape}, checked against the output
-- tensor's room: its address and shape.
local function pack_input(self, inputs)
  if type(inputs) ~= "table" then raise("inputs: expected a list of tensors or {address, shape}") end
  local shapes, addresses = {}, {}
  for i = 1, #inputs do
    local item, what = inputs[i], ("inputs[%d]"):format(i)
    if tensor.is_tensor(item) then
      shapes[i] = item:shape()
      op.fits(self, item, shapes[i], what)
      addresses[i] = item.data
    elseif type(item) == "table" then
      shapes[i] = op.sizes(item[2], what)
      op.fits(self, item[1], shapes[i], what)
      addresses[i] = op.address(item[1], what)
    else
      raise(("%s: expected a tensor or {address, shape}, got %s"):format(what, type(item)))
    end
  end
  if #inputs ~= 1 then raise(("inputs: expected 1 input, got %d"):format(#inputs)) end
  return addresses[1], shapes[1]
end

local function address_or_zero(v, what)
  if v == nil then return op.address(0) end
  return op.address(v, what)
end

-- up:pack_args(inputs, params, output [, output_shape [, output_row_stride]]): the launch's Args.
function Forward:pack_args(inputs, _, output, output_shape_, row_stride)
  if row_stride ~= nil then op.integer(row_stride, "output_row_stride") end
  local src, input = pack_input(self, inputs)
  if output_shape_ == nil and tensor.is_tensor(output) then output_shape_ = output:shape() end
  local out = op.sizes(output_shape_, "output_shape")
  op.fits(self, output, out, "output")
  input_of_output(self, out)
  local args = pack(self, input, out, src, address_or_zero(output, "output"))
  return args
end

-- up:pack_backward_args(inputs, params, output, output_shape, grad_output,
--                       grad_output_row_stride, grad_inputs, grad_params)
function Forward:pack_backward_args(inputs, _, _, output_shape_, grad_output, _, grad_inputs)
  local _, input = pack_input(self, inputs)
  if output_shape_ == nil and tensor.is_tensor(grad_output) then output_shape_ = grad_output:shape() end
  local out = op.sizes(output_shape_, "output_shape")
  op.fits(self, grad_output, out, "grad_output")
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  op.fits(self, grad_inputs[1], input, "grad_inputs[1]")
  if #grad_inputs ~= 1 then raise(("grad_inputs: expected 1, got %d"):format(#grad_inputs)) end
  input_of_output(self, out)
  local args = pack(self.backward_kernel, input, out, address_or_zero(grad_output, "grad_output"),
    address_or_zero(grad_inputs[1], "grad_inputs[1]"))
  return args
end

op.finish(Forward)
-- The block width new() picks when given none (the same for every case).
function Forward.default_block() return DEFAULT_BLOCK end
errors.name(Forward.default_block, "UpsampleNearest2dForward.default_block")

-- The block widths tuned() chooses among.
local TUNED_BLOCKS = { 32, 64, 128, 256, 512, 1024 }

-- A tuner of one direction's block width: configurations of the widths, each a kernel object
-- of that direction, run as a direct call does (forward: x -> y; backward: dy -> dx).
local function block_tuner(direction)
  local configs = {}
  for i, b in ipairs(TUNED_BLOCKS) do configs[i] = { block = b } end
  return require("tocha.autotune").new {
    name = "upsample_nearest2d_" .. direction,
    configs = configs,
    key = function(src, _, k) return { src, k.scale_h, k.scale_w, k.layout } end,
    build = function(cfg) return cfg end, -- the kernel object is made per key, in launch
    launch = function(_, cfg, src, dst, k)
      local obj = k.objects[cfg.block]
      if direction == "forward" then obj:forward(src, dst) else obj:run(src, dst) end
    end,
    outputs = { 2 },
    reps = 5,
  }
end
local tuners = {}

-- UpsampleNearest2dForward.tuned(scale_h, scale_w, x [, options]): an upsample for inputs
-- shaped as x (its dtype, its device), whose forward and backward block widths tocha.autotune
-- chose from 32 to 1024 by timing both kernels on x's device (records kept on disk, so another
-- process choosing for the same case times nothing). options: { layout }.
function Forward.tuned(scale_h, scale_w, x, opts)
  check_scale(scale_h, "scale_h")
  check_scale(scale_w, "scale_w")
  op.live_tensor(x, "x")
  opts = options(opts, { layout = true })
  local layout = opts.layout or "nchw"
  local dtype_name = x:dtype()
  local objects = { scale_h = scale_h, scale_w = scale_w, layout = layout, objects = {} }
  for _, b in ipairs(TUNED_BLOCKS) do objects.objects[b] = Forward.new(scale_h, scale_w, b, dtype_name, { layout = layout }) end
  local y = objects.objects[DEFAULT_BLOCK]:forward(x)
  tuners.forward = tuners.forward or block_tuner("forward")
  local fwd = tuners.forward:choice(x, y, objects)
  local back = { scale_h = scale_h, scale_w = scale_w, layout = layout, objects = {} }
  for _, b in ipairs(TUNED_BLOCKS) do back.objects[b] = objects.objects[b].backward_kernel end
  local dx = op.alloc_like(x:shape(), x)
  tuners.backward = tuners.backward or block_tuner("backward")
  local bwd = tuners.backward:choice(y, dx, back)
  y:free()
  dx:free()
  return Forward.new(scale_h, scale_w, fwd.block, dtype_name, { layout = layout, block_iw = bwd.block })
end
errors.name(Forward.tuned, "UpsampleNearest2dForward.tuned")
errors.methods(Backward, "UpsampleNearest2dBackward:", function(k) return getmetatable(k) == Backward end, { new = true })
errors.name(Backward.new, "UpsampleNearest2dBackward.new")
return M
