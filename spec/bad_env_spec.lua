-- Bad values in the environment variables tocha reads: each is an error (or, for the cache
-- switch, a warning) that names the variable and the value, at the first operation that reads
-- it, in a process that ends with status 1 rather than a crash; none is silently replaced by
-- a default. (The cache folder's own faults are in cache_spec.lua.)
local process = require "support.process"

local default_device = process.default_device

describe("bad environment", function()
  it("refuses an unknown TOCHA_DEVICE value", function()
    local _, err, status = default_device { TOCHA_DEVICE = "gpu0" }
    assert.are.equal(1, status)
    assert.truthy(err:find("TOCHA_DEVICE: unknown device 'gpu0' (expected cuda, cuda:N, sim or sim:N)", 1, true))
  end)

  it("explains a forced cuda device that is unavailable", function()
    local _, err, status = default_device { TOCHA_DEVICE = "cuda", TOCHA_CUDA_LIBRARY = "/nonexistent/libcuda.so.1" }
    assert.are.equal(1, status)
    assert.truthy(err:find("TOCHA_DEVICE: cuda is unavailable here: no NVIDIA driver: /nonexistent/libcuda.so.1 was not found", 1, true))
  end)

  it("says when NVRTC is missing", function()
    local out, err, status = process.run {
      args = { "-e", "io.write(require('tocha').versions().nvrtc or 'none')", },
      env = { TOCHA_NVRTC_LIBRARY = "/nonexistent/libnvrtc.so" },
    }
    assert.are.equal(0, status, err)
    assert.are.equal("none", out)
    local _, err2, status2 = process.run {
      args = { "-e", "require('tocha').kernel{source='__device__ void f(){}', name='f', params=''}:build('sm_90')" },
      env = { TOCHA_NVRTC_LIBRARY = "/nonexistent/libnvrtc.so", TOCHA_CACHE = "off" },
    }
    assert.are.equal(1, status2)
    assert.truthy(err2:find("NVRTC is missing: TOCHA_NVRTC_LIBRARY=/nonexistent/libnvrtc.so could not be loaded", 1, true))
  end)

  it("takes a sim device by index and refuses one that does not exist", function()
    local out, err, status = default_device { TOCHA_DEVICE = "sim:1" }
    assert.are.equal(0, status, err)
    assert.are.equal("sim:1 | chosen by TOCHA_DEVICE=sim:1", out)
    out, err, status = default_device { TOCHA_DEVICE = "sim:2" }
    assert.are.equal("", out)
    assert.are.equal(1, status)
    assert.truthy(err:find("TOCHA_DEVICE: sim:2 does not exist (this process has sim:0 to sim:1; TOCHA_SIM_DEVICES sets how many, at most 8)", 1, true), err)
    out, err, status = default_device { TOCHA_DEVICE = "sim:1x" }
    assert.are.equal("", out)
    assert.are.equal(1, status)
    assert.truthy(err:find("TOCHA_DEVICE: unknown device 'sim:1x' (expected cuda, cuda:N, sim or sim:N)", 1, true), err)
  end)

  it("says that a forced driver library is there but cannot be loaded", function()
    local _, err, status = default_device { TOCHA_DEVICE = "cuda", TOCHA_CUDA_LIBRARY = "/etc/passwd" }
    assert.are.equal(1, status)
    assert.truthy(err:find("TOCHA_DEVICE: cuda is unavailable here: no NVIDIA driver: /etc/passwd could not be loaded (", 1, true))
  end)

  -- A sim allocation and launch under `env`: the message, status 1, no crash.
  local function sim_work(env)
    return process.run { args = { "-e", "require('tocha').zeros({ 64 }, { device = 'sim' })" }, env = env }
  end

  for _, value in ipairs({ "abc", "0", "-5", "+5", " 5M", "12Q", "" .. string.rep("9", 30) }) do
    it("refuses TOCHA_SIM_MEMORY_LIMIT=" .. value:sub(1, 8), function()
      local _, err, status = sim_work { TOCHA_SIM_MEMORY_LIMIT = value }
      assert.are.equal(1, status)
      assert.truthy(err:find("tocha.zeros: TOCHA_SIM_MEMORY_LIMIT: expected a positive number of bytes (with K, M or G allowed), got '"
        .. value .. "'", 1, true), err)
    end)
  end

  it("takes TOCHA_SIM_MEMORY_LIMIT with a suffix", function()
    local out, err, status = process.run {
      args = { "-e", "local t = require('tocha') local ok, e = pcall(t.zeros, { 2 ^ 20 }, { device = 'sim' })" ..
        " io.write(tostring(ok), ' ', tostring(e):match('out of memory') or '', ' ', t.zeros({ 1000 }, { device = 'sim' }):numel())" },
      env = { TOCHA_SIM_MEMORY_LIMIT = "1M" },
    }
    assert.are.equal(0, status, err)
    assert.are.equal("false out of memory 1000", out) -- 4 MiB is refused, 4 KB fits after it
  end)

  for _, value in ipairs({ "0", "abc", "300", "2.5", "-3", "+4", " 4" }) do
    it("refuses TOCHA_SIM_THREADS=" .. value, function()
      local _, err, status = sim_work { TOCHA_SIM_THREADS = value }
      assert.are.equal(1, status)
      assert.truthy(err:find("TOCHA_SIM_THREADS: expected an integer from 1 to 256, got '" .. value .. "'", 1, true), err)
    end)
  end

  it("names an unknown TOCHA_CACHE value in a warning and keeps the cache on", function()
    local dir = process.tempdir()
    local out, err, status = process.run {
      args = { "-e", "local t = require('tocha') t.zeros({ 2 }, { device = 'sim' }) io.write(t.cache.dir() and t.cache.stats().disk_writes or -1)" },
      env = { TOCHA_CACHE = "maybe", TOCHA_CACHE_DIR = dir },
    }
    process.remove_tree(dir)
    assert.are.equal(0, status, err)
    assert.truthy(err:find("TOCHA_CACHE: unknown value 'maybe' (expected on or off): the disk cache stays on", 1, true), err)
    local _, count = err:gsub("TOCHA_CACHE: unknown value", "")
    assert.are.equal(1, count) -- said once
    assert.is_true(tonumber(out) >= 1) -- the kernel went to the disk cache
  end)

  it("names a simulator compiler that cannot be run", function()
    local _, err, status = process.run {
      args = { "-e", "require('tocha').zeros({ 2 }, { device = 'sim' })" },
      env = { TOCHA_SIM_CXX = "/nonexistent/c++", TOCHA_CACHE = "off" },
    }
    assert.are.equal(1, status)
    assert.truthy(err:find("tocha.zeros: the simulator's C++ compiler '/nonexistent/c++' could not be run (install g++ or set TOCHA_SIM_CXX)", 1, true), err)
  end)
end)
