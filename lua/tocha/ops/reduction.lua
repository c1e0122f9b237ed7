-- tocha.Reduce: sum, mean or max over all elements or one dimension, forward and backward, every
-- float dtype (halves summed in f32): kernels/reduction.cu with the mode and dtype baked in,
-- behind a RuntimeOp whose methods are written here, so that it joins a tocha.Model.
--
--   local total = tocha.Reduce.new("sum")           -- every element -> shape {1}
--   local per_channel = tocha.Reduce.new("mean", 2)  -- dimension 2 (1-based; -1 the last) kept as 1
--   local y = per_channel:forward(x)                 -- [B, C, H, W] -> [B, 1, H, W]
--   local dx = per_channel:backward(x, y, dy)        -- dy spread over dimension 2
--
-- The reduced dimension stays, of size 1 (Torch7's sum(dim)); over all elements the output is
-- {1}. max's gradient goes whole to the first element equal to the maximum (a NaN maximum: to
-- the first NaN), as PyTorch's max(dim) routes it to the index it returns.
--
-- The plan (M.plan) depends on the shape alone, never on the device, so that results agree bit
-- for bit between devices: x is viewed as [outer, n, inner]; one pass reduces it when there are
-- enough outputs to fill a GPU, else a first pass splits n among CTAs or threads and writes
-- partials (in f32, f64 for f64) to a workspace, and a second pass sums those. The op has two
-- launches; the second has a grid of 0 CTAs (skipped) when one pass is enough. The workspace
-- (op:workspace_bytes) comes after the op's parameters in `params`: a model allocates it.
local bit = require "bit"
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local tensor = require "tocha.tensor"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local raise = errors.raise
local numel, address, one_input, launch_index = op.numel, op.address, op.one_input, op.launch_index

local M = {}

local Reduce = op.class("Reduce")
M.Reduce = Reduce

local MODES = { sum = 0, mean = 1, max = 2, min = 3, prod = 4 }

-- A block width for the reduction kernel: a power of two from 32 to 1024.
function M.block(v)
  v = op.integer(v or 256, "block")
  if v < 32 or v > 1024 or v % 32 ~= 0 or bit.band(v, v - 1) ~= 0 then
    raise(("block: expected a power of two from 32 to 1024, got %d"):format(v))
  end
  return v
end

-- The kernel's mapping of a pass over [outer, n, inner] whose elements are `size` bytes: 0, a
-- thread an output (inner > 1); -1, a CTA a (row, split) for rows of 4 x block elements or
-- more, unless there are 4096 rows or more (enough for a warp each to fill an H200) of under
-- 16 groups a thread of the CTA; else a team of 1 to 32 lanes a row, the most that leaves each
-- lane four 16-byte groups. A warp a row needs no barrier where a CTA pays one a row, which
-- short rows do not amortise (docs/performance.md).
local function mapping(n, inner, block, size, outer)
  if inner ~= 1 then return 0 end
  if n >= 4 * block and (outer == nil or outer < 4096 or n * size >= 256 * block) then return -1 end
  local group, team = 16 / size, 1
  while team < 32 and 2 * team * 4 * group <= n do team = 2 * team end
  return team
end

-- The most CTAs a split rows pass takes: one wave of an H200 at six CTAs of 256 an SM (the rows
-- kernel's 40 registers), 132 x 6, so that no CTA waits for a second, nearly empty wave. (A
-- module field, as the two below, so that a benchmark can A/B it: bench/tensor_math.lua's
-- --row_ctas.)
M.row_ctas = 792

local function acc_size(dt) return dt == "f64" and 8 or 4 end

-- Threads in flight on an H200, about (132 SMs x 2048): a split columns pass's width (half as
-- many on short columns, whose threads hold twice the bytes in flight). (--column_threads)
M.column_threads = 262144

-- Whether a columns pass over rows of `inner` elements of `size` bytes takes the short columns
-- kernel (eight 16-byte units in flight a thread): inner whole 16-byte groups, under 32 of them.
local function short_columns(inner, size)
  local group = 16 / size
  return group > 1 and inner % group == 0 and inner / group < 32
end

