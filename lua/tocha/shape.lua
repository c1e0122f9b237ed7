-- tocha.shape: shapes as Lua lists of sizes, the facts every module shares about them.
local errors = require "tocha.errors"
local raise = errors.raise

local M = {}

-- The product of shape[first..last] (all of it by default).
function M.numel(shape, first, last)
  local n = 1
  for i = first or 1, last or #shape do n = n * shape[i] end
  return n
end

-- The row-major strides of shape, in elements (a size 0 counted as 1, C's rule).
function M.dense_strides(shape)
  local s, stride = {}, 1
  for i = #shape, 1, -1 do s[i], stride = stride, stride * math.max(shape[i], 1) end
  return s
end

-- A shape as messages show it: "[2, 3, 4]" (an entry that is not a number as errors.show puts
-- it, so that a message about a bad shape can always be made).
function M.text(shape)
  local parts = {}
  for i, s in ipairs(shape) do parts[i] = type(s) == "number" and tostring(s) or errors.show(s) end
  return "[" .. table.concat(parts, ", ") .. "]"
end

-- Whether two shapes have the same sizes.
function M.same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] then return false end
  end
  return true
end

-- Raises unless shape is a list of min to max positive integer sizes (default 1 to 8).
function M.check(shape, what, min, max)
  min, max = min or 1, max or 8
  if type(shape) ~= "table" or #shape < min or #shape > max then
    raise(("%s: expected a shape of %d to %d sizes"):format(what, min, max))
  end
  for i, s in ipairs(shape) do
    if type(s) ~= "number" or s ~= math.floor(s) or s < 1 then
      raise(("%s[%d]: expected a positive size, got %s"):format(what, i, errors.show(s)))
    end
  end
  return shape
end

return M
