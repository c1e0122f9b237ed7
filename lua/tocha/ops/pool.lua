-- tocha.MaxPool2d, tocha.AvgPool2d, tocha.AdaptiveAvgPool2d: 2-D pooling of NCHW tensors,
-- forward and backward, every float dtype (halves computed in f32): kernels/pool2d.cu with the
-- window baked in at construction, behind RuntimeOps, so that they join a tocha.Model.
--
--   local pool = tocha.MaxPool2d.new { kernel_size = 3, stride = 2, padding = 1 }
--   local y = pool:forward(x)                  -- [B, C, H, W] -> [B, C, OH, OW]
--   local dx = pool:backward(x, dy)            -- dy to the element each window took
--   local avg = tocha.AvgPool2d.new { kernel_size = 2, ceil_mode = true, count_include_pad = false }
--   local gap = tocha.AdaptiveAvgPool2d.new { output_size = 1 }      -- global average pooling
--
-- Options as PyTorch's nn.MaxPool2d / AvgPool2d / AdaptiveAvgPool2d: sizes a number or {h, w};
-- stride defaults to kernel_size; padding at most half the (dilated) kernel; ceil_mode rounds
-- the output size up, a last window starting in the padding dropped as PyTorch does.
-- dtype (default f32) and block (threads a CTA, default 256) too. layout "nhwc" pools
-- channels-last tensors ([B, H, W, C] -> [B, OH, OW, C]; forward a thread an output element,
-- backward a thread an input element, channels fastest), "nchw" (the default) NCHW ones.
--
-- The host picks each launch's mapping from the shapes and passes it as the kernels' `plan`
-- (kernels/pool2d.cu says what each does): adaptive pooling to 1 x 1 reads each plane with a
-- warp forward; adaptive windows that do not overlap take an elementwise backward; max pooling's
-- backward goes by tiles of windows whose picks are found once into shared memory (M.max_tile).
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local tensor_reduce = require "tocha.tensor_reduce"
local raise = errors.raise

local M = {}

local MODE = { max = 0, avg = 1, adaptive = 2 }

-- A size option: a positive (or, with zero_ok, non-negative) integer or {h, w}; default when nil.
local function pair(v, what, default, zero_ok)
  if v == nil then v = default end
  if type(v) == "number" then v = { v, v } end
  if type(v) ~= "table" or #v ~= 2 then raise(("%s: expected a number or {h, w}, got %s"):format(what, errors.show(v))) end
  for i = 1, 2 do
    local s = v[i]
    if type(s) ~= "number" or s ~= math.floor(s) or s < (zero_ok and 0 or 1) or s > 2 ^ 20 then
      raise(("%s: expected %s integers, got %s"):format(what, zero_ok and "non-negative" or "positive", errors.show(s)))
    end
  end
  return { v[1], v[2] }
end

local KNOWN = {
  max = { kernel_size = true, stride = true, padding = true, dilation = true, ceil_mode = "boolean", dtype = true, block = true,
    layout = true },
  avg = { kernel_size = true, stride = true, padding = true, ceil_mode = "boolean", count_include_pad = "boolean", dtype = true,
    block = true, layout = true },
  adaptive = { output_size = true, dtype = true, block = true, layout = true },
}

