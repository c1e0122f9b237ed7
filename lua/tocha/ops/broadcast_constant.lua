-- tocha.BroadcastConstant: y = g(x, c) or g(c, x) with c a constant the node holds as a
-- parameter (a buffer: saved and loaded, never trained), broadcast as tocha.Broadcast does: an
-- imported network's x * 0.5, x + 3, (x - mean) / std with per-channel constants. The forward
-- is tocha.Broadcast's kernel; the backward is tocha.Broadcast's launches for x's operand alone
-- (dx summed over what x repeats; the constant gets no gradient: where both operands have the
-- output's shape, Broadcast's one pass writes both, the constant's into the workspace).
--
--   local half = tocha.BroadcastConstant.new("mul", { 1 })    -- parameter "constant", shape {1}
--   local y = half(x_node)                                    -- in a model; set the constant:
--   m:parameters()["<node>.constant"]:fill(0.5)
--   half:forward(x, c)                                        -- a direct call: c the constant
local dtype = require "tocha.dtype"
local errors = require "tocha.errors"
local op = require "tocha.op"
local broadcast = require "tocha.ops.broadcast"
local raise = errors.raise

local M = {}

local BroadcastConstant = op.class("BroadcastConstant")
M.BroadcastConstant = BroadcastConstant

-- BroadcastConstant.new(fn, constant_shape [, {dtype = "f32", constant_first = false}]): fn as
-- tocha.Broadcast's; constant_first puts the constant on the left (c - x, c / x).
function BroadcastConstant.new(fn, constant_shape, opts)
  opts = op.options(opts, { dtype = true, constant_first = "boolean" }, "tocha.BroadcastConstant")
  local inner = broadcast.Broadcast.new(fn, opts.dtype)
  op.check_shape(constant_shape, "constant_shape")
  local shape = {}
  for i, s in ipairs(constant_shape) do shape[i] = s end
  local self = setmetatable({ kind = "broadcast_constant_" .. fn, fn = fn, dtype = inner.dtype, inner = inner,
    constant_shape = shape, constant_first = opts.constant_first == true, kernel = inner.kernel,
    grad_kernel = inner.grad_kernel, block_size = inner.block_size, id = inner.id .. "__constant" }, BroadcastConstant)
  self.backward_kernel = self.grad_kernel
  return self
end

function BroadcastConstant:param_names() return { "constant" } end
function BroadcastConstant:param_shapes() return { self.constant_shape } end
function BroadcastConstant:param_trainable() return false end
-- (a constant of the network's, not a module's state: PyTorch's state dicts do not hold it)
function BroadcastConstant:param_in_state_dict() return false end

-- The inner op's two inputs in their order.
function BroadcastConstant:operands(x, c)
  if self.constant_first then return c, x end
  return x, c
end

function BroadcastConstant:compute_concrete_output_shape(input_shapes)
  local x = op.one_input(input_shapes)
  local a, b = self:operands(x, self.constant_shape)
  local out = self.inner:compute_concrete_output_shape({ a, b })
  return out
end

function BroadcastConstant:grid(output_shape) return self.inner:grid(output_shape) end
function BroadcastConstant:block() return self.inner:block() end

function BroadcastConstant:pack_args(inputs, params, output, output_shape)
  local x, shape = op.input_of(inputs)
  params = op.list(params, "params")
  if params[1] == nil then raise("params: expected {constant}") end
  local a, b = self:operands({ x, shape }, { op.address(params[1], "params[1]"), self.constant_shape })
  local r = self.inner:pack_args({ a, b }, {}, output, output_shape)
  return r
end

-- ---- the backward: Broadcast's launches of x's operand ----

-- The inner op's input shapes, and x's place among them (1 or 2).
function BroadcastConstant:inner_shapes(input_shapes)
  local x = op.one_input(input_shapes)
  op.check_shape(x, "inputs[1]")
  local a, b = self:operands(x, self.constant_shape)
  return { a, b }, self.constant_first and 2 or 1
end

-- Whether both operands have the output's shape (Broadcast's one pass then writes both
-- gradients, from operand a's first launch).
local function both_full(self, shapes)
  local out = self.inner:compute_concrete_output_shape(shapes)
  return op.same_sizes(shapes[1], out) and op.same_sizes(shapes[2], out), out
end

local ALIGN = 256

-- Broadcast's workspace, then (where both are full) room for the constant's unused gradient.
function BroadcastConstant:workspace_bytes(input_shapes)
  local shapes = self:inner_shapes(input_shapes)
  local bytes = self.inner:workspace_bytes(shapes)
  local full, out = both_full(self, shapes)
  if full then bytes = math.ceil(bytes / ALIGN) * ALIGN + op.numel(out) * dtype.size(self.dtype) end
  return bytes
end

function BroadcastConstant:n_backward_launches() return broadcast.LAUNCHES_PER_OPERAND end

-- The inner op's launch for launch i: x's operand's, or a's where one pass writes both.
local function inner_launch(self, i, shapes, x)
  op.launch_index(i, broadcast.LAUNCHES_PER_OPERAND)
  if both_full(self, shapes) then return i end
  return i + (x - 1) * broadcast.LAUNCHES_PER_OPERAND
end

function BroadcastConstant:backward_kernel_for_launch() return self.grad_kernel end

function BroadcastConstant:backward_grid_for_launch(i, input_shapes)
  local shapes, x = self:inner_shapes(input_shapes)
  return self.inner:backward_grid_for_launch(inner_launch(self, i, shapes, x), shapes)
end
function BroadcastConstant:backward_grid(input_shapes) return self:backward_grid_for_launch(1, input_shapes) end

function BroadcastConstant:pack_backward_args_for_launch(i, inputs, params, y, output_shape, grad_output, stride, grad_inputs)
  local xa, shape = op.input_of(inputs)
  local shapes, x = self:inner_shapes({ shape })
  params = op.list(params, "params")
  if params[1] == nil or params[2] == nil then raise("params: expected {constant, workspace}") end
  local ws = op.address(params[2], "params[2]")
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  local dx = op.address(grad_inputs[1], "grad_inputs[1]")
  local grads = { dx, dx }
  if both_full(self, shapes) then
    if ws == 0 then raise("params: the backward needs its workspace (op:workspace_bytes) after the constant") end
    grads[3 - x] = ws + math.ceil(self.inner:workspace_bytes(shapes) / ALIGN) * ALIGN
  end
  local a, b = self:operands({ xa, shape }, { op.address(params[1], "params[1]"), self.constant_shape })
  return self.inner:pack_backward_args_for_launch(inner_launch(self, i, shapes, x), { a, b }, { ws }, y, output_shape,
    grad_output, stride, grads)
end
function BroadcastConstant:pack_backward_args(...) return self:pack_backward_args_for_launch(1, ...) end

op.finish(BroadcastConstant)
return M
