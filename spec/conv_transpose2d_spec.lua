-- tocha.ConvTranspose2d: forward and backward (dx, dweight, dbias) on sim and, tagged #gpu, on
-- cuda, every float dtype, against a transposed convolution computed here in f64 from the
-- inputs as stored (PyTorch's definition: each input element scatters its window of weights,
-- with stride, padding, output padding, dilation and groups): exactly on small integers,
-- within the dtype's rounding on normal inputs; f64 against central differences; bad arguments.
local tocha = require "tocha"
require "tocha.assertions"
local ref = require "support.reference"
local fails = require("support.assertions").fails
local igemm = require "tocha.ops.conv2d_igemm"

local TOL, values, small_ints, compare = ref.product_tol, ref.values, ref.small_ints, ref.compare_terms

-- The transposed convolution and its gradients in f64; each with its sum of |terms|.
local function reference(x, w, b, dy, N, CI, H, W, CO, o)
  local kh, kw, sh, sw, ph, pw, dh, dw_, G = o.k[1], o.k[2], o.s[1], o.s[2], o.p[1], o.p[2], o.d[1], o.d[2], o.g
  local OH = (H - 1) * sh - 2 * ph + dh * (kh - 1) + o.op[1] + 1
  local OW = (W - 1) * sw - 2 * pw + dw_ * (kw - 1) + o.op[2] + 1
  local cig, cog = CI / G, CO / G
  local y, ys, dx, dxs, dwt, dws, db, dbs = {}, {}, {}, {}, {}, {}, {}, {}
  for i = 1, N * CO * OH * OW do y[i], ys[i] = 0, 1e-30 end
  for i = 1, CI * cog * kh * kw do dwt[i], dws[i] = 0, 1e-30 end
  for n = 0, N - 1 do
    for oc = 0, CO - 1 do
      for i = 0, OH * OW - 1 do
        local e = (n * CO + oc) * OH * OW + i + 1
        if b then y[e], ys[e] = b[oc + 1], math.abs(b[oc + 1]) end
      end
    end
  end
  for i = 1, CO do db[i], dbs[i] = 0, 1e-30 end
  for e = 1, N * CO * OH * OW do
    local oc = math.floor((e - 1) / (OH * OW)) % CO
    db[oc + 1], dbs[oc + 1] = db[oc + 1] + dy[e], dbs[oc + 1] + math.abs(dy[e])
  end
  for n = 0, N - 1 do
    for ic = 0, CI - 1 do
      local g = math.floor(ic / cig)
      for iy = 0, H - 1 do
        for ix = 0, W - 1 do
          local xi = ((n * CI + ic) * H + iy) * W + ix + 1
          local s, a = 0, 0
          for oo = 0, cog - 1 do
            local oc = g * cog + oo
            for ky = 0, kh - 1 do
              local Y = iy * sh - ph + ky * dh
              for kx = 0, kw - 1 do
                local X = ix * sw - pw + kx * dw_
                if Y >= 0 and Y < OH and X >= 0 and X < OW then
                  local yi = ((n * CO + oc) * OH + Y) * OW + X + 1
                  local wi = ((ic * cog + oo) * kh + ky) * kw + kx + 1
                  y[yi], ys[yi] = y[yi] + x[xi] * w[wi], ys[yi] + math.abs(x[xi] * w[wi])
                  s, a = s + dy[yi] * w[wi], a + math.abs(dy[yi] * w[wi])
                  dwt[wi], dws[wi] = dwt[wi] + x[xi] * dy[yi], dws[wi] + math.abs(x[xi] * dy[yi])
                end
              end
            end
          end
          dx[xi], dxs[xi] = s, a + 1e-30
        end
      end
    end
  end
  return { y = { y, ys }, dx = { dx, dxs }, dw = { dwt, dws }, db = { db, dbs } }, { N, CO, OH, OW }
end

-- {x shape, out channels, options}: a decoder's 2x2 stride 2, a 3x3 stride 2 with output
-- padding, 4x4 stride 2 padding 1, grouped with dilation, stride 1.
local CASES = {
  { { 2, 4, 3, 4 }, 3, { k = { 2, 2 }, s = { 2, 2 }, p = { 0, 0 }, op = { 0, 0 }, d = { 1, 1 }, g = 1 } },
  { { 1, 3, 4, 3 }, 4, { k = { 3, 3 }, s = { 2, 2 }, p = { 1, 1 }, op = { 1, 1 }, d = { 1, 1 }, g = 1 } },
  { { 1, 2, 3, 3 }, 2, { k = { 4, 4 }, s = { 2, 2 }, p = { 1, 1 }, op = { 0, 0 }, d = { 1, 1 }, g = 1 } },
  { { 2, 4, 4, 3 }, 6, { k = { 3, 2 }, s = { 1, 2 }, p = { 1, 0 }, op = { 0, 1 }, d = { 2, 1 }, g = 2 } },
  { { 1, 3, 5, 4 }, 2, { k = { 3, 3 }, s = { 1, 1 }, p = { 1, 1 }, op = { 0, 0 }, d = { 1, 1 }, g = 1 } },
}

