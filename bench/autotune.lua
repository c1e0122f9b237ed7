-- bench/autotune.lua: what tocha.autotune costs beside what it times.
--
--   tocha bench/autotune.lua
--
-- 16 configurations of an elementwise kernel (elements a thread 1 to 8, blocks 64 to 512),
-- built and loaded first (the kernel cache's job), then tuned once per size with the wall clock
-- around the tuning: its time against the sum of the configurations' timed runs. On the H200
-- (docs/design.md, "Autotuning and sweeps") that is 1.3x to 1.6x from 2^20 to 2^26 elements.
local tocha = require "tocha"
local timing = dofile((arg and arg[0] or "bench/autotune.lua"):gsub("autotune%.lua$", "timing.lua"))

local SRC = [[
template <int ELEMS>
__device__ void affine(const float *x, float *y, int n)
{
    const int first = (blockIdx.x * blockDim.x + threadIdx.x) * ELEMS;
    for (int e = 0; e < ELEMS; ++e)
        if (first + e < n) y[first + e] = 2.0f * x[first + e] + 1.0f;
}]]

local configs = {}
for e = 1, 4 do for b = 1, 4 do configs[#configs + 1] = { elems = 2 ^ (e - 1), block = 32 * 2 ^ b } end end
local tuned = tocha.autotune {
  name = "bench-" .. os.time(), configs = configs, outputs = { 2 },
  build = function(c)
    return tocha.kernel { source = SRC, name = "affine", template_args = tostring(c.elems), params = "f32* x, f32* y, i32 n" }
  end,
  launch = function(k, c, x, y, n) k:launch(math.ceil(n / (c.block * c.elems)), c.block, x, y, n) end,
}
local dev = tocha.default_device()
local sizes = dev.kind == "sim" and { 2 ^ 16, 2 ^ 20 } or { 2 ^ 20, 2 ^ 24, 2 ^ 26 }
print(("%s (%s)%s"):format(dev.name, dev.product, dev.kind == "sim" and ": CPU times of the simulator" or ""))
for _, n in ipairs(sizes) do
  local x, y = tocha.rand({ n }), tocha.zeros({ n })
  tuned:choice(x, y, 1000 + n % 7) -- builds and loads every configuration
  local t0 = timing.now_us()
  local cfg, how = tuned:choice(x, y, n)
  tocha.synchronize()
  local wall = (timing.now_us() - t0) / 1e3
  print(("n = %9d: chose %2d (elements %d, block %3d), %.4f ms; tuning %.1f ms for %.1f ms of timed runs: %.2fx")
    :format(n, how.index, cfg.elems, cfg.block, how.median_ms, wall, how.timed_ms, wall / how.timed_ms))
  x:free()
  y:free()
end
