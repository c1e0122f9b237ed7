-- examples/neck_model.lua: the feature pyramid's top-down path of examples/neck.lua as a
-- tocha.Model, for that example and for bench/model.lua, at any channel counts and P5 size:
--
--   P5 [B, c5, h5, w5] --up 2x2--> join with P4 [B, c4, 2 h5, 2 w5] --silu--> A
--   N4 = A * halve(A), halve a custom op written in Lua (x * 0.5, with its backward)
--   N4 --up 2x2--> join with P3 [B, c3, 4 h5, 4 w5] --bias a channel--> --gelu--> N3
--   [B, c5 + c4 + c3, 4 h5, 4 w5], and the loss L = mean(N3) [1], the model's two outputs
-- The bias is a parameter, "N3bias.bias", which starts at 0.
local tocha = require "tocha"

local M = {}

-- A custom op: y = 0.5 x and dx = 0.5 dy, one kernel for both, written here and joined to the
-- model like a built-in op.
local HALVE = [[
template <typename D>
__device__ void halve(const D *x, D *y, long long n)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = (D)0.5 * x[i];
}]]
local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end
local function halve_op(dt)
  local k = tocha.kernel { source = HALVE, name = "halve", template_args = dt == "f64" and "double" or "float",
    params = ("%s* x, %s* y, i64 n"):format(dt, dt) }
  return tocha.Model.op { name = "halve", kernel = k, grad_kernel = k, dtype = dt,
    output_shape = function(shapes) return shapes[1] end,
    grid = function(s) return math.ceil(numel(s) / 256) end, block = 256,
    args = function(ins, out, _, shape) return { ins[1], out, numel(shape) } end,
    grad_args = function(_, _, dy, dxs, shapes) return { dy, dxs[1], numel(shapes[1]) } end }
end

-- build(dtype, {c5, c4, c3, h5, w5}): the model, not loaded.
function M.build(dt, size)
  local h, w = size.h5, size.w5
  local p5 = tocha.Model.input({ -1, size.c5, h, w }, { dtype = dt, name = "P5" })
  local p4 = tocha.Model.input({ -1, size.c4, 2 * h, 2 * w }, { dtype = dt, name = "P4" })
  local p3 = tocha.Model.input({ -1, size.c3, 4 * h, 4 * w }, { dtype = dt, name = "P3" })
  local up = tocha.UpsampleNearest2dForward.new(2, 2, nil, dt)
  local cat = tocha.ChannelCat.new(dt)
  local silu, gelu = tocha.Elementwise.new("silu", dt), tocha.Elementwise.new("gelu", dt)
  local mul = tocha.Elementwise.new("mul", dt)
  local bias, mean = tocha.ChannelBiasAdd.new(dt), tocha.Reduce.new("mean", nil, dt)
  local a = silu(cat(up(p5), p4))
  local n4 = mul(a, halve_op(dt)(a))
  local n3 = gelu(bias(cat(up(n4), p3)):named("N3bias"))
  return tocha.Model({ p5, p4, p3 }, { n3, mean(n3):named("L") })
end

return M