-- Transposed convolutions the tensor cores take (halves, groups 1, channels multiples of 8,
-- dilation (k - 1) >= padding): a decoder's 2x2 stride 2, 3x3 stride 2 with output padding,
-- 4x4 stride 2 padding 1 (no bias), stride 1, a 1x1 window (its weight read as it lies) into
-- 136 channels (a tile of 256 past the edge), dilation 2, and one output tile whose k (9 x 256
-- channels) is split.
local TC_CASES = {
  { { 2, 16, 5, 6 }, 8, { k = { 2, 2 }, s = { 2, 2 }, p = { 0, 0 }, op = { 0, 0 }, d = { 1, 1 }, g = 1 } },
  { { 1, 8, 4, 5 }, 24, { k = { 3, 3 }, s = { 2, 2 }, p = { 1, 1 }, op = { 1, 1 }, d = { 1, 1 }, g = 1 } },
  { { 1, 16, 4, 4 }, 16, { k = { 4, 4 }, s = { 2, 2 }, p = { 1, 1 }, op = { 0, 0 }, d = { 1, 1 }, g = 1 } },
  { { 1, 24, 5, 4 }, 8, { k = { 3, 3 }, s = { 1, 1 }, p = { 1, 1 }, op = { 0, 0 }, d = { 1, 1 }, g = 1 } },
  { { 1, 64, 3, 3 }, 136, { k = { 1, 1 }, s = { 1, 1 }, p = { 0, 0 }, op = { 0, 0 }, d = { 1, 1 }, g = 1 } },
  { { 1, 8, 4, 3 }, 16, { k = { 3, 3 }, s = { 2, 1 }, p = { 1, 2 }, op = { 1, 0 }, d = { 2, 2 }, g = 1 } },
  { { 1, 256, 2, 2 }, 16, { k = { 3, 3 }, s = { 1, 1 }, p = { 1, 1 }, op = { 0, 0 }, d = { 1, 1 }, g = 1 } },
}

local function opts_of(o, dt, bias, layout)
  return { stride = o.s, padding = o.p, output_padding = o.op, dilation = o.d, groups = o.g, dtype = dt, bias = bias,
    layout = layout }
end

-- NCHW <-> NHWC, dense
local function to_nhwc(t) return t:permute(1, 3, 4, 2):contiguous() end
local function to_nchw(t) return t:permute(1, 4, 2, 3):contiguous() end

