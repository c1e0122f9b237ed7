-- tocha.LayerNorm, RMSNorm and GroupNorm: forward and backward (input, weight, bias) on random
-- shapes and every option, each element against a reference written here in f64 from the
-- definitions (biased variance, eps inside the root); the gradients also against central
-- differences of sum(y dy) in f64; long rows (a CTA a row) and short ones (a warp); parameter
-- sums split over the rows; rows off a 16-byte boundary; repeatable bits; halves; in a
-- model, whose weights start at 1 and biases at 0; bad arguments. On sim and, tagged #gpu, on
-- cuda.
local tocha = require "tocha"
local ref = require "support.reference"

local fails = require("support.assertions").fails

-- The reference over rows of n with parameter index p(r, j): y, dx, dw, db (flat lists).
local function norm_ref(xv, dyv, wv, bv, rows, n, param_of, eps, rms, nparams)
  local y, dx, dw, db = {}, {}, {}, {}
  for q = 1, nparams do dw[q], db[q] = 0, 0 end
  for r = 0, rows - 1 do
    local m = 0
    if not rms then
      for j = 1, n do m = m + xv[r * n + j] end
      m = m / n
    end
    local v = 0
    for j = 1, n do v = v + (xv[r * n + j] - m) ^ 2 end
    local rstd = 1 / math.sqrt(v / n + eps)
    local sg, sgx = 0, 0
    for j = 1, n do
      local i, q = r * n + j, param_of(r, j)
      local xhat = (xv[i] - m) * rstd
      y[i] = xhat * (wv and wv[q] or 1) + (bv and bv[q] or 0)
      local g = dyv[i] * (wv and wv[q] or 1)
      sg, sgx = sg + g, sgx + g * xhat
      dw[q], db[q] = dw[q] + dyv[i] * xhat, db[q] + dyv[i]
    end
    sg, sgx = sg / n, sgx / n
    for j = 1, n do
      local i, q = r * n + j, param_of(r, j)
      local xhat = (xv[i] - m) * rstd
      dx[i] = rstd * (dyv[i] * (wv and wv[q] or 1) - (rms and 0 or sg) - xhat * sgx)
    end
  end
  return y, dx, dw, db
end

