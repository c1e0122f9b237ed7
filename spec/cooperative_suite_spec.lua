-- The cooperative kernel suite: warp shuffles, votes, match and reductions, block reductions and
-- scans, atomics on shared and global memory, cooperative groups and warp matrix fragments, each
-- a small kernel as users write them, run on sim and (#gpu) on cuda against plain Lua on random
-- inputs, every output poisoned first. Floating-point results are compared bit for bit where the
-- kernel fixes the order of its operations (the Lua reference rounds to f32 at each step in the
-- same order), and inputs are chosen so that the rest are exact too.
local ffi = require "ffi"
local bit = require "bit"
local tocha = require "tocha"
local ref = require "support.reference"
local fails_with = require("support.assertions").fails_with

local POISON = -77
local FULL = 0xffffffff

local function f32(v) return ref.convert(v, "f32") end
local function i32(v) return bit.tobit(v) end -- a 32-bit mask as an i32 tensor holds it

-- Deterministic inputs: n values from gen(i, rng) with a seeded generator.
local function values(n, seed, gen)
  local state = seed * 7919 + 17
  local function rng()
    state = (state * 1103515245 + 12345) % 2147483648
    return state / 2147483648
  end
  local t = {}
  for i = 1, n do t[i] = gen(i, rng) end
  return t
end
local function small_ints(lo, hi) return function(_, r) return lo + math.floor(r() * (hi - lo + 1)) end end
local function eighths(lo, hi) return function(_, r) return (lo + math.floor(r() * (hi - lo + 1))) / 8 end end
local function uniform() return function(_, r) return f32(r() * 2 - 1) end end

-- The lanes of a warp after a butterfly of shfl_xor from width/2 down to 1 with op, in f32.
local function butterfly(lanes, width, op)
  local v = {}
  for l = 0, #lanes - 1 do v[l] = lanes[l + 1] end
  local m = width / 2
  while m >= 1 do
    local nv = {}
    for l = 0, #lanes - 1 do nv[l] = op(v[l], v[bit.bxor(l, m)]) end
    v, m = nv, m / 2
  end
  return v[0]
end
local function add32(a, b) return f32(a + b) end

-- A warp's values after `for (o = 16; o > 0; o /= 2) v += __shfl_down_sync(FULL, v, o)`: lanes
-- whose source is past the warp add their own value.
local function shfl_down_tree(lanes)
  local v = {}
  for l = 0, 31 do v[l] = lanes[l + 1] or 0 end
  local o = 16
  while o >= 1 do
    local nv = {}
    for l = 0, 31 do nv[l] = f32(v[l] + (l + o < 32 and v[l + o] or v[l])) end
    v, o = nv, o / 2
  end
  return v[0]
end

local function slice(t, first, count)
  local s = {}
  for i = 1, count do s[i] = t[first + i - 1] end
  return s
end

-- Each case: source, name, params, grid, block, args (in the params' order: {in = values, dtype}
-- or {out = n, dtype}), and ref(inputs...) giving the expected outputs in order. `sorted`
-- compares an output's sorted values (for results whose order the hardware picks).
local CASES = {}
local function case(c) CASES[#CASES + 1] = c end

case { name = "warp_allreduce_xor", params = "f32* x, f32* y", grid = 2, block = 128,
  source = [[
__device__ void warp_allreduce_xor(const float *x, float *y)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    y[i] = v;
}]],
  args = { { input = values(256, 1, uniform()), dtype = "f32" }, { out = 256, dtype = "f32" } },
  ref = function(x)
    local y = {}
    for w = 0, 7 do
      local s = butterfly(slice(x, w * 32 + 1, 32), 32, add32)
      for l = 1, 32 do y[w * 32 + l] = s end
    end
    return { y }
  end }

case { name = "warp_reduce_down", params = "f32* x, f32* y", grid = 3, block = 64,
  source = [[
__device__ void warp_reduce_down(const float *x, float *y)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) y[i / 32] = v;
}]],
  args = { { input = values(192, 2, uniform()), dtype = "f32" }, { out = 6, dtype = "f32" } },
  ref = function(x)
    local y = {}
    for w = 0, 5 do y[w + 1] = shfl_down_tree(slice(x, w * 32 + 1, 32)) end
    return { y }
  end }

case { name = "shfl_gather", params = "i32* x, i32* y", grid = 1, block = 96,
  source = [[
__device__ void shfl_gather(const int *x, int *y)
{
    const int lane = threadIdx.x % 32;
    y[threadIdx.x] = __shfl_sync(0xffffffffu, x[threadIdx.x], (lane * 7 + 3) % 32);
}]],
  args = { { input = values(96, 3, small_ints(-1000, 1000)), dtype = "i32" }, { out = 96, dtype = "i32" } },
  ref = function(x)
    local y = {}
    for t = 0, 95 do
      local w, l = math.floor(t / 32), t % 32
      y[t + 1] = x[w * 32 + (l * 7 + 3) % 32 + 1]
    end
    return { y }
  end }

case { name = "shfl_up_width8", params = "i32* x, i32* y", grid = 1, block = 64,
  source = [[
__device__ void shfl_up_width8(const int *x, int *y)
{
    y[threadIdx.x] = __shfl_up_sync(0xffffffffu, x[threadIdx.x], 3, 8);
}]],
  args = { { input = values(64, 4, small_ints(0, 99999)), dtype = "i32" }, { out = 64, dtype = "i32" } },
  ref = function(x)
    local y = {}
    for t = 0, 63 do
      local seg = t - t % 8
      y[t + 1] = t - 3 >= seg and x[t - 3 + 1] or x[t + 1]
    end
    return { y }
  end }

case { name = "shfl_down_width16", params = "i32* x, i32* y", grid = 1, block = 64,
  source = [[
__device__ void shfl_down_width16(const int *x, int *y)
{
    y[threadIdx.x] = __shfl_down_sync(0xffffffffu, x[threadIdx.x], 5, 16);
}]],
  args = { { input = values(64, 5, small_ints(0, 99999)), dtype = "i32" }, { out = 64, dtype = "i32" } },
  ref = function(x)
    local y = {}
    for t = 0, 63 do
      local seg = t - t % 16
      y[t + 1] = t + 5 <= seg + 15 and x[t + 5 + 1] or x[t + 1]
    end
    return { y }
  end }

-- A butterfly across segments of 4: a lane reads a lane of an earlier segment, never a later one.
case { name = "shfl_xor_width4", params = "i32* x, i32* y", grid = 1, block = 32,
  source = [[
__device__ void shfl_xor_width4(const int *x, int *y)
{
    y[threadIdx.x] = __shfl_xor_sync(0xffffffffu, x[threadIdx.x], 5, 4);
}]],
  args = { { input = values(32, 6, small_ints(0, 99999)), dtype = "i32" }, { out = 32, dtype = "i32" } },
  ref = function(x)
    local y = {}
    for l = 0, 31 do
      local j = bit.bxor(l, 5)
      y[l + 1] = j <= (l - l % 4) + 3 and x[j + 1] or x[l + 1]
    end
    return { y }
  end }

case { name = "shfl_double", params = "f64* x, f64* y", grid = 2, block = 32,
  source = [[
__device__ void shfl_double(const double *x, double *y)
{
    const int i = blockIdx.x * 32 + threadIdx.x;
    y[i] = __shfl_sync(0xffffffffu, x[i], 31 - threadIdx.x);
}]],
  args = { { input = values(64, 7, function(_, r) return r() * 1e6 - 5e5 end), dtype = "f64" }, { out = 64, dtype = "f64" } },
  ref = function(x)
    local y = {}
    for b = 0, 1 do for l = 0, 31 do y[b * 32 + l + 1] = x[b * 32 + 31 - l + 1] end end
    return { y }
  end }

case { name = "shfl_half", params = "f16* x, f16* y", grid = 1, block = 64,
  source = [[
__device__ void shfl_half(const __half *x, __half *y)
{
    y[threadIdx.x] = __shfl_xor_sync(0xffffffffu, x[threadIdx.x], 1);
}]],
  args = { { input = values(64, 8, eighths(-64, 64)), dtype = "f16" }, { out = 64, dtype = "f16" } },
  ref = function(x)
    local y = {}
    for t = 0, 63 do y[t + 1] = x[bit.bxor(t, 1) + 1] end
    return { y }
  end }

case { name = "warp_scan_shfl_up", params = "i32* x, i32* y", grid = 2, block = 64,
  source = [[
__device__ void warp_scan_shfl_up(const int *x, int *y)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32;
    int v = x[i];
    for (int o = 1; o < 32; o *= 2) {
        const int t = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += t;
    }
    y[i] = v;
}]],
  args = { { input = values(128, 9, small_ints(-50, 50)), dtype = "i32" }, { out = 128, dtype = "i32" } },
  ref = function(x)
    local y = {}
    for w = 0, 3 do
      local s = 0
      for l = 1, 32 do s = s + x[w * 32 + l]; y[w * 32 + l] = s end
    end
    return { y }
  end }

