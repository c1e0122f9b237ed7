-- tocha.Broadcast: y = g(a, b) for operands that broadcast as NumPy's and PyTorch's do (sizes
-- aligned from the last dimension, a size 1 or a missing dimension repeated), forward and
-- backward, every float dtype (halves computed in f32): kernels/broadcast.cu over
-- elementwise.cu's binary functions, behind a RuntimeOp, so that a model can hold a residual
-- add or a squeeze-and-excitation scale.
--
--   local scale = tocha.Broadcast.new("mul")          -- add, sub, mul, div, max, min
--   local y = scale:forward(x, s)                      -- x [N, C, H, W], s [N, C, 1, 1]
--   local dx, ds = scale:backward(x, s, dy)            -- ds summed over H and W
--
-- (Eager tensor math, x * s, broadcasts too; this is the op a model launches.) The backward
-- has two launches: each operand's gradient, a thread an element of the operand summing over
-- the output elements that read it.
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local raise = errors.raise

local M = {}

local Broadcast = op.class("Broadcast")
M.Broadcast = Broadcast

local BLOCK = 256
M.FUNCTIONS = { "add", "sub", "mul", "div", "max", "min" }
local known = {}
for _, f in ipairs(M.FUNCTIONS) do known[f] = true end

-- Broadcast.new(fn [, dtype]): fn one of M.FUNCTIONS; dtype f32 by default.
function Broadcast.new(fn, dtype_name)
  if type(fn) ~= "string" or not known[fn] then
    raise(("fn: expected one of %s, got %s"):format(table.concat(M.FUNCTIONS, ", "), errors.show(fn)))
  end
  local dt = op.float_dtype(dtype_name, "dtype")
  local self = setmetatable({ kind = "broadcast_" .. fn, fn = fn, dtype = dt, block_size = BLOCK,
    id = ("broadcast_%s__%s"):format(fn, dt) }, Broadcast)
  local source = op.source("elementwise.cu") .. "\n" .. op.source("broadcast.cu")
  local targs = ("%s, ew_fn_%s"):format(dtype.ctype(dt), fn)
  local sizes = {}
  for _, p in ipairs({ "d", "sa", "sb" }) do for i = 0, 7 do sizes[#sizes + 1] = ("i64 %s%d"):format(p, i) end end
  sizes = table.concat(sizes, ", ")
  self.kernel = kernel.new { source = source, name = "tocha_broadcast", template_args = targs, file = "broadcast.cu",
    params = ("%s* a, %s* b, %s* y, i32 ndim, %s"):format(dt, dt, dt, sizes) }
  self.grad_kernel = kernel.new { source = source, name = "tocha_broadcast_backward", template_args = targs,
    file = "broadcast.cu",
    params = ("%s* a, %s* b, %s* dy, %s* da, %s* db, i32 ndim, %s, i32 phase"):format(dt, dt, dt, dt, dt, sizes) }
  self.backward_kernel = self.grad_kernel
  return self
end

function Broadcast:n_activation_inputs() return 2 end

-- The output's sizes and each input's aligned to them (1s in front), or an error naming the
-- input that does not fit.
local function shapes(input_shapes)
  op.input_shapes(input_shapes, 2)
  local sa, sb = input_shapes[1], input_shapes[2]
  op.check_shape(sa, "inputs[1]")
  op.check_shape(sb, "inputs[2]")
  local n = math.max(#sa, #sb)
  local out, aa, ab = {}, {}, {}
  for k = 1, n do
    local x, y = sa[#sa - n + k] or 1, sb[#sb - n + k] or 1
    if x ~= y and x ~= 1 and y ~= 1 then
      raise(("inputs[2]: shape %s does not broadcast with %s (inputs[1]'s): sizes %d and %d at dimension %d from the end")
        :format(op.shape_text(sb), op.shape_text(sa), y, x, n - k + 1))
    end
    out[k], aa[k], ab[k] = math.max(x, y), x, y
  end
  return out, aa, ab
end

function Broadcast:compute_concrete_output_shape(input_shapes)
  local out = shapes(input_shapes)
  return out
end

local function grid_of(n) return { math.max(1, math.min(math.ceil(n / BLOCK), 2 ^ 31 - 1)), 1, 1 } end

function Broadcast:grid(output_shape)
  op.check_shape(output_shape, "output_shape")
  return grid_of(op.numel(output_shape))
end

local function size_args(list, out, aa, ab)
  for _, s in ipairs({ out, aa, ab }) do
    for i = 1, 8 do list[#list + 1] = s[i] or 1 end
  end
  return list
end

function Broadcast:pack_args(inputs, _, output, output_shape)
  local at, in_shapes = op.inputs_of(inputs, 2)
  local out, aa, ab = shapes(in_shapes)
  op.check_output_shape(output_shape or out, out, "the inputs' broadcast")
  return size_args({ at[1], at[2], op.address(output, "output"), #out }, out, aa, ab)
end

function Broadcast:n_backward_launches() return 2 end

function Broadcast:backward_grid_for_launch(i, input_shapes)
  op.launch_index(i, 2)
  shapes(input_shapes)
  return grid_of(op.numel(input_shapes[i]))
end
Broadcast.backward_grid = function(self, ...) return self:backward_grid_for_launch(1, ...) end

function Broadcast:pack_backward_args_for_launch(i, inputs, _, _, _, grad_output, _, grad_inputs)
  op.launch_index(i, 2)
  local at, in_shapes = op.inputs_of(inputs, 2)
  local out, aa, ab = shapes(in_shapes)
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  local list = { at[1], at[2], op.address(grad_output, "grad_output"), op.address(grad_inputs[1], "grad_inputs[1]"),
    op.address(grad_inputs[2], "grad_inputs[2]"), #out }
  size_args(list, out, aa, ab)
  list[#list + 1] = i - 1
  return list
end
Broadcast.pack_backward_args = function(self, ...) return self:pack_backward_args_for_launch(1, ...) end

op.finish(Broadcast)
return M