local function check(got, want, dt, label, scale)
  local g = got:to_table(true)
  assert.are.equal(#want, #g, label .. ": element count")
  local tol = (dt == "f64" and 1e-12) or (dt == "f32" and 2e-5) or (dt == "f16" and 4e-3) or 3e-2
  for i = 1, #want do
    if math.abs(g[i] - want[i]) > tol * math.max(scale or 1, math.abs(want[i])) then
      error(("%s [%d]: got %.10g, want %.10g"):format(label, i, g[i], want[i]), 2)
    end
  end
end

describe("normalisation layers", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local seed = 0
      local function randn(shape, dt, mean)
        seed = seed + 1
        return tocha.randn(shape, { dtype = dt, device = device, seed = seed, mean = mean or 0 })
      end

      -- {name, constructor, input shape, rows, n, param_of, nparams, affine}
      local function cases()
        return {
          { "layer [4, 7] over {7}", function(dt) return tocha.LayerNorm.new({ 7 }, { dtype = dt }) end, { 4, 7 }, 4, 7,
            function(_, j) return j end, 7, 2 },
          { "layer [2, 3, 4, 5] over {4, 5}", function(dt) return tocha.LayerNorm.new({ 4, 5 }, { dtype = dt, eps = 1e-3 }) end,
            { 2, 3, 4, 5 }, 6, 20, function(_, j) return j end, 20, 2 },
          { "layer [3, 1500] (a CTA a row), no bias", function(dt) return tocha.LayerNorm.new(1500, { dtype = dt, bias = false }) end,
            { 3, 1500 }, 3, 1500, function(_, j) return j end, 1500, 1 },
          { "layer without affine", function(dt) return tocha.LayerNorm.new({ 6 }, { dtype = dt, elementwise_affine = false }) end,
            { 5, 6 }, 5, 6, function(_, j) return j end, 6, 0 },
          { "rms [5, 9]", function(dt) return tocha.RMSNorm.new({ 9 }, { dtype = dt, eps = 1e-6 }) end, { 5, 9 }, 5, 9,
            function(_, j) return j end, 9, 1 },
          { "group 3 of 6 channels [2, 6, 4, 3]", function(dt) return tocha.GroupNorm.new(3, 6, { dtype = dt }) end,
            { 2, 6, 4, 3 }, 6, 24, function(r, j) return (r % 3) * 2 + math.floor((j - 1) / 12) + 1 end, 6, 2 },
          { "group 1 of 4 channels [3, 4, 5]", function(dt) return tocha.GroupNorm.new(1, 4, { dtype = dt }) end,
            { 3, 4, 5 }, 3, 20, function(_, j) return math.floor((j - 1) / 5) + 1 end, 4, 2 },
          -- The parameters' sums split over the rows (rows of 128 or more): whole 16-byte
          -- columns, then columns element by element.
          { "layer [256, 64] (split parameter sums)", function(dt) return tocha.LayerNorm.new({ 64 }, { dtype = dt }) end,
            { 256, 64 }, 256, 64, function(_, j) return j end, 64, 2 },
          { "rms [200, 13] (split parameter sums)", function(dt) return tocha.RMSNorm.new({ 13 }, { dtype = dt }) end,
            { 200, 13 }, 200, 13, function(_, j) return j end, 13, 1 },
          -- Long rows: a CTA a row (a layer norm row, a group norm plane).
          { "layer [3, 3000] (a CTA a row)", function(dt) return tocha.LayerNorm.new({ 3000 }, { dtype = dt }) end,
            { 3, 3000 }, 3, 3000, function(_, j) return j end, 3000, 2 },
          { "group 2 of 4 channels [2, 4, 48, 48] (a CTA a row)", function(dt) return tocha.GroupNorm.new(2, 4, { dtype = dt }) end,
            { 2, 4, 48, 48 }, 4, 4608, function(r, j) return (r % 2) * 2 + math.floor((j - 1) / 2304) + 1 end, 4, 2 },
          { "group 2 of 4 channels [130, 4, 3] (split parameter sums)", function(dt) return tocha.GroupNorm.new(2, 4, { dtype = dt }) end,
            { 130, 4, 3 }, 260, 6, function(r, j) return (r % 2) * 2 + math.floor((j - 1) / 3) + 1 end, 4, 2 },
          { "group 4 of 8 channels [3, 8, 7, 7] without affine", function(dt) return tocha.GroupNorm.new(4, 8, { dtype = dt, affine = false }) end,
            { 3, 8, 7, 7 }, 12, 98, function(r, j) return (r % 4) * 2 + math.floor((j - 1) / 49) + 1 end, 8, 0 },
          -- Rows of 8 to 16 KB held in registers by a CTA (f32; f64's take the CTA path), and
          -- one past 16 KB.
          { "layer [3, 2048] (a CTA a row, held)", function(dt) return tocha.LayerNorm.new({ 2048 }, { dtype = dt }) end,
            { 3, 2048 }, 3, 2048, function(_, j) return j end, 2048, 2 },
          { "rms [2, 4096] (a CTA a row, held)", function(dt) return tocha.RMSNorm.new({ 4096 }, { dtype = dt }) end,
            { 2, 4096 }, 2, 4096, function(_, j) return j end, 4096, 1 },
          { "layer [2, 4100] (past what a CTA holds)", function(dt) return tocha.LayerNorm.new({ 4100 }, { dtype = dt, bias = false }) end,
            { 2, 4100 }, 2, 4100, function(_, j) return j end, 4100, 1 },
          -- Group norm's split path (fewer than 1056 rows) with each plane split over several
          -- CTAs (planes of 16384), and its row path (1056 rows and more).
          { "group 2 of 4 channels [1, 4, 128, 128] (split planes)", function(dt) return tocha.GroupNorm.new(2, 4, { dtype = dt }) end,
            { 1, 4, 128, 128 }, 2, 32768, function(r, j) return (r % 2) * 2 + math.floor((j - 1) / 16384) + 1 end, 4, 2 },
          { "group 32 of 64 channels [33, 64, 3] (the row path)", function(dt) return tocha.GroupNorm.new(32, 64, { dtype = dt }) end,
            { 33, 64, 3 }, 1056, 6, function(r, j) return (r % 32) * 2 + math.floor((j - 1) / 3) + 1 end, 64, 2 },
        }
      end

      it("normalises forward and backward as defined, f32 and f64", function()
        for _, c in ipairs(cases()) do
          for _, dt in ipairs({ "f32", "f64" }) do
            local op = c[2](dt)
            local x, dy = randn(c[3], dt, 0.5), randn(c[3], dt)
            local params, pv = {}, {}
            for i = 1, c[8] do
              params[i] = randn(op:param_shapes({ c[3] })[i], dt, i == 1 and 1 or 0)
              pv[i] = params[i]:to_table(true)
            end
            local args = { x }
            for i = 1, c[8] do args[#args + 1] = params[i] end
            local y = op:forward(unpack(args))
            args[#args + 1] = dy
            local grads = { op:backward(unpack(args)) }
            local rms = c[1]:find("^rms") ~= nil
            local wy, wdx, wdw, wdb = norm_ref(x:to_table(true), dy:to_table(true), pv[1], pv[2], c[4], c[5], c[6], op.eps, rms, c[7])
            local label = c[1] .. " " .. dt
            check(y, wy, dt, label .. " y")
            check(grads[1], wdx, dt, label .. " dx", 4)
            if c[8] >= 1 then check(grads[2], wdw, dt, label .. " dweight", 4 * c[4]) end
            if c[8] == 2 then check(grads[3], wdb, dt, label .. " dbias", 4 * c[4]) end
            assert.are.equal(1 + c[8], #grads)
          end
        end
      end)

      it("gives the gradients central differences give, f64", function()
        for _, c in ipairs(cases()) do
          if c[5] <= 24 then
            local op = c[2]("f64")
            local x, dy = randn(c[3], "f64", 0.5), randn(c[3], "f64")
            local params = {}
            for i = 1, c[8] do params[i] = randn(op:param_shapes({ c[3] })[i], "f64", i == 1 and 1 or 0) end
            local function loss(t, ps)
              local y = op:forward(t, unpack(ps))
              local yv, gv, s = y:to_table(true), dy:to_table(true), 0
              for k = 1, #yv do s = s + yv[k] * gv[k] end
              return s
            end
            local args = { x }
            for i = 1, c[8] do args[#args + 1] = params[i] end
            args[#args + 1] = dy
            local grads = { op:backward(unpack(args)) }
            local targets = { x }
            for i = 1, c[8] do targets[#targets + 1] = params[i] end
            for which, t in ipairs(targets) do
              local tv, gv = t:to_table(true), grads[which]:to_table(true)
              for k = 1, math.min(#tv, 12) do
                local function at(v)
                  local copy = tocha.tensor(tv, { dtype = "f64", device = device }):view(t:shape())
                  copy:view(-1)[k] = v
                  local ps = {}
                  for i = 1, c[8] do ps[i] = which == i + 1 and copy or params[i] end
                  return loss(which == 1 and copy or x, ps)
                end
                local h = 1e-5
                local num = (at(tv[k] + h) - at(tv[k] - h)) / (2 * h)
                assert(math.abs(num - gv[k]) <= 1e-6 * math.max(1, math.abs(num)),
                  ("%s gradient %d [%d]: %.12g, central differences %.12g"):format(c[1], which, k, gv[k], num))
              end
            end
          end
        end
      end)

      it("reads rows that start off a 16-byte boundary, and x and dy not aligned alike", function()
        for _, dt in ipairs({ "f32", "f64" }) do
          local op = tocha.LayerNorm.new({ 37 }, { dtype = dt })
          -- x starts one element into a buffer, dy at its start: every row's alignment differs.
          local whole = randn({ 6 * 37 + 1 }, dt, 0.5)
          local x = whole:narrow(1, 2, 6 * 37):view({ 6, 37 })
          local dy, w, b = randn({ 6, 37 }, dt), randn({ 37 }, dt, 1), randn({ 37 }, dt)
          local y = op:forward(x, w, b)
          local dx, dw, db = op:backward(x, w, b, dy)
          local wy, wdx, wdw, wdb = norm_ref(x:to_table(true), dy:to_table(true), w:to_table(true), b:to_table(true), 6, 37,
            function(_, j) return j end, op.eps, false, 37)
          check(y, wy, dt, "offset y " .. dt)
          check(dx, wdx, dt, "offset dx " .. dt, 4)
          check(dw, wdw, dt, "offset dweight " .. dt, 24)
          check(db, wdb, dt, "offset dbias " .. dt, 24)
        end
      end)

      it("gives the same bits on every run (no atomics in the parameters' sums)", function()
        local op = tocha.LayerNorm.new({ 64 })
        local x, dy, w, b = randn({ 300, 64 }), randn({ 300, 64 }), randn({ 64 }, "f32", 1), randn({ 64 })
        local dx1, dw1, db1 = op:backward(x, w, b, dy)
        local dx2, dw2, db2 = op:backward(x, w, b, dy)
        assert.is_true(tocha.allclose(dx1, dx2, 0, 0))
        assert.is_true(tocha.allclose(dw1, dw2, 0, 0))
        assert.is_true(tocha.allclose(db1, db2, 0, 0))
      end)

      it("computes halves in f32", function()
        for _, dt in ipairs({ "f16", "bf16" }) do
          local op = tocha.LayerNorm.new({ 33 }, { dtype = dt })
          local x, dy = randn({ 5, 33 }, dt), randn({ 5, 33 }, dt)
          local w, b = randn({ 33 }, dt, 1), randn({ 33 }, dt)
          local y = op:forward(x, w, b)
          local dx = op:backward(x, w, b, dy)
          local wy, wdx = norm_ref(x:to_table(true), dy:to_table(true), w:to_table(true), b:to_table(true), 5, 33,
            function(_, j) return j end, 1e-5, false, 33)
          check(y, wy, dt, "layer " .. dt)
          check(dx, wdx, dt, "layer dx " .. dt, 4)
        end
      end)

      it("holds rows of 8 to 16 KB in registers in halves, and reads a held row off a 16-byte boundary", function()
        for _, dt in ipairs({ "f16", "bf16" }) do
          for _, c in ipairs({ { "layer", 4096, 2 }, { "rms", 8192, 1 }, { "layer", 8200, 2 } }) do
            local n = c[2]
            local op = c[1] == "rms" and tocha.RMSNorm.new({ n }, { dtype = dt }) or tocha.LayerNorm.new({ n }, { dtype = dt })
            local x, dy, w, b = randn({ 2, n }, dt, 0.5), randn({ 2, n }, dt), randn({ n }, dt, 1), randn({ n }, dt)
            local params = c[3] == 2 and { w, b } or { w }
            local y = op:forward(x, unpack(params))
            local args = { x, unpack(params) }
            args[#args + 1] = dy
            local dx, dw = op:backward(unpack(args))
            local wy, wdx, wdw = norm_ref(x:to_table(true), dy:to_table(true), w:to_table(true), c[3] == 2 and b:to_table(true) or nil,
              2, n, function(_, j) return j end, op.eps, c[1] == "rms", n)
            local label = ("%s %d %s"):format(c[1], n, dt)
            check(y, wy, dt, label .. " y")
            check(dx, wdx, dt, label .. " dx", 4)
            check(dw, wdw, dt, label .. " dweight", 8)
          end
        end
        -- x one element into its buffer: the rows are off 16-byte boundaries, so the CTA path.
        local op = tocha.LayerNorm.new({ 2048 })
        local whole = randn({ 2 * 2048 + 1 }, "f32", 0.5)
        local x = whole:narrow(1, 2, 2 * 2048):view({ 2, 2048 })
        local dy, w, b = randn({ 2, 2048 }), randn({ 2048 }, "f32", 1), randn({ 2048 })
        local y = op:forward(x, w, b)
        local dx = op:backward(x, w, b, dy)
        local wy, wdx = norm_ref(x:to_table(true), dy:to_table(true), w:to_table(true), b:to_table(true), 2, 2048,
          function(_, j) return j end, op.eps, false, 2048)
        check(y, wy, "f32", "offset held y")
        check(dx, wdx, "f32", "offset held dx", 4)
      end)

      it("holds rows of up to four 16-byte groups a lane on a warp's team, and reads longer ones", function()
        -- 37 rows (teams past the last row in the last CTA): 768 and 64 elements in halves
        -- (3 and 2 groups a lane of teams of 32 and 4) held; 768 in f32 (6 groups a lane)
        -- read through the row walks.
        for _, dt in ipairs({ "bf16", "f16", "f32" }) do
          for _, c in ipairs({ { "layer", 768 }, { "rms", 768 }, { "layer", 64 }, { "rms", 64 } }) do
            local n, rms = c[2], c[1] == "rms"
            local op = rms and tocha.RMSNorm.new({ n }, { dtype = dt }) or tocha.LayerNorm.new({ n }, { dtype = dt })
            local x, dy, w, b = randn({ 37, n }, dt, 0.5), randn({ 37, n }, dt), randn({ n }, dt, 1), randn({ n }, dt)
            local params = rms and { w } or { w, b }
            local y = op:forward(x, unpack(params))
            local args = { x, unpack(params) }
            args[#args + 1] = dy
            local grads = { op:backward(unpack(args)) }
            local wy, wdx, wdw, wdb = norm_ref(x:to_table(true), dy:to_table(true), w:to_table(true),
              (not rms) and b:to_table(true) or nil, 37, n, function(_, j) return j end, op.eps, rms, n)
            local label = ("%s %d %s"):format(c[1], n, dt)
            check(y, wy, dt, label .. " y")
            check(grads[1], wdx, dt, label .. " dx", 4)
            check(grads[2], wdw, dt, label .. " dweight", 4 * 37)
            if not rms then check(grads[3], wdb, dt, label .. " dbias", 4 * 37) end
            assert.are.equal(rms and 2 or 3, #grads)
          end
        end
      end)

      it("computes group norm's split path in halves in f32: whole 16-byte planes, odd planes, split planes", function()
        -- {groups, channels, shape}: planes of 16 (whole 16-byte groups), 49 (element by
        -- element) and 16384 (split over CTAs).
        local shapes = { { 2, 4, { 2, 4, 4, 4 } }, { 4, 8, { 3, 8, 7, 7 } }, { 1, 2, { 1, 2, 128, 128 } } }
        for _, dt in ipairs({ "f16", "bf16" }) do
          for _, c in ipairs(shapes) do
            local G, C, shape = c[1], c[2], c[3]
            local op = tocha.GroupNorm.new(G, C, { dtype = dt })
            local x, dy = randn(shape, dt, 0.5), randn(shape, dt)
            local w, b = randn({ C }, dt, 1), randn({ C }, dt)
            local y = op:forward(x, w, b)
            local dx, dw, db = op:backward(x, w, b, dy)
            local HW = shape[3] * (shape[4] or 1)
            local rows, n = shape[1] * G, C / G * HW
            local wy, wdx, wdw, wdb = norm_ref(x:to_table(true), dy:to_table(true), w:to_table(true), b:to_table(true), rows, n,
              function(r, j) return (r % G) * (C / G) + math.floor((j - 1) / HW) + 1 end, op.eps, false, C)
            local label = ("group %d of %d %s"):format(G, C, dt)
            check(y, wy, dt, label .. " y")
            check(dx, wdx, dt, label .. " dx", 4)
            check(dw, wdw, dt, label .. " dweight", 4 * rows)
            check(db, wdb, dt, label .. " dbias", 4 * rows)
          end
        end
      end)

      it("takes group norm's row path for few rows of long planes, the split path's kernels elsewhere", function()
        -- 256 rows of 16 KB planes (f32): the row path, checked element by element; the same
        -- planes in bf16 (8 KB), fewer rows, or shorter planes: the split path's own kernels.
        local G, C, shape = 128, 128, { 2, 128, 64, 64 }
        local op = tocha.GroupNorm.new(G, C)
        assert.are.equal(op.kernel, op:kernel_for_launch(1, { shape }))
        assert.are.equal(op.grad_kernel, op:backward_kernel_for_launch(1, { shape }))
        local half = tocha.GroupNorm.new(G, C, { dtype = "bf16" })
        assert.are.equal(half.split_kernel, half:kernel_for_launch(1, { shape }))
        assert.are.equal(half.split_grad_kernel, half:backward_kernel_for_launch(4, { shape }))
        assert.are.equal(op.split_kernel, op:kernel_for_launch(2, { { 1, 128, 64, 64 } }))
        assert.are.equal(op.split_grad_kernel, op:backward_kernel_for_launch(1, { { 2, 128, 32, 32 } }))
        local x, dy = randn(shape, "f32", 0.5), randn(shape, "f32")
        local w, b = randn({ C }, "f32", 1), randn({ C }, "f32")
        local y = op:forward(x, w, b)
        local dx, dw, db = op:backward(x, w, b, dy)
        local HW, rows = 4096, 2 * G
        local wy, wdx, wdw, wdb = norm_ref(x:to_table(true), dy:to_table(true), w:to_table(true), b:to_table(true), rows, HW,
          function(r) return r % G + 1 end, op.eps, false, C)
        check(y, wy, "f32", "row path y")
        check(dx, wdx, "f32", "row path dx", 4)
        check(dw, wdw, "f32", "row path dweight", 4 * rows)
        check(db, wdb, "f32", "row path dbias", 4 * rows)
      end)

      it("runs in a model: weights start at 1, biases at 0; gradients as direct calls give", function()
        local input = tocha.Model.input({ -1, 4, 3, 3 })
        local gn = tocha.GroupNorm.new(2, 4)
        local ln = tocha.LayerNorm.new({ 3, 3 })
        local m = tocha.Model({ input }, { ln(gn(input)) })
        m:load(2, device)
        local ps = m:parameters()
        local names = {}
        for name, t in pairs(ps) do
          names[#names + 1] = name
          local want = name:find("weight$") and 1 or 0
          for _, v in ipairs(t:to_table(true)) do assert.are.equal(want, v, name) end
        end
        assert.are.equal(4, #names)
        local x = randn({ 2, 4, 3, 3 })
        local out, cache = m:forward_train({ x })
        local w1, b1 = tocha.ones({ 4 }, { device = device }), tocha.zeros({ 4 }, { device = device })
        local w2, b2 = tocha.ones({ 3, 3 }, { device = device }), tocha.zeros({ 3, 3 }, { device = device })
        local mid = gn:forward(x, w1, b1)
        assert.is_true(tocha.allclose(out[1], ln:forward(mid, w2, b2), 0, 0))
        local dy = randn({ 2, 4, 3, 3 })
        local grads, pgrads = m:backward({ dy }, cache)
        local dmid, dw2, db2 = ln:backward(mid, w2, b2, dy)
        local dx, dw1, db1 = gn:backward(x, w1, b1, dmid)
        assert.is_true(tocha.allclose(grads[1], dx, 0, 0))
        local found = 0
        for name, g in pairs(pgrads) do
          local want = ({ weight = { dw1, dw2 }, bias = { db1, db2 } })[name:match("(%a+)$")]
          assert.is_true(tocha.allclose(g, g:numel() == 4 and want[1] or want[2], 0, 0), name)
          found = found + 1
        end
        assert.are.equal(4, found)
      end)

      it("refuses bad arguments by name", function()
        fails("num_channels: expected a positive multiple of num_groups (3), got 4", tocha.GroupNorm.new, 3, 4)
        fails('"momentum": unknown option of tocha.LayerNorm', tocha.LayerNorm.new, { 4 }, { momentum = 0.1 })
        fails("eps: expected a non-negative number, got -1", tocha.LayerNorm.new, { 4 }, { eps = -1 })
        fails("normalized_shape[1]: expected a positive integer, got 0", tocha.RMSNorm.new, { 0 })
        local ln = tocha.LayerNorm.new({ 4 }, { elementwise_affine = false })
        fails("x: the last dimensions [5] are not the normalized shape [4]", ln.forward, ln, randn({ 3, 5 }))
        local gn = tocha.GroupNorm.new(2, 4, { affine = false })
        fails("x: expected 4 channels (dimension 2), got 6", gn.forward, gn, randn({ 2, 6, 3 }))
      end)
    end)
  end
end)
