-- upsample_image.lua: upsamples a PNG on the device with teeny-kernels' forward kernel.
--   tocha examples/upsample_image.lua [in.png [out.png [scale_h [scale_w]]]]
-- Defaults: examples/data/pattern.png (made by make_pattern_image.lua), 4x4, written to
-- pattern-upsampled.png in the current folder.
local tocha = require "tocha"

local input = arg[1] or "examples/data/pattern.png"
local output = arg[2] or "pattern-upsampled.png"
local sh = tonumber(arg[3] or 4)
local sw = tonumber(arg[4] or sh)

local img = tocha.image.read(input)                          -- u8 [1, C, H, W]
local up = tocha.UpsampleNearest2dForward.new(sh, sw, 128, "u8")
local big = up:forward(img)
tocha.image.write(output, big)
local s, b = img:shape(), big:shape()
print(("%s %dx%d -> %s %dx%d (%d channels) on %s with %s"):format(input, s[4], s[3], output,
  b[4], b[3], s[2], big:device(), up.id))
