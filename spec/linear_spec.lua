-- tocha.Linear: y = x w^T + b and its backward (dx, dw, db) on sim and, tagged #gpu, on cuda,
-- every float dtype, features that take the tensor cores (multiples of 8, halves) and others,
-- against products computed here in f64 from the inputs as stored: exactly on small integers,
-- within rounding on normal inputs; f64 against central differences (tocha.gradcheck); without
-- a bias; inside a tocha.Model trained a step; bad arguments.
local tocha = require "tocha"
require "tocha.assertions"
local ref = require "support.reference"
local activations = require "support.activations"
local fails = require("support.assertions").fails

local TOL, values, small_ints, compare = ref.product_tol, ref.values, ref.small_ints, ref.compare_terms

-- y [rows, out] = x [rows, in] w^T + b; dx = dy w; dw = dy^T x; db = sum of dy's rows; each
-- with its sum of |terms|.
local function reference(x, w, b, dy, rows, n_in, n_out)
  local y, ys, dx, dxs, dw, dws, db, dbs = {}, {}, {}, {}, {}, {}, {}, {}
  for r = 0, rows - 1 do
    for o = 0, n_out - 1 do
      local s = b and b[o + 1] or 0
      local a = math.abs(s)
      for i = 0, n_in - 1 do
        local v = x[r * n_in + i + 1] * w[o * n_in + i + 1]
        s, a = s + v, a + math.abs(v)
      end
      y[r * n_out + o + 1], ys[r * n_out + o + 1] = s, a + 1e-30
    end
    for i = 0, n_in - 1 do
      local s, a = 0, 0
      for o = 0, n_out - 1 do
        local v = dy[r * n_out + o + 1] * w[o * n_in + i + 1]
        s, a = s + v, a + math.abs(v)
      end
      dx[r * n_in + i + 1], dxs[r * n_in + i + 1] = s, a + 1e-30
    end
  end
  for o = 0, n_out - 1 do
    for i = 0, n_in - 1 do
      local s, a = 0, 0
      for r = 0, rows - 1 do
        local v = dy[r * n_out + o + 1] * x[r * n_in + i + 1]
        s, a = s + v, a + math.abs(v)
      end
      dw[o * n_in + i + 1], dws[o * n_in + i + 1] = s, a + 1e-30
    end
    local s, a = 0, 0
    for r = 0, rows - 1 do s, a = s + dy[r * n_out + o + 1], a + math.abs(dy[r * n_out + o + 1]) end
    db[o + 1], dbs[o + 1] = s, a + 1e-30
  end
  return { y = { y, ys }, dx = { dx, dxs }, dw = { dw, dws }, db = { db, dbs } }
end

-- {x shape, in, out}: halves' tensor cores (16-byte multiples) and the tiled kernel
local CASES = { { { 2, 5, 24 }, 24, 40 }, { { 130, 16 }, 16, 136 }, { { 7, 10 }, 10, 3 }, { { 3, 33 }, 33, 8 } }

