-- tocha.kernel: kernels from CUDA C source, built at run time and launched with checked
-- arguments.
--
--   local k = tocha.kernel {
--     source = src,                      -- CUDA C text holding a __device__ function (template)
--     name = "saxpy",                    -- that function
--     template_args = "float",           -- optional: its template arguments
--     params = "f32* x, f32* y, i64 n, f32 a",
--     options = { "-DUNROLL=4" },        -- optional: NVRTC flags (-D and -U also on the simulator)
--     launch_bounds = { 256 },           -- optional: __launch_bounds__(256) on the entry point
--     shared = 64 * 1024,                -- optional: dynamic shared memory of every launch (bytes)
--     file = "saxpy.cu",                 -- optional: the source's name in compile errors
--   }
--   k:launch(grid, block, x, y, n, a)   -- grid, block: a number or {x, y, z}
--   k:launch({ grid = g, block = b, shared = bytes }, x, y, n, a)  -- with dynamic shared memory
--   k:info(), k:occupancy(block), k:ptx(), k:cubin(), k:sass()  -- what the compiled code uses
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

local FIELDS = { source = true, name = true, template_args = true, params = true, options = true,
  launch_bounds = true, shared = true, file = true }

-- A number of bytes of dynamic shared memory (what) or raises.
local function shared_bytes(v, what)
  if type(v) ~= "number" or v ~= math.floor(v) or v < 0 or v > 4294967295 then
    raise(what .. ": expected a number of bytes (0 to 2^32 - 1), got " .. errors.show(v))
  end
  return v
end
M.shared_bytes = shared_bytes

-- The options list as C strings (kept alive by the returned table), or nil for none.
local function options_field(spec)
  local options = spec.options
  if options == nil then return nil end
  if type(options) ~= "table" then raise("options: expected a list of strings, got " .. type(options)) end
  local n = #options
  for key in pairs(options) do
    if type(key) ~= "number" or key < 1 or key > n or key ~= math.floor(key) then
      raise("options: expected a list of strings, got the key " .. errors.show(key))
    end
  end
  local array = ffi.new("const char*[?]", math.max(n, 1))
  for i = 1, n do
    if type(options[i]) ~= "string" then
      raise(("options[%d]: expected a string, got %s"):format(i, type(options[i])))
    end
    array[i - 1] = options[i]
  end
  local copy = {}
  for i = 1, n do copy[i] = options[i] end
  return array, n, copy
end

-- {max_threads [, min_blocks]} as two integers (0: none).
local function bounds_field(spec)
  local b = spec.launch_bounds
  if b == nil then return 0, 0 end
  if type(b) ~= "table" or #b < 1 or #b > 2 or b[3] ~= nil then
    raise("launch_bounds: expected {max_threads [, min_blocks]}")
  end
  for i, what in ipairs({ "max_threads", "min_blocks" }) do
    local v = b[i]
    if v ~= nil and (type(v) ~= "number" or v ~= math.floor(v) or v < 1) then
      raise(("launch_bounds: %s: expected a positive integer, got %s"):format(what, errors.show(v)))
    end
  end
  return math.min(b[1], 2 ^ 31 - 1), math.min(b[2] or 0, 2 ^ 31 - 1)
end

