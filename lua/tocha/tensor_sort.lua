-- tocha.tensor_sort: sorting along a dimension (kernels/sort.cu) and what is read off a sort.
--
--   local v, i = x:sort(2)              -- ascending along dimension 2; i: 1-based i64 positions
--   local v, i = x:sort(-1, true)       -- descending
--   local v, i = x:topk(5, 2)           -- the 5 largest along 2, largest first
--   local m, i = x:median(2)            -- the lower median and its position
--
-- The order is total and the same on every device and run: NaN after every number ascending
-- (first descending), equal values in their positions' order (a stable sort).
local ffi = require "ffi"
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local errors = require "tocha.errors"
local view = require "tocha.view"
local raise, show = errors.raise, errors.show

local M = {}

local E = 8 -- items a thread holds in registers (kernels/sort.cu)
local BLOCK = 256
local TOPK_ITEMS = 64 -- the longest row topk selects in a warp: 32 a lane of these
-- Rows of dtypes up to 32 bits longer than M.RADIX_FROM (a field, for A/B runs) are radix-sorted:
-- by one CTA up to RADIX_WARPS warps of 8 items a thread (16 past 4096 elements), across CTAs
-- past that. Shorter rows and 64-bit dtypes go to the bitonic network (several rows a CTA when
-- short, segments through a work buffer past one CTA).
M.RADIX_FROM = 256
local RADIX_WARPS = 24

-- The positions a CTA holds in shared memory: 4096 one-word items (dtypes up to 32 bits), 2048
-- two-word ones (f64, i64): 34 KB with their padding.
local function seg_of(dt) return dtype.size(dt) == 8 and 2048 or 4096 end

local tensor, kernel, op
local function modules()
  if tensor then return end
  tensor, kernel, op = require "tocha.tensor", require "tocha.kernel", require "tocha.op"
end

local function is_tensor(x) return ffi.istype("tocha_tensor", x) end

local kernels = {}
-- tocha_radix_offsets's CTA: a thread a (slice of a row's tiles, digit), kernels/sort.cu's
-- RADIX_SLICES x 256
local RADIX_OFFSET_THREADS = 1024
-- items, picks: tocha_topk_warp's keys a lane and sorted picks a lane (powers of two); items:
-- tocha_sort_radix's items a thread
-- compact: 32-bit items (16- and 8-bit dtypes, rows up to 2^16 padded)
local function sort_kernel(name, dt, items, picks, compact)
  local key = name .. "/" .. dt .. "/" .. (items or "") .. "/" .. (picks or "") .. "/" .. tostring(compact)
  local k = kernels[key]
  if k then return k end
  local c = dtype.ctype(dt)
  local spec = {
    tocha_sort_block = { ("%s, %d, %d, %s"):format(c, E, seg_of(dt), tostring(compact)),
      "%s* x, i64* work, %s* y, i64* yi, i64 rows, i64 n, i64 P, i64 k, i32 first, i32 desc, i64 m" },
    tocha_sort_step = { ("%s, %s"):format(c, tostring(compact)), "i64* work, i64 rows, i64 P, i64 k, i64 j" },
    tocha_sort_radix = { ("%s, %s, %s"):format(c, items, tostring(compact)), "%s* x, %s* y, i64* yi, i64 n, i32 desc, i64 m" },
    tocha_radix_count = { c, "%s* x, i64* work, i32* counts, i64 n, i64 tiles, i32 first, i32 desc, i32 shift" },
    tocha_radix_offsets = { nil, "i32* counts, i64 tiles" },
    tocha_radix_scatter = { c,
      "%s* x, i64* work, i64* out, i32* offsets, %s* y, i64* yi, i64 n, i64 tiles, i32 first, i32 last, i32 desc, i32 shift, i64 m" },
    tocha_topk_warp = { ("%s, %s, %s"):format(c, items, picks),
      "%s* x, %s* y, i64* yi, i64 rows, i64 n, i64 m, i32 desc" },
  }
  local s = spec[name]
  k = kernel.new { source = op.source("sort.cu"), name = name, template_args = s[1], params = s[2]:format(dt, dt, dt),
    launch_bounds = name == "tocha_sort_radix" and { 32 * RADIX_WARPS }
      or (name == "tocha_radix_count" or name == "tocha_radix_scatter") and { 512 }
      or name == "tocha_radix_offsets" and { RADIX_OFFSET_THREADS } or nil }
  kernels[key] = k
  return k
end

local RADIX_TILE = 4096 -- positions a CTA of the long rows' radix sort ranks (16 warps of 8)

