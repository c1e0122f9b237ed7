-- Kernel readouts: k:info (ptxas's report through NVRTC without a GPU, the driver's attributes on
-- one), k:occupancy (the target's published limits, or the driver's calculator), k:ptx,
-- k:cubin and k:sass. Each figure is checked against what the source fixes independently: a
-- __shared__ float t[256] is 1024 bytes, a __constant__ float c[16] is 64, a register cap holds.
local tocha = require "tocha"
local process = require "support.process"

local fails_with = require("support.assertions").fails_with

-- 1024 bytes of static shared memory, 64 of __constant__ memory, no stack.
local TILE = [[
__constant__ float scale[16];
__device__ void tile(float *y)
{
    __shared__ float t[256];
    t[threadIdx.x] = threadIdx.x * scale[threadIdx.x % 16];
    __syncthreads();
    y[threadIdx.x] = t[255 - threadIdx.x];
}
]]

-- 24 values live at once, each multiplied with every other: far more than 32 registers unless
-- capped, and spilled when capped low.
local HEAVY = [[
__device__ void heavy(const float *x, float *y, int n)
{
    float a[24];
#pragma unroll
    for (int i = 0; i < 24; i++) a[i] = x[threadIdx.x + i * n];
    float s = 0;
#pragma unroll
    for (int i = 0; i < 24; i++)
#pragma unroll
        for (int j = 0; j < 24; j++) s += a[i] * a[j] * (i + 2 * j);
    y[threadIdx.x] = s;
}
]]

-- A stack frame of at least 100 floats: a local array indexed at run time.
local STACK = [[
__device__ void stack(float *y, int k)
{
    volatile float v[100];
    for (int i = 0; i < 100; i++) v[i] = y[i];
    y[0] = v[k];
}
]]

local function tile(bounds)
  return tocha.kernel { source = TILE, name = "tile", params = "f32* y", launch_bounds = bounds }
end
local function heavy(options)
  return tocha.kernel { source = HEAVY, name = "heavy", params = "f32* x, f32* y, i32 n", options = options }
end

-- sm_90's published limits (CUDA C++ Programming Guide): 64 warps, 32 blocks, 65536 registers
-- per SM (256 to a warp at a time), 228 KiB of shared memory per SM of which 227 KiB for one
-- block, 1 KiB a block reserved, 128-byte units. Blocks per SM, computed here on its own.
local function sm90_blocks(threads, registers, shared)
  local warps = math.ceil(threads / 32)
  local blocks = math.min(32, math.floor(64 / warps))
  if registers > 0 then
    local per_warp = math.ceil(registers * 32 / 256) * 256
    blocks = math.min(blocks, math.floor(math.floor(65536 / per_warp) / warps))
  end
  if shared > 227 * 1024 then return 0 end
  local per_block = math.ceil((shared + 1024) / 128) * 128
  return math.min(blocks, math.floor(228 * 1024 / per_block))
end

