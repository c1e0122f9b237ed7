-- tocha.nn.fold_batch_norm: a BatchNorm in inference mode folded into the convolution or
-- Linear before it. The folded parameters against the formula computed here in f64 from the
-- values as stored; a folded Conv2d (with a fused SiLU: YOLO's Conv + BN + SiLU block) against
-- the convolution, tocha.BatchNorm2d in inference mode and Elementwise("silu") run one after
-- another; without affine parameters or a bias; bad arguments.
local tocha = require "tocha"
local ref = require "support.reference"
local fails = require("support.assertions").fails

local values = ref.values

describe("tocha.nn.fold_batch_norm", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local function randn(shape, dt, seed) return tocha.randn(shape, { dtype = dt, device = device, seed = seed }) end

      it("folds the statistics and the affine parameters into the weight and bias, every float dtype", function()
        for i, dt in ipairs(ref.float_dtypes) do
          local o = 6
          local w, b = randn({ o, 3, 3, 3 }, dt, 10 * i), i % 2 == 1 and randn({ o }, dt, 10 * i + 1) or nil
          local bn = { running_mean = randn({ o }, dt, 10 * i + 2), running_var = randn({ o }, dt, 10 * i + 3):abs() + 0.5,
            weight = randn({ o }, dt, 10 * i + 4), bias = i ~= 3 and randn({ o }, dt, 10 * i + 5) or nil, eps = 1e-3 }
          local fw, fb = tocha.nn.fold_batch_norm(w, b, bn)
          assert.are.equal(dt, fw:dtype())
          assert.are.same(w:shape(), fw:shape())
          assert.are.same({ o }, fb:shape())
          local wv, bv = values(w), b and values(b)
          local mv, vv, gv = values(bn.running_mean), values(bn.running_var), values(bn.weight)
          local betav = bn.bias and values(bn.bias)
          local got_w, got_b = values(fw), values(fb)
          local tol = ref.eps[dt] * (dt == "f64" and 8 or 1) + (dt == "f32" and 1e-6 or 0) -- one rounding (f32 math for f32)
          for c = 1, o do
            local s = gv[c] / math.sqrt(vv[c] + 1e-3)
            local want_b = ((bv and bv[c] or 0) - mv[c]) * s + (betav and betav[c] or 0)
            assert(math.abs(got_b[c] - want_b) <= tol * (math.abs((bv and bv[c] or 0) - mv[c]) * math.abs(s) + math.abs(
              betav and betav[c] or 0) + 1e-30) * 2, ("%s bias %d: %.17g, expected %.17g"):format(dt, c, got_b[c], want_b))
            for e = (c - 1) * 27 + 1, c * 27 do
              local want = wv[e] * s
              assert(math.abs(got_w[e] - want) <= tol * math.abs(want) * 2, ("%s weight %d: %.17g, expected %.17g"):format(dt,
                e, got_w[e], want))
            end
          end
        end
      end)

      it("makes Conv + BN + SiLU one launch equal to the three ops in inference mode", function()
        local conv = tocha.Conv2d.new(4, 6, 3, { padding = 1, stride = 2, dtype = "f64" })
        local bn_op = tocha.BatchNorm2d.new(6, { dtype = "f64", eps = 1e-5 }):train(false)
        local silu = tocha.Elementwise.new("silu", "f64")
        local x, w, b = randn({ 2, 4, 9, 8 }, "f64", 1), randn({ 6, 4, 3, 3 }, "f64", 2), randn({ 6 }, "f64", 3)
        local gamma, beta, mean = randn({ 6 }, "f64", 4), randn({ 6 }, "f64", 5), randn({ 6 }, "f64", 6)
        local var = randn({ 6 }, "f64", 7):abs() + 0.25
        local want = silu:forward(bn_op:forward(conv:forward(x, w, b), gamma, beta, mean, var))
        local fw, fb = tocha.nn.fold_batch_norm(w, b, { weight = gamma, bias = beta, running_mean = mean, running_var = var })
        local block = tocha.Conv2d.new(4, 6, 3, { padding = 1, stride = 2, dtype = "f64", activation = "silu" })
        local got = block:forward(x, fw, fb)
        assert.are.equal(1, block:n_launches())
        local g, wv = values(got), values(want)
        for e = 1, #wv do
          assert(math.abs(g[e] - wv[e]) <= 1e-12 * (math.abs(wv[e]) + 1), ("element %d: %.17g, expected %.17g"):format(e, g[e],
            wv[e]))
        end
        -- a Linear's weight [out, in] folds the same way
        local lw = randn({ 6, 5 }, "f64", 8)
        local fl = tocha.nn.fold_batch_norm(lw, nil, { running_mean = mean, running_var = var })
        local lv, fv, vv = values(lw), values(fl), values(var)
        for e = 1, #lv do
          local c = math.floor((e - 1) / 5) + 1
          assert(math.abs(fv[e] - lv[e] / math.sqrt(vv[c] + 1e-5)) <= 1e-15 * math.abs(fv[e]) + 1e-300)
        end
      end)

      it("refuses bad arguments, naming them", function()
        local w, v = tocha.zeros({ 4, 2, 3, 3 }, { device = device }), tocha.ones({ 4 }, { device = device })
        fails("weight: expected a tensor, got nil", tocha.nn.fold_batch_norm, nil, nil, {})
        fails("bn: expected a table", tocha.nn.fold_batch_norm, w, nil, 3)
        fails("bn.running_mean: expected a tensor, got nil", tocha.nn.fold_batch_norm, w, nil, { running_var = v })
        fails("bn.running_var: expected shape [4], got [3]", tocha.nn.fold_batch_norm, w, nil,
          { running_mean = v, running_var = tocha.ones({ 3 }, { device = device }) })
        fails("bias: expected shape [4], got [5]", tocha.nn.fold_batch_norm, w, tocha.ones({ 5 }, { device = device }),
          { running_mean = v, running_var = v })
        fails('bn: unknown key "momentum"', tocha.nn.fold_batch_norm, w, nil, { running_mean = v, running_var = v, momentum = 1 })
        fails("bn.eps: expected a non-negative number, got -1", tocha.nn.fold_batch_norm, w, nil,
          { running_mean = v, running_var = v, eps = -1 })
        fails("weight: expected [out, ...] of at least 2 dimensions, got 1", tocha.nn.fold_batch_norm, v, nil,
          { running_mean = v, running_var = v })
      end)
    end)
  end
end)
