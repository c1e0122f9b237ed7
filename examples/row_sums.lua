-- row_sums.lua: a cooperative kernel of your own, written once for both devices, tested on the
-- simulator, timed, its block size tuned, and swept. Run it with `tocha examples/row_sums.lua
-- [output folder]` (TOCHA_DEVICE=sim to try it without a GPU).
--
-- Each block sums one row of x [rows, n]: its threads stride along the row, each warp adds its
-- lanes' sums with shuffles, the warps' sums meet in shared memory after a barrier, and the
-- first warp adds those. BLOCK, the threads of a block, is a compile-time constant.
local tocha = require "tocha"

local SOURCE = [[
template <int BLOCK>
__device__ void row_sums(const float *x, float *y, int n)
{
    __shared__ float warp_sums[BLOCK / 32];
    const float *row = x + (long long)blockIdx.x * n;
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += BLOCK) s += row[i];
    for (int o = 16; o > 0; o /= 2) s += __shfl_down_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < BLOCK / 32 ? warp_sums[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o /= 2) s += __shfl_down_sync(0xffffffffu, s, o);
        if (threadIdx.x == 0) y[blockIdx.x] = s;
    }
}]]

local function kernel(block)
  return tocha.kernel { source = SOURCE, name = "row_sums", template_args = tostring(block),
    params = "f32* x, f32* y, i32 n" }
end

local device, why = tocha.default_device()
print(("device %s: %s"):format(device.name, why))

-- Tested: every row's sum against plain Lua, on the simulator whatever the default device is,
-- then on the default device; the output poisoned first.
local function check(dev, rows, n, block)
  local x = tocha.randn({ rows, n }, { device = dev, seed = 7 })
  local y = tocha.full({ rows }, -1, { device = dev })
  kernel(block):launch(rows, block, x, y, n)
  local xs, ys, worst = x:to_table(), y:to_table(), 0
  for r = 1, rows do
    local s = 0
    for i = 1, n do s = s + xs[r][i] end
    worst = math.max(worst, math.abs(ys[r] - s) / math.max(1, math.abs(s)))
  end
  print(("%-6s rows %d x %d, block %4d: max relative error %.1e %s"):format(dev, rows, n, block, worst,
    worst < 1e-4 and "ok" or "WRONG"))
  return worst < 1e-4
end
local ok = check("sim", 5, 1000, 128) and check("sim", 3, 77, 1024) and check(device.name, 64, 4096, 256)

-- Timed: tocha.bench runs it repeatedly on the device (the host clock on sim) and reports the
-- median, its spread and GB/s.
local rows, n = device.name == "sim" and 256 or 8192, 4096
local x = tocha.rand({ rows, n }, { seed = 1 })
local y = tocha.zeros({ rows })
local k = kernel(256)
local r = tocha.bench(function() k:launch(rows, 256, x, y, n) end, { reps = 10, bytes = x:nbytes() + y:nbytes() })
print(("block 256: %.3f ms, %.1f GB/s%s"):format(r.median_ms, r.gbps, device.name == "sim" and " (CPU time)" or ""))

-- Tuned: tocha.autotune times every block size on the device for these arguments' shapes and
-- keeps the fastest (checking each one's sums against the first's); the choice is recorded
-- under the kernel cache, so the next run of this script times nothing.
local BLOCKS = { 64, 128, 256, 512, 1024 }
local configs = {}
for i, b in ipairs(BLOCKS) do configs[i] = { BLOCK = b } end
local tuned = tocha.autotune {
  name = "row_sums", configs = configs, outputs = { 2 }, rtol = 1e-4, atol = 1e-3,
  build = function(cfg) return kernel(cfg.BLOCK) end,
  launch = function(kb, cfg, xs, ys, cols) kb:launch(xs:shape()[1], cfg.BLOCK, xs, ys, cols) end,
}
tuned(x, y, n)
local cfg, how = tuned:choice(x, y, n)
print(("tuned: block %d, %.3f ms (%s)"):format(cfg.BLOCK, how.median_ms, how.source))

-- Swept: every block size over a few row lengths, as a table (and, with an output folder given
-- as the first argument, Markdown, CSV and a plot there).
local cases = {}
for _, b in ipairs(BLOCKS) do
  local kb = kernel(b)
  cases[("block%04d"):format(b)] = function(p, st) kb:launch(p.rows, b, st.x, st.y, p.n) end
end
local sweep = tocha.sweep {
  name = "row_sums", axes = { { "n", { 256, 4096 } } }, cases = cases, reps = 3, warmup = 1,
  setup = function(p)
    p.rows = device.name == "sim" and 64 or 4096
    return { x = tocha.rand({ p.rows, p.n }), y = tocha.zeros({ p.rows }) }
  end,
  bytes = function(p) return 4 * p.rows * (p.n + 1) end,
  out = arg and arg[1], progress = false,
}
io.write(require("tocha.sweep").markdown(sweep))

if not ok then os.exit(1) end
