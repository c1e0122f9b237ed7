-- tocha.ChannelChunk: each part of a tensor split along dimension 2, in every dtype, on shapes
-- whose runs are whole 16-byte vectors and shapes whose runs are not, element for element
-- against a reference built here; its backward (the part's gradient in place, zeros
-- elsewhere, every element poisoned first); a model in which chunks and a join give the input
-- back, trained; bad inputs. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
require "tocha.assertions"
local ref = require "support.reference"
local numel = ref.numel

local function random(shape, dt, device, seed)
  local lo, hi = -100, 100
  if dt == "u8" then lo, hi = 1, 256 end
  return tocha.rand(shape, { dtype = dt, device = device, seed = seed, low = lo, high = hi })
end

-- {shape, chunks}: 16-byte runs in every dtype, odd runs, 2-D and 3-D.
local CASES = { { { 2, 6, 4, 8 }, 3 }, { { 3, 4, 5, 7 }, 2 }, { { 4, 6 }, 6 }, { { 1, 8, 9 }, 4 } }

describe("tocha.ChannelChunk", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("gives each part, and puts its gradient back in place with zeros elsewhere, in every dtype", function()
        local seed = 0
        for _, dt in ipairs(ref.all_dtypes) do
          for _, case in ipairs(CASES) do
            local shape, chunks = case[1], case[2]
            seed = seed + 1
            local x = random(shape, dt, device, seed)
            local xs = x:to_table(true)
            local batch, item = shape[1], numel(shape) / shape[1]
            local run = item / chunks
            for index = 1, chunks do
              local op = tocha.ChannelChunk.new(chunks, index, dt)
              local part_shape = op:compute_concrete_output_shape({ shape })
              local y = tocha.full(part_shape, 7, { dtype = dt, device = device })
              op:forward(x, y)
              local want = {}
              for b = 0, batch - 1 do
                for k = 1, run do want[#want + 1] = xs[b * item + (index - 1) * run + k] end
              end
              assert.are.same(want, y:to_table(true))
              local dx = tocha.full(shape, 7, { dtype = dt, device = device })
              op:backward(x, y, dx)
              local back = dx:to_table(true)
              for e = 1, #back do
                local at = (e - 1) % item
                local inside = at >= (index - 1) * run and at < index * run
                assert.are.equal(inside and xs[e] or 0, back[e])
              end
            end
          end
        end
      end)

      it("splits and joins back to the input inside a model, and trains through both", function()
        local x = tocha.Model.input({ -1, 6, 3, 5 }, { name = "x" })
        local first, second = tocha.ChannelChunk.new(2, 1), tocha.ChannelChunk.new(2, 2)
        local cat, relu = tocha.ChannelCat.new(), tocha.Elementwise.new("relu")
        local m = tocha.Model({ x }, { cat(relu(first(x)), second(x)) }):load(2, device)
        local xt = tocha.randn({ 2, 6, 3, 5 }, { device = device, seed = 3 })
        local want = cat:forward(relu:forward(first:forward(xt)), second:forward(xt))
        assert.tensor.equal(want, m:forward({ xt })[1])
        local dy = tocha.randn({ 2, 6, 3, 5 }, { device = device, seed = 4 })
        local _, cache = m:forward_train({ xt })
        local dx = m:backward({ dy }, cache)[1]
        -- by hand: dy's first half through relu's gradient, the second as it is
        local ha, hb = cat:backward(first:forward(xt), second:forward(xt), dy)
        local g = relu:backward(first:forward(xt), ha)
        local add = tocha.Elementwise.new("add")
        assert.tensor.equal(add:forward(first:backward(xt, g), second:backward(xt, hb)), dx)
      end)

      it("names its bad arguments", function()
        local op = tocha.ChannelChunk.new(2, 1)
        local x = tocha.ones({ 2, 3, 4 }, { device = device })
        for _, case in ipairs({
          { "tocha.ChannelChunk:forward: x: dimension 2 (3) does not split into 2 equal chunks", op.forward, op, x },
          { "tocha.ChannelChunk:forward: x: expected 2 or more dimensions (dimension 2 is split), got 1",
            op.forward, op, tocha.ones({ 4 }, { device = device }) },
          { "tocha.ChannelChunk:forward: y: expected shape [2, 2, 4] (the output for x), got [2, 2, 5]",
            op.forward, op, tocha.ones({ 2, 4, 4 }, { device = device }), tocha.ones({ 2, 2, 5 }, { device = device }) },
          { "tocha.ChannelChunk:forward: y: expected dtype f32 (the op's), got f16",
            op.forward, op, tocha.ones({ 2, 4, 4 }, { device = device }), tocha.ones({ 2, 2, 4 }, { device = device, dtype = "f16" }) },
          { "tocha.ChannelChunk:backward: dy: expected a tensor, got nil", op.backward, op, x },
          { "tocha.ChannelChunk.new: index: expected 1 to 3, got 4", tocha.ChannelChunk.new, 3, 4 },
          { "tocha.ChannelChunk.new: chunks: expected at least 1, got 0", tocha.ChannelChunk.new, 0, 1 },
          { "tocha.ChannelChunk.new: chunks: expected an integer, got 1.5", tocha.ChannelChunk.new, 1.5, 1 },
        }) do
          local ok, message = pcall(unpack(case, 2))
          assert.is_false(ok, case[1])
          assert.truthy(message:find(case[1], 1, true), message)
        end
      end)
    end)
  end
end)