local function make(class, mode, opts)
  local name = class.op_class_name
  opts = op.options(opts, KNOWN[mode], "tocha." .. name)
  local dt = op.float_dtype(opts.dtype, "dtype")
  local block = op.flat_block(opts.block or 256)
  local layout = opts.layout or "nchw"
  if layout ~= "nchw" and layout ~= "nhwc" then raise(("layout: expected \"nchw\" or \"nhwc\", got %s"):format(errors.show(layout))) end
  local self = setmetatable({ kind = name:lower(), dtype = dt, block_size = block, mode = mode, layout = layout }, class)
  local k, s, p, d = { 1, 1 }, { 1, 1 }, { 0, 0 }, { 1, 1 }
  if mode == "adaptive" then
    if opts.output_size == nil then raise("output_size: expected a number or {h, w}, got nil") end
    self.output_size = pair(opts.output_size, "output_size")
  else
    if opts.kernel_size == nil then raise("kernel_size: expected a number or {h, w}, got nil") end
    k = pair(opts.kernel_size, "kernel_size")
    s = pair(opts.stride, "stride", k)
    p = pair(opts.padding, "padding", 0, true)
    d = pair(opts.dilation, "dilation", 1)
    for i = 1, 2 do
      -- PyTorch's rule: padding at most half the effective kernel.
      if p[i] * 2 > (k[i] - 1) * d[i] + 1 then
        raise(("padding: %d is more than half the kernel's extent %d"):format(p[i], (k[i] - 1) * d[i] + 1))
      end
    end
    self.ceil_mode = opts.ceil_mode == true
    self.count_include_pad = opts.count_include_pad ~= false
  end
  self.kernel_size, self.stride, self.padding, self.dilation = k, s, p, d
  local targs = ("%s, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d"):format(dtype.ctype(dt), MODE[mode], k[1], k[2], s[1], s[2],
    p[1], p[2], d[1], d[2], (mode == "avg" and self.count_include_pad) and 1 or 0)
  self.id = ("%s__%s__%s%s"):format(name:lower(), dt, targs:gsub("[^%d]+", "_"), layout == "nhwc" and "__nhwc" or "")
  local source = op.source("pool2d.cu")
  if layout == "nhwc" then
    self.kernel = kernel.new { source = source, name = "tocha_pool2d_nhwc", template_args = targs,
      params = ("%s* x, %s* y, i64 n, i32 C, i32 H, i32 W, i32 OH, i32 OW"):format(dt, dt) }
    self.grad_kernel = kernel.new { source = source, name = "tocha_pool2d_nhwc_backward", template_args = targs,
      params = ("%s* x, %s* dy, %s* dx, i64 n, i32 C, i32 H, i32 W, i32 OH, i32 OW"):format(dt, dt, dt) }
    self.backward_kernel = self.grad_kernel
    return self
  end
  self.kernel = kernel.new { source = source, name = "tocha_pool2d", template_args = targs,
    params = ("%s* x, %s* y, i64 planes, i32 H, i32 W, i32 OH, i32 OW, i32 plan"):format(dt, dt) }
  self.grad_kernel = kernel.new { source = source, name = "tocha_pool2d_backward", template_args = targs,
    params = ("%s* x, %s* dy, %s* dx, i64 planes, i32 H, i32 W, i32 OH, i32 OW, i32 plan"):format(dt, dt, dt) }
  self.backward_kernel = self.grad_kernel
  return self
end

