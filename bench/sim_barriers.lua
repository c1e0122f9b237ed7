-- bench/sim_barriers.lua: what synchronising costs on the simulator, on this machine's CPU.
--
--   TOCHA_SIM_THREADS=1 tocha bench/sim_barriers.lua [steps] [repetitions]
--
-- One block of 1024 threads runs `steps` steps of: write a shared slot, __syncthreads, read a
-- neighbour's slot, __syncthreads; the same kernel with the barriers taken out (a wrong
-- program, timed only as the floor) runs beside it, alternating, and the ratio of their median
-- times is the barrier's cost. A warp shuffle reduction (five __shfl_xor_sync a step) is timed
-- the same way against its shuffle-free twin. Figures are CPU times of the simulator: they say
-- nothing of a GPU.
local tocha = require "tocha"

local steps = tonumber(arg and arg[1]) or 500
local reps = tonumber(arg and arg[2]) or 7

local BARRIERS = [[
template <int SYNC>
__device__ void steps(float *y, int n)
{
    __shared__ float s[1024];
    float v = (float)threadIdx.x;
    for (int i = 0; i < n; ++i) {
        s[threadIdx.x] = v;
        if (SYNC) __syncthreads();
        v = v * 0.5f + s[(threadIdx.x + 1) & 1023];
        if (SYNC) __syncthreads();
    }
    y[threadIdx.x] = v;
}]]

local SHUFFLES = [[
template <int SYNC>
__device__ void steps(float *y, int n)
{
    float v = (float)threadIdx.x;
    for (int i = 0; i < n; ++i)
        for (int o = 16; o > 0; o /= 2) v = v * 0.5f + (SYNC ? __shfl_xor_sync(0xffffffffu, v, o) : v);
    y[threadIdx.x] = v;
}]]

-- The kernel pair for a source: synchronising, and the same text with every wait taken out
-- (so that the simulator runs it without fibers).
local function pair(source, plain)
  local with = tocha.kernel { source = source, name = "steps", template_args = "1", params = "f32* y, i32 n" }
  local without = tocha.kernel { source = plain, name = "steps", template_args = "0", params = "f32* y, i32 n" }
  return with, without
end

local function median(t)
  table.sort(t)
  return t[math.ceil(#t / 2)]
end

local function measure(label, with, without, waits_per_step)
  local y = tocha.zeros({ 1024 }, { device = "sim" })
  with:launch(1, 1024, y, 2)
  without:launch(1, 1024, y, 2)
  local a, b = {}, {}
  for r = 1, reps do
    local t0 = os.clock()
    with:launch(1, 1024, y, steps)
    local t1 = os.clock()
    without:launch(1, 1024, y, steps)
    a[r], b[r] = t1 - t0, os.clock() - t1
  end
  local ta, tb = median(a), median(b)
  local per_wait = (ta - tb) / (1024 * steps * waits_per_step) * 1e9
  print(("%-28s %9.2f ms %9.2f ms %8.1fx %10.1f ns"):format(label, ta * 1e3, tb * 1e3, ta / tb, per_wait))
  y:free()
end

print(("sim, %s, %d steps, median of %d (CPU times)"):format(tocha.device("sim").product, steps, reps))
print(("%-28s %12s %12s %9s %13s"):format("kernel (block of 1024)", "with waits", "without", "ratio", "per wait"))
local b1, b0 = pair(BARRIERS, BARRIERS:gsub("__syncthreads%(%)", "(void)0"))
measure("2 __syncthreads a step", b1, b0, 2)
local s1, s0 = pair(SHUFFLES, SHUFFLES:gsub("__shfl_xor_sync%(0xffffffffu, v, o%)", "v"))
measure("5 __shfl_xor_sync a step", s1, s0, 5)
