-- tocha.Constant: a node whose output is a tensor it holds (its parameter "constant", a buffer:
-- saved and loaded, never trained), for a constant an imported network joins to computed
-- tensors (a transformer's class token before its patches). One launch copies it into the
-- node's output (Elementwise identity's kernel), so that what reads it reads a buffer of the
-- model's as from any node. Its one input places it in the graph (a model's nodes are made from
-- others) and is never read: the node it is joined to serves. Its backward gives that input a
-- zero gradient (the constant is not trained).
--
--   local cls = tocha.Constant.new({ 2, 1, 768 })                 -- parameter "constant"
--   local tokens = tocha.ChannelCat.new()(cls(patches), patches)  -- in a model
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local op = require "tocha.op"
local Elementwise = require("tocha.ops.elementwise").Elementwise

local M = {}

local Constant = op.class("Constant")
M.Constant = Constant

-- Constant.new(shape [, {dtype = "f32"}]).
function Constant.new(shape, opts)
  opts = op.options(opts, { dtype = true }, "tocha.Constant")
  op.check_shape(shape, "shape")
  local copy = Elementwise.new("identity", opts.dtype)
  local s = {}
  for i, v in ipairs(shape) do s[i] = v end
  local self = setmetatable({ kind = "constant", dtype = copy.dtype, shape = s, kernel = copy.kernel,
    block_size = copy.block_size, id = ("constant__%s__%s"):format(op.shape_text(s):gsub("[^%d]+", "_"), copy.dtype) },
    Constant)
  self.grad_kernel = kernel.new { source = op.source("fill.cu"), name = "tocha_fill", template_args = dtype.ctype(self.dtype),
    params = ("%s* y, i64 n, f64 value"):format(self.dtype) }
  self.backward_kernel = self.grad_kernel
  return self
end

function Constant:param_names() return { "constant" } end
function Constant:param_shapes() return { self.shape } end
function Constant:param_trainable() return false end
-- (a constant of the network's, not a module's state: PyTorch's state dicts do not hold it)
function Constant:param_in_state_dict() return false end

function Constant:compute_concrete_output_shape(input_shapes)
  op.one_input(input_shapes) -- (its place in the graph: any shape)
  local out = {}
  for i, v in ipairs(self.shape) do out[i] = v end
  return out
end

Constant.grid = op.flat_grid

function Constant:pack_args(_, params, output)
  params = op.list(params, "params")
  return { op.address(params[1], "params[1]"), op.address(output, "output"), op.numel(self.shape) }
end

-- The backward: zeros for the input that placed the node (of any shape).
function Constant:backward_grid(input_shapes)
  local x = op.one_input(input_shapes)
  op.check_shape(x, "inputs[1]")
  return op.flat_grid(self, x)
end

function Constant:pack_backward_args(inputs, _, _, _, _, _, grad_inputs)
  local _, shape = op.input_of(inputs)
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  return { op.address(grad_inputs[1], "grad_inputs[1]"), op.numel(shape), 0 }
end

op.finish(Constant)

return M
