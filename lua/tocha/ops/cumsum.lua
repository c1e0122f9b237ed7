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
-- end. The launches are kernels/scan.cu's, planned as x:cumsum's (tocha.tensor_reduce.scan_plan:
-- one launch, or three through a workspace for long rows too few to fill the device; the op
-- declares three, the ones a shape does not need of 0 CTAs): the backward is the running sum of
-- dy in the other direction, exclusive as the forward is.
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

-- The op's launches for x's shape: forward, or backward (the other direction). A direct call asks
-- for each launch's kernel, grid and arguments in turn, so the last plan of each direction is kept
-- (a plan depends on (outer, n, inner) alone).
function CumSum:plan(shape, backward)
  local outer, n, inner = around(self, shape, "inputs[1]")
  local slot = backward and "last_backward_plan" or "last_plan"
  local last = rawget(self, slot)
  if last and last.outer == outer and last.n == n and last.inner == inner then return last.plan end
  local reverse = self.reverse
  if backward then reverse = not reverse end
  local plan = tensor_reduce.scan_plan(outer, n, inner, self.dtype, self.dtype, false, self.exclusive, reverse)
  self[slot] = { outer = outer, n = n, inner = inner, plan = plan }
  return plan
end

local LAUNCHES = 3 -- the most a plan has
function CumSum:n_launches() return LAUNCHES end
function CumSum:n_backward_launches() return LAUNCHES end

-- The direction does not change a plan's chunks: the forward's workspace serves the backward.
function CumSum:workspace_bytes(input_shapes)
  return self:plan(op.one_input(input_shapes)).bytes
end

-- Launch i of a plan: its kernel, and a grid of 0 CTAs (skipped) past the plan's launches.
local function launch_of(self, i, shape, backward)
  op.launch_index(i, LAUNCHES)
  local plan = self:plan(shape, backward)
  return plan.launches[i], plan
end

function CumSum:kernel_for_launch(i, input_shapes)
  local l, plan = launch_of(self, i, op.one_input(input_shapes))
  return (l or plan.launches[1]).kernel
end

function CumSum:backward_kernel_for_launch(i, input_shapes)
  local l, plan = launch_of(self, i, op.one_input(input_shapes), true)
  return (l or plan.launches[1]).kernel
end

function CumSum:grid_for_launch(i, input_shapes)
  local l = launch_of(self, i, op.one_input(input_shapes))
  return l and l.grid or { 0, 1, 1 }
end

function CumSum:backward_grid_for_launch(i, input_shapes)
  local l = launch_of(self, i, op.one_input(input_shapes), true)
  return l and l.grid or { 0, 1, 1 }
end

-- The workspace's address (after the op's parameters, of which it has none), checked where the
-- plan needs one.
local function workspace_of(plan, params)
  params = op.list(params or {}, "params")
  local ws = params[#params] or 0
  if plan.bytes > 0 and op.address(ws, "params[1]") == 0 then
    raise("params: a long rows' running sum needs its workspace (op:workspace_bytes) after the parameters")
  end
  return op.address(ws, "params[1]")
end

function CumSum:pack_args_for_launch(i, inputs, params, output)
  local x, shape = op.input_of(inputs)
  local l, plan = launch_of(self, i, shape)
  if not l then return {} end
  return l.args(op.address(x, "inputs[1]"), op.address(output, "output"), workspace_of(plan, params))
end

function CumSum:pack_backward_args_for_launch(i, inputs, params, _, _, grad_output, _, grad_inputs)
  local _, shape = op.input_of(inputs)
  local l, plan = launch_of(self, i, shape, true)
  if not l then return {} end
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  return l.args(op.address(grad_output, "grad_output"), op.address(grad_inputs[1], "grad_inputs[1]"),
    workspace_of(plan, params))
end

op.finish(CumSum)
return M
