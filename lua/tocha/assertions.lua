-- tocha.assertions: luassert assertions on tensors, for busted specs.
--
--   require "tocha.assertions"
--   assert.tensor.equal(a, b)                           -- dtype, shape and every element
--   assert.tensor.near(a, b, { rtol = 1e-5, atol = 1e-8 })  -- |a - b| <= atol + rtol * |b| each
--   assert.is_not.tensor.equal(a, b)
--
-- Both compare on the host, element by element (NaN equals NaN; near needs both NaN or both
-- finite and close, infinities equal), so that a spec's check does not run through the kernels
-- it checks. A failure names the first mismatching index (1-based, as Lua counts), both values,
-- how many elements differ and the largest error.
local luassert = require "luassert"
local say = require "say"
local tensor = require "tocha.tensor"

local M = {}

local function index_text(k, shape)
  local index, rest = {}, k
  for d = #shape, 1, -1 do
    index[d] = rest % shape[d] + 1
    rest = math.floor(rest / shape[d])
  end
  return "[" .. table.concat(index, ", ") .. "]"
end

local function describe_tensor(t)
  if not tensor.is_tensor(t) then return type(t) end
  return t:summary()
end

-- nil and the report when a and b match under close(x, y); else false and why.
local function compare(a, b, close)
  if not tensor.is_tensor(a) or not tensor.is_tensor(b) then
    return false, ("expected two tensors, got %s and %s"):format(describe_tensor(a), describe_tensor(b))
  end
  if a.freed ~= 0 or b.freed ~= 0 then return false, "a tensor was freed" end
  if a:dtype() ~= b:dtype() then return false, ("dtypes differ: %s and %s"):format(a:dtype(), b:dtype()) end
  local sa, sb = a:shape(), b:shape()
  if table.concat(sa, "x") ~= table.concat(sb, "x") then
    return false, ("shapes differ: [%s] and [%s]"):format(table.concat(sa, ", "), table.concat(sb, ", "))
  end
  local x, y = a:to_table(true), b:to_table(true)
  local first, bad, worst, worst_at = nil, 0, 0, nil
  for k = 1, #x do
    if not close(x[k], y[k]) then
      bad = bad + 1
      first = first or k
    end
    local err = math.abs(x[k] - y[k])
    if err == err and err > worst then worst, worst_at = err, k end
  end
  if bad == 0 then return true end
  local why = ("%d of %d elements differ; the first at %s: %s against %s"):format(bad, #x,
    index_text(first - 1, sa), tostring(x[first]), tostring(y[first]))
  if worst_at then why = why .. ("; the largest error %g at %s"):format(worst, index_text(worst_at - 1, sa)) end
  return false, why
end

local function same(x, y) return x == y or (x ~= x and y ~= y) end

local function register(name, check)
  local key = "assertion.tensor_" .. name
  say:set(key .. ".positive", "Expected the tensors to be " .. name)
  say:set(key .. ".negative", "Expected the tensors not to be " .. name)
  luassert:register("assertion", "tensor_" .. name, function(state, arguments)
    local ok, why = check(arguments)
    local summaries = { describe_tensor(arguments[1]), describe_tensor(arguments[2]) }
    state.failure_message = why or (summaries[1] .. " and " .. summaries[2] .. " match")
    arguments[1], arguments[2] = summaries[1], summaries[2] -- not the whole tensors in the message
    return ok
  end, key .. ".positive", key .. ".negative")
end

register("equal", function(arguments) return compare(arguments[1], arguments[2], same) end)

register("near", function(arguments)
  local opts = arguments[3] or {}
  if type(opts) ~= "table" then return false, "options: expected a table {rtol=, atol=}, got " .. type(opts) end
  local rtol, atol = opts.rtol or 1e-5, opts.atol or 1e-8
  if type(rtol) ~= "number" or type(atol) ~= "number" or rtol ~= rtol or atol ~= atol or rtol < 0 or atol < 0 then
    return false, "rtol, atol: expected numbers >= 0"
  end
  local ok, why = compare(arguments[1], arguments[2], function(x, y)
    if x ~= x or y ~= y then return x ~= x and y ~= y end
    if x == y then return true end -- infinities of one sign
    return math.abs(x - y) <= atol + rtol * math.abs(y)
  end)
  if not ok and why and why:find("elements differ") then why = why .. (" (rtol %g, atol %g)"):format(rtol, atol) end
  return ok, why
end)

return M
