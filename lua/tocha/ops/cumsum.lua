-- tocha.CumSum: the running sum of x along one dimension as a RuntimeOp, forward and backward,
-- every float dtype (halves summed in f32), so that a model holds one: ONNX's CumSum of a
-- computed tensor (a position embedding counted along a mask: DETR's), PyTorch's torch.cumsum.
--
--   local c = tocha.CumSum.new(2)                                    -- y[:, j] = x[:, 1] + ... + x[:, j]
--   local r = tocha.CumSum.new(-1, { exclusive = true, reverse = true }) -- y[..., j] = x[..., j + 1] + ... + x[..., n]
--   local y = c:forward(x)
--   local dx = c:backward(x, dy)
--
-- exclusive: each output leaves its own element out (the first is 0); reverse: sums run from the
-- end. Both launches are kernels/scan.cu's (x:cumsum's kernel): the backward is the running sum
-- of dy in the other direction, exclusive as the forward is.
local tensor_reduce = require "tocha.tensor_reduce"
local errors = require "tocha.errors"
local op = require "tocha.op"
local raise = errors.raise

local M = {}

local CumSum = op.class("CumSum")
M.CumSum = CumSum

local BLOCK = tensor_reduce.SCAN_BLOCK

-- CumSum.new(dim [, {exclusive = false, reverse = false, dtype = "f32"}]): dim 1-based, negative
-- from the end.
function CumSum.new(dim, opts)
  dim = op.integer(dim, "dim")
  if dim == 0 then raise("dim: expected a dimension, 1-based (negative from the end), got 0") end
  opts = op.options(opts, { exclusive = "boolean", reverse = "boolean", dtype = true }, "CumSum")
  local dt = op.float_dtype(opts.dtype, "dtype")
  local exclusive, reverse = opts.exclusive == true, opts.reverse == true
  local self = setmetatable({ kind = "cumsum", dim = dim, exclusive = exclusive, reverse = reverse, dtype = dt,
    block_size = BLOCK, id = ("cumsum__%d__%s%s%s"):format(dim, dt, exclusive and "__exclusive" or "",
      reverse and "__reverse" or "") }, CumSum)
  self.kernel = tensor_reduce.scan_kernel(dt, dt, false, exclusive, reverse)
  self.grad_kernel = tensor_reduce.scan_kernel(dt, dt, false, exclusive, not reverse)
  return self
end

-- x's shape as (outer, n, inner) around the op's dimension.
local function around(self, shape, what)
  op.check_shape(shape, what)
  local r = #shape
  local d = self.dim < 0 and r + self.dim + 1 or self.dim
  if d < 1 or d > r then
    raise(("%s: dimension %d is outside a shape of %d dimensions"):format(what, self.dim, r))
  end
  local outer, inner = 1, 1
  for k = 1, d - 1 do outer = outer * shape[k] end
  for k = d + 1, r do inner = inner * shape[k] end
  return outer, shape[d], inner
end

function CumSum:compute_concrete_output_shape(input_shapes)
  local shape = op.one_input(input_shapes)
  around(self, shape, "inputs[1]")
  local out = {}
  for i, s in ipairs(shape) do out[i] = s end
  return out
end

function CumSum:grid(output_shape)
  local outer, _, inner = around(self, output_shape, "output_shape")
  return tensor_reduce.scan_grid(outer, inner)
end

function CumSum:pack_args(inputs, _, output)
  local x, shape = op.input_of(inputs)
  local outer, n, inner = around(self, shape, "inputs[1]")
  return { x, op.address(output, "output"), outer, n, inner }
end

function CumSum:backward_grid(input_shapes)
  local outer, _, inner = around(self, op.one_input(input_shapes), "inputs[1]")
  return tensor_reduce.scan_grid(outer, inner)
end

function CumSum:pack_backward_args(inputs, _, _, _, grad_output, _, grad_inputs)
  local _, shape = op.input_of(inputs)
  local outer, n, inner = around(self, shape, "inputs[1]")
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  return { op.address(grad_output, "grad_output"), op.address(grad_inputs[1], "grad_inputs[1]"), outer, n, inner }
end

op.finish(CumSum)
return M