-- The first m of each row of x (rows, n: dense, a dtype up to 32 bits) sorted into y and yi by
-- a radix sort across CTAs (kernels/sort.cu's tocha_radix_*): a pass a byte of the order key,
-- three launches a pass (512 threads a tile), the items waiting in work buffers between passes.
local function radix_rows(x, y, yi, rows, n, m, desc, dt, dev)
  local tiles = math.ceil(n / RADIX_TILE)
  local passes = dtype.size(dt)
  -- pass p writes buffer (p - 1) % 2 + 1 and reads the other; the first reads x, the last writes
  -- y and yi: one pass needs no buffer, two need one
  local work = {}
  for b = 1, math.min(passes - 1, 2) do work[b] = tensor.alloc({ rows * n }, "i64", dev) end
  local counts = tensor.alloc({ rows * tiles * 256 }, "i32", dev)
  local halves = { (work[1] or yi).data, (work[2] or yi).data } -- yi: a pointer never used
  local count = sort_kernel("tocha_radix_count", dt)
  local offsets = sort_kernel("tocha_radix_offsets", "i32") -- not a template: one kernel for every dtype
  local scatter = sort_kernel("tocha_radix_scatter", dt)
  for pass = 1, passes do
    local first, last = pass == 1 and 1 or 0, pass == passes and 1 or 0
    local from, to = halves[pass % 2 + 1], halves[(pass - 1) % 2 + 1]
    local shift = 8 * (pass - 1)
    op.launch_packed(count, dev, { rows * tiles, 1, 1 }, { 512, 1, 1 }, { x.data, from, counts.data, n, tiles, first, desc, shift })
    op.launch_packed(offsets, dev, { rows, 1, 1 }, { RADIX_OFFSET_THREADS, 1, 1 }, { counts.data, tiles })
    op.launch_packed(scatter, dev, { rows * tiles, 1, 1 }, { 512, 1, 1 },
      { x.data, from, to, counts.data, y.data, yi.data, n, tiles, first, last, desc, shift, m })
  end
  counts:free()
  for _, w in ipairs(work) do w:free() end
end

-- The first m of each row of the dense (rows, n) tensor x sorted: values (rows, m) and 1-based
-- i64 positions (rows, m).
local function sort_rows(x, rows, n, m, desc)
  local dt = dtype.name(x.elem_type)
  local dev = device.wrap(x.dev)
  local y = tensor.alloc({ rows, m }, dt, dev)
  local yi = tensor.alloc({ rows, m }, "i64", dev)
  if rows * m == 0 then return y, yi end
  local d = desc and 1 or 0
  if m < n and m <= 32 * E and n <= 32 * TOPK_ITEMS and dtype.size(dt) <= 4 then
    -- the first m of a short row: selected by a warp, then sorted (kernels/sort.cu's tocha_topk_warp)
    local items, picks = 1, 1
    while 32 * items < n do items = items * 2 end
    while 32 * picks < m do picks = picks * 2 end
    op.launch_packed(sort_kernel("tocha_topk_warp", dt, items, picks), dev, { math.ceil(rows / 8), 1, 1 }, { 256, 1, 1 },
      { x.data, y.data, yi.data, rows, n, m, d })
    return y, yi
  end
  local compact = dtype.size(dt) <= 2
  if n > M.RADIX_FROM and dtype.size(dt) <= 4 then
    if n > 32 * RADIX_WARPS * 16 then
      radix_rows(x, y, yi, rows, n, m, d, dt, dev) -- past a CTA: tiles of a radix sort across CTAs
      return y, yi
    end
    -- a row a CTA, radix-sorted (kernels/sort.cu's tocha_sort_radix)
    local items = n <= 4096 and 8 or 16
    local warps = math.ceil(n / (32 * items))
    local shared = warps * 32 * items * (compact and 4 or 8) + warps * 256 * 2
    op.launch_packed_shared(sort_kernel("tocha_sort_radix", dt, items, nil, compact), dev, { rows, 1, 1 }, { 32 * warps, 1, 1 },
      shared, { x.data, y.data, yi.data, n, d, m })
    return y, yi
  end
  local P = E
  while P < n do P = P * 2 end
  local S = math.min(P, seg_of(dt))
  local tps = S / E -- threads a segment
  local per_cta = S == P and math.max(1, math.floor(BLOCK / tps)) or 1 -- rows a CTA
  local ctas = { math.ceil(rows / per_cta) * (P / S), 1, 1 }
  local block = { per_cta * tps, 1, 1 }
  compact = compact and P <= 65536
  local block_kernel = sort_kernel("tocha_sort_block", dt, nil, nil, compact)
  -- a row of several segments waits between launches in a work buffer: a word an item, two for 8-byte dtypes
  local work = P > S and tensor.alloc({ rows * P * (dtype.size(dt) == 8 and 2 or 1) }, "i64", dev) or nil
  local wp = work and work.data or yi.data -- a launch's pointers may not be null; unused when one segment
  op.launch_packed(block_kernel, dev, ctas, block, { x.data, wp, y.data, yi.data, rows, n, P, 0, 1, d, m })
  local k = 2 * S
  while k <= P do
    local j = k / 2
    while j >= S do
      op.launch_packed(sort_kernel("tocha_sort_step", dt, nil, nil, compact), dev, op.element_grid(rows * P / 2, BLOCK), { BLOCK, 1, 1 },
        { wp, rows, P, k, j })
      j = j / 2
    end
    op.launch_packed(block_kernel, dev, ctas, block, { x.data, wp, y.data, yi.data, rows, n, P, k, 0, d, m })
    k = k * 2
  end
  if work then work:free() end
  return y, yi
end

-- The first m of x sorted along dim: values and positions, shaped as x with m along dim.
local function sorted_along(x, dim, m, desc)
  modules()
  if not is_tensor(x) then raise("self: expected a tensor, got " .. type(x)) end
  if x.freed ~= 0 then raise("self: tensor was freed") end
  dim = view.dim_of(x, dim == nil and -1 or dim, "dim")
  local d = x:shape()
  local n = d[dim]
  m = m or n
  if n > 2 ^ 30 then raise(("dim: %d elements along it, above the 2^30 a sort takes"):format(n)) end
  -- the dimension last, rows dense
  local moved = dim == #d and x or x:transpose(dim, #d)
  local md = moved:shape()
  local rows = 1
  for k = 1, #md - 1 do rows = rows * md[k] end
  local y, yi = sort_rows(moved:contiguous(), rows, n, m, desc)
  md[#md] = m
  y, yi = y:view(md), yi:view(md)
  if dim ~= #d then y, yi = y:transpose(dim, #d):contiguous(), yi:transpose(dim, #d):contiguous() end
  return y, yi
end

local function flag(v, what)
  if v ~= nil and type(v) ~= "boolean" then raise(("%s: expected a boolean, got %s"):format(what, type(v))) end
  return v == true
end

-- x:sort([dim = -1 [, descending]]) -> values, indices (PyTorch's and Torch7's sort; stable).
function M.sort(x, dim, descending)
  local v, i = sorted_along(x, dim, nil, flag(descending, "descending"))
  return v, i
end

-- x:argsort([dim = -1 [, descending]]) -> the indices alone.
function M.argsort(x, dim, descending)
  local _, i = M.sort(x, dim, descending)
  return i
end

-- x:topk(k [, dim = -1 [, largest = true [, sorted]]]) -> values, indices: the k largest
-- (smallest with largest = false) along dim, in order, largest first (PyTorch's topk; the
-- result is always sorted).
function M.topk(x, k, dim, largest)
  modules()
  if not is_tensor(x) then raise("self: expected a tensor, got " .. type(x)) end
  local d = view.dim_of(x, dim == nil and -1 or dim, "dim")
  local n = tonumber(x.dims[d - 1])
  if type(k) ~= "number" or k ~= math.floor(k) or k < 0 or k > n then
    raise(("k: expected a whole number from 0 to %d (the size along dim), got %s"):format(n, show(k)))
  end
  local v, i = sorted_along(x, d, k, largest == nil or flag(largest, "largest"))
  return v, i
end

-- x:median([dim [, keepdim]]): without dim, the lower median of every element (a tensor of
-- shape {1}); with dim, the lower medians along it and their 1-based positions (PyTorch's:
-- the smaller of the two middle values of an even count; NaN where a NaN is among them).
function M.median(x, dim, keepdim)
  modules()
  if not is_tensor(x) then raise("self: expected a tensor, got " .. type(x)) end
  if x.freed ~= 0 then raise("self: tensor was freed") end
  if keepdim ~= nil and type(keepdim) ~= "boolean" then raise("keepdim: expected a boolean, got " .. type(keepdim)) end
  if dim == nil then
    if x.count == 0 then raise("self: median() of an empty tensor: it has no element") end
    local flat = x:contiguous():view(-1)
    local n = tonumber(x.count)
    local v = sorted_along(flat, 1, nil, false)
    -- NaN sorts last: a NaN anywhere makes the median NaN, as PyTorch's
    local last = v:narrow(1, n, 1)
    local r = v:narrow(1, math.floor((n - 1) / 2) + 1, 1):contiguous()
    r = r:where(last:eq(last), last)
    return r
  end
  local k = view.dim_of(x, dim, "dim")
  local n = tonumber(x.dims[k - 1])
  if n == 0 then raise(("dim: median() along dimension %d of size 0: it has no element"):format(k)) end
  local v, i = sorted_along(x, k, nil, false)
  local at = math.floor((n - 1) / 2) + 1
  local mv, mi = v:narrow(k, at, 1), i:narrow(k, at, 1)
  -- a line holding NaN: its first NaN (they sort last, in position order), PyTorch's pick
  local nans = v:ne(v):sum(k, true)
  local has_nan = nans:gt(0)
  local first = nans:neg():add_(n + 1):clamp_(1, n)
  mv = v:gather(k, first):where(has_nan, mv)
  mi = i:gather(k, first):where(has_nan, mi)
  if not keepdim then
    local d = x:shape()
    table.remove(d, k)
    if #d == 0 then d = { 1 } end
    mv, mi = mv:contiguous():view(d), mi:contiguous():view(d)
  end
  return mv, mi
end

function M.install(methods)
  for _, name in ipairs({ "sort", "argsort", "topk", "median" }) do methods[name] = M[name] end
end

return M
