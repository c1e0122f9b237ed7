-- Device memory as tensors hold it: tocha.memory's figures, the cache of freed blocks, and the
-- collector's view of device memory (a loop that drops a tensor each step stays flat).
local tocha = require "tocha"
local process = require "support.process"

local MiB = 2 ^ 20

-- Runs code in a fresh tocha (a small, clean heap) on sim, or on env.TOCHA_DEVICE, and
-- returns its output.
local function run(code, env)
  env = env or {}
  env.TOCHA_DEVICE = env.TOCHA_DEVICE or "sim"
  local out, err, status = process.run { args = { "-e", code }, env = env }
  assert.are.equal(0, status, err)
  return out
end

describe("tocha.memory", function()
  local sim = tocha.device("sim")

  it("counts each tensor's bytes: allocated, peak, allocations and frees", function()
    tocha.memory.empty_cache("sim")
    local before = tocha.memory.stats("sim")
    local a = tocha.empty({ 1000 }, { device = sim })            -- 4000 bytes
    local b = tocha.empty({ 3, 7 }, { device = sim, dtype = "f16" }) -- 42 bytes
    local s = tocha.memory.stats("sim")
    assert.are.equal(before.allocated + 4042, s.allocated)
    assert.are.equal(before.allocations + 2, s.allocations)
    assert.is_true(s.peak >= s.allocated)
    a:free()
    local after = tocha.memory.stats("sim")
    assert.are.equal(before.allocated + 42, after.allocated)
    assert.are.equal(before.frees + 1, after.frees)
    assert.are.equal(s.peak, after.peak) -- the peak stays
    tocha.memory.reset_peak("sim")
    assert.are.equal(after.allocated, tocha.memory.stats("sim").peak)
    b:free()
  end)

  it("reuses a freed block for the next tensor of its size, and keeps it reserved until empty_cache", function()
    tocha.memory.empty_cache("sim")
    local a = tocha.empty({ 5000 }, { device = sim })
    local address = a.data
    local s0 = tocha.memory.stats("sim")
    a:free()
    local s1 = tocha.memory.stats("sim")
    assert.are.equal(s0.reserved, s1.reserved) -- freed, still held
    assert.is_true(s1.cached >= 20000)
    local b = tocha.empty({ 5000 }, { device = sim })
    assert.are.equal(address, b.data)
    assert.are.equal(s1.cache_hits + 1, tocha.memory.stats("sim").cache_hits)
    assert.are.equal(s1.cached - 20224, tocha.memory.stats("sim").cached) -- 20000 bytes mapped as 20224
    local c = tocha.empty({ 7000 }, { device = sim }) -- another size: a new block
    assert.are_not.equal(address, c.data)
    b:free(); c:free()
    assert.is_true(tocha.memory.stats("sim").cached > 0)
    tocha.memory.empty_cache("sim")
    local s2 = tocha.memory.stats("sim")
    assert.are.equal(0, s2.cached)
    assert.are.equal(s0.reserved - 20224, s2.reserved)
  end)

  it("gives a reused block's tensor the right values", function()
    local a = tocha.full({ 300 }, 7, { device = sim })
    a:free()
    local b = tocha.rand({ 300 }, { device = sim, seed = 5 })
    local fresh = tocha.rand({ 300 }, { device = sim, seed = 5, dtype = "f32" })
    assert.are.same(fresh:to_table(), b:to_table())
  end)

  it("names a bad device", function()
    for _, fn in ipairs({ "stats", "empty_cache", "reset_peak" }) do
      local ok, message = pcall(tocha.memory[fn], "nope")
      assert.is_false(ok)
      assert.truthy(message:find("tocha.memory." .. fn .. ": device: unknown device 'nope'", 1, true), message)
    end
  end)

  it("stays flat over 10,000 steps that each drop a 16 MiB tensor: reserved within 2 tensors", function()
    local out = run [[
      local tocha = require "tocha"
      local ffi = require "ffi"
      local probe = ffi.new("float[4]")
      local base, top = tocha.memory.stats("sim").reserved, 0
      for i = 1, 10000 do
        local t = tocha.empty({ 4 * 2 ^ 20 })
        t:read(probe, 0, 4)
        top = math.max(top, tocha.memory.stats("sim").reserved - base)
      end
      io.write(top)
    ]]
    assert.is_true(tonumber(out) <= 2 * 16 * MiB, out)
  end)

  it("lets small tensors' garbage reach the small-allocation floor, 64 MiB at 256 KiB, and no more", function()
    local out = run [[
      local tocha = require "tocha"
      local base, top = tocha.memory.stats("sim").reserved, 0
      for i = 1, 2000 do
        local t = tocha.empty({ 2 ^ 16 })
        top = math.max(top, tocha.memory.stats("sim").reserved - base)
      end
      io.write(top)
    ]]
    local top = tonumber(out)
    assert.is_true(top <= 64 * MiB + 2 * 256 * 1024, out) -- collected once 64 MiB are charged
    assert.is_true(top >= 32 * MiB, out)                  -- not every 16 MiB, as larger tensors are
  end)

  it("keeps resident memory flat when each step fills and drops a 1 MiB tensor", function()
    -- Before the collector saw device memory, this grew by about 1 MiB a step. Prints the peak
    -- growth over the first 500 steps and over all 1000, from after a first step: the first
    -- fill loads its kernel (on sim a shared object: about 12 MiB resident), a cost once a
    -- process, not a step's.
    local out = run([[
      local tocha = require "tocha"
      local function rss() local f = io.open("/proc/self/statm"); local _, r = f:read("*n", "*n"); f:close(); return r * 4096 end
      tocha.empty({ 2 ^ 18 }):fill(0)
      collectgarbage("collect")
      local base, top, half = rss(), 0, 0
      for i = 1, 1000 do
        tocha.empty({ 2 ^ 18 }):fill(i)
        top = math.max(top, rss() - base)
        if i == 500 then half = top end
      end
      io.write(half, " ", top)
    ]], {
      TOCHA_SIM_THREADS = "2", -- (each simulator thread's malloc arena counts in the RSS)
      -- Under AddressSanitizer, freed host blocks wait in its quarantine (256 MiB by default),
      -- resident, and the RSS would climb by a few KiB a step; without it this measures tocha.
      ASAN_OPTIONS = (os.getenv("ASAN_OPTIONS") or "") .. ":quarantine_size_mb=0",
    })
    local half, top = out:match("^(%d+) (%d+)$")
    assert.is_truthy(top, out)
    half, top = tonumber(half), tonumber(top)
    assert.is_true(top < 40 * MiB, out)          -- 16 MiB of debt, plus the heap
    assert.is_true(top - half <= 4 * MiB, out)   -- flat: a leak of each tensor would be 500 MiB
  end)

  it("never collects a tensor that is still referenced", function()
    local out = run [[
      local tocha = require "tocha"
      local keep = {}
      for i = 1, 40 do keep[i] = tocha.full({ 2 ^ 20 }, i) end -- 160 MiB, past every debt limit
      local ok = true
      for i = 1, 40 do ok = ok and keep[i]:to_host()[2 ^ 20 - 1] == i end
      io.write(tostring(ok))
    ]]
    assert.are.equal("true", out)
  end)

  it("leaves a stopped collector stopped", function()
    local out = run [[
      local tocha = require "tocha"
      collectgarbage("stop")
      for i = 1, 20 do tocha.empty({ 2 ^ 20 }) end
      io.write(tocha.memory.stats("sim").allocated)
    ]]
    assert.are.equal(tostring(20 * 4 * MiB), out)
  end)

  it("gives cached blocks back when a new block would pass the device's limit", function()
    local out = run([[
      local tocha = require "tocha"
      tocha.empty({ 2 ^ 20 }):free()        -- 4 MiB, now cached
      local big = tocha.empty({ 1536 * 1024 }) -- 6 MiB: 4 + 6 > 8 without the cached block
      local s = tocha.memory.stats("sim")
      io.write(s.cached, " ", s.reserved)
    ]], { TOCHA_SIM_MEMORY_LIMIT = tostring(8 * MiB) })
    assert.are.equal("0 " .. tostring(6 * MiB), out)
  end)
  describe("on cuda #gpu", function()
    local cuda = tocha.device("cuda")

    it("keeps a freed block in the device's pool and serves the next tensor of its size from it", function()
      -- 64 MiB: a block of its own in the pool, whatever else the process holds
      local n, bytes = 16 * MiB, 64 * MiB
      tocha.memory.empty_cache("cuda")
      local before = tocha.memory.stats("cuda")
      local a = tocha.empty({ n }, { device = cuda })
      local s0 = tocha.memory.stats("cuda")
      assert.are.equal(before.allocated + bytes, s0.allocated)
      assert.is_true(s0.reserved >= before.reserved + bytes, s0.reserved)
      a:free()
      local s1 = tocha.memory.stats("cuda")
      assert.are.equal(s0.reserved, s1.reserved) -- freed, still held by the pool
      assert.is_true(s1.cached >= bytes, s1.cached)
      assert.are.equal(before.allocated, s1.allocated)
      local b = tocha.empty({ n }, { device = cuda })
      local s2 = tocha.memory.stats("cuda")
      assert.are.equal(s1.reserved, s2.reserved)
      assert.are.equal(s1.cache_hits + 1, s2.cache_hits)
      b:free()
      tocha.memory.empty_cache("cuda")
      local s3 = tocha.memory.stats("cuda")
      assert.is_true(s3.cached < bytes, s3.cached)
      assert.is_true(s3.reserved <= s1.reserved - bytes, s3.reserved)
    end)

    it("gives a reused block's tensor the right values", function()
      local a = tocha.full({ 3000 }, 7, { device = cuda })
      a:free()
      local b = tocha.rand({ 3000 }, { device = cuda, seed = 5 })
      local fresh = tocha.rand({ 3000 }, { device = "sim", seed = 5 })
      assert.are.same(fresh:to_table(), b:to_table())
    end)

    it("lets no kernel still writing a freed block meet its next owner on another stream", function()
      local k = tocha.kernel { source = [[
        __device__ void slow_fill(float *x, long long n, float v, int spins)
        {
            long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
            if (i >= n) return;
            float acc = 0;
            for (int k = 0; k < spins; ++k) acc = acc * 0.5f + 1.0f;
            x[i] = v + (acc > 1e30f ? 1.0f : 0.0f);
        }]], name = "slow_fill", params = "f32* x, i64 n, f32 v, i32 spins" }
      local n = 2 ^ 20
      local writer, reader = tocha.stream("cuda"), tocha.stream("cuda")
      for round = 1, 3 do
        local x = tocha.empty({ n }, { device = cuda })
        writer:use(function() k:launch(n / 256, 256, x, n, -round, 20000) end)
        x:free() -- while the slow kernel still runs
        local y = reader:use(function() return tocha.empty({ n }, { device = cuda }):fill(round) end)
        reader:synchronize()
        writer:synchronize()
        local got = y:to_host()
        local wrong = 0
        for i = 0, n - 1 do if got[i] ~= round then wrong = wrong + 1 end end
        assert.are.equal(0, wrong)
      end
    end)

    it("stays flat over 10,000 steps that each drop a 16 MiB tensor: reserved within 2 tensors", function()
      local out = run([[
        local tocha = require "tocha"
        local ffi = require "ffi"
        local probe = ffi.new("float[4]")
        local base, top = tocha.memory.stats().reserved, 0
        for i = 1, 10000 do
          local t = tocha.empty({ 4 * 2 ^ 20 })
          t:read(probe, 0, 4)
          top = math.max(top, tocha.memory.stats().reserved - base)
        end
        io.write(top)
      ]], { TOCHA_DEVICE = "cuda" })
      assert.is_true(tonumber(out) <= 2 * 16 * MiB, out)
    end)
  end)
end)
