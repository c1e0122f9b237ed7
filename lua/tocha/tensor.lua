-- tocha.tensor: dense tensors on a device, as LuaJIT cdata with methods.
--
-- A tensor is a `tocha_tensor *` with a finalizer: its device memory goes back when it is
-- collected, or at once with t:free() (idempotent; a freed tensor refuses every later use).
-- Lua validates arguments and allocates; C and the device kernels do the work.
local ffi = require "ffi"
local native = require "tocha.ffi"
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local errors = require "tocha.errors"
local memory = require "tocha.memory"
local C, check, status = native.C, native.check, native.status

local M = {}
local Tensor = {}
local methods = {}

local MAX_DIMS = 8

-- A tensor is a reference to its C struct (`tocha_tensor &`), never a pointer: indexing a
-- pointer with a number, or adding a number to it, is pointer arithmetic that LuaJIT does before
-- any metamethod is asked, so x[1] or x + 1 on a pointer would reach memory that is no tensor.
-- A reference reaches __index, __add and the rest, and converts to the pointer C takes.
local function is_tensor(x) return ffi.istype("tocha_tensor", x) end
M.is_tensor = is_tensor

local raise = errors.raise

-- ---- shapes ----

local function describe(x)
  if type(x) == "number" then
    if x ~= x then return "nan" end
    return tostring(x)
  end
  return type(x)
end

-- A number argument, or its default where nil.
local function number_or(v, default, what)
  if v == nil then return default end
  if type(v) ~= "number" then raise(("%s: expected a number, got %s"):format(what, type(v))) end
  return v
end

-- Validates a shape given as a table of sizes; returns a plain copy.
local function check_shape(shape)
  if type(shape) ~= "table" then
    raise("shape: expected a table of sizes, got " .. type(shape))
  end
  local n = #shape
  if n == 0 then raise("shape: expected 1 to 8 dimensions, got 0") end
  if n > MAX_DIMS then
    raise(("shape: expected 1 to %d dimensions, got %d"):format(MAX_DIMS, n))
  end
  local out = {}
  for i = 1, n do
    local s = shape[i]
    if type(s) ~= "number" or s ~= s or s < 0 or s ~= math.floor(s) then
      raise(("shape[%d]: size must be a non-negative integer, got %s"):format(i, describe(s)))
    end
    if s > 2 ^ 53 then
      raise(("shape[%d]: size %s is too large"):format(i, describe(s)))
    end
    out[i] = s
  end
  return out
end
M.check_shape = check_shape