-- The fast and explicitly rounded float intrinsics, each within its documented error of the
-- exact function (CUDA's math API: __expf 2 + 1.16|x| ulps, __logf and __sinf 2^-21.41
-- absolute on these ranges, __fdividef 2 ulps; the _rn forms IEEE-rounded).
case { name = "float_intrinsics", params = "f32* x, f32* y", grid = 1, block = 64, rtol = 2e-6, atol = 2e-6,
  source = [[
__device__ void float_intrinsics(const float *x, float *y)
{
    const int i = threadIdx.x;
    const float v = x[i];
    y[i] = __expf(v);
    y[64 + i] = __logf(v + 2.0f);
    y[128 + i] = __sinf(v) + __cosf(v);
    y[192 + i] = __fdividef(v, v + 3.0f);
    y[256 + i] = __frcp_rn(v + 3.0f);
    y[320 + i] = __fmaf_rn(v, v, __fmul_rn(v, 0.5f));
    y[384 + i] = __fsqrt_rn(v + 1.5f) + __powf(v + 2.0f, 1.5f);
}]],
  args = { { input = values(64, 31, uniform()), dtype = "f32" }, { out = 448, dtype = "f32" } },
  ref = function(x)
    local y = {}
    for i = 1, 64 do
      local v = x[i]
      y[i], y[64 + i], y[128 + i] = math.exp(v), math.log(v + 2), math.sin(v) + math.cos(v)
      y[192 + i], y[256 + i], y[320 + i] = v / (v + 3), 1 / (v + 3), v * v + v * 0.5
      y[384 + i] = math.sqrt(v + 1.5) + (v + 2) ^ 1.5
    end
    return { y }
  end }

case { name = "ballot_popc", params = "f32* x, i32* y", grid = 2, block = 64,
  source = [[
__device__ void ballot_popc(const float *x, int *y)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned b = __ballot_sync(0xffffffffu, x[i] > 0.0f);
    if (threadIdx.x % 32 == 0) {
        y[2 * (i / 32)] = (int)b;
        y[2 * (i / 32) + 1] = __popc(b);
    }
}]],
  args = { { input = values(128, 10, uniform()), dtype = "f32" }, { out = 8, dtype = "i32" } },
  ref = function(x)
    local y = {}
    for w = 0, 3 do
      local mask, count = 0, 0
      for l = 0, 31 do
        if x[w * 32 + l + 1] > 0 then mask, count = bit.bor(mask, bit.lshift(1, l)), count + 1 end
      end
      y[2 * w + 1], y[2 * w + 2] = i32(mask), count
    end
    return { y }
  end }

case { name = "any_all", params = "f32* x, i32* y", grid = 1, block = 128,
  source = [[
__device__ void any_all(const float *x, int *y)
{
    const float v = x[threadIdx.x];
    const int any = __any_sync(0xffffffffu, v > 0.9f), all = __all_sync(0xffffffffu, v > -0.95f);
    if (threadIdx.x % 32 == 0) {
        y[2 * (threadIdx.x / 32)] = any;
        y[2 * (threadIdx.x / 32) + 1] = all;
    }
}]],
  args = { { input = values(128, 11, uniform()), dtype = "f32" }, { out = 8, dtype = "i32" } },
  ref = function(x)
    local y = {}
    for w = 0, 3 do
      local any, all = 0, 1
      for l = 1, 32 do
        local v = x[w * 32 + l]
        if v > f32(0.9) then any = 1 end
        if not (v > f32(-0.95)) then all = 0 end
      end
      y[2 * w + 1], y[2 * w + 2] = any, all
    end
    return { y }
  end }

case { name = "match_any", params = "i32* x, i32* y", grid = 1, block = 64,
  source = [[
__device__ void match_any(const int *x, int *y)
{
    y[threadIdx.x] = (int)__match_any_sync(0xffffffffu, x[threadIdx.x]);
}]],
  args = { { input = values(64, 12, small_ints(0, 3)), dtype = "i32" }, { out = 64, dtype = "i32" } },
  ref = function(x)
    local y = {}
    for t = 0, 63 do
      local w, m = math.floor(t / 32), 0
      for l = 0, 31 do if x[w * 32 + l + 1] == x[t + 1] then m = bit.bor(m, bit.lshift(1, l)) end end
      y[t + 1] = i32(m)
    end
    return { y }
  end }

case { name = "match_all", params = "i32* x, i32* y", grid = 1, block = 64,
  source = [[
__device__ void match_all(const int *x, int *y)
{
    int pred = -1;
    const unsigned m = __match_all_sync(0xffffffffu, x[threadIdx.x], &pred);
    y[2 * threadIdx.x] = (int)m;
    y[2 * threadIdx.x + 1] = pred;
}]],
  args = { { input = values(64, 13, function(i) return i <= 32 and 42 or i % 3 end), dtype = "i32" },
    { out = 128, dtype = "i32" } },
  ref = function()
    local y = {}
    for t = 0, 63 do
      local same = t < 32
      y[2 * t + 1], y[2 * t + 2] = same and -1 or 0, same and 1 or 0
    end
    return { y }
  end }

case { name = "warp_reduce_int", params = "i32* x, i32* y", grid = 1, block = 96,
  source = [[
__device__ void warp_reduce_int(const int *x, int *y)
{
    const int v = x[threadIdx.x];
    const int s = __reduce_add_sync(0xffffffffu, v), lo = __reduce_min_sync(0xffffffffu, v);
    const int hi = __reduce_max_sync(0xffffffffu, v);
    const unsigned o = __reduce_or_sync(0xffffffffu, (unsigned)v & 0xffu);
    if (threadIdx.x % 32 == 5) {
        const int w = threadIdx.x / 32;
        y[4 * w] = s, y[4 * w + 1] = lo, y[4 * w + 2] = hi, y[4 * w + 3] = (int)o;
    }
}]],
  args = { { input = values(96, 14, small_ints(-100000, 100000)), dtype = "i32" }, { out = 12, dtype = "i32" } },
  ref = function(x)
    local y = {}
    for w = 0, 2 do
      local s, lo, hi, o = 0, math.huge, -math.huge, 0
      for l = 1, 32 do
        local v = x[w * 32 + l]
        s, lo, hi, o = s + v, math.min(lo, v), math.max(hi, v), bit.bor(o, bit.band(v, 0xff))
      end
      y[4 * w + 1], y[4 * w + 2], y[4 * w + 3], y[4 * w + 4] = s, lo, hi, o
    end
    return { y }
  end }

-- Lanes of a warp that take a branch alone learn, at __activemask, that they are the ones there.
case { name = "activemask_branch", params = "i32* y", grid = 1, block = 64,
  source = [[
__device__ void activemask_branch(int *y)
{
    if (threadIdx.x % 3 == 0) y[threadIdx.x] = (int)__activemask();
}]],
  args = { { out = 64, dtype = "i32" } },
  ref = function()
    local y = {}
    for t = 0, 63 do
      if t % 3 == 0 then
        local m, w = 0, math.floor(t / 32)
        for l = 0, 31 do if (w * 32 + l) % 3 == 0 then m = bit.bor(m, bit.lshift(1, l)) end end
        y[t + 1] = i32(m)
      else
        y[t + 1] = POISON
      end
    end
    return { y }
  end }

case { name = "syncwarp_halves", params = "f32* x, f32* y", grid = 1, block = 32,
  source = [[
__device__ void syncwarp_halves(const float *x, float *y)
{
    __shared__ float s[32];
    const unsigned lane = threadIdx.x, half = lane < 16 ? 0x0000ffffu : 0xffff0000u, base = lane & 16u;
    s[lane] = x[lane];
    __syncwarp(half);
    y[lane] = s[base + 15u - (lane & 15u)];
}]],
  args = { { input = values(32, 15, uniform()), dtype = "f32" }, { out = 32, dtype = "f32" } },
  ref = function(x)
    local y = {}
    for l = 0, 31 do
      local base = l >= 16 and 16 or 0
      y[l + 1] = x[base + 15 - (l - base) + 1]
    end
    return { y }
  end }

