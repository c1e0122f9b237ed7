-- tocha.tensor_create: tensors made from a rule rather than from data: evenly spaced values
-- (arange, range, linspace), the identity (eye), and a tensor shaped like another (zeros_like
-- and its kin). Their values come from kernels/sequence.cu and tocha's fill and random kernels
-- on the tensor's device.
--
--   tocha.arange(5)               -- i64 {0, 1, 2, 3, 4}: PyTorch's, the stop left out
--   tocha.arange(0, 1, 0.25)      -- f32 {0, 0.25, 0.5, 0.75}
--   tocha.range(1, 5)             -- i64 {1, 2, 3, 4, 5}: Torch7's, the stop kept
--   tocha.linspace(0, 1, 5)       -- f32 {0, 0.25, 0.5, 0.75, 1}
--   tocha.eye(3)                  -- f32 3 x 3 identity
--   tocha.zeros_like(x)           -- x's shape, dtype and device
local ffi = require "ffi"
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local errors = require "tocha.errors"
local raise, show = errors.raise, errors.show

local M = {}

local BLOCK = 256

-- Loaded at the first call: tocha.tensor requires this module's users while it loads.
local tensor, kernel, op
local function modules()
  if tensor then return end
  tensor, kernel, op = require "tocha.tensor", require "tocha.kernel", require "tocha.op"
end

local function is_tensor(x) return ffi.istype("tocha_tensor", x) end

local function is_integral(v) return v == math.floor(v) and v > -math.huge and v < math.huge end

local function finite_number(v, what)
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
    raise(("%s: expected a finite number, got %s"):format(what, show(v)))
  end
  return v
end

-- dtype and device from an options table: opts.dtype or `default_dtype`, opts.device or the
-- default device.
local function options(opts, default_dtype, default_device)
  if type(opts) ~= "nil" and type(opts) ~= "table" then -- (a NULL pointer equals nil)
    raise("options: expected a table {dtype=, device=}, got " .. type(opts))
  end
  opts = opts or {}
  local name = opts.dtype or default_dtype
  if type(name) ~= "string" or not pcall(dtype.id, name) then
    raise(("dtype: expected one of %s, got %s"):format(table.concat(dtype.names, ", "), show(name)))
  end
  local dev = opts.device ~= nil and device.get(opts.device) or default_device or device.get(nil)
  return name, dev
end

-- The sequence kernel `name` for dtype dt, built once per pair.
local kernels = {}
local PARAMS = {
  tocha_arange = "%s* y, i64 n, f64 start, f64 step, i64 istart, i64 istep",
  tocha_linspace = "%s* y, i64 n, f64 start, f64 stop",
  tocha_eye = "%s* y, i64 rows, i64 cols",
}
local function sequence_kernel(name, dt)
  local key = name .. "/" .. dt
  local k = kernels[key]
  if k then return k end
  k = kernel.new { source = op.source("sequence.cu"), name = name, template_args = dtype.ctype(dt),
    params = PARAMS[name]:format(dt) }
  kernels[key] = k
  return k
end

local function launch(name, y, ...)
  local n = y:numel()
  if n == 0 then return y end
  op.launch_packed(sequence_kernel(name, y:dtype()), device.wrap(y.dev), op.element_grid(n, BLOCK),
    { BLOCK, 1, 1 }, { y.data, ... })
  return y
end

-- The values an integer dtype holds: from the first, up to the second left out.
local INTEGER_RANGE = { u8 = { 0, 256 }, i32 = { -2 ^ 31, 2 ^ 31 }, i64 = { -2 ^ 63, 2 ^ 63 } }

-- The count of leading numbers in (a [, b [, c]] [, opts]), then the numbers and the options.
local function numbers_and_options(...)
  local n = select("#", ...)
  if n == 0 then return 0 end
  local last = select(n, ...)
  local count = type(last) ~= "number" and n - 1 or n
  local a, b, c = ...
  local opts = count < n and last or nil
  if count == 1 then return 1, a, nil, nil, opts end
  if count == 2 then return 2, a, b, nil, opts end
  return count, a, b, c, opts
end

