-- tocha.loss: the losses of training, each giving the loss and its gradient with respect to the
-- input in one call, ready for a model's backward:
--
--   local out, cache = m:forward_train({ x })
--   local loss, dlogits = tocha.loss.cross_entropy(out[1], labels)     -- labels: i64, 1-based
--   m:backward({ dlogits }, cache)
--
-- Options (a table, each optional): reduction "mean" (default), "sum" or "none" (the loss of
-- each row or element; the gradient then takes grad_output, the upstream gradient of that
-- loss, ones by default); cross_entropy and nll also ignore_index (default -100: rows with that
-- target count for nothing) and label_smoothing (0 to 1). The loss has the input's dtype, shape
-- {1} when reduced; halves compute in f32.
--
-- cross_entropy and nll run kernels/class_loss.cu (a warp a row of C classes, input [N, C]);
-- mse, l1 and bce_with_logits are tensor math (PyTorch's formulas: l1's gradient is 0 where
-- input equals target; bce_with_logits uses max(x, 0) - x y + log(1 + exp(-|x|)), stable for
-- large |x|).
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local tensor = require "tocha.tensor"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local math_ops = require "tocha.tensor_math"
local raise = errors.raise

local M = {}

local BLOCK = 256

local function check_options(opts, known, owner)
  opts = op.options(opts, known, owner)
  local r = opts.reduction
  if r ~= nil and r ~= "mean" and r ~= "sum" and r ~= "none" then
    raise(("reduction: expected \"mean\", \"sum\" or \"none\", got %s"):format(errors.show(r)))
  end
  return opts
end

local function float_input(x, what)
  op.live_tensor(x, what)
  local dt = dtype.name(x.elem_type)
  if not dtype.is_float(dt) then raise(("%s: expected a float tensor, got %s"):format(what, dt)) end
  return dt
end

-- grad_output for reduction none: a tensor of the loss's shape (default ones).
local function upstream(opts, shape, like)
  local g = opts.grad_output
  if g == nil then return nil end
  if opts.reduction ~= "none" then raise("grad_output: only for reduction \"none\" (a reduced loss's gradient is 1)") end
  op.live_tensor(g, "grad_output")
  op.same_shape(g, shape, "grad_output", "the loss's")
  if g.dev ~= like.dev then raise("grad_output: on another device than input") end
  return g
end

-- ---- cross entropy and NLL ----

local kernels = {}
local function class_kernel(dt, log_input)
  local key = dt .. (log_input and "|nll" or "|ce")
  if not kernels[key] then
    local acc = dt == "f64" and "f64" or "f32"
    kernels[key] = kernel.new { source = op.source("class_loss.cu"), name = "tocha_class_loss",
      template_args = ("%s, %d"):format(dtype.ctype(dt), log_input and 1 or 0),
      params = ("%s* x, i64* target, %s* row_loss, %s* valid, %s* shift, %s* dx, %s* scale, %s* dy, i64 dy_stride, "
        .. "i64* bad, i64 N, i64 C, i64 ignore_index, f64 smoothing, i32 phase")
        :format(dt, acc, acc, acc, dt, acc, dt) }
  end
  return kernels[key]
end

