-- tocha.ChannelCat: the join of two tensors along dimension 2 and its split, in every dtype, on
-- shapes whose runs are whole 16-byte vectors and shapes whose runs are not (the element path),
-- element for element against a reference built here; through its RuntimeOp inside a model (a
-- detector neck's join of an upsampled map with its skip, trained); bad inputs. On sim and,
-- tagged #gpu, on cuda.
local tocha = require "tocha"
require "tocha.assertions"
local ref = require "support.reference"
local numel = ref.numel

-- The join of flat element lists a (shape sa) and b (shape sb) along dimension 2.
local function joined(a, sa, b, sb)
  local out, batch = {}, sa[1]
  local ra, rb = numel(sa) / batch, numel(sb) / batch
  for item = 0, batch - 1 do
    for k = 1, ra do out[#out + 1] = a[item * ra + k] end
    for k = 1, rb do out[#out + 1] = b[item * rb + k] end
  end
  return out
end

local function random(shape, dt, device, seed)
  local lo, hi = -100, 100
  if dt == "u8" then lo, hi = 0, 256 end
  return tocha.rand(shape, { dtype = dt, device = device, seed = seed, low = lo, high = hi })
end

-- {a's shape, b's shape}: 16-byte runs in every dtype, odd runs, 2-D and 3-D.
local CASES = {
  { { 2, 3, 4, 8 }, { 2, 5, 4, 8 } },
  { { 3, 1, 5, 7 }, { 3, 2, 5, 7 } },
  { { 4, 3 }, { 4, 1 } },
  { { 1, 6, 9 }, { 1, 2, 9 } },
}

describe("tocha.ChannelCat", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("joins and splits along dimension 2 in every dtype, every element checked", function()
        local seed = 0
        for _, dt in ipairs(ref.all_dtypes) do
          local cat = tocha.ChannelCat.new(dt)
          for _, case in ipairs(CASES) do
            seed = seed + 1
            local sa, sb = case[1], case[2]
            local a, b = random(sa, dt, device, seed), random(sb, dt, device, seed + 100)
            local shape = cat:compute_concrete_output_shape({ sa, sb })
            local want = joined(a:to_table(true), sa, b:to_table(true), sb)
            local y = tocha.full(shape, 7, { dtype = dt, device = device })
            assert.are.equal(y, cat:forward(a, b, y))
            assert.are.same(want, y:to_table(true))
            local da, db = tocha.full(sa, 7, { dtype = dt, device = device }), tocha.full(sb, 7, { dtype = dt, device = device })
            cat:backward(a, b, y, da, db)
            assert.tensor.equal(a, da)
            assert.tensor.equal(b, db)
          end
        end
      end)

      it("joins an upsampled map with its skip inside a model, and trains through both", function()
        local x = tocha.Model.input({ -1, 4, 3, 5 }, { name = "x" })
        local skip = tocha.Model.input({ -1, 2, 6, 10 }, { name = "skip" })
        local up = tocha.UpsampleNearest2dForward.new(2, 2)
        local cat, relu = tocha.ChannelCat.new(), tocha.Elementwise.new("relu")
        local m = tocha.Model({ x, skip }, { relu(cat(up(x), skip)) }):load(2, device)
        local xt = tocha.randn({ 2, 4, 3, 5 }, { device = device, seed = 7 })
        local st = tocha.randn({ 2, 2, 6, 10 }, { device = device, seed = 8 })
        local u = up:forward(xt)
        local want = relu:forward(cat:forward(u, st))
        assert.tensor.equal(want, m:forward({ xt, st })[1])
        local dy = tocha.randn({ 2, 6, 6, 10 }, { device = device, seed = 9 })
        local _, cache = m:forward_train({ xt, st })
        local grads = m:backward({ dy }, cache)
        local du, dskip = cat:backward(u, st, relu:backward(cat:forward(u, st), dy))
        assert.tensor.equal(up:backward(xt, du), grads[1])
        assert.tensor.equal(dskip, grads[2])
      end)

      it("names its bad arguments", function()
        local cat = tocha.ChannelCat.new()
        local a = tocha.ones({ 2, 3, 4 }, { device = device })
        for _, case in ipairs({
          { "tocha.ChannelCat:forward: b: expected shape [2, 1, 4] (like a but for dimension 2), got [2, 1, 5]",
            cat.forward, cat, a, tocha.ones({ 2, 1, 5 }, { device = device }), tocha.ones({ 2, 4, 4 }, { device = device }) },
          { "tocha.ChannelCat:forward: b: expected shape [2, 1, 4] (like a but for dimension 2), got [3, 1, 4]",
            cat.forward, cat, a, tocha.ones({ 3, 1, 4 }, { device = device }) },
          { "tocha.ChannelCat:forward: y: expected shape [2, 5, 4] (the output for a and b), got [2, 4, 4]",
            cat.forward, cat, a, tocha.ones({ 2, 2, 4 }, { device = device }), tocha.ones({ 2, 4, 4 }, { device = device }) },
          { "tocha.ChannelCat:forward: a: expected 2 or more dimensions (dimension 2 is joined), got 1",
            cat.forward, cat, tocha.ones({ 3 }, { device = device }), tocha.ones({ 3 }, { device = device }), tocha.ones({ 6 }, { device = device }) },
          { "tocha.ChannelCat:forward: b: expected dtype f32 (the op's), got f16",
            cat.forward, cat, a, tocha.ones({ 2, 1, 4 }, { device = device, dtype = "f16" }) },
          { "tocha.ChannelCat:backward: dy: expected a tensor, got nil", cat.backward, cat, a, a },
          { "tocha.ChannelCat:compute_concrete_output_shape: inputs: expected 2 input shapes, got 1",
            cat.compute_concrete_output_shape, cat, { { 2, 3 } } },
          { "tocha.ChannelCat.new: block: expected a multiple of 32 from 32 to 1024, got 48", tocha.ChannelCat.new, "f32", 48 },
        }) do
          local ok, message = pcall(unpack(case, 2))
          assert.is_false(ok, case[1])
          assert.truthy(message:find(case[1], 1, true), message)
        end
      end)
    end)
  end
end)
