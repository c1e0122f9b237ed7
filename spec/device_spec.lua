-- Devices: the list, their figures, the choice of the default (TOCHA_DEVICE), the messages
-- when CUDA cannot be used, and timing.
local tocha = require "tocha"
local process = require "support.process"

local function default_device(env)
  return process.run {
    args = { "-e", "local d, why = require('tocha').default_device() io.write(d.name, ' | ', why)" },
    env = env,
  }
end

describe("tocha devices", function()
  it("lists sim after any GPU, with its figures", function()
    local list = tocha.devices()
    local sim = list[#list]
    assert.are.equal("sim", sim.name)
    assert.are.equal("sim", sim.kind)
    local info = sim:info()
    assert.is_true(info.memory_total > 0 and info.memory_free <= info.memory_total)
    assert.truthy(info.target:match("^sim%-"))
    for i = 1, #list - 1 do
      assert.are.equal("cuda:" .. (i - 1), list[i].name)
      assert.truthy(list[i].target:match("^sm_%d+$"))
    end
  end)

  it("honours TOCHA_DEVICE=sim and says so", function()
    local out, err, status = default_device { TOCHA_DEVICE = "sim" }
    assert.are.equal(0, status, err)
    assert.are.equal("sim | chosen by TOCHA_DEVICE=sim", out)
  end)

  it("refuses an unknown TOCHA_DEVICE value", function()
    local _, err, status = default_device { TOCHA_DEVICE = "gpu0" }
    assert.are.equal(1, status)
    assert.truthy(err:find("TOCHA_DEVICE: unknown device 'gpu0' (expected cuda, cuda:N or sim)", 1, true))
  end)

  it("explains a forced cuda device that is unavailable", function()
    local _, err, status = default_device { TOCHA_DEVICE = "cuda", TOCHA_CUDA_LIBRARY = "/nonexistent/libcuda.so.1" }
    assert.are.equal(1, status)
    assert.truthy(err:find("TOCHA_DEVICE: cuda is unavailable here: no NVIDIA driver: /nonexistent/libcuda.so.1 was not found", 1, true))
  end)

  it("falls back to sim with the reason when there is no driver", function()
    local out, err, status = default_device { TOCHA_DEVICE = false, TOCHA_CUDA_LIBRARY = "/nonexistent/libcuda.so.1" }
    assert.are.equal(0, status, err)
    assert.are.equal("sim | no usable GPU: no NVIDIA driver: /nonexistent/libcuda.so.1 was not found", out)
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

  describe("timing", function()
    it("measures elapsed milliseconds between events", function()
      local ms = tocha.time(function()
        local t = tocha.rand({ 200000 }, { device = "sim", seed = 1 })
        t:to_table(true)
      end, "sim")
      assert.is_true(ms > 0 and ms < 60000)
    end)

    it("refuses an event that was never recorded", function()
      local a, b = tocha.event("sim"), tocha.event("sim")
      a:record()
      assert.has_error(function() a:elapsed(b) end, "tocha.Event:elapsed: end: event was never recorded")
    end)
  end)
end)
