-- tocha.Broadcast: y = g(a, b) for operands that broadcast as NumPy's and PyTorch's do (sizes
-- aligned from the last dimension, a size 1 or a missing dimension repeated), forward and
-- backward, every float dtype (halves computed in f32), behind a RuntimeOp, so that a model can
-- hold a residual add or a squeeze-and-excitation scale.
--
--   local scale = tocha.Broadcast.new("mul")          -- add, sub, mul, div, max, min, prelu, masked_fill
--   local y = scale:forward(x, s)                      -- x [N, C, H, W], s [N, C, 1, 1]
--   local dx, ds = scale:backward(x, s, dy)            -- ds summed over H and W
--
-- (Eager tensor math, x * s, broadcasts too; this is the op a model launches.)
--
-- The forward is tensor math's kernel (kernels/pointwise.cu, one launch on its chunk paths for
-- dense and channel-broadcast operands). The backward (kernels/broadcast.cu, one kernel told its
-- phase) is planned from the shapes alone, so a result is the same on every device: both
-- gradients in one pass where both operands have the output's shape; an operand's gradient in
-- one pointwise pass where it alone has the output's shape; else its gradient summed over the
-- dimensions it repeats, computed from dy as it is read, one run of repeated dimensions at a
-- time (the last first) on tocha.Reduce's plans (a second pass over partials where a run is
-- split among CTAs; sums in f32 for halves). Where the sum needs the other operand (mul, div,
-- max, min) and that one does not have the output's shape, or needs the operand itself (div's
-- divisor, max, min) and it repeats along several runs, a pass first writes it broadcast to the
-- output's shape into the workspace (op:workspace_bytes, after the parameters in `params`),
-- which also holds the partials. The backward has a fixed count of launches,
-- M.LAUNCHES_PER_OPERAND for a, then as many for b; those with nothing to do have a grid of 0
-- CTAs.
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local tensor_math = require "tocha.tensor_math"
local reduction = require "tocha.ops.reduction"
local raise = errors.raise

local M = {}

local Broadcast = op.class("Broadcast")
M.Broadcast = Broadcast

