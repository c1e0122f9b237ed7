-- Shared assertions for the specs.
local assert = require "luassert"

local M = {}

-- fn must raise exactly `message`, positioned at the caller's line: the position before the
-- message names a spec file (where fn's call into tocha stands), never tocha's own files.
function M.fails_with(message, fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error: " .. message)
  err = tostring(err)
  local position, text = err:match("^([^:]*:%d+): (.*)$")
  assert.are.equal(message, text or err)
  assert(position and position:find("_spec%.lua:%d+$"),
    ("error positioned at %s, not at the caller's line: %s"):format(tostring(position), err))
end

-- fn(...) must raise an error whose text contains `pattern` (plain text, not a Lua pattern).
function M.fails(pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error containing: " .. pattern)
  assert(tostring(err):find(pattern, 1, true), ("expected %q in %q"):format(pattern, tostring(err)))
end

return M
