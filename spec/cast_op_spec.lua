-- tocha.Cast as an op: integers and floats into every float dtype against the conversions of
-- support.reference (every element, the output poisoned first), the backward of a float cast
-- (dy cast back), a model whose integer input is cast (no gradient for it), bad arguments. On
-- sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
local ref = require "support.reference"
local fails = require("support.assertions").fails

describe("tocha.Cast", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("converts every element as the reference rounds it, from integers and floats", function()
        local values = {}
        for i = 1, 300 do values[i] = (i % 2 == 0 and -1 or 1) * (i * 37 % 1001) * 1.37 end
        for _, from in ipairs({ "i64", "i32", "u8", "f32", "f64", "bf16" }) do
          for _, to in ipairs(ref.float_dtypes) do
            local src = {}
            for i, v in ipairs(values) do src[i] = ref.convert(v, from) end
            local x = tocha.tensor(src, { dtype = from, device = device }):view({ 3, 100 })
            local y = tocha.full({ 3, 100 }, 0 / 0, { dtype = to, device = device }) -- poisoned
            local op = tocha.Cast.new(from, to)
            assert.are.equal(y, op:forward(x, y))
            local got = ref.values(y)
            for i, v in ipairs(src) do
              assert(got[i] == ref.convert(v, to), ("%s -> %s [%d]: got %.10g, want %.10g"):format(from, to, i, got[i],
                ref.convert(v, to)))
            end
          end
        end
      end)

      it("gives a float input dy cast back, and an integer input no gradient, in a model too", function()
        local x = tocha.randn({ 4, 5 }, { dtype = "f32", device = device, seed = 3 })
        local op = tocha.Cast.new("f32", "bf16")
        local dy = tocha.randn({ 4, 5 }, { dtype = "bf16", device = device, seed = 4 })
        local dx = op:backward(x, dy)
        assert.are.equal("f32", dx:dtype())
        assert.is_true(tocha.allclose(dx, dy:cast("f32"), 0, 0))
        local Model = tocha.Model
        local mask = Model.input({ -1, 5 }, { dtype = "i64", name = "mask" })
        local h = Model.input({ -1, 5 }, { name = "h" })
        local m = Model({ mask, h }, { tocha.Broadcast.new("mul")(tocha.Cast.new("i64", "f32")(mask), h) }):load(2, device)
        local ints = tocha.tensor({ { 1, 0, 1, 1, 0 }, { 0, 0, 1, 0, 1 } }, { dtype = "i64", device = device })
        local hv = tocha.randn({ 2, 5 }, { device = device, seed = 5 })
        local out, cache = m:forward_train({ ints, hv })
        assert.is_true(tocha.allclose(out[1], ints:cast("f32"):mul(hv), 0, 0))
        local g = tocha.randn({ 2, 5 }, { device = device, seed = 6 })
        local grads = m:backward({ g }, cache)
        assert.are.equal(false, grads[1])
        assert.is_true(tocha.allclose(grads[2], ints:cast("f32"):mul(g), 0, 0))
        fails("self: x is i64: an integer input has no gradient", function()
          local c = tocha.Cast.new("i64", "f32")
          c:backward(ints, g)
        end)
      end)

      it("refuses bad arguments, naming them", function()
        fails("from: expected a dtype", tocha.Cast.new, "f8", "f32")
        fails("to: expected a float dtype (f32, f64, f16, bf16), got \"i32\"", tocha.Cast.new, "f32", "i32")
        local op = tocha.Cast.new("i64", "f32")
        fails("x: expected dtype i64 (the op's from), got f32", op.forward, op, tocha.zeros({ 2 }, { device = device }))
        local x = tocha.tensor({ 1, 2 }, { dtype = "i64", device = device })
        fails("y: expected dtype f32", op.forward, op, x, tocha.zeros({ 2 }, { dtype = "f64", device = device }))
        fails("y: expected shape [2]", op.forward, op, x, tocha.zeros({ 3 }, { device = device }))
        assert.is_true(tocha.allclose(op:forward(x), tocha.tensor({ 1, 2 }, { device = device }), 0, 0))
        local back = tocha.Cast.new("f32", "bf16")
        local xf, dy = tocha.randn({ 4 }, { device = device }), tocha.randn({ 4 }, { dtype = "bf16", device = device })
        fails("dx: expected a tensor", back.backward, back, xf, dy, 3)
        fails("dx: not contiguous", back.backward, back, xf, dy, tocha.zeros({ 4, 2 }, { device = device }):select(2, 1))
        fails("dx: expected dtype f32 (the op's from), got f64", back.backward, back, xf, dy, tocha.zeros({ 4 }, { dtype = "f64", device = device }))
        fails("x: expected dtype f32 (the op's from), got f64", back.backward, back, xf:cast("f64"), dy)
      end)
    end)
  end
end)