describe("tocha.ConvTranspose2d", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      -- layout nhwc: the op runs on x and dy permuted to [N, H, W, C], its y and dx are
      -- permuted back for the reference
      local function run(dt, case, bias, ints, seed, layout)
        local s, co, o = case[1], case[2], case[3]
        local up = tocha.ConvTranspose2d.new(s[2], co, o.k, opts_of(o, dt, bias, layout))
        local nhwc = layout == "nhwc"
        local make = ints and small_ints or function(sh, d, dv, sd) return tocha.randn(sh, { dtype = d, device = dv, seed = sd }) end
        local x = make(s, dt, device, seed)
        local w = make({ s[2], co / o.g, o.k[1], o.k[2] }, dt, device, seed + 1)
        local b = bias and make({ co }, dt, device, seed + 2) or nil
        local xl = nhwc and to_nhwc(x) or x
        local y = b and up:forward(xl, w, b) or up:forward(xl, w)
        if nhwc then y = to_nchw(y) end
        local dy = make(y:shape(), dt, device, seed + 3)
        local want, out_shape = reference(values(x), values(w), b and values(b), values(dy), s[1], s[2], s[3], s[4], co, o)
        assert.are.same(out_shape, y:shape())
        local dyl = nhwc and to_nhwc(dy) or dy
        local dx, dw, db
        if b then dx, dw, db = up:backward(xl, w, b, dyl) else dx, dw = up:backward(xl, w, dyl) end
        if nhwc then dx = to_nchw(dx) end
        local tol = ints and 0 or TOL[dt]
        local label = ("%s%s %s k %dx%d s %d,%d p %d,%d op %d,%d d %d,%d g %d"):format(dt, nhwc and " nhwc" or "",
          table.concat(s, "x"), o.k[1], o.k[2], o.s[1], o.s[2], o.p[1], o.p[2], o.op[1], o.op[2], o.d[1], o.d[2], o.g)
        compare(y, want.y, tol, label .. " y")
        compare(dx, want.dx, tol, label .. " dx")
        compare(dw, want.dw, tol, label .. " dweight")
        if b then compare(db, want.db, tol, label .. " dbias") else assert.is_nil(db) end
        return up
      end

      it("gives y, dx, dweight and dbias exactly on small integers, every option and float dtype", function()
        local seed = 0
        for _, dt in ipairs(ref.float_dtypes) do
          for _, case in ipairs(CASES) do
            seed = seed + 10
            run(dt, case, seed % 20 == 0, true, seed)
          end
        end
      end)

      it("stays within the dtype's rounding on normal inputs", function()
        local seed = 500
        for _, dt in ipairs(ref.float_dtypes) do
          for i = 1, #CASES, 2 do
            seed = seed + 10
            run(dt, CASES[i], true, false, seed)
          end
        end
      end)

      it("gives the same in layout nhwc, every option, exactly on small integers and within rounding", function()
        local seed = 900
        for _, case in ipairs(CASES) do
          seed = seed + 10
          run("f32", case, seed % 20 == 0, true, seed, "nhwc")
        end
        for i = 1, #CASES, 2 do
          seed = seed + 10
          run("bf16", CASES[i], true, false, seed, "nhwc")
        end
      end)

      it("runs halves on the tensor cores, both layouts: exact on small integers, within rounding on normal inputs",
        function()
          local seed = 1300
          for i, case in ipairs(TC_CASES) do
            for _, layout in ipairs({ "nhwc", "nchw" }) do
              seed = seed + 10
              local up = run(i % 2 == 0 and "f16" or "bf16", case, i ~= 3, i ~= #TC_CASES, seed, layout)
              assert.is_truthy(up.igemm, "the tensor cores")
            end
          end
          local up = tocha.ConvTranspose2d.new(256, 16, 3, { padding = 1, dtype = "f16" })
          assert.is_true(igemm.plan(up.igemm, 1, 256, 2, 2, 2, 2).splits > 1, "the last case's k is split")
          -- the direct kernels keep what the tensor cores do not take
          assert.is_nil(tocha.ConvTranspose2d.new(16, 16, 3, { dtype = "f32" }).igemm)
          assert.is_nil(tocha.ConvTranspose2d.new(16, 16, 3, { dtype = "bf16", groups = 2 }).igemm)
          assert.is_nil(tocha.ConvTranspose2d.new(16, 16, 1, { dtype = "bf16", padding = 1 }).igemm)
        end)

      it("matches central differences in f64 (tocha.gradcheck), through x and through the weight", function()
        local up = tocha.ConvTranspose2d.new(3, 2, 3, { stride = 2, padding = 1, output_padding = 1, dtype = "f64" })
        local w = tocha.randn({ 3, 2, 3, 3 }, { dtype = "f64", device = device, seed = 1 })
        local b = tocha.randn({ 2 }, { dtype = "f64", device = device, seed = 2 })
        local x = tocha.randn({ 2, 3, 3, 4 }, { dtype = "f64", device = device, seed = 3 })
        local through_x = { forward = function(_, v) return up:forward(v, w, b) end,
          backward = function(_, v, dy) return (up:backward(v, w, b, dy)) end }
        local ok, report = tocha.gradcheck(through_x, x, { seed = 4 })
        assert(ok, ("max abs error %g"):format(report.max_abs))
        local through_w = { forward = function(_, v) return up:forward(x, v, b) end,
          backward = function(_, v, dy) return select(2, up:backward(x, v, b, dy)) end }
        ok, report = tocha.gradcheck(through_w, w, { seed = 5 })
        assert(ok, ("max abs error %g"):format(report.max_abs))
      end)

      it("refuses bad arguments, naming them, and goes on", function()
        fails("output_padding: expected less than the stride or the dilation, got 2", tocha.ConvTranspose2d.new, 3, 4, 3,
          { stride = 2, output_padding = 2 })
        fails("groups: expected a positive divisor of in_channels (3) and out_channels (4), got 2",
          tocha.ConvTranspose2d.new, 3, 4, 3, { groups = 2 })
        local up = tocha.ConvTranspose2d.new(3, 4, 2, { stride = 2 })
        local w, b = tocha.zeros({ 3, 4, 2, 2 }, { device = device }), tocha.zeros({ 4 }, { device = device })
        fails("x: expected 3 channels (in_channels), got 4", up.forward, up, tocha.zeros({ 1, 4, 5, 5 }, { device = device }), w, b)
        fails("weight", up.forward, up, tocha.zeros({ 1, 3, 5, 5 }, { device = device }), tocha.zeros({ 4, 3, 2, 2 },
          { device = device }), b)
        assert.are.same({ 1, 4, 10, 10 }, up:forward(tocha.zeros({ 1, 3, 5, 5 }, { device = device }), w, b):shape())
      end)
    end)
  end
end)
