-- Cooperative kernels, one source for both devices: __shared__ memory and __syncthreads (with
-- its _count, _and and _or forms) mean on the simulator what they mean on the GPU, since a
-- block's threads run there as fibers switched at each barrier. Each kernel's output is
-- compared, every element poisoned first, with plain Lua on random inputs, on sim and (#gpu) on
-- cuda; a barrier some threads never reach is an error naming the kernel on sim.
local tocha = require "tocha"
local ref = require "support.reference"
local fails_with = require("support.assertions").fails_with

local POISON = -77

-- Each tile of x reversed: every thread reads what another wrote before the barrier.
local REVERSE = [[
template <int B>
__device__ void reverse_tiles(const float *x, float *y, long long n)
{
    __shared__ float tile[B];
    const long long i = (long long)blockIdx.x * B + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = tile[B - 1 - threadIdx.x];
}]]

-- A 32 x 32 tile through shared memory (a padded row, as on a GPU): y = x transposed, x rows x cols.
local TRANSPOSE = [[
__device__ void transpose(const float *x, float *y, int rows, int cols)
{
    __shared__ float tile[32][33];
    int c = blockIdx.x * 32 + threadIdx.x, r = blockIdx.y * 32 + threadIdx.y;
    if (r < rows && c < cols) tile[threadIdx.y][threadIdx.x] = x[(long long)r * cols + c];
    __syncthreads();
    c = blockIdx.y * 32 + threadIdx.x;
    r = blockIdx.x * 32 + threadIdx.y;
    if (r < cols && c < rows) y[(long long)r * rows + c] = tile[threadIdx.x][threadIdx.y];
}]]

-- The sum of each block's values by a tree in shared memory, a barrier at every level; f64, so
-- that the tree's order gives the same bits on both devices.
local BLOCK_SUM = [[
template <int B>
__device__ void block_sum(const double *x, double *y, long long n)
{
    __shared__ double s[B];
    const long long i = (long long)blockIdx.x * B + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0;
    __syncthreads();
    for (int half = B / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) y[blockIdx.x] = s[0];
}]]

-- The counting barriers: how many of the block's values pass 0.5, whether all and whether any do.
local VOTES = [[
__device__ void votes(const float *x, float *y)
{
    const float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    const int count = __syncthreads_count(v > 0.5f);
    const int all = __syncthreads_and(v >= 0.0f);
    const int any = __syncthreads_or(v > 2.0f);
    if (threadIdx.x == 0) {
        y[3 * blockIdx.x] = count;
        y[3 * blockIdx.x + 1] = all;
        y[3 * blockIdx.x + 2] = any;
    }
}]]

-- The tree sum of f64 values in block order, as BLOCK_SUM adds them.
local function tree_sum(values, first, b)
  local s = {}
  for t = 1, b do s[t] = values[first + t - 1] or 0 end
  local half = b / 2
  while half >= 1 do
    for t = 1, half do s[t] = s[t] + s[t + half] end
    half = half / 2
  end
  return s[1]
end

describe("cooperative kernels", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("share a tile through __shared__ memory across a barrier, at block sizes 32 to 1024", function()
        for _, b in ipairs({ 32, 128, 1024 }) do
          local k = tocha.kernel { source = REVERSE, name = "reverse_tiles", template_args = tostring(b),
            params = "f32* x, f32* y, i64 n" }
          local n = b * 5 - 7
          local x = tocha.rand({ n }, { device = device, seed = b })
          local y = tocha.full({ n }, POISON, { device = device })
          k:launch(5, b, x, y, n)
          local xs, ys = x:to_table(), y:to_table()
          for j = 1, n do
            local tile, t = math.floor((j - 1) / b), (j - 1) % b
            local i = tile * b + (b - 1 - t) + 1
            assert.are.equal(i <= n and xs[i] or 0, ys[j], ("block %d, y[%d]"):format(b, j))
          end
        end
      end)

      it("transpose through a padded tile with 2-D blocks", function()
        local k = tocha.kernel { source = TRANSPOSE, name = "transpose", params = "f32* x, f32* y, i32 rows, i32 cols" }
        local rows, cols = 70, 45
        local x = tocha.rand({ rows, cols }, { device = device, seed = 9 })
        local y = tocha.full({ cols, rows }, POISON, { device = device })
        k:launch({ math.ceil(cols / 32), math.ceil(rows / 32) }, { 32, 32 }, x, y, rows, cols)
        local xs, ys = x:to_table(), y:to_table()
        for r = 1, rows do
          for c = 1, cols do assert.are.equal(xs[r][c], ys[c][r], ("x[%d][%d]"):format(r, c)) end
        end
      end)

      it("reduce a block by a tree of barriers, in the tree's order", function()
        local b = 256
        local k = tocha.kernel { source = BLOCK_SUM, name = "block_sum", template_args = tostring(b),
          params = "f64* x, f64* y, i64 n" }
        local n = b * 6 - 100
        local x = tocha.randn({ n }, { device = device, dtype = "f64", seed = 4 })
        local y = tocha.full({ 6 }, POISON, { device = device, dtype = "f64" })
        k:launch(6, b, x, y, n)
        local xs, ys = x:to_table(), y:to_table()
        for blk = 1, 6 do assert.are.equal(tree_sum(xs, (blk - 1) * b + 1, b), ys[blk], blk) end
      end)

      it("count, and and or a predicate over the block", function()
        local k = tocha.kernel { source = VOTES, name = "votes", params = "f32* x, f32* y" }
        local x = tocha.rand({ 4, 512 }, { device = device, seed = 6 })
        local y = tocha.full({ 12 }, POISON, { device = device })
        k:launch(4, 512, x, y)
        local xs, ys = x:to_table(), y:to_table()
        for blk = 1, 4 do
          local count = 0
          for _, v in ipairs(xs[blk]) do count = count + (v > 0.5 and 1 or 0) end
          assert.are.same({ count, 1, 0 }, { ys[3 * blk - 2], ys[3 * blk - 1], ys[3 * blk] }, blk)
        end
      end)
    end)
  end

  describe("on sim, a barrier that cannot be passed", function()
    it("is an error naming the kernel when some threads returned without reaching it", function()
      local k = tocha.kernel { source = [[
__device__ void early_return(float *y)
{
    if (threadIdx.x < 16) return;
    __syncthreads();
    y[threadIdx.x] = 1.0f;
}]], name = "early_return", params = "f32* y" }
      local y = tocha.full({ 64 }, POISON, { device = "sim" })
      fails_with("tocha.Kernel:launch: kernel early_return_entry_point: __syncthreads: 48 of the block's 64 threads "
        .. "wait at a barrier that the other 16 returned without reaching (block 0, 0, 0): on a GPU it hangs or "
        .. "goes wrong", function() k:launch(1, 64, y) end)
      for _, v in ipairs(y:to_table()) do assert.are.equal(POISON, v) end
    end)

    it("is an error when the threads wait at different barriers, and the device goes on", function()
      local k = tocha.kernel { source = [[
__device__ void two_barriers(float *y)
{
    if (threadIdx.x < 16)
        __syncthreads();
    else
        __syncthreads();
    y[threadIdx.x] = 1.0f;
}]], name = "two_barriers", params = "f32* y" }
      local y = tocha.zeros({ 64 }, { device = "sim" })
      fails_with("tocha.Kernel:launch: kernel two_barriers_entry_point: __syncthreads: the block's threads wait at "
        .. "different barriers (block 0, 0, 0): on a GPU it hangs or goes wrong", function() k:launch(1, 64, y) end)
      local r = tocha.kernel { source = REVERSE, name = "reverse_tiles", template_args = "64", params = "f32* x, f32* y, i64 n" }
      local x = tocha.rand({ 64 }, { device = "sim", seed = 1 })
      r:launch(1, 64, x, y, 64) -- the host thread's fibers are made again
      local xs, ys = x:to_table(), y:to_table()
      for j = 1, 64 do assert.are.equal(xs[65 - j], ys[j]) end
    end)

    it("stops at an illegal access inside a fiber, and the next launch runs", function()
      local k = tocha.kernel { source = [[
__device__ void faulty(float *y, long long bad)
{
    __shared__ float s[1024];
    s[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    if (threadIdx.x == 700 && bad) *(float *)bad = 1.0f;
    __syncthreads();
    y[threadIdx.x] = s[1023 - threadIdx.x];
}]], name = "faulty", params = "f32* y, i64 bad" }
      local y = tocha.full({ 1024 }, POISON, { device = "sim" })
      local ok, message = pcall(k.launch, k, 1, 1024, y, 16)
      assert.is_false(ok)
      assert.truthy(message:find("kernel faulty_entry_point: sim: illegal memory access at 0x10", 1, true), message)
      k:launch(1, 1024, y, 0)
      local ys = y:to_table()
      for t = 1, 1024 do assert.are.equal(1024 - t, ys[t]) end
    end)
  end)
end)