-- One output size of a windowed pool (PyTorch's pooling_output_shape).
local function out_size(n, k, s, p, d, ceil)
  local span = n + 2 * p - d * (k - 1) - 1
  local o = math.floor((span + (ceil and s - 1 or 0)) / s) + 1
  if ceil and (o - 1) * s >= n + p then o = o - 1 end
  return o
end

local Methods = {}

-- A shape in the op's layout as NCHW, and back.
local function as_nchw(self, s) return self.layout == "nhwc" and { s[1], s[4], s[2], s[3] } or s end
local function as_layout(self, s) return self.layout == "nhwc" and { s[1], s[3], s[4], s[2] } or s end

-- [B, C, H, W] -> [B, C, OH, OW] (layout nhwc: [B, H, W, C] -> [B, OH, OW, C]).
function Methods:compute_concrete_output_shape(input_shapes)
  local shape = op.one_input(input_shapes)
  op.check_shape(shape, "inputs[1]")
  if #shape ~= 4 then
    raise(("inputs[1]: expected an %s shape of 4 sizes, got %d"):format(self.layout:upper(), #shape))
  end
  shape = as_nchw(self, shape)
  if self.mode == "adaptive" then return as_layout(self, { shape[1], shape[2], self.output_size[1], self.output_size[2] }) end
  local out = { shape[1], shape[2] }
  for i = 1, 2 do
    local n = shape[2 + i]
    local o = out_size(n, self.kernel_size[i], self.stride[i], self.padding[i], self.dilation[i], self.ceil_mode)
    if o < 1 then
      raise(("inputs[1]: a %s of %d is smaller than the window (kernel %d, dilation %d, padding %d)"):format(
        i == 1 and "height" or "width", n, self.kernel_size[i], self.dilation[i], self.padding[i]))
    end
    out[2 + i] = o
  end
  if shape[3] > 2 ^ 31 - 1 or shape[4] > 2 ^ 31 - 1 then raise("inputs[1]: a plane of 2^31 or more rows or columns") end
  return as_layout(self, out)
end

local function grid_of(self, elements)
  return { math.max(1, math.min(math.ceil(elements / self.block_size), 2 ^ 31 - 1)), 1, 1 }
end

local TILE = 256 -- windows a tile of the max backward (the kernel's POOL_TILE)
local SHARED = 24576 -- the most shared memory a tile's slots take (the kernel's pool_slots)

-- The max backward's tile width in windows for OW windows a row (8, 16 or 32; the height is
-- TILE / width), or 0 where a tile and its halo would not fit in shared memory (the kernel
-- then walks each input element's windows); the same rule as the kernel's pool_slots.
function M.max_tile(k, s, d, OW, dt)
  local hh, hw = math.floor((k[1] - 1) * d[1] / s[1]), math.floor((k[2] - 1) * d[2] / s[2])
  local slots = TILE + 32 * (hh + hw) + hh * hw
  if slots * (4 + (dt == "f64" and 8 or 4)) > SHARED then return 0 end
  return OW <= 8 and 8 or OW <= 16 and 16 or 32
end

-- Adaptive pooling to 1 x 1 gives each plane a team of lanes (pool2d.cu's pool_global_mean):
-- as many as tocha's row kernels give a row of that length (tensor_reduce's team_mapping: about
-- three 16-byte groups a lane; a warp for planes long enough for a CTA). The grid, which sees
-- the output's shape alone, gives each plane 4 lanes' worth of threads; the kernel strides
-- over the planes, so that any team is covered.
local PLANE_THREADS = 4
local function global_team(self, H, W)
  local lanes = tensor_reduce.team_mapping(1, H * W, 1, self.block_size, dtype.size(self.dtype))
  return lanes > 0 and lanes or 32
end

-- The forward's plan: the team of adaptive pooling to 1 x 1, else 0 (a thread an output).
local function forward_plan(self, H, W, OH, OW)
  if self.mode == "adaptive" and OH == 1 and OW == 1 then return global_team(self, H, W) end
  return 0
end

function Methods:grid(output_shape)
  op.check_shape(output_shape, "output_shape")
  if self.layout == "nhwc" then -- a thread a 16-byte unit of channels where they are whole units
    local V = 16 / dtype.size(self.dtype)
    return grid_of(self, output_shape[4] % V == 0 and op.numel(output_shape) / V or op.numel(output_shape))
  end
  if self.mode == "adaptive" and output_shape[3] == 1 and output_shape[4] == 1 then
    return grid_of(self, output_shape[1] * output_shape[2] * PLANE_THREADS)
  end
  return grid_of(self, op.numel(output_shape))
end

local function sizes(self, inputs, output_shape)
  local x, shape = op.input_of(inputs)
  local out = self:compute_concrete_output_shape({ shape })
  if output_shape then op.check_output_shape(output_shape, out, "the pool's output for its input") end
  return x, shape[1] * shape[2], shape[3], shape[4], out[3], out[4], out
end

function Methods:pack_args(inputs, _, output, output_shape)
  if self.layout == "nhwc" then
    local x, shape = op.input_of(inputs)
    local out = self:compute_concrete_output_shape({ shape })
    if output_shape then op.check_output_shape(output_shape, out, "the pool's output for its input") end
    return { x, op.address(output, "output"), shape[1], shape[4], shape[2], shape[3], out[2], out[3] }
  end
  local x, planes, H, W, OH, OW = sizes(self, inputs, output_shape)
  return { x, op.address(output, "output"), planes, H, W, OH, OW, forward_plan(self, H, W, OH, OW) }
end

-- The backward's plan for planes of H x W pooled to OH x OW: max, the tile width
-- (M.max_tile); adaptive, 2 to 1 x 1 from planes of a 16-byte group or more (a division a
-- group), 1 where windows do not overlap (an elementwise pass); else 0.
local function backward_plan(self, H, W, OH, OW)
  if self.mode == "max" then return M.max_tile(self.kernel_size, self.stride, self.dilation, OW, self.dtype) end
  if self.mode == "adaptive" and OH == 1 and OW == 1 and H * W >= 16 / dtype.size(self.dtype) then return 2 end
  if self.mode == "adaptive" and H % OH == 0 and W % OW == 0 then return 1 end
  return 0
end

function Methods:backward_grid(input_shapes)
  local shape = op.one_input(input_shapes)
  op.check_shape(shape, "inputs[1]")
  local out = self:compute_concrete_output_shape({ shape })
  if self.layout == "nhwc" then -- a thread a 16-byte unit of channels where they are whole units
    local V = 16 / dtype.size(self.dtype)
    return grid_of(self, shape[4] % V == 0 and op.numel(shape) / V or op.numel(shape))
  end
  local plan = backward_plan(self, shape[3], shape[4], out[3], out[4])
  if plan == 0 then return grid_of(self, op.numel(shape)) end
  if self.mode == "max" then
    local tiles = shape[1] * shape[2] * math.ceil(out[3] / (TILE / plan)) * math.ceil(out[4] / plan)
    return { math.max(1, math.min(tiles, 2 ^ 31 - 1)), 1, 1 }
  end
  -- A thread a 16-byte group, and one for each element outside whole groups (fewer than two
  -- groups' worth).
  local V = 16 / dtype.size(self.dtype)
  return grid_of(self, math.ceil(op.numel(shape) / V) + 2 * V)
end

function Methods:pack_backward_args(inputs, _, _, output_shape, grad_output, _, grad_inputs)
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  if self.layout == "nhwc" then
    local x, shape = op.input_of(inputs)
    local out = self:compute_concrete_output_shape({ shape })
    if output_shape then op.check_output_shape(output_shape, out, "the pool's output for its input") end
    return { x, op.address(grad_output, "grad_output"), op.address(grad_inputs[1], "grad_inputs[1]"), shape[1], shape[4],
      shape[2], shape[3], out[2], out[3] }
  end
  local x, planes, H, W, OH, OW = sizes(self, inputs, output_shape)
  return { x, op.address(grad_output, "grad_output"), op.address(grad_inputs[1], "grad_inputs[1]"), planes, H, W, OH, OW,
    backward_plan(self, H, W, OH, OW) }
end

-- A pool class: its constructor (Class.new(opts)) and the RuntimeOp methods above.
local function pool_class(name, mode)
  local class = op.class(name)
  for k, fn in pairs(Methods) do class[k] = fn end
  function class.new(opts)
    local self = make(class, mode, opts or {})
    return self
  end
  op.finish(class)
  return class
end

M.MaxPool2d = pool_class("MaxPool2d", "max")
M.AvgPool2d = pool_class("AvgPool2d", "avg")
M.AdaptiveAvgPool2d = pool_class("AdaptiveAvgPool2d", "adaptive")
M.output_size = out_size

return M
