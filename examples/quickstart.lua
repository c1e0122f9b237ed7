-- quickstart.lua: tocha in one page, `make demo` runs it.
-- Builds teeny-kernels' two kernels, runs nearest-neighbour upsampling forward and backward on
-- the default device (a GPU when one is usable, else the CPU simulator), checks both against
-- plain Lua and with a finite-difference gradcheck, and says what ran where and how long.
local tocha = require "tocha"

local device, why = tocha.default_device()
print(("tocha %s on %s (%s): %s"):format(tocha.version, device.name, device.product, why))

-- Kernel construction: the compile-time constants are baked into the generated entry point.
local up = tocha.UpsampleNearest2dForward.new(2, 2, 128)        -- scale_h, scale_w, block_ow
local down = up.backward_kernel                                  -- UpsampleNearest2dBackward(2, 2, 128)
for _, k in ipairs({ up, down }) do
  print(("\n%s  (hash %s)\n%s"):format(k.id, k.hash, k.entry_point_source))
end

-- Forward and backward on a [B, C, H, W] = [4, 3, 33, 45] f32 tensor.
local x = tocha.rand({ 4, 3, 33, 45 }, { seed = 1 })
local dy = tocha.randn({ 4, 3, 66, 90 }, { seed = 2 })
local y, dx
-- The first launch of each kernel builds it (or loads it from the disk cache).
local first_forward_ms = tocha.time(function() y = up:forward(x) end)
local first_backward_ms = tocha.time(function() dx = up:backward(x, dy) end)
local forward_ms = tocha.time(function() up:forward(x, y) end)
local backward_ms = tocha.time(function() up:backward(x, dy, dx) end)
print(("x  %s\ny  %s\ndx %s"):format(x:summary(), y:summary(), dx:summary()))

-- The reference: plain Lua loops over the same values.
local B, C, H, W = 4, 3, 33, 45
local xv, yv, dyv, dxv = x:to_table(true), y:to_table(true), dy:to_table(true), dx:to_table(true)
local forward_bad, backward_err = 0, 0
for p = 0, B * C - 1 do
  for oh = 0, 2 * H - 1 do
    for ow = 0, 2 * W - 1 do
      local want = xv[(p * H + math.floor(oh / 2)) * W + math.floor(ow / 2) + 1]
      if yv[(p * 2 * H + oh) * 2 * W + ow + 1] ~= want then forward_bad = forward_bad + 1 end
    end
  end
  for ih = 0, H - 1 do
    for iw = 0, W - 1 do
      local s = 0
      for a = 0, 1 do
        for b = 0, 1 do s = s + dyv[(p * 2 * H + 2 * ih + a) * 2 * W + 2 * iw + b + 1] end
      end
      backward_err = math.max(backward_err, math.abs(dxv[(p * H + ih) * W + iw + 1] - s))
    end
  end
end
print(("\nforward:  %d of %d elements differ from the reference"):format(forward_bad, #yv))
print(("backward: max |error| %.2e against the reference"):format(backward_err))

-- Gradcheck in f64: the backward against finite differences of the forward.
local up64 = tocha.UpsampleNearest2dForward.new(2, 2, 128, "f64")
local ok, report = tocha.gradcheck(up64, tocha.randn({ 1, 2, 5, 7 }, { dtype = "f64", seed = 3 }))
print(("gradcheck: %s (%d elements, max error %.1e)"):format(ok and "ok" or "FAILED", report.checked, report.max_abs))

local stats = tocha.cache.stats()
print(("\nran on %s: forward %.3f ms, backward %.3f ms (first launches, with their builds: %.1f and %.1f ms)")
  :format(device.name, forward_ms, backward_ms, first_forward_ms, first_backward_ms))
print(("kernels compiled %d, loaded from the disk cache %d (%s)"):format(stats.compiles,
  stats.disk_hits, tocha.cache.dir() or "disk cache off"))
if forward_bad > 0 or backward_err > 1e-5 or not ok then os.exit(1) end
