-- bench/offsets.lua: the forward's % of copy against where x and y start, on the H200.
--
--   tocha bench/offsets.lua
--
-- Each case (about 512 MB moved) runs with y, or x, moved by a few bytes past its buffer's
-- start, through the RuntimeOp's packed launch. y off 16 bytes turns rows of whole vectors
-- (each built once for all its output rows) into the flat output; x moved alone shows what
-- loading x's spans from unaligned chunks costs. Medians of device-event times over 50
-- launches after a warm-up, two input/output sets alternating.
local tocha = require "tocha"
local ffi = require "ffi"
local device = tocha.device("cuda")
local timing = require "bench.timing"
local function time(fn, n) return timing.time_launches(device, fn, n) end
local copy = timing.copy_bandwidth(device)
print(("copy %.0f GB/s"):format(copy))
local SIZES = { f32 = 4, f16 = 2, u8 = 1 }
-- {x, y} byte offsets per dtype: y off 16 bytes by one element, a word, 8 bytes, all but one
-- element, and by 16 bytes (rows stay whole vectors); x alone off by one element, so that the
-- vectors' input spans are shifted while the rows' ends stay 16-byte boundaries; and x moved
-- with y so that, for scale_w 1 (and f32 2x2 at y+8), the spans stay aligned while the rows'
-- ends do not: the rows' ends' cost apart from the spans'.
local OFFSETS = {
  f32 = { { 0, 0 }, { 0, 4 }, { 0, 8 }, { 0, 12 }, { 0, 16 }, { 4, 0 }, { 4, 8 } },
  f16 = { { 0, 0 }, { 0, 2 }, { 0, 4 }, { 0, 8 }, { 0, 14 }, { 0, 16 }, { 2, 0 }, { 2, 2 }, { 8, 8 } },
  u8 = { { 0, 0 }, { 0, 1 }, { 0, 4 }, { 0, 8 }, { 0, 15 }, { 0, 16 }, { 1, 0 }, { 1, 1 }, { 8, 8 } },
}
local cases = {
  { "f16", 3, 3, 1024 }, { "f32", 2, 2, 1024 }, { "u8", 3, 3, 1024 }, { "u8", 2, 1, 1024 }, { "f16", 2, 1, 1024 },
  { "f32", 2, 1, 1024 }, { "u8", 2, 2, 1024 },
  { "f16", 3, 3, 1020 }, { "u8", 2, 1, 1020 }, { "u8", 3, 3, 1020 }, { "f32", 2, 2, 1023 },
}
for _, c in ipairs(cases) do
  local dt, sh, sw, W = c[1], c[2], c[3], c[4]
  local size = SIZES[dt]
  local B, C = 8, 16
  local H = math.ceil(512 * 2 ^ 20 / (size * (1 + sh * sw)) / (B * C * W))
  local shape, out = { B, C, H, W }, { B, C, H * sh, W * sw }
  local nin, nout = B * C * H * W, B * C * H * sh * W * sw
  local bytes = (nin + nout) * size
  local up = tocha.UpsampleNearest2dForward.new(sh, sw, dt == "u8" and 128 or 64, dt)
  local sets = {}
  for s = 1, 2 do
    sets[s] = { x = tocha.empty({ nin + 256 }, { dtype = dt, device = device }):fill(1),
      y = tocha.empty({ nout + 256 }, { dtype = dt, device = device }) }
  end
  local line = {}
  for _, o in ipairs(OFFSETS[dt]) do
    local xo, yo = o[1], o[2]
    local ms = time(function(k)
      local s = sets[k % 2 + 1]
      local xa, ya = ffi.cast("uint64_t", s.x.data) + xo, ffi.cast("uint64_t", s.y.data) + yo
      tocha.launch_packed(up.kernel, device, up:grid(out), up:block(), up:pack_args({ { xa, shape } }, {}, ya, out))
    end, 50)
    line[#line + 1] = ("x+%d y+%d %.1f%%"):format(xo, yo, 100 * bytes / (ms * 1e6) / copy)
  end
  print(("%s %dx%d W=%d: %s"):format(dt, sh, sw, W, table.concat(line, "  ")))
  for s = 1, 2 do sets[s].x:free(); sets[s].y:free() end
end
