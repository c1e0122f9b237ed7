-- Running out of device memory, tried on the simulator with TOCHA_SIM_MEMORY_LIMIT and on a
-- real GPU (#gpu): an allocation that fails collects garbage and retries once; one that still
-- fails is a clear error, and the session goes on.
local process = require "support.process"

local LIMIT = 8 * 2 ^ 20

local function run(code)
  return process.run { args = { "-e", code }, env = { TOCHA_SIM_MEMORY_LIMIT = tostring(LIMIT), TOCHA_DEVICE = "sim" } }
end

describe("device memory", function()
  it("is reported as the simulator's limit", function()
    local out, err, status = run([[io.write(require("tocha").device("sim"):info().memory_total)]])
    assert.are.equal(0, status, err)
    assert.are.equal(tostring(LIMIT), out)
  end)

  it("is reclaimed from garbage when an allocation fails: 100 x 4 MiB under an 8 MiB limit", function()
    local out, err, status = run([[
      local tocha = require "tocha"
      collectgarbage("stop") -- only the retry on a failed allocation may collect
      for _ = 1, 100 do tocha.empty({ 1024 * 1024 }) end
      io.write("ok")
    ]])
    assert.are.equal(0, status, err)
    assert.are.equal("ok", out)
  end)

  it("runs out with a clear error while the tensors are held, and goes on once one is freed", function()
    local out, err, status = run([[
      local tocha = require "tocha"
      local a, b = tocha.empty({ 1024 * 1024 }), tocha.empty({ 1024 * 1024 })
      local ok, message = pcall(tocha.zeros, { 1024 * 1024 })
      io.write(tostring(ok), "|", message, "|")
      a:free()
      local c = tocha.ones({ 1024 * 1024 })
      io.write(c:to_host()[1024 * 1024 - 1], "|", tostring(b:is_freed()))
    ]])
    assert.are.equal(0, status, err)
    local ok, message, value, b_freed = out:match("^(%a+)|(.-)|(%d+)|(%a+)$")
    assert.are.equal("false", ok)
    assert.truthy(message:find("tocha.zeros: out of memory on sim allocating 4194304 bytes$"), message)
    assert.are.equal("1", value)
    assert.are.equal("false", b_freed)
  end)

  describe("on a GPU #gpu", function()
    local tocha = require "tocha"

    it("is reclaimed from garbage: 2x the device's memory in unreferenced 8 GiB tensors", function()
      local dev = tocha.default_device()
      local before = dev:info()
      local reserved = tocha.memory.stats(dev.name).reserved
      local n = math.ceil(2 * before.memory_total / 2 ^ 33)
      collectgarbage("stop") -- only the retry on a failed allocation may collect
      local last
      for _ = 1, n do last = tocha.empty({ 2 ^ 31 }, { device = dev }) end -- raises if one fails
      assert.is_true(n * 2 ^ 33 > before.memory_free) -- more than fits at once: the retry collected
      last:fill(3)
      local tail = require("ffi").new("float[1]")
      assert.are.equal(3, last:read(tail, 2 ^ 31 - 1, 1)[0]) -- the last one is whole and usable
      last:free() -- the others are garbage; the collection below gives them back
      collectgarbage("restart")
      collectgarbage("collect")
      -- Everything is given back (the pool keeps freed blocks until empty_cache): what this
      -- process holds from the device is within 1 GiB of where it started (the device's free
      -- memory would also count what specs running beside this one hold).
      tocha.memory.empty_cache()
      assert.is_true(tocha.memory.stats(dev.name).reserved < reserved + 2 ^ 30)
    end)

    it("refuses more than the device has, with a clear error, and goes on", function()
      local dev = tocha.default_device()
      local bytes = 2 ^ 42 -- 4 TiB
      local ok, message = pcall(tocha.empty, { bytes / 4 }, { device = dev })
      assert.is_false(ok)
      assert.truthy(message:find(("tocha.empty: out of memory on %s allocating %d bytes$"):format(dev.name, bytes)), message)
      local t = tocha.ones({ 1000 }, { device = dev })
      assert.are.equal(1, t:to_table()[1000])
    end)
  end)
end)
