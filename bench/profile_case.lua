-- bench/profile_case.lua: launches one upsample case a few times, for a profiler to watch.
--   ncu --clock-control none -k regex:upsample tocha bench/profile_case.lua forward f32 2 2 1024
local tocha = require "tocha"
local op, dtype = arg[1] or "forward", arg[2] or "f32"
local sh, sw, W = tonumber(arg[3] or 2), tonumber(arg[4] or 2), tonumber(arg[5] or 1024)
local block = tonumber(arg[6] or 0)
local cases = require "bench.cases"
local size = ({ f32 = 4, f16 = 2, bf16 = 2, u8 = 1 })[dtype]
local H = math.ceil(512 * 2 ^ 20 / (size * (1 + sh * sw)) / (128 * W))
local _ = cases
local up = tocha.UpsampleNearest2dForward.new(sh, sw, block > 0 and block or nil, dtype, block > 0 and block or nil)
local x = tocha.rand({ 8, 16, H, W }, { dtype = dtype, seed = 1 })
local y = up:forward(x)
for _ = 1, 4 do
  if op == "forward" then up:forward(x, y) else up:backward(x, y, x) end
end
tocha.synchronize()
print(("%s %s %dx%d W=%d H=%d block %d: done"):format(op, dtype, sh, sw, W, H, up.block_ow))
