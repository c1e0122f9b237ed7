-- tocha.tensor_reduce: reductions as tensor methods, eager, through kernels/reduction.cu and
-- kernels/arg_reduce.cu on the tensor's device.
--
--   x:sum()                  -- every element: a tensor of shape {1} (x:sum():item() a number)
--   x:mean(2)                -- over dimension 2, which goes (PyTorch's keepdim=false)
--   x:amax({3, 4}, true)     -- over 3 and 4, kept as size 1 (keepdim)
--   local v, i = x:max(2)    -- values and 1-based i64 indices (Torch7's and PyTorch's pair)
--   x:var(2, false, 0)       -- correction 0 (the population variance); 1 by default
--
-- dims: nil (every element), a dimension or a list of them (1-based, negative from the end).
-- tocha has no tensors of 0 dimensions: a reduction to one value has shape {1}. Indices are
-- 1-based, as every index of tocha's (x[i], x:select, x:narrow). Integer tensors: sum and prod
-- give i64, max, min and their arg forms keep the dtype (exact to 2^53); mean, var and std
-- need a float tensor, as PyTorch's. f16 and bf16 reduce in f32.
local ffi = require "ffi"
local dtype = require "tocha.dtype"
local errors = require "tocha.errors"
local raise = errors.raise

local M = {}

-- Loaded at the first call (they load tocha.tensor, which installs this module), all at once
-- so that they are one load's (see tocha.tensor_math).
local kernel, op, reduction, math_ops, tensor, device
local function modules()
  if tensor then return end
  kernel, op = require "tocha.kernel", require "tocha.op"
  reduction, math_ops = require "tocha.ops.reduction", require "tocha.tensor_math"
  tensor, device = require "tocha.tensor", require "tocha.device"
end

local function is_tensor(x) return ffi.istype("tocha_tensor", x) end

local function sizes_of(t)
  local d = {}
  for i = 0, t.ndim - 1 do d[i + 1] = tonumber(t.dims[i]) end
  return d
end

-- The sorted, distinct 1-based dimensions `dims` names for a tensor of ndim dimensions (nil:
-- all of them).
local function dims_of(dims, ndim)
  local list = {}
  if dims == nil then
    for i = 1, ndim do list[i] = i end
    return list
  end
  if type(dims) == "number" then dims = { dims } end
  if type(dims) ~= "table" then raise("dim: expected a dimension, a list of them or nil, got " .. type(dims)) end
  local seen = {}
  for i, d in ipairs(dims) do
    if type(d) ~= "number" or d ~= math.floor(d) then
      raise(("dim[%d]: expected an integer, got %s"):format(i, errors.show(d)))
    end
    local k = d < 0 and ndim + 1 + d or d
    if k < 1 or k > ndim then
      raise(("dim: expected dimensions from 1 to %d (or -1 to -%d), got %d"):format(ndim, ndim, d))
    end
    if seen[k] then raise(("dim: dimension %d appears twice"):format(k)) end
    seen[k] = true
    list[#list + 1] = k
  end
  if #list == 0 then raise("dim: expected at least one dimension") end
  table.sort(list)
  return list
end

-- The shape left after reducing dims of d: size 1 there (keepdim), or without them ({1} when
-- none is left).
local function reduced_shape(d, dims, keepdim)
  local gone = {}
  for _, k in ipairs(dims) do gone[k] = true end
  local out = {}
  for i = 1, #d do
    if keepdim then out[#out + 1] = gone[i] and 1 or d[i]
    elseif not gone[i] then out[#out + 1] = d[i] end
  end
  if #out == 0 then out[1] = 1 end
  return out
end

local function product(d, from, to)
  local n = 1
  for i = from, to do n = n * d[i] end
  return n
end

-- The Reduce ops by mode and dtype (their kernels are what this module launches).
local reduce_ops = {}
local function reduce_op(mode, dt)
  local key = mode .. "|" .. dt
  local r = reduce_ops[key]
  if not r then
    r = reduction.Reduce.new(mode, nil, dt)
    reduce_ops[key] = r
  end
  return r
end

-- x (dense) reduced by `mode` over dimensions a..b, kept as size 1, by the kernels of the float
-- dtype dt. x holds dt, or dt's accumulator (f32 for halves: the result of an earlier run, which
-- the first pass reads as partials); the result holds the accumulator where y_acc is true, else
-- dt, so that halves reduced over several runs round once, in the last run's store. map
-- (optional, a reduction.mapped name whose plain mode `mode` is): the first pass reduces that
-- function of each element. root: the last pass stores the square root of its total (the
-- 2-norm's; mode "sum").
local function reduce_run(x, mode, a, b, dt, y_acc, map, root)
  local d = sizes_of(x)
  local outer, n, inner = product(d, 1, a - 1), product(d, a, b), product(d, b + 1, #d)
  local out = {}
  for i = 1, #d do out[i] = (i >= a and i <= b) and 1 or d[i] end
  local acc_dt = dt == "f64" and "f64" or "f32"
  local x_acc = dtype.name(x.elem_type) ~= dt
  local r = reduce_op(mode, dt)
  local dev = device.wrap(x.dev)
  local y = tensor.alloc(out, y_acc and acc_dt or dt, dev)
  local passes = reduction.plan(outer, n, inner, r.block_size, x_acc and acc_dt or dt, true)
  passes[1].acc = x_acc or nil
  local first = map and reduction.mapped(map, dt)
  local last = root and reduction.mapped(#passes == 1 and map == "square_sum" and "square_sum_root" or "root_sum", dt)
  local divisor = mode == "mean" and n or 1
  local function kernels_of(i) return i == #passes and last or i == 1 and first or r end
  reduction.run_launches(function(i) return reduction.pass_kernel(kernels_of(i), passes[i]) end, dev,
    r.block_size, #passes, reduction.partial_bytes(passes, dt),
    function(i) return reduction.pass_grid(passes[i], r.block_size, dt) end,
    function(i, ws) return reduction.pass_args(passes, i, x.data, y.data, ws, divisor, y_acc and 1 or 0) end)
  return y
end

-- The runs of consecutive dimensions in a sorted list, last first: {{a, b}, ...}.
local function runs_of(dims)
  local runs = {}
  local i = 1
  while i <= #dims do
    local j = i
    while j < #dims and dims[j + 1] == dims[j] + 1 do j = j + 1 end
    table.insert(runs, 1, { dims[i], dims[j] })
    i = j + 1
  end
  return runs
end

-- ---- empty tensors ----
--
-- A tensor with a size 0 launches nothing. Reducing over a dimension of size 0 gives each output
-- the identity of the reduction, as PyTorch does: sum 0, prod 1, mean NaN (0 / 0), var and std
-- NaN; max, min and the arg forms have no identity and raise, naming the dimension. Dimensions
-- of size 0 that are kept (not reduced) leave the result empty.

-- Raises when one of the dimensions in `list` (sorted, 1-based) of sizes d is empty, for a
-- reduction without an identity.
local function refuse_empty(d, list, what)
  for _, k in ipairs(list) do
    if d[k] == 0 then
      raise(("self: %s() cannot reduce over an empty dimension (dimension %d has size 0)"):format(what, k))
    end
  end
end

-- The result of reducing an empty x over list: a new tensor of the reduced shape (dtype dt)
-- holding `value`, or empty.
local function empty_result(x, d, list, keepdim, dt, value)
  local y = tensor.alloc(reduced_shape(d, list, keepdim), dt, device.wrap(x.dev))
  y:fill(value)
  return y
end

local EMPTY_VALUE = { sum = 0, prod = 1, mean = 0 / 0 }

-- x reduced by mode over dims (a method's arguments), in x's dtype rules above. map (optional, a
-- reduction.mapped name whose plain mode is `mode`; x a float tensor): the reduction of that
-- function of each element, in the accumulator's dtype (f32 for halves) rather than x's, unless
-- root: then the square root of the sum (map "square_sum": the 2-norm), stored in x's dtype by
-- the last pass.
local function reduce(x, mode, dims, keepdim, what, map, root)
  modules()
  if not is_tensor(x) then raise("self: expected a tensor, got " .. type(x)) end
  if x.freed ~= 0 then raise("self: tensor was freed") end
  if keepdim ~= nil and type(keepdim) ~= "boolean" then raise("keepdim: expected a boolean, got " .. type(keepdim)) end
  local d = sizes_of(x)
  local list = dims_of(dims, #d)
  local dt = dtype.name(x.elem_type)
  local work = x:contiguous()
  local result_dt = dt
  if dtype.is_integer(dt) then
    if mode == "mean" then
      raise(("self: %s() needs a float tensor, got %s (cast it first: x:cast(\"f32\"))"):format(what, dt))
    end
    result_dt = (mode == "sum" or mode == "prod") and "i64" or dt
    if x.count == 0 then work = nil else work = work:cast("f64") end
  end
  if x.count == 0 then
    if mode == "max" or mode == "min" then refuse_empty(d, list, what) end
    local r = empty_result(x, d, list, keepdim, result_dt, EMPTY_VALUE[mode] or 0)
    return r
  end
  -- runs between others keep their results in the accumulator (f32 for halves), which the next
  -- run reads; a mapped reduction's result stays there too
  local runs = runs_of(list)
  local kernel_dt = dtype.name(work.elem_type)
  for i, run in ipairs(runs) do
    local last = i == #runs
    work = reduce_run(work, mode, run[1], run[2], kernel_dt, (map ~= nil and not root) or not last, i == 1 and map or nil,
      root and last)
  end
  if (not map or root) and result_dt ~= dtype.name(work.elem_type) then work = work:cast(result_dt) end
  return work:view(reduced_shape(d, list, keepdim))
end

-- ---- indices ----

local arg_kernels = {}
local function arg_kernel(dt, min)
  local key = dt .. (min and "|min" or "|max")
  local k = arg_kernels[key]
  if not k then
    k = kernel.new { source = op.source("arg_reduce.cu"), name = "tocha_arg_reduce",
      template_args = ("%s, %d"):format(dtype.ctype(dt), min and 1 or 0),
      params = ("%s* x, i64* y, i64 outer, i64 n, i64 inner, i32 rows"):format(dt) }
    arg_kernels[key] = k
  end
  return k
end

local ARG_BLOCK = 256

-- The 1-based i64 indices of x's largest (smallest with min) elements along dim (nil: over the
-- flattened tensor), shaped as a reduction over dim.
local function arg_reduce(x, dim, keepdim, min, what)
  modules()
  if not is_tensor(x) then raise("self: expected a tensor, got " .. type(x)) end
  if x.freed ~= 0 then raise("self: tensor was freed") end
  if dim ~= nil and type(dim) ~= "number" then raise(("dim: %s() takes one dimension or nil, got %s"):format(what, type(dim))) end
  local d = sizes_of(x)
  if x.count == 0 then
    if dim == nil then raise(("self: %s() of an empty tensor over every element: it has no element to pick"):format(what)) end
    refuse_empty(d, dims_of(dim, #d), what)
    local r = empty_result(x, d, dims_of(dim, #d), keepdim, "i64", 0)
    return r
  end
  local work = x:contiguous()
  local outer, n, inner, list
  if dim == nil then
    outer, n, inner = 1, product(d, 1, #d), 1
    list = dims_of(nil, #d)
  else
    list = dims_of(dim, #d)
    local k = list[1]
    outer, n, inner = product(d, 1, k - 1), d[k], product(d, k + 1, #d)
  end
  local rows, grid = M.team_mapping(outer, n, inner, ARG_BLOCK, dtype.size_of_id(work.elem_type))
  local out = reduced_shape(d, list, keepdim)
  if dim == nil and not keepdim then out = { 1 } end
  local y = tensor.alloc(out, "i64", device.wrap(work.dev))
  op.launch_packed(arg_kernel(dtype.name(work.elem_type), min), device.wrap(work.dev), grid, { ARG_BLOCK, 1, 1 },
    { work.data, y.data, outer, n, inner, rows })
  return y
end

-- ---- variance ----

local var_kernels = {}
local function var_kernel(dt)
  if not var_kernels[dt] then
    var_kernels[dt] = kernel.new { source = op.source("variance.cu"), name = "tocha_variance", template_args = dtype.ctype(dt),
      params = ("%s* x, %s* y, i64 outer, i64 n, i64 inner, f64 divisor, i32 rows"):format(dt, dt) }
  end
  return var_kernels[dt]
end

-- The variance of x over dims with `correction` (1: Bessel's, PyTorch's default). Adjacent
-- dimensions (or all of them) take one launch of variance.cu; others go through a permuted
-- dense copy that brings them together.
local function variance(x, dims, keepdim, correction, what)
  modules()
  if not is_tensor(x) then raise("self: expected a tensor, got " .. type(x)) end
  if x.freed ~= 0 then raise("self: tensor was freed") end
  if keepdim ~= nil and type(keepdim) ~= "boolean" then raise("keepdim: expected a boolean, got " .. type(keepdim)) end
  local dt = dtype.name(x.elem_type)
  if not dtype.is_float(dt) then
    raise(("self: %s() needs a float tensor, got %s (cast it first: x:cast(\"f32\"))"):format(what, dt))
  end
  if correction == nil then correction = 1 end
  if type(correction) ~= "number" or correction < 0 then
    raise("correction: expected a non-negative number, got " .. errors.show(correction))
  end
  local d = sizes_of(x)
  local list = dims_of(dims, #d)
  if x.count == 0 then
    local r = empty_result(x, d, list, keepdim, dt, 0 / 0)
    return r
  end
  local work = x
  local first, last = list[1], list[#list]
  if last - first + 1 ~= #list then
    -- bring the reduced dimensions to the end, in order
    local order, gone = {}, {}
    for _, k in ipairs(list) do gone[k] = true end
    for k = 1, #d do if not gone[k] then order[#order + 1] = k end end
    for _, k in ipairs(list) do order[#order + 1] = k end
    work = x:permute(order)
    local pd = {}
    for i, k in ipairs(order) do pd[i] = d[k] end
    first, last, d = #d - #list + 1, #d, pd
  end
  work = work:contiguous()
  local outer, n, inner = product(d, 1, first - 1), product(d, first, last), product(d, last + 1, #d)
  local y = tensor.alloc({ outer * inner }, dt, device.wrap(x.dev))
  local rows, grid = M.team_mapping(outer, n, inner, ARG_BLOCK, dtype.size(dt))
  -- n - correction <= 0 divides by zero or less: inf or NaN, as PyTorch gives.
  op.launch_packed(var_kernel(dt), device.wrap(x.dev), grid, { ARG_BLOCK, 1, 1 },
    { work.data, y.data, outer, n, inner, math.max(n - correction, 0), rows })
  return y:view(reduced_shape(sizes_of(x), list, keepdim))
end

-- ---- softmax ----

local softmax_kernels = {}
local function softmax_kernel(dt, log)
  local key = dt .. (log and "|log" or "")
  local k = softmax_kernels[key]
  if not k then
    k = kernel.new { source = op.source("softmax.cu"), name = "tocha_softmax",
      template_args = ("%s, %d"):format(dtype.ctype(dt), log and 1 or 0),
      params = ("%s* x, %s* y, i64 outer, i64 n, i64 inner, i32 rows"):format(dt, dt) }
    softmax_kernels[key] = k
  end
  return k
end

-- The team mapping and grid of a row kernel built on tocha.cuh's teams (softmax.cu, norm.cu,
-- arg_reduce.cu, variance.cu) over [outer, n, inner] of elements of `size` bytes with CTAs of
-- `block` threads: a thread a column where inner > 1; else, for rows of `groups` 16-byte
-- groups, a CTA a row for rows of 16 or more groups a thread of the CTA (64 KB at 256 threads),
-- and for rows of 2 or more groups a thread when there are too few rows (under 4096) for a
-- warp each to fill an H200 (132 SMs x 32 warps); otherwise a warp's team, which needs no
-- barrier where a CTA pays one a row: the fewest lanes (a power of two, up to 32) that leave
-- each lane about three groups, so that a warp takes several short rows at once. Measured on
-- an H200 (docs/performance.md).
local function team_mapping(outer, n, inner, block, size)
  local rows, grid
  if inner > 1 then
    rows, grid = 0, math.ceil(outer * inner / block)
  else
    local groups = math.ceil(n * size / 16)
    if groups >= 16 * block or (groups >= 2 * block and outer < 4096) then
      rows, grid = -1, outer
    else
      rows = 1
      while rows < 32 and rows * 4 <= groups do rows = rows * 2 end
      grid = math.ceil(outer / (block / rows))
    end
  end
  return rows, { math.max(1, math.min(grid, 2 ^ 31 - 1)), 1, 1 }
end
M.team_mapping = team_mapping

-- The most 16-byte groups a thread of softmax.cu holds in registers (its sm_most): 32 elements,
-- 16 of f64.
local function held_groups(size) return size == 8 and 8 or 32 * size / 16 end

-- softmax.cu's mapping (team_mapping's form): a row of whole 16-byte groups that its team can
-- hold in registers (read once, where the other paths read it two or three times) goes to
-- - a warp's team of the fewest lanes that hold it, up to 32 elements a lane (f32 rows of 80:
--   4 lanes of 5 groups, 80 bytes in flight a thread, 8 rows a warp, two shuffle steps a
--   combine; 8 lanes would keep at most 48 bytes in flight and take three steps);
-- - a CTA, for rows of 2 groups a thread (8 KB at 256 threads: the same rows a warp would
--   read two or three times, the later reads missing L1) up to the most a thread holds (32 KB
--   in f32, 16 KB in halves);
-- and any other row over 8 KB goes to a CTA too: its second read (the running pair's) finds
-- the row in L2 while the rows in flight fit there (an H200's 132 SMs x 4 CTAs hold 528 rows,
-- 34 MB of 64 KB rows, where a warp a row would hold 4224 rows and read each again from
-- memory). Others (and columns) take team_mapping's. Whether the row is aligned is the
-- kernel's to see: an unaligned one takes the same team through the paths that read it again.
local function softmax_mapping(outer, n, inner, block, size)
  if inner == 1 then
    local most, groups = held_groups(size), n * size / 16
    local cta = { math.max(1, math.min(outer, 2 ^ 31 - 1)), 1, 1 }
    if groups == math.floor(groups) and groups <= 32 * most then
      local rows = 1
      while rows * most < groups do rows = rows * 2 end
      return rows, { math.max(1, math.min(math.ceil(outer / (block / rows)), 2 ^ 31 - 1)), 1, 1 }
    end
    if groups == math.floor(groups) and groups >= 2 * block and groups <= most * block then return -1, cta end
    if n * size > 8192 then return -1, cta end
  end
  return team_mapping(outer, n, inner, block, size)
end
M.softmax_mapping = softmax_mapping

-- softmax (log-softmax with log) of x along dim, a new tensor of x's shape and dtype.
local function softmax(x, dim, log, what)
  modules()
  if not is_tensor(x) then raise("self: expected a tensor, got " .. type(x)) end
  if x.freed ~= 0 then raise("self: tensor was freed") end
  if type(dim) ~= "number" then raise(("dim: %s() needs a dimension, got %s"):format(what, type(dim))) end
  local dt = dtype.name(x.elem_type)
  if not dtype.is_float(dt) then
    raise(("self: %s() needs a float tensor, got %s (cast it first: x:cast(\"f32\"))"):format(what, dt))
  end
  local d = sizes_of(x)
  local k = dims_of(dim, #d)[1]
  if x.count == 0 then -- empty: nothing to launch
    local r = tensor.alloc(d, dt, device.wrap(x.dev))
    return r
  end
  local outer, n, inner = product(d, 1, k - 1), d[k], product(d, k + 1, #d)
  local work = x:contiguous()
  local y = tensor.alloc(d, dt, device.wrap(x.dev))
  local rows, grid = softmax_mapping(outer, n, inner, ARG_BLOCK, dtype.size(dt))
  op.launch_packed(softmax_kernel(dt, log), device.wrap(x.dev), grid, { ARG_BLOCK, 1, 1 },
    { work.data, y.data, outer, n, inner, rows })
  return y
end

-- ---- running sums and products (kernels/scan.cu) ----

-- The accumulator of a scan reading dt: its C type in scan.cu and a tensor dtype of its size
-- (a workspace's carries). f64 for f64; integers sum and multiply as 64-bit unsigned (wrapping as
-- i64 does, the same bits as i64); f32 otherwise (halves accumulate in f32).
local function scan_acc(dt)
  if dt == "f64" then return "double", "f64" end
  if dtype.is_integer(dt) then return "unsigned long long", "i64" end
  return "float", "f32"
end

local scan_kernels = {}
-- The scan.cu kernel reading dt and writing out_dt: a running product when prod, else a sum;
-- exclusive leaves each element out of its own output, reverse runs from the end. Cached.
local function scan_kernel(dt, out_dt, prod, exclusive, reverse)
  modules()
  local key = table.concat({ dt, out_dt, prod and 1 or 0, exclusive and 1 or 0, reverse and 1 or 0 }, "|")
  local k = scan_kernels[key]
  if not k then
    local acc = scan_acc(dt)
    k = kernel.new { source = op.source("scan.cu"), name = "tocha_scan",
      template_args = ("%s, %s, %s, %d, %d, %d"):format(dtype.ctype(dt), dtype.ctype(out_dt), acc, prod and 1 or 0,
        exclusive and 1 or 0, reverse and 1 or 0),
      params = ("%s* x, %s* y, i64 outer, i64 n, i64 inner"):format(dt, out_dt) }
    scan_kernels[key] = k
  end
  return k
end
M.scan_kernel = scan_kernel

-- The grid of a scan over (outer, n, inner) in blocks of ARG_BLOCK threads: a warp a row along
-- the last dimension (inner == 1), else a thread a column (scan.cu's two mappings).
local function scan_grid(outer, inner)
  modules()
  local units = inner == 1 and outer * 32 or outer * inner
  return op.element_grid(math.max(units, 1), ARG_BLOCK)
end
M.scan_grid = scan_grid
M.SCAN_BLOCK = ARG_BLOCK

local long_scan_kernels = {}
-- kernels/scan.cu's long-row kernels: "totals" (x of dt into its chunks' totals) or "chunks"
-- (each chunk from its carry, into out_dt; from the identity, reading no carries, where
-- uncarried). Cached.
local function long_scan_kernel(which, dt, out_dt, prod, exclusive, reverse, uncarried)
  if which == "totals" then out_dt, exclusive, uncarried = "", false, false end -- the totals read x alone, inclusive
  local key = table.concat({ which, dt, out_dt, prod and 1 or 0, exclusive and 1 or 0, reverse and 1 or 0,
    uncarried and 1 or 0 }, "|")
  local k = long_scan_kernels[key]
  if not k then
    local acc = scan_acc(dt)
    local p, e, r = prod and 1 or 0, exclusive and 1 or 0, reverse and 1 or 0
    if which == "totals" then
      k = kernel.new { source = op.source("scan.cu"), name = "tocha_scan_totals",
        template_args = ("%s, %s, %d, %d"):format(dtype.ctype(dt), acc, p, r),
        params = ("%s* x, u8* totals, i64 n, i64 chunks"):format(dt) }
    else
      k = kernel.new { source = op.source("scan.cu"), name = "tocha_scan_chunks",
        template_args = ("%s, %s, %s, %d, %d, %d, %d"):format(dtype.ctype(dt), dtype.ctype(out_dt), acc, p, e, r,
          uncarried and 0 or 1),
        params = ("%s* x, %s* y, u8* carries, i64 n, i64 chunks"):format(dt, out_dt) }
    end
    long_scan_kernels[key] = k
  end
  return k
end

-- kernels/scan.cu's chunk of a long row (SCAN_CHUNK) and its CTA (SCAN_THREADS: every scan
-- launch's, so that an op's launches share one block).
local SCAN_CHUNK, SCAN_THREADS = 4096, 256
assert(SCAN_THREADS == ARG_BLOCK)
-- Rows along the last dimension fewer than this (an H200's warps in flight, 132 SMs x 64) and
-- longer than a chunk run in chunks: a warp a row would leave the device idle and walk the row
-- 32 steps at a time.
local LONG_SCAN_ROWS = 8448
-- The most chunks a row whose carries one CTA scans (one chunk of totals); past it a warp a row
-- does. (A module field so that a spec can take the warp's path on a short row; a CumSum op
-- keeps the plan it made before a change.)
M.carries_by_cta = SCAN_CHUNK

-- The launches of a scan over the dense (outer, n, inner) along n, reading dt and writing out_dt
-- (a running product where prod; exclusive and from the end as asked): {launches, bytes}, each
-- launch {kernel, grid, args = function(x, y, ws) -> its arguments} on CTAs of M.SCAN_BLOCK, ws a
-- workspace of `bytes`. One launch, a warp a row or a thread a column; rows along the last
-- dimension too few to fill the device and longer than a chunk in chunks: three launches (the
-- chunks' totals, then their carries, in the workspace: a CTA a row of at most SCAN_CHUNK
-- totals, else a warp; then the chunks). The shape alone
-- decides, so x:cumsum and tocha.CumSum give the same bits.
local function scan_plan(outer, n, inner, dt, out_dt, prod, exclusive, reverse)
  modules()
  if inner ~= 1 or n <= SCAN_CHUNK or outer >= LONG_SCAN_ROWS then
    return { bytes = 0, launches = { { kernel = scan_kernel(dt, out_dt, prod, exclusive, reverse),
      grid = scan_grid(outer, inner), args = function(x, y) return { x, y, outer, n, inner } end } } }
  end
  local chunks = math.ceil(n / SCAN_CHUNK)
  local _, acc_dt = scan_acc(dt)
  local half = math.ceil(outer * chunks * dtype.size(acc_dt) / 256) * 256 -- the carries 256-byte aligned
  local grid = { outer * chunks, 1, 1 }
  return { bytes = 2 * half, launches = {
    { kernel = long_scan_kernel("totals", dt, out_dt, prod, exclusive, reverse), grid = grid,
      args = function(x, _, ws) return { x, ws, n, chunks } end },
    -- the carries: a CTA a row of totals where they fit one chunk (a warp a row walks 32 a step)
    chunks <= math.min(M.carries_by_cta, SCAN_CHUNK) and { kernel = long_scan_kernel("chunks", acc_dt, acc_dt, prod, true, false, true),
      grid = { outer, 1, 1 }, args = function(_, _, ws) return { ws, ws + half, ws, chunks, 1 } end }
      or { kernel = scan_kernel(acc_dt, acc_dt, prod, true, false), grid = scan_grid(outer, 1),
      args = function(_, _, ws) return { ws, ws + half, outer, chunks, 1 } end },
    { kernel = long_scan_kernel("chunks", dt, out_dt, prod, exclusive, reverse), grid = grid,
      args = function(x, y, ws) return { x, y, ws + half, n, chunks } end } } }
end
M.scan_plan = scan_plan

-- y (out_dt) = the scan of the dense x (dt) viewed as (outer, n, inner) along n (scan_plan's
-- arguments), on dev, with a workspace of its own.
local function scan_launch(x, y, outer, n, inner, dt, out_dt, prod, exclusive, reverse, dev)
  local plan = scan_plan(outer, n, inner, dt, out_dt, prod, exclusive, reverse)
  local ws = plan.bytes > 0 and tensor.alloc({ plan.bytes }, "u8", dev) or nil
  local base = ws and ffi.cast("uint64_t", ws.data) or 0
  for _, l in ipairs(plan.launches) do
    op.launch_packed(l.kernel, dev, l.grid, { SCAN_THREADS, 1, 1 }, l.args(x.data, y.data, base))
  end
  if ws then ws:free() end
end

M.scan_launch = scan_launch

-- x:cumsum(dim), x:cumprod(dim): the inclusive running sum / product along dim, x's shape;
-- integer tensors give i64 (wrapping as i64 does), as PyTorch's; halves accumulate in f32.
local function scan(x, dim, prod, what)
  modules()
  if not is_tensor(x) then raise("self: expected a tensor, got " .. type(x)) end
  if x.freed ~= 0 then raise("self: tensor was freed") end
  if type(dim) ~= "number" then raise(("dim: %s() needs a dimension, got %s"):format(what, type(dim))) end
  local dt = dtype.name(x.elem_type)
  local out_dt = dtype.is_integer(dt) and "i64" or dt
  local d = sizes_of(x)
  local k = dims_of(dim, #d)[1]
  local y = tensor.alloc(d, out_dt, device.wrap(x.dev))
  if x.count == 0 then return y end
  local outer, n, inner = product(d, 1, k - 1), d[k], product(d, k + 1, #d)
  local work = x:contiguous()
  scan_launch(work, y, outer, n, inner, dt, out_dt, prod, false, false, device.wrap(x.dev))
  return y
end

-- ---- reductions made of the others ----

local function float_input(x, what)
  modules()
  if not is_tensor(x) then raise("self: expected a tensor, got " .. type(x)) end
  if x.freed ~= 0 then raise("self: tensor was freed") end
  local dt = dtype.name(x.elem_type)
  if not dtype.is_float(dt) then
    raise(("self: %s() needs a float tensor, got %s (cast it first: x:cast(\"f32\"))"):format(what, dt))
  end
  return dt
end

-- x:any / x:all over dims: a u8 mask, 1 where some / every element is non-zero (NaN is, as in
-- PyTorch); over no elements any gives 0 and all 1. Counted as a sum of x's u8 comparison with 0.
local function truth(x, dims, keepdim, all, what)
  modules()
  if not is_tensor(x) then raise("self: expected a tensor, got " .. type(x)) end
  local marks = math_ops.binary(all and "eq" or "ne", x, 0)
  local count = reduce(marks, "sum", dims, keepdim, what)
  local r = math_ops.binary(all and "eq" or "gt", count, 0)
  return r
end

local logsumexp_kernels = {}
-- softmax.cu's tocha_logsumexp for dtype dt, cached.
local function logsumexp_kernel(dt)
  local k = logsumexp_kernels[dt]
  if not k then
    k = kernel.new { source = op.source("softmax.cu"), name = "tocha_logsumexp", template_args = dtype.ctype(dt),
      params = ("%s* x, %s* y, i64 outer, i64 n, i64 inner, i32 rows"):format(dt, dt) }
    logsumexp_kernels[dt] = k
  end
  return k
end

-- x:logsumexp(dims [, keepdim]): log(sum(exp(x))) over dims, shifted by the maximum so that
-- no exp overflows (an infinite or NaN maximum shifts by 0, so that a row of -inf gives -inf
-- and one holding +inf gives +inf); halves compute in f32 and round once. Over one dimension,
-- one launch (softmax.cu's tocha_logsumexp: x read once, or twice from L1 for rows of at most
-- 8 KB); over several, a maximum, x - maximum, exp and a sum.
local function logsumexp(x, dims, keepdim)
  local dt = float_input(x, "logsumexp")
  if keepdim ~= nil and type(keepdim) ~= "boolean" then raise("keepdim: expected a boolean, got " .. type(keepdim)) end
  local d = sizes_of(x)
  local list = dims_of(dims, #d)
  if #list == 1 and x.count > 0 then
    local k = list[1]
    local outer, n, inner = product(d, 1, k - 1), d[k], product(d, k + 1, #d)
    local work = x:contiguous()
    local y = tensor.alloc(reduced_shape(d, list, keepdim == true), dt, device.wrap(x.dev))
    local rows, grid = team_mapping(outer, n, inner, ARG_BLOCK, dtype.size(dt))
    op.launch_packed(logsumexp_kernel(dt), device.wrap(x.dev), grid, { ARG_BLOCK, 1, 1 },
      { work.data, y.data, outer, n, inner, rows })
    return y
  end
  local half = dt == "f16" or dt == "bf16"
  local work = half and x.count == 0 and x:cast("f32") or x
  local r
  if x.count == 0 then -- sums of no elements are 0, whose log is -inf
    r = reduce(work, "sum", list, keepdim, "logsumexp")
    math_ops.unary("log", r, r)
  else
    -- halves: the maximum of x itself is exact, and x - m (an f32 m) is computed and kept in f32,
    -- so x is read twice as it is and never cast as a whole
    local m = reduce(x, "max", list, true, "logsumexp")
    if half then m = m:cast("f32") end
    m = math_ops.where(math_ops.binary("lt", math_ops.unary("abs", m), math.huge), m, 0)
    local shifted = math_ops.binary("sub", x, m)
    r = reduce(math_ops.unary("exp", shifted, shifted), "sum", list, true, "logsumexp")
    math_ops.unary("log", r, r)
    math_ops.binary("add", r, m, r)
    if not keepdim then r = r:view(reduced_shape(d, list, false)) end
  end
  if half then r = r:cast(dt) end
  return r
end

-- x:norm([p [, dims [, keepdim]]]): the p-norm over dims (every element by default): p = 2 (the
-- default) sqrt(sum(x^2)), 1 sum(|x|), math.huge max(|x|), -math.huge min(|x|), 0 the count of
-- non-zero elements, any other (sum(|x|^p))^(1/p). Halves compute in f32 and round once.
local function norm(x, p, dims, keepdim)
  local dt = float_input(x, "norm")
  if p == nil then p = 2 end
  if type(p) ~= "number" or p ~= p then raise("p: expected a number (math.huge for the max norm), got " .. errors.show(p)) end
  if keepdim ~= nil and type(keepdim) ~= "boolean" then raise("keepdim: expected a boolean, got " .. type(keepdim)) end
  local map = ({ [2] = "square_sum", [1] = "abs_sum", [math.huge] = "abs_max", [-math.huge] = "abs_min" })[p]
  if map and x.count > 0 then
    -- one read of x: the first pass reduces x^2 or |x| as it loads them, into the accumulator's dtype
    -- (the 2-norm's square root in the last pass's store)
    local work = reduce(x, reduction.MAPPED_BASE[map], dims, keepdim, "norm", map, p == 2)
    if dtype.name(work.elem_type) ~= dt then work = work:cast(dt) end
    return work
  end
  local work = (dt == "f16" or dt == "bf16") and x:cast("f32") or x
  local a = math_ops.unary("abs", work)
  local r
  if p == math.huge then r = reduce(a, "max", dims, keepdim, "norm")
  elseif p == -math.huge then r = reduce(a, "min", dims, keepdim, "norm")
  elseif p == 0 then r = reduce(math_ops.binary("ne", a, 0), "sum", dims, keepdim, "norm"):cast(work:dtype())
  elseif p == 1 then r = reduce(a, "sum", dims, keepdim, "norm")
  elseif p == 2 then
    r = reduce(math_ops.unary("square", a, a), "sum", dims, keepdim, "norm")
    math_ops.unary("sqrt", r, r)
  else
    r = reduce(math_ops.binary("pow", a, p, a), "sum", dims, keepdim, "norm")
    math_ops.binary("pow", r, 1 / p, r)
  end
  if work ~= x then r = r:cast(dt) end
  return r
end

-- ---- installing ----

-- Installs the reduction methods (methods: the tensor method table).
function M.install(methods)
  for _, mode in ipairs({ "sum", "mean", "prod" }) do
    methods[mode] = errors.name(function(x, dims, keepdim) local r = reduce(x, mode, dims, keepdim, mode) return r end, "Tensor:" .. mode)
  end
  methods.amax = function(x, dims, keepdim) local r = reduce(x, "max", dims, keepdim, "amax") return r end
  methods.amin = function(x, dims, keepdim) local r = reduce(x, "min", dims, keepdim, "amin") return r end
  -- x:max() (every element), x:max(dim [, keepdim]) -> values, indices; x:max(other) is the
  -- elementwise maximum (PyTorch's torch.max(x, other)).
  local function extreme(mode, min, elementwise)
    return function(x, dim, keepdim)
      modules() -- x:max(other) reaches tensor_math before any reduction has loaded it
      if is_tensor(dim) then local r = math_ops.binary(elementwise, x, dim) return r end
      if dim == nil then local r = reduce(x, mode, nil, keepdim, mode) return r end
      if type(dim) ~= "number" then
        raise(("dim: %s() takes one dimension, a tensor (elementwise) or nothing, got %s"):format(mode, type(dim)))
      end
      local v, i = reduce(x, mode, dim, keepdim, mode), arg_reduce(x, dim, keepdim, min, mode)
      return v, i
    end
  end
  methods.max = extreme("max", false, "maximum")
  methods.min = extreme("min", true, "minimum")
  methods.argmax = function(x, dim, keepdim) local r = arg_reduce(x, dim, keepdim, false, "argmax") return r end
  methods.argmin = function(x, dim, keepdim) local r = arg_reduce(x, dim, keepdim, true, "argmin") return r end
  methods.softmax = function(x, dim) local r = softmax(x, dim, false, "softmax") return r end
  methods.log_softmax = function(x, dim) local r = softmax(x, dim, true, "log_softmax") return r end
  methods.var = function(x, dims, keepdim, correction) local r = variance(x, dims, keepdim, correction, "var") return r end
  methods.cumsum = function(x, dim) local r = scan(x, dim, false, "cumsum") return r end
  methods.cumprod = function(x, dim) local r = scan(x, dim, true, "cumprod") return r end
  methods.any = function(x, dims, keepdim) local r = truth(x, dims, keepdim, false, "any") return r end
  methods.all = function(x, dims, keepdim) local r = truth(x, dims, keepdim, true, "all") return r end
  methods.logsumexp = function(x, dims, keepdim) local r = logsumexp(x, dims, keepdim) return r end
  methods.norm = function(x, p, dims, keepdim) local r = norm(x, p, dims, keepdim) return r end
  methods.std = function(x, dims, keepdim, correction)
    local v = variance(x, dims, keepdim, correction, "std")
    local r = math_ops.unary("sqrt", v, v)
    return r
  end
end

return M
