-- Raw kernels: the generated entry point, the hash, and launches. Their bad input (parameter
-- lists, compile errors, launch arguments) is in bad_kernels_spec.lua and bad_launch_spec.lua.
local tocha = require "tocha"
local ref = require "support.reference"

local kernels = require "support.kernels"
local AXPY, axpy = kernels.AXPY, kernels.axpy

describe("tocha.kernel", function()
  describe("new()", function()
    it("generates the extern C entry point that binds the template arguments", function()
      local k = axpy("f32", 3)
      assert.are.equal("axpy_entry_point", k.entry_point_name)
      assert.are.equal([[
extern "C" __global__ void axpy_entry_point(float *x, float *y, long long n, float b)
{
    axpy<float, 3>(x, y, n, b);
}
]], k.entry_point_source)
      assert.are.equal(AXPY .. "\n\n" .. k.entry_point_source, k.source)
    end)

    it("builds for the default device's target when given none, and takes a device's target as it names it", function()
      local k = tocha.kernel { source = AXPY, name = "axpy", template_args = "float, 2", params = "f32* x, f32* y, i64 n, f32 b" }
      assert.is_true(k:build() > 0)
      assert.is_true(k:build(tocha.device("sim").target) > 0)
    end)

    it("gives the entry point the source's TOCHA_ENTRY_BOUNDS of the template arguments", function()
      local bounded = "#define TOCHA_ENTRY_BOUNDS(D, A) __launch_bounds__(A * 32)\n" .. AXPY
      local k = tocha.kernel { source = bounded, name = "axpy", template_args = "float, 4",
        params = "f32* x, f32* y, i64 n, f32 b" }
      assert.truthy(k.entry_point_source:find(
        'extern "C" __global__ void TOCHA_ENTRY_BOUNDS(float, 4) axpy_entry_point(float *x', 1, true))
      assert.is_true(k:build("sm_90") > 1000) -- NVRTC takes the expansion
      -- A bound that does not compile shows that the macro is expanded there.
      local broken = tocha.kernel { source = "#define TOCHA_ENTRY_BOUNDS(D, A) not_an_attribute\n" .. AXPY,
        name = "axpy", template_args = "float, 4", params = "f32* x, f32* y, i64 n, f32 b" }
      local ok, err = pcall(broken.build, broken, "sm_90")
      assert.is_false(ok)
      assert.truthy(err:find("<entry point>:1:%d+: error"), err)
      assert.truthy(err:find("    1 | extern \"C\" __global__ void TOCHA_ENTRY_BOUNDS(float, 4) axpy_entry_point(", 1, true), err)
      -- The simulator ignores launch bounds and runs it.
      local x = tocha.tensor({ 1, 2, 3 }, { device = "sim" })
      local y = tocha.tensor({ 10, 20, 30 }, { device = "sim" })
      k:launch({ 1, 1, 1 }, { 128, 1, 1 }, x, y, 3, 0.5)
      assert.are.same({ 14.5, 28.5, 42.5 }, y:to_table())
    end)

    it("hashes the full source: the same text gives the same hash, a constant changes it", function()
      assert.are.equal(axpy("f32", 3):hash(), axpy("f32", 3):hash())
      assert.are_not.equal(axpy("f32", 3):hash(), axpy("f32", 4):hash())
      assert.are_not.equal(axpy("f32", 3):hash(), axpy("f64", 3):hash())
      assert.truthy(axpy("f32", 3):hash():match("^%x+$"))
      assert.are.equal(32, #axpy("f32", 3):hash())
    end)
  end)

  for _, dev in ipairs(ref.devices()) do
    describe("launch() on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("computes what the reference computes", function()
        ref.rng("kernel " .. device)
        for _, dtype in ipairs({ "f32", "f64", "i32" }) do
          local n = math.random(1, 3000)
          local x = tocha.rand({ n }, { dtype = dtype, device = device, seed = math.random(0, 1e6), low = -50, high = 50 })
          local y = tocha.rand({ n }, { dtype = dtype, device = device, seed = math.random(0, 1e6), low = -50, high = 50 })
          local vx, vy = x:to_table(true), y:to_table(true)
          axpy(dtype, 3):launch(math.ceil(n / 128), 128, x, y, n, 2)
          local got = y:to_table(true)
          for i = 1, n do
            -- Each operation rounds once (a device may fuse the multiply-add): bound the
            -- error by the operands' size.
            local e = 3 * vx[i] + vy[i] + 2
            local bound = 4 * ref.eps[dtype] * (math.abs(3 * vx[i]) + math.abs(vy[i]) + 2)
            assert(math.abs(got[i] - e) <= bound, ("element %d: %.17g vs %.17g"):format(i, got[i], e))
          end
        end
      end)
    end)
  end
end)