describe("tocha.Kernel", function()
  describe("info()", function()
    it("reads ptxas's report for the simulator's compile target (sm_90 by default)", function()
      local info = tile():info()
      assert.are.equal("sm_90", info.target)
      assert.are.equal("ptxas", info.source)
      assert.are.equal(1024, info.shared)
      assert.are.equal(64, info.constant)
      assert.are.equal(0, info["local"])
      assert.are.equal(0, info.spill_stores)
      assert.are.equal(0, info.spill_loads)
      assert.is_true(info.registers >= 2 and info.registers <= 32)
      assert.are.equal(1024, info.max_threads)
    end)

    it("takes the target asked for", function()
      local info = tile():info("sm_80")
      assert.are.equal("sm_80", info.target)
      assert.are.equal(1024, info.shared)
    end)

    it("follows TOCHA_ARCH as the default target without a GPU", function()
      local out, err, status = process.run {
        args = { "-e", ([[
          local tocha = require "tocha"
          local k = tocha.kernel { source = %q, name = "tile", params = "f32* y" }
          io.write(k:info().target)
        ]]):format(TILE) },
        env = { TOCHA_ARCH = "sm_89", TOCHA_DEVICE = "sim" },
      }
      assert.are.equal(0, status, err)
      assert.are.equal("sm_89", out)
    end)

    it("reports launch bounds as the largest block", function()
      assert.are.equal(128, tile({ 128 }):info().max_threads)
    end)

    it("shows -maxrregcount holding the registers, and spills when the cap is low", function()
      local free, capped, low = heavy():info(), heavy({ "-maxrregcount=32" }):info(), heavy({ "-maxrregcount=24" }):info()
      assert.is_true(free.registers > 32, "uncapped: " .. free.registers)
      assert.is_true(capped.registers <= 32, "capped: " .. capped.registers)
      assert.is_true(low.registers <= 24, "low: " .. low.registers)
      assert.are.equal(0, free.spill_stores)
      assert.is_true(low.spill_stores > 0 and low.spill_loads > 0)
      assert.is_true(low["local"] > 0) -- the spills live in the stack frame
      -- A block may hold 65536 registers, handed to warps 256 at a time.
      local per_warp = math.ceil(free.registers * 32 / 256) * 256
      assert.are.equal(math.min(1024, math.floor(65536 / per_warp) * 32), free.max_threads)
    end)

    it("reports a run-time indexed local array as stack frame", function()
      local info = tocha.kernel { source = STACK, name = "stack", params = "f32* y, i32 k" }:info()
      assert.is_true(info["local"] >= 400, "local " .. info["local"])
      assert.are.equal(0, info.shared)
    end)

    it("refuses a target that is not sm_XY", function()
      fails_with("tocha.Kernel:info: target: expected sm_XY (e.g. sm_90), got 'sim'", function() tile():info("sim") end)
      fails_with("tocha.Kernel:info: target: expected a string like sm_90, got number", function() tile():info(90) end)
    end)

    it("reads the driver's attributes on a GPU #gpu", function()
      local k = tile({ 128 })
      local info = k:info()
      assert.are.equal("driver", info.source)
      assert.are.equal(tocha.device().target, info.target)
      assert.are.equal(1024, info.shared)
      assert.are.equal(64, info.constant)
      assert.are.equal(0, info["local"])
      assert.are.equal(128, info.max_threads)
      local capped = heavy({ "-maxrregcount=24" }):info()
      assert.is_true(capped.registers <= 24)
      assert.is_true(capped.spill_stores > 0) -- ptxas's, beside the driver's figures
    end)
  end)

  describe("occupancy()", function()
    it("follows sm_90's published limits without a GPU", function()
      local k = tile()
      local r = k:info().registers
      local blocks, fraction = k:occupancy(256)
      assert.are.equal(sm90_blocks(256, r, 1024), blocks)
      assert.are.equal(8, blocks) -- 64 warps / 8 a block
      assert.are.equal(1, fraction)
      blocks, fraction = k:occupancy({ 32, 8 }, 100000)
      assert.are.equal(2, blocks) -- (100000 + 1024 static + 1024 reserved) twice in 228 KiB
      assert.are.equal(2 * 8 / 64, fraction)
      assert.are.equal(0, (k:occupancy(256, 227 * 1024))) -- with the static 1024 above a block's 227 KiB
      local h = heavy()
      local hr = h:info().registers
      blocks, fraction = h:occupancy(128)
      assert.are.equal(sm90_blocks(128, hr, 0), blocks)
      assert.are.equal(blocks * 4 / 64, fraction)
      assert.are.equal(0, (h:occupancy(1024))) -- more threads than its registers allow a block
      assert.are.equal(0, (tile({ 128 }):occupancy(256))) -- above its launch bounds
    end)

    it("counts a target's own limits: sm_86 holds 48 warps and 16 blocks", function()
      local blocks, fraction = tile():occupancy(32, 0, "sm_86")
      assert.are.equal(16, blocks)
      assert.are.equal(16 / 48, fraction)
    end)

    it("refuses a block too large, a size that is not bytes and a target without a table", function()
      fails_with("tocha.Kernel:occupancy: block: 2048 threads per block, at most 1024",
        function() tile():occupancy({ 1024, 2 }) end)
      fails_with("tocha.Kernel:occupancy: shared: expected a number of bytes (0 to 2^32 - 1), got -1",
        function() tile():occupancy(256, -1) end)
      fails_with("tocha.Kernel:occupancy: target: tocha has no table of sm_75's limits (it has sm_80, sm_86, "
        .. "sm_87, sm_89, sm_90, sm_100 and sm_120)", function() tile():occupancy(256, 0, "sm_75") end)
    end)

    it("asks the driver on a GPU, which agrees with sm_90's limits #gpu", function()
      local k = tile()
      local r = k:info().registers
      local blocks, fraction = k:occupancy(256)
      assert.are.equal(sm90_blocks(256, r, 1024), blocks)
      assert.are.equal(blocks * 8 / 64, fraction)
      blocks = k:occupancy(128, 100000)
      assert.are.equal(sm90_blocks(128, r, 1024 + 100000), blocks)
      assert.are.equal(0, (k:occupancy(256, 227 * 1024))) -- with the static 1024 above a block's 227 KiB
      assert.are.equal(0, (tile({ 128 }):occupancy(256))) -- above its launch bounds
    end)
  end)

  describe("ptx(), cubin() and sass()", function()
    it("give the PTX text with the entry point, and the cubin as an ELF file", function()
      local k = tile()
      assert.truthy(k:ptx():find(".entry tile_entry_point(", 1, true))
      assert.truthy(k:ptx("sm_80"):find(".target sm_80", 1, true))
      local cubin = k:cubin()
      assert.are.equal("\127ELF", cubin:sub(1, 4))
      assert.are.equal(k:build("sm_90"), #cubin)
      assert.truthy(cubin:find("tile_entry_point", 1, true))
      fails_with("tocha.Kernel:cubin: target: expected sm_XY (e.g. sm_90), got \"sim\"", function() k:cubin("sim") end)
    end)

    it("give SASS through the toolkit's disassembler, or nil and why when there is none", function()
      local text, err = tile():sass()
      local tool
      for _, root in pairs({ os.getenv("CUDA_HOME"), os.getenv("CUDA_PATH"), "/usr/local/cuda" }) do
        tool = tool or io.open(root .. "/bin/cuobjdump") or io.open(root .. "/bin/nvdisasm")
      end
      if tool then
        tool:close()
        assert.truthy(text, err)
        assert.truthy(text:find("tile_entry_point", 1, true))
      else
        assert.is_nil(text)
        assert.are.equal("sass: neither cuobjdump nor nvdisasm was found in CUDA_HOME, CUDA_PATH or "
          .. "/usr/local/cuda (bin)", err)
      end
    end)
  end)
end)
