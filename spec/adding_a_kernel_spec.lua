-- adding_a_kernel_spec.lua: the worked example of docs/design.md ("Adding a kernel"), run as a
-- spec. A new elementwise kernel, y = S * max(x, 0) with S baked in when it is made, launched
-- through the Kernel path and checked against plain Lua on random inputs, every output
-- element poisoned first.
local ffi = require "ffi"
local tocha = require "tocha"
local ref = require "support.reference"
local fails_with = require("support.assertions").fails_with

-- 1. The kernel: a CUDA C function template whose compile-time constants are its template
--    arguments. tocha writes the extern "C" entry point that binds them.
local SCALED_RELU = [[
template <typename D, int S>
__device__ void scaled_relu(const D *x, D *y, long long n)
{
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = x[i] > (D)0 ? (D)S * x[i] : (D)0;
}]]

-- 2. Its constructor, new(S): the parameter list types every launch argument, so a launch is
--    checked (count, tensor or number, dtype, device) before it runs.
local function scaled_relu(s)
  return tocha.kernel {
    source = SCALED_RELU, name = "scaled_relu", template_args = "float, " .. s,
    params = "f32* x, f32* y, i64 n",
  }
end

-- 3. An independent reference: the same formula in Lua, rounded to f32 once.
local function expected(x, s)
  return tonumber(ffi.new("float", x > 0 and s * x or 0))
end

describe("adding a kernel: the worked example", function()
  for _, dev in ipairs(ref.devices()) do
    it("matches plain Lua element for element on " .. dev.name .. dev.tag, function()
      local n, s = 100003, 3 -- not a whole number of blocks
      local k = scaled_relu(s)
      local x = tocha.rand({ n }, { device = dev.name, seed = 17, low = -4, high = 4 })
      local y = tocha.empty({ n }, { device = dev.name }):fill(-12345)
      k:launch(64, 256, x, y, n) -- fewer threads than elements: the grid-stride loop covers the rest
      local xs, ys = x:to_table(), y:to_table()
      local positive = 0
      for i = 1, n do
        if ys[i] ~= expected(xs[i], s) then
          error(("element %d: x = %.9g, y = %.9g, expected %.9g"):format(i, xs[i], ys[i], expected(xs[i], s)))
        end
        if xs[i] > 0 then positive = positive + 1 end
      end
      assert.is_true(positive > n / 3 and positive < 2 * n / 3) -- both branches were taken
    end)
  end

  it("bakes S in: another S is another kernel", function()
    local a, b = scaled_relu(2), scaled_relu(5)
    assert.are_not.equal(a.entry_point_source, b.entry_point_source)
    local x = tocha.tensor({ -1, 0.5, 2 }, { device = "sim" })
    local y = tocha.zeros({ 3 }, { device = "sim" })
    b:launch(1, 32, x, y, 3)
    assert.are.same({ 0, 2.5, 10 }, y:to_table())
  end)

  it("refuses a launch whose arguments do not fit the parameter list", function()
    local k = scaled_relu(2)
    local x = tocha.zeros({ 4 }, { device = "sim", dtype = "f64" })
    local y = tocha.zeros({ 4 }, { device = "sim" })
    fails_with("tocha.Kernel:launch: argument 1 (x): expected dtype f32, got f64",
      function() k:launch(1, 32, x, y, 4) end)
  end)
end)