local BLOCK = tensor_math.BLOCK
M.FUNCTIONS = { "add", "sub", "mul", "div", "max", "min", "prelu", "masked_fill" }
-- Each function's pointwise.cu struct (the forward) and broadcast.cu gradient structs for a
-- and b, with the arity of each gradient (1: dy alone; 2: and the other operand; 3: and itself).
local FN = {
  add = { "add", "bc_grad_pass", 1, "bc_grad_pass", 1 },
  sub = { "sub", "bc_grad_pass", 1, "bc_grad_neg", 1 },
  mul = { "mul", "bc_grad_mul", 2, "bc_grad_mul", 2 },
  div = { "div", "bc_grad_div_a", 2, "bc_grad_div_b", 3 },
  max = { "maximum", "bc_grad_max", 3, "bc_grad_max", 3 },
  min = { "minimum", "bc_grad_min", 3, "bc_grad_min", 3 },
  prelu = { "prelu", "bc_grad_prelu_x", 3, "bc_grad_prelu_w", 2 },
  masked_fill = { "masked_fill", "bc_grad_masked_a", 2, "bc_grad_masked_b", 3 },
}
-- broadcast.cu's phases.
local FULL, COPY, SUM, REDUCE, FULL_BOTH = { 0, 1 }, 2, { 3, 4 }, 5, 6
-- 16-byte vectors a thread of the pass that writes both gradients (broadcast.cu's BC_VECTORS).
local VECTORS = 2
-- Launches an operand's gradient may take: two copies, then two passes for each of at most four
-- runs of repeated dimensions (8 dimensions alternate at most four times).
M.LAUNCHES_PER_OPERAND = 10

-- Broadcast.new(fn [, dtype]): fn one of M.FUNCTIONS; dtype f32 by default.
function Broadcast.new(fn, dtype_name)
  if type(fn) ~= "string" or not FN[fn] then
    raise(("fn: expected one of %s, got %s"):format(table.concat(M.FUNCTIONS, ", "), errors.show(fn)))
  end
  local dt = op.float_dtype(dtype_name, "dtype")
  local f = FN[fn]
  local self = setmetatable({ kind = "broadcast_" .. fn, fn = fn, dtype = dt, block_size = BLOCK,
    arity = { f[3], f[5] }, plans = {}, id = ("broadcast_%s__%s"):format(fn, dt) }, Broadcast)
  self.kernel = tensor_math.pointwise_kernel(f[1], dt, dt, dt, dt, dt, 0)
  local ct = dtype.ctype(dt)
  local sets = {}
  for _, p in ipairs({ "d", "y" }) do for i = 0, 7 do sets[#sets + 1] = ("i64 %s%d"):format(p, i) end end
  local operands = {}
  for _, p in ipairs({ "a", "b", "c" }) do
    local list = { ("%s* %s"):format(dt, p) }
    for i = 0, 7 do list[#list + 1] = ("i64 %s%d"):format(p, i) end
    operands[#operands + 1] = table.concat(list, ", ")
  end
  self.grad_kernel = kernel.new { source = op.source("pointwise.cu") .. "\n" .. op.source("reduction.cu") .. "\n" ..
      op.source("broadcast.cu"), name = "tocha_broadcast_backward", file = "broadcast.cu",
    template_args = ("%s, %s, %s"):format(ct, f[2], f[4]),
    params = ("i32 phase, %s* y, i64 n, i32 ndim, %s, %s, f64 sa, f64 sb, f64 sc, i64 outer, i64 len, i64 inner, "
      .. "i64 splits, i32 rows, i32 acc, i32 own, %s* z"):format(dt, table.concat(sets, ", "), table.concat(operands, ", "), dt) }
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

function Broadcast:grid(output_shape)
  op.check_shape(output_shape, "output_shape")
  return tensor_math.layout_grid({ n = op.numel(output_shape) }, self.dtype, 2, true)
end

function Broadcast:pack_args(inputs, _, output, output_shape)
  local at, in_shapes = op.inputs_of(inputs, 2)
  local out, aa, ab = shapes(in_shapes)
  op.check_output_shape(output_shape or out, out, "the inputs' broadcast")
  return tensor_math.pack_layout({}, tensor_math.dense_layout(out, { aa, ab }), { op.address(output, "output"), at[1], at[2] })
end

-- ---- the backward's plan ----

local ALIGN = 256 -- the workspace's regions start on 256 bytes (16 would do for the kernels)
local function round_up(bytes) return math.ceil(bytes / ALIGN) * ALIGN end

-- The runs of the output's dimensions (sizes 1 left out) that `own` repeats or keeps, in order:
-- {size, rep} each, neighbours of one kind merged.
local function runs_of(out, own)
  local runs = {}
  for k = 1, #out do
    if out[k] ~= 1 then
      local rep = own[k] == 1
      local last = runs[#runs]
      if last and last.rep == rep then last.size = last.size * out[k] else runs[#runs + 1] = { size = out[k], rep = rep } end
    end
  end
  return runs
end

-- The reduction passes that sum a gradient over the repeated runs, the last run first (the
-- dimensions after it are all kept, so it is a view [outer, len, inner] of the dense data);
-- the first pass reads the dtype dt, the later ones sums in acc_dt.
local function sum_passes(runs, dt, acc_dt)
  local passes = {}
  while true do
    local r
    for k = #runs, 1, -1 do if runs[k].rep then r = k break end end
    if not r then return passes end
    local outer, inner = 1, 1
    for k = 1, r - 1 do outer = outer * runs[k].size end
    for k = r + 1, #runs do inner = inner * runs[k].size end
    local first = #passes == 0
    local plan_dt = first and dt or acc_dt
    for j, p in ipairs(reduction.plan(outer, runs[r].size, inner, BLOCK, plan_dt)) do
      passes[#passes + 1] = { pass = p, dt = plan_dt, fused = first and j == 1 }
    end
    table.remove(runs, r)
    local before, after = runs[r - 1], runs[r]
    if before and after and not before.rep and not after.rep then
      before.size = before.size * after.size
      table.remove(runs, r)
    end
  end
end

-- Operand x's (1: a, 2: b) launches, {phase, grid, ...} each, and the workspace bytes they use.
-- Buffers by name: "dy", "self", "other" (the inputs), "grad" (x's gradient), or a workspace
-- offset (a number).
local function operand_plan(self, x, out, aligned)
  local own, other, arity = aligned[x], aligned[3 - x], self.arity[x]
  if op.same_sizes(own, out) and op.same_sizes(other, out) then
    -- both of the output's shape: one pass writes both gradients, a's first launch
    if x == 2 then return {}, 0 end
    return { { phase = FULL_BOTH, n = op.numel(out), grid = op.vector_grid(op.numel(out), self.dtype, BLOCK * VECTORS) } }, 0
  end
  if op.same_sizes(own, out) then
    local L = tensor_math.dense_layout(out, { out, other, own })
    return { { phase = FULL[x], layout = L, bufs = { "grad", "dy", "other", "self" },
      grid = tensor_math.layout_grid(L, self.dtype, arity) } }, 0
  end
  local steps, bytes, n = {}, 0, op.numel(out)
  local dense = { "dy", "other", "self" }
  -- the operands the sum reads, broadcast to the output's shape where they are not of it
  local function spread(name, shape)
    local L = tensor_math.dense_layout(out, { shape })
    steps[#steps + 1] = { phase = COPY, layout = L, bufs = { bytes, name }, grid = tensor_math.layout_grid(L, self.dtype, 1) }
    bytes = bytes + round_up(n * dtype.size(self.dtype))
    return steps[#steps].bufs[1]
  end
  if arity >= 2 and not op.same_sizes(other, out) then dense[2] = spread("other", other) end
  -- the operand itself: read once an output where it repeats along one run (the first pass's)
  local runs, reps = runs_of(out, own), 0
  for _, r in ipairs(runs) do if r.rep then reps = reps + 1 end end
  if arity >= 3 and reps > 1 then dense[3] = spread("self", own) end
  local acc_dt = self.dtype == "f64" and "f64" or "f32"
  local passes = sum_passes(runs, self.dtype, acc_dt)
  local biggest = 0
  for j = 1, #passes - 1 do
    local p = passes[j].pass
    biggest = math.max(biggest, p.outer * p.splits * p.inner * dtype.size(acc_dt))
  end
  local regions = { bytes, bytes + round_up(biggest) }
  if #passes > 1 then bytes = bytes + (#passes > 2 and 2 or 1) * round_up(biggest) end
  -- (the fixed launch count covers the most a shape of 8 dimensions can take)
  assert(#steps + #passes <= M.LAUNCHES_PER_OPERAND, "tocha.Broadcast: more launches than the op has")
  local src
  for j, q in ipairs(passes) do
    local dst = j == #passes and "grad" or regions[(j - 1) % 2 + 1]
    local bufs = q.fused and { dst, dense[1], dense[2], dense[3] } or { dst, src }
    steps[#steps + 1] = { phase = q.fused and SUM[x] or REDUCE, pass = q.pass, bufs = bufs, acc = dst ~= "grad" and 1 or 0,
      own = dense[3] == "self" and 1 or 0, grid = reduction.pass_grid(q.pass, BLOCK, q.dt) }
    src = dst
  end
  return steps, bytes
end

-- The backward's plan for the input shapes: {steps of a, steps of b}, and the workspace bytes
-- (the larger operand's: a's launches are done before b's start). Kept for the last few shapes.
function Broadcast:backward_plan(input_shapes)
  local out, aa, ab = shapes(input_shapes)
  local key = table.concat(aa, ",") .. "|" .. table.concat(ab, ",")
  local plan = self.plans[key]
  if plan then return plan end
  local sa, bytes_a = operand_plan(self, 1, out, { aa, ab })
  local sb, bytes_b = operand_plan(self, 2, out, { aa, ab })
  plan = { steps = { sa, sb }, bytes = math.max(bytes_a, bytes_b) }
  if #self.plans > 16 then self.plans = {} end
  self.plans[#self.plans + 1], self.plans[key] = key, plan
  return plan
end

function Broadcast:workspace_bytes(input_shapes)
  return self:backward_plan(input_shapes).bytes
end

function Broadcast:n_backward_launches() return 2 * M.LAUNCHES_PER_OPERAND end

-- Launch i's step: operand a's steps come first, b's after M.LAUNCHES_PER_OPERAND launches.
local function step_of(self, i, input_shapes)
  op.launch_index(i, 2 * M.LAUNCHES_PER_OPERAND)
  local plan = self:backward_plan(input_shapes)
  local x = i > M.LAUNCHES_PER_OPERAND and 2 or 1
  return plan.steps[x][i - (x - 1) * M.LAUNCHES_PER_OPERAND], x, plan
end

function Broadcast:backward_grid_for_launch(i, input_shapes)
  local step = step_of(self, i, input_shapes)
  if not step then return { 0, 0, 0 } end
  return step.grid
end
Broadcast.backward_grid = function(self, ...) return self:backward_grid_for_launch(1, ...) end

local NO_LAYOUT = { n = 0, d = {}, st = {} }

function Broadcast:pack_backward_args_for_launch(i, inputs, params, _, _, grad_output, _, grad_inputs)
  local at, in_shapes = op.inputs_of(inputs, 2)
  local step, x, plan = step_of(self, i, in_shapes)
  if not step then return {} end
  grad_inputs, params = op.list(grad_inputs, "grad_inputs"), op.list(params, "params")
  local ws = params[#params] or 0
  if plan.bytes > 0 and op.address(ws, "params[1]") == 0 then
    raise("params: the backward needs its workspace (op:workspace_bytes) after the parameters")
  end
  local named = { dy = op.address(grad_output, "grad_output"), self = at[x], other = at[3 - x],
    grad = op.address(grad_inputs[x], ("grad_inputs[%d]"):format(x)) }
  local ptrs = {}
  for j, b in ipairs(step.bufs or {}) do ptrs[j] = type(b) == "number" and op.address(ws, "params[1]") + b or named[b] end
  local list = { step.phase }
  if step.phase == FULL_BOTH then
    -- y da, a dy, b and c the operands, z db
    tensor_math.pack_layout(list, { n = step.n, d = {}, st = {} }, { named.grad, named.dy, at[1], at[2] })
    for _, v in ipairs({ 0, 0, 0, 1, 0, 0, 0 }) do list[#list + 1] = v end
    list[#list + 1] = op.address(grad_inputs[2], "grad_inputs[2]")
    return list
  end
  if step.layout then
    tensor_math.pack_layout(list, step.layout, ptrs)
    for _, v in ipairs({ 0, 0, 0, 1, 0, 0, 0 }) do list[#list + 1] = v end
    list[#list + 1] = ptrs[1]
    return list
  end
  -- a summing pass: every operand slot a valid address (launch pointers are never null)
  for j = 2, 4 do ptrs[j] = ptrs[j] or ptrs[2] end
  tensor_math.pack_layout(list, NO_LAYOUT, ptrs)
  local p = step.pass
  for _, v in ipairs({ p.outer, p.n, p.inner, p.splits, p.rows, step.acc, step.own }) do list[#list + 1] = v end
  list[#list + 1] = ptrs[1]
  return list
end
Broadcast.pack_backward_args = function(self, ...) return self:pack_backward_args_for_launch(1, ...) end

op.finish(Broadcast)
return M
