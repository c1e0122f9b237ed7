-- tocha.ffi: the library handle, the LuaJIT FFI declarations of host/include/tocha.h, and the
-- one place where a C status becomes a Lua error.
--
-- The library is found, in order: $TOCHA_LIBRARY; the running executable (tocha links
-- libtocha, so its symbols are in ffi.C); the path CMake recorded in tocha.location. The
-- declarations are the library's own (tocha_declarations(): its header, preprocessed when it
-- was built), so that they cannot drift from the library that is loaded.
local ffi = require "ffi"
local errors = require "tocha.errors"

local M = {}

ffi.cdef "const char *tocha_declarations(void);"

local function load_library()
  local explicit = os.getenv("TOCHA_LIBRARY")
  if explicit and explicit ~= "" then return ffi.load(explicit) end
  if pcall(function() return ffi.C.tocha_declarations end) then return ffi.C end
  local ok, location = pcall(require, "tocha.location")
  if not ok then
    error("tocha: cannot find libtocha: set TOCHA_LIBRARY, or run from a built or installed tree", 0)
  end
  return ffi.load(location.library)
end

M.C = load_library()
local C = M.C

-- Declared once per Lua state (a second cdef of the same structs is an error).
if not pcall(ffi.typeof, "struct tocha_tensor") then
  local ok, missing = pcall(function() return C.tocha_declarations end)
  if not ok then error("tocha: the libtocha loaded has no tocha_declarations: " .. tostring(missing), 0) end
  ffi.cdef(ffi.string(C.tocha_declarations()))
end


M.status = {
  ok = C.TOCHA_OK, argument = C.TOCHA_E_ARGUMENT, out_of_memory = C.TOCHA_E_OUT_OF_MEMORY,
  unavailable = C.TOCHA_E_UNAVAILABLE, compile = C.TOCHA_E_COMPILE, driver = C.TOCHA_E_DRIVER,
  io = C.TOCHA_E_IO, freed = C.TOCHA_E_FREED, internal = C.TOCHA_E_INTERNAL,
}

-- The C library's last message for a failed call.
function M.message()
  return ffi.string(M.C.tocha_last_error())
end

-- Raises the C library's message for a failed call (status not 0) as misuse of the public
-- function the user called (tocha.errors.raise).
function M.check(status)
  if status ~= 0 then errors.raise(M.message()) end
end

return M
