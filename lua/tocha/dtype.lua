-- tocha.dtype: element types by name, their sizes and host representations.
local ffi = require "ffi"
local native = require "tocha.ffi"
local errors = require "tocha.errors"
local C = native.C

local M = {}

M.names = { "f32", "f64", "f16", "bf16", "u8", "i32", "i64" }

-- C type used for host buffers of each dtype (16-bit floats travel as raw bits).
local host_ctype = {
  f32 = "float", f64 = "double", f16 = "uint16_t", bf16 = "uint16_t",
  u8 = "uint8_t", i32 = "int32_t", i64 = "int64_t",
}

local ids, by_id = {}, {}
for _, name in ipairs(M.names) do
  local out = ffi.new("int[1]")
  assert(C.tocha_dtype_from_name(name, out) == 0)
  ids[name] = out[0]
  by_id[out[0]] = name
end

local integer = { u8 = true, i32 = true, i64 = true }
M.is_integer = function(name) return integer[name] == true end
M.is_float = function(name) return ids[name] ~= nil and not integer[name] end
-- Whether name is a dtype's name.
M.known = function(name) return ids[name] ~= nil end

-- The dtype id for name; raises "dtype: ..." (tocha.errors.raise) for anything else.
function M.id(name)
  local id = ids[name]
  if id then return id end
  if type(name) ~= "string" then
    errors.raise(("dtype: expected a dtype name (f32, f64, f16, bf16, u8, i32, i64), got %s"):format(type(name)))
  end
  errors.raise(("dtype: unknown dtype '%s' (expected f32, f64, f16, bf16, u8, i32 or i64)"):format(name))
end

function M.name(id) return by_id[tonumber(id)] end
function M.size(name) return C.tocha_dtype_size(ids[name]) end
local size_by_id = {}
for _, name in ipairs(M.names) do size_by_id[ids[name]] = M.size(name) end
-- The element size of a dtype id (a number or an int32 cdata).
function M.size_of_id(id) return size_by_id[tonumber(id)] end
function M.host_ctype(name) return host_ctype[name] end
-- The CUDA C type of a dtype's elements in a kernel ("float", "__half", ...), as dtype.c spells it.
function M.ctype(name) return ffi.string(C.tocha_dtype_ctype(M.id(name))) end

-- Decodes one IEEE half (raw 16 bits) to a Lua number.
local function half_to_number(bits)
  local sign = bits >= 0x8000 and -1 or 1
  local exp = math.floor(bits / 1024) % 32
  local frac = bits % 1024
  if exp == 0 then return sign * frac * 2 ^ -24 end
  if exp == 31 then return frac == 0 and sign * math.huge or 0 / 0 end
  return sign * (1 + frac / 1024) * 2 ^ (exp - 15)
end

-- Decodes one bfloat16 (raw 16 bits): the top half of an f32.
local bf16_box = ffi.new("union { uint32_t u; float f; }")
local function bf16_to_number(bits)
  bf16_box.u = bits * 65536
  return bf16_box.f
end

-- A Lua number from element i of a host buffer of dtype name.
function M.decode(name, buffer, i)
  local v = buffer[i]
  if name == "f16" then return half_to_number(v) end
  if name == "bf16" then return bf16_to_number(v) end
  return tonumber(v)
end

return M
