-- The activation functions in f64 (the C library's erf through the FFI): for each name, f(x)
-- and f'(x), as references for Elementwise and the fused epilogues of Conv2d and Linear.
local ffi = require "ffi"

ffi.cdef [[ double erf(double); double expm1(double); double log1p(double); ]]
local erf, expm1, log1p = ffi.C.erf, ffi.C.expm1, ffi.C.log1p

local function sigmoid(x) return 1 / (1 + math.exp(-x)) end
local function cdf(x) return 0.5 * (1 + erf(x / math.sqrt(2))) end
local function pdf(x) return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi) end
local function tanh(x)
  if math.abs(x) > 20 then return x > 0 and 1 or -1 end
  local e = math.exp(2 * x)
  return (e - 1) / (e + 1)
end
local function softplus(x) return x > 30 and x or log1p(math.exp(x)) end
local GELU_K = math.sqrt(2 / math.pi)
-- SELU's constants (Klambauer et al.), to double precision.
local SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

return {
  identity = { function(x) return x end, function() return 1 end },
  relu = { function(x) return math.max(x, 0) end, function(x) return x > 0 and 1 or 0 end },
  sigmoid = { sigmoid, function(x) local s = sigmoid(x) return s * (1 - s) end },
  tanh = { tanh, function(x) local t = tanh(x) return 1 - t * t end },
  silu = { function(x) return x * sigmoid(x) end, function(x) local s = sigmoid(x) return s * (1 + x * (1 - s)) end },
  gelu = { function(x) return x * cdf(x) end, function(x) return cdf(x) + x * pdf(x) end },
  relu6 = { function(x) return math.min(math.max(x, 0), 6) end, function(x) return (x > 0 and x < 6) and 1 or 0 end },
  erf = { function(x) return erf(x) end, function(x) return 2 / math.sqrt(math.pi) * math.exp(-x * x) end },
  -- PyTorch's: relu6(x + 3) / 6 and x relu6(x + 3) / 6
  hardsigmoid = { function(x) return math.min(math.max(x + 3, 0), 6) / 6 end,
    function(x) return (x > -3 and x < 3) and 1 / 6 or 0 end },
  hardswish = { function(x) return x * math.min(math.max(x + 3, 0), 6) / 6 end,
    function(x) return x < -3 and 0 or x <= 3 and x / 3 + 0.5 or 1 end },
  elu = { function(x) return x > 0 and x or expm1(x) end, function(x) return x > 0 and 1 or math.exp(x) end },
  celu = { function(x) return x > 0 and x or expm1(x) end, function(x) return x > 0 and 1 or math.exp(x) end },
  selu = { function(x) return SELU_SCALE * (x > 0 and x or SELU_ALPHA * expm1(x)) end,
    function(x) return SELU_SCALE * (x > 0 and 1 or SELU_ALPHA * math.exp(x)) end },
  softplus = { softplus, sigmoid },
  mish = { function(x) return x * tanh(softplus(x)) end,
    function(x) local t = tanh(softplus(x)) return t + x * sigmoid(x) * (1 - t * t) end },
  gelu_tanh = { function(x) return 0.5 * x * (1 + tanh(GELU_K * (x + 0.044715 * x ^ 3))) end,
    function(x)
      local t = tanh(GELU_K * (x + 0.044715 * x ^ 3))
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_K * (1 + 3 * 0.044715 * x * x)
    end },
  -- elu(x, alpha) and celu(x, alpha) with alpha given
  elu_alpha = function(alpha)
    return { function(x) return x > 0 and x or alpha * expm1(x) end, function(x) return x > 0 and 1 or alpha * math.exp(x) end }
  end,
  celu_alpha = function(alpha)
    return { function(x) return x > 0 and x or alpha * expm1(x / alpha) end,
      function(x) return x > 0 and 1 or math.exp(x / alpha) end }
  end,
}
