-- upsample_image.lua: upsamples a PNG on the device with teeny-kernels' forward kernel.
--   tocha examples/upsample_image.lua [in.png [out.png [scale_h [scale_w]]]]
-- Defaults: data/pattern.png beside this script (made by make_pattern_image.lua), 4x4, written
-- to a fresh file in /tmp (the line it prints names it), so that it runs from any folder and
-- writes into none unless asked.
local tocha = require "tocha"

-- This script's folder, from the path it was started by (arg[0]), "." when it has none.
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."

-- A fresh path in /tmp: os.tmpname() makes the name unique, the extension tells viewers it is
-- a PNG (the empty file tmpname creates goes, so that nothing but the PNG is left).
local function temp_png(tag)
  local base = os.tmpname()
  os.remove(base)
  return base .. tag .. ".png"
end

local input = arg[1] or here .. "/data/pattern.png"
local output = arg[2] or temp_png("-upsampled")
local sh = tonumber(arg[3] or 4)
local sw = tonumber(arg[4] or sh)

local img = tocha.image.read(input)                          -- u8 [1, C, H, W]
local up = tocha.UpsampleNearest2dForward.new(sh, sw, 128, "u8")
local big = up:forward(img)
tocha.image.write(output, big)
local s, b = img:shape(), big:shape()
print(("%s %dx%d -> %s %dx%d (%d channels) on %s with %s"):format(input, s[4], s[3], output,
  b[4], b[3], s[2], big:device(), up.id))
