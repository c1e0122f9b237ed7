-- make_pattern_image.lua: draws examples/data/pattern.png, the input of upsample_image.lua:
-- a 48x32 RGB test card (colour gradients, a checkerboard and a diagonal) drawn here, so the
-- repository ships no image it did not make.
--   tocha examples/make_pattern_image.lua [out.png]
-- Written to out.png, else to a fresh file in /tmp (the line it prints names it): it writes
-- into the checkout only when asked, `tocha examples/make_pattern_image.lua
-- examples/data/pattern.png` remaking the shipped one.
local tocha = require "tocha"

-- A fresh path in /tmp: os.tmpname() makes the name unique, the extension tells viewers it is
-- a PNG (the empty file tmpname creates goes, so that nothing but the PNG is left).
local function temp_png(tag)
  local base = os.tmpname()
  os.remove(base)
  return base .. tag .. ".png"
end

local W, H = 48, 32
local rgb = {}
for ch = 1, 3 do
  local plane = {}
  for y = 0, H - 1 do
    local row = {}
    for x = 0, W - 1 do
      local v
      if y < H / 2 then -- gradients: red across, green down, blue both ways
        v = ({ x * 255 / (W - 1), y * 255 / (H / 2 - 1), (x + y) * 255 / (W + H / 2 - 2) })[ch]
      else              -- a checkerboard of 4-pixel squares, crossed by a diagonal
        local check = (math.floor(x / 4) + math.floor(y / 4)) % 2 == 0
        v = check and 230 or 25
        if math.abs(x - (y - H / 2) * 3) <= 1 then v = ({ 255, 200, 0 })[ch] end
      end
      row[x + 1] = math.floor(v + 0.5)
    end
    plane[y + 1] = row
  end
  rgb[ch] = plane
end
local img = tocha.tensor({ rgb }, { dtype = "u8" })
local out = arg[1] or temp_png("-pattern")
tocha.image.write(out, img)
print(("wrote %s: %dx%d RGB"):format(out, W, H))
