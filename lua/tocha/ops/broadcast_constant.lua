-- tocha.BroadcastConstant: y = g(x, c) or g(c, x) with c a constant the node holds as a
-- parameter (a buffer: saved and loaded, never trained), broadcast as tocha.Broadcast does: an
-- imported network's x * 0.5, x + 3, (x - mean) / std with per-channel constants. The forward
-- is tocha.Broadcast's kernel; there is no backward (the constant's operand order and the
-- gradient's sums are Broadcast's to give, through a second input, where one trains through it).
--
--   local half = tocha.BroadcastConstant.new("mul", { 1 })    -- parameter "constant", shape {1}
--   local y = half(x_node)                                    -- in a model; set the constant:
--   m:parameters()["<node>.constant"]:fill(0.5)
--   half:forward(x, c)                                        -- a direct call: c the constant
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
    block_size = inner.block_size, id = inner.id .. "__constant" }, BroadcastConstant)
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

op.finish(BroadcastConstant)
return M
