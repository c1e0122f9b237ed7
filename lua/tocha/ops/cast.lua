-- tocha.Cast: y = x converted to a float dtype as a RuntimeOp (x:cast's kernel, kernels/cast.cu,
-- and its rules), so that a model turns an integer input into floats (a text model's attention
-- mask, a byte image) or changes a float's precision.
--
--   local c = tocha.Cast.new("i64", "f32")
--   local y = c:forward(mask)                -- f32, mask's shape
--
-- Its backward is dx = dy cast back where x is a float; an integer x has no gradient, and the
-- op then has no backward launch.
local device = require "tocha.device"
local dtype = require "tocha.dtype"
local tensor = require "tocha.tensor"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local raise, show = errors.raise, errors.show

local M = {}

local Cast = op.class("Cast")
M.Cast = Cast

local BLOCK = 256

local function dtype_name(v, what)
  if type(v) ~= "string" or not pcall(dtype.id, v) then
    raise(("%s: expected a dtype (f32, f64, f16, bf16, u8, i32, i64), got %s"):format(what, show(v)))
  end
  return v
end

-- Cast.new(from, to): x of dtype `from` into y of dtype `to` (to a float dtype: a model's values).
function Cast.new(from, to)
  from, to = dtype_name(from, "from"), dtype_name(to, "to")
  if not dtype.is_float(to) then raise(("to: expected a float dtype (f32, f64, f16, bf16), got %s"):format(show(to))) end
  local self = setmetatable({ kind = "cast", from = from, dtype = to, block_size = BLOCK,
    id = ("cast__%s__%s"):format(from, to) }, Cast)
  local source = op.source("cast.cu")
  self.kernel = kernel.new { source = source, name = "tocha_cast",
    template_args = dtype.ctype(from) .. ", " .. dtype.ctype(to), params = ("%s* x, %s* y, i64 n"):format(from, to) }
  if dtype.is_float(from) then
    self.grad_kernel = kernel.new { source = source, name = "tocha_cast",
      template_args = dtype.ctype(to) .. ", " .. dtype.ctype(from), params = ("%s* x, %s* y, i64 n"):format(to, from) }
  end
  return self
end

function Cast:input_dtype() return self.from end
-- An integer x: no gradient to give, so no launch (a model still walks the node).
function Cast:has_backward() return true end
function Cast:n_backward_launches() return self.grad_kernel and 1 or 0 end

function Cast:compute_concrete_output_shape(input_shapes)
  local shape = op.one_input(input_shapes)
  op.check_shape(shape, "inputs[1]")
  local out = {}
  for i, s in ipairs(shape) do out[i] = s end
  return out
end

function Cast:grid(output_shape)
  op.check_shape(output_shape, "output_shape")
  return op.element_grid(op.numel(output_shape), BLOCK)
end

function Cast:pack_args(inputs, _, output, output_shape)
  local x, shape = op.input_of(inputs)
  op.check_shape(shape, "inputs[1]")
  if output_shape ~= nil then op.check_output_shape(output_shape, shape, "x's") end
  return { x, op.address(output, "output"), op.numel(shape) }
end

function Cast:backward_grid(input_shapes)
  local shape = self:compute_concrete_output_shape(input_shapes)
  if not self.grad_kernel then return { 0, 0, 0 } end
  return op.element_grid(op.numel(shape), BLOCK)
end

function Cast:pack_backward_args(inputs, _, _, _, grad_output, _, grad_inputs)
  local _, shape = op.input_of(inputs)
  op.check_shape(shape, "inputs[1]")
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  return { op.address(grad_output, "grad_output"), op.address(grad_inputs[1], "grad_inputs[1]"), op.numel(shape) }
end

-- ---- direct calls ----

-- op:forward(x [, y [, opts]]) -> y.
function Cast:forward(x, y, opts)
  op.live_tensor(x, "x")
  op.check_dtype(x, "x", self.from, "from")
  return op.on_stream(opts, x, function()
    if y == nil then y = tensor.alloc(x:shape(), self.dtype, device.wrap(x.dev)) end
    op.check_tensor(self, y, "y", x, "x")
    op.same_shape(y, x:shape(), "y", "x's")
    op.check_aliasing({ { y, "y" } }, { { x, "x" } })
    op.launch_packed(self.kernel, device.wrap(x.dev), self:grid(x:shape()), self:block(),
      self:pack_args({ { x.data, x:shape() } }, {}, y.data, x:shape()))
    return y
  end)
end

-- op:backward(x, dy [, dx [, opts]]) -> dx (dy cast back to x's dtype); an integer x has none.
function Cast:backward(x, dy, dx, opts)
  op.live_tensor(x, "x")
  if not self.grad_kernel then raise(("self: x is %s: an integer input has no gradient"):format(self.from)) end
  op.check_dtype(x, "x", self.from, "from")
  return op.on_stream(opts, x, function()
    op.check_tensor(self, dy, "dy", x, "x")
    op.same_shape(dy, x:shape(), "dy", "x's")
    if dx == nil then dx = op.alloc_like(x:shape(), x) end
    op.live_tensor(dx, "dx")
    op.check_dtype(dx, "dx", self.from, "from")
    op.same_device(dx, "dx", x)
    op.same_shape(dx, x:shape(), "dx", "x's")
    op.check_aliasing({ { dx, "dx" } }, { { dy, "dy" } })
    op.launch_packed(self.grad_kernel, device.wrap(x.dev), self:backward_grid({ x:shape() }),
      self:backward_block(), self:pack_backward_args({ { x.data, x:shape() } }, {}, nil, nil, dy.data, 0, { dx.data }))
    return dx
  end)
end

op.finish(Cast)

return M