-- Values start, start + step, ... up to `stop` (left out, or kept where `inclusive`), as a 1-D
-- tensor: i64 when start, stop and step are integers, else f32, unless opts.dtype.
local function evenly_spaced(inclusive, count, a, b, c, opts)
  local start, stop, step
  if count == 1 then start, stop, step = 0, a, 1
  elseif count == 2 then start, stop, step = a, b, 1
  elseif count == 3 then start, stop, step = a, b, c
  else raise(("arguments: expected (stop), (start, stop) or (start, stop, step), then options; got %d numbers"):format(count)) end
  start = finite_number(start, "start")
  stop = finite_number(stop, "stop")
  step = finite_number(step, "step")
  if step == 0 then raise("step: must not be zero") end
  if (stop - start) * step < 0 then
    raise(("step: %s goes away from stop %s (start %s)"):format(show(step), show(stop), show(start)))
  end
  local integral = is_integral(start) and is_integral(stop) and is_integral(step)
  local name, dev = options(opts, integral and "i64" or "f32")
  local span = (stop - start) / step
  local n
  -- The count PyTorch's arange and Torch7's range take, from the same f64 quotient.
  if inclusive then n = math.floor(span) + 1 else n = math.ceil(span) end
  if n < 0 then n = 0 end
  if n > 2 ^ 53 then raise(("stop: %s values are too many"):format(show(n))) end
  local istart, istep = 0, 0
  if dtype.is_integer(name) then
    if not (is_integral(start) and is_integral(step)) then
      raise(("dtype: %s needs whole start and step, got start %s and step %s"):format(name, show(start), show(step)))
    end
    if math.abs(step) >= 2 ^ 63 then raise(("step: %s does not fit i64"):format(show(step))) end
    local range = INTEGER_RANGE[name]
    local last = start + (n - 1) * step
    if n > 0 and (math.min(start, last) < range[1] or math.max(start, last) >= range[2]) then
      raise(("stop: the values %s to %s do not fit %s"):format(show(start), show(last), name))
    end
    istart, istep = start, step
  end
  modules()
  local y = tensor.alloc({ n }, name, dev)
  return launch("tocha_arange", y, n, start, step, istart, istep)
end

-- tocha.arange([start,] stop [, step] [, opts]): PyTorch's torch.arange (stop left out).
function M.arange(...)
  local r = evenly_spaced(false, numbers_and_options(...))
  return r
end

-- tocha.range(start, stop [, step] [, opts]): Torch7's torch.range (stop kept where reached).
function M.range(...)
  local count = numbers_and_options(...)
  if count == 1 then raise("arguments: expected (start, stop) or (start, stop, step): Torch7's range has no one-number form") end
  local r = evenly_spaced(true, numbers_and_options(...))
  return r
end

-- tocha.linspace(start, stop, steps [, opts]): `steps` values from start to stop, both kept.
function M.linspace(start, stop, steps, opts)
  start = finite_number(start, "start")
  stop = finite_number(stop, "stop")
  if type(steps) ~= "number" or not is_integral(steps) or steps < 0 or steps > 2 ^ 53 then
    raise("steps: expected a whole number >= 0, got " .. show(steps))
  end
  local name, dev = options(opts, "f32")
  modules()
  local y = tensor.alloc({ steps }, name, dev)
  return launch("tocha_linspace", y, steps, start, stop)
end

-- tocha.eye(n [, m] [, opts]): n x m (m = n by default), 1 on the diagonal.
function M.eye(n, m, opts)
  if type(m) == "table" and type(opts) == "nil" then m, opts = nil, m end
  if m == nil then m = n end
  for _, arg in ipairs({ { "n", n }, { "m", m } }) do
    local v = arg[2]
    if type(v) ~= "number" or not is_integral(v) or v < 0 or v > 2 ^ 53 then
      raise(("%s: expected a whole number >= 0, got %s"):format(arg[1], show(v)))
    end
  end
  local name, dev = options(opts, "f32")
  modules()
  local y = tensor.alloc({ n, m }, name, dev)
  return launch("tocha_eye", y, n, m)
end

-- ---- shaped like another tensor ----

local function like(x, opts)
  if not is_tensor(x) then raise(("input: expected a tensor, got %s"):format(type(x))) end
  if x.freed ~= 0 then raise("input: tensor was freed") end
  local name, dev = options(opts, dtype.name(x.elem_type), device.wrap(x.dev))
  modules()
  local opts2 = { dtype = name, device = dev.name }
  if type(opts) == "table" then for k, v in pairs(opts) do if opts2[k] == nil then opts2[k] = v end end end
  return x:shape(), opts2
end

-- tocha.empty_like(x [, opts]), zeros_like, ones_like, full_like(x, value), rand_like, randn_like:
-- x's shape, and x's dtype and device unless opts names others (rand's and randn's options too).
function M.empty_like(x, opts) local shape, o = like(x, opts) return (tensor.empty(shape, o)) end
function M.zeros_like(x, opts) local shape, o = like(x, opts) return (tensor.zeros(shape, o)) end
function M.ones_like(x, opts) local shape, o = like(x, opts) return (tensor.ones(shape, o)) end
function M.full_like(x, value, opts) local shape, o = like(x, opts) return (tensor.full(shape, value, o)) end
function M.rand_like(x, opts) local shape, o = like(x, opts) return (tensor.rand(shape, o)) end
function M.randn_like(x, opts) local shape, o = like(x, opts) return (tensor.randn(shape, o)) end

errors.register(M)
return M
