-- tocha.Flatten and tocha.View: direct calls are views (no copy: the same memory); in a model a
-- view node has no launch and shares its input's memory, which stays unreused while the view
-- is read; forward and backward equal the direct ops' composition; views of model inputs; bad
-- sizes and a view as a model output refused. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
local ref = require "support.reference"

local fails = require("support.assertions").fails

describe("tocha.Flatten and tocha.View", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local function randn(shape, seed) return tocha.randn(shape, { device = device, seed = seed }) end

      it("are views in direct calls: the same memory, another shape", function()
        local x = randn({ 2, 3, 4, 5 }, 1)
        local f = tocha.Flatten.new():forward(x)
        assert.are.same({ 2, 60 }, f:shape())
        assert.are.equal(x.data, f.data)
        assert.are.same({ 6, 4, 5 }, tocha.Flatten.new { start_dim = 1, end_dim = 2 }:forward(x):shape())
        assert.are.same({ 2, 3, 20 }, tocha.Flatten.new { start_dim = -2 }:forward(x):shape())
        local v = tocha.View.new({ -1, 10, 2 })
        assert.are.same({ 6, 10, 2 }, v:forward(x):shape())
        local dy = randn({ 6, 10, 2 }, 2)
        assert.are.same({ 2, 3, 4, 5 }, v:backward(x, dy):shape())
      end)

      it("share memory in a model, forward and backward equal to the composition", function()
        local x = tocha.Model.input({ -1, 3, 6, 6 })
        local pool = tocha.MaxPool2d.new { kernel_size = 2 }
        local flat = tocha.Flatten.new()
        local relu = tocha.Elementwise.new("relu")
        local tanh = tocha.Elementwise.new("tanh")
        local sm = tocha.Softmax.new(2)
        local a = pool(x)
        local b = relu(flat(a))   -- reads a's memory through the view
        local c = tanh(b)         -- may take a's block once b is done
        local m = tocha.Model({ x }, { sm(c) })
        m:load(3, device)
        local xt = randn({ 3, 3, 6, 6 }, 3)
        local want = sm:forward(tanh:forward(relu:forward(pool:forward(xt):view(3, 27))))
        assert.is_true(tocha.allclose(m:forward({ xt })[1], want, 0, 0))
        local out, cache = m:forward_train({ xt })
        local dy = randn({ 3, 27 }, 4)
        local grads = m:backward({ dy }, cache)
        local pa = pool:forward(xt)
        local fb = relu:forward(pa:view(3, 27))
        local tc = tanh:forward(fb)
        local g = sm:backward(tc, out[1], dy)
        g = tanh:backward(fb, g)
        g = relu:backward(pa:view(3, 27), g)
        local wdx = pool:backward(xt, g:view(3, 3, 3, 3))
        assert.is_true(tocha.allclose(grads[1], wdx, 0, 0))
      end)

      it("view a model's input", function()
        local y = tocha.Model.input({ -1, 4 })
        local sm = tocha.Softmax.new(-1)
        local m = tocha.Model({ y }, { sm(tocha.View.new({ -1, 2, 2 })(y)) })
        m:load(5, device)
        for s = 1, 2 do -- a new input each run: the view's address follows it
          local yt = randn({ 5, 4 }, 10 + s)
          assert.is_true(tocha.allclose(m:forward({ yt })[1], yt:view(5, 2, 2):softmax(3), 0, 0))
        end
        local yt = randn({ 5, 4 }, 20)
        local out, cache = m:forward_train({ yt })
        local dy = randn({ 5, 2, 2 }, 21)
        local grads = m:backward({ dy }, cache)
        assert.is_true(tocha.allclose(grads[1], sm:backward(yt:view(5, 2, 2), out[1], dy):view(5, 4), 0, 0))
      end)

      it("refuse bad sizes and a view as a model output", function()
        fails("sizes: at most one size may be -1", tocha.View.new, { -1, -1 })
        fails("sizes[2]: expected a positive integer or -1, got 0", tocha.View.new, { 2, 0 })
        local v = tocha.View.new({ 7, -1 })
        fails("x: 24 elements do not divide into sizes [7, -1]", v.forward, v, randn({ 2, 3, 4 }, 1))
        local f = tocha.Flatten.new { start_dim = 3, end_dim = 2 }
        fails("x: dimensions 3 to 2 are not a range of its 3", f.forward, f, randn({ 2, 3, 4 }, 1))
        local y = tocha.Model.input({ -1, 4, 2 })
        local m = tocha.Model({ y }, { tocha.Flatten.new()(y) })
        fails("a view node (flatten) cannot be a model output", m.load, m, 2, device)
      end)
    end)
  end
end)
