-- tocha.BatchNorm2d: training mode (the batch's statistics, running statistics moved by
-- momentum with the unbiased variance) and inference mode (the running ones), forward and
-- backward, every element against a reference written here in f64 from the definitions, the
-- gradients also against central differences; without affine parameters or running
-- statistics; halves; in a model (m:train, buffers kept out of the trainable parameters and of
-- the gradients); bad arguments. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
local ref = require "support.reference"

local fails = require("support.assertions").fails

-- Per channel c of x [N, C, plane] (flat), the elements' indices.
local function members(N, C, plane, c)
  local out = {}
  for n = 0, N - 1 do for k = 1, plane do out[#out + 1] = (n * C + c - 1) * plane + k end end
  return out
end

-- The reference: y, dx, dw, db and the new running statistics.
local function bn_ref(x, dy, w, b, rm, rv, N, C, plane, eps, momentum, training)
  local y, dx, dw, db, nrm, nrv = {}, {}, {}, {}, {}, {}
  for c = 1, C do
    local idx = members(N, C, plane, c)
    local M = #idx
    local mean, var
    if training then
      mean = 0
      for _, i in ipairs(idx) do mean = mean + x[i] end
      mean = mean / M
      var = 0
      for _, i in ipairs(idx) do var = var + (x[i] - mean) ^ 2 end
      var = var / M
      nrm[c] = (1 - momentum) * rm[c] + momentum * mean
      nrv[c] = (1 - momentum) * rv[c] + momentum * var * M / (M - 1)
    else
      mean, var = rm[c], rv[c]
      nrm[c], nrv[c] = rm[c], rv[c]
    end
    local rstd = 1 / math.sqrt(var + eps)
    local sg, sgx = 0, 0
    for _, i in ipairs(idx) do
      local xhat = (x[i] - mean) * rstd
      y[i] = xhat * (w and w[c] or 1) + (b and b[c] or 0)
      sg, sgx = sg + dy[i], sgx + dy[i] * xhat
    end
    dw[c], db[c] = sgx, sg
    for _, i in ipairs(idx) do
      local xhat = (x[i] - mean) * rstd
      local scale = (w and w[c] or 1) * rstd
      dx[i] = training and scale * (dy[i] - sg / M - xhat * sgx / M) or scale * dy[i]
    end
  end
  return y, dx, dw, db, nrm, nrv
end

local function check(got, want, tol, label)
  local g = type(got) == "table" and got or got:to_table(true)
  assert.are.equal(#want, #g, label)
  for i = 1, #want do
    assert(math.abs(g[i] - want[i]) <= tol * math.max(1, math.abs(want[i])),
      ("%s [%d]: got %.12g, want %.12g"):format(label, i, g[i], want[i]))
  end
end

describe("tocha.BatchNorm2d", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local seed = 0
      local function randn(shape, dt, mean)
        seed = seed + 1
        return tocha.randn(shape, { dtype = dt or "f64", device = device, seed = seed, mean = mean or 0 })
      end

      it("normalises with the batch's statistics in training and the running ones in inference, f64 and f32", function()
        for _, dt in ipairs({ "f64", "f32" }) do
          for _, training in ipairs({ true, false }) do
            local N, C, H, W = 3, 4, 5, 2
            local bn = tocha.BatchNorm2d.new(C, { dtype = dt, momentum = 0.2, eps = 1e-3 }):train(training)
            local x, dy = randn({ N, C, H, W }, dt, 1), randn({ N, C, H, W }, dt)
            local w, b = randn({ C }, dt, 1), randn({ C }, dt)
            local rm, rv = randn({ C }, dt), tocha.rand({ C }, { dtype = dt, device = device, seed = 77, low = 0.5, high = 2 })
            local rmv, rvv = rm:to_table(true), rv:to_table(true)
            local wy, wdx, wdw, wdb, nrm, nrv = bn_ref(x:to_table(true), dy:to_table(true), w:to_table(true), b:to_table(true),
              rmv, rvv, N, C, H * W, 1e-3, 0.2, training)
            local y = bn:forward(x, w, b, rm, rv)
            local tol = dt == "f64" and 1e-12 or 2e-5
            local label = ("%s %s"):format(dt, training and "training" or "inference")
            check(y, wy, tol, label .. " y")
            check(rm, nrm, tol, label .. " running_mean")
            check(rv, nrv, tol, label .. " running_var")
            -- the backward reads the running statistics as the forward left them (inference)
            local grads = { bn:backward(x, w, b, rm, rv, dy) }
            check(grads[1], wdx, tol * 4, label .. " dx")
            check(grads[2], wdw, tol * 4 * N * H * W, label .. " dweight")
            check(grads[3], wdb, tol * 4 * N * H * W, label .. " dbias")
          end
        end
      end)

      -- x (NCHW) channels-last, dense, optionally 4 bytes past an aligned address.
      local function channels_last(x, offset)
        local n = x:numel()
        local block = tocha.zeros({ n + 1 }, { dtype = x:dtype(), device = device })
        local s = x:shape()
        local out = block:narrow(1, offset and 2 or 1, n):view(s[1], s[3], s[4], s[2])
        out:copy(x:permute(1, 3, 4, 2))
        return out
      end
      -- t channels-last back to NCHW.
      local function channels_first(t) return t:permute(1, 4, 2, 3):contiguous() end

      -- Training and inference, forward and backward, of one shape against the reference: x off
      -- zero (so that the merges' shifts matter), optionally 4 bytes past an aligned address;
      -- layout "nhwc": x, dy, y and dx channels-last, the reference's NCHW permuted.
      local function check_case(dt, shape, tol, offset, layout)
        local N, C, plane = shape[1], shape[2], shape[3] * shape[4]
        local nhwc = layout == "nhwc"
        for _, training in ipairs({ true, false }) do
          local x = randn({ N * C * plane + 1 }, dt, 2)
          x = (offset and x:narrow(1, 2, N * C * plane) or x:narrow(1, 1, N * C * plane)):view(N, C, shape[3], shape[4])
          local dy = randn(shape, dt)
          local w, b = randn({ C }, dt, 1), randn({ C }, dt)
          local rm = randn({ C }, dt, 2)
          local rv = tocha.rand({ C }, { dtype = dt, device = device, seed = 78, low = 0.5, high = 2 })
          local wy, wdx, wdw, wdb, nrm, nrv = bn_ref(x:to_table(true), dy:to_table(true), w:to_table(true), b:to_table(true),
            rm:to_table(true), rv:to_table(true), N, C, plane, 1e-5, 0.1, training)
          local bn = tocha.BatchNorm2d.new(C, { dtype = dt, layout = layout }):train(training)
          local label = ("%s %s %s %s"):format(dt, table.concat(shape, "x"), layout or "nchw", training and "training" or "inference")
          local xin, dyin = x, dy
          if nhwc then xin, dyin = channels_last(x, offset), channels_last(dy) end
          local y = bn:forward(xin, w, b, rm, rv)
          check(nhwc and channels_first(y) or y, wy, tol, label .. " y")
          check(rm, nrm, tol, label .. " running_mean")
          check(rv, nrv, tol, label .. " running_var")
          -- the backward reads the running statistics as the forward left them (inference)
          local grads = { bn:backward(xin, w, b, rm, rv, dyin) }
          check(nhwc and channels_first(grads[1]) or grads[1], wdx, tol * 4, label .. " dx")
          check(grads[2], wdw, tol * 4 * math.sqrt(N * plane), label .. " dweight")
          check(grads[3], wdb, tol * 4 * math.sqrt(N * plane), label .. " dbias")
        end
      end

      -- Shapes whose channels are split among several CTAs (the statistics' partials merged in
      -- a second pass), read in 16-byte units (the plane whole units), 8-byte units (the plane
      -- whole 8-byte groups only) or element by element (a plane of odd size, or x at an offset
      -- that is not 8-byte aligned), with tails of fewer units than a thread keeps in flight.
      it("splits long channels among CTAs and reads 16- or 8-byte units where it can, in both modes", function()
        local splits = require("tocha.ops.batch_norm").splits
        local cases = {
          { "f32", { 2, 3, 64, 72 }, 2e-5 },  -- 16-byte units
          { "f32", { 3, 2, 50, 61 }, 2e-5 },  -- a plane of 3050 elements: 8-byte units
          { "f32", { 3, 2, 51, 61 }, 2e-5 },  -- a plane of 3111 elements: one at a time
          { "f32", { 2, 2, 64, 64 }, 2e-5, true }, -- x 4 bytes past an aligned address
          { "f64", { 2, 2, 40, 65 }, 1e-12 },
          { "f16", { 4, 2, 64, 72 }, 4e-3 },
          { "f16", { 4, 2, 70, 70 }, 4e-3 }, -- a plane of 4900 halves: 8-byte units
          { "bf16", { 4, 2, 70, 70 }, 3e-2 },
          { "f64", { 2, 1, 256, 272 }, 1e-12 }, -- 68 splits: a lane of the merging warp takes several
        }
        for _, case in ipairs(cases) do
          local dt, shape = case[1], case[2]
          local N, C, plane = shape[1], shape[2], shape[3] * shape[4]
          assert.is_true(splits(N, C, plane, dt) >= 2, "the case splits its channels")
          if C == 1 then assert.is_true(splits(N, C, plane, dt) > 32, "more splits than a warp's lanes") end
          check_case(dt, shape, case[3], case[4])
        end
      end)

      -- Small planes, a CTA a channel: 14x14 (16-byte units in f32, 8-byte units in halves),
      -- 7x10 (8-byte units in f32), 7x7 (one element at a time), in every dtype.
      it("reads small planes in the widest units they hold, every dtype", function()
        local tols = { f32 = 2e-5, f64 = 1e-12, f16 = 4e-3, bf16 = 3e-2 }
        for _, dt in ipairs({ "f32", "f64", "f16", "bf16" }) do
          for _, shape in ipairs({ { 4, 6, 14, 14 }, { 3, 5, 7, 10 }, { 3, 4, 7, 7 } }) do
            check_case(dt, shape, tols[dt])
          end
        end
      end)

      -- Channels-last (layout "nhwc"): the statistics by column tiles (one tile of all the
      -- channels, several with a partial last one), rows split among CTAs, units of 16 or 8 bytes
      -- of channels or one channel at a time (C not a multiple of the width, or x misaligned).
      it("normalises channels-last tensors (layout nhwc) as NCHW's, every width and dtype, in both modes", function()
        local bn = require "tocha.ops.batch_norm"
        local cases = {
          { "f32", { 4, 64, 20, 20 }, 2e-5 },    -- 16-byte units, one tile, rows split
          { "f32", { 2, 160, 6, 5 }, 2e-5 },     -- two tiles, the second of 32 channels
          { "f32", { 3, 6, 7, 5 }, 2e-5 },       -- 8-byte units
          { "f32", { 3, 3, 9, 8 }, 2e-5 },       -- one channel at a time
          { "f32", { 2, 8, 6, 6 }, 2e-5, true }, -- x 4 bytes past an aligned address
          { "f64", { 2, 5, 6, 7 }, 1e-12 },
          { "f64", { 2, 72, 4, 3 }, 1e-12 },     -- two tiles of 64 and 8
          { "f16", { 2, 264, 3, 4 }, 4e-3 },     -- a tile of 256 and one of 8
          { "f16", { 3, 12, 5, 5 }, 4e-3 },      -- 8-byte units
          { "bf16", { 2, 16, 9, 9 }, 3e-2 },
        }
        for _, case in ipairs(cases) do
          local dt, shape = case[1], case[2]
          if case[2][2] == 64 then
            assert.is_true(bn.splits_nhwc(shape[1] * shape[3] * shape[4], shape[2], dt) >= 2, "the case splits its rows")
          end
          check_case(dt, shape, case[3], case[4], "nhwc")
        end
        fails('layout: expected "nchw" or "nhwc", got "nchwc"', tocha.BatchNorm2d.new, 3, { layout = "nchwc" })
        local op = tocha.BatchNorm2d.new(3, { layout = "nhwc", track_running_stats = false })
        fails("x: expected 3 channels (dimension 4), got 2", op.forward, op, randn({ 2, 4, 3, 2 }, "f32"),
          tocha.ones({ 3 }, { device = device }), tocha.zeros({ 3 }, { device = device }))
      end)

      it("gives the gradients central differences give in training, f64", function()
        local N, C, plane = 2, 3, 4
        local bn = tocha.BatchNorm2d.new(C, { dtype = "f64", track_running_stats = false })
        local x, dy, w, b = randn({ N, C, plane }), randn({ N, C, plane }), randn({ C }, nil, 1), randn({ C })
        local grads = { bn:backward(x, w, b, dy) }
        local function loss(xt, wt, bt)
          local yv, gv, s = bn:forward(xt, wt, bt):to_table(true), dy:to_table(true), 0
          for k = 1, #yv do s = s + yv[k] * gv[k] end
          return s
        end
        for which, t in ipairs({ x, w, b }) do
          local tv, gv = t:to_table(true), grads[which]:to_table(true)
          for k = 1, #tv do
            local function at(v)
              local copy = tocha.tensor(tv, { dtype = "f64", device = device }):view(t:shape())
              copy:view(-1)[k] = v
              local args = { x, w, b }
              args[which] = copy
              return loss(args[1], args[2], args[3])
            end
            local h = 1e-5
            local num = (at(tv[k] + h) - at(tv[k] - h)) / (2 * h)
            assert(math.abs(num - gv[k]) <= 1e-6 * math.max(1, math.abs(num)), ("gradient %d [%d]: %.12g vs %.12g"):format(which, k, gv[k], num))
          end
        end
      end)

      it("runs without affine parameters, and in halves", function()
        local bn = tocha.BatchNorm2d.new(2, { affine = false, dtype = "f64" })
        assert.are.same({ "running_mean", "running_var" }, bn:param_names())
        local x = randn({ 4, 2, 3 })
        local rm, rv = tocha.zeros({ 2 }, { dtype = "f64", device = device }), tocha.ones({ 2 }, { dtype = "f64", device = device })
        local wy = bn_ref(x:to_table(true), x:to_table(true), nil, nil, { 0, 0 }, { 1, 1 }, 4, 2, 3, 1e-5, 0.1, true)
        check(bn:forward(x, rm, rv), wy, 1e-12, "no affine")
        for _, dt in ipairs({ "f16", "bf16" }) do
          local h = tocha.BatchNorm2d.new(3, { dtype = dt })
          local xh = randn({ 2, 3, 8 }, dt, 1)
          local one, zero = tocha.ones({ 3 }, { dtype = dt, device = device }), tocha.zeros({ 3 }, { dtype = dt, device = device })
          local want = bn_ref(xh:to_table(true), xh:to_table(true), nil, nil, { 0, 0, 0 }, { 1, 1, 1 }, 2, 3, 8, 1e-5, 0.1, true)
          check(h:forward(xh, one, zero, zero:clone(), one:clone()), want, dt == "f16" and 4e-3 or 3e-2, dt)
        end
      end)

      it("trains in a model: buffers kept out of the trainable parameters; m:train(false) infers", function()
        local input = tocha.Model.input({ -1, 3, 4, 4 })
        local bn = tocha.BatchNorm2d.new(3)
        local m = tocha.Model({ input }, { bn(input) })
        m:load(2, device)
        local all, trained = m:parameters(), m:trainable_parameters()
        local n_all, n_trained = 0, 0
        for _ in pairs(all) do n_all = n_all + 1 end
        for _ in pairs(trained) do n_trained = n_trained + 1 end
        assert.are.equal(4, n_all)
        assert.are.equal(2, n_trained)
        for name, t in pairs(all) do
          local want = (name:find("weight$") or name:find("running_var$")) and 1 or 0
          for _, v in ipairs(t:to_table(true)) do assert.are.equal(want, v, name) end
        end
        local x = randn({ 2, 3, 4, 4 }, "f32", 3)
        local out, cache = m:forward_train({ x })
        local _, grads = m:backward({ randn({ 2, 3, 4, 4 }, "f32") }, cache)
        local names = {}
        for name in pairs(grads) do names[#names + 1] = name:match("[^.]+$") end
        table.sort(names)
        assert.are.same({ "bias", "weight" }, names)
        local rm
        for name, t in pairs(all) do if name:find("running_mean$") then rm = t end end
        local means = x:mean({ 1, 3, 4 }):to_table(true)
        check(rm, { 0.1 * means[1], 0.1 * means[2], 0.1 * means[3] }, 1e-5, "running mean after one step")
        m:train(false)
        local y = m:forward({ x })[1]
        local rv
        for name, t in pairs(all) do if name:find("running_var$") then rv = t end end
        local want = (x - rm:view(1, 3, 1, 1)) / (rv:view(1, 3, 1, 1) + 1e-5):sqrt()
        assert.is_true(tocha.allclose(y, want, 1e-5, 1e-6))
        local _ = out
      end)

      it("refuses bad arguments by name", function()
        fails("num_features: expected a positive integer, got 0", tocha.BatchNorm2d.new, 0)
        fails("momentum: expected a number from 0 to 1, got 2", tocha.BatchNorm2d.new, 3, { momentum = 2 })
        fails('"groups": unknown option of tocha.BatchNorm2d', tocha.BatchNorm2d.new, 3, { groups = 1 })
        local bn = tocha.BatchNorm2d.new(3, { track_running_stats = false })
        fails("x: expected 3 channels (dimension 2), got 4", bn.forward, bn, randn({ 2, 4, 5 }, "f32"),
          tocha.ones({ 3 }, { device = device }), tocha.zeros({ 3 }, { device = device }))
        fails("flag: expected a boolean, got number", bn.train, bn, 1)
      end)
    end)
  end
end)
