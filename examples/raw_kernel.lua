-- raw_kernel.lua: a CUDA C kernel of your own. Run it with `tocha examples/raw_kernel.lua`.
-- It makes tensors on the default device (a GPU when one is usable, else the CPU simulator),
-- builds a CUDA C kernel at run time, launches it, and checks the result against plain Lua.
local tocha = require "tocha"

local device, why = tocha.default_device()
print(("tocha %s, device %s (%s): %s"):format(tocha.version, device.name, device.product, why))

-- Tensors: random values from an explicit seed, computed on the device.
local n = 1000000
local x = tocha.rand({ n }, { seed = 1 })
local y = tocha.randn({ n }, { seed = 2 })
print("x = " .. tostring(x))
print("y = " .. tostring(y))

-- A kernel: a CUDA C function template; tocha writes the entry point that binds its
-- compile-time constant and checks every launch argument against the parameter list.
local saxpy = tocha.kernel {
  source = [[
template <int A>
__device__ void saxpy(const float *x, float *y, long long n)
{
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = (float)A * x[i] + y[i];
}]],
  name = "saxpy", template_args = "3", params = "f32* x, f32* y, i64 n",
}
print("entry point:\n" .. saxpy.entry_point_source)

local expected_x, expected_y = x:to_table(true), y:to_table(true)
local start, stop = tocha.event(device), tocha.event(device)
start:record()
saxpy:launch(256, 256, x, y, n)
stop:record()
local ms = start:elapsed(stop)

-- Check every element against plain Lua (in f64; the kernel rounds to f32).
local got, worst = y:to_table(true), 0
for i = 1, n do
  worst = math.max(worst, math.abs(got[i] - (3 * expected_x[i] + expected_y[i])))
end
print(("saxpy on %s: %d elements in %.3f ms, max |error| %.2e %s"):format(device.name, n, ms,
  worst, worst < 1e-5 and "(ok)" or "(WRONG)"))

local stats = tocha.cache.stats()
print(("kernels compiled %d, from the disk cache %d (%s)"):format(stats.compiles, stats.disk_hits,
  tocha.cache.dir() or "disk cache off"))
if worst >= 1e-5 then os.exit(1) end
