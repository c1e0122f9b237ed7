-- tocha.fusion: parameters rewritten so that one layer does the work of two at inference
-- (PyTorch's torch.nn.utils.fusion), exported as tocha.nn.fold_batch_norm.
--
--   local w, b = tocha.nn.fold_batch_norm(conv_w, conv_b, { weight = gamma, bias = beta,
--     running_mean = mean, running_var = var, eps = 1e-5 })
--   local block = tocha.Conv2d.new(64, 128, 3, { padding = 1, activation = "silu" })
--   local y = block:forward(x, w, b)          -- = silu(bn(conv(x))) in inference mode, one pass
--
-- A BatchNorm in inference mode after a convolution (or a Linear) is an affine map of each
-- output channel o: bn(z)[o] = (z[o] - mean[o]) s[o] + beta[o], s = gamma / sqrt(var + eps);
-- so conv followed by bn is the convolution by w'[o] = w[o] s[o] with the bias b'[o] = (b[o] -
-- mean[o]) s[o] + beta[o]. Computed in f32 (f64 for f64 weights) and rounded once to the
-- weight's dtype.
local tensor = require "tocha.tensor"
local errors = require "tocha.errors"
local dtype = require "tocha.dtype"
local raise = errors.raise

local M = {}

local function check(t, what, like, shape)
  if not tensor.is_tensor(t) then raise(("%s: expected a tensor, got %s"):format(what, type(t))) end
  if t.freed ~= 0 then raise(what .. ": tensor was freed") end
  if t.dev ~= like.dev then raise(what .. ": on another device than the weight") end
  if not dtype.is_float(t:dtype()) then raise(("%s: expected a float dtype, got %s"):format(what, t:dtype())) end
  local s = t:shape()
  if #s ~= #shape or s[1] ~= shape[1] then
    raise(("%s: expected shape [%s], got [%s]"):format(what, table.concat(shape, ", "), table.concat(s, ", ")))
  end
end

-- fold_batch_norm(weight, bias, bn) -> weight', bias': new tensors of weight's dtype and
-- device. weight [out, ...] (a Conv2d's [out, in / groups, kh, kw] or a Linear's [out, in]),
-- bias [out] or nil (none: 0); bn = {running_mean, running_var [out], eps (1e-5), weight and
-- bias [out] or nil (not affine: 1 and 0)}.
function M.fold_batch_norm(weight, bias, bn)
  if not tensor.is_tensor(weight) then raise("weight: expected a tensor, got " .. type(weight)) end
  if weight.freed ~= 0 then raise("weight: tensor was freed") end
  local dt = weight:dtype()
  if not dtype.is_float(dt) then raise(("weight: expected a float dtype, got %s"):format(dt)) end
  local shape = weight:shape()
  if #shape < 2 then raise(("weight: expected [out, ...] of at least 2 dimensions, got %d"):format(#shape)) end
  local out = shape[1]
  if bias ~= nil then check(bias, "bias", weight, { out }) end
  if type(bn) ~= "table" then raise("bn: expected a table {running_mean, running_var, eps, weight, bias}, got " .. type(bn)) end
  for key in pairs(bn) do
    if key ~= "running_mean" and key ~= "running_var" and key ~= "eps" and key ~= "weight" and key ~= "bias" then
      raise(("bn: unknown key %s (expected running_mean, running_var, eps, weight or bias)"):format(errors.show(key)))
    end
  end
  check(bn.running_mean, "bn.running_mean", weight, { out })
  check(bn.running_var, "bn.running_var", weight, { out })
  if bn.weight ~= nil then check(bn.weight, "bn.weight", weight, { out }) end
  if bn.bias ~= nil then check(bn.bias, "bn.bias", weight, { out }) end
  local eps = bn.eps == nil and 1e-5 or bn.eps
  if type(eps) ~= "number" or eps ~= eps or eps < 0 or eps == math.huge then
    raise("bn.eps: expected a non-negative number, got " .. errors.show(eps))
  end
  local ct = dt == "f64" and "f64" or "f32"
  local scale = (bn.running_var:cast(ct) + eps):rsqrt()
  if bn.weight then scale = scale * bn.weight:cast(ct) end
  local lead = { out }
  for i = 2, #shape do lead[i] = 1 end
  local folded = (weight:cast(ct) * scale:view(unpack(lead))):cast(dt)
  local shift = (bias and bias:cast(ct) or tensor.zeros({ out }, { dtype = ct, device = require("tocha.device").wrap(weight.dev) }))
    - bn.running_mean:cast(ct)
  shift = shift * scale
  if bn.bias then shift = shift + bn.bias:cast(ct) end
  return folded, shift:cast(dt)
end

return M