local function class_loss(input, target, opts, log_input)
  opts = check_options(opts, { reduction = true, ignore_index = true, label_smoothing = true, grad_output = true },
    "tocha.loss." .. (log_input and "nll" or "cross_entropy"))
  local dt = float_input(input, "input")
  if input.ndim ~= 2 then raise(("input: expected [N, C] (a row of C classes each), got %d dimensions"):format(input.ndim)) end
  op.live_tensor(target, "target")
  if dtype.name(target.elem_type) ~= "i64" then
    raise(("target: expected i64 class indices (1-based), got %s"):format(dtype.name(target.elem_type)))
  end
  local N, C = tonumber(input.dims[0]), tonumber(input.dims[1])
  if target.ndim ~= 1 or tonumber(target.dims[0]) ~= N then
    raise(("target: expected shape [%d] (one index a row of input), got [%s]"):format(N, table.concat(target:shape(), ", ")))
  end
  if target.dev ~= input.dev then raise("target: on another device than input") end
  local ignore = opts.ignore_index or -100
  if type(ignore) ~= "number" or ignore ~= math.floor(ignore) then
    raise("ignore_index: expected an integer, got " .. errors.show(ignore))
  end
  local e = opts.label_smoothing or 0
  if type(e) ~= "number" or not (e >= 0 and e <= 1) then raise("label_smoothing: expected a number from 0 to 1, got " .. errors.show(e)) end
  local reduction = opts.reduction or "mean"
  local dev = device.wrap(input.dev)
  local acc = dt == "f64" and "f64" or "f32"
  local row_loss, valid = tensor.alloc({ N }, acc, dev), tensor.alloc({ N }, acc, dev)
  local shift = log_input and row_loss or tensor.alloc({ N }, acc, dev) -- NLL keeps no shift
  local bad = tensor.zeros({ 1 }, { dtype = "i64", device = dev })
  local dx = tensor.alloc({ N, C }, dt, dev)
  local g = upstream(opts, { N }, input)
  local k = class_kernel(dt, log_input)
  local grid = { math.max(1, math.ceil(N / (BLOCK / 32))), 1, 1 }
  local function launch(phase, scale)
    op.launch_packed(k, dev, grid, { BLOCK, 1, 1 }, { input.data, target.data, row_loss.data, valid.data, shift.data, dx.data,
      scale and scale.data or row_loss.data, g and g.data or input.data, g and 1 or 0, bad.data, N, C, ignore, e, phase })
  end
  launch(0)
  local loss, scale
  if reduction == "mean" then
    local count = valid:sum()
    loss = math_ops.binary("div", row_loss:sum(), count)
    scale = count:reciprocal()
  elseif reduction == "sum" then
    loss, scale = row_loss:sum(), tensor.ones({ 1 }, { dtype = acc, device = dev })
  else
    loss, scale = row_loss, tensor.ones({ 1 }, { dtype = acc, device = dev })
  end
  launch(1, scale)
  -- Bad targets are read back once every launch is queued, so that the device runs the loss's
  -- launches back to back (a bad row's gradient is left unwritten: the call raises).
  local at = bad:item()
  if at ~= 0 then
    raise(("target: row %d holds %d, outside the classes 1 to %d (and not ignore_index %d)"):format(at,
      target[at]:item(), C, ignore))
  end
  if loss:dtype() ~= dt then loss = loss:cast(dt) end
  return loss, dx
end

-- tocha.loss.cross_entropy(logits [N, C], target [N] i64 1-based [, opts]) -> loss, dlogits
function M.cross_entropy(input, target, opts)
  local loss, dx = class_loss(input, target, opts, false)
  return loss, dx
end

-- tocha.loss.nll(log_probs [N, C], target [N] i64 1-based [, opts]) -> loss, dlog_probs
function M.nll(input, target, opts)
  local loss, dx = class_loss(input, target, opts, true)
  return loss, dx
end

-- ---- elementwise losses (tensor math) ----

-- input and target of one shape, dtype and device; the reduction and the gradient's factor.
local function pair(input, target, opts, owner)
  opts = check_options(opts, { reduction = true, grad_output = true }, owner)
  local dt = float_input(input, "input")
  op.live_tensor(target, "target")
  if dtype.name(target.elem_type) ~= dt then
    raise(("target: expected dtype %s (input's), got %s"):format(dt, dtype.name(target.elem_type)))
  end
  op.same_shape(target, input:shape(), "target", "input's")
  if target.dev ~= input.dev then raise("target: on another device than input") end
  local reduction = opts.reduction or "mean"
  local g = upstream(opts, input:shape(), input)
  return reduction, reduction == "mean" and 1 / tonumber(input.count) or 1, g
end

local function reduce(per_element, reduction)
  if reduction == "mean" then return per_element:mean() end
  if reduction == "sum" then return per_element:sum() end
  return per_element
end

-- Scales the gradient in place: by factor, and by the upstream gradient g when given.
local function finish(grad, factor, g)
  math_ops.binary("mul", grad, factor, grad)
  if g then math_ops.binary("mul", grad, g, grad) end
  return grad
end

-- tocha.loss.mse(input, target [, opts]) -> loss, dinput: (input - target)^2. The gradient
-- 2 (input - target) factor is one pass; the loss is the reduction of (input - target)^2.
function M.mse(input, target, opts)
  local reduction, factor, g = pair(input, target, opts, "tocha.loss.mse")
  local grad = math_ops.sub_scale(input, target, 2 * factor)
  local loss = reduce(math_ops.squared_difference(input, target), reduction)
  if g then math_ops.binary("mul", grad, g, grad) end
  return loss, grad
end

-- tocha.loss.l1(input, target [, opts]) -> loss, dinput: |input - target|.
function M.l1(input, target, opts)
  local reduction, factor, g = pair(input, target, opts, "tocha.loss.l1")
  local d = input - target
  local loss = reduce(d:abs(), reduction)
  return loss, finish(d:sign_(), factor, g)
end

-- tocha.loss.bce_with_logits(logits, target [, opts]) -> loss, dlogits: binary cross entropy of
-- sigmoid(logits) against targets in [0, 1].
function M.bce_with_logits(input, target, opts)
  local reduction, factor, g = pair(input, target, opts, "tocha.loss.bce_with_logits")
  local per = input:relu() - input * target + (-input:abs()):exp():log1p()
  local loss = reduce(per, reduction)
  local grad = input:sigmoid()
  math_ops.binary("sub", grad, target, grad)
  return loss, finish(grad, factor, g)
end

errors.register(M, "loss.")
return M
