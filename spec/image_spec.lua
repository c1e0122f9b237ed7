-- PNG files to and from u8 tensors, and the example that upsamples one.
local tocha = require "tocha"
local process = require "support.process"

describe("tocha.image", function()
  it("writes and reads back every pixel of 1 to 4 channel images", function()
    for c = 1, 4 do
      local img = tocha.rand({ 1, c, 7, 9 }, { dtype = "u8", device = "sim", seed = c, low = 0, high = 256 })
      local path = os.tmpname() .. ".png"
      tocha.image.write(path, img)
      local back = tocha.image.read(path, "sim")
      os.remove(path)
      assert.are.same(img:shape(), back:shape())
      assert.are.same(img:to_table(true), back:to_table(true))
    end
  end)

  it("reads the shipped pattern as a 48x32 RGB image", function()
    local img = tocha.image.read("examples/data/pattern.png", "sim")
    assert.are.same({ 1, 3, 32, 48 }, img:shape())
  end)

  it("refuses a file that is not an image", function()
    local ok, err = pcall(tocha.image.read, "spec/image_spec.lua")
    assert.is_false(ok)
    assert.truthy(err:find("tocha.image.read: spec/image_spec.lua: ", 1, true))
  end)

  it("refuses a tensor that is not u8", function()
    assert.has_error(function() tocha.image.write("/tmp/x.png", tocha.zeros({ 1, 3, 2, 2 })) end,
      "tocha.image.write: image: expected a u8 tensor [1, C, H, W]")
  end)

  it("upsample_image.lua writes the input upsampled pixel for pixel", function()
    local out = os.tmpname() .. ".png"
    local _, err, status = process.run { args = { "examples/upsample_image.lua", "examples/data/pattern.png", out, "3", "2" },
      env = { TOCHA_DEVICE = "sim" } }
    assert.are.equal(0, status, err)
    local small = tocha.image.read("examples/data/pattern.png", "sim"):to_table()
    local big = tocha.image.read(out, "sim"):to_table()
    os.remove(out)
    assert.are.equal(96, #big[1][1])
    assert.are.equal(96, #big[1][1][1])
    for c = 1, 3 do
      for y = 1, 96 do
        for x = 1, 96 do
          assert(big[1][c][y][x] == small[1][c][math.floor((y - 1) / 3) + 1][math.floor((x - 1) / 2) + 1])
        end
      end
    end
  end)
end)
