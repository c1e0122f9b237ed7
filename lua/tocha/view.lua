-- tocha.view: tensors seen through other sizes and strides without a copy, as Torch7's
-- narrow/select/transpose and PyTorch's views: a view shares its tensor's device memory
-- (tocha_tensor_view), which stays until the last of them is freed or collected.
--
--   local y = x:narrow(2, 3, 4)         -- dimension 2, elements 3 to 6 (1-based, as Lua counts)
--   local c = x:select(2, 1)            -- channel 1, dimension 2 gone
--   local t = x:transpose(3, 4)         -- x:permute(1, 2, 4, 3) alike
--   local r = x:view(2, -1)             -- x dense: new sizes, -1 inferred (reshape copies if not)
--   local crop = x[{ 1, {}, { 2, 5 } }] -- item 1, every channel, rows 2 to 5 (inclusive)
--   x[{ {}, 1 }] = 0                    -- writes through a view: a number fills, a tensor copies
--
-- Dimensions count from 1; negative ones from the end (-1 the last). Every view has at least
-- one dimension: selecting the last one leaves a tensor of shape {1}. A view that is not
-- contiguous (t:is_contiguous()) is taken by copies, casts, fill, random fills, reads,
-- printing, files and comparisons; kernels and ops refuse it by name ("x: not contiguous (a
-- view): call :contiguous() on it first"): t:contiguous() is a dense copy (t itself when it is
-- already dense). An expanded view (t:expand, stride 0) reads the same element many times and
-- cannot be written.
local ffi = require "ffi"
local native = require "tocha.ffi"
local errors = require "tocha.errors"
local C, check, raise = native.C, native.check, errors.raise

local M = {}

local dims_buf, strides_buf = ffi.new("int64_t[8]"), ffi.new("int64_t[8]")
local out_buf = ffi.new("tocha_tensor*[1]")

local function sizes_of(t)
  local d, s = {}, {}
  for i = 0, t.ndim - 1 do d[i + 1], s[i + 1] = tonumber(t.dims[i]), tonumber(t.strides[i]) end
  return d, s
end