-- The columns path's threads of a pass over [outer, n, inner] with splits of n, elements of
-- `size` bytes: one a (outer, split, unit of inner), a unit a 16-byte group where inner is whole
-- groups (else an element; the kernel takes elements too where x is not 16-byte aligned).
local function column_threads(outer, inner, splits, size)
  local group = 16 / size
  return outer * splits * (inner % group == 0 and inner / group or inner)
end

-- The most row teams a CTA of the team columns kernel takes (a power of two; 1: that kernel is
-- never planned), and the widest CTA it takes (kernels/reduction.cu's RED_TEAM_BLOCK).
M.column_teams = 8
local TEAM_BLOCK = 256

-- The row teams of a first columns pass over [outer, n, inner] (elements of `size` bytes) on
-- the team columns kernel: doubled while the columns' threads do not fill the device, each team
-- keeping at least 16 rows a thread (fewer cost more in the teams' combining than their loads
-- in flight gain) and a warp's width of columns; 1 for none.
local function column_teams(outer, n, inner, block, size)
  local threads, k = column_threads(outer, inner, 1, size), 1
  if block > TEAM_BLOCK then return 1 end
  while 2 * k <= M.column_teams and threads * k < M.column_threads and n >= 32 * k and block / (2 * k) >= 32 do
    k = 2 * k
  end
  return k
end

-- The passes that reduce [outer, n, inner] of dtype dt over n, for CTAs of `block` threads: one
-- or two {outer, n, inner, splits, rows, acc} (rows: the kernel's mapping; acc: the pass reads
-- partials, f32 or f64 for f64, rather than dt; short: a columns pass for the short columns
-- kernel; teams: a columns pass for the team columns kernel, with that many row teams a CTA,
-- planned only where `teams` is true: the caller launches M.pass_kernel's kernels). A first pass
-- splits n when there are too few outputs for the GPU: CTA rows of more than 16 groups a thread
-- up to M.row_ctas CTAs (each split at least 16 elements a thread); columns up to M.column_threads
-- threads (row teams first where planned), each split at least 16 rows a thread, at most 128
-- splits so that the second pass stays short. A little past one wave costs a second, nearly
-- empty one: hence floor, not ceil.
function M.plan(outer, n, inner, block, dt, teams)
  local size = dtype.size(dt)
  local rows = mapping(n, inner, block, size, outer)
  local splits, k = 1, 1
  if rows == -1 then
    -- a row of up to 16 groups a thread (64 KB at 256 threads) is one CTA's: a split would
    -- cost a second launch for less than a launch's worth of reading
    if math.ceil(n * size / 16) > 16 * block then
      splits = math.min(math.floor(M.row_ctas / outer), math.ceil(n / (16 * block)))
    end
  elseif rows == 0 then
    k = teams and column_teams(outer, n, inner, block, size) or 1
    local threads = (k == 1 and short_columns(inner, size)) and M.column_threads / 2 or M.column_threads
    splits = math.min(math.floor(threads / (k * column_threads(outer, inner, 1, size))), math.floor(n / (16 * k)), 128)
  end
  splits = math.max(1, splits)
  local first = { outer = outer, n = n, inner = inner, splits = splits, rows = rows,
    short = rows == 0 and k == 1 and short_columns(inner, size) or nil, teams = k > 1 and k or nil }
  if splits == 1 then return { first } end
  return { first, { outer = outer, n = splits, inner = inner, splits = 1, acc = true,
    rows = mapping(splits, inner, block, acc_size(dt)),
    short = inner ~= 1 and short_columns(inner, acc_size(dt)) or nil } }
end

local function grid_of(ctas, p, items)
  if ctas > 2 ^ 31 - 1 then
    if p.rows ~= 0 then raise(("x: %d rows of a reduction, at most 2^31 - 1 a launch"):format(items)) end
    ctas = 2 ^ 31 - 1
  end
  return { math.max(1, ctas), 1, 1 }
end

-- A pass's grid: one CTA a (row, split), block / team teams a CTA for smaller teams, or a thread
-- a column (teams threads a column on the team columns kernel; the kernels stride over whatever
-- a grid does not cover). dt: the op's dtype.
function M.pass_grid(p, block, dt)
  local items = p.outer * p.splits
  if p.rows == -1 then return grid_of(items, p, items) end
  if p.rows > 0 then return grid_of(math.ceil(items * p.rows / block), p, items) end
  local size = p.acc and acc_size(dt) or dtype.size(dt)
  return grid_of(math.ceil(column_threads(p.outer, p.inner, p.splits, size) * (p.teams or 1) / block), p, items)
end

-- The workspace of a plan's partials, in bytes (0 for one pass), for dtype dt.
function M.partial_bytes(passes, dt)
  if #passes == 1 then return 0 end
  local p = passes[1]
  return p.outer * p.splits * p.inner * (dt == "f64" and 8 or 4)
end

-- Sets on r the pass kernels of MODE `code` for dtype dt: either path (`kernel`, a RuntimeOp's
-- default) and each path alone (M.pass_kernel, the launches' own).
local function pass_kernels(r, dt, code)
  local source, targs = op.source("reduction.cu"), ("%s, %d"):format(dtype.ctype(dt), code)
  local params = ("u8* x, i32 x_acc, u8* y, i32 y_acc, %s* copy, i64 outer, i64 n, i64 inner, i64 splits, f64 divisor, i32 rows")
    :format(dt)
  for field, name in pairs({ kernel = "tocha_reduce", rows_kernel = "tocha_reduce_rows",
    columns_kernel = "tocha_reduce_columns", short_columns_kernel = "tocha_reduce_short_columns",
    team_columns_kernel = "tocha_reduce_team_columns" }) do
    r[field] = kernel.new { source = source, name = name, template_args = targs, params = params }
  end
  return r
end

-- The reductions of a function of each element (reduction.cu's MODE 5 to 8), for a first pass
-- only: the pass over its partials is the plain mode's (MAPPED_BASE). And the 2-norm's last
-- pass, storing the square root of its total (MODE 9 a plain sum, over partials; MODE 10 the sum
-- of squares, a first pass that is also the last).
local MAPPED = { square_sum = 5, abs_sum = 6, abs_max = 7, abs_min = 8, root_sum = 9, square_sum_root = 10 }
M.MAPPED_BASE = { square_sum = "sum", abs_sum = "sum", abs_max = "max", abs_min = "min", root_sum = "sum",
  square_sum_root = "sum" }
local mapped_cache = {}

-- The pass kernels (M.pass_kernel's fields) of map (a MAPPED name) for dtype dt, kept.
function M.mapped(map, dt)
  local key = map .. "|" .. dt
  if not mapped_cache[key] then mapped_cache[key] = pass_kernels({}, dt, assert(MAPPED[map], map)) end
  return mapped_cache[key]
end

-- Reduce.new(mode [, dim [, dtype [, block]]]): mode "sum", "mean", "max", "min" or "prod" (prod
-- has no backward); dim nil for every
-- element, else 1-based (negative from the end); dtype f32 (default), f64, f16 or bf16; block
-- threads a CTA, a power of two (default 256).
function Reduce.new(mode, dim, dtype_name, block)
  if type(mode) ~= "string" or not MODES[mode] then
    raise(("mode: expected \"sum\", \"mean\", \"max\", \"min\" or \"prod\", got %s"):format(errors.show(mode)))
  end
  if dim ~= nil then
    dim = op.integer(dim, "dim")
    if dim == 0 then raise("dim: expected 1 to the tensor's dimensions (or -1 for the last), got 0") end
  end
  local dt = op.float_dtype(dtype_name, "dtype")
  block = M.block(block)
  local source, targs = op.source("reduction.cu"), ("%s, %d"):format(dtype.ctype(dt), MODES[mode])
  local self = setmetatable({ kind = "reduce", mode = mode, dim = dim, dtype = dt, block_size = block,
    id = ("reduce__%s__%s__%s__%d"):format(mode, dim and tostring(dim) or "all", dt, block) }, Reduce)
  pass_kernels(self, dt, MODES[mode])
  self.grad_kernel = kernel.new { source = source, name = "tocha_reduce_grad", template_args = targs,
    params = ("%s* x, %s* y, %s* dy, %s* dx, i64 outer, i64 n, i64 inner, f64 divisor"):format(dt, dt, dt, dt) }
  self.backward_kernel = self.grad_kernel
  return self
end

-- ---- shapes ----

-- dim (1-based) for a shape of ndim sizes, or an error naming the shape.
local function dim_of(self, ndim, what)
  local d = self.dim
  if d < 0 then d = ndim + 1 + d end
  if d < 1 or d > ndim then
    raise(("%s: dim %d is outside its %d dimensions"):format(what, self.dim, ndim))
  end
  return d
end

-- x's shape as [outer, n, inner] and the output's shape.
function Reduce:view(shape, what)
  op.check_shape(shape, what or "x")
  if not self.dim then return 1, numel(shape), 1, { 1 } end
  local d = dim_of(self, #shape, what or "x")
  local out = {}
  for i, s in ipairs(shape) do out[i] = i == d and 1 or s end
  return numel(shape, 1, d - 1), shape[d], numel(shape, d + 1), out
end

-- ---- the RuntimeOp (tocha.op's defaults for the rest) ----

function Reduce:n_launches() return 2 end

function Reduce:compute_concrete_output_shape(input_shapes)
  local _, _, _, out = self:view(one_input(input_shapes), "inputs[1]")
  return out
end

-- The passes for x of `shape` and the reduced dimension's size, planned once a shape: each launch
-- asks for its kernel, grid and arguments, and a plan is a function of the shape alone.
local PLANS_KEPT = 64
function Reduce:passes(shape)
  local key = type(shape) == "table" and ("%d/%d/%d/"):format(M.column_teams, M.row_ctas, M.column_threads) -- (the A/B knobs too)
  for i = 1, key and #shape or 0 do
    if type(shape[i]) ~= "number" then key = nil break end -- (a bad shape: view names it)
    key = key .. shape[i] .. ","
  end
  local plans = self.plans
  local hit = key and plans and plans[key]
  if hit then return hit[1], hit[2] end
  local outer, n, inner = self:view(shape, "inputs[1]")
  local passes = M.plan(outer, n, inner, self.block_size, self.dtype, true)
  if not plans or plans.count >= PLANS_KEPT then plans = { count = 0 } self.plans = plans end
  plans[key], plans.count = { passes, n }, plans.count + 1
  return passes, n
end

-- Each pass on its path's kernel (M.pass_kernel).
function Reduce:kernel_for_launch(i, input_shapes)
  local p = self:passes(one_input(input_shapes))[launch_index(i, 2)]
  return p and M.pass_kernel(self, p) or self.kernel
end

function Reduce:workspace_bytes(input_shapes)
  return M.partial_bytes(self:passes(one_input(input_shapes)), self.dtype)
end

function Reduce:grid_for_launch(i, input_shapes)
  local passes = self:passes(one_input(input_shapes))
  local p = passes[launch_index(i, 2)]
  if not p then return { 0, 0, 0 } end -- one pass is enough: nothing to launch
  return M.pass_grid(p, self.block_size, self.dtype)
end

-- The tocha_reduce arguments of pass p: from src (its elements in the accumulator type when
-- src_acc is 1, else the dtype) to dst likewise; copy (or 0) gets the elements a first pass reads;
-- the totals are divided by divisor; the last, rows, is a team columns pass's teams.
-- (The kernel takes copy == src for no copy: a launch's pointers may not be null.)
function M.args(p, src, src_acc, dst, dst_acc, copy, divisor)
  local c = address(copy or 0)
  if c == 0 then c = address(src) end
  return { address(src), src_acc, address(dst), dst_acc, c, p.outer, p.n, p.inner, p.splits,
    divisor, p.teams or p.rows }
end

-- Pass i of a reduction's passes from x to y through the workspace ws. y_acc (optional, 0 or 1):
-- 1 when y holds the accumulator's type (a mapped reduction's result) rather than the dtype. x
-- holds the accumulator's type where the first pass is marked acc.
function M.pass_args(passes, i, x, y, ws, divisor, y_acc)
  local last = i == #passes
  y_acc = y_acc or 0
  if i == 1 then
    return M.args(passes[1], x, passes[1].acc and 1 or 0, last and y or ws, last and y_acc or 1, 0, last and divisor or 1)
  end
  return M.args(passes[2], ws, 1, y, y_acc, 0, divisor)
end

-- inputs: {{address, shape}} (or {tensor}); params: {workspace} when workspace_bytes > 0.
function Reduce:pack_args_for_launch(i, inputs, params, output)
  local x, shape = op.input_of(inputs)
  local passes, n = self:passes(shape)
  launch_index(i, 2)
  if not passes[i] then return {} end
  params = op.list(params, "params")
  local ws = params[#params] or 0
  if #passes > 1 and address(ws, "params[1]") == 0 then
    raise("params: a two-pass reduction needs its workspace (op:workspace_bytes) after the parameters")
  end
  return M.pass_args(passes, i, x, address(output, "output"), ws, self.mode == "mean" and n or 1)
end

function Reduce:backward_grid(input_shapes)
  local outer, n, inner = self:view(one_input(input_shapes), "inputs[1]")
  if self.mode == "prod" then raise("self: a product reduction has no backward") end
  local work = (self.mode == "max" or self.mode == "min") and outer * inner or outer * n * inner
  return { math.max(1, math.min(math.ceil(work / self.block_size), 2 ^ 31 - 1)), 1, 1 }
end

function Reduce:pack_backward_args(inputs, _, output, _, grad_output, _, grad_inputs)
  if self.mode == "prod" then raise("self: a product reduction has no backward") end
  local x, shape = op.input_of(inputs)
  local outer, n, inner = self:view(shape, "inputs[1]")
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  return { x, address(output, "output"), address(grad_output, "grad_output"), address(grad_inputs[1], "grad_inputs[1]"),
    outer, n, inner,
    self.mode == "mean" and n or 1 }
end

-- ---- direct calls ----

local on_stream, check_tensor, same_shape = op.on_stream, op.check_tensor, op.same_shape

-- The kernel of a Reduce op (r) for pass p: the one of p's path.
function M.pass_kernel(r, p)
  if p.rows ~= 0 then return r.rows_kernel end
  if p.teams then return r.team_columns_kernel end
  return p.short and r.short_columns_kernel or r.columns_kernel
end

-- Runs the launches of a plan: count of them, grid_at(i) and args_of(i, workspace) each (a grid
-- of 0 CTAs is skipped), with a workspace of `bytes` for as long as they run. k: the kernel, or
-- a function of i giving launch i's.
function M.run_launches(k, dev, block, count, bytes, grid_at, args_of)
  local ws = bytes > 0 and tensor.alloc({ bytes }, "u8", dev) or nil
  for i = 1, count do
    local g = grid_at(i)
    if g[1] > 0 then
      op.launch_packed(type(k) == "function" and k(i) or k, dev, g, { block, 1, 1 }, args_of(i, ws and ws.data or 0))
    end
  end
  if ws then ws:free() end
end

-- op:forward(x [, y [, opts]]) -> y: tocha.op's, from the methods above (the passes planned
-- from x's shape, the partials in a workspace of its own).

local function run_backward(self, x, y, dy, dx)
  local _, _, _, out = self:view(x:shape())
  check_tensor(self, y, "y", x)
  same_shape(y, out, "y", "the reduction's output")
  check_tensor(self, dy, "dy", x)
  same_shape(dy, out, "dy", "the reduction's output")
  if dx == nil then dx = op.alloc_like(x:shape(), x) end
  check_tensor(self, dx, "dx", x)
  same_shape(dx, x:shape(), "dx", "x's")
  op.check_aliasing({ { dx, "dx" } }, { { x, "x" }, { y, "y" }, { dy, "dy" } })
  local shapes = { x:shape() }
  op.launch_packed(self.grad_kernel, device.wrap(x.dev), self:backward_grid(shapes), self:backward_block(),
    self:pack_backward_args({ x }, {}, y, out, dy, 0, { dx }))
  return dx
end

-- op:backward(x, y, dy [, dx [, opts]]) -> dx, shaped like x; y is the forward's output (max
-- routes dy by it).
function Reduce:backward(x, y, dy, dx, opts)
  if self.mode == "prod" then raise("self: a product reduction has no backward") end
  check_tensor(self, x, "x")
  local r = on_stream(opts, x, run_backward, self, x, y, dy, dx)
  return r
end

op.finish(Reduce)
return M