case { name = "block_reduce", params = "f32* x, f32* y", grid = 3, block = 256,
  source = [[
__device__ void block_reduce(const float *x, float *y)
{
    __shared__ float sums[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x / 32) ? sums[lane] : 0.0f;
        for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0) y[blockIdx.x] = v;
    }
}]],
  args = { { input = values(768, 16, uniform()), dtype = "f32" }, { out = 3, dtype = "f32" } },
  ref = function(x)
    local y = {}
    for b = 0, 2 do
      local sums = {}
      for w = 0, 7 do sums[w + 1] = butterfly(slice(x, b * 256 + w * 32 + 1, 32), 32, add32) end
      y[b + 1] = shfl_down_tree(sums)
    end
    return { y }
  end }

case { name = "block_scan", params = "i32* x, i32* y", grid = 2, block = 128,
  source = [[
__device__ void block_scan(const int *x, int *y)
{
    __shared__ int buf[2][128];
    const int t = threadIdx.x;
    int in = 0;
    buf[0][t] = x[blockIdx.x * 128 + t];
    __syncthreads();
    for (int o = 1; o < 128; o *= 2) {
        buf[1 - in][t] = t >= o ? buf[in][t] + buf[in][t - o] : buf[in][t];
        in = 1 - in;
        __syncthreads();
    }
    y[blockIdx.x * 128 + t] = buf[in][t];
}]],
  args = { { input = values(256, 17, small_ints(-9, 9)), dtype = "i32" }, { out = 256, dtype = "i32" } },
  ref = function(x)
    local y = {}
    for b = 0, 1 do
      local s = 0
      for t = 1, 128 do s = s + x[b * 128 + t]; y[b * 128 + t] = s end
    end
    return { y }
  end }

case { name = "shared_histogram", params = "i32* x, i32* h, i32 n", grid = 4, block = 128,
  source = [[
__device__ void shared_histogram(const int *x, int *h, int n)
{
    __shared__ int bins[16];
    if (threadIdx.x < 16) bins[threadIdx.x] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) atomicAdd(&bins[x[i] & 15], 1);
    __syncthreads();
    if (threadIdx.x < 16) atomicAdd(&h[threadIdx.x], bins[threadIdx.x]);
}]],
  args = { { input = values(3000, 18, small_ints(0, 1000)), dtype = "i32" }, { input = values(16, 0, function() return 0 end), dtype = "i32" },
    3000 },
  outputs = { 2 },
  ref = function(x)
    local h = {}
    for b = 1, 16 do h[b] = 0 end
    for _, v in ipairs(x) do h[bit.band(v, 15) + 1] = h[bit.band(v, 15) + 1] + 1 end
    return { h }
  end }

case { name = "atomic_add_float", params = "f32* x, f32* total", grid = 8, block = 128,
  source = [[
__device__ void atomic_add_float(const float *x, float *total)
{
    atomicAdd(total, x[blockIdx.x * blockDim.x + threadIdx.x]);
}]],
  args = { { input = values(1024, 19, small_ints(-100, 100)), dtype = "f32" }, { input = { 0.5 }, dtype = "f32" } },
  outputs = { 2 },
  ref = function(x)
    local s = 0.5
    for _, v in ipairs(x) do s = s + v end
    return { { s } }
  end }

case { name = "atomic_min_max", params = "i32* x, i32* m", grid = 4, block = 64,
  source = [[
__device__ void atomic_min_max(const int *x, int *m)
{
    const int v = x[blockIdx.x * blockDim.x + threadIdx.x];
    atomicMin(&m[0], v);
    atomicMax(&m[1], v);
    atomicOr((unsigned *)&m[2], 1u << (v & 31));
}]],
  args = { { input = values(256, 20, small_ints(-1000000, 1000000)), dtype = "i32" },
    { input = { 2147483647, -2147483648, 0 }, dtype = "i32" } },
  outputs = { 2 },
  ref = function(x)
    local lo, hi, bits = math.huge, -math.huge, 0
    for _, v in ipairs(x) do lo, hi, bits = math.min(lo, v), math.max(hi, v), bit.bor(bits, bit.lshift(1, bit.band(v, 31))) end
    return { { lo, hi, i32(bits) } }
  end }

case { name = "atomic_cas_max", params = "f32* x, f32* m", grid = 4, block = 64,
  source = [[
__device__ void atomic_cas_max(const float *x, float *m)
{
    const float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    int *p = (int *)m, old = *p;
    while (__int_as_float(old) < v) {
        const int seen = atomicCAS(p, old, __float_as_int(v));
        if (seen == old) break;
        old = seen;
    }
}]],
  args = { { input = values(256, 21, uniform()), dtype = "f32" }, { input = { -5 }, dtype = "f32" } },
  outputs = { 2 },
  ref = function(x)
    local hi = -5
    for _, v in ipairs(x) do hi = math.max(hi, v) end
    return { { hi } }
  end }

-- Every thread draws a ticket; each ticket 0 to n - 1 is drawn once, whatever the order.
case { name = "atomic_tickets", params = "i32* counter, i32* y", grid = 6, block = 96,
  source = [[
__device__ void atomic_tickets(int *counter, int *y)
{
    const unsigned t = atomicInc((unsigned *)counter, 0xffffffffu);
    y[t] = blockIdx.x * blockDim.x + threadIdx.x;
}]],
  args = { { input = { 0 }, dtype = "i32" }, { out = 576, dtype = "i32" } },
  outputs = { 1, 2 }, sorted = { [2] = true },
  ref = function()
    local y = {}
    for i = 1, 576 do y[i] = i - 1 end
    return { { 576 }, y }
  end }

case { name = "atomic_add_double", params = "f64* x, f64* total", grid = 4, block = 128,
  source = [[
__device__ void atomic_add_double(const double *x, double *total)
{
    atomicAdd(&total[threadIdx.x % 4], x[blockIdx.x * blockDim.x + threadIdx.x]);
}]],
  args = { { input = values(512, 22, function(_, r) return math.floor(r() * 2 ^ 20) - 2 ^ 19 end), dtype = "f64" },
    { input = { 0, 1, 2, 3 }, dtype = "f64" } },
  outputs = { 2 },
  ref = function(x)
    local s = { 0, 1, 2, 3 }
    for i, v in ipairs(x) do s[(i - 1) % 4 + 1] = s[(i - 1) % 4 + 1] + v end
    return { s }
  end }

-- atomicExch hands each thread the value before it: the old values and the final one are the
-- first value and every thread's, once each.
case { name = "atomic_exchange", params = "i32* slot, i32* y", grid = 2, block = 64,
  source = [[
__device__ void atomic_exchange(int *slot, int *y)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = atomicExch(slot, i + 1000);
}]],
  args = { { input = { -1 }, dtype = "i32" }, { out = 128, dtype = "i32" } },
  outputs = { 1, 2 }, together = true,
  ref = function()
    local all = { -1 }
    for i = 0, 127 do all[#all + 1] = i + 1000 end
    return all
  end }

case { name = "cg_tile_reduce", params = "f32* x, f32* y", grid = 2, block = 64,
  source = [[
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
__device__ void cg_tile_reduce(const float *x, float *y)
{
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
    const float s = cg::reduce(tile, x[blockIdx.x * 64 + block.thread_rank()], cg::plus<float>());
    if (tile.thread_rank() == 0) y[blockIdx.x * 4 + tile.meta_group_rank()] = s;
}]],
  args = { { input = values(128, 23, uniform()), dtype = "f32" }, { out = 8, dtype = "f32" } },
  ref = function(x)
    local y = {}
    for t = 0, 7 do y[t + 1] = butterfly(slice(x, t * 16 + 1, 16), 16, add32) end
    return { y }
  end }

case { name = "cg_scans", params = "i32* x, i32* inc, i32* exc, f32* fmax", grid = 1, block = 64,
  source = [[
#include <cooperative_groups.h>
#include <cooperative_groups/scan.h>
namespace cg = cooperative_groups;
__device__ void cg_scans(const int *x, int *inc, int *exc, float *fmax)
{
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
    const int v = x[threadIdx.x];
    inc[threadIdx.x] = cg::inclusive_scan(warp, v);
    exc[threadIdx.x] = cg::exclusive_scan(warp, v);
    fmax[threadIdx.x] = cg::inclusive_scan(warp, (float)v, cg::greater<float>());
}]],
  args = { { input = values(64, 24, small_ints(-20, 20)), dtype = "i32" }, { out = 64, dtype = "i32" },
    { out = 64, dtype = "i32" }, { out = 64, dtype = "f32" } },
  ref = function(x)
    local inc, exc, mx = {}, {}, {}
    for w = 0, 1 do
      local s, m = 0, -math.huge
      for l = 1, 32 do
        local v = x[w * 32 + l]
        exc[w * 32 + l] = s
        s, m = s + v, math.max(m, v)
        inc[w * 32 + l], mx[w * 32 + l] = s, m
      end
    end
    return { inc, exc, mx }
  end }

