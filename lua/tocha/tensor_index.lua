-- tocha.tensor_index: elements picked along a dimension by integer indices, as new tensors
-- (kernels/index.cu), and the copies built on them.
--
--   x:index_select(2, tocha.tensor({3, 1}, {dtype = "i64"}))  -- columns 3 and 1
--   x:gather(2, idx)                 -- y[i][j] = x[i][idx[i][j]] (idx i64 or i32, 1-based)
--   x:flip(1), x:flip({2, 3})        -- reversed along dimensions
--   x:roll(1, 2)                     -- shifted by 1 along dimension 2, the end wrapping round
--   x:repeat_tensor(2, 1)            -- tiled: PyTorch's x.repeat(2, 1), Torch7's repeatTensor
--
-- Indices count from 1, as every index of tocha's (x:argmax's among them): pass
-- `{base = 0}` for PyTorch's 0-based ones. An index outside the dimension is refused, naming
-- its position (the kernel records it; the call reads it back before it returns).
local ffi = require "ffi"
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local errors = require "tocha.errors"
local view = require "tocha.view"
local raise, show = errors.raise, errors.show

local M = {}

local BLOCK = 256

local tensor, kernel, op, create
local function modules()
  if tensor then return end
  tensor, kernel, op = require "tocha.tensor", require "tocha.kernel", require "tocha.op"
  create = require "tocha.tensor_create"
end

local function is_tensor(x) return ffi.istype("tocha_tensor", x) end


local function product(d, from, to)
  local p = 1
  for k = from, to do p = p * d[k] end
  return p
end

local kernels = {}
local function index_kernel(name, dt, it)
  local key = name .. "/" .. dt .. "/" .. it
  local k = kernels[key]
  if k then return k end
  k = kernel.new { source = op.source("index.cu"), name = name,
    template_args = dtype.ctype(dt) .. ", " .. dtype.ctype(it),
    params = ("%s* x, %s* idx, %s* y, i64 outer, i64 n, i64 inner, i64 m, i64 base, i64* bad"):format(dt, it, dt) }
  kernels[key] = k
  return k
end

local function live(x, what)
  if not is_tensor(x) then raise(("%s: expected a tensor, got %s"):format(what, type(x))) end
  if x.freed ~= 0 then raise(what .. ": tensor was freed") end
end

local function index_tensor(idx, x)
  live(idx, "index")
  local it = dtype.name(idx.elem_type)
  if it ~= "i64" and it ~= "i32" then raise(("index: expected an i64 or i32 tensor, got %s"):format(it)) end
  if idx.dev ~= x.dev then raise(("index: on %s, self on %s"):format(idx:device(), x:device())) end
  return it
end

local function base_of(opts)
  if type(opts) ~= "nil" and type(opts) ~= "table" then
    raise("options: expected a table {base =}, got " .. type(opts))
  end
  local base = opts and opts.base
  if base == nil then return 1 end
  if base ~= 0 and base ~= 1 then raise("base: expected 0 or 1, got " .. show(base)) end
  return base
end

-- Launches kernel `name` over y (outer, m, inner) from x (outer, n, inner). With `where`, reads
-- back the bad-index flag and raises naming the bad index's position (`where(position)` words
-- it); without, the indices are tocha's own and the launch is not waited for.
local function pick(name, x, idx, y, outer, n, inner, m, base, where)
  local total = outer * m * inner
  if total == 0 then return y end
  local dev = device.wrap(x.dev)
  -- indices of tocha's own making (where == nil: flip's, roll's) are in range: their launch is not
  -- waited for, and `bad`, never written, is not cleared
  local bad = where and tensor.zeros({ 1 }, { dtype = "i64", device = dev.name }) or tensor.alloc({ 1 }, "i64", dev)
  op.launch_packed(index_kernel(name, dtype.name(x.elem_type), dtype.name(idx.elem_type)), dev,
    op.element_grid(math.ceil(total / 4), BLOCK), { BLOCK, 1, 1 }, { x.data, idx.data, y.data, outer, n, inner, m, base, bad.data })
  local at = where and tonumber(bad:to_host()[0]) or 0
  bad:free()
  if at ~= 0 then
    local value = idx:view(-1):narrow(1, at, 1):cast("f64"):item()
    raise(("index: %s is %s, outside %d to %d along the dimension"):format(where(at), show(value), base, n - 1 + base))
  end
  return y
