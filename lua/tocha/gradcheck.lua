-- tocha.gradcheck: checks an op's backward against finite differences of its forward, in f64.
--
--   local ok, report = tocha.gradcheck(op, x [, {eps=1e-6, atol=1e-5, rtol=1e-3, max_checks=200, seed=0}])
--
-- op is anything with op:forward(x) -> y and op:backward(x, dy) -> dx (a kernel of tocha's, or
-- a tocha.nn module), made for f64 tensors. For a random dy, the analytic gradient dx is
-- compared, element by element, with the central difference of L(x) = sum(forward(x) * dy):
--   (L(x + eps e_i) - L(x - eps e_i)) / (2 eps)
-- over every element of x, or max_checks of them chosen at random. report holds the worst
-- absolute and relative errors and where they are.
local ffi = require "ffi"
local tocha_tensor = require "tocha.tensor"
local errors = require "tocha.errors"
local raise = errors.raise

local function dot(y, dy)
  local a, b = y:to_table(true), dy
  local s = 0
  for i = 1, #a do s = s + a[i] * b[i] end
  return s
end

return function(op, x, opts)
  opts = opts or {}
  if type(op) ~= "table" or type(op.forward) ~= "function" or type(op.backward) ~= "function" then
    raise("op: expected an object with forward and backward methods")
  end
  if not tocha_tensor.is_tensor(x) then raise("x: expected a tensor, got " .. type(x)) end
  if x:dtype() ~= "f64" then raise("x: expected an f64 tensor, got " .. x:dtype()) end
  if type(opts) ~= "table" then raise("options: expected a table, got " .. type(opts)) end
  local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
  local max_checks = opts.max_checks or 200
  -- A check that cannot fail is worse than none: every option must leave room to fail.
  for name, v in pairs({ eps = eps, atol = atol, rtol = rtol }) do
    if type(v) ~= "number" or v ~= v or v < 0 or v == math.huge then
      raise(("%s: expected a finite number >= 0, got %s"):format(name, errors.show(v)))
    end
  end
  if eps == 0 then raise("eps: expected a finite number > 0, got 0") end
  if type(max_checks) ~= "number" or max_checks < 1 or max_checks ~= math.floor(max_checks) then
    raise("max_checks: expected a positive integer, got " .. errors.show(max_checks))
  end

  local y = op:forward(x)
  local dy = tocha_tensor.randn(y:shape(), { dtype = "f64", device = x:device(), seed = opts.seed or 0 })
  local dy_values = dy:to_table(true)
  local dx = op:backward(x, dy)
  if not tocha_tensor.is_tensor(dx) then raise("op:backward: expected a tensor, got " .. type(dx)) end
  dx = dx:to_table(true)

  local values = x:to_table(true)
  local n = #values
  if #dx ~= n then raise(("op:backward: gave %d values for x's %d"):format(#dx, n)) end
  local indices = {}
  if n <= max_checks then
    for i = 1, n do indices[i] = i end
  else
    local state = (opts.seed or 0) * 2654435761 % 4294967296 + 1
    for k = 1, max_checks do
      state = (state * 1103515245 + 12345) % 2147483648
      indices[k] = state % n + 1
    end
  end

  local probe = x:clone()
  local buffer = ffi.new("double[?]", n, values)
  local report = { checked = #indices, max_abs = 0, max_rel = 0, worst = nil }
  local ok = true
  for _, i in ipairs(indices) do
    local saved = values[i]
    buffer[i - 1] = saved + eps
    probe:write(buffer, n * 8)
    local plus = dot(op:forward(probe), dy_values)
    buffer[i - 1] = saved - eps
    probe:write(buffer, n * 8)
    local minus = dot(op:forward(probe), dy_values)
    buffer[i - 1] = saved
    local numeric = (plus - minus) / (2 * eps)
    local err = math.abs(numeric - dx[i])
    local rel = err / math.max(math.abs(numeric), 1e-300)
    -- NaN anywhere fails (every comparison with NaN is false, so each test is written to pass
    -- only when it holds).
    if err ~= err or err > report.max_abs then report.max_abs, report.worst = err, i end
    if err ~= err or err > atol then report.max_rel = err ~= err and err or math.max(report.max_rel, rel) end
    local within = err <= atol + rtol * math.abs(numeric)
    if not within then ok = false end
  end
  return ok, report
end
