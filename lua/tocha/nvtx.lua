-- tocha.nvtx: NVTX ranges, which nsys and ncu show by name on their timelines and use to pick
-- what to profile (`ncu --nvtx --nvtx-include "name/"`). Without a profiler they cost next to
-- nothing. tocha.bench and the sweep harness put one around each timed region.
--
--   tocha.nvtx.range("blur 3x3", function() k:launch(...) end)   -- fn's results, the range closed
--   tocha.nvtx.push("epoch 1") ... tocha.nvtx.pop()
local native = require "tocha.ffi"
local errors = require "tocha.errors"
local C, check, raise = native.C, native.check, errors.raise

local M = {}

-- Opens a range named `name` on this thread; returns how many are open.
function M.push(name)
  if type(name) ~= "string" then raise("name: expected a string, got " .. type(name)) end
  local depth = C.tocha_nvtx_push(name)
  if depth < 0 then check(depth) end
  return depth
end

-- Closes this thread's innermost range; returns how many are still open. Raises when none is.
function M.pop()
  local depth = C.tocha_nvtx_pop()
  if depth < 0 then check(depth) end
  return depth
end

-- How many ranges are open on this thread.
function M.depth() return C.tocha_nvtx_depth() end

local function close(ok, ...)
  C.tocha_nvtx_pop()
  if not ok then error((...), 0) end
  return ...
end

-- Runs fn(...) inside a range named `name`; returns fn's results. The range is closed when fn
-- raises too, and the error goes on as it was.
function M.range(name, fn, ...)
  if type(fn) ~= "function" then raise("fn: expected a function, got " .. type(fn)) end
  M.push(name)
  return close(pcall(fn, ...))
end

errors.register(M, "nvtx.")
return M