local function shape_string(t)
  local parts = {}
  for i = 0, t.ndim - 1 do parts[#parts + 1] = tostring(tonumber(t.dims[i])) end
  return table.concat(parts, "x")
end

-- Raises unless a and b have one shape: "<what>: expected shape [..] (like x), got [..]".
function M.same_shape(a, b, what)
  local same = a.ndim == b.ndim
  for i = 0, a.ndim - 1 do same = same and a.dims[i] == b.dims[i] end
  if not same then
    raise(("%s: expected shape [%s], got [%s]"):format(what, shape_string(a), shape_string(b)))
  end
end

-- ---- allocation ----

-- Allocates an uninitialised tensor, its bytes charged to the collector's view of the device
-- (tocha.memory.charge); on device out-of-memory collects garbage, gives the device's cached
-- blocks back and retries once.
-- Scratch for the C call, filled right before it: the collections of charge and of the retry
-- can run finalizers of the script's own, which may allocate.
local alloc_dims, alloc_out = ffi.new("int64_t[?]", MAX_DIMS), ffi.new("tocha_tensor*[1]")

-- The tensor tocha_tensor_new gave (status st, alloc_dims filled by refill(...)); on device
-- out-of-memory collects garbage twice, gives the device's cached blocks back and retries once.
local function take(st, dev, id, ndim, refill, ...)
  if st == status.out_of_memory then
    collectgarbage("collect")
    collectgarbage("collect")
    C.tocha_memory_empty_cache(dev.handle)
    refill(...)
    st = C.tocha_tensor_new(dev.handle, id, ndim, alloc_dims, alloc_out)
  end
  check(st)
  local t = ffi.gc(alloc_out[0][0], C.tocha_tensor_destroy)
  memory.allocated(dev, t)
  return t
end

local function fill_dims(shape)
  for i = 1, #shape do alloc_dims[i - 1] = shape[i] end
end

local function alloc(shape, dtype_name, dev)
  local id = dtype.id(dtype_name)
  local nbytes = dtype.size(dtype_name)
  for i = 1, #shape do nbytes = nbytes * shape[i] end
  memory.charge(dev, nbytes)
  fill_dims(shape)
  return take(C.tocha_tensor_new(dev.handle, id, #shape, alloc_dims, alloc_out), dev, id, #shape, fill_dims, shape)
end

local function fill_4d(d0, d1, d2, d3)
  alloc_dims[0], alloc_dims[1], alloc_dims[2], alloc_dims[3] = d0, d1, d2, d3
end

-- tensor.alloc_4d(d0, d1, d2, d3, id, dev): alloc for a 4-D shape of numbers and a dtype id,
-- without a table or a loop: the path of an op's output, taken on every call that lets the op
-- allocate it, and one the JIT compiles whole.
function M.alloc_4d(d0, d1, d2, d3, id, dev)
  memory.charge(dev, d0 * d1 * d2 * d3 * dtype.size_of_id(id))
  fill_4d(d0, d1, d2, d3)
  return take(C.tocha_tensor_new(dev.handle, id, 4, alloc_dims, alloc_out), dev, id, 4, fill_4d, d0, d1, d2, d3)
end

-- Reads the options table of a constructor: dtype (default f32), device (default device).
local function options(opts)
  if type(opts) ~= "nil" and type(opts) ~= "table" then -- (a NULL pointer equals nil)
    raise("options: expected a table {dtype=, device=}, got " .. type(opts))
  end
  opts = opts or {}
  local name = opts.dtype or "f32"
  dtype.id(name)
  return name, device.get(opts.device)
end

-- Splits constructor arguments: a shape table or leading sizes, then an options table.
local function shape_and_options(...)
  local first = ...
  if type(first) == "number" then
    local shape, n = {}, select("#", ...)
    local opts
    for i = 1, n do
      local v = select(i, ...)
      if type(v) == "table" and i == n then opts = v else shape[#shape + 1] = v end
    end
    return shape, opts
  end
  local shape, opts = ...
  return shape, opts
end

local function make(...)
  local shape, opts = shape_and_options(...)
  shape = check_shape(shape)
  local name, dev = options(opts)
  return alloc(shape, name, dev), opts or {}
end

-- tocha.empty(shape [, {dtype=, device=}]): contents undefined.
function M.empty(...) return (make(...)) end

function M.zeros(...)
  local t = make(...)
  check(C.tocha_tensor_fill(t, 0))
  return t
end

function M.ones(...)
  local t = make(...)
  check(C.tocha_tensor_fill(t, 1))
  return t
end

-- tocha.full(shape, value [, opts])
function M.full(shape, value, opts)
  if type(value) ~= "number" then raise("value: expected a number, got " .. type(value)) end
  local t = make(shape, opts)
  check(C.tocha_tensor_fill(t, value))
  return t
end

-- Seeds for rand/randn when the caller gives none: a counter from tocha.manual_seed.
local next_seed = 0
function M.manual_seed(seed)
  if type(seed) ~= "number" or seed < 0 or seed ~= math.floor(seed) or seed >= 2 ^ 53 then
    raise("seed: expected an integer from 0 to 2^53, got " .. describe(seed))
  end
  next_seed = seed
end

local function take_seed(opts)
  local seed = opts.seed
  if seed == nil then
    seed = next_seed
    next_seed = next_seed + 1
  elseif type(seed) ~= "number" or seed < 0 or seed ~= math.floor(seed) or seed >= 2 ^ 53 then
    raise("seed: expected an integer from 0 to 2^53, got " .. describe(seed))
  end
  return seed
end

-- tocha.rand(shape [, {dtype=, device=, seed=, low=0, high=1}]): uniform in [low, high).
function M.rand(...)
  local t, opts = make(...)
  local seed = take_seed(opts)
  check(C.tocha_tensor_uniform(t, seed, number_or(opts.low, 0, "low"), number_or(opts.high, 1, "high")))
  return t
end

-- tocha.randn(shape [, {dtype=, device=, seed=, mean=0, std=1}]): normal values.
function M.randn(...)
  local t, opts = make(...)
  local seed = take_seed(opts)
  check(C.tocha_tensor_normal(t, seed, number_or(opts.mean, 0, "mean"), number_or(opts.std, 1, "std")))
  return t
end

-- ---- from and to Lua tables ----

-- The shape of a nested table of numbers, checking that it is rectangular. An empty table is a
-- size 0 there and ends the walk ({} is shape {0}, {{}, {}} is {2, 0}), as torch.tensor([]).
-- (A table that holds itself would nest without end: the walk stops past MAX_DIMS.)
local function nested_shape(data)
  local shape, node = {}, data
  while type(node) == "table" do
    if #shape == MAX_DIMS then
      raise(("data: expected 1 to %d dimensions, got more"):format(MAX_DIMS))
    end
    shape[#shape + 1] = #node
    if #node == 0 then break end
    node = node[1]
  end
  return shape
end

-- The number of keys of t (its length with holes or other keys counts more).
local function key_count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

local function flatten(data, shape)
  local flat, n = {}, 0
  -- Returns a message on bad data; raised below, at the caller's level (the recursion's depth
  -- varies, so no error is raised inside it).
  local function walk(node, depth, where)
    if depth > #shape then
      if type(node) ~= "number" then
        return ("data%s: expected a number, got %s"):format(where, type(node))
      end
      n = n + 1
      flat[n] = node
      return nil
    end
    if type(node) ~= "table" or #node ~= shape[depth] then
      return ("data%s: ragged nesting: expected %d elements, got %s"):format(
        where, shape[depth], type(node) == "table" and tostring(#node) or type(node))
    end
    if key_count(node) ~= #node then
      return ("data%s: expected a list without holes or other keys, got %d keys"):format(where, key_count(node))
    end
    for i = 1, shape[depth] do
      local bad = walk(node[i], depth + 1, where .. "[" .. i .. "]")
      if bad then return bad end
    end
    return nil
  end
  local bad = walk(data, 1, "")
  if bad then raise(bad) end
  return flat, n
end

-- Writes n f64 values into t, converting on the device through the cast kernel.
local function upload_numbers(t, flat, n)
  local name = dtype.name(t.elem_type)
  local buf = ffi.new("double[?]", n, flat)
  if name == "f64" then
    check(C.tocha_tensor_write(t, buf, n * 8))
    return
  end
  local shape = {}
  for i = 0, t.ndim - 1 do shape[i + 1] = tonumber(t.dims[i]) end
  local staging = alloc(shape, "f64", device.wrap(t.dev))
  check(C.tocha_tensor_write(staging, buf, n * 8))
  check(C.tocha_tensor_cast(t, staging))
  C.tocha_tensor_free(staging)
end

-- tocha.tensor(data [, {dtype=, device=}]): a tensor from (nested) tables of numbers.
function M.tensor(data, opts)
  if type(data) ~= "table" then raise("data: expected a table of numbers, got " .. type(data)) end
  local shape = nested_shape(data)
  local flat, n = flatten(data, shape)
  local name, dev = options(opts)
  local t = alloc(shape, name, dev)
  upload_numbers(t, flat, n)
  return t
end

-- ---- methods ----

local function live(t)
  if t.freed ~= 0 then raise("tensor was freed") end
end

-- t, or a dense copy of it when it is a view that is not contiguous: what the calls that read
-- every element take.
local function dense(t)
  live(t)
  if t.dense ~= 0 then return t end
  local d = {}
  for i = 0, t.ndim - 1 do d[i + 1] = tonumber(t.dims[i]) end
  local out = alloc(d, dtype.name(t.elem_type), device.wrap(t.dev))
  check(C.tocha_tensor_copy(out, t))
  return out
end

-- fn(dense, ...) into a view that is not contiguous: run on a dense tensor of its shape, then
-- copied into it; on t itself otherwise.
local function through_dense(t, fn, ...)
  if t.freed ~= 0 or t.dense ~= 0 then return fn(t, ...) end -- (C names a freed tensor)
  local d = {}
  for i = 0, t.ndim - 1 do d[i + 1] = tonumber(t.dims[i]) end
  local tmp = alloc(d, dtype.name(t.elem_type), device.wrap(t.dev))
  fn(tmp, ...)
  check(C.tocha_tensor_copy(t, tmp))
  tmp:free()
  return t
end

function methods.shape(t)
  local s = {}
  for i = 0, t.ndim - 1 do s[i + 1] = tonumber(t.dims[i]) end
  return s
end
-- t:size([dim]): the sizes (a list), or dimension dim's (1-based; -1 the last).
function methods.size(t, dim)
  if dim == nil then return methods.shape(t) end
  local n = t.ndim
  if type(dim) == "number" and dim < 0 and dim >= -n then dim = n + 1 + dim end
  if type(dim) ~= "number" or dim < 1 or dim > n or dim ~= math.floor(dim) then
    raise(("dim: expected 1 to %d (or -1 to -%d), got %s"):format(n, n, describe(dim)))
  end
  return tonumber(t.dims[dim - 1])
end
function methods.dim(t) return t.ndim end
-- t:item(): the one element of a tensor of one element, as a Lua number (waits for the device).
function methods.item(t)
  live(t)
  if t.count == 0 then
    raise(("self: item() of an empty tensor (shape [%s]): it has no element"):format(shape_string(t):gsub("x", ", ")))
  end
  if t.count ~= 1 then
    raise(("self: item() needs a tensor of one element, got %d (shape [%s])"):format(tonumber(t.count), shape_string(t):gsub("x", ", ")))
  end
  local name = dtype.name(t.elem_type)
  local buf = ffi.new(dtype.host_ctype(name) .. "[1]")
  check(C.tocha_tensor_read(dense(t), 0, 1, buf))
  return dtype.decode(name, buf, 0)
end
function methods.dtype(t) return dtype.name(t.elem_type) end
function methods.device(t) return device.wrap(t.dev).name end
function methods.numel(t) return tonumber(t.count) end
function methods.nbytes(t) return tonumber(t.bytes) end
function methods.is_freed(t) return t.freed ~= 0 end

-- Releases the device memory now; later uses raise "tensor was freed".
function methods.free(t) C.tocha_tensor_free(t) end

-- All elements as a flat array of Lua numbers (row-major), in f64.
local function to_flat(t)
  t = dense(t)
  local n = tonumber(t.count)
  local name = dtype.name(t.elem_type)
  -- The raw elements, decoded here: no device buffer beside the tensor, and fewer bytes over
  -- the bus than an f64 copy.
  local buf = ffi.new(dtype.host_ctype(name) .. "[?]", n)
  check(C.tocha_tensor_read(t, 0, n, buf))
  local flat = {}
  local decode = dtype.decode
  for i = 0, n - 1 do flat[i + 1] = decode(name, buf, i) end
  return flat
end

-- t:to_table([flat]): nested tables of numbers (or one flat table when flat is true).
function methods.to_table(t, flat)
  local values = to_flat(t)
  if flat then return values end
  local shape = methods.shape(t)
  local pos = 0
  local function build(depth)
    local out = {}
    for i = 1, shape[depth] do
      if depth == #shape then
        pos = pos + 1
        out[i] = values[pos]
      else
        out[i] = build(depth + 1)
      end
    end
    return out
  end
  return build(1)
end
-- PyTorch's name (x.tolist()) and Torch7's (x:totable()) for t:to_table().
function methods.tolist(t) return methods.to_table(t) end
function methods.totable(t) return methods.to_table(t) end

-- t:copy(src): copies src (same shape and dtype, any device) into t; returns t.
function methods.copy(t, src)
  if not is_tensor(src) then raise("src: expected a tensor, got " .. type(src)) end
  check(C.tocha_tensor_copy(t, src))
  return t
end

-- t:clone([device]): a new tensor with the same values, on t's device or the one named.
function methods.clone(t, dev)
  live(t)
  local d = dev and device.get(dev) or device.wrap(t.dev)
  local out = alloc(methods.shape(t), dtype.name(t.elem_type), d)
  check(C.tocha_tensor_copy(out, t))
  return out
end
-- t:to(device [, dtype]) or t:to(dtype): a new tensor on the device named (t's by default) of
-- the dtype named (t's by default), PyTorch's x.to(device, dtype) and x.to(dtype).
function methods.to(t, dev, name)
  if type(dev) == "string" and name == nil and dtype.known(dev) then dev, name = nil, dev end
  if name ~= nil then dtype.id(name) end
  local out = methods.clone(t, dev)
  if name ~= nil and name ~= dtype.name(out.elem_type) then out = methods.cast(out, name) end
  return out
end

-- t:float(), double, half, bfloat16, long, int, byte: t in that dtype (f32, f64, f16, bf16,
-- i64, i32, u8): t itself where it already is, else a converted copy (PyTorch's and Torch7's).
for method, name in pairs({ float = "f32", double = "f64", half = "f16", bfloat16 = "bf16", long = "i64",
  int = "i32", byte = "u8" }) do
  methods[method] = function(t)
    live(t)
    if dtype.name(t.elem_type) == name then return t end
    local out = methods.cast(t, name)
    return out
  end
end

-- t:type_as(other): t in other's dtype (t itself where it already is).
function methods.type_as(t, other)
  if not is_tensor(other) then raise("other: expected a tensor, got " .. type(other)) end
  live(t)
  if t.elem_type == other.elem_type then return t end
  local out = methods.cast(t, dtype.name(other.elem_type))
  return out
end

-- t:cast(dtype): a new tensor of that dtype (see tocha_tensor_cast for the rules).
function methods.cast(t, name)
  t = dense(t)
  local out = alloc(methods.shape(t), name, device.wrap(t.dev))
  check(C.tocha_tensor_cast(out, t))
  return out
end

-- t:cast_into(dst): converts t into dst (same shape and device, any dtype); returns dst.
function methods.cast_into(t, dst)
  if not is_tensor(dst) then raise("dst: expected a tensor, got " .. type(dst)) end
  t = dense(t)
  through_dense(dst, function(d) check(C.tocha_tensor_cast(d, t)) end)
  return dst
end

-- t:fill(value): sets every element; returns t.
function methods.fill(t, value)
  if type(value) ~= "number" then raise("value: expected a number, got " .. type(value)) end
  through_dense(t, function(d) check(C.tocha_tensor_fill(d, value)) end)
  return t
end

-- t:uniform(seed, low, high) and t:normal(seed, mean, std): random fills in place.
function methods.uniform(t, seed, low, high)
  seed = take_seed({ seed = seed })
  low, high = number_or(low, 0, "low"), number_or(high, 1, "high")
  through_dense(t, function(d) check(C.tocha_tensor_uniform(d, seed, low, high)) end)
  return t
end
function methods.normal(t, seed, mean, std)
  seed = take_seed({ seed = seed })
  mean, std = number_or(mean, 0, "mean"), number_or(std, 1, "std")
  through_dense(t, function(d) check(C.tocha_tensor_normal(d, seed, mean, std)) end)
  return t
end

-- The bytes a host buffer holds: a string's length, an FFI array's size; nil for a pointer,
-- whose size LuaJIT cannot tell. Only arrays of and pointers to numbers (or void) are host
-- buffers: a tensor, or any struct, would be read or overwritten as raw bytes.
local function host_bytes(buf, what)
  if type(buf) == "string" then return #buf end
  if type(buf) ~= "cdata" then raise(("%s: expected an FFI array or pointer, got %s"):format(what, type(buf))) end
  if is_tensor(buf) then raise(what .. ": expected host memory, got a tensor (t:copy copies between tensors)") end
  local ctype = tostring(ffi.typeof(buf))
  if ctype:find("struct") or ctype:find("union") or ctype:find("%(") then
    raise(("%s: expected an FFI array or pointer of numbers, got %s"):format(what, ctype))
  end
  if ctype:find("[*&]>$") then return nil end
  if not ctype:find("%[") then raise(("%s: expected an FFI array or pointer, got %s"):format(what, ctype)) end
  return ffi.sizeof(buf)
end

local function count_arg(v, what)
  if type(v) ~= "nil" and (type(v) ~= "number" or v ~= math.floor(v) or v < 0 or v > 2 ^ 53) then
    raise(("%s: expected a non-negative integer, got %s"):format(what, describe(v)))
  end
  return type(v) ~= "nil" and v or nil
end

-- "1 byte", "4 bytes": a byte count for a message.
local function bytes_text(n) return n == 1 and "1 byte" or ("%d bytes"):format(n) end

-- t:write(src [, nbytes]): the tensor's bytes from host memory in t's dtype: a string, an FFI
-- array (its size is checked), or a pointer with nbytes given (the caller vouches for it).
function methods.write(t, src, nbytes)
  live(t)
  nbytes = count_arg(nbytes, "nbytes")
  local size = host_bytes(src, "src")
  if size == nil and nbytes == nil then raise("src: a pointer's size cannot be checked: pass nbytes") end
  local want = nbytes or tonumber(t.bytes)
  if size and size < want then raise(("src: holds %s, %d wanted"):format(bytes_text(size), want)) end
  check(C.tocha_tensor_write(t, src, want))
  return t
end

-- t:read(dst [, offset, count]): count elements from offset (default: all from offset 0) into
-- host memory: an FFI array (its size is checked), or a pointer with count given.
function methods.read(t, dst, offset, count)
  t = dense(t)
  offset = count_arg(offset, "offset") or 0
  count = count_arg(count, "count")
  local size = host_bytes(dst, "dst")
  if type(dst) == "string" then raise("dst: expected an FFI array or pointer, got string") end
  if size == nil and count == nil then raise("dst: a pointer's size cannot be checked: pass offset and count") end
  count = count or math.max(tonumber(t.count) - offset, 0)
  local want = count * dtype.size(dtype.name(t.elem_type))
  if size and size < want then raise(("dst: holds %s, %d wanted"):format(bytes_text(size), want)) end
  check(C.tocha_tensor_read(t, offset, count, dst))
  return dst
end

-- A host buffer holding a copy of all elements, as the dtype's C type (uint16_t for f16/bf16).
function methods.to_host(t)
  t = dense(t)
  local buf = ffi.new(dtype.host_ctype(dtype.name(t.elem_type)) .. "[?]", tonumber(t.count))
  check(C.tocha_tensor_read(t, 0, t.count, buf))
  return buf
end

-- ---- the tensor as a Lua value ----

-- Methods by name; x[i] is x:select(1, i) (Torch7's), a table key indexes (x[{1, {}, {2, 5}}],
-- tocha.view). Any other key is a mistake (a misspelt method) and is named.
Tensor.__index = function(t, k)
  local m = methods[k]
  if m ~= nil then return m end
  local kind = type(k)
  if kind == "number" then
    local v = methods.select(t, 1, k)
    return v
  end
  if kind == "table" then
    local v = methods.index(t, k)
    return v
  end
  raise(("%s: a tensor has no method or field of that name"):format(errors.show(k)))
end
-- x[i] = v and x[{...}] = v: a number fills the view, a tensor is copied into it.
Tensor.__newindex = function(t, k, v)
  if type(k) ~= "table" and type(k) ~= "number" then
    raise(("%s: a tensor has no field to set (x[i] = v and x[{...}] = v write elements)"):format(errors.show(k)))
  end
  require("tocha.view").assign(methods, t, k, v)
end
Tensor.__tostring = function(t) return require("tocha.tensor_print").format(t) end
-- t:summary(): the one line naming t (dtype, shape, device), for logs.
function methods.summary(t) return require("tocha.tensor_print").head(t) end
-- #x: the size of the first dimension (Torch7's).
Tensor.__len = function(t) return tonumber(t.dims[0]) end
-- x == y: the same tensor (not equal values: tocha.equal and tocha.allclose compare those). A
-- view is a tensor of its own, so x ~= x:view(-1).
Tensor.__eq = function(a, b)
  return is_tensor(a) and is_tensor(b) and ffi.cast("const void *", a) == ffi.cast("const void *", b)
end
-- Arithmetic operators and the math methods: tocha.tensor_math. Lua turns the result of < and
-- <= into a boolean, so those name the methods that give masks instead of comparing addresses.
for name, symbol in pairs({ __lt = "<", __le = "<=" }) do
  Tensor[name] = errors.name(function()
    raise(("%s: tensors have no ordering operator (Lua makes its result a boolean); x:lt(y), x:le(y), x:gt(y) and x:ge(y) give u8 masks"):format(symbol))
  end, "Tensor." .. name)
end
Tensor.__concat = errors.name(function() raise(".. : a tensor is not a string; use tostring(x)") end, "Tensor.__concat")
Tensor.__call = errors.name(function() raise("a tensor cannot be called; its methods are x:name(...)") end, "Tensor.__call")
-- x[i], x[{...}] and their writes are Tensor:index in messages (x:index(spec) is the method).
errors.name(Tensor.__index, "Tensor:index")
errors.name(Tensor.__newindex, "Tensor:index")

-- A metatype is set once per process: when this module is loaded again (package.loaded
-- cleared, as busted does between spec files), tensors keep the first load's methods, which do
-- the same.
require("tocha.view").install(methods, dense)
require("tocha.tensor_math").install(methods, Tensor)
require("tocha.tensor_reduce").install(methods)
require("tocha.matmul").install(methods)
require("tocha.tensor_join").install(methods)
require("tocha.tensor_index").install(methods)
require("tocha.tensor_sort").install(methods)
pcall(ffi.metatype, "tocha_tensor", Tensor)

M.methods = methods
M.alloc = alloc
errors.register({ empty = M.empty, zeros = M.zeros, ones = M.ones, full = M.full, rand = M.rand,
  randn = M.randn, tensor = M.tensor, manual_seed = M.manual_seed })
-- Every method checks that it was called on a tensor: t.free() (a dot for the colon) would
-- otherwise do nothing or misreport ("tensor was freed").
errors.methods(methods, "Tensor:", is_tensor)
M.shape_string = shape_string
return M
