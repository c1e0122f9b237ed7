-- tocha.bench: the warm-up and reps run as asked, the figures are consistent (min <= median <=
-- max, the median of the reps' own times, GB/s from bytes), and bad options are named. On sim
-- (device events are the host clock there) and, tagged #gpu, on cuda with the L2 flush.
local tocha = require "tocha"
local ref = require "support.reference"

describe("tocha.bench", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("runs warmup + reps calls and reports the median, min, max and GB/s of the reps", function()
        local x = tocha.rand({ 2 ^ 16 }, { device = device, seed = 1 })
        local y = tocha.empty({ 2 ^ 16 }, { device = device })
        local calls = 0
        local r = tocha.bench(function() calls = calls + 1; y:copy(x) end,
          { warmup = 2, reps = 9, bytes = 2 * x:nbytes(), device = device })
        assert.are.equal(11, calls)
        assert.are.equal(9, r.reps)
        assert.are.equal(9, #r.times_ms)
        local sorted = {}
        for i, t in ipairs(r.times_ms) do
          assert.is_true(t >= 0)
          sorted[i] = t
        end
        table.sort(sorted)
        assert.are.equal(sorted[5], r.median_ms)
        assert.are.equal(sorted[1], r.min_ms)
        assert.are.equal(sorted[9], r.max_ms)
        assert.are.equal(2 * x:nbytes() / (r.median_ms * 1e6), r.gbps)
        local plain = tocha.bench(function() y:copy(x) end, { reps = 4, device = device, flush = false })
        assert.is_nil(plain.gbps)
        assert.are.equal((plain.times_ms[1] + plain.times_ms[2] + plain.times_ms[3] + plain.times_ms[4] -
          plain.min_ms - plain.max_ms) / 2, plain.median_ms)
      end)

      it("names its bad arguments", function()
        for _, case in ipairs({
          { "tocha.bench: fn: expected a function, got number", 5 },
          { "tocha.bench: options.reps: expected an integer >= 1, got 0", function() end, { reps = 0 } },
          { "tocha.bench: options.warmup: expected an integer >= 0, got 1.5", function() end, { warmup = 1.5 } },
          { "tocha.bench: options.bytes: expected a positive number of bytes, got -1", function() end, { bytes = -1 } },
          { "tocha.bench: options: unknown option \"rep\" (expected warmup, reps, bytes, device, flush, name)", function() end, { rep = 3 } },
        }) do
          local ok, message = pcall(tocha.bench, unpack(case, 2))
          assert.is_false(ok)
          assert.truthy(message:find(case[1], 1, true), message)
        end
      end)
    end)
  end
end)
