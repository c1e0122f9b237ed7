-- tocha.tensor_join: tensors joined along a dimension (cat, stack) and split into views along
-- one (split, chunk, unbind).
--
--   local y = tocha.cat({ a, b }, 2)     -- a and b side by side along dimension 2
--   local s = tocha.stack({ a, b })      -- a new first dimension of size 2
--   local parts = x:split(3, 2)          -- views of 3 along dimension 2 (the last one shorter)
--   local q, k, v = unpack(x:chunk(3, -1))
--
-- The joins copy each input into its place with the strided copy kernel (a cast first where
-- its dtype is not the result's); the splits are views of x, sharing its memory.
local ffi = require "ffi"
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local errors = require "tocha.errors"
local view = require "tocha.view"
local raise, show = errors.raise, errors.show

local M = {}

local tensor, math_ops
local function modules()
  if tensor then return end
  tensor, math_ops = require "tocha.tensor", require "tocha.tensor_math"
end

local function is_tensor(x) return ffi.istype("tocha_tensor", x) end


local function shape_text(d) return "[" .. table.concat(d, ", ") .. "]" end

-- The list of tensors a join takes: a table of them (PyTorch's), or tensors as arguments
-- (Torch7's torch.cat(a, b [, dim])), then the dimension.
local function tensors_and_dim(first, ...)
  if is_tensor(first) then
    local list, n = { first }, select("#", ...)
    local dim
    for i = 1, n do
      local v = select(i, ...)
      if is_tensor(v) then list[#list + 1] = v
      elseif i == n then dim = v
      else raise(("tensors[%d]: expected a tensor, got %s"):format(i + 1, type(v))) end
    end
    return list, dim
  end
  if type(first) ~= "table" then raise("tensors: expected a list of tensors, got " .. type(first)) end
  local n = 0
  for _ in pairs(first) do n = n + 1 end
  if n ~= #first then raise(("tensors: expected a list without holes or named keys, got %d keys for length %d"):format(n, #first)) end
  if #first == 0 then raise("tensors: expected at least one tensor, got an empty list") end
  for i, t in ipairs(first) do
    if not is_tensor(t) then raise(("tensors[%d]: expected a tensor, got %s"):format(i, type(t))) end
  end
  return first, (...)
end

-- Checks the inputs are live and on one device; returns their common dtype (PyTorch's promotion).
local function common_dtype(list)
  modules()
  local out
  for i, t in ipairs(list) do
    if t.freed ~= 0 then raise(("tensors[%d]: tensor was freed"):format(i)) end
    if t.dev ~= list[1].dev then
      raise(("tensors[%d]: on %s, tensors[1] on %s: a join needs one device"):format(i, t:device(), list[1]:device()))
    end
    local dt = dtype.name(t.elem_type)
    out = out and math_ops.promote(out, dt) or dt
  end
  return out
end

-- Copies src into the view dst, casting where their dtypes differ.
local function place(dst, src)
  if src.elem_type == dst.elem_type then dst:copy(src) else src:cast_into(dst) end
end

-- tocha.cat(tensors, dim = 1): the tensors joined along dim (1-based, negative from the end),
-- their other sizes equal; a 1-D tensor of size 0 is passed over, as PyTorch does.
function M.cat(...)
  local list, dim = tensors_and_dim(...)
  local out_dt = common_dtype(list)
  local parts = {}
  for _, t in ipairs(list) do
    if not (t.ndim == 1 and t.dims[0] == 0) then parts[#parts + 1] = t end
  end
  if #parts == 0 then return tensor.alloc({ 0 }, out_dt, device.wrap(list[1].dev)) end
  local first = parts[1]
  dim = view.dim_of(first, dim == nil and 1 or dim, "dim")
  local shape = first:shape()
  local total = 0
  for i, t in ipairs(list) do
    if not (t.ndim == 1 and t.dims[0] == 0) then
      local d = t:shape()
      local same = #d == #shape
      for k = 1, #shape do same = same and (k == dim or d[k] == shape[k]) end
      if not same then
        raise(("tensors[%d]: shape %s does not join %s along dimension %d (every other size must be equal)")
          :format(i, shape_text(d), shape_text(shape), dim))
      end
      total = total + d[dim]
    end
  end
  shape[dim] = total
  local y = tensor.alloc(shape, out_dt, device.wrap(first.dev))
  local at = 1
  for _, t in ipairs(parts) do
    local size = tonumber(t.dims[dim - 1])
    if size > 0 then place(y:narrow(dim, at, size), t) end
    at = at + size
  end
  return y
end

-- tocha.stack(tensors, dim = 1): the tensors, all of one shape, along a new dimension dim (1 to
-- their dimensions + 1, negative from the end).
function M.stack(...)
  local list, dim = tensors_and_dim(...)
  local out_dt = common_dtype(list)
  local first = list[1]
  dim = view.dim_of(first, dim == nil and 1 or dim, "dim", true)
  local shape = first:shape()
  for i, t in ipairs(list) do
    local d = t:shape()
    local same = #d == #shape
    for k = 1, #shape do same = same and d[k] == shape[k] end
    if not same then
      raise(("tensors[%d]: shape %s, tensors[1] %s: stack needs one shape"):format(i, shape_text(d), shape_text(shape)))
    end
  end
  if #shape == 8 then raise("tensors: 8 dimensions already: a stack would have 9 (at most 8)") end
  table.insert(shape, dim, #list)
  local y = tensor.alloc(shape, out_dt, device.wrap(first.dev))
  if y:numel() == 0 then return y end
  for i, t in ipairs(list) do
    local slot = y:narrow(dim, i, 1)
    place(slot, t:unsqueeze(dim))
  end
  return y
end

-- ---- splits (views) ----

local function whole(v, what)
  if type(v) ~= "number" or v ~= math.floor(v) or v < 0 or v > 2 ^ 53 then
    raise(("%s: expected a whole number, got %s"):format(what, show(v)))
  end
  return v
end

-- Views of x along dim, of the sizes in `sizes` (summing to the dimension's size).
local function pieces(x, dim, sizes)
  local out, at = {}, 1
  for i, s in ipairs(sizes) do
    out[i] = x:narrow(dim, at, s)
    at = at + s
  end
  return out
end

-- x:split(size, dim = 1): views of `size` along dim, the last one the rest; x:split({s1, s2, ...},
-- dim): views of those sizes, which must add up to the dimension's. Returns a list.
local function live(x)
  if not is_tensor(x) then raise("self: expected a tensor, got " .. type(x)) end
  if x.freed ~= 0 then raise("self: tensor was freed") end
end

function M.split(x, size, dim)
  live(x)
  dim = view.dim_of(x, dim == nil and 1 or dim, "dim")
  local n = tonumber(x.dims[dim - 1])
  local sizes = {}
  if type(size) == "table" then
    local sum = 0
    for i, s in ipairs(size) do
      sizes[i] = whole(s, ("size[%d]"):format(i))
      sum = sum + s
    end
    if sum ~= n or #sizes == 0 then
      raise(("size: the sizes add up to %d, dimension %d has %d"):format(sum, dim, n))
    end
  else
    whole(size, "size")
    if size == 0 and n > 0 then raise(("size: 0 cannot split dimension %d of %d"):format(dim, n)) end
    if n == 0 then sizes[1] = 0 end
    local at = 0
    while at < n do
      sizes[#sizes + 1] = math.min(size, n - at)
      at = at + size
    end
  end
  return pieces(x, dim, sizes)
end

-- x:chunk(count, dim = 1): at most `count` views along dim of ceil(size / count) each, the
-- last one the rest (PyTorch's and Torch7's chunk; fewer where the size runs out; `count`
-- empty ones of an empty dimension).
function M.chunk(x, count, dim)
  live(x)
  whole(count, "chunks")
  if count < 1 then raise("chunks: expected at least 1, got " .. show(count)) end
  dim = view.dim_of(x, dim == nil and 1 or dim, "dim")
  local n = tonumber(x.dims[dim - 1])
  if n == 0 then -- count empty views, as PyTorch's
    local sizes = {}
    for i = 1, count do sizes[i] = 0 end
    return pieces(x, dim, sizes)
  end
  local r = M.split(x, math.ceil(n / count), dim)
  return r
end

-- x:unbind(dim = 1): the slices along dim (x:select(dim, i) for each i), a list.
function M.unbind(x, dim)
  live(x)
  dim = view.dim_of(x, dim == nil and 1 or dim, "dim")
  local out = {}
  for i = 1, tonumber(x.dims[dim - 1]) do out[i] = x:select(dim, i) end
  return out
end

-- Installs x:split, x:chunk and x:unbind on tensors.
function M.install(methods)
  methods.split, methods.chunk, methods.unbind = M.split, M.chunk, M.unbind
end

errors.register({ cat = M.cat, stack = M.stack })
return M
