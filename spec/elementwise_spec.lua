-- tocha.Elementwise: every unary and binary function, forward and backward, in every float
-- dtype, against a reference computed here in f64 (the C library's functions through the FFI)
-- from the inputs as stored; gradients also against central differences (tocha.gradcheck, f64);
-- the RuntimeOp path with misaligned addresses (the element-by-element path); a model of
-- upsample and elementwise nodes; and bad inputs. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
local ffi = require "ffi"
local ref = require "support.reference"
local act = require "support.activations"

-- f(x) and f'(x) of each unary function; `positive`: its inputs are drawn from [0.25, 4].
local UNARY = {
  neg = { function(x) return -x end, function() return -1 end },
  abs = { math.abs, function(x) return x > 0 and 1 or x < 0 and -1 or 0 end },
  exp = { math.exp, math.exp },
  log = { math.log, function(x) return 1 / x end, positive = true },
  sqrt = { math.sqrt, function(x) return 0.5 / math.sqrt(x) end, positive = true },
  relu = act.relu, sigmoid = act.sigmoid, tanh = act.tanh, silu = act.silu, gelu = act.gelu,
  identity = act.identity, hardsigmoid = act.hardsigmoid, hardswish = act.hardswish, relu6 = act.relu6, erf = act.erf,
  leaky_relu = { function(x) return x > 0 and x or 0.01 * x end, function(x) return x > 0 and 1 or 0.01 end },
  elu = act.elu, celu = act.celu, selu = act.selu, softplus = act.softplus, mish = act.mish, gelu_tanh = act.gelu_tanh,
}
-- g(a, b) and its partial derivatives' products with dy.
local function tie(dy) return dy / 2 end
local BINARY = {
  add = { function(a, b) return a + b end, function(_, _, g) return g, g end },
  sub = { function(a, b) return a - b end, function(_, _, g) return g, -g end },
  mul = { function(a, b) return a * b end, function(a, b, g) return g * b, g * a end },
  div = { function(a, b) return a / b end, function(a, b, g) return g / b, -g * a / (b * b) end },
  max = { math.max, function(a, b, g)
    if a == b then return tie(g), tie(g) end
    return a > b and g or 0, a < b and g or 0
  end },
  min = { math.min, function(a, b, g)
    if a == b then return tie(g), tie(g) end
    return a < b and g or 0, a > b and g or 0
  end },
  prelu = { function(a, b) return a > 0 and a or a * b end, function(a, b, g) return a > 0 and g or g * b, a > 0 and 0 or g * a end },
}

-- Tolerances by dtype: f32 math to a few ulps; f16/bf16 rounded once from f32.
local TOL = { f64 = 1e-12, f32 = 2e-5, f16 = 2e-3, bf16 = 1.6e-2 }

local function close(got, want, dt, what)
  local tol = TOL[dt]
  if want ~= want then
    assert(got ~= got, ("%s: expected NaN, got %s"):format(what, tostring(got)))
    return
  end
  local err = math.abs(got - want)
  assert(err <= tol * math.max(1, math.abs(want)),
    ("%s: got %.10g, want %.10g (error %.3g, tolerance %.3g)"):format(what, got, want, err, tol))
end

-- A random tensor of dt, drawn from [0.25, 4] (positive) or N(0, 2) otherwise.
local function input(shape, dt, device, seed, positive)
  if positive then return tocha.rand(shape, { dtype = dt, device = device, seed = seed, low = 0.25, high = 4 }) end
  return tocha.randn(shape, { dtype = dt, device = device, seed = seed, std = 2 })
end

local function poisoned(shape, dt, device) return tocha.full(shape, 777, { dtype = dt, device = device }) end

local SHAPES = { { 1031 }, { 3, 7, 5 }, { 2, 16, 8, 8 } } -- odd, tiny, whole vectors

describe("tocha.Elementwise", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("computes every unary function and its gradient in every float dtype", function()
        local seed = 100
        for fn, f in pairs(UNARY) do
          for _, dt in ipairs(ref.float_dtypes) do
            local op = tocha.Elementwise.new(fn, dt)
            for _, shape in ipairs(SHAPES) do
              seed = seed + 1
              local x = input(shape, dt, device, seed, f.positive)
              local dy = input(shape, dt, device, seed + 5000)
              local y, dx = poisoned(shape, dt, device), poisoned(shape, dt, device)
              assert.are.equal(y, op:forward(x, y))
              assert.are.equal(dx, op:backward(x, dy, dx))
              local xs, gs, ys, dxs = x:to_table(true), dy:to_table(true), y:to_table(true), dx:to_table(true)
              for i = 1, #xs do
                local label = ("%s %s %s [%d] x=%.9g"):format(fn, dt, table.concat(shape, "x"), i, xs[i])
                close(ys[i], f[1](xs[i]), dt, label)
                close(dxs[i], gs[i] * f[2](xs[i]), dt, label .. " dx")
              end
            end
          end
        end
      end)

      it("bakes leaky_relu's negative slope into its kernels, the slope's gradient at 0", function()
        for i, slope in ipairs({ 0.2, -0.5, 0 }) do
          for _, dt in ipairs(ref.float_dtypes) do
            local op = tocha.Elementwise.new("leaky_relu", dt, nil, { negative_slope = slope })
            local x = tocha.tensor({ -3, -0.25, 0, 0.5, 2, -1e-3 }, { dtype = dt, device = device })
            local dy = input({ 6 }, dt, device, 40 + i)
            local xs, gs = x:to_table(true), dy:to_table(true)
            local ys, dxs = op:forward(x):to_table(true), op:backward(x, dy):to_table(true)
            local s = ref.convert(slope, dt == "f64" and "f64" or "f32")
            for k = 1, #xs do
              local label = ("leaky_relu %g %s x=%.9g"):format(slope, dt, xs[k])
              close(ys[k], xs[k] > 0 and xs[k] or s * xs[k], dt, label)
              close(dxs[k], xs[k] > 0 and gs[k] or s * gs[k], dt, label .. " dx")
            end
          end
        end
        assert.are_not.equal(tocha.Elementwise.new("leaky_relu", nil, nil, { negative_slope = 0.2 }).id,
          tocha.Elementwise.new("leaky_relu").id)
      end)

      it("bakes elu's and celu's alpha into their kernels", function()
        for i, alpha in ipairs({ 0.5, 2.5 }) do
          for _, fn in ipairs({ "elu", "celu" }) do
            for _, dt in ipairs(ref.float_dtypes) do
              local op = tocha.Elementwise.new(fn, dt, nil, { alpha = alpha })
              local x = input({ 67 }, dt, device, 60 + i)
              local dy = input({ 67 }, dt, device, 70 + i)
              local xs, gs = x:to_table(true), dy:to_table(true)
              local ys, dxs = op:forward(x):to_table(true), op:backward(x, dy):to_table(true)
              local f = act[fn .. "_alpha"](alpha)
              for k = 1, #xs do
                local label = ("%s %g %s x=%.9g"):format(fn, alpha, dt, xs[k])
                close(ys[k], f[1](xs[k]), dt, label)
                close(dxs[k], gs[k] * f[2](xs[k]), dt, label .. " dx")
              end
            end
          end
        end
        assert.are_not.equal(tocha.Elementwise.new("elu", nil, nil, { alpha = 0.5 }).id, tocha.Elementwise.new("elu").id)
      end)

      it("computes every binary function and both gradients in every float dtype, ties split", function()
        local seed = 300
        for fn, g in pairs(BINARY) do
          for _, dt in ipairs(ref.float_dtypes) do
            local op = tocha.Elementwise.new(fn, dt)
            for _, shape in ipairs(SHAPES) do
              seed = seed + 1
              local a = input(shape, dt, device, seed)
              -- b: away from 0 for div; for max and min, every third element equal to a's
              local bt = input(shape, dt, device, seed + 7000, fn == "div"):to_table(true)
              local at = a:to_table(true)
              for i = 1, #bt do
                if fn == "div" and i % 2 == 0 then bt[i] = -bt[i] end
                if (fn == "max" or fn == "min") and i % 3 == 0 then bt[i] = at[i] end
              end
              local b = tocha.empty(shape, { dtype = "f64", device = device })
              b:write(ffi.new("double[?]", #bt, bt), #bt * 8)
              b = b:cast(dt)
              local dy = input(shape, dt, device, seed + 9000)
              local y, da, db = poisoned(shape, dt, device), poisoned(shape, dt, device), poisoned(shape, dt, device)
              op:forward(a, b, y)
              local ra, rb = op:backward(a, b, dy, da, db)
              assert.are.equal(da, ra)
              assert.are.equal(db, rb)
              local gs, ys, das, dbs = dy:to_table(true), y:to_table(true), da:to_table(true), db:to_table(true)
              for i = 1, #at do
                local label = ("%s %s %s [%d] a=%.9g b=%.9g"):format(fn, dt, table.concat(shape, "x"), i, at[i], bt[i])
                close(ys[i], g[1](at[i], bt[i]), dt, label)
                local wa, wb = g[2](at[i], bt[i], gs[i])
                close(das[i], wa, dt, label .. " da")
                close(dbs[i], wb, dt, label .. " db")
              end
            end
          end
        end
      end)

      it("matches central differences in f64 (tocha.gradcheck), both operands of a binary op", function()
        for fn, f in pairs(UNARY) do
          local op = tocha.Elementwise.new(fn, "f64")
          local x = input({ 4, 9 }, "f64", device, 17, f.positive)
          if fn == "abs" or fn == "relu" then -- keep clear of the kink at 0
            local t = x:to_table(true)
            for i = 1, #t do if math.abs(t[i]) < 0.01 then t[i] = 0.5 end end
            x = tocha.tensor(t, { dtype = "f64", device = device })
          end
          local ok, report = tocha.gradcheck(op, x, { seed = 3 })
          assert(ok, ("%s: max abs error %g at %s"):format(fn, report.max_abs, tostring(report.worst)))
        end
        for fn in pairs(BINARY) do
          local op = tocha.Elementwise.new(fn, "f64")
          local a = input({ 30 }, "f64", device, 21)
          local b = input({ 30 }, "f64", device, 22, fn == "div")
          local on_a = { forward = function(_, x) return op:forward(x, b) end,
            backward = function(_, x, dy) return (op:backward(x, b, dy)) end }
          local on_b = { forward = function(_, x) return op:forward(a, x) end,
            backward = function(_, x, dy) local _, db = op:backward(a, x, dy) return db end }
          for side, wrapped in pairs({ a = on_a, b = on_b }) do
            local ok, report = tocha.gradcheck(wrapped, side == "a" and a or b, { seed = 4 })
            assert(ok, ("%s d%s: max abs error %g at %s"):format(fn, side, report.max_abs, tostring(report.worst)))
          end
        end
      end)

      it("launches through its RuntimeOp methods, misaligned addresses one element at a time", function()
        local op = tocha.Elementwise.new("mul", "f32", 64)
        local n = 203
        local a = input({ n + 1 }, "f32", device, 41)
        local b = input({ n + 1 }, "f32", device, 42)
        local y = poisoned({ n + 1 }, "f32", device)
        local shape = { n }
        -- one element in: 4 bytes past a 16-byte boundary
        local function at(t) return t.data + 4 end
        local args = op:pack_args({ { at(a), shape }, { at(b), shape } }, {}, at(y), shape)
        assert.are.same({ 64, 1, 1 }, op:block())
        tocha.launch_packed(op.kernel, device, op:grid(shape), op:block(), args)
        local at_, bt, yt = a:to_table(true), b:to_table(true), y:to_table(true)
        assert.are.equal(777, yt[1])
        for i = 2, n + 1 do close(yt[i], at_[i] * bt[i], "f32", "misaligned [" .. i .. "]") end
        assert.are.same({ n }, op:compute_concrete_output_shape({ shape, shape }))
        assert.is_true(op:has_backward())
        assert.are.same(op:grid(shape), op:backward_grid({ shape, shape }))
      end)

      it("joins a tocha.Model: upsample, then gelu, then a product with the upsampled input", function()
        local x = tocha.Model.input({ -1, 3, 4, 5 })
        local up = tocha.UpsampleNearest2dForward.new(2, 2)
        local gelu, mul = tocha.Elementwise.new("gelu"), tocha.Elementwise.new("mul")
        local u = up(x)
        local out = mul(gelu(u), u)
        local m = tocha.Model({ x }, { out }):load(2, device)
        local xt = input({ 2, 3, 4, 5 }, "f32", device, 51)
        local got = m:forward({ xt })[1]:to_table(true)
        local ut = up:forward(xt)
        local want = mul:forward(gelu:forward(ut), ut):to_table(true)
        assert.are.same(want, got)
      end)

      it("names its bad arguments", function()
        local add, relu = tocha.Elementwise.new("add"), tocha.Elementwise.new("relu")
        local a = tocha.ones({ 4 }, { device = device })
        for _, case in ipairs({
          { 'tocha.Elementwise.new: fn: unknown function "tan" (expected identity, neg, abs, exp, log, sqrt, erf, relu, relu6, '
            .. "sigmoid, tanh, silu, gelu, hardsigmoid, hardswish, leaky_relu, elu, celu, selu, softplus, mish, gelu_tanh, add, sub, "
            .. "mul, div, max, min or prelu)", tocha.Elementwise.new, "tan" },
          { "tocha.Elementwise.new: alpha: elu's and celu's option, not selu's", tocha.Elementwise.new, "selu", "f32", 256,
            { alpha = 2 } },
          { "tocha.Elementwise.new: alpha: celu's alpha cannot be 0", tocha.Elementwise.new, "celu", "f32", 256, { alpha = 0 } },
          { "tocha.Elementwise.new: negative_slope: leaky_relu's option, not relu's", tocha.Elementwise.new, "relu", "f32", 256,
            { negative_slope = 0.1 } },
          { "tocha.Elementwise.new: negative_slope: expected a finite number, got nan", tocha.Elementwise.new, "leaky_relu",
            "f32", 256, { negative_slope = 0 / 0 } },
          { "tocha.Elementwise.new: fn: expected a function name, got number", tocha.Elementwise.new, 3 },
          { "tocha.Elementwise.new: dtype: expected a float dtype (f32, f64, f16, bf16), got i32",
            tocha.Elementwise.new, "exp", "i32" },
          { "tocha.Elementwise.new: block: expected a multiple of 32 from 32 to 1024, got 100",
            tocha.Elementwise.new, "exp", "f32", 100 },
          { "tocha.Elementwise:forward: b: expected shape [4] (like a), got [2, 2]",
            add.forward, add, a, tocha.ones({ 2, 2 }, { device = device }) },
          { "tocha.Elementwise:forward: b: expected dtype f32 (the op's), got f64",
            add.forward, add, a, tocha.ones({ 4 }, { device = device, dtype = "f64" }) },
          { "tocha.Elementwise:forward: b: expected a tensor, got nil", add.forward, add, a },
          { "tocha.Elementwise:forward: y: expected shape [4] (the output for x), got [5]",
            relu.forward, relu, a, tocha.ones({ 5 }, { device = device }) },
          { "tocha.Elementwise:backward: dy: expected a tensor, got nil", relu.backward, relu, a },
          { "tocha.Elementwise:compute_concrete_output_shape: inputs: expected 2 input shapes, got 1",
            add.compute_concrete_output_shape, add, { { 4 } } },
          { "tocha.Elementwise:forward: self: expected a Elementwise", add.forward },
        }) do
          local ok, message = pcall(unpack(case, 2))
          assert.is_false(ok, case[1])
          assert.truthy(message:find(case[1], 1, true), message)
        end
        local freed = tocha.ones({ 4 }, { device = device })
        freed:free()
        local ok, message = pcall(relu.forward, relu, freed)
        assert.is_false(ok)
        assert.truthy(message:find("x: tensor was freed", 1, true), message)
        assert.are.equal(2, add:forward(a, a):to_table()[4]) -- still usable
      end)
    end)
  end
end)
