-- tocha.Reduce and tocha.ChannelBiasAdd: sum, mean and max over every element and over each
-- dimension, in every float dtype, against sums in f64 computed here from the inputs as stored,
-- on shapes whose plans take one pass and two (split rows, split columns), outputs poisoned
-- first; max's NaN and ties; the gradients against references built here and against central
-- differences (tocha.gradcheck, f64); the bias add and its backward (dx and the bias gradient);
-- both in a trained model with a loss; bad inputs. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
require "tocha.assertions"
local ref = require "support.reference"
local numel = ref.numel

-- Shapes and dims: one pass (short rows, many outputs), rows split (one long row), columns split
-- (few outputs along a long strided dimension); rows a warp each that start off 16-byte
-- boundaries; columns of whole 16-byte groups, one pass and split; odd sizes throughout.
local CASES = {
  { { 3, 5, 7 } }, { { 3, 5, 7 }, 1 }, { { 3, 5, 7 }, 2 }, { { 3, 5, 7 }, -1 },
  { { 1, 1, 70001 } }, { { 2, 3, 5003 }, 3 }, { { 5, 2003, 3 }, 2 }, { { 4099 }, 1 },
  { { 2, 2, 3, 2, 5 }, 4 }, { { 6, 37 }, 2 }, { { 5, 700 }, 2 }, { { 3, 40, 16 }, 2 }, { { 2, 3000, 8 }, 2 },
}
-- Tolerances against the f64 reference, relative to the sum of |x| (the sum's own scale).
local TOL = { f64 = 1e-12, f32 = 1e-5, f16 = 2e-3, bf16 = 1e-2 }

-- The reference: x's values as stored (f64), reduced over [outer, n, inner]; each output's
-- value and the scale its error is measured against.
local function reference(xs, outer, n, inner, mode)
  local want, scale = {}, {}
  for o = 0, outer - 1 do
    for i = 0, inner - 1 do
      local acc, abs = mode == "max" and -math.huge or mode == "min" and math.huge or 0, 0
      for k = 0, n - 1 do
        local v = xs[(o * n + k) * inner + i + 1]
        abs = abs + math.abs(v)
        if mode == "max" then
          acc = (v > acc or v ~= v) and v or acc
        elseif mode == "min" then
          acc = (v < acc or v ~= v) and v or acc
        else
          acc = acc + v
        end
      end
      if mode == "mean" then acc, abs = acc / n, abs / n end
      want[o * inner + i + 1], scale[o * inner + i + 1] = acc, abs + 1e-30
    end
  end
  return want, scale
end

describe("tocha.Reduce", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("sums, averages and takes the max over every element and each dimension, every float dtype", function()
        local seed = 0
        for _, dt in ipairs(ref.float_dtypes) do
          for _, case in ipairs(CASES) do
            local shape, dim = case[1], case[2]
            seed = seed + 1
            local x = tocha.randn(shape, { dtype = dt, device = device, seed = seed })
            local xs = x:cast("f64"):to_table(true)
            for _, mode in ipairs({ "sum", "mean", "max" }) do
              local op = tocha.Reduce.new(mode, dim, dt)
              local outer, n, inner, out = op:view(shape)
              local y = tocha.full(out, 12345, { dtype = dt, device = device })
              op:forward(x, y)
              local got = y:cast("f64"):to_table(true)
              local want, scale = reference(xs, outer, n, inner, mode)
              assert.are.equal(#want, #got)
              for e = 1, #want do
                local err = math.abs(got[e] - want[e]) / scale[e]
                if mode == "max" then err = got[e] == ref.convert(want[e], dt) and 0 or 1 end
                assert(err <= TOL[dt], ("%s %s %s dim %s: output %d is %.17g, expected %.17g"):format(
                  mode, dt, table.concat(shape, "x"), tostring(dim), e, got[e], want[e]))
              end
            end
          end
        end
      end)

      -- The two paths' mappings (reduction.cu): columns of inner 3 (elements), 72 and 80 (whole
      -- 16-byte groups for some dtypes, not others; under 32 groups: the short columns kernel),
      -- 4096; n short, odd (rows left after the
      -- loads four at a time), and long enough to split; rows (inner 1) of odd lengths, a warp's team and
      -- a CTA's, one pass and split. Every mode, every float dtype, through the op (tocha_reduce)
      -- and the tensor methods (a kernel a path), every element against a reference folded here
      -- in the kernel's accumulator type's order-free bound.
      it("reduces along rows and columns of every width, every mode and float dtype", function()
        local shapes = {
          { 2, 7, 1 }, { 3, 1001, 1 }, { 1, 40001, 1 }, { 5, 33, 3 }, { 2, 9, 72 }, { 3, 70, 72 },
          { 1, 517, 80 }, { 2, 13, 80 }, { 1, 37, 4096 }, { 2, 3, 4096 }, { 1, 300, 5 },
        }
        local modes = {
          sum = function(a, v) return a + v end,
          mean = function(a, v) return a + v end,
          prod = function(a, v) return a * v end,
          max = function(a, v) return (v > a or v ~= v) and v or a end,
          min = function(a, v) return (v < a or v ~= v) and v or a end,
        }
        local start = { sum = 0, mean = 0, prod = 1, max = -math.huge, min = math.huge }
        local seed = 500
        for _, dt in ipairs(ref.float_dtypes) do
          for _, s in ipairs(shapes) do
            local outer, n, inner = s[1], s[2], s[3]
            seed = seed + 1
            local x = tocha.rand({ outer, n, inner }, { dtype = dt, device = device, seed = seed }):add(0.5)
            local xs = x:cast("f64"):to_table(true)
            for mode, fold in pairs(modes) do
              if mode ~= "prod" or n <= 80 then
                local op = tocha.Reduce.new(mode, 2, dt)
                local y = tocha.full({ outer, 1, inner }, 12345, { dtype = dt, device = device })
                op:forward(x, y)
                -- the op's kernel (either path), then the tensor method's, the kernel of its path
                local method = (mode == "max" or mode == "min") and "a" .. mode or mode
                for way, got in ipairs({ y:cast("f64"):to_table(true), x[method](x, 2, true):cast("f64"):to_table(true) }) do
                  for o = 0, outer - 1 do
                    for i = 0, inner - 1 do
                      local acc, abs = start[mode], 0
                      for k = 0, n - 1 do
                        local v = xs[(o * n + k) * inner + i + 1]
                        acc, abs = fold(acc, v), abs + math.abs(v)
                      end
                      if mode == "mean" then acc, abs = acc / n, abs / n end
                      if mode == "prod" then abs = math.abs(acc) * n end
                      local e = o * inner + i + 1
                      local exact = mode == "max" or mode == "min"
                      local ok = exact and got[e] == ref.convert(acc, dt) or
                        (not exact and math.abs(got[e] - acc) <= TOL[dt] * (abs + 1e-30))
                      assert(ok, ("%s %s [%d, %d, %d] (%s): output %d is %.17g, expected %.17g"):format(
                        mode, dt, outer, n, inner, way == 1 and "op" or method, e, got[e], acc))
                    end
                  end
                end
              end
            end
          end
        end
      end)

      -- A columns pass given a copy (the bias gradient's dx = dy) stores every element it reads
      -- there; its sums fold the rows in the same order as a pass without one, so they match
      -- x:sum(2) bit for bit. Inner 72 (whole 16-byte groups in every dtype) and 3 (elements);
      -- n odd, so that rows are left after the loads in flight.
      it("copies what a columns pass reads, with the same sums as without a copy", function()
        local reduction, op, device_of = require "tocha.ops.reduction", require "tocha.op", require "tocha.device"
        local seed = 900
        for _, dt in ipairs(ref.float_dtypes) do
          for _, s in ipairs({ { 2, 7, 72 }, { 3, 11, 3 } }) do
            local outer, n, inner = s[1], s[2], s[3]
            seed = seed + 1
            local x = tocha.rand({ outer, n, inner }, { dtype = dt, device = device, seed = seed })
            local r = tocha.Reduce.new("sum", 2, dt)
            for _, k in ipairs({ r.columns_kernel, r.short_columns_kernel }) do
              local copy = tocha.full({ outer, n, inner }, 7, { dtype = dt, device = device })
              local y = tocha.full({ outer, 1, inner }, 12345, { dtype = dt, device = device })
              local p = { outer = outer, n = n, inner = inner, splits = 1, rows = 0 }
              op.launch_packed(k, device_of.wrap(x.dev), reduction.pass_grid(p, r.block_size, dt),
                { r.block_size, 1, 1 }, reduction.args(p, x.data, 0, y.data, 0, copy.data, 1))
              assert.are.same(x:to_table(true), copy:to_table(true))
              assert.are.same(x:sum(2):to_table(true), y:to_table(true))
            end
          end
        end
      end)

      -- The plan's mappings past the defaults (tocha.ops.reduction): 4096 rows or more of under
      -- 16 groups a thread go to warps, not CTAs; a row of up to 16 groups a thread is one CTA's
      -- (one pass), a longer one split. Each against the reference, through the op's kernel and
      -- the method's.
      it("maps many rows to warps, and splits only rows longer than a CTA's share", function()
        local reduction = require "tocha.ops.reduction"
        local cases = { -- shape [outer, n, inner], dtype, the first pass's rows, passes
          { { 4096, 1030, 1 }, "f32", 32, 1 }, { { 4096, 1030, 1 }, "bf16", 32, 1 },
          { { 1000, 1030, 1 }, "f32", -1, 1 }, { { 4096, 16400, 1 }, "f32", -1, 1 },
          { { 1, 16384, 1 }, "f32", -1, 1 }, { { 1, 16388, 1 }, "f32", -1, 2 }, { { 1, 32768, 1 }, "bf16", -1, 1 },
          { { 3, 70, 72 }, "f32", 0, 2 }, { { 3, 9, 72 }, "f32", 0, 1 }, { { 2, 70, 144 }, "f64", 0, 2 }, { { 1, 5001, 3 }, "f32", 0, 2 },
        }
        for i, case in ipairs(cases) do
          local s, dt = case[1], case[2]
          local outer, n, inner = s[1], s[2], s[3]
          local passes = reduction.plan(outer, n, inner, 256, dt)
          assert.are.equal(case[3], passes[1].rows, ("case %d: the first pass's mapping"):format(i))
          assert.are.equal(case[4], #passes, ("case %d: passes"):format(i))
          if outer * n * inner <= 200000 or device == "cuda" then
            local x = tocha.randn(s, { dtype = dt, device = device, seed = 600 + i })
            local xs = x:cast("f64"):to_table(true)
            for _, mode in ipairs({ "sum", "max" }) do
              local want, scale = reference(xs, outer, n, inner, mode)
              local y = tocha.full({ outer, 1, inner }, 12345, { dtype = dt, device = device })
              tocha.Reduce.new(mode, 2, dt):forward(x, y)
              local method = mode == "max" and "amax" or mode
              for _, got in ipairs({ y:cast("f64"):to_table(true), x[method](x, 2, true):cast("f64"):to_table(true) }) do
                for e = 1, #want do
                  local err = math.abs(got[e] - want[e]) / scale[e]
                  if mode == "max" then err = got[e] == ref.convert(want[e], dt) and 0 or 1 end
                  assert(err <= TOL[dt], ("%s %s %s: output %d is %.17g, expected %.17g"):format(
                    mode, dt, table.concat(s, "x"), e, got[e], want[e]))
                end
              end
            end
          end
        end
      end)

      -- Columns too few to fill the device, with many rows: the op and the methods (which plan
      -- teams; the fused callers' plans do not) split each column's rows among 2 to 8 teams of a
      -- CTA (tocha_reduce_team_columns), one pass or also split across passes; 16-byte units and
      -- elements (inner not whole groups, or x one element past a 16-byte boundary). Each
      -- against the reference, the op's result and the method's equal bit for bit.
      it("splits the rows of few columns among a CTA's teams, whole groups or elements", function()
        local reduction = require "tocha.ops.reduction"
        local cases = { -- shape [outer, n, inner], dtype, teams, passes, x one element off its boundary
          { { 3, 130, 72 }, "f32", 8, 1 }, { { 2, 40, 72 }, "bf16", 2, 1 }, { { 2, 80, 72 }, "bf16", 4, 1 },
          { { 1, 70, 4096 }, "f16", 4, 1 },
          { { 1, 3000, 8 }, "f32", 8, 2 }, { { 2, 301, 5 }, "f64", 8, 2 }, { { 3, 130, 72 }, "f32", 8, 1, true },
          { { 5, 129, 16 }, "bf16", 8, 1, true },
        }
        assert.is_nil(reduction.plan(3, 70, 72, 256, "f32")[1].teams, "no teams unless asked")
        assert.is_nil(reduction.plan(3, 70, 72, 512, "f32", true)[1].teams, "no teams past 256 threads")
        assert.is_nil(reduction.plan(3, 31, 72, 256, "f32", true)[1].teams, "no teams of under 16 rows")
        assert.is_nil(reduction.plan(256, 64, 4096, 256, "f32", true)[1].teams, "no teams where the columns fill the device")
        for i, case in ipairs(cases) do
          local s, dt = case[1], case[2]
          local outer, n, inner = s[1], s[2], s[3]
          local passes = reduction.plan(outer, n, inner, 256, dt, true)
          assert.are.equal(case[3], passes[1].teams, ("case %d: teams"):format(i))
          assert.are.equal(case[4], #passes, ("case %d: passes"):format(i))
          local count = outer * n * inner
          local x
          if case[5] then
            x = tocha.randn({ count + 1 }, { dtype = dt, device = device, seed = 650 + i }):narrow(1, 2, count):view(s)
          else
            x = tocha.randn(s, { dtype = dt, device = device, seed = 650 + i })
          end
          local xs = x:cast("f64"):to_table(true)
          for _, mode in ipairs({ "sum", "mean", "max", "min" }) do
            local want, scale = reference(xs, outer, n, inner, mode)
            local y = tocha.full({ outer, 1, inner }, 12345, { dtype = dt, device = device })
            tocha.Reduce.new(mode, 2, dt):forward(x, y)
            local method = (mode == "max" or mode == "min") and "a" .. mode or mode
            local m = x[method](x, 2, true)
            assert.are.same(y:to_table(true), m:to_table(true), ("case %d %s: op and method"):format(i, mode))
            local got = y:cast("f64"):to_table(true)
            for e = 1, #want do
              local err = math.abs(got[e] - want[e]) / scale[e]
              if mode == "max" or mode == "min" then err = got[e] == ref.convert(want[e], dt) and 0 or 1 end
              assert(err <= TOL[dt], ("%s %s %s: output %d is %.17g, expected %.17g"):format(
                mode, dt, table.concat(s, "x"), e, got[e], want[e]))
            end
          end
        end
      end)

      it("gives the same bits on every run (the plan and combine order depend on the shape alone)", function()
        -- the plan depends on the shape alone: two runs give one result, bit for bit
        for _, dt in ipairs(ref.float_dtypes) do
          local x = tocha.randn({ 3, 2001, 72 }, { dtype = dt, device = device, seed = 77 })
          local a, b = x:sum(2):to_table(true), x:sum(2):to_table(true)
          assert.are.same(a, b)
        end
      end)

      it("propagates NaN through max, and sends max's gradient to the first maximum", function()
        local x = tocha.tensor({ { 1, 5, 5, 2 }, { 0 / 0, 3, 0 / 0, 1 }, { -1, -1, -2, -3 } }, { device = device })
        local op = tocha.Reduce.new("max", 2)
        local y = op:forward(x)
        local ys = y:to_table(true)
        assert.are.equal(5, ys[1])
        assert.is_true(ys[2] ~= ys[2])
        assert.are.equal(-1, ys[3])
        local dx = op:backward(x, y, tocha.tensor({ { 10 }, { 20 }, { 30 } }, { device = device }))
        assert.are.same({ 0, 10, 0, 0, 20, 0, 0, 0, 30, 0, 0, 0 }, dx:to_table(true))
      end)

      it("gives gradients that match a reference and central differences (f64)", function()
        for _, case in ipairs(CASES) do
          local shape, dim = case[1], case[2]
          if numel(shape) < 5000 then
            for _, mode in ipairs({ "sum", "mean", "max" }) do
              local op = tocha.Reduce.new(mode, dim, "f64")
              local x = tocha.randn(shape, { dtype = "f64", device = device, seed = 41 })
              local outer, n, inner, out = op:view(shape)
              local y = op:forward(x)
              local dy = tocha.randn(out, { dtype = "f64", device = device, seed = 42 })
              local dx = tocha.full(shape, 777, { dtype = "f64", device = device })
              op:backward(x, y, dy, dx)
              local xs, ys, gs, got = x:to_table(true), y:to_table(true), dy:to_table(true), dx:to_table(true)
              for o = 0, outer - 1 do
                for i = 0, inner - 1 do
                  local first
                  for k = 0, n - 1 do
                    local e = (o * n + k) * inner + i + 1
                    local want = gs[o * inner + i + 1]
                    if mode == "mean" then want = want / n end
                    if mode == "max" then
                      local top = not first and xs[e] == ys[o * inner + i + 1]
                      if top then first = k end
                      want = top and want or 0
                    end
                    assert.are.equal(want, got[e])
                  end
                end
              end
              local wrapped = {
                forward = function(_, t) return op:forward(t) end,
                backward = function(_, t, g) return op:backward(t, op:forward(t), g) end,
              }
              local ok, report = tocha.gradcheck(wrapped, x, { seed = 7, max_checks = 60 })
              assert(ok, ("%s dim %s: max abs error %g"):format(mode, tostring(dim), report.max_abs))
            end
          end
        end
      end)

      it("refuses bad arguments, naming them, and goes on", function()
        local x = tocha.randn({ 2, 3 }, { device = device })
        local function fails(pattern, fn, ...)
          local ok, err = pcall(fn, ...)
          assert.is_false(ok)
          assert.truthy(tostring(err):find(pattern, 1, true), tostring(err))
        end
        fails('mode: expected "sum", "mean", "max", "min" or "prod", got "median"', tocha.Reduce.new, "median")
        fails('a product reduction has no backward', function() local p = tocha.Reduce.new("prod", 2) p:backward(x, p:forward(x), tocha.ones({ 2, 1 }, { device = device })) end)
        fails("dim: expected 1 to the tensor's dimensions (or -1 for the last), got 0", tocha.Reduce.new, "sum", 0)
        fails("dtype: expected a float dtype (f32, f64, f16, bf16), got i32", tocha.Reduce.new, "sum", nil, "i32")
        fails("block: expected a power of two from 32 to 1024, got 96", tocha.Reduce.new, "sum", nil, "f32", 96)
        local op = tocha.Reduce.new("sum", 3)
        fails("x: dim 3 is outside its 2 dimensions", op.forward, op, x)
        local all = tocha.Reduce.new("sum")
        fails("y: expected shape [1] (the output for x), got [2, 3]", all.forward, all, x, tocha.zeros({ 2, 3 }, { device = device }))
        fails("x: expected dtype f32 (the op's), got f64", all.forward, all, tocha.zeros({ 2 }, { dtype = "f64", device = device }))
        assert.are.same({ 6 }, all:forward(tocha.ones({ 2, 3 }, { device = device })):to_table(true))
      end)
    end)
  end
end)

describe("tocha.ChannelBiasAdd", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("adds a bias a channel, and gives dx and the bias gradient, every float dtype", function()
        local seed = 100
        -- planes of whole vectors and not; a long plane (split rows); batch 1 and more; 2-D
        for _, shape in ipairs({ { 2, 3, 4, 8 }, { 3, 5, 7 }, { 1, 4, 9000 }, { 2, 3, 70, 70 }, { 6, 5 } }) do
          for _, dt in ipairs(ref.float_dtypes) do
            seed = seed + 1
            local op = tocha.ChannelBiasAdd.new(dt)
            local b, c = shape[1], shape[2]
            local plane = numel(shape) / (b * c)
            local x = tocha.randn(shape, { dtype = dt, device = device, seed = seed })
            local bias = tocha.randn({ c }, { dtype = dt, device = device, seed = seed + 50 })
            local y = tocha.full(shape, 999, { dtype = dt, device = device })
            op:forward(x, bias, y)
            local xs, bs, got = x:cast("f64"):to_table(true), bias:cast("f64"):to_table(true), y:cast("f64"):to_table(true)
            for e = 1, #xs do
              local ch = math.floor((e - 1) / plane) % c + 1
              assert.are.equal(ref.convert(xs[e] + bs[ch], dt), got[e])
            end
            local dy = tocha.randn(shape, { dtype = dt, device = device, seed = seed + 7 })
            local dx = tocha.full(shape, 999, { dtype = dt, device = device })
            local db = tocha.full({ c }, 999, { dtype = dt, device = device })
            op:backward(dy, dx, db)
            assert.tensor.equal(dy, dx)
            local gs, dbs = dy:cast("f64"):to_table(true), db:cast("f64"):to_table(true)
            for ch = 1, c do
              local sum, abs = 0, 0
              for n = 0, b - 1 do
                for p = 1, plane do
                  local v = gs[(n * c + ch - 1) * plane + p]
                  sum, abs = sum + v, abs + math.abs(v)
                end
              end
              assert(math.abs(dbs[ch] - sum) <= TOL[dt] * (abs + 1e-30),
                ("%s %s: dbias[%d] is %.17g, expected %.17g"):format(dt, table.concat(shape, "x"), ch, dbs[ch], sum))
            end
          end
        end
      end)

      it("trains in a model: bias, gelu and a mean as the loss, against central differences (f64)", function()
        local x = tocha.Model.input({ -1, 3, 4, 5 }, { name = "x", dtype = "f64" })
        local bias, gelu, loss = tocha.ChannelBiasAdd.new("f64"), tocha.Elementwise.new("gelu", "f64"), tocha.Reduce.new("mean", nil, "f64")
        local m = tocha.Model({ x }, { loss(gelu(bias(x):named("b"))) }):load(2, device)
        m:parameters()["b.bias"]:copy(tocha.randn({ 3 }, { dtype = "f64", device = device, seed = 9 }))
        local xt = tocha.randn({ 2, 3, 4, 5 }, { dtype = "f64", device = device, seed = 10 })
        local want = loss:forward(gelu:forward(bias:forward(xt, m:parameters()["b.bias"])))
        assert.tensor.equal(want, m:forward({ xt })[1])
        local _, cache = m:forward_train({ xt })
        local one = tocha.ones({ 1 }, { dtype = "f64", device = device })
        local grads, param_grads = m:backward({ one }, cache)
        -- by hand through the ops' own backwards
        local h = bias:forward(xt, m:parameters()["b.bias"])
        local g = gelu:backward(h, loss:backward(gelu:forward(h), loss:forward(gelu:forward(h)), one))
        local dx, db = bias:backward(g)
        assert.tensor.equal(dx, grads[1])
        assert.tensor.equal(db, param_grads["b.bias"])
        local wrapped = {
          forward = function(_, t) return m:forward({ t })[1]:clone() end,
          backward = function(_, t, d)
            local _, c = m:forward_train({ t })
            return m:backward({ d }, c)[1]
          end,
        }
        local ok, report = tocha.gradcheck(wrapped, xt, { seed = 11, max_checks = 40 })
        assert(ok, ("max abs error %g"):format(report.max_abs))
      end)

      it("refuses bad arguments, naming them, and goes on", function()
        local op = tocha.ChannelBiasAdd.new()
        local function fails(pattern, fn, ...)
          local ok, err = pcall(fn, ...)
          assert.is_false(ok)
          assert.truthy(tostring(err):find(pattern, 1, true), tostring(err))
        end
        local x = tocha.zeros({ 2, 3, 4 }, { device = device })
        fails("bias: expected shape [3] (one value a channel of x), got [4]", op.forward, op, x, tocha.zeros({ 4 }, { device = device }))
        fails("x: expected a shape of 2 to 8 sizes (dimension 2 is the channels)", op.forward, op, tocha.zeros({ 4 }, { device = device }), x)
        fails("dtype: expected a float dtype (f32, f64, f16, bf16), got u8", tocha.ChannelBiasAdd.new, "u8")
        local y = op:forward(x, tocha.ones({ 3 }, { device = device }))
        assert.are.same(tocha.ones({ 2, 3, 4 }, { device = device }):to_table(true), y:to_table(true))
      end)
    end)
  end
end)
