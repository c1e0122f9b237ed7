-- Devices: the list, their figures, the choice of the default (TOCHA_DEVICE), the messages
-- when CUDA cannot be used, and timing.
local tocha = require "tocha"
local process = require "support.process"

local default_device = process.default_device

describe("tocha devices", function()
  it("lists the sim devices after any GPU, with their figures", function()
    local list = tocha.devices()
    local gpus = #list - 2 -- sim and sim:1 unless TOCHA_SIM_DEVICES says otherwise
    for i, name in ipairs({ "sim", "sim:1" }) do
      local sim = list[gpus + i]
      assert.are.equal(name, sim.name)
      assert.are.equal("sim", sim.kind)
      local info = sim:info()
      assert.is_true(info.memory_total > 0 and info.memory_free <= info.memory_total)
      assert.truthy(info.target:match("^sim%-"))
    end
    for i = 1, gpus do
      assert.are.equal("cuda:" .. (i - 1), list[i].name)
      assert.truthy(list[i].target:match("^sm_%d+$"))
    end
  end)

  it("honours TOCHA_DEVICE=sim and says so", function()
    local out, err, status = default_device { TOCHA_DEVICE = "sim" }
    assert.are.equal(0, status, err)
    assert.are.equal("sim | chosen by TOCHA_DEVICE=sim", out)
  end)

  it("falls back to sim with the reason when there is no driver", function()
    local out, err, status = default_device { TOCHA_DEVICE = false, TOCHA_CUDA_LIBRARY = "/nonexistent/libcuda.so.1" }
    assert.are.equal(0, status, err)
    assert.are.equal("sim | no usable GPU: no NVIDIA driver: /nonexistent/libcuda.so.1 was not found", out)
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