-- The view of t with sizes d, strides s (Lua lists) from element `offset` after t's first.
local function make(t, d, s, offset)
  if t.freed ~= 0 then raise("tensor was freed") end
  for i = 1, #d do dims_buf[i - 1], strides_buf[i - 1] = d[i], s[i] end
  check(C.tocha_tensor_view(t, #d, dims_buf, strides_buf, offset or 0, out_buf))
  return ffi.gc(out_buf[0][0], C.tocha_tensor_destroy) -- a reference, as tensor.lua's tensors
end
M.make = make

local function integer(v, what)
  if type(v) ~= "number" or v ~= math.floor(v) or math.abs(v) > 2 ^ 53 then
    raise(("%s: expected an integer, got %s"):format(what, errors.show(v)))
  end
  return v
end

-- A dimension of t (1-based, negative from the end) as a 1-based index; `extra` allows one past
-- the last (unsqueeze).
local function dim_of(t, d, what, extra)
  integer(d, what)
  local n = t.ndim + (extra and 1 or 0)
  if d < 0 then d = n + 1 + d end
  if d < 1 or d > n then raise(("%s: expected a dimension from 1 to %d (or -1 to -%d), got %s"):format(what, n, n, errors.show(d))) end
  return d
end
M.dim_of = dim_of

-- An index along a dimension of size n (1-based, negative from the end).
local function index_of(i, n, what)
  integer(i, what)
  if n == 0 then raise(("%s: the dimension has size 0: there is no element %s"):format(what, errors.show(i))) end
  if i < 0 then i = n + 1 + i end
  if i < 1 or i > n then raise(("%s: expected 1 to %d (or -1 to -%d), got %s"):format(what, n, n, errors.show(i))) end
  return i
end

-- Raises unless t is a plain list (keys 1 to #t and no others): {1, x = 2} or {nil, 3} would
-- otherwise be read as something the caller did not write.
local function only_list(t, what)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  if n ~= #t then raise(("%s: expected a list without holes or named keys, got %d keys for length %d"):format(what, n, #t)) end
end

-- Sizes given as a table or as numbers.
local function size_list(first, ...)
  if type(first) == "table" then return first end
  return { first, ... }
end

local numel = require("tocha.shape").numel
local dense_strides = require("tocha.shape").dense_strides

function M.install(methods, dense)
  -- t:stride([dim]): the strides in elements (a list), or one dimension's.
  function methods.stride(t, dim)
    local _, s = sizes_of(t)
    if dim == nil then return s end
    return s[dim_of(t, dim, "dim")]
  end

  function methods.is_contiguous(t) return t.dense ~= 0 end

  -- t:contiguous(): t when its elements are dense, else a dense copy on t's device.
  function methods.contiguous(t)
    local r = dense(t)
    return r
  end

  -- t:view(sizes) with sizes a table or numbers, one of them -1 (inferred): t dense, seen with
  -- other sizes of the same count.
  function methods.view(t, ...)
    local want = size_list(...)
    if type(want) ~= "table" or #want < 1 or #want > 8 then raise("sizes: expected 1 to 8 sizes") end
    if t.freed ~= 0 then raise("tensor was freed") end
    if t.dense == 0 then raise("self: not contiguous (a view): call :contiguous() first, or :reshape()") end
    local d, known, infer = {}, 1, nil
    for i, v in ipairs(want) do
      integer(v, ("sizes[%d]"):format(i))
      if v == -1 then
        if infer then raise("sizes: at most one -1") end
        infer = i
      elseif v < 0 then
        raise(("sizes[%d]: expected a non-negative size or -1, got %d"):format(i, v))
      else
        known = known * v
      end
      d[i] = v
    end
    local count = tonumber(t.count)
    if infer then
      -- with a size 0 among the others, any size fits the -1 (PyTorch refuses it too)
      if known == 0 then raise(("sizes: -1 is ambiguous beside a size 0 in [%s]"):format(table.concat(want, ", "))) end
      if count % known ~= 0 then raise(("sizes: %d elements do not divide into [%s]"):format(count, table.concat(want, ", "))) end
      d[infer] = count / known
    end
    if numel(d) ~= count then
      raise(("sizes: [%s] holds %d elements, the tensor %d"):format(table.concat(d, ", "), numel(d), count))
    end
    local r = make(t, d, dense_strides(d), 0)
    return r
  end

  -- t:reshape(sizes): t:view(sizes), through a dense copy when t is not contiguous.
  function methods.reshape(t, ...)
    local r = methods.view(methods.contiguous(t), ...)
    return r
  end

  -- t:view_as(other), t:expand_as(other), t:reshape_as(other): other's sizes.
  local function sizes_like(other)
    if not ffi.istype("tocha_tensor", other) then raise("other: expected a tensor, got " .. type(other)) end
    local d = {}
    for i = 0, other.ndim - 1 do d[i + 1] = tonumber(other.dims[i]) end
    return d
  end
  function methods.view_as(t, other) local r = methods.view(t, sizes_like(other)) return r end
  function methods.expand_as(t, other) local r = methods.expand(t, sizes_like(other)) return r end
  function methods.reshape_as(t, other) local r = methods.reshape(t, sizes_like(other)) return r end

  -- t:narrow(dim, start, length): elements start to start + length - 1 along dim.
  function methods.narrow(t, dim, start, length)
    dim = dim_of(t, dim, "dim")
    local d, s = sizes_of(t)
    integer(length, "length")
    -- length 0 may start one past the end (PyTorch's start == size), as an empty range does
    if length == 0 and type(start) == "number" and start > d[dim] + 1 then
      raise(("start: expected 1 to %d for length 0, got %s"):format(d[dim] + 1, errors.show(start)))
    end
    if not (length == 0 and start == d[dim] + 1) then start = index_of(start, d[dim], "start") end
    if length < 0 or start + length - 1 > d[dim] then
      raise(("length: expected 0 to %d (from %d of %d), got %d"):format(d[dim] - start + 1, start, d[dim], length))
    end
    local offset = (start - 1) * s[dim]
    d[dim] = length
    local r = make(t, d, s, offset)
    return r
  end

  -- t:select(dim, index): the slice at index along dim, that dimension gone (a tensor of one
  -- dimension gives shape {1}).
  function methods.select(t, dim, index)
    dim = dim_of(t, dim, "dim")
    local d, s = sizes_of(t)
    index = index_of(index, d[dim], "index")
    local offset = (index - 1) * s[dim]
    if #d == 1 then return make(t, { 1 }, { 1 }, offset) end
    table.remove(d, dim)
    table.remove(s, dim)
    local r = make(t, d, s, offset)
    return r
  end

  -- t:transpose(a, b): dimensions a and b swapped.
  function methods.transpose(t, a, b)
    a, b = dim_of(t, a, "dim1"), dim_of(t, b, "dim2")
    local d, s = sizes_of(t)
    d[a], d[b] = d[b], d[a]
    s[a], s[b] = s[b], s[a]
    local r = make(t, d, s, 0)
    return r
  end

  -- t:t(): a matrix transposed (a view); a vector as it is (PyTorch's and Torch7's t()).
  function methods.t(t)
    if t.ndim > 2 then raise(("self: t() takes a tensor of 1 or 2 dimensions, got %d (use transpose(a, b))"):format(t.ndim)) end
    if t.ndim == 1 then
      local r = make(t, sizes_of(t))
      return r
    end
    local r = methods.transpose(t, 1, 2)
    return r
  end

  -- t:permute(p1, ..., pn) (or a table): dimension i of the view is dimension p_i of t.
  function methods.permute(t, ...)
    local order = size_list(...)
    if type(order) ~= "table" or #order ~= t.ndim then
      raise(("dims: expected a permutation of the %d dimensions"):format(t.ndim))
    end
    local d0, s0 = sizes_of(t)
    local d, s, seen = {}, {}, {}
    for i, p in ipairs(order) do
      p = dim_of(t, p, ("dims[%d]"):format(i))
      if seen[p] then raise(("dims: dimension %d appears twice"):format(p)) end
      seen[p] = true
      d[i], s[i] = d0[p], s0[p]
    end
    local r = make(t, d, s, 0)
    return r
  end

  -- t:squeeze([dim]): without its dimensions of size 1 (or just dim, if its size is 1); at least
  -- one dimension stays.
  function methods.squeeze(t, dim)
    local d, s = sizes_of(t)
    local nd, ns = {}, {}
    if dim ~= nil then dim = dim_of(t, dim, "dim") end
    for i = 1, #d do
      local drop = d[i] == 1 and (dim == nil or dim == i)
      if not drop then nd[#nd + 1], ns[#ns + 1] = d[i], s[i] end
    end
    if #nd == 0 then nd, ns = { 1 }, { 1 } end
    local r = make(t, nd, ns, 0)
    return r
  end

  -- t:unsqueeze(dim): a dimension of size 1 inserted at dim (1 to ndim + 1).
  function methods.unsqueeze(t, dim)
    if t.ndim >= 8 then raise("self: a tensor has at most 8 dimensions") end
    dim = dim_of(t, dim, "dim", true)
    local d, s = sizes_of(t)
    local stride = dim <= #d and s[dim] * d[dim] or 1
    table.insert(d, dim, 1)
    table.insert(s, dim, stride)
    local r = make(t, d, s, 0)
    return r
  end

  -- t:expand(sizes): dimensions of size 1 repeated to the sizes given (-1 keeps one), and new
  -- leading dimensions, without a copy (stride 0). Read-only.
  function methods.expand(t, ...)
    local want = size_list(...)
    if type(want) ~= "table" or #want < t.ndim or #want > 8 then
      raise(("sizes: expected %d to 8 sizes"):format(t.ndim))
    end
    local d0, s0 = sizes_of(t)
    local lead = #want - #d0
    local d, s = {}, {}
    for i, v in ipairs(want) do
      integer(v, ("sizes[%d]"):format(i))
      local k = i - lead
      if k < 1 then
        if v < 0 then raise(("sizes[%d]: a new dimension needs a non-negative size, got %d"):format(i, v)) end
        d[i], s[i] = v, 0
      elseif v == -1 or v == d0[k] then
        d[i], s[i] = d0[k], s0[k]
      elseif d0[k] == 1 and v >= 0 then
        d[i], s[i] = v, 0
      else
        raise(("sizes[%d]: dimension %d has size %d, which expands only from 1, got %d"):format(i, k, d0[k], v))
      end
    end
    local r = make(t, d, s, 0)
    return r
  end

  -- t:index(spec) and t[spec]: spec a list with an entry per leading dimension: a number selects
  -- (the dimension goes), {} keeps the whole dimension, {a, b} narrows to a..b (inclusive; {a}
  -- is a..a, kept as a dimension of size 1).
  function methods.index(t, spec)
    if type(spec) ~= "table" then raise("spec: expected a table of indices and ranges, got " .. type(spec)) end
    only_list(spec, "spec")
    if #spec > t.ndim then raise(("spec: %d entries for %d dimensions"):format(#spec, t.ndim)) end
    local v, dim = t, 1
    for i, e in ipairs(spec) do
      local what = ("spec[%d]"):format(i)
      if type(e) == "number" then
        local n = tonumber(v.dims[dim - 1])
        local at = index_of(e, n, what)
        if v.ndim == 1 then
          v = make(v, { 1 }, { 1 }, (at - 1) * tonumber(v.strides[0]))
        else
          v = methods.select(v, dim, at)
        end
      elseif type(e) == "table" then
        local n = tonumber(v.dims[dim - 1])
        only_list(e, what)
        if #e > 2 then raise(("%s: expected {}, {a} or {a, b}, got %d numbers"):format(what, #e)) end
        if #e == 0 then
          dim = dim + 1
        else
          local a = index_of(e[1], n, what .. "[1]")
          local b = e[2] == nil and a or index_of(e[2], n, what .. "[2]")
          if b < a then raise(("%s: the range %d to %d is empty"):format(what, a, b)) end
          v = methods.narrow(v, dim, a, b - a + 1)
          dim = dim + 1
        end
      else
        raise(("%s: expected an index or a range table, got %s"):format(what, type(e)))
      end
    end
    return v
  end
end

-- t[spec] = value (spec a table, or a number i for t:select(1, i)): a number fills the view, a
-- tensor is copied into it.
function M.assign(methods, t, spec, value)
  if type(value) ~= "number" and not require("tocha.tensor").is_tensor(value) then
    raise("value: expected a number or a tensor, got " .. errors.show(value))
  end
  local v = type(spec) == "number" and methods.select(t, 1, spec) or methods.index(t, spec)
  if type(value) == "number" then
    methods.fill(v, value)
  else
    methods.copy(v, value)
  end
end

return M
