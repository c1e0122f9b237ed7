-- bench/profile_case.lua: launches one upsample case a few times, for a profiler to watch.
--   ncu --clock-control none -k regex:upsample tocha bench/profile_case.lua forward f32 2 2 1024
--   tocha bench/profile_case.lua OP DTYPE SCALE_H SCALE_W W [BLOCK [X_OFF Y_OFF]]
-- BLOCK 0 (or none) takes the measured block width. With X_OFF and Y_OFF (forward only), x and
-- y start that many bytes past their buffers' starts and the launches are the RuntimeOp's
-- packed ones, as in bench/offsets.lua.
local tocha = require "tocha"
local ffi = require "ffi"
local op, dtype = arg[1] or "forward", arg[2] or "f32"
local sh, sw, W = tonumber(arg[3] or 2), tonumber(arg[4] or 2), tonumber(arg[5] or 1024)
local block = tonumber(arg[6] or 0)
local x_off, y_off = tonumber(arg[7]), tonumber(arg[8] or 0)
local size = ({ f32 = 4, f16 = 2, bf16 = 2, u8 = 1 })[dtype]
local H = math.ceil(512 * 2 ^ 20 / (size * (1 + sh * sw)) / (128 * W))
local up = tocha.UpsampleNearest2dForward.new(sh, sw, block > 0 and block or nil, dtype, block > 0 and block or nil)
local shape, out = { 8, 16, H, W }, { 8, 16, H * sh, W * sw }
if x_off then
  assert(op == "forward", "profile_case.lua: offsets are for the forward")
  local device = tocha.device("cuda")
  local n_in, n_out = 8 * 16 * H * W, 8 * 16 * H * sh * W * sw
  -- 256 elements to spare past each tensor, for offsets up to 256 bytes
  local x = tocha.rand({ n_in + 256 }, { dtype = dtype, seed = 1, device = device })
  local y = tocha.empty({ n_out + 256 }, { dtype = dtype, device = device })
  local xa, ya = ffi.cast("uint64_t", x.data) + x_off, ffi.cast("uint64_t", y.data) + y_off
  for _ = 1, 4 do
    tocha.launch_packed(up.kernel, device, up:grid(out), up:block(), up:pack_args({ { xa, shape } }, {}, ya, out))
  end
else
  local x = tocha.rand(shape, { dtype = dtype, seed = 1 })
  local y = up:forward(x)
  for _ = 1, 4 do
    if op == "forward" then up:forward(x, y) else up:backward(x, y, x) end
  end
end
tocha.synchronize()
print(("%s %s %dx%d W=%d H=%d block %d x+%d y+%d: done"):format(op, dtype, sh, sw, W, H, up.block_ow, x_off or 0, y_off))