case { name = "cg_tile_votes", params = "f32* x, f32* y, i32* votes", grid = 1, block = 32,
  source = [[
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__device__ void cg_tile_votes(const float *x, float *y, int *votes)
{
    cg::thread_block_tile<4> t = cg::tiled_partition<4>(cg::this_thread_block());
    const float v = x[threadIdx.x];
    y[threadIdx.x] = t.shfl(v, 3 - (int)t.thread_rank());
    const unsigned b = t.ballot(v > 0.0f);
    if (t.thread_rank() == 0) {
        votes[3 * t.meta_group_rank()] = (int)b;
        votes[3 * t.meta_group_rank() + 1] = t.any(v > 0.5f);
        votes[3 * t.meta_group_rank() + 2] = t.all(v > -0.5f);
    } else {
        t.any(v > 0.5f);
        t.all(v > -0.5f);
    }
}]],
  args = { { input = values(32, 25, uniform()), dtype = "f32" }, { out = 32, dtype = "f32" }, { out = 24, dtype = "i32" } },
  ref = function(x)
    local y, votes = {}, {}
    for g = 0, 7 do
      local b, any, all = 0, 0, 1
      for r = 0, 3 do
        local v = x[g * 4 + r + 1]
        y[g * 4 + r + 1] = x[g * 4 + 3 - r + 1]
        if v > 0 then b = bit.bor(b, bit.lshift(1, r)) end
        if v > 0.5 then any = 1 end
        if not (v > -0.5) then all = 0 end
      end
      votes[3 * g + 1], votes[3 * g + 2], votes[3 * g + 3] = b, any, all
    end
    return { y, votes }
  end }

case { name = "cg_block_reverse", params = "i32* x, i32* y", grid = 3, block = 256,
  source = [[
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__device__ void cg_block_reverse(const int *x, int *y)
{
    __shared__ int s[256];
    cg::thread_block b = cg::this_thread_block();
    const unsigned r = (unsigned)b.thread_rank();
    s[r] = x[b.group_index().x * b.size() + r];
    b.sync();
    y[b.group_index().x * b.size() + r] = s[b.size() - 1 - r];
}]],
  args = { { input = values(768, 26, small_ints(0, 1000000)), dtype = "i32" }, { out = 768, dtype = "i32" } },
  ref = function(x)
    local y = {}
    for b = 0, 2 do for r = 0, 255 do y[b * 256 + r + 1] = x[b * 256 + 255 - r + 1] end end
    return { y }
  end }

-- C (16 x 16, f32) = A (16 x 16, row-major) B (16 x 16, column-major) + C, inputs in eighths so
-- that every sum is exact on both devices.
local function matmul_ref(a, b, c, m, n, k, a_row, b_row)
  local out = {}
  for i = 0, m - 1 do
    for j = 0, n - 1 do
      local s = c[i * n + j + 1]
      for p = 0, k - 1 do
        local av = a_row and a[i * k + p + 1] or a[p * m + i + 1]
        local bv = b_row and b[p * n + j + 1] or b[j * k + p + 1]
        s = s + av * bv
      end
      out[i * n + j + 1] = s
    end
  end
  return out
end

case { name = "wmma_f16", params = "f16* a, f16* b, f32* c", grid = 1, block = 32,
  source = [[
#include <mma.h>
using namespace nvcuda;
__device__ void wmma_f16(const __half *a, const __half *b, float *c)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::load_matrix_sync(fc, c, 16, wmma::mem_row_major);
    wmma::mma_sync(fc, fa, fb, fc);
    for (int i = 0; i < fc.num_elements; ++i) fc.x[i] *= 2.0f;
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}]],
  args = { { input = values(256, 27, eighths(-16, 16)), dtype = "f16" }, { input = values(256, 28, eighths(-16, 16)), dtype = "f16" },
    { input = values(256, 29, eighths(-64, 64)), dtype = "f32" } },
  outputs = { 3 },
  ref = function(a, b, c)
    local d = matmul_ref(a, b, c, 16, 16, 16, true, false)
    for i = 1, 256 do d[i] = 2 * d[i] end
    return { d }
  end }

case { name = "wmma_bf16_32x8", params = "bf16* a, bf16* b, f32* c", grid = 1, block = 32,
  source = [[
#include <mma.h>
using namespace nvcuda;
__device__ void wmma_bf16_32x8(const __nv_bfloat16 *a, const __nv_bfloat16 *b, float *c)
{
    wmma::fragment<wmma::matrix_a, 32, 8, 16, __nv_bfloat16, wmma::col_major> fa;
    wmma::fragment<wmma::matrix_b, 32, 8, 16, __nv_bfloat16, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 32, 8, 16, float> fc;
    wmma::fill_fragment(fc, 0.25f);
    wmma::load_matrix_sync(fa, a, 32);
    wmma::load_matrix_sync(fb, b, 8);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 32, wmma::mem_col_major);
}]],
  args = { { input = values(512, 30, eighths(-16, 16)), dtype = "bf16" }, { input = values(128, 31, eighths(-16, 16)), dtype = "bf16" },
    { out = 256, dtype = "f32" } },
  ref = function(a, b)
    local c = {}
    for i = 1, 256 do c[i] = 0.25 end
    local d = matmul_ref(a, b, c, 32, 8, 16, false, true) -- row-major 32 x 8
    local col = {}
    for i = 0, 31 do for j = 0, 7 do col[j * 32 + i + 1] = d[i * 8 + j + 1] end end
    return { col }
  end }

case { name = "wmma_tf32", params = "f32* a, f32* b, f32* c", grid = 1, block = 32,
  source = [[
#include <mma.h>
using namespace nvcuda;
__device__ void wmma_tf32(const float *a, const float *b, float *c)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, a, 8);
    wmma::load_matrix_sync(fb, b, 16);
    for (int i = 0; i < fa.num_elements; ++i) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
    for (int i = 0; i < fb.num_elements; ++i) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}]],
  args = { { input = values(128, 32, eighths(-40, 40)), dtype = "f32" }, { input = values(128, 33, eighths(-40, 40)), dtype = "f32" },
    { out = 256, dtype = "f32" } },
  ref = function(a, b)
    local c = {}
    for i = 1, 256 do c[i] = 0 end
    return { matmul_ref(a, b, c, 16, 16, 8, true, true) }
  end }

case { name = "wmma_f64", params = "f64* a, f64* b, f64* c", grid = 1, block = 32,
  source = [[
#include <mma.h>
using namespace nvcuda;
__device__ void wmma_f64(const double *a, const double *b, double *c)
{
    wmma::fragment<wmma::matrix_a, 8, 8, 4, double, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 8, 8, 4, double, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 8, 8, 4, double> fc;
    wmma::load_matrix_sync(fa, a, 4);
    wmma::load_matrix_sync(fb, b, 4);
    wmma::load_matrix_sync(fc, c, 8, wmma::mem_row_major);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 8, wmma::mem_row_major);
}]],
  args = { { input = values(32, 34, eighths(-99, 99)), dtype = "f64" }, { input = values(32, 35, eighths(-99, 99)), dtype = "f64" },
    { input = values(64, 36, eighths(-99, 99)), dtype = "f64" } },
  outputs = { 3 },
  ref = function(a, b, c) return { matmul_ref(a, b, c, 8, 8, 4, true, false) } end }

case { name = "tiled_matmul", params = "f32* a, f32* b, f32* c, i32 n", grid = { 3, 3 }, block = { 16, 16 },
  source = [[
__device__ void tiled_matmul(const float *a, const float *b, float *c, int n)
{
    __shared__ float ta[16][16], tb[16][16];
    const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    float s = 0.0f;
    for (int k0 = 0; k0 < n; k0 += 16) {
        ta[threadIdx.y][threadIdx.x] = row < n && k0 + (int)threadIdx.x < n ? a[row * n + k0 + threadIdx.x] : 0.0f;
        tb[threadIdx.y][threadIdx.x] = col < n && k0 + (int)threadIdx.y < n ? b[(k0 + threadIdx.y) * n + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; ++k) s += ta[threadIdx.y][k] * tb[k][threadIdx.x];
        __syncthreads();
    }
    if (row < n && col < n) c[row * n + col] = s;
}]],
  args = { { input = values(40 * 40, 37, small_ints(-8, 8)), dtype = "f32" }, { input = values(40 * 40, 38, small_ints(-8, 8)), dtype = "f32" },
    { out = 1600, dtype = "f32" }, 40 },
  ref = function(a, b)
    local c = {}
    for i = 1, 1600 do c[i] = 0 end
    return { matmul_ref(a, b, c, 40, 40, 40, true, true) }
  end }

