-- Raw kernels: the generated entry point, the hash, compile errors with their log, and
-- launches whose arguments are checked against the parameter list.
local tocha = require "tocha"
local ref = require "support.reference"

local AXPY = [[
template <typename D, int A>
__device__ void axpy(const D *x, D *y, long long n, D b)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = (D)A * x[i] + y[i] + b;
}
]]

local function axpy(dtype, a)
  local ctype = ({ f32 = "float", f64 = "double", i32 = "int" })[dtype]
  return tocha.kernel {
    source = AXPY, name = "axpy", template_args = ctype .. ", " .. a,
    params = ("%s* x, %s* y, i64 n, %s b"):format(dtype, dtype, dtype),
  }
end

local fails_with = require("support.assertions").fails_with

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
      assert.truthy(err:find("not_an_attribute", 1, true))
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

    it("refuses a parameter of unknown type", function()
      fails_with("tocha.kernel: params: parameter 2: unknown type 'int' (expected a tensor 'T*' or one of i32, i64, u32, u64, f32, f64)",
        function() tocha.kernel { source = AXPY, name = "axpy", params = "f32* x, int n" } end)
    end)
    it("refuses a tensor parameter of unknown dtype", function()
      fails_with("tocha.kernel: params: parameter 1: unknown tensor dtype 'float*' (expected f32*, f64*, f16*, bf16*, u8*, i32* or i64*)",
        function() tocha.kernel { source = AXPY, name = "axpy", params = "float* x" } end)
    end)
    it("refuses a name that is not an identifier", function()
      fails_with("tocha.kernel: name: expected a C identifier, got 'my kernel'",
        function() tocha.kernel { source = AXPY, name = "my kernel", params = "" } end)
    end)
  end)

  describe("build()", function()
    it("returns NVRTC's log with numbered source lines on a compile error", function()
      local k = tocha.kernel { source = "__device__ void broken(float *x) { x[0] = undefined_name; }",
        name = "broken", params = "f32* x" }
      local ok, err = pcall(k.build, k, "sm_90")
      assert.is_false(ok)
      assert.truthy(err:find("tocha.Kernel:build: NVRTC failed to compile for sm_90", 1, true))
      assert.truthy(err:find("undefined_name", 1, true))
      assert.truthy(err:find("tocha_kernel.cu%(%d+%): error"))
      assert.truthy(err:find("%d+ | __device__ void broken"))
    end)

    it("reports the simulator compiler's errors the same way", function()
      local k = tocha.kernel { source = "__device__ void broken2(float *x) { x[0] = nope; }",
        name = "broken2", params = "f32* x" }
      local ok, err = pcall(k.build, k, "sim")
      assert.is_false(ok)
      assert.truthy(err:find("the simulator's compiler", 1, true))
      assert.truthy(err:find("nope", 1, true))
    end)

    it("refuses an unknown target", function()
      fails_with("tocha.Kernel:build: target: expected sm_XY (e.g. sm_90) or sim, got 'gfx90a'",
        function() axpy("f32", 2):build("gfx90a") end)
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

      describe("checks its arguments", function()
        local k, x, y
        before_each(function()
          k = axpy("f32", 2)
          x = tocha.zeros({ 8 }, { device = device })
          y = tocha.zeros({ 8 }, { device = device })
        end)
        after_each(function()
          -- Nothing was launched: y is untouched, and the kernel still launches.
          assert.are.same({ 0, 0, 0, 0, 0, 0, 0, 0 }, y:to_table())
          k:launch(1, 8, x, y, 8, 1)
          assert.are.same({ 1, 1, 1, 1, 1, 1, 1, 1 }, y:to_table())
          y:fill(0)
        end)

        it("by count", function()
          fails_with("tocha.Kernel:launch: expected 4 arguments for axpy_entry_point, got 3",
            function() k:launch(1, 8, x, y, 8) end)
        end)
        it("by kind: a number where a tensor goes", function()
          fails_with("tocha.Kernel:launch: argument 1 (x): expected a tensor of f32, got a number",
            function() k:launch(1, 8, 5, y, 8, 1) end)
        end)
        it("by kind: a tensor where a number goes", function()
          fails_with("tocha.Kernel:launch: argument 3 (n): expected i64, got a tensor",
            function() k:launch(1, 8, x, y, x, 1) end)
        end)
        it("by dtype", function()
          local h = tocha.zeros({ 8 }, { dtype = "f16", device = device })
          fails_with("tocha.Kernel:launch: argument 2 (y): expected dtype f32, got f16",
            function() k:launch(1, 8, x, h, 8, 1) end)
        end)
        it("by integer value", function()
          fails_with("tocha.Kernel:launch: argument 3 (n): expected an integer (i64), got 2.5",
            function() k:launch(1, 8, x, y, 2.5, 1) end)
        end)
        it("by freed tensor", function()
          local z = tocha.zeros({ 8 }, { device = device })
          z:free()
          fails_with("tocha.Kernel:launch: argument 1 (x): tensor was freed",
            function() k:launch(1, 8, z, y, 8, 1) end)
        end)
        it("by a value that is neither tensor nor number", function()
          fails_with("tocha.Kernel:launch: argument 4: expected a tensor or a number, got string",
            function() k:launch(1, 8, x, y, 8, "1") end)
        end)
        it("by block size", function()
          fails_with("tocha.Kernel:launch: block: 2048 threads per block, at most 1024",
            function() k:launch(1, { 64, 32 }, x, y, 8, 1) end)
        end)
        it("by grid size", function()
          fails_with("tocha.Kernel:launch: grid.y: must be 1 to 65535, got 70000",
            function() k:launch({ 1, 70000 }, 8, x, y, 8, 1) end)
        end)
        it("by device", function()
          if device == "sim" then return end -- needs a second device
          local other = tocha.zeros({ 8 }, { device = "sim" })
          fails_with(("tocha.Kernel:launch: argument 2 (y): tensor is on sim, the launch is on %s"):format(x:device()),
            function() k:launch(1, 8, x, other, 8, 1) end)
        end)
      end)

      it("checks i32 range", function()
        local k = tocha.kernel { source = "__device__ void nop(int n) {}", name = "nop", params = "i32 n" }
        k:launch(1, 1, 2 ^ 31 - 1)
        fails_with("tocha.Kernel:launch: argument 1 (n): 2147483648 is out of i32 range",
          function() k:launch(1, 1, 2 ^ 31) end)
      end)
    end)
  end
end)