end

-- The slices of x (dense) at the indices idx (a dense 1-D i64 or i32 tensor, counted from base)
-- along dim, into a new tensor; where as pick's.
local function select_along(x, dim, idx, base, where)
  local d = x:shape()
  local m = tonumber(idx.dims[0])
  local outer, n, inner = product(d, 1, dim - 1), d[dim], product(d, dim + 1, #d)
  local shape = {}
  for k = 1, #d do shape[k] = k == dim and m or d[k] end
  local y = tensor.alloc(shape, dtype.name(x.elem_type), device.wrap(x.dev))
  return pick("tocha_index_select", x, idx, y, outer, n, inner, m, base, where)
end

-- x:index_select(dim, index [, opts]): the slices of x at the indices (a 1-D i64 or i32 tensor)
-- along dim, in their order (repeats allowed).
function M.index_select(x, dim, idx, opts)
  modules()
  live(x, "self")
  dim = view.dim_of(x, dim, "dim")
  index_tensor(idx, x)
  if idx.ndim ~= 1 then raise(("index: expected a 1-D tensor, got %d dimensions"):format(idx.ndim)) end
  -- not a tail call: the error's name is found on this frame
  local y = select_along(x:contiguous(), dim, idx:contiguous(), base_of(opts),
    function(at) return ("index[%d]"):format(at) end)
  return y
end

-- The slices of x (dense) at the 1-based positions `at` (a dense i64 vector of tocha's own
-- making, every one in range) along dim: flip's and roll's copy, launched without waiting for a
-- bad index.
local function select_own(x, dim, at)
  return select_along(x, dim, at, 1, nil)
end

-- x:gather(dim, index [, opts]): y of index's shape with y[..., j, ...] = x[..., index[..., j, ...],
-- ...] along dim (PyTorch's gather): index has x's dimensions, each other size at most x's.
function M.gather(x, dim, idx, opts)
  modules()
  live(x, "self")
  dim = view.dim_of(x, dim, "dim")
  index_tensor(idx, x)
  local base = base_of(opts)
  local d, e = x:shape(), idx:shape()
  if #e ~= #d then raise(("index: expected %d dimensions (as self), got %d"):format(#d, #e)) end
  local src = x
  for k = 1, #d do
    if k ~= dim and e[k] > d[k] then
      raise(("index: size %d of dimension %d is larger than self's %d"):format(e[k], k, d[k]))
    end
    if k ~= dim and e[k] < d[k] then src = src:narrow(k, 1, e[k]) end
  end
  local outer, n, inner = product(e, 1, dim - 1), d[dim], product(e, dim + 1, #e)
  local y = tensor.alloc(e, dtype.name(x.elem_type), device.wrap(x.dev))
  local r = pick("tocha_gather", src:contiguous(), idx:contiguous(), y, outer, n, inner, e[dim], base,
    function(at)
      local pos = {}
      local rest = at - 1
      for k = #e, 1, -1 do
        pos[k] = rest % e[k] + 1
        rest = math.floor(rest / e[k])
      end
      return "index[" .. table.concat(pos, ", ") .. "]"
    end)
  return r
end

-- The dimensions a flip or roll names: one or a list, each once.
local function dim_list(x, dims)
  if type(dims) == "number" then dims = { dims } end
  if type(dims) ~= "table" or #dims == 0 then raise("dims: expected a dimension or a list of them, got " .. show(dims)) end
  local seen, list = {}, {}
  for i, k in ipairs(dims) do
    local d = view.dim_of(x, k, ("dims[%d]"):format(i))
    if seen[d] then raise(("dims: dimension %d appears twice"):format(d)) end
    seen[d] = true
    list[#list + 1] = d
  end
  return list
end

-- x:flip(dims): a copy of x reversed along each of dims (PyTorch's flip).
function M.flip(x, dims)
  modules()
  live(x, "self")
  local y = x
  for _, d in ipairs(dim_list(x, dims)) do
    local n = tonumber(x.dims[d - 1])
    if n > 1 then y = select_own(y:contiguous(), d, create.arange(n, 0, -1, { dtype = "i64", device = device.wrap(x.dev).name })) end
  end
  if y == x then y = x:clone() end
  return y
end

-- x:roll(shifts, dims): a copy of x with each of dims shifted by its shift (an element at i
-- moves to i + shift, the end wrapping round to the start), PyTorch's roll; without dims, x
-- flattened is rolled and the shape kept.
function M.roll(x, shifts, dims)
  modules()
  live(x, "self")
  if dims == nil then
    local r = M.roll(x:contiguous():view(-1), shifts, 1):view(x:shape())
    return r
  end
  local list = dim_list(x, dims)
  if type(shifts) == "number" then shifts = { shifts } end
  if type(shifts) ~= "table" then raise("shifts: expected a number or a list of them, got " .. type(shifts)) end
  if #shifts ~= #list then
    raise(("shifts: expected one shift for each of the %d dimensions, got %d"):format(#list, #shifts))
  end
  local y = x
  for i, d in ipairs(list) do
    local s = shifts[i]
    if type(s) ~= "number" or s ~= math.floor(s) or math.abs(s) > 2 ^ 53 then
      raise(("shifts[%d]: expected an integer, got %s"):format(i, show(s)))
    end
    local n = tonumber(x.dims[d - 1])
    s = n > 0 and s % n or 0
    if s ~= 0 then
      -- element i of the result is element (i - s) mod n of x: 1-based, n - s + 1 .. n then 1 .. n - s
      local at = create.arange(n - s, 2 * n - s, { dtype = "i64", device = device.wrap(x.dev).name })
      at:remainder_(n):add_(1)
      y = select_own(y:contiguous(), d, at)
    end
  end
  if y == x then y = x:clone() end
  return y
end

-- x:repeat_tensor(r1, ..., rk) or ({r1, ..., rk}): x tiled r_i times along each dimension (k at
-- least x's dimensions; more add leading ones), PyTorch's x.repeat and Torch7's repeatTensor
-- (`repeat` is a word of Lua's). A copy through an expanded view: one strided copy.
function M.repeat_tensor(x, first, ...)
  live(x, "self")
  local reps = type(first) == "table" and first or { first, ... }
  local d = x:shape()
  if #reps < #d then raise(("repeats: expected at least %d (self's dimensions), got %d"):format(#d, #reps)) end
  if #reps > 8 then raise(("repeats: expected at most 8, got %d"):format(#reps)) end
  for i, r in ipairs(reps) do
    if type(r) ~= "number" or r ~= math.floor(r) or r < 0 or r > 2 ^ 53 then
      raise(("repeats[%d]: expected a whole number, got %s"):format(i, show(r)))
    end
  end
  local lead = #reps - #d
  local full = {}
  for k = 1, #reps do full[k] = k <= lead and 1 or d[k - lead] end
  -- A run of dimensions k..l of sizes s_k.. seen as (before, 1, s_k, 1, s_k+1, ..., after),
  -- expanded to (before, r_k, s_k, r_k+1, ...) and copied: element (a, b) of a pair is a s + b,
  -- the tiling. Runs of three keep the view within 8 dimensions.
  local function tile(t, from, to)
    local cur = t:shape()
    local before, after = product(cur, 1, from - 1), product(cur, to + 1, #cur)
    local inter, expanded, shape = { before }, { before }, {}
    for k = from, to do
      inter[#inter + 1], expanded[#expanded + 1] = 1, reps[k]
      inter[#inter + 1], expanded[#expanded + 1] = cur[k], cur[k]
    end
    inter[#inter + 1], expanded[#expanded + 1] = after, after
    for k = 1, #cur do shape[k] = (k >= from and k <= to) and reps[k] * cur[k] or cur[k] end
    return t:view(inter):expand(expanded):contiguous():view(shape)
  end
  local t = x:contiguous():view(full)
  for from = 1, #full, 3 do t = tile(t, from, math.min(from + 2, #full)) end
  if t == x then t = x:clone() end
  return t
end

-- Installs the methods on tensors.
function M.install(methods)
  for _, name in ipairs({ "index_select", "gather", "flip", "roll", "repeat_tensor" }) do methods[name] = M[name] end
end

return M