-- The issue's example: a 3x3 box blur through a shared tile with a one-pixel halo.
case { name = "box_blur", params = "f32* x, f32* y, i32 h, i32 w", grid = { 3, 2 }, block = { 16, 16 },
  source = [[
__device__ void box_blur(const float *x, float *y, int h, int w)
{
    __shared__ float tile[18][18];
    const int gx = blockIdx.x * 16 + threadIdx.x, gy = blockIdx.y * 16 + threadIdx.y;
    for (int i = threadIdx.y * 16 + threadIdx.x; i < 18 * 18; i += 256) {
        const int ty = i / 18, tx = i % 18, sy = blockIdx.y * 16 + ty - 1, sx = blockIdx.x * 16 + tx - 1;
        tile[ty][tx] = sy >= 0 && sy < h && sx >= 0 && sx < w ? x[sy * w + sx] : 0.0f;
    }
    __syncthreads();
    if (gx >= w || gy >= h) return;
    float s = 0.0f;
    for (int dy = 0; dy < 3; ++dy)
        for (int dx = 0; dx < 3; ++dx) s += tile[threadIdx.y + dy][threadIdx.x + dx];
    y[gy * w + gx] = s / 9.0f;
}]],
  args = { { input = values(30 * 40, 39, eighths(0, 8)), dtype = "f32" }, { out = 1200, dtype = "f32" }, 30, 40 },
  ref = function(x)
    local y = {}
    for r = 0, 29 do
      for c = 0, 39 do
        local s = 0
        for dy = -1, 1 do
          for dx = -1, 1 do
            local rr, cc = r + dy, c + dx
            if rr >= 0 and rr < 30 and cc >= 0 and cc < 40 then s = s + x[rr * 40 + cc + 1] end
          end
        end
        y[r * 40 + c + 1] = f32(s / 9)
      end
    end
    return { y }
  end }

-- tensor_core.cuh's instructions, lane by lane in PTX's fragment layouts: mma_16816 fed from
-- registers (two k steps, the second accumulating into the first's d), ldmatrix of every count
-- plain and transposed after a cp.async copy to shared memory, and the two together as a matrix
-- kernel uses them. The inputs' products and sums are exact in f32, so the tensor cores' order
-- of summation does not show.
local tensor_core = require("tocha.op").source("tensor_core.cuh")

local MMA_TILE = [[
template <typename T> __device__ unsigned pair_of(const T *p, int lo, int hi)
{
    unsigned short a, b;
    memcpy(&a, p + lo, 2);
    memcpy(&b, p + hi, 2);
    return (unsigned)a | (unsigned)b << 16;
}

// Each warp: d (16 x 8) = a (16 x 32, row-major) x b (32 x 8, row-major) + c, in two k steps.
template <typename T> __device__ void mma_tile(const T *a, const T *b, const float *c, float *d)
{
    const int w = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    a += w * 512, b += w * 256, c += w * 128, d += w * 128;
    float acc[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t], c[(g + 8) * 8 + 2 * t + 1]};
    for (int k0 = 0; k0 < 32; k0 += 16) {
        const unsigned fa[4] = {pair_of(a, g * 32 + k0 + 2 * t, g * 32 + k0 + 2 * t + 1),
                                pair_of(a, (g + 8) * 32 + k0 + 2 * t, (g + 8) * 32 + k0 + 2 * t + 1),
                                pair_of(a, g * 32 + k0 + 2 * t + 8, g * 32 + k0 + 2 * t + 9),
                                pair_of(a, (g + 8) * 32 + k0 + 2 * t + 8, (g + 8) * 32 + k0 + 2 * t + 9)};
        const unsigned fb[2] = {pair_of(b, (k0 + 2 * t) * 8 + g, (k0 + 2 * t + 1) * 8 + g),
                                pair_of(b, (k0 + 2 * t + 8) * 8 + g, (k0 + 2 * t + 9) * 8 + g)};
        tocha::mma_16816<T>(acc, fa, fb, acc);
    }
    d[g * 8 + 2 * t] = acc[0], d[g * 8 + 2 * t + 1] = acc[1];
    d[(g + 8) * 8 + 2 * t] = acc[2], d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}
]]

-- The expected d of mma_tile for `warps` warps.
local function mma_tile_ref(warps)
  return function(a, b, c)
    local d = {}
    for w = 0, warps - 1 do
      local dw = matmul_ref(slice(a, w * 512 + 1, 512), slice(b, w * 256 + 1, 256), slice(c, w * 128 + 1, 128),
        16, 8, 32, true, true)
      for i = 1, 128 do d[w * 128 + i] = f32(dw[i]) end
    end
    return { d }
  end
end

case { name = "mma_16816_f16", params = "f16* a, f16* b, f32* c, f32* d", grid = 2, block = 64,
  source = tensor_core .. MMA_TILE .. [[
__device__ void mma_16816_f16(const __half *a, const __half *b, const float *c, float *d) { mma_tile(a, b, c, d); }]],
  args = { { input = values(2048, 41, eighths(-16, 16)), dtype = "f16" }, { input = values(1024, 42, eighths(-16, 16)), dtype = "f16" },
    { input = values(512, 43, eighths(-64, 64)), dtype = "f32" }, { out = 512, dtype = "f32" } },
  ref = mma_tile_ref(4) }

case { name = "mma_16816_bf16", params = "bf16* a, bf16* b, f32* c, f32* d", grid = 1, block = 32,
  source = tensor_core .. MMA_TILE .. [[
__device__ void mma_16816_bf16(const __nv_bfloat16 *a, const __nv_bfloat16 *b, const float *c, float *d)
{
    mma_tile(a, b, c, d);
}]],
  args = { { input = values(512, 44, eighths(-16, 16)), dtype = "bf16" }, { input = values(256, 45, eighths(-16, 16)), dtype = "bf16" },
    { input = values(128, 46, eighths(-64, 64)), dtype = "f32" }, { out = 128, dtype = "f32" } },
  ref = mma_tile_ref(1) }

