-- UpsampleNearest2dForward.tuned: the block widths of both kernels chosen by tocha.autotune for
-- an input's shape, dtype and device; the op it returns computes what the default one does, and
-- a second process reads the choice from disk without timing.
local tocha = require "tocha"
local process = require "support.process"
local fails_with = require("support.assertions").fails_with

local BLOCKS = { [32] = true, [64] = true, [128] = true, [256] = true, [512] = true, [1024] = true }

describe("UpsampleNearest2dForward.tuned()", function()
  it("returns an upsample with tuned block widths that computes what the default one does", function()
    for _, case in ipairs({ { { 2, 3, 9, 14 }, "f32", "nchw" }, { { 1, 5, 6, 4 }, "f16", "nhwc" } }) do
      local x = tocha.randn(case[1], { device = "sim", dtype = case[2], seed = 5 })
      local up = tocha.UpsampleNearest2dForward.tuned(3, 2, x, { layout = case[3] })
      assert.is_true(BLOCKS[up.block_ow], up.block_ow)
      assert.is_true(BLOCKS[up.backward_kernel.block_iw], up.backward_kernel.block_iw)
      assert.are.equal(case[3], up.layout)
      local plain = tocha.UpsampleNearest2dForward.new(3, 2, nil, case[2], { layout = case[3] })
      local y = up:forward(x)
      assert.are.same(plain:forward(x):to_table(), y:to_table())
      local dy = tocha.randn(y:shape(), { device = "sim", dtype = case[2], seed = 6 })
      assert.are.same(plain:backward(x, dy):to_table(), up:backward(x, dy):to_table())
    end
  end)

  it("reads the choice from disk in a second process", function()
    local dir = process.tempdir()
    local script = process.write_script([[
local tocha = require "tocha"
local up = tocha.UpsampleNearest2dForward.tuned(2, 2, tocha.rand({ 1, 2, 8, 8 }, { device = "sim" }))
io.write(up.block_ow, " ", up.backward_kernel.block_iw)
]])
    local env = { TOCHA_CACHE_DIR = dir, TOCHA_AUTOTUNE = "verbose" }
    local first, err1 = process.tocha({ script }, "", env)
    assert.truthy(err1:find("upsample_nearest2d_forward: config %d {\"block\"=%d+}, [%d.]+ ms %(tuned%)"), err1)
    local second, err2 = process.tocha({ script }, "", env)
    assert.are.equal(first, second)
    assert.truthy(err2:find("upsample_nearest2d_forward: config %d {\"block\"=%d+}, [%d.]+ ms %(disk%)"), err2)
    assert.truthy(err2:find("upsample_nearest2d_backward: config %d {\"block\"=%d+}, [%d.]+ ms %(disk%)"), err2)
    process.remove_tree(dir)
  end)

  it("checks its arguments", function()
    fails_with("tocha.UpsampleNearest2dForward.tuned: scale_h: expected an integer from 1 to 64, got 0",
      function() tocha.UpsampleNearest2dForward.tuned(0, 2, tocha.zeros({ 1, 1, 2, 2 }, { device = "sim" })) end)
    fails_with("tocha.UpsampleNearest2dForward.tuned: x: expected a tensor, got number",
      function() tocha.UpsampleNearest2dForward.tuned(2, 2, 5) end)
  end)
end)