-- tocha.kernel{source=, name=, template_args=, params= [, options=, launch_bounds=, shared=, file=]}:
-- a Kernel; nothing compiles yet. options: NVRTC flags (docs/api.md lists those taken); launch_bounds =
-- {max_threads [, min_blocks]} on the entry point; shared: the bytes of dynamic shared memory each
-- launch gets unless it gives its own (default 0: a kernel whose tiles need more than the static
-- 48 KiB says so once, and every launch path, a plan's or an op's too, honours it); file: the
-- name compile errors give the source (default "<name>.cu"). A field it does not know is refused by name,
-- not ignored (a misspelt knob would otherwise change nothing without a word).
function M.new(spec)
  if type(spec) ~= "table" then raise("expected a table {source=, name=, params=}") end
  for key in pairs(spec) do
    if not FIELDS[key] then
      raise(("%s: unknown field (expected source, name, template_args, params, options, launch_bounds, shared and file)")
        :format(errors.show(key)))
    end
  end
  local source = string_field(spec, "source", true)
  local name = string_field(spec, "name", true)
  local targs = string_field(spec, "template_args", false)
  local params = string_field(spec, "params", true)
  local file = spec.file ~= nil and string_field(spec, "file", true) or nil
  local options, n_options, given = options_field(spec)
  local max_threads, min_blocks = bounds_field(spec)
  local shared = spec.shared ~= nil and shared_bytes(spec.shared, "shared") or 0
  local config = ffi.new("tocha_kernel_config", { options = options, n_options = n_options or 0,
    max_threads = max_threads, min_blocks = min_blocks, file = file })
  local out = ffi.new("tocha_kernel*[1]")
  check(C.tocha_kernel_new_config(source, name, targs, params, config, out))
  local k = M.wrap(ffi.gc(out[0], C.tocha_kernel_destroy))
  k.name = name
  k.kernel_source = source
  k.options = given or {}
  k.shared = shared
  if max_threads > 0 then k.launch_bounds = { max_threads, min_blocks > 0 and min_blocks or nil } end
  return k
end

-- A Kernel over a handle owned by C (owner keeps it alive), with the same fields as new() (shared
-- left nil: no dynamic shared memory of its own).
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

local LAUNCH_FIELDS = { grid = true, block = true, shared = true }

local function launch(self, grid, block, shared, ...)
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
  check(C.tocha_kernel_launch(self.handle, dev, self.grid, self.block, shared, args, n))
end

-- k:launch(grid, block, args...) or k:launch({grid =, block = [, shared = bytes]}, args...): on
-- the device of the first tensor argument (or the default device when there is none), with
-- shared bytes of dynamic shared memory per block (default: the kernel's own, 0 unless new() gave
-- one).
function Kernel:launch(grid, block, ...)
  -- A table of named fields, not a list of sizes: the named form.
  if type(grid) == "table" and grid[1] == nil and next(grid) ~= nil then
    local how = grid
    for key in pairs(how) do
      if not LAUNCH_FIELDS[key] then
        raise(("%s: unknown field (expected grid, block and shared)"):format(errors.show(key)))
      end
    end
    if how.grid == nil then raise("grid: expected a number or {x [, y [, z]]}, got nil") end
    if how.block == nil then raise("block: expected a number or {x [, y [, z]]}, got nil") end
    local shared = how.shared ~= nil and shared_bytes(how.shared, "shared") or self.shared or 0
    launch(self, how.grid, how.block, shared, block, ...)
  else
    launch(self, grid, block, self.shared or 0, ...)
  end
end

local function target_arg(target)
  if target ~= nil and type(target) ~= "string" then
    raise("target: expected a string like sm_90, got " .. type(target))
  end
  return target
end

-- The device whose driver may answer for target: the default device when it is a GPU.
local function info_device() return device.default().handle end

