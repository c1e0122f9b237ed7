-- The activation functions in f64 (the C library's erf through the FFI): for each name, f(x)
-- and f'(x), as references for Elementwise and the fused epilogues of Conv2d and Linear.
local ffi = require "ffi"

ffi.cdef [[ double erf(double); ]]
local erf = ffi.C.erf

local function sigmoid(x) return 1 / (1 + math.exp(-x)) end
local function cdf(x) return 0.5 * (1 + erf(x / math.sqrt(2))) end
local function pdf(x) return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi) end
local function tanh(x)
  if math.abs(x) > 20 then return x > 0 and 1 or -1 end
  local e = math.exp(2 * x)
  return (e - 1) / (e + 1)
end

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
}