-- A 16 x 16 f16 tile copied to shared memory by cp.async (a lane a row half), then read back by
-- ldmatrix: x4 over the tile (mma's A fragment), x4 transposed, x2 over column 0's two
-- matrices and x1 over rows 0-7 of columns 8-15; each lane's 11 registers stored as 22 halves.
case { name = "ldmatrix_after_cp_async", params = "f16* x, f16* y", grid = 1, block = 32,
  source = tensor_core .. [[
__device__ void ldmatrix_after_cp_async(const __half *x, __half *y)
{
    __shared__ __align__(16) __half tile[256];
    const int l = threadIdx.x;
    tocha::cp_async16(tile + 8 * l, x + 8 * l);
    tocha::cp_async_commit();
    tocha::cp_async_wait<0>();
    __syncthreads();
    unsigned r[11];
    tocha::ldmatrix<4>(r, tile + (l % 16) * 16 + 8 * (l / 16));
    tocha::ldmatrix<4, true>(r + 4, tile + (l % 16) * 16 + 8 * (l / 16));
    tocha::ldmatrix<2>(r + 8, tile + (l % 16) * 16);
    tocha::ldmatrix<1>(r + 10, tile + (l % 8) * 16 + 8);
    for (int j = 0; j < 11; ++j) memcpy(y + (l * 11 + j) * 2, &r[j], 4);
}]],
  args = { { input = values(256, 47, small_ints(-1000, 1000)), dtype = "f16" }, { out = 32 * 22, dtype = "f16" } },
  ref = function(x)
    local function at(row, col) return x[row * 16 + col + 1] end
    local y = {}
    for l = 0, 31 do
      local g, t = math.floor(l / 4), l % 4
      local function put(j, e, v) y[(l * 11 + j) * 2 + e + 1] = v end
      for e = 0, 1 do
        for j = 0, 3 do
          local r0, c0 = 8 * (j % 2), 8 * math.floor(j / 2)
          put(j, e, at(r0 + g, c0 + 2 * t + e))
          put(4 + j, e, at(r0 + 2 * t + e, c0 + g))
        end
        for j = 0, 1 do put(8 + j, e, at(8 * j + g, 2 * t + e)) end
        put(10, e, at(g, 8 + 2 * t + e))
      end
    end
    return { y }
  end }

-- A matrix kernel's inner step: A (16 x 16) and B (16 x 8, row-major k x n) staged in shared
-- memory by cp.async, A's fragment by ldmatrix x4, B's by ldmatrix x2 transposed, then mma.
case { name = "ldmatrix_mma", params = "bf16* a, bf16* b, f32* d", grid = 1, block = 32,
  source = tensor_core .. [[
__device__ void ldmatrix_mma(const __nv_bfloat16 *a, const __nv_bfloat16 *b, float *d)
{
    __shared__ __align__(16) __nv_bfloat16 sa[256], sb[128];
    const int l = threadIdx.x, g = l / 4, t = l % 4;
    tocha::cp_async16(sa + 8 * l, a + 8 * l);
    if (l < 16) tocha::cp_async16(sb + 8 * l, b + 8 * l);
    tocha::cp_async_commit();
    tocha::cp_async_wait<0>();
    __syncthreads();
    unsigned fa[4], fb[2];
    tocha::ldmatrix<4>(fa, sa + (l % 16) * 16 + 8 * (l / 16));
    tocha::ldmatrix<2, true>(fb, sb + (l % 16) * 8);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    tocha::mma_16816<__nv_bfloat16>(acc, fa, fb, acc);
    d[g * 8 + 2 * t] = acc[0], d[g * 8 + 2 * t + 1] = acc[1];
    d[(g + 8) * 8 + 2 * t] = acc[2], d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}]],
  args = { { input = values(256, 48, eighths(-16, 16)), dtype = "bf16" }, { input = values(128, 49, eighths(-16, 16)), dtype = "bf16" },
    { out = 128, dtype = "f32" } },
  ref = function(a, b)
    local c = {}
    for i = 1, 128 do c[i] = 0 end
    local d = matmul_ref(a, b, c, 16, 8, 16, true, true)
    for i = 1, 128 do d[i] = f32(d[i]) end
    return { d }
  end }

-- warpgroup.cuh's wgmma: one warpgroup computes d (64 x 128) = a (64 x 32) x b (32 x 128) + c in
-- two k steps, each operand staged in shared memory in the 128-byte swizzled layout, K-major or
-- MN-major (TA, TB), read through the instruction's descriptors; the accumulators in and out of
-- their register layout. Exact inputs, as above.
local warpgroup = tensor_core .. require("tocha.op").source("warpgroup.cuh")
local WG_TILE = [[
template <typename T, int TA, int TB> __device__ void wg_tile(const T *a, const T *b, const float *c, float *d)
{
    // A: K-major, row m's 32 k in the first 64 bytes of its 128; MN-major, k row j holds the 64 m.
    // B: K-major, row n's 32 k likewise (128 rows); MN-major, two atoms of 64 n (32 k rows each).
    __shared__ __align__(1024) unsigned char sa[8192], sb[16384];
    const int t = threadIdx.x;
    for (int e = t; e < 64 * 32; e += 128) {
        const int m = e / 32, k = e % 32;
        const int off = TA ? tocha::swizzle128(k, m / 8) + (m % 8) * 2 : tocha::swizzle128(m, k / 8) + (k % 8) * 2;
        memcpy(sa + off, a + e, 2);
    }
    for (int e = t; e < 32 * 128; e += 128) {
        const int k = e / 128, n = e % 128;
        const int off = TB ? (n / 64) * 4096 + tocha::swizzle128(k, n % 64 / 8) + (n % 8) * 2
                           : tocha::swizzle128(n, k / 8) + (k % 8) * 2;
        memcpy(sb + off, b + e, 2);
    }
    tocha::fence_async_shared();
    __syncthreads();
    const int w = t / 32, g = t % 32 / 4, q = t % 4;
    float acc[64];
    for (int j = 0; j < 16; ++j)
        for (int i = 0; i < 4; ++i) acc[4 * j + i] = c[(16 * w + g + 8 * (i / 2)) * 128 + 8 * j + 2 * q + i % 2];
    tocha::wgmma_fence();
    for (int kk = 0; kk < 2; ++kk)
        tocha::wgmma<T, 128, TA, TB>(acc, sa + (TA ? 2048 * kk : 32 * kk), 4096, 1024, sb + (TB ? 2048 * kk : 32 * kk),
                                     4096, 1024);
    tocha::wgmma_commit();
    tocha::wgmma_wait<0>();
    for (int j = 0; j < 16; ++j)
        for (int i = 0; i < 4; ++i) d[(16 * w + g + 8 * (i / 2)) * 128 + 8 * j + 2 * q + i % 2] = acc[4 * j + i];
}
]]

local function wg_tile_ref(a, b, c)
  local d = matmul_ref(a, b, c, 64, 128, 32, true, true)
  for i = 1, #d do d[i] = f32(d[i]) end
  return { d }
end

for i, v in ipairs { { "f16", "__half", 0, 0 }, { "f16", "__half", 1, 1 }, { "bf16", "__nv_bfloat16", 0, 1 },
  { "bf16", "__nv_bfloat16", 1, 0 } } do
  local dt, ct, ta, tb = v[1], v[2], v[3], v[4]
  local name = ("wgmma_%s_%s_%s"):format(dt, ta == 1 and "mn" or "k", tb == 1 and "mn" or "k")
  case { name = name, params = ("%s* a, %s* b, f32* c, f32* d"):format(dt, dt), grid = 1, block = 128,
    source = warpgroup .. WG_TILE .. ([[
__device__ void %s(const %s *a, const %s *b, const float *c, float *d) { wg_tile<%s, %d, %d>(a, b, c, d); }]])
      :format(name, ct, ct, ct, ta, tb),
    args = { { input = values(64 * 32, 60 + i, eighths(-16, 16)), dtype = dt },
      { input = values(32 * 128, 70 + i, eighths(-16, 16)), dtype = dt },
      { input = values(64 * 128, 80 + i, eighths(-64, 64)), dtype = "f32" }, { out = 64 * 128, dtype = "f32" } },
    ref = wg_tile_ref }
end

-- mbarrier.cuh: a producer warpgroup copies 12 slices of x (128 floats each) by cp.async into a
-- ring of 3 stages, each stage's arrival made when its copies land (cp_async_arrive); a consumer
-- warpgroup waits for each slice by phase, adds its element of it, and frees the stage
-- (mbarrier_arrive) for the producer, who waits for that before refilling it. No __syncthreads
-- after the barriers' set-up: the hand-over is the barriers' alone.
case { name = "mbarrier_ring", params = "f32* x, f32* y", grid = 2, block = 256,
  source = tensor_core .. require("tocha.op").source("mbarrier.cuh") .. [[
__device__ void mbarrier_ring(const float *x, float *y)
{
    __shared__ __align__(16) float stage[3][128];
    __shared__ __align__(8) unsigned long long full[3], empty[3];
    const int t = threadIdx.x % 128;
    if (threadIdx.x == 0)
        for (int s = 0; s < 3; ++s) tocha::mbarrier_init(&full[s], 32), tocha::mbarrier_init(&empty[s], 128);
    __syncthreads();
    x += blockIdx.x * 12 * 128;
    if (threadIdx.x < 128) { // the producer: 32 threads copy a slice, 16 bytes each
        for (int i = 0; i < 12; ++i) {
            const int s = i % 3;
            if (t < 32) {
                tocha::mbarrier_wait(&empty[s], (i / 3 + 1) & 1); // free: the first round at once
                tocha::cp_async16(&stage[s][4 * t], x + i * 128 + 4 * t);
                tocha::cp_async_arrive(&full[s]);
            }
        }
    } else { // the consumer
        float sum = 0.0f;
        for (int i = 0; i < 12; ++i) {
            const int s = i % 3;
            tocha::mbarrier_wait(&full[s], (i / 3) & 1);
            sum += stage[s][t] * (float)(i + 1);
            tocha::mbarrier_arrive(&empty[s]);
        }
        y[blockIdx.x * 128 + t] = sum;
    }
}]],
  args = { { input = values(2 * 12 * 128, 90, small_ints(-100, 100)), dtype = "f32" }, { out = 256, dtype = "f32" } },
  ref = function(x)
    local y = {}
    for b = 0, 1 do
      for t = 0, 127 do
        local sum = 0
        for i = 0, 11 do sum = f32(sum + x[b * 1536 + i * 128 + t + 1] * (i + 1)) end
        y[b * 128 + t + 1] = sum
      end
    end
    return { y }
  end }

case { name = "syncthreads_count_compact", params = "f32* x, i32* counts", grid = 4, block = 128,
  source = [[
__device__ void syncthreads_count_compact(const float *x, int *counts)
{
    const float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    const int kept = __syncthreads_count(v > 0.25f);
    const int both = __syncthreads_and(v < 1.0f) + 2 * __syncthreads_or(v < -0.99f);
    if (threadIdx.x == 0) counts[2 * blockIdx.x] = kept, counts[2 * blockIdx.x + 1] = both;
}]],
  args = { { input = values(512, 40, uniform()), dtype = "f32" }, { out = 8, dtype = "i32" } },
  ref = function(x)
    local y = {}
    for b = 0, 3 do
      local kept, all_below, any_low = 0, 1, 0
      for t = 1, 128 do
        local v = x[b * 128 + t]
        if v > 0.25 then kept = kept + 1 end
        if not (v < 1) then all_below = 0 end
        if v < f32(-0.99) then any_low = 1 end
      end
      y[2 * b + 1], y[2 * b + 2] = kept, all_below + 2 * any_low
    end
    return { y }
  end }

-- f32 atomicAdd flushes subnormals to zero on global memory and keeps them on shared memory.
case { name = "atomic_add_subnormal", params = "f32* g, f32* s_out, f32 v", grid = 1, block = 2,
  source = [[
__device__ void atomic_add_subnormal(float *g, float *s_out, float v)
{
    __shared__ float s;
    if (threadIdx.x == 0) s = 0.0f;
    __syncthreads();
    atomicAdd(&s, v);
    atomicAdd(g, v);
    __syncthreads();
    if (threadIdx.x == 0) s_out[0] = s;
}]],
  args = { { input = { 0 }, dtype = "f32" }, { out = 1, dtype = "f32" }, 1e-40 },
  outputs = { 1, 2 },
  ref = function() return { { 0 }, { f32(f32(1e-40) * 2) } } end }

-- A lock in shared memory that every thread takes in turn (the warp's lanes each on their own
-- turn, as independent thread scheduling allows), guarding a read-modify-write of a sum.
case { name = "shared_spin_lock", params = "i32* x, i32* y", grid = 2, block = 64,
  source = [[
__device__ void shared_spin_lock(const int *x, int *y)
{
    __shared__ int lock;
    __shared__ int sum;
    if (threadIdx.x == 0) lock = 0, sum = 0;
    __syncthreads();
    bool done = false;
    while (!done) {
        if (atomicCAS(&lock, 0, 1) == 0) {
            // a read and a write of its own, atomic each but not together: the lock makes the pair so
            const int seen = atomicAdd(&sum, 0);
            atomicExch(&sum, seen + x[blockIdx.x * blockDim.x + threadIdx.x]);
            __threadfence_block();
            atomicExch(&lock, 0);
            done = true;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) y[blockIdx.x] = sum;
}]],
  args = { { input = values(128, 43, small_ints(-1000, 1000)), dtype = "i32" }, { out = 2, dtype = "i32" } },
  ref = function(x)
    local y = { 0, 0 }
    for i = 1, 128 do y[math.floor((i - 1) / 64) + 1] = y[math.floor((i - 1) / 64) + 1] + x[i] end
    return { y }
  end }

-- Thread 0 waits for a flag that the block's last thread raises: it spins (with __nanosleep)
-- until the later thread has run.
case { name = "flag_wait", params = "i32* y", grid = 3, block = 128,
  source = [[
__device__ void flag_wait(int *y)
{
    __shared__ int flag;
    __shared__ int value;
    if (threadIdx.x == 0) flag = 0;
    __syncthreads();
    if (threadIdx.x == blockDim.x - 1) {
        atomicExch(&value, 1000 + blockIdx.x);
        __threadfence_block();
        atomicExch(&flag, 1);
    }
    if (threadIdx.x == 0) {
        while (atomicAdd(&flag, 0) == 0) __nanosleep(100);
        y[blockIdx.x] = atomicAdd(&value, 0);
    }
}]],
  args = { { out = 3, dtype = "i32" } },
  ref = function() return { { 1000, 1001, 1002 } } end }

-- Dynamic shared memory, as a typed array with its alignment, sized by the launch.
case { name = "dynamic_shared_reverse", params = "f64* x, f64* y", grid = 3, block = 96, shared = 96 * 8,
  source = [[
__device__ void dynamic_shared_reverse(const double *x, double *y)
{
    extern __shared__ __align__(16) double tile[];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = x[i];
    __syncthreads();
    y[i] = tile[blockDim.x - 1 - threadIdx.x];
}]],
  args = { { input = values(288, 42, function(_, r) return r() * 1e9 end), dtype = "f64" }, { out = 288, dtype = "f64" } },
  ref = function(x)
    local y = {}
    for b = 0, 2 do for t = 0, 95 do y[b * 96 + t + 1] = x[b * 96 + 95 - t + 1] end end
    return { y }
  end }

-- Tensor values as tables (f16 and bf16 rounded as the tensor holds them).
local function make_args(c, device)
  local tensors, launch, inputs = {}, {}, {}
  for i, a in ipairs(c.args) do
    if type(a) == "number" then
      launch[i] = a
    elseif a.input then
      local rounded = {}
      for j, v in ipairs(a.input) do rounded[j] = ref.convert(v, a.dtype) end
      tensors[i] = tocha.tensor(rounded, { dtype = a.dtype, device = device })
      inputs[#inputs + 1] = rounded
      launch[i] = tensors[i]
    else
      tensors[i] = tocha.full({ a.out }, POISON, { dtype = a.dtype, device = device })
      launch[i] = tensors[i]
    end
  end
  return tensors, launch, inputs
end

local function outputs_of(c)
  if c.outputs then return c.outputs end
  local o = {}
  for i, a in ipairs(c.args) do if type(a) == "table" and a.out then o[#o + 1] = i end end
  return o
end

local function run_case(c, device)
  local k = tocha.kernel { source = c.source, name = c.name, params = c.params }
  local tensors, launch, inputs = make_args(c, device)
  if c.shared then
    k:launch({ grid = c.grid, block = c.block, shared = c.shared }, unpack(launch, 1, #c.args))
  else
    k:launch(c.grid, c.block, unpack(launch, 1, #c.args))
  end
  local expected = c.ref(unpack(inputs))
  local outs = outputs_of(c)
  if c.together then
    local got = {}
    for _, i in ipairs(outs) do for _, v in ipairs(tensors[i]:to_table()) do got[#got + 1] = v end end
    table.sort(got)
    table.sort(expected)
    assert.are.same(expected, got)
    return
  end
  for n, i in ipairs(outs) do
    local got, want = tensors[i]:to_table(), expected[n]
    if c.sorted and c.sorted[i] then table.sort(got) end
    assert.are.equal(#want, #got, c.name .. ": length of output " .. n)
    for j = 1, #want do
      local off = got[j] ~= want[j]
      if off and c.rtol then off = not (math.abs(got[j] - want[j]) <= c.atol + c.rtol * math.abs(want[j])) end
      if off then
        error(("%s on %s: output %d [%d] is %.9g, expected %.9g"):format(c.name, device, n, j, got[j], want[j]))
      end
    end
  end
end

describe("the cooperative kernel suite", function()
  it("has at least 30 kernels", function() assert.is_true(#CASES >= 30, #CASES) end)

  -- Without a GPU, NVRTC still compiles for the H200: every kernel the simulator runs here is
  -- one the GPU's compiler takes as it stands.
  it("compiles every kernel for sm_90 with NVRTC", function()
    for _, c in ipairs(CASES) do
      local k = tocha.kernel { source = c.source, name = c.name, params = c.params }
      assert.is_true(k:build("sm_90") > 0, c.name)
    end
  end)

  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      for _, c in ipairs(CASES) do
        it(c.name .. " gives the reference's values", function() run_case(c, dev.name) end)
      end
    end)
  end

  describe("on sim", function()
    -- Without its barrier, a thread reads its neighbour's slot before the neighbour wrote it:
    -- the simulator runs the block's threads in order, so the race shows in every result.
    it("shows a missing barrier in the result", function()
      local k = tocha.kernel { source = [[
__device__ void racy_shift(const float *x, float *y)
{
    __shared__ float s[64];
    s[threadIdx.x] = x[threadIdx.x];
    y[threadIdx.x] = s[(threadIdx.x + 1) % 64];
}]], name = "racy_shift", params = "f32* x, f32* y" }
      local x = tocha.tensor(values(64, 41, function(i) return i end), { device = "sim" })
      local y = tocha.full({ 64 }, POISON, { device = "sim" })
      k:launch(1, 64, x, y)
      local got, stale = y:to_table(), 0
      for t = 1, 63 do if got[t] ~= t + 1 then stale = stale + 1 end end
      assert.are.equal(63, stale)
      assert.are.equal(1, got[64]) -- the one read of a slot written before it
    end)

    local function kernel(body, name)
      return tocha.kernel { source = "__device__ void " .. name .. "(float *y)\n{\n" .. body .. "\n}", name = name, params = "f32* y" }
    end

    it("fails a warp operation whose lanes returned without reaching it, naming them", function()
      local k = kernel([[
    if (threadIdx.x % 32 >= 16) return;
    y[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1.0f, 1);]], "half_warp_returns")
      local y = tocha.full({ 64 }, POISON, { device = "sim" })
      fails_with("tocha.Kernel:launch: kernel half_warp_returns_entry_point: __shfl_down_sync: lanes 0-15 of warp 0 "
        .. "wait for lanes 16-31, named in the mask 0xffffffff, which returned without reaching it (block 0, 0, 0): on a "
        .. "GPU it hangs or goes wrong", function() k:launch(1, 64, y) end)
    end)

    -- wgmma's descriptors carry no base offset: a start past the first row of a swizzle atom
    -- would read other rows on the GPU; the simulator fails it, naming the addresses.
    it("fails a wgmma whose operand starts past the first row of a 1 KiB atom", function()
      local k = tocha.kernel { source = warpgroup .. [[
__device__ void wgmma_misplaced(float *y)
{
    __shared__ __align__(1024) unsigned char s[4096];
    for (int i = threadIdx.x; i < 4096; i += 128) s[i] = 0;
    __syncthreads();
    float acc[32];
    for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
    tocha::wgmma<__half, 64, 0, 0>(acc, s + 128, 16, 1024, s, 16, 1024);
    y[threadIdx.x] = acc[0];
}]], name = "wgmma_misplaced", params = "f32* y" }
      local y = tocha.full({ 128 }, POISON, { device = "sim" })
      local ok, message = pcall(k.launch, k, 1, 128, y)
      assert.is_false(ok)
      assert.truthy(message:find("kernel wgmma_misplaced_entry_point: wgmma: operand addresses", 1, true), message)
      assert.truthy(message:find("must lie in the first 128 bytes of a 1 KiB-aligned atom", 1, true), message)
    end)

    it("fails an mbarrier wait that no thread can complete, as it would hang a GPU", function()
      local k = tocha.kernel { source = tensor_core .. require("tocha.op").source("mbarrier.cuh") .. [[
__device__ void mbarrier_short(float *y)
{
    __shared__ __align__(8) unsigned long long bar;
    if (threadIdx.x == 0) tocha::mbarrier_init(&bar, 64);
    __syncthreads();
    tocha::mbarrier_arrive(&bar); // 32 arrivals of the 64 a phase needs
    tocha::mbarrier_wait(&bar, 0);
    y[threadIdx.x] = 1.0f;
}]], name = "mbarrier_short", params = "f32* y" }
      local y = tocha.full({ 32 }, POISON, { device = "sim" })
      fails_with("tocha.Kernel:launch: kernel mbarrier_short_entry_point: mbarrier_wait: threads of the block wait for a "
        .. "phase no thread can complete (block 0, 0, 0): on a GPU it hangs", function() k:launch(1, 32, y) end)
    end)

    it("fails lanes that wait at different warp operations", function()
      local k = kernel([[
    if (threadIdx.x == 3) y[0] = (float)__ballot_sync(0xffffffffu, 1);
    else y[threadIdx.x] = __shfl_sync(0xffffffffu, 2.0f, 0);]], "mixed_warp_ops")
      local y = tocha.full({ 32 }, POISON, { device = "sim" })
      local ok, message = pcall(k.launch, k, 1, 32, y)
      assert.is_false(ok)
      assert.truthy(message:find("kernel mixed_warp_ops_entry_point: __ballot_sync: lane 0 of warp 0 waits at __shfl_sync", 1, true)
        or message:find("kernel mixed_warp_ops_entry_point: __shfl_sync: lane 3 of warp 0 waits at __ballot_sync", 1, true), message)
    end)

    it("fails a warp operation whose mask leaves out the calling lane", function()
      local k = kernel("    y[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, 1.0f, 1);", "outside_mask")
      local y = tocha.full({ 32 }, POISON, { device = "sim" })
      fails_with("tocha.Kernel:launch: kernel outside_mask_entry_point: __shfl_xor_sync: lane 16 of warp 0 calls it with "
        .. "a mask (0x0000ffff) that leaves it out (block 0, 0, 0): undefined on a GPU", function() k:launch(1, 32, y) end)
    end)

    it("fails a warp whose lanes wait at a warp operation while others wait at __syncthreads", function()
      local k = kernel([[
    if (threadIdx.x < 8) __syncthreads();
    else y[threadIdx.x] = __shfl_sync(0xffffffffu, 1.0f, 0);]], "warp_and_barrier")
      local y = tocha.full({ 32 }, POISON, { device = "sim" })
      fails_with("tocha.Kernel:launch: kernel warp_and_barrier_entry_point: __shfl_sync: lanes 8-31 of warp 0 wait for "
        .. "lanes 0-7, named in the mask 0xffffffff, which wait at __syncthreads (block 0, 0, 0): on a GPU it hangs or goes "
        .. "wrong", function() k:launch(1, 32, y) end)
    end)

    it("refuses a shuffle width that is not a power of two", function()
      local k = kernel("    y[threadIdx.x] = __shfl_sync(0xffffffffu, 1.0f, 0, 12);", "bad_width")
      local y = tocha.full({ 32 }, POISON, { device = "sim" })
      fails_with("tocha.Kernel:launch: kernel bad_width_entry_point: __shfl_sync: width 12 is not a power of two from 1 to 32 (block 0, 0, 0, thread 0, 0, 0)",
        function() k:launch(1, 32, y) end)
    end)

    it("faults a kernel that reads dynamic shared memory past what its launch gave", function()
      local k = tocha.kernel { source = [[
__device__ void past_shared(float *y, int n)
{
    extern __shared__ float buf[];
    buf[threadIdx.x * n] = 1.0f;
    y[threadIdx.x] = buf[threadIdx.x * n];
}]], name = "past_shared", params = "f32* y, i32 n" }
      local y = tocha.full({ 32 }, POISON, { device = "sim" })
      k:launch({ grid = 1, block = 32, shared = 32 * 4 }, y, 1)
      for _, v in ipairs(y:to_table()) do assert.are.equal(1, v) end
      local ok, message = pcall(k.launch, k, { grid = 1, block = 32, shared = 32 * 4 }, y, 1024)
      assert.is_false(ok)
      assert.truthy(message:find("kernel past_shared_entry_point: sim: illegal memory access at 0x", 1, true), message)
    end)

    it("fails a block whose threads spin on a lock that a waiting thread holds", function()
      local k = tocha.kernel { source = [[
__device__ void held_lock(int *lock)
{
    if (threadIdx.x == 0) atomicExch(lock, 1);
    __syncthreads();
    if (threadIdx.x == 0) __syncthreads(); // the holder waits at a barrier the others never reach
    else while (atomicCAS(lock, 0, 1) != 0) {}
}]], name = "held_lock", params = "i32* lock" }
      local lock = tocha.zeros({ 1 }, { dtype = "i32", device = "sim" })
      fails_with("tocha.Kernel:launch: kernel held_lock_entry_point: threads of the block spin on atomics while none of "
        .. "its other threads can run (block 0, 0, 0): on a GPU it hangs", function() k:launch(1, 2, lock) end)
    end)

    it("fails a wait its kernel's source does not name (a macro from the options), instead of running it wrong", function()
      local k = tocha.kernel { source = "__device__ void hidden(float *y) { WAIT; y[threadIdx.x] = 1.0f; }",
        name = "hidden", params = "f32* y", options = { "-DWAIT=__syncthreads()" } }
      fails_with("tocha.Kernel:launch: kernel hidden_entry_point: __syncthreads: the simulator runs this kernel's "
        .. "threads one after another, since its source names no barrier, warp operation, atomic or group (a wait "
        .. "reached through a macro from outside the source is not seen): name one in the source (block 0, 0, 0, "
        .. "thread 0, 0, 0)", function() k:launch(1, 32, tocha.zeros({ 32 }, { device = "sim" })) end)
    end)

    it("stops the launch at a failed assert or __trap, and the process goes on", function()
      local k = tocha.kernel { source = [[
#include <assert.h>
__device__ void checked(float *y, int limit)
{
    assert(threadIdx.x < limit);
    y[threadIdx.x] = 1.0f;
}]], name = "checked", params = "f32* y, i32 limit" }
      local y = tocha.full({ 32 }, POISON, { device = "sim" })
      local ok, message = pcall(k.launch, k, 1, 32, y, 20)
      assert.is_false(ok)
      assert.truthy(message:find("kernel checked_entry_point: assertion failed: threadIdx.x < limit (checked.cu:4, in ", 1, true), message)
      assert.truthy(message:find("(block 0, 0, 0, thread 20, 0, 0)", 1, true), message)
      local t = kernel("    if (threadIdx.x == 5) __trap();\n    __syncthreads();", "trapped")
      fails_with("tocha.Kernel:launch: kernel trapped_entry_point: __trap() (block 0, 0, 0, thread 5, 0, 0)", function() t:launch(1, 32, y) end)
      k:launch(1, 32, y, 32)
      for _, v in ipairs(y:to_table()) do assert.are.equal(1, v) end
    end)
  end)
end)
