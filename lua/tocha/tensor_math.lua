-- tocha.tensor_math: arithmetic, comparisons and elementwise functions on tensors, eager, through
-- kernels/pointwise.cu on the tensors' device. Operands broadcast as NumPy's and PyTorch's do
-- (sizes aligned from the last dimension; a size 1, or a missing dimension, repeats), views
-- are read through their strides without a copy, and a number is an operand too.
--
--   local z = x * y + 1          -- new tensors (PyTorch's x.mul(y)); x:mul_(y) works in place
--   local m = x:gt(0)            -- u8 mask: 1 where x > 0
--   local r = tocha.where(m, x, 0)
--
-- Methods return new tensors, as PyTorch's do; the forms ending in _ write into self and return
-- it (Torch7's x:add(y) is in place: here that is x:add_(y)). Lua's < and <= must give a
-- boolean, so comparisons are methods (x:lt(y)), never operators.
--
-- Result dtypes follow PyTorch's promotion: tensors of one dtype keep it; floats beat integers;
-- the wider float (f16 with bf16 gives f32) or integer wins; a number keeps a tensor's dtype,
-- except a fractional number with an integer tensor (f32). Division, and the float functions
-- (exp, sigmoid, ...), of integers give f32. Halves compute in f32, f64 in f64, integers in 64
-- bits (wrapping to the dtype, as PyTorch's integer arithmetic does).
local ffi = require "ffi"
local dtype = require "tocha.dtype"
local errors = require "tocha.errors"
local raise = errors.raise

local M = {}

-- tocha.kernel and tocha.op load tocha.tensor, which installs this module while it loads: they
-- are required at the first call instead, with tocha.device and tocha.tensor, all four at once
-- so that they are one load's (busted loads the library afresh for each spec file, while
-- tensors keep the methods of the first load).
local kernel, op, device, tensor
local function modules()
  if tensor then return end
  kernel, op = require "tocha.kernel", require "tocha.op"
  device, tensor = require "tocha.device", require "tocha.tensor"
end

local MAX_DIMS = 8
local BLOCK = 256

local function is_tensor(x) return ffi.istype("tocha_tensor", x) end

-- ---- functions and their kinds ----

-- kind: "float" (integers are promoted to f32 first), "keep" (any dtype, the result in it),
-- "mask" (the result is u8), "round" (the identity on integers).
local UNARY = {
  neg = "keep", abs = "keep", sign = "keep", square = "keep", relu = "keep",
  exp = "float", expm1 = "float", log = "float", log1p = "float", sqrt = "float", rsqrt = "float",
  reciprocal = "float", sigmoid = "float", tanh = "float", silu = "float", gelu = "float",
  erf = "float", sin = "float", cos = "float",
  floor = "round", ceil = "round", trunc = "round", round = "round",
  logical_not = "mask", isnan = "mask",
}
local BINARY = {
  add = "keep", sub = "keep", mul = "keep", div = "float", pow = "keep",
  maximum = "keep", minimum = "keep", remainder = "keep",
  lt = "mask", le = "mask", gt = "mask", ge = "mask", eq = "mask", ne = "mask",
  logical_and = "mask", logical_or = "mask",
}
M.UNARY, M.BINARY = UNARY, BINARY

local function sorted_keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end
M.unary_names, M.binary_names = sorted_keys(UNARY), sorted_keys(BINARY)

-- ---- dtypes ----

local FLOAT_RANK = { f16 = 1, bf16 = 1, f32 = 2, f64 = 3 }
local INT_RANK = { u8 = 1, i32 = 2, i64 = 3 }

-- The dtype of an operation between dtypes a and b (PyTorch's promotion).
local function promote(a, b)
  if a == b then return a end
  local fa, fb = FLOAT_RANK[a], FLOAT_RANK[b]
  if fa and fb then
    if fa == fb then return "f32" end -- f16 with bf16
    return fa > fb and a or b
  end
  if fa then return a end
  if fb then return b end
  return INT_RANK[a] > INT_RANK[b] and a or b
end
M.promote = promote

-- The dtype an operand contributes: a tensor's, or for a number nil (it takes the tensors').
local function operand_dtype(v) return is_tensor(v) and dtype.name(v.elem_type) or nil end

-- The result dtype of `kind` over the operands, and the dtype the inputs meet in.
local function dtypes_of(kind, operands)
  local common
  for i = 1, 3 do
    local d = operand_dtype(operands[i])
    if d then common = common and promote(common, d) or d end
  end
  -- A fractional number with integer tensors: f32, as PyTorch's default dtype.
  if dtype.is_integer(common) then
    for i = 1, 3 do
      local v = operands[i]
      if type(v) == "number" and (v ~= math.floor(v) or v ~= v or math.abs(v) == math.huge) then common = "f32" end
    end
  end
  if kind == "float" and dtype.is_integer(common) then common = "f32" end
  return kind == "mask" and "u8" or common, common
end

-- The CUDA C type a dtype's operations compute in.
local function compute_ctype(name)
  if name == "f64" then return "double" end
  if dtype.is_integer(name) then return "long long" end
  return "float"
end

-- ---- kernels ----

local PARAMS_TAIL = (function()
  local p = {}
  local function strides(letter) for i = 0, 7 do p[#p + 1] = ("i64 %s%d"):format(letter, i) end end
  strides("d")
  strides("y")
  return table.concat(p, ", ")
end)()

local function operand_params(letter, dt)
  local p = { ("%s* %s"):format(dt, letter) }
  for i = 0, 7 do p[#p + 1] = ("i64 %s%d"):format(letter, i) end
  return table.concat(p, ", ")
end

local kernels = {}

-- The pointwise kernel of fn computing in the dtype `common` (its C type A), writing `out`,
-- reading operands of dtypes da, db, dc, with `scalars` marking the number operands.
local function pointwise_kernel(fn, common, out, da, db, dc, scalars)
  local key = table.concat({ fn, common, out, da, db, dc, scalars }, "|")
  local k = kernels[key]
  if k then return k end
  modules()
  local targs = ("%s, %s, %s, %s, %s, pw_%s, %d"):format(compute_ctype(common), dtype.ctype(out), dtype.ctype(da),
    dtype.ctype(db), dtype.ctype(dc), fn, scalars)
  local params = ("%s* y, i64 n, i32 ndim, %s, %s, %s, %s, f64 sa, f64 sb, f64 sc"):format(out, PARAMS_TAIL,
    operand_params("a", da), operand_params("b", db), operand_params("c", dc))
  k = kernel.new { source = op.source("pointwise.cu"), name = "tocha_pointwise", template_args = targs, params = params }
  kernels[key] = k
  return k
end
-- The kernel a call runs, for readouts (k:info(), k:sass()): pointwise_kernel("add", "f32",
-- "f32", "f32", "f32", "f32", scalars).
M.pointwise_kernel = pointwise_kernel

-- ---- shapes ----

local function sizes_of(t)
  local d, s = {}, {}
  for i = 0, t.ndim - 1 do d[i + 1], s[i + 1] = tonumber(t.dims[i]), tonumber(t.strides[i]) end
  return d, s
end

local function shape_text(d) return "[" .. table.concat(d, ", ") .. "]" end

-- The broadcast shape of the tensors among operands (named by names), or an error naming the
-- first operand that does not fit.
local function broadcast_shape(operands, names)
  local out, first
  for i, v in ipairs(operands) do
    if is_tensor(v) then
      local d = sizes_of(v)
      if not out then
        out, first = d, names[i]
      else
        local n = math.max(#out, #d)
        local merged = {}
        for k = 1, n do
          local a = out[#out - n + k] or 1
          local b = d[#d - n + k] or 1
          if a ~= b and a ~= 1 and b ~= 1 then
            raise(("%s: shape %s does not broadcast with %s (%s's): sizes %d and %d at dimension %d from the end")
              :format(names[i], shape_text(d), shape_text(out), first, b, a, n - k + 1))
          end
          merged[k] = a == 1 and b or a
        end
        out = merged
      end
    end
  end
  return out
end
M.broadcast_shape = broadcast_shape

-- t's strides seen with the shape `shape` (t broadcast to it: 0 along repeated dimensions).
local function broadcast_strides(t, shape)
  local d, s = sizes_of(t)
  local out, lead = {}, #shape - #d
  for k = 1, #shape do
    local j = k - lead
    out[k] = (j >= 1 and d[j] ~= 1) and s[j] or 0
  end
  return out
end

-- The sizes and each stride set merged where every set is dense across the boundary, and the
-- dimensions of size 1 dropped: fewer dimensions for the kernel to walk (one, for operands of
-- one contiguous shape). Dimension k folds into the one after it when, in every set,
-- stride[k] == stride[k + 1] * size[k + 1].
local function coalesce(shape, sets)
  local d, st = {}, {}
  for j = 1, #sets do st[j] = {} end
  for k = 1, #shape do
    if shape[k] ~= 1 then
      local n = #d
      local fold = n > 0
      for j = 1, #sets do
        if fold and st[j][n] ~= sets[j][k] * shape[k] then fold = false end
      end
      if fold then
        d[n] = d[n] * shape[k]
        for j = 1, #sets do st[j][n] = sets[j][k] end
      else
        d[n + 1] = shape[k]
        for j = 1, #sets do st[j][n + 1] = sets[j][k] end
      end
    end
  end
  if #d == 0 then
    d[1] = 1
    for j = 1, #sets do st[j][1] = 0 end
  end
  return d, st
end
M.coalesce = coalesce


-- ---- launching ----

local function device_of(operands, names)
  modules()
  local dev, first
  for i, v in ipairs(operands) do
    if is_tensor(v) then
      if v.freed ~= 0 then raise(names[i] .. ": tensor was freed") end
      if not dev then
        dev, first = v.dev, names[i]
      elseif v.dev ~= dev then
        raise(("%s: on %s, but %s is on %s (move one with :to())"):format(names[i], device.wrap(v.dev).name, first,
          device.wrap(dev).name))
      end
    end
  end
  return dev
end

-- Raises unless y's elements are distinct memory (an expanded view repeats one element).
local function check_writable(y, what)
  if y.count == 0 then return end -- nothing is written
  local d, s = sizes_of(y)
  for k = 1, #d do
    if s[k] == 0 and d[k] > 1 then
      raise(what .. ": an expanded view cannot be written (its elements share memory)")
    end
  end
end

local grid_buf = {}
local CHUNK = 8 -- pointwise.cu's PW_CHUNK

-- Elements a thread computes on pointwise.cu's chunk paths: 8-element chunks, two where the
-- widest of y's and the operands' dtypes is 4 bytes, else one (pointwise.cu's pw_chunks).
local function chunk_elements(out_dt, dts)
  local widest = dtype.size(out_dt)
  for i = 1, 3 do widest = math.max(widest, dtype.size(dts[i])) end
  return CHUNK * (widest == 4 and 2 or 1)
end

-- Whether pointwise.cu takes a chunk path for these merged sizes d and stride sets st (y's
-- first) over the tensors ptrs (y's first; nil for numbers, true for an address taken to be
-- aligned): the same test as its pw_vector.
local function chunk_path(d, st, ptrs, dts)
  local last = #d
  local dense = last == 1
  for i = 1, 4 do if ptrs[i] and st[i][1] ~= 1 then dense = false end end
  local rows = d[last] % CHUNK == 0 and st[1][last] == 1
  for i = 1, 4 do
    local p = ptrs[i]
    if p then
      local size = dtype.size(dts[i])
      local aligned = p == true or tonumber(ffi.cast("uintptr_t", p)) % (CHUNK * size) == 0
      if not aligned then dense = false end
      local inner = st[i][last]
      if inner == 1 then
        if not aligned then rows = false end
        for k = 1, last - 1 do if st[i][k] % CHUNK ~= 0 then rows = false end end
      elseif inner ~= 0 then
        rows = false
      end
    end
  end
  return dense or rows
end

local pack_layout

-- y = fn(operands...) computed in the dtype `common`, with y's shape the operands' broadcast
-- one: y allocated (dtype out_dt) when nil, else written (in place) through its strides.
local function run(fn, out_dt, common, operands, names, y)
  local dev = device_of(operands, names)
  if not dev then raise("expected at least one tensor operand") end
  local shape = broadcast_shape(operands, names)
  if y == nil then
    y = tensor.alloc(shape, out_dt, device.wrap(dev))
  else
    local yd = sizes_of(y)
    if #yd ~= #shape then
      raise(("self: the result has shape %s, which cannot be written into self's %s"):format(shape_text(shape), shape_text(yd)))
    end
    for k = 1, #yd do
      if yd[k] ~= shape[k] then
        raise(("self: the result has shape %s, which cannot be written into self's %s"):format(shape_text(shape), shape_text(yd)))
      end
    end
    check_writable(y, "self")
    local ydt = dtype.name(y.elem_type)
    if ydt ~= out_dt and not (dtype.is_float(ydt) and dtype.is_float(out_dt)) and promote(ydt, out_dt) ~= ydt then
      raise(("self: the result's dtype %s cannot be written into self's %s in place"):format(out_dt, ydt))
    end
    out_dt = ydt
  end
  for k = 1, #shape do
    if shape[k] == 0 then return y end -- an empty result: no kernel to build or launch
  end
  local sets, dts, scalars, values = { broadcast_strides(y, shape) }, {}, 0, { 0, 0, 0 }
  for i = 1, 3 do
    local v = operands[i]
    if is_tensor(v) then
      sets[i + 1] = broadcast_strides(v, shape)
      dts[i] = dtype.name(v.elem_type)
    else
      sets[i + 1] = {}
      for k = 1, #shape do sets[i + 1][k] = 0 end
      dts[i] = common
      if v ~= nil then
        scalars = scalars + 2 ^ (i - 1)
        values[i] = v
      end
    end
  end
  local n = 1
  for k = 1, #shape do n = n * shape[k] end
  local d, st = coalesce(shape, sets)
  local k = pointwise_kernel(fn, common, out_dt, dts[1], dts[2], dts[3], scalars)
  local ptrs = { y.data }
  for i = 1, 3 do ptrs[i + 1] = is_tensor(operands[i]) and operands[i].data or nil end
  local args = pack_layout({}, { n = n, d = d, st = st }, ptrs, values)
  -- The chunk paths take several chunks a thread; the others an element a thread.
  local per = chunk_path(d, st, ptrs, { out_dt, dts[1], dts[2], dts[3] }) and chunk_elements(out_dt, dts) or 1
  grid_buf[1] = math.max(1, math.min(math.ceil(n / (BLOCK * per)), 2 ^ 31 - 1))
  grid_buf[2], grid_buf[3] = 1, 1
  modules()
  op.launch_packed(k, device.wrap(dev), grid_buf, { BLOCK, 1, 1 }, args)
  return y
end

-- ---- launches planned from shapes (an op's, which a model packs once) ----

-- The pointwise kernel's view of y = f(operands) for a dense y of `shape` and dense operands of
-- the shapes in `shapes` (each broadcast to it; up to three): {n, d, st}, the sizes and the
-- stride sets (y's first) merged as a call's are.
function M.dense_layout(shape, shapes)
  local function dense(s)
    local out, step = {}, 1
    for k = #s, 1, -1 do out[k], step = s[k] == 1 and 0 or step, step * s[k] end
    return out
  end
  local sets = { dense(shape) }
  for i, s in ipairs(shapes) do
    local lead, full = #shape - #s, {}
    for k = 1, #shape do full[k] = s[k - lead] or 1 end
    local st = dense(full)
    for k = 1, #shape do if full[k] ~= shape[k] then st[k] = 0 end end
    sets[i + 1] = st
  end
  local n = 1
  for k = 1, #shape do n = n * shape[k] end
  local d, st = coalesce(shape, sets)
  return { n = n, d = d, st = st }
end

-- Appends to list the pointwise kernel's arguments for layout L: y (ptrs[1]) with n, the sizes
-- and y's strides, then operands 1 to 3 (ptrs[2..4]; an operand absent takes y's address and
-- no strides), then the three scalar values (values, default 0). Returns list.
function pack_layout(list, L, ptrs, values)
  local function push(set, fill)
    for i = 1, MAX_DIMS do list[#list + 1] = set and set[i] or fill end
  end
  list[#list + 1], list[#list + 2], list[#list + 3] = ptrs[1], L.n, #L.d
  push(L.d, 1)
  push(L.st[1], 0)
  for i = 1, 3 do
    list[#list + 1] = ptrs[i + 1] or ptrs[1]
    push(ptrs[i + 1] and L.st[i + 1], 0)
  end
  for i = 1, 3 do list[#list + 1] = values and values[i] or 0 end
  return list
end
M.pack_layout = pack_layout

-- CTAs of at least this many where the tensor has the elements: a grid planned without the
-- addresses (an op's) may meet a path of an element a thread, whose threads then stride.
local FILL_CTAS = 132 * 8

-- The grid for layout L over `count` operands of dtype dt, its addresses taken to be aligned:
-- the chunk paths' grid where they apply, else an element a thread; with `unknown` (the
-- operands' shapes are not known, only n) the chunk grid raised to FILL_CTAS where an element
-- a thread has that many.
function M.layout_grid(L, dt, count, unknown)
  local ptrs, dts = { true }, { dt, dt, dt, dt }
  for i = 1, count do ptrs[i + 1] = true end
  local per = unknown and chunk_elements(dt, dts) or (chunk_path(L.d, L.st, ptrs, dts) and chunk_elements(dt, dts) or 1)
  local ctas = math.ceil(L.n / (BLOCK * per))
  if unknown then ctas = math.max(ctas, math.min(math.ceil(L.n / BLOCK), FILL_CTAS)) end
  return { math.max(1, math.min(ctas, 2 ^ 31 - 1)), 1, 1 }
end
-- The pointwise kernel's block width (an op launching it plans with the same).
M.BLOCK = BLOCK

-- ---- number operands ----

local function check_operand(v, what)
  if is_tensor(v) then return v end
  if type(v) ~= "number" then
    raise(("%s: expected a tensor or a number, got %s"):format(what, type(v)))
  end
  return v
end

-- A number for an operation computing in an integer dtype (in 64 bits): it must fit them.
local function integer_scalar(v, common, what)
  if type(v) == "number" and dtype.is_integer(common) and math.abs(v) >= 2 ^ 63 then
    raise(("%s: %s is outside the 64-bit integers %s arithmetic computes in"):format(what, errors.show(v), common))
  end
end

-- ---- the public functions ----

-- tocha.unary(fn, x [, y]): fn (a name of M.UNARY) element by element; into y when given.
function M.unary(fn, x, y)
  local kind = UNARY[fn]
  if not kind then raise(("fn: unknown function %s (expected one of %s)"):format(errors.show(fn), table.concat(M.unary_names, ", "))) end
  if not is_tensor(x) then raise("self: expected a tensor, got " .. type(x)) end
  if kind == "round" and dtype.is_integer(dtype.name(x.elem_type)) then fn = "copy" end
  local out, common = dtypes_of(kind, { x })
  local r = run(fn, out, common, { x }, { "self" }, y)
  return r
end

-- tocha.binary(fn, a, b [, y]): fn (a name of M.BINARY) of a and b (tensors or numbers, at
-- least one a tensor), broadcast; into y when given.
function M.binary(fn, a, b, y, names)
  local kind = BINARY[fn]
  if not kind then raise(("fn: unknown function %s (expected one of %s)"):format(errors.show(fn), table.concat(M.binary_names, ", "))) end
  names = names or { "self", "other" }
  check_operand(a, names[1])
  check_operand(b, names[2])
  local out, common = dtypes_of(kind, { a, b })
  if not common then raise(("%s: expected a tensor operand, got two numbers"):format(names[1])) end
  integer_scalar(a, common, names[1])
  integer_scalar(b, common, names[2])
  local r = run(fn, out, common, { a, b }, names, y)
  return r
end

-- tocha.where(mask, a, b): a where mask (u8) is non-zero, else b; a and b tensors or numbers,
-- all three broadcast; into y (in place, through its strides) where given.
function M.where(mask, a, b, y)
  if not is_tensor(mask) then raise("condition: expected a u8 tensor, got " .. type(mask)) end
  if dtype.name(mask.elem_type) ~= "u8" then
    raise("condition: expected a u8 mask (as comparisons give), got " .. dtype.name(mask.elem_type))
  end
  check_operand(a, "input")
  check_operand(b, "other")
  if not is_tensor(a) and not is_tensor(b) then raise("input: expected a tensor for input or other, got two numbers") end
  local out, common = dtypes_of("keep", { a, b })
  integer_scalar(a, common, "input")
  integer_scalar(b, common, "other")
  -- The mask is read as u8 and converted into A: exact for 0 and 1 in every compute type.
  local r = run("where", out, common, { mask, a, b }, { "condition", "input", "other" }, y)
  return r
end

-- clamp(x, lo, hi) into y (nil: a new tensor): lo and hi numbers, tensors or nil (no bound).
function M.clamp(x, lo, hi, y)
  if not is_tensor(x) then raise("self: expected a tensor, got " .. type(x)) end
  if lo == nil and hi == nil then raise("min: at least one of min and max must be given") end
  if lo ~= nil then check_operand(lo, "min") end
  if hi ~= nil then check_operand(hi, "max") end
  local out, common = dtypes_of("keep", { x, lo, hi })
  if dtype.is_integer(common) then
    integer_scalar(lo, common, "min")
    integer_scalar(hi, common, "max")
    lo = lo or -2 ^ 62
    hi = hi or 2 ^ 62
  else
    lo = lo or -math.huge
    hi = hi or math.huge
  end
  local r = run("clamp", out, common, { x, lo, hi }, { "self", "min", "max" }, y)
  return r
end

-- (a - b)^2 and (a - b) * s for tensors a and b of one float dtype and a number s, each in one
-- pass: a squared difference and its gradient (tocha.loss.mse).
function M.squared_difference(a, b)
  local out, common = dtypes_of("keep", { a, b })
  local r = run("squared_difference", out, common, { a, b }, { "input", "target" })
  return r
end

function M.sub_scale(a, b, s)
  local out, common = dtypes_of("keep", { a, b })
  local r = run("sub_scale", out, common, { a, b, s }, { "input", "target", "scale" })
  return r
end

-- ---- installing ----

-- Installs the methods, the operators and tocha.where on tensors (methods: the method table;
-- Tensor: the metatable, before ffi.metatype).
function M.install(methods, Tensor)
  for name in pairs(UNARY) do
    methods[name] = function(x) local r = M.unary(name, x) return r end
    methods[name .. "_"] = function(x)
      if UNARY[name] == "mask" then raise(("self: %s gives a u8 mask, which cannot replace a tensor in place"):format(name)) end
      M.unary(name, x, x)
      return x
    end
  end
  for name in pairs(BINARY) do
    methods[name] = function(x, other) local r = M.binary(name, x, other) return r end
    methods[name .. "_"] = function(x, other)
      M.binary(name, x, other, x)
      return x
    end
  end
  function methods.clamp(x, lo, hi) local r = M.clamp(x, lo, hi) return r end
  function methods.clamp_(x, lo, hi)
    M.clamp(x, lo, hi, x)
    return x
  end
  -- x:where(condition, other): PyTorch's (x where condition, else other).
  function methods.where(x, condition, other) local r = M.where(condition, x, other) return r end
  -- x:masked_fill(mask, value): value where the u8 mask (broadcast to x) is non-zero, else x;
  -- value a number or a one-element tensor (PyTorch's and Torch7's maskedFill).
  local function fill_value(x, value)
    if not is_tensor(x) then raise("self: expected a tensor, got " .. type(x)) end
    if is_tensor(value) then
      if value.count ~= 1 then raise(("value: expected a number or a one-element tensor, got %d elements"):format(tonumber(value.count))) end
      value = value:item()
    end
    if type(value) ~= "number" then raise("value: expected a number or a one-element tensor, got " .. type(value)) end
    -- A value self's dtype cannot hold is refused, as PyTorch's: a fraction or one out of range
    -- for an integer dtype, a finite one past a float dtype's largest (inf and NaN are values).
    local dt = dtype.name(x.elem_type)
    local range = ({ u8 = { 0, 2 ^ 8 }, i32 = { -2 ^ 31, 2 ^ 31 }, i64 = { -2 ^ 63, 2 ^ 63 } })[dt]
    local largest = ({ f16 = 65504, bf16 = 3.3895313892515355e38, f32 = 3.4028234663852886e38 })[dt]
    if (range and (value ~= math.floor(value) or value < range[1] or value >= range[2]))
      or (largest and value == value and math.abs(value) ~= math.huge and math.abs(value) > largest) then
      raise(("value: %s is not a value of self's dtype %s"):format(errors.show(value), dt))
    end
    return value
  end
  function methods.masked_fill(x, mask, value)
    value = fill_value(x, value)
    modules()
    local r = M.where(mask, value, x, tensor.alloc(sizes_of(x), dtype.name(x.elem_type), device.wrap(x.dev)))
    return r
  end
  function methods.masked_fill_(x, mask, value)
    M.where(mask, fill_value(x, value), x, x)
    return x
  end
  -- x:zero_(): every element 0, in place (Torch7's x:zero()).
  function methods.zero_(x) return x:fill(0) end

  local function operator(fn, metamethod)
    Tensor[metamethod] = errors.name(function(a, b)
      local r = M.binary(fn, a, b, nil, { "left operand", "right operand" })
      return r
    end, "Tensor." .. metamethod)
  end
  operator("add", "__add")
  operator("sub", "__sub")
  operator("mul", "__mul")
  operator("div", "__div")
  operator("pow", "__pow")
  operator("remainder", "__mod")
  Tensor.__unm = errors.name(function(a) local r = M.unary("neg", a) return r end, "Tensor.__unm")
end

return M
