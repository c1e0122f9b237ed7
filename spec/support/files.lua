-- Helpers of the file-format specs (safetensors_spec.lua, npy_spec.lua): whole files as strings,
-- and a tensor's raw bytes, read on the host without tocha's file code.
local ffi = require "ffi"

local M = {}

function M.slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

function M.spit(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- t's bytes as a string, as its dtype stores them.
function M.bytes_of(t)
  local buf = ffi.new("uint8_t[?]", t:nbytes())
  t:read(buf)
  return ffi.string(buf, t:nbytes())
end

return M