-- k:info([target]): what the compiled code uses, for target (sm_XY; default: the default
-- device's, or on the simulator its compile target, TOCHA_ARCH or sm_90) as a table: registers
-- (per thread), spill_stores, spill_loads, shared (static), local (stack frame), constant (all
-- bytes), max_threads (per block), target and source ("driver" on a GPU of the target, "ptxas"
-- otherwise; spills always ptxas's). One NVRTC compile the first time, kept with the kernel.
function Kernel:info(target)
  local out = ffi.new("tocha_kernel_info")
  check(C.tocha_kernel_info_get(self.handle, info_device(), target_arg(target), out))
  return {
    registers = out.registers, spill_stores = out.spill_stores >= 0 and tonumber(out.spill_stores) or nil,
    spill_loads = out.spill_loads >= 0 and tonumber(out.spill_loads) or nil, shared = tonumber(out.shared), ["local"] = tonumber(out["local"]),
    constant = tonumber(out.constant), max_threads = out.max_threads, target = ffi.string(out.target),
    source = out.from_device ~= 0 and "driver" or "ptxas",
  }
end

-- k:occupancy(block [, shared [, target]]): blocks of `block` threads (a number or {x, y, z}) with
-- shared bytes of dynamic shared memory (default: the kernel's own) resident on one SM, and the
-- fraction of the SM's warps they fill: the driver's on a GPU of the target, else from the
-- target's published limits.
function Kernel:occupancy(block, shared, target)
  local b = ffi.new("uint32_t[3]")
  dims(block, b, "block")
  shared = shared ~= nil and shared_bytes(shared, "shared") or self.shared or 0
  local threads = b[0] * b[1] * b[2]
  if threads > 1024 then raise(("block: %d threads per block, at most 1024"):format(threads)) end
  local blocks, fraction = ffi.new("int32_t[1]"), ffi.new("double[1]")
  check(C.tocha_kernel_occupancy(self.handle, info_device(), target_arg(target), threads, shared, blocks, fraction))
  return blocks[0], fraction[0]
end

-- k:ptx([target]): the PTX text for target (default as for info).
function Kernel:ptx(target)
  local out = ffi.new("const char*[1]")
  target = target_arg(target)
  if target == nil then target = self:info().target end
  check(C.tocha_kernel_ptx(self.handle, target, out))
  return ffi.string(out[0])
end

-- k:cubin([target]): the cubin for target (default as for info) as a Lua string of bytes,
-- through the kernel cache.
function Kernel:cubin(target)
  target = target_arg(target)
  if target == nil then target = self:info().target end
  if target == "sim" or not target:match("^sm_%d+$") then
    raise("target: expected sm_XY (e.g. sm_90), got " .. errors.show(target))
  end
  local data, size = ffi.new("const void*[1]"), ffi.new("uint64_t[1]")
  check(C.tocha_kernel_binary(self.handle, target, data, size))
  return ffi.string(data[0], size[0])
end

-- The first of the CUDA toolkit's disassemblers found (cuobjdump, else nvdisasm) in CUDA_HOME,
-- CUDA_PATH or /usr/local/cuda's bin: its path and kind, or nil.
local function disassembler()
  local roots = { os.getenv("CUDA_HOME"), os.getenv("CUDA_PATH"), "/usr/local/cuda" }
  for _, tool in ipairs({ "cuobjdump", "nvdisasm" }) do
    for _, root in pairs(roots) do
      local path = root .. "/bin/" .. tool
      local f = io.open(path, "rb")
      if f then
        f:close()
        return path, tool
      end
    end
  end
end

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- k:sass([target]): the SASS text of the cubin for target, from the toolkit's cuobjdump or
-- nvdisasm; nil, err when neither is installed or it fails.
function Kernel:sass(target)
  local cubin = self:cubin(target)
  local tool, kind = disassembler()
  if not tool then
    return nil, "sass: neither cuobjdump nor nvdisasm was found in CUDA_HOME, CUDA_PATH or /usr/local/cuda (bin)"
  end
  local path = os.tmpname()
  local f = io.open(path, "wb")
  if not f then return nil, "sass: cannot write a temporary file " .. path end
  f:write(cubin)
  f:close()
  local command = shell_quote(tool) .. (kind == "cuobjdump" and " -sass " or " ") .. shell_quote(path) .. " 2>&1"
  local pipe = io.popen(command)
  local text = pipe and pipe:read("*a") or ""
  local ok = pipe and pipe:close()
  os.remove(path)
  if not ok or text == "" then return nil, "sass: " .. kind .. " failed: " .. text end
  return text
end

M.Kernel = Kernel
errors.name(M.new, "kernel")
errors.name(M.builtin, "builtin_kernel")
errors.methods(Kernel, "Kernel:", function(k) return getmetatable(k) == Kernel end)
return M
