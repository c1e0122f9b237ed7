-- tocha.kernel: kernels from CUDA C source, built at run time and launched with checked
-- arguments.
--
--   local k = tocha.kernel {
--     source = src,                      -- CUDA C text holding a __device__ function (template)
--     name = "saxpy",                    -- that function
--     template_args = "float",           -- optional: its template arguments
--     params = "f32* x, f32* y, i64 n, f32 a",
--   }
--   k:launch(grid, block, x, y, n, a)   -- grid, block: a number or {x, y, z}
--
-- tocha generates `extern "C" __global__ void saxpy_entry_point(...)` binding the template
-- arguments; each launch argument is checked against params (count, tensor or number, dtype,
-- device, freed, integer range) before anything runs.
local ffi = require "ffi"
local native = require "tocha.ffi"
local device = require "tocha.device"
local tensor = require "tocha.tensor"
local errors = require "tocha.errors"
local C, check, raise = native.C, native.check, errors.raise

local M = {}
local Kernel = {}
Kernel.__index = Kernel
Kernel.__tostring = function(k) return "tocha.Kernel " .. k.entry_point_name end

local function string_field(spec, key, required)
  local v = spec[key]
  if v == nil and not required then return "" end
  if type(v) ~= "string" then
    raise(("%s: expected a string, got %s"):format(key, type(v)))
  end
  return v
end

local FIELDS = { source = true, name = true, template_args = true, params = true }

-- tocha.kernel{source=, name=, template_args=, params=}: a Kernel; nothing compiles yet. A field
-- it does not know is refused by name, not ignored (a misspelt or a not yet supported knob
-- would otherwise change nothing without a word).
function M.new(spec)
  if type(spec) ~= "table" then raise("expected a table {source=, name=, params=}") end
  for key in pairs(spec) do
    if not FIELDS[key] then
      raise(("%s: unknown field (expected source, name, template_args and params)"):format(errors.show(key)))
    end
  end
  local source = string_field(spec, "source", true)
  local name = string_field(spec, "name", true)
  local targs = string_field(spec, "template_args", false)
  local params = string_field(spec, "params", true)
  local out = ffi.new("tocha_kernel*[1]")
  check(C.tocha_kernel_new(source, name, targs, params, out))
  local k = M.wrap(ffi.gc(out[0], C.tocha_kernel_destroy))
  k.name = name
  k.kernel_source = source
  return k
end

-- A Kernel over a handle owned by C (owner keeps it alive), with the same fields as new().
function M.wrap(handle, owner)
  return setmetatable({
    handle = handle,
    owner = owner,
    entry_point_name = ffi.string(C.tocha_kernel_entry_point_name(handle)),
    entry_point_source = ffi.string(C.tocha_kernel_entry_point_source(handle)),
    source = ffi.string(C.tocha_kernel_source(handle)),
    params = ffi.string(C.tocha_kernel_params(handle)),
    nparams = C.tocha_kernel_param_count(handle),
    args = ffi.new("tocha_arg[?]", math.max(C.tocha_kernel_param_count(handle), 1)),
    grid = ffi.new("uint32_t[3]"),
    block = ffi.new("uint32_t[3]"),
  }, Kernel)
end

-- tocha's own kernel for op ("fill", "uniform", "normal", "cast", "compare") on dtype (cast:
-- from dtype to dtype2), as a Kernel whose handle the library owns. For compile checks.
function M.builtin(op, dtype_name, dtype2_name)
  if type(op) ~= "string" then raise("op: expected the name of a built-in kernel, got " .. type(op)) end
  local dtype = require "tocha.dtype"
  local a = dtype.id(dtype_name)
  local b = dtype.id(dtype2_name or dtype_name)
  local out = ffi.new("tocha_kernel*[1]")
  check(C.tocha_builtin_kernel_get(op, a, b, out))
  local k = M.wrap(out[0])
  k.name = op
  return k
end

-- A content hash of the full source (32 hex digits).
function Kernel:hash() return ffi.string(C.tocha_kernel_hash(self.handle)) end

-- Compiles for target ("sm_90", "sim"; default: the default device's) through the cache;
-- returns the binary's size in bytes. With no GPU, sm_XY targets still compile.
function Kernel:build(target)
  if target == nil then target = device.default().target end
  if type(target) ~= "string" then raise("target: expected a string like sm_90 or sim") end
  local size = ffi.new("uint64_t[1]")
  check(C.tocha_kernel_build(self.handle, target, size))
  return tonumber(size[0])
end

local function dims(value, out, what)
  if type(value) == "number" then value = { value } end
  if type(value) ~= "table" or #value < 1 or #value > 3 then
    raise(what .. ": expected a number or {x [, y [, z]]}")
  end
  for i = 1, 3 do
    local v = value[i] or 1
    if type(v) ~= "number" or v ~= math.floor(v) or v < 1 or v > 4294967295 then
      raise(("%s[%d]: expected a positive integer, got %s"):format(what, i, errors.show(v)))
    end
    out[i - 1] = v
  end
end

-- k:launch(grid, block, args...): on the device of the first tensor argument (or the default
-- device when there is none).
function Kernel:launch(grid, block, ...)
  dims(grid, self.grid, "grid")
  dims(block, self.block, "block")
  local n = select("#", ...)
  local args = n <= self.nparams and self.args or ffi.new("tocha_arg[?]", n)
  local dev
  for i = 1, n do
    local v = select(i, ...)
    local a = args[i - 1]
    if tensor.is_tensor(v) then
      a.kind, a.tensor = 0, v
      dev = dev or v.dev
    elseif type(v) == "number" then
      a.kind, a.tensor, a.f = 2, nil, v
    elseif ffi.istype("int64_t", v) or ffi.istype("uint64_t", v) then
      a.kind, a.tensor, a.i = 1, nil, v
    else
      raise(("argument %d: expected a tensor or a number, got %s"):format(i, type(v)))
    end
  end
  if not dev then dev = device.default().handle end
  check(C.tocha_kernel_launch(self.handle, dev, self.grid, self.block, args, n))
end

M.Kernel = Kernel
errors.name(M.new, "kernel")
errors.name(M.builtin, "builtin_kernel")
errors.methods(Kernel, "Kernel:", function(k) return getmetatable(k) == Kernel end)
return M