describe("tocha.Linear", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      local function run(dt, case, bias, ints, seed, tf32)
        local shape, n_in, n_out = case[1], case[2], case[3]
        local rows = ref.numel(shape) / n_in
        local make = ints and small_ints or function(s, d, dv, sd) return tocha.randn(s, { dtype = d, device = dv, seed = sd }) end
        local fc = tocha.Linear.new(n_in, n_out, { dtype = dt, bias = bias, tf32 = tf32 })
        if tf32 then assert.are.equal("tf32", fc.matrix_kind) end
        local x, w = make(shape, dt, device, seed), make({ n_out, n_in }, dt, device, seed + 1)
        local b = bias and make({ n_out }, dt, device, seed + 2) or nil
        local out_shape = {}
        for i, s in ipairs(shape) do out_shape[i] = s end
        out_shape[#out_shape] = n_out
        local dy = make(out_shape, dt, device, seed + 3)
        local y = b and fc:forward(x, w, b) or fc:forward(x, w)
        assert.are.same(out_shape, y:shape())
        local dx, dw, db
        if b then dx, dw, db = fc:backward(x, w, b, dy) else dx, dw = fc:backward(x, w, dy) end
        local want = reference(values(x), values(w), b and values(b), values(dy), rows, n_in, n_out)
        -- (tf32: each operand's 13 low mantissa bits dropped, a product within 2^-9 of its size)
        local tol = ints and 0 or tf32 and 2 ^ -9 or TOL[dt]
        local label = ("%s %s in %d out %d%s"):format(dt, table.concat(shape, "x"), n_in, n_out, bias and "" or " no bias")
        compare(y, want.y, tol, label .. " y")
        compare(dx, want.dx, tol, label .. " dx")
        compare(dw, want.dw, tol, label .. " dw")
        if b then compare(db, want.db, tol, label .. " db") else assert.is_nil(db) end
      end

      it("gives y, dx, dw and db exactly on small integers, every float dtype, with and without a bias", function()
        local seed = 0
        for _, dt in ipairs(ref.float_dtypes) do
          for _, case in ipairs(CASES) do
            seed = seed + 10
            run(dt, case, seed % 20 == 0, true, seed)
          end
        end
      end)

      it("stays within the dtype's rounding on normal inputs, long rows split for the bias gradient", function()
        local seed = 500
        for _, dt in ipairs(ref.float_dtypes) do
          for _, case in ipairs({ { { 600, 32 }, 32, 16 }, { { 40, 72 }, 72, 24 } }) do
            seed = seed + 10
            run(dt, case, true, false, seed)
          end
        end
      end)

      -- tf32 (the opt-in, or tocha.set_float32_matmul_precision("high") when the op is made):
      -- its three products on the tensor cores, exact on small integers, within tf32's rounding
      -- on normal inputs
      it("runs its products on tf32 where asked", function()
        run("f32", { { 130, 68 }, 68, 200 }, true, true, 40, true)
        run("f32", { { 3, 20, 36 }, 36, 12 }, false, true, 50, true)
        run("f32", { { 130, 68 }, 68, 200 }, true, false, 60, true)
        local old = tocha.set_float32_matmul_precision("high")
        local made = tocha.Linear.new(16, 8)
        tocha.set_float32_matmul_precision(old)
        assert.is_true(made.tf32)
        assert.is_false(tocha.Linear.new(16, 8).tf32)
        assert.is_false(tocha.Linear.new(16, 8, { dtype = "bf16", tf32 = true }).tf32) -- (halves: their own tensor cores)
        fails("tf32: expected a boolean", tocha.Linear.new, 16, 8, { tf32 = "yes" })
      end)

      -- residual: y = F(x w^T + b + r), r a second input (a transformer's proj + x): exact on
      -- small integers without an activation (d residual = dy, the rest as without it), and
      -- against central differences in f64 with one, for x, the residual and the weight; in a
      -- model as in direct calls.
      it("adds a residual in the epilogue, forward and backward, with and without an activation", function()
        local n_in, n_out, shape = 24, 40, { 3, 5, 24 }
        local out_shape = { 3, 5, 40 }
        for _, dt in ipairs({ "f32", "bf16", "f64" }) do
          local fc = tocha.Linear.new(n_in, n_out, { dtype = dt, residual = true })
          local x, w = small_ints(shape, dt, device, 71), small_ints({ n_out, n_in }, dt, device, 72)
          local b, r = small_ints({ n_out }, dt, device, 73), small_ints(out_shape, dt, device, 74)
          local dy = small_ints(out_shape, dt, device, 75)
          local want = reference(values(x), values(w), values(b), values(dy), 15, n_in, n_out)
          local rv = values(r)
          for e = 1, #rv do want.y[1][e] = want.y[1][e] + rv[e] end
          compare(fc:forward(x, r, w, b), want.y, 0, dt .. " y")
          local dx, dr, dw, db = fc:backward(x, r, w, b, dy)
          compare(dx, want.dx, 0, dt .. " dx")
          compare(dw, want.dw, 0, dt .. " dw")
          compare(db, want.db, 0, dt .. " db")
          assert.are.same(values(dy), values(dr), dt .. " d residual")
        end
        local fc = tocha.Linear.new(n_in, n_out, { dtype = "f64", residual = true, activation = "gelu" })
        local x = tocha.randn(shape, { dtype = "f64", device = device, seed = 81 })
        local w = tocha.randn({ n_out, n_in }, { dtype = "f64", device = device, seed = 82 }) * 0.2
        local b = tocha.randn({ n_out }, { dtype = "f64", device = device, seed = 83 })
        local r = tocha.randn(out_shape, { dtype = "f64", device = device, seed = 84 })
        for k, wrt in ipairs({ "x", "residual", "weight" }) do
          local probe = {
            forward = function(_, v)
              local a = { x, r, w }
              a[k] = v
              return fc:forward(a[1], a[2], a[3], b)
            end,
            backward = function(_, v, dy)
              local a = { x, r, w }
              a[k] = v
              return select(k, fc:backward(a[1], a[2], a[3], b, dy))
            end }
          local ok, report = tocha.gradcheck(probe, ({ x, r, w })[k], { max_checks = 30 })
          assert.is_true(ok, wrt .. ": " .. tostring(report))
        end
        local input, res = tocha.Model.input({ -1, 5, 24 }, { dtype = "f64" }), tocha.Model.input({ -1, 5, 40 }, { dtype = "f64" })
        local m = tocha.Model({ input, res }, { fc(input, res) })
        m:load(3, device)
        local p = m:parameters()
        for name, t in pairs(p) do t:copy(name:match("weight$") and w or b) end
        local ys, cache = m:forward_train({ x, r })
        assert.is_true(tocha.allclose(ys[1], fc:forward(x, r, w, b), 0, 0))
        local dy = tocha.randn(out_shape, { dtype = "f64", device = device, seed = 85 })
        local grads, pgrads = m:backward({ dy }, cache)
        local dx, dr, dw = fc:backward(x, r, w, b, dy)
        assert.is_true(tocha.allclose(grads[1], dx, 0, 0))
        assert.is_true(tocha.allclose(grads[2], dr, 0, 0))
        for name, g in pairs(pgrads) do
          if name:match("weight$") then assert.is_true(tocha.allclose(g, dw, 0, 0)) end
        end
        fails("residual: expected the output's shape [3, 5, 40] (the residual), got [3, 5, 24]", fc.forward, fc, x, x, w, b)
      end)

      -- y = F(x w^T + b) in the product's epilogue, and the backward through dz = dy F'(z),
      -- against F of the reference's sums; bounds scaled by what an error in z moves (|F'| and
      -- |F''| below 1.2 here).
      it("fuses an activation into the product, forward and backward, every kernel", function()
        local seed = 900
        local cases = { -- dtype, case, function: the tensor cores, the f32 tiles, the tiled kernel
          { "bf16", CASES[2], "gelu" }, { "f16", CASES[1], "silu" }, { "f32", { { 9, 16 }, 16, 12 }, "tanh" },
          { "f64", CASES[3], "sigmoid" }, { "f32", CASES[4], "relu" },
        }
        for _, c in ipairs(cases) do
          seed = seed + 10
          local dt, shape, n_in, n_out, act = c[1], c[2][1], c[2][2], c[2][3], c[3]
          local rows = ref.numel(shape) / n_in
          local fc = tocha.Linear.new(n_in, n_out, { dtype = dt, activation = act })
          local x = tocha.randn(shape, { dtype = dt, device = device, seed = seed })
          local w = tocha.randn({ n_out, n_in }, { dtype = dt, device = device, seed = seed + 1 })
          local b = tocha.randn({ n_out }, { dtype = dt, device = device, seed = seed + 2 })
          local y = fc:forward(x, w, b)
          local dy = tocha.randn(y:shape(), { dtype = dt, device = device, seed = seed + 3 })
          local dx, dw, db = fc:backward(x, w, b, dy)
          local xv, wv, bv, dyv = values(x), values(w), values(b), values(dy)
          local zero = setmetatable({}, { __index = function() return 0 end })
          local base = reference(xv, wv, bv, zero, rows, n_in, n_out)
          local f, df = activations[act][1], activations[act][2]
          local yw, ys, dz, bound = {}, {}, {}, {}
          for e = 1, #base.y[1] do
            local z, zs = base.y[1][e], base.y[2][e]
            yw[e], ys[e] = f(z), 1.2 * zs + math.abs(f(z)) + 1e-30
            dz[e], bound[e] = dyv[e] * df(z), math.abs(dyv[e]) * (1.2 * zs + math.abs(df(z)))
          end
          local want, sums = reference(xv, wv, bv, dz, rows, n_in, n_out), reference(xv, wv, bv, bound, rows, n_in, n_out)
          local label = ("%s %s in %d out %d %s"):format(dt, table.concat(shape, "x"), n_in, n_out, act)
          compare(y, { yw, ys }, TOL[dt], label .. " y")
          compare(dx, { want.dx[1], sums.dx[2] }, TOL[dt], label .. " dx")
          compare(dw, { want.dw[1], sums.dw[2] }, TOL[dt], label .. " dw")
          compare(db, { want.db[1], sums.db[2] }, TOL[dt], label .. " db")
        end
        fails('activation: expected one of identity, relu, relu6, sigmoid, tanh, silu, gelu, hardsigmoid, hardswish, '
          .. 'selu, softplus, mish, gelu_tanh, got "swish"', tocha.Linear.new, 4, 4,
          { activation = "swish" })
      end)

      it("matches central differences in f64 (tocha.gradcheck)", function()
        local fc = tocha.Linear.new(6, 5, { dtype = "f64" })
        local w = tocha.randn({ 5, 6 }, { dtype = "f64", device = device, seed = 1 })
        local b = tocha.randn({ 5 }, { dtype = "f64", device = device, seed = 2 })
        local through_x = { forward = function(_, x) return fc:forward(x, w, b) end,
          backward = function(_, x, dy) return (fc:backward(x, w, b, dy)) end }
        local ok, report = tocha.gradcheck(through_x, tocha.randn({ 4, 6 }, { dtype = "f64", device = device, seed = 3 }),
          { seed = 5 })
        assert(ok, tostring(report and report.summary or report))
        local x = tocha.randn({ 4, 6 }, { dtype = "f64", device = device, seed = 4 })
        local through_w = { forward = function(_, v) return fc:forward(x, v, b) end,
          backward = function(_, v, dy) return select(2, fc:backward(x, v, b, dy)) end }
        ok, report = tocha.gradcheck(through_w, w, { seed = 6 })
        assert(ok, tostring(report and report.summary or report))
      end)

      -- Two layers with a gelu between them and a mean as the loss, in a model: its forward and
      -- backward equal the ops' own, and the gradients match central differences.
      it("trains in a model: linear, gelu, linear and a mean as the loss (f64)", function()
        local x = tocha.Model.input({ -1, 6 }, { name = "x", dtype = "f64" })
        local fc1, act, fc2 = tocha.Linear.new(6, 8, { dtype = "f64" }), tocha.Elementwise.new("gelu", "f64"),
          tocha.Linear.new(8, 3, { dtype = "f64", bias = false })
        local loss = tocha.Reduce.new("mean", nil, "f64")
        local m = tocha.Model({ x }, { loss(fc2(act(fc1(x):named("fc1"))):named("fc2")) }):load(4, device)
        local p = m:parameters()
        -- PyTorch's start: uniform in [-1/sqrt(in), 1/sqrt(in)), drawn from the name's seed (the
        -- same every time, another for each parameter)
        for name, fan_in in pairs({ ["fc1.weight"] = 6, ["fc1.bias"] = 6, ["fc2.weight"] = 8 }) do
          local v = values(p[name])
          local lo, hi = math.huge, -math.huge
          for _, e in ipairs(v) do lo, hi = math.min(lo, e), math.max(hi, e) end
          assert(lo >= -1 / math.sqrt(fan_in) and hi < 1 / math.sqrt(fan_in) and lo < hi, name)
        end
        local again = tocha.Model({ x }, { loss(fc2(act(fc1(x):named("fc1"))):named("fc2")) }):load(4, device)
        assert.tensor.equal(p["fc1.weight"], again:parameters()["fc1.weight"])
        local first = {}
        for i, v in ipairs(values(p["fc1.weight"])) do if i <= 8 then first[i] = v end end
        assert.are_not.same(first, values(p["fc1.bias"]))
        p["fc1.weight"]:copy(tocha.randn({ 8, 6 }, { dtype = "f64", device = device, seed = 20 }))
        p["fc1.bias"]:copy(tocha.randn({ 8 }, { dtype = "f64", device = device, seed = 21 }))
        p["fc2.weight"]:copy(tocha.randn({ 3, 8 }, { dtype = "f64", device = device, seed = 22 }))
        local xt = tocha.randn({ 4, 6 }, { dtype = "f64", device = device, seed = 23 })
        local h = fc1:forward(xt, p["fc1.weight"], p["fc1.bias"])
        local g = act:forward(h)
        local y = fc2:forward(g, p["fc2.weight"])
        local want = loss:forward(y)
        assert.tensor.equal(want, m:forward({ xt })[1])
        local _, cache = m:forward_train({ xt })
        local one = tocha.ones({ 1 }, { dtype = "f64", device = device })
        local grads, param_grads = m:backward({ one }, cache)
        local dy = loss:backward(y, want, one)
        local dg, dw2 = fc2:backward(g, p["fc2.weight"], dy)
        local dh = act:backward(h, dg)
        local dx, dw1, db1 = fc1:backward(xt, p["fc1.weight"], p["fc1.bias"], dh)
        assert.tensor.equal(dx, grads[1])
        assert.tensor.equal(dw1, param_grads["fc1.weight"])
        assert.tensor.equal(db1, param_grads["fc1.bias"])
        assert.tensor.equal(dw2, param_grads["fc2.weight"])
        local wrapped = {
          forward = function(_, t) return m:forward({ t })[1]:clone() end,
          backward = function(_, t, d)
            local _, c = m:forward_train({ t })
            return m:backward({ d }, c)[1]
          end,
        }
        local ok, report = tocha.gradcheck(wrapped, xt, { seed = 24 })
        assert(ok, ("max abs error %g"):format(report.max_abs))
      end)

      it("refuses bad arguments, naming them, and goes on", function()
        fails("in_features: expected a positive size, got 0", tocha.Linear.new, 0, 4)
        fails("unknown option of Linear", tocha.Linear.new, 4, 4, { bais = false })
        local fc = tocha.Linear.new(4, 3)
        local w, b = tocha.zeros({ 3, 4 }, { device = device }), tocha.zeros({ 3 }, { device = device })
        fails("x: expected a last dimension of 4 (in_features), got 5", fc.forward, fc, tocha.zeros({ 2, 5 }, { device = device }), w, b)
        fails("weight", fc.forward, fc, tocha.zeros({ 2, 4 }, { device = device }), tocha.zeros({ 4, 3 }, { device = device }), b)
        assert.are.same({ 2, 3 }, fc:forward(tocha.zeros({ 2, 4 }, { device = device }), w, b):shape())
      end)
    end)
  end
end)
