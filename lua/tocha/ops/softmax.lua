-- tocha.Softmax and tocha.LogSoftmax: softmax and log-softmax along a dimension, forward and
-- backward, every float dtype (halves computed in f32): kernels/softmax.cu with the dtype and
-- the form baked in, behind RuntimeOps, so that they join a tocha.Model (x:softmax(dim) is the
-- eager method over the same kernel).
--
--   local sm = tocha.Softmax.new(2)            -- dim 2 (1-based; -1 the last)
--   local y = sm:forward(x)
--   local dx = sm:backward(x, y, dy)           -- from the forward's output y
--
-- A row (inner size 1) is a team's (lanes of a warp, or a CTA: tensor_reduce.lua's
-- softmax_mapping), held in registers where it is whole aligned 16-byte groups, at most 32
-- elements (16 of f64) a member: up to 1024 elements on a warp, 8 to 32 KB on a CTA; a
-- dimension that is not the last is walked by a thread a column.
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local raise = errors.raise

local M = {}

local BLOCK = 256

local function make(class, dim, dtype_name, log)
  if dim == nil then raise("dim: expected a dimension (1-based; -1 the last), got nil") end
  dim = op.integer(dim, "dim")
  if dim == 0 then raise("dim: expected 1 to the tensor's dimensions (or -1 for the last), got 0") end
  local dt = op.float_dtype(dtype_name, "dtype")
  local self = setmetatable({ kind = log and "log_softmax" or "softmax", dim = dim, dtype = dt, block_size = BLOCK,
    log = log, id = ("%s__%d__%s"):format(log and "log_softmax" or "softmax", dim, dt) }, class)
  local source, targs = op.source("softmax.cu"), ("%s, %d"):format(dtype.ctype(dt), log and 1 or 0)
  self.kernel = kernel.new { source = source, name = "tocha_softmax", template_args = targs,
    params = ("%s* x, %s* y, i64 outer, i64 n, i64 inner, i32 rows"):format(dt, dt) }
  self.grad_kernel = kernel.new { source = source, name = "tocha_softmax_backward", template_args = targs,
    params = ("%s* y, %s* dy, %s* dx, i64 outer, i64 n, i64 inner, i32 rows"):format(dt, dt, dt) }
  self.backward_kernel = self.grad_kernel
  return self
end

local Methods = {}

-- x's shape as [outer, n, inner] along the op's dimension, and the kernel's mapping and grid.
function Methods:view(shape, what)
  op.check_shape(shape, what)
  local d = self.dim < 0 and #shape + 1 + self.dim or self.dim
  if d < 1 or d > #shape then raise(("%s: dim %d is outside its %d dimensions"):format(what, self.dim, #shape)) end
  local outer, inner = op.numel(shape, 1, d - 1), op.numel(shape, d + 1)
  local n = shape[d]
  local rows, grid = require("tocha.tensor_reduce").softmax_mapping(outer, n, inner, BLOCK, dtype.size(self.dtype))
  return outer, n, inner, rows, grid
end

function Methods:compute_concrete_output_shape(input_shapes)
  local shape = op.one_input(input_shapes)
  self:view(shape, "inputs[1]")
  local out = {}
  for i, s in ipairs(shape) do out[i] = s end
  return out
end

function Methods:grid(output_shape)
  local _, _, _, _, grid = self:view(output_shape, "output_shape")
  return grid
end

function Methods:pack_args(inputs, _, output, output_shape)
  local x, shape = op.input_of(inputs)
  local outer, n, inner, rows = self:view(shape, "inputs[1]")
  op.check_output_shape(output_shape or shape, shape, "x's")
  return { x, op.address(output, "output"), outer, n, inner, rows }
end

function Methods:backward_grid(input_shapes)
  local _, _, _, _, grid = self:view(op.one_input(input_shapes), "inputs[1]")
  return grid
end

-- The backward reads the forward's output (output) and grad_output.
function Methods:pack_backward_args(inputs, _, output, _, grad_output, _, grad_inputs)
  local _, shape = op.input_of(inputs)
  local outer, n, inner, rows = self:view(shape, "inputs[1]")
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  if output == nil or op.address(output, "output") == 0 then
    raise("output: the backward reads the forward's output: give it (op:backward(x, y, dy))")
  end
  return { op.address(output, "output"), op.address(grad_output, "grad_output"),
    op.address(grad_inputs[1], "grad_inputs[1]"), outer, n, inner, rows }
end

local function run_backward(self, x, y, dy, dx)
  local shape = x:shape()
  op.check_tensor(self, y, "y", x)
  op.same_shape(y, shape, "y", "x's")
  op.check_tensor(self, dy, "dy", x)
  op.same_shape(dy, shape, "dy", "x's")
  if dx == nil then dx = op.alloc_like(shape, x) end
  op.check_tensor(self, dx, "dx", x)
  op.same_shape(dx, shape, "dx", "x's")
  op.check_aliasing({ { dx, "dx" } }, { { y, "y" }, { dy, "dy" } })
  op.launch_packed(self.grad_kernel, device.wrap(x.dev), self:backward_grid({ shape }), self:backward_block(),
    self:pack_backward_args({ x }, {}, y, shape, dy, 0, { dx }))
  return dx
end

-- op:backward(x, y, dy [, dx [, opts]]) -> dx, with y the forward's output.
function Methods:backward(x, y, dy, dx, opts)
  op.check_tensor(self, x, "x")
  local r = op.on_stream(opts, x, run_backward, self, x, y, dy, dx)
  return r
end

local function softmax_class(name, log)
  local class = op.class(name)
  for k, fn in pairs(Methods) do class[k] = fn end
  -- Class.new(dim [, dtype]): along dim (1-based, negative from the end), dtype f32 by default.
  function class.new(dim, dtype_name)
    local self = make(class, dim, dtype_name, log)
    return self
  end
  op.finish(class)
  return class
end

M.Softmax = softmax_class("Softmax", false)
M.LogSoftmax = softmax_class("LogSoftmax", true)

return M
