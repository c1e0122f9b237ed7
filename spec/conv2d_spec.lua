-- tocha.Conv2d: forward and backward (dx, dweight, dbias) on sim and, tagged #gpu, on cuda,
-- every float dtype, against a convolution computed here in f64 from the inputs as stored (PyTorch's
-- definition: zero padding, dilation, groups), for windows of 1 to 5, strides, paddings,
-- dilations and groups up to depthwise: exactly on small integers, within the dtype's rounding
-- on normal inputs; f64 against central differences (tocha.gradcheck); in a model; bad arguments.
local tocha = require "tocha"
require "tocha.assertions"
local ref = require "support.reference"
local activations = require "support.activations"
local fails = require("support.assertions").fails

local TOL, values, small_ints, compare = ref.product_tol, ref.values, ref.small_ints, ref.compare_terms

-- The convolution and its gradients in f64 over tables of the stored values; o: the case's
-- options ({k = {kh, kw}, s, p, d, g}); each result with its sum of |terms|.
local function reference(x, w, b, dy, N, C, H, W, CO, o)
  local kh, kw, sh, sw, ph, pw, dh, dw_, G = o.k[1], o.k[2], o.s[1], o.s[2], o.p[1], o.p[2], o.d[1], o.d[2], o.g
  local OH = math.floor((H + 2 * ph - dh * (kh - 1) - 1) / sh) + 1
  local OW = math.floor((W + 2 * pw - dw_ * (kw - 1) - 1) / sw) + 1
  local cg, cog = C / G, CO / G
  local y, ys = {}, {}
  local dx, dxs, dwt, dws, db, dbs = {}, {}, {}, {}, {}, {}
  for i = 1, N * C * H * W do dx[i], dxs[i] = 0, 1e-30 end
  for i = 1, CO * cg * kh * kw do dwt[i], dws[i] = 0, 1e-30 end
  for i = 1, CO do db[i], dbs[i] = 0, 1e-30 end
  for n = 0, N - 1 do
    for oc = 0, CO - 1 do
      local g = math.floor(oc / cog)
      for oy = 0, OH - 1 do
        for ox = 0, OW - 1 do
          local e = ((n * CO + oc) * OH + oy) * OW + ox + 1
          local s = b and b[oc + 1] or 0
          local a = math.abs(s)
          local d = dy[e]
          db[oc + 1], dbs[oc + 1] = db[oc + 1] + d, dbs[oc + 1] + math.abs(d)
          for i = 0, cg - 1 do
            for ky = 0, kh - 1 do
              local iy = oy * sh - ph + ky * dh
              for kx = 0, kw - 1 do
                local ix = ox * sw - pw + kx * dw_
                if iy >= 0 and iy < H and ix >= 0 and ix < W then
                  local xi = ((n * C + g * cg + i) * H + iy) * W + ix + 1
                  local wi = ((oc * cg + i) * kh + ky) * kw + kx + 1
                  local v = x[xi] * w[wi]
                  s, a = s + v, a + math.abs(v)
                  dx[xi], dxs[xi] = dx[xi] + d * w[wi], dxs[xi] + math.abs(d * w[wi])
                  dwt[wi], dws[wi] = dwt[wi] + d * x[xi], dws[wi] + math.abs(d * x[xi])
                end
              end
            end
          end
          y[e], ys[e] = s, a + 1e-30
        end
      end
    end
  end
  return { y = { y, ys }, dx = { dx, dxs }, dw = { dwt, dws }, db = { db, dbs } }, { N, CO, OH, OW }
end

-- {x shape, out channels, options}
local CASES = {
  { { 2, 4, 7, 6 }, 6, { k = { 3, 3 }, s = { 1, 1 }, p = { 1, 1 }, d = { 1, 1 }, g = 1 } },
  { { 1, 3, 9, 8 }, 4, { k = { 3, 3 }, s = { 2, 2 }, p = { 1, 1 }, d = { 1, 1 }, g = 1 } },
  { { 2, 4, 6, 7 }, 4, { k = { 1, 1 }, s = { 1, 1 }, p = { 0, 0 }, d = { 1, 1 }, g = 1 } },
  { { 1, 6, 8, 8 }, 6, { k = { 3, 3 }, s = { 1, 1 }, p = { 1, 1 }, d = { 1, 1 }, g = 6 } },
  { { 1, 4, 9, 10 }, 6, { k = { 3, 2 }, s = { 2, 1 }, p = { 2, 0 }, d = { 2, 3 }, g = 2 } },
  { { 2, 2, 11, 9 }, 3, { k = { 5, 5 }, s = { 3, 2 }, p = { 2, 1 }, d = { 1, 1 }, g = 1 } },
  -- the direct weight gradient a CTA an (out, in) pair (32 pairs or more; the cases above have
  -- fewer, a CTA a weight element), dilated and grouped too
  { { 2, 6, 21, 16 }, 6, { k = { 3, 3 }, s = { 2, 1 }, p = { 1, 1 }, d = { 1, 2 }, g = 1 } }, -- 308 terms a pair
  { { 1, 8, 6, 7 }, 8, { k = { 3, 2 }, s = { 1, 1 }, p = { 1, 0 }, d = { 1, 1 }, g = 2 } },
  -- a window of 72 taps: a CTA a weight element
  { { 1, 2, 10, 9 }, 3, { k = { 9, 8 }, s = { 1, 2 }, p = { 4, 3 }, d = { 1, 1 }, g = 1 } },
}

local function opts_of(o, dt, bias, layout, tf32)
  return { stride = o.s, padding = o.p, dilation = o.d, groups = o.g, dtype = dt, bias = bias, layout = layout, tf32 = tf32 }
end

-- Convolutions the tensor cores take in layout nhwc (halves, groups 1, channels multiples of
-- 8): several tiles of rows, tile widths 64, 128 and 256 with columns past the edge, k from one
-- slice of 64 to 19, windows whose slices cross window positions, stride, padding, dilation,
-- 1 x 1 windows (the weight read as it lies). dx runs there too where the flipped window's
-- padding is not negative (not the eighth case's 3 rows at dilation 1), over dy spread out by
-- the stride where it is strided, its k split in the ninth case; a strided 1 x 1 window's dx
-- (the fifth case and the last two) is dy's pixels times the weight spread out afterwards, its
-- last rows and columns off the stride's grid in the tenth, its k split in the last.
local TC_CASES = {
  { { 2, 16, 12, 12 }, 64, { k = { 3, 3 }, s = { 1, 1 }, p = { 1, 1 }, d = { 1, 1 }, g = 1 } },
  { { 1, 32, 9, 11 }, 136, { k = { 3, 3 }, s = { 2, 2 }, p = { 1, 1 }, d = { 1, 1 }, g = 1 } },
  { { 2, 64, 7, 6 }, 120, { k = { 1, 1 }, s = { 1, 1 }, p = { 0, 0 }, d = { 1, 1 }, g = 1 } },
  { { 1, 8, 13, 10 }, 24, { k = { 5, 3 }, s = { 2, 1 }, p = { 2, 1 }, d = { 1, 2 }, g = 1 } },
  { { 1, 16, 9, 9 }, 40, { k = { 1, 1 }, s = { 2, 2 }, p = { 0, 0 }, d = { 1, 1 }, g = 1 } },
  { { 1, 24, 8, 8 }, 272, { k = { 7, 7 }, s = { 2, 2 }, p = { 3, 3 }, d = { 1, 1 }, g = 1 } },
  { { 1, 16, 7, 9 }, 24, { k = { 3, 3 }, s = { 1, 1 }, p = { 2, 2 }, d = { 2, 2 }, g = 1 } },
  { { 1, 16, 6, 7 }, 24, { k = { 3, 3 }, s = { 1, 1 }, p = { 3, 1 }, d = { 1, 1 }, g = 1 } },
  { { 1, 32, 6, 6 }, 264, { k = { 3, 3 }, s = { 1, 1 }, p = { 1, 1 }, d = { 1, 1 }, g = 1 } },
  { { 2, 16, 8, 11 }, 32, { k = { 1, 1 }, s = { 2, 3 }, p = { 0, 0 }, d = { 1, 1 }, g = 1 } },
  { { 1, 16, 8, 8 }, 512, { k = { 1, 1 }, s = { 2, 2 }, p = { 0, 0 }, d = { 1, 1 }, g = 1 } },
}

-- a network's stem: 3 channels in, padded to 8 for the tensor cores' forward
local STEM = { { 2, 3, 11, 10 }, 32, { k = { 7, 7 }, s = { 2, 2 }, p = { 3, 3 }, d = { 1, 1 }, g = 1 } }

-- NCHW <-> NHWC, dense
local function to_nhwc(t) return t:permute(1, 3, 4, 2):contiguous() end
local function to_nchw(t) return t:permute(1, 4, 2, 3):contiguous() end

describe("tocha.Conv2d", function()
  -- Without a GPU, NVRTC and ptxas still build the kernels for the H200.
  it("builds its kernels for sm_90 without local memory, halves to f64", function()
    for _, dt in ipairs(ref.float_dtypes) do
      local conv = tocha.Conv2d.new(8, 16, 3, { stride = 2, padding = 1, groups = 2, dtype = dt })
      for _, k in ipairs({ conv.kernel, conv.grad_kernel, conv.weight_grad_kernel }) do
        local info = k:info("sm_90")
        assert.are.equal(0, info["local"], dt)
      end
    end
    -- the tensor cores' forward, at each tile width: wgmma from NHWC halves
    for _, o in ipairs({ 64, 128, 256 }) do
      local conv = tocha.Conv2d.new(64, o, 3, { padding = 1, dtype = "bf16", layout = "nhwc" })
      assert.are.equal(o, conv.igemm.tile_n)
      local info = conv.igemm.kernel:info("sm_90")
      assert.are.equal(0, info["local"], o)
      assert.is_truthy(conv.igemm.kernel:ptx("sm_90"):find("wgmma.mma_async", 1, true), o)
    end
    -- the depthwise kernels, their gradients' sums in registers for windows up to 7 x 7
    for _, c in ipairs({ { "bf16", 3 }, { "bf16", 7 }, { "f64", 7 } }) do
      local g = tocha.Conv2d.new(64, 64, c[2], { groups = 64, dtype = c[1], layout = "nhwc" }).depthwise
      for _, k in ipairs({ g.kernel, g.dx_kernel, g.partial_kernel, g.sum_kernel }) do
        assert.are.equal(0, k:info("sm_90")["local"], c[1] .. " " .. c[2])
      end
    end
    -- what the direct kernels keep: f64, groups, out channels not in 16-byte chunks
    for _, c in ipairs({ { 16, 16, { dtype = "f64", layout = "nhwc" } }, { 16, 16, { dtype = "f16", layout = "nhwc", groups = 2 } },
      { 16, 12, { dtype = "bf16" } }, { 16, 14, { dtype = "f32" } } }) do
      assert.is_nil(tocha.Conv2d.new(c[1], c[2], 3, c[3]).igemm)
    end
    -- the direct weight gradient's sums of a window in registers, up to 64 taps (f64 too), a CTA
    -- a channel pair; wider windows, and fewer than 32 pairs, a CTA a weight element
    for _, c in ipairs({ { "f64", 7, 64 }, { "f64", 8, 64 }, { "f32", 8, 64 }, { "bf16", 9, 64 }, { "f32", 7, 8 } }) do
      local k, out = c[2], c[3]
      local conv = tocha.Conv2d.new(3, out, k, { stride = 2, padding = 3, dtype = c[1] })
      assert.are.equal(0, conv.weight_grad_kernel:info("sm_90")["local"], c[1] .. " " .. k)
      local ctas = conv:backward_grid_for_launch(conv:n_backward_launches(), { { 2, 3, 32, 32 } })[1]
      assert.are.equal((k <= 8 and out * 3 >= 32) and out * 3 + out or out * 3 * k * k + out, ctas, c[1] .. " " .. k)
    end
    -- f32 in 4s: the f32 tiles' implicit GEMMs, forward, dx and dweight, two CTAs an SM (at 128
    -- registers a thread, as matmul's f32 tiles; what spills is set up outside the loop over k);
    -- tiles of 64 channels (the forward's and dx's columns, dweight's rows) up to 64 channels
    local f32 = tocha.Conv2d.new(12, 20, 3, { padding = 1, dtype = "f32" })
    assert.are.same({ 64, false, 128, 64 }, { f32.igemm.tile_n, f32.igemm.padded, f32.igemm_dw.tile_n, f32.igemm_dw.tile_m })
    local wide = tocha.Conv2d.new(96, 128, 3, { padding = 1, dtype = "f32" })
    assert.are.same({ 128, 128, 128, 128 }, { wide.igemm.tile_n, wide.igemm_dx.tile_n, wide.igemm_dw.tile_n, wide.igemm_dw.tile_m })
    for _, g in ipairs({ f32.igemm, f32.igemm_dx, f32.igemm_dw, wide.igemm, wide.igemm_dx, wide.igemm_dw }) do
      assert.is_true(g.kernel:info("sm_90").registers <= 128)
    end
    for _, g in ipairs({ f32.igemm, f32.igemm_dx, f32.igemm_dw }) do assert.are.equal(0, g.kernel:info("sm_90")["local"]) end
    -- tf32: the tensor cores' implicit GEMMs on f32 (wgmma's tf32 form), forward, dx, dweight
    local t = tocha.Conv2d.new(12, 20, 3, { padding = 1, tf32 = true })
    for _, g in ipairs({ t.igemm, t.igemm_dx, t.igemm_dw }) do
      assert.are.equal(0, g.kernel:info("sm_90")["local"])
      assert.truthy(g.kernel:ptx("sm_90"):find("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32", 1, true))
    end
    -- in channels not in 8s: the forward on the tensor cores over channels padded to 8s, dx and
    -- dweight direct
    local stem = tocha.Conv2d.new(3, 64, 7, { stride = 2, padding = 3, dtype = "f16" })
    assert.are.same({ true, 8, 7 * 7 * 8 }, { stem.igemm.padded, stem.igemm.channels, stem.igemm.k })
    assert.is_nil(stem.igemm_dx)
    assert.is_nil(stem.igemm_dw)
    assert.are.equal(0, stem.igemm.pad_kernel:info("sm_90")["local"])
  end)

  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      -- layout nhwc: the op runs on x and dy permuted to [N, H, W, C], its y and dx are
      -- permuted back for the reference
      -- tf32: the op made with tf32 = true, normal inputs checked within tf32's rounding (each
      -- operand's 13 low mantissa bits dropped: a product within 2^-9 of its size) in y, dx and
      -- dweight
      local function run(dt, case, bias, ints, seed, layout, tf32)
        local s, co, o = case[1], case[2], case[3]
        local conv = tocha.Conv2d.new(s[2], co, o.k, opts_of(o, dt, bias, layout, tf32))
        local nhwc = layout == "nhwc"
        local make = ints and small_ints or function(sh, d, dv, sd) return tocha.randn(sh, { dtype = d, device = dv, seed = sd }) end
        local x = make(s, dt, device, seed)
        local w = make({ co, s[2] / o.g, o.k[1], o.k[2] }, dt, device, seed + 1)
        local b = bias and make({ co }, dt, device, seed + 2) or nil
        local xl = nhwc and to_nhwc(x) or x
        local y = b and conv:forward(xl, w, b) or conv:forward(xl, w)
        if nhwc then y = to_nchw(y) end
        local dy = make(y:shape(), dt, device, seed + 3)
        local want, out_shape = reference(values(x), values(w), b and values(b), values(dy), s[1], s[2], s[3], s[4], co, o)
        assert.are.same(out_shape, y:shape())
        local dyl = nhwc and to_nhwc(dy) or dy
        local dx, dw, db
        if b then dx, dw, db = conv:backward(xl, w, b, dyl) else dx, dw = conv:backward(xl, w, dyl) end
        if nhwc then dx = to_nchw(dx) end
        local tol = ints and 0 or TOL[dt]
        if ints then -- sums of small integers are exact in the accumulators: one rounding to dt
          for _, r in pairs(want) do
            for e = 1, #r[1] do r[1][e] = ref.convert(r[1][e], dt) end
          end
        end
        local label = ("%s%s %s k %dx%d s %d,%d p %d,%d d %d,%d g %d"):format(dt, nhwc and " nhwc" or "", table.concat(s, "x"), o.k[1], o.k[2], o.s[1],
          o.s[2], o.p[1], o.p[2], o.d[1], o.d[2], o.g)
        local tf32_tol = tf32 and not ints and 2 ^ -9 or tol
        compare(y, want.y, tf32_tol, label .. " y")
        compare(dx, want.dx, tf32_tol, label .. " dx")
        compare(dw, want.dw, tf32_tol, label .. " dweight")
        if b then compare(db, want.db, tol, label .. " dbias") else assert.is_nil(db) end
        return conv
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
        for _, dt in ipairs({ "f32", "bf16" }) do
          for _, case in ipairs(CASES) do
            seed = seed + 10
            run(dt, case, seed % 20 == 0, true, seed, "nhwc")
          end
        end
        for i = 2, #CASES, 2 do
          seed = seed + 10
          run("f16", CASES[i], true, false, seed, "nhwc")
        end
      end)

      it("runs halves on the tensor cores (implicit GEMM), both layouts: exact on small integers, every window option",
        function()
          local seed = 1300
          for _, layout in ipairs({ "nhwc", "nchw" }) do
            for i, case in ipairs(TC_CASES) do
              seed = seed + 10
              local conv = run(i % 2 == 0 and "f16" or "bf16", case, i ~= 3, true, seed, layout)
              assert.is_truthy(conv.igemm, "the tensor cores' forward")
              local s = case[1]
              local _, splits = conv:igemm_split(layout == "nhwc" and { s[1], s[3], s[4], s[2] } or s)
              -- the sixth case's two tiles split its 19 slices of k four ways (sums in f32 slabs)
              assert.are.equal(i == 6 and 4 or 1, splits, "splits of k")
              assert.are.equal(i ~= 8, conv.igemm_dx ~= nil, "dx")
              assert.is_truthy(conv.igemm_dw, "dweight")
              local dx_split = conv.igemm_dx and { conv:igemm_split(layout == "nhwc" and { s[1], s[3], s[4], s[2] } or s, true) }
              if i == 9 then -- dx: 38 slices of k (9 x 264 channels) into one tile, 8 ways
                assert.are.same({ 1, 8 }, dx_split)
              elseif i == 11 then -- dx: dy's 16 pixels by 8 slices of k (512 channels), 2 ways
                assert.are.same({ 1, 2 }, dx_split)
              end
              if conv.igemm_dx then
                assert.are.equal(i == 5 or i >= 10, conv.igemm_dx.scatter == true, "a strided 1 x 1 dx spread afterwards")
              end
            end
          end
        end)

      -- In channels not in 8s (a stem's 3): the forward pads them with zeros to the next 8 in
      -- x's NHWC copy and the relaid weight (1 x 1 windows relaid too); dx and dweight direct.
      it("runs a forward whose in channels are not in 8s on the tensor cores, padded: exact, both layouts", function()
        local cases = {
          { { 2, 3, 17, 19 }, 64, { k = { 7, 7 }, s = { 2, 2 }, p = { 3, 3 }, d = { 1, 1 }, g = 1 } },
          { { 1, 5, 9, 9 }, 16, { k = { 3, 3 }, s = { 1, 1 }, p = { 2, 2 }, d = { 2, 2 }, g = 1 } },
          { { 2, 12, 6, 7 }, 24, { k = { 1, 1 }, s = { 1, 1 }, p = { 0, 0 }, d = { 1, 1 }, g = 1 } },
          { { 1, 1, 8, 8 }, 8, { k = { 3, 3 }, s = { 2, 1 }, p = { 1, 0 }, d = { 1, 1 }, g = 1 } },
        }
        local seed = 1350
        for _, layout in ipairs({ "nchw", "nhwc" }) do
          for i, case in ipairs(cases) do
            seed = seed + 10
            local conv = run(i % 2 == 0 and "f16" or "bf16", case, i ~= 3, true, seed, layout)
            assert.is_true(conv.igemm.padded, "padded forward")
            assert.are.equal(math.ceil(case[1][2] / 8) * 8, conv.igemm.channels)
            assert.is_nil(conv.igemm_dx)
            assert.is_nil(conv.igemm_dw)
          end
        end
      end)

      -- f32 of channels in 4s: the same implicit GEMMs on f32 tiles (tocha_conv2d_f32,
      -- tocha_conv2d_f32_dw), forward, dx and dweight, k split where the tiles are few; in channels
      -- not in 4s padded for the forward.
      it("runs f32 in channels of 4s as an implicit GEMM on f32 tiles: exact on small integers, both layouts", function()
        local cases = { TC_CASES[1], TC_CASES[2], TC_CASES[3], TC_CASES[6], TC_CASES[8], STEM,
          { { 1, 12, 7, 9 }, 20, { k = { 3, 3 }, s = { 2, 1 }, p = { 1, 2 }, d = { 1, 2 }, g = 1 } }, TC_CASES[10] }
        local seed = 1370
        for _, layout in ipairs({ "nchw", "nhwc" }) do
          for i, case in ipairs(cases) do
            seed = seed + 10
            local conv = run("f32", case, i ~= 3, true, seed, layout)
            assert.is_truthy(conv.igemm, "the f32 tiles' forward")
            assert.are.equal(case == STEM, conv.igemm.padded)
            assert.are.equal(case ~= STEM and case ~= TC_CASES[8], conv.igemm_dx ~= nil, "dx")
            assert.are.equal(case ~= STEM, conv.igemm_dw ~= nil, "dweight")
            if case == TC_CASES[6] then
              assert.are.equal(4, select(2, conv:igemm_split(layout == "nhwc" and { 1, 8, 8, 24 } or { 1, 24, 8, 8 })), "k split")
            end
          end
        end
        seed = seed + 10
        run("f32", TC_CASES[9], true, false, seed, "nchw") -- normal inputs: within f32's rounding
      end)

      -- tf32 (the opt-in): f32 on the tensor cores' implicit GEMMs, the forward and dx (the weight
      -- relaid K-major, 1 x 1 windows' forward weight read as it lies) and dweight (dy and the
      -- patches transposed into the stages), the stem padded to 4 channels, k split, dx of a
      -- strided convolution; exact on small integers (tf32 holds them), within tf32's rounding
      -- on normal inputs and not f32's result there. PyTorch's switch
      -- (tocha.set_float32_matmul_precision) sets the default.
      it("reads f32 as tf32 on the tensor cores where asked, forward, dx and dweight, both layouts", function()
        local cases = { TC_CASES[1], TC_CASES[2], TC_CASES[3], TC_CASES[5], TC_CASES[6], STEM,
          { { 1, 12, 7, 9 }, 20, { k = { 3, 3 }, s = { 2, 1 }, p = { 1, 2 }, d = { 1, 2 }, g = 1 } } }
        local seed = 1600
        for _, layout in ipairs({ "nhwc", "nchw" }) do
          for i, case in ipairs(cases) do
            seed = seed + 10
            local conv = run("f32", case, i ~= 3, true, seed, layout, true)
            assert.is_true(conv.tf32 and conv.igemm.tf32, "tf32 forward")
            assert.are.equal("tocha_conv2d_igemm", conv.igemm.kernel.name)
            assert.are.equal(case == STEM, conv.igemm.padded)
            if conv.igemm_dx then assert.is_true(conv.igemm_dx.tf32, "tf32 dx") end
            if conv.igemm_dw then
              assert.is_true(conv.igemm_dw.tf32, "tf32 dweight")
              assert.are.equal("tocha_conv2d_igemm_dw", conv.igemm_dw.kernel.name)
            end
            if case == TC_CASES[6] then -- 37 slices of 32 (f32's 128 bytes) over 3 tiles, 8 ways
              assert.are.equal(8, select(2, conv:igemm_split(layout == "nhwc" and { 1, 8, 8, 24 } or { 1, 24, 8, 8 })), "k split")
            end
          end
        end
        for i, case in ipairs({ TC_CASES[2], TC_CASES[3], cases[7] }) do
          seed = seed + 10
          local layout = i == 2 and "nchw" or "nhwc"
          run("f32", case, true, false, seed, layout, true)
          -- not f32's result: the tensor cores read tf32
          local s, co, o = case[1], case[2], case[3]
          local x = tocha.randn(layout == "nhwc" and { s[1], s[3], s[4], s[2] } or s, { device = device, seed = seed })
          local w = tocha.randn({ co, s[2], o.k[1], o.k[2] }, { device = device, seed = seed + 1 })
          local tf = tocha.Conv2d.new(s[2], co, o.k, opts_of(o, "f32", false, layout, true))
          local plain = tocha.Conv2d.new(s[2], co, o.k, opts_of(o, "f32", false, layout, false))
          local a, b = tf:forward(x, w), plain:forward(x, w)
          assert.is_false(tocha.allclose(a, b, 0, 0), "tf32 gave f32's result")
          local dy = tocha.randn(a:shape(), { device = device, seed = seed + 2 })
          local ta, tb = { tf:backward(x, w, dy) }, { plain:backward(x, w, dy) }
          assert.is_false(tocha.allclose(ta[2], tb[2], 0, 0), "tf32's dweight is f32's")
        end
        local old = tocha.set_float32_matmul_precision("high")
        local ok, conv = pcall(tocha.Conv2d.new, 8, 8, 3)
        tocha.set_float32_matmul_precision(old)
        assert.is_true(ok, tostring(conv))
        assert.is_true(conv.tf32)
        assert.is_false(tocha.Conv2d.new(8, 8, 3).tf32)
        assert.is_false(tocha.Conv2d.new(8, 8, 3, { dtype = "bf16", tf32 = true }).tf32, "halves are not tf32")
        fails("tf32: expected a boolean, got number", tocha.Conv2d.new, 8, 8, 3, { tf32 = 1 })
      end)

      it("runs halves on the tensor cores within the dtype's rounding on normal inputs, both layouts", function()
        local seed = 1400
        for i = 1, #TC_CASES, 2 do
          seed = seed + 10
          run(i % 4 == 1 and "bf16" or "f16", TC_CASES[i], true, false, seed, i == 3 and "nchw" or "nhwc")
        end
      end)

      -- Depthwise convolutions (groups = in = out) take ops/conv2d_depthwise.lua's kernels:
      -- the forward and dx in layout nhwc (16-byte vectors of channels where the channels are a
      -- multiple of them, else one a thread), the weight and bias gradients in both layouts.
      it("runs depthwise convolutions on their own kernels, every float dtype, both layouts", function()
        local seed = 1700
        local cases = {
          { { 2, 16, 9, 8 }, 16, { k = { 3, 3 }, s = { 1, 1 }, p = { 1, 1 }, d = { 1, 1 }, g = 16 } },
          { { 1, 24, 11, 10 }, 24, { k = { 3, 3 }, s = { 2, 2 }, p = { 1, 1 }, d = { 1, 1 }, g = 24 } },
          { { 1, 8, 12, 9 }, 8, { k = { 5, 5 }, s = { 1, 2 }, p = { 4, 2 }, d = { 2, 1 }, g = 8 } },
          { { 2, 32, 8, 8 }, 32, { k = { 7, 7 }, s = { 1, 1 }, p = { 3, 3 }, d = { 1, 1 }, g = 32 } },
          { { 1, 12, 7, 6 }, 12, { k = { 3, 2 }, s = { 2, 1 }, p = { 0, 1 }, d = { 1, 2 }, g = 12 } },
        }
        for i, case in ipairs(cases) do
          for _, dt in ipairs(ref.float_dtypes) do
            for _, layout in ipairs({ "nhwc", "nchw" }) do
              seed = seed + 10
              local conv = run(dt, case, (seed / 10) % 2 == 0, true, seed, layout)
              assert.is_truthy(conv.depthwise, "the depthwise kernels")
              if layout == "nhwc" and dt == "bf16" then -- 8 channels a thread where they come in 8s
                assert.are.equal(case[1][2] % 8 == 0 and 8 or 1, conv.depthwise.v)
              end
            end
          end
          seed = seed + 10
          run(i % 2 == 0 and "f16" or "f32", case, true, false, seed, i % 2 == 0 and "nhwc" or "nchw")
        end
        -- a multiplier above 1 (out = 2 in) keeps the direct kernels
        assert.is_nil(tocha.Conv2d.new(8, 16, 3, { groups = 8 }).depthwise)
      end)

      -- NCHW's transposes take the images along grid.z, striding past its 65535.
      it("runs the tensor cores on more than 65535 images in layout nchw", function()
        local n = 65537
        local conv = tocha.Conv2d.new(8, 8, 1, { dtype = "bf16", bias = false })
        local x, w = small_ints({ n, 8, 1, 1 }, "bf16", device, 70), small_ints({ 8, 8, 1, 1 }, "bf16", device, 71)
        local dy = small_ints({ n, 8, 1, 1 }, "bf16", device, 72)
        local y = conv:forward(x, w)
        local dx, dw = conv:backward(x, w, dy)
        local x2, w2, dy2 = x:view(n, 8), w:view(8, 8), dy:view(n, 8)
        assert.tensor.equal(tocha.matmul(x2, w2:t()), y:view(n, 8))
        assert.tensor.equal(tocha.matmul(dy2, w2), dx:view(n, 8))
        assert.tensor.equal(tocha.matmul(dy2:t(), x2), dw:view(8, 8))
      end)

      -- The fused epilogue: y = F(conv + bias [+ residual]) against F of the reference's sums,
      -- and the backward against the reference's gradients of dz = dy F'(z); each bound scaled
      -- by what an error in z moves (|F'| and |F''| stay below 1.2 for these functions).
      local function run_epilogue(dt, case, act, residual, ints, seed, layout)
        local s, co, o = case[1], case[2], case[3]
        local opts = opts_of(o, dt, true, layout)
        opts.activation, opts.residual = act, residual
        local conv = tocha.Conv2d.new(s[2], co, o.k, opts)
        local nhwc = layout == "nhwc"
        local make = ints and small_ints or function(sh, d, dv, sd) return tocha.randn(sh, { dtype = d, device = dv, seed = sd }) end
        local x, w, b = make(s, dt, device, seed), make({ co, s[2] / o.g, o.k[1], o.k[2] }, dt, device, seed + 1),
          make({ co }, dt, device, seed + 2)
        local xv, wv, bv = values(x), values(w), values(b)
        local zero = {}
        local base, out_shape = reference(xv, wv, bv, setmetatable(zero, { __index = function() return 0 end }), s[1], s[2],
          s[3], s[4], co, o)
        local r = residual and make(out_shape, dt, device, seed + 3) or nil
        local dy = make(out_shape, dt, device, seed + 4)
        local rv, dyv = r and values(r) or nil, values(dy)
        local f, df = activations[act][1], activations[act][2]
        local y_want, y_sums, dz, dz_bound, dz_sums = {}, {}, {}, {}, {}
        for e = 1, #base.y[1] do
          local z, zs = base.y[1][e] + (rv and rv[e] or 0), base.y[2][e] + (rv and math.abs(rv[e]) or 0)
          y_want[e], y_sums[e] = f(z), 1.2 * zs + math.abs(f(z)) + 1e-30
          dz[e], dz_bound[e] = dyv[e] * df(z), math.abs(dyv[e]) * (1.2 * zs + math.abs(df(z)))
          dz_sums[e] = dz_bound[e] + 1e-30
        end
        local want = reference(xv, wv, bv, dz, s[1], s[2], s[3], s[4], co, o)
        local bound = reference(xv, wv, bv, dz_bound, s[1], s[2], s[3], s[4], co, o)
        local tol = TOL[dt]
        if ints then -- relu and identity of small integers: exact sums, one rounding each
          tol = 0
          for e = 1, #y_want do y_want[e], dz[e] = ref.convert(y_want[e], dt), ref.convert(dz[e], dt) end
          for _, k in ipairs({ "dx", "dw", "db" }) do
            for e = 1, #want[k][1] do want[k][1][e] = ref.convert(want[k][1][e], dt) end
          end
        end
        local function layout_of(t) return nhwc and to_nhwc(t) or t end
        local function back(t) return nhwc and to_nchw(t) or t end
        local xl, rl, dyl = layout_of(x), r and layout_of(r), layout_of(dy)
        local y = back(r and conv:forward(xl, rl, w, b) or conv:forward(xl, w, b))
        local label = ("%s%s %s k %dx%d %s%s"):format(dt, nhwc and " nhwc" or "", table.concat(s, "x"), o.k[1], o.k[2], act,
          residual and " + residual" or "")
        compare(y, { y_want, y_sums }, tol, label .. " y")
        local dx, dr, dw, db
        if r then dx, dr, dw, db = conv:backward(xl, rl, w, b, dyl) else dx, dw, db = conv:backward(xl, w, b, dyl) end
        compare(back(dx), { want.dx[1], bound.dx[2] }, tol, label .. " dx")
        compare(dw, { want.dw[1], bound.dw[2] }, tol, label .. " dweight")
        compare(db, { want.db[1], bound.db[2] }, tol, label .. " dbias")
        if r then compare(back(dr), { dz, dz_sums }, tol, label .. " d residual") end
        return conv
      end

      it("fuses an activation and a residual into the forward, and differentiates through them", function()
        local seed = 1500
        -- the direct kernels: every function, with and without a residual, both layouts
        for i, act in ipairs({ "identity", "relu", "sigmoid", "tanh", "silu", "gelu", "hardsigmoid", "hardswish", "relu6",
          "selu", "softplus", "mish", "gelu_tanh" }) do
          seed = seed + 10
          run_epilogue("f64", CASES[5], act, i % 2 == 1, false, seed, i % 3 == 0 and "nhwc" or "nchw")
        end
        run_epilogue("f32", CASES[2], "silu", true, false, seed + 10, "nhwc")
        run_epilogue("f16", CASES[1], "relu", true, true, seed + 20, "nchw")
        local dw = { { 2, 16, 7, 6 }, 16, { k = { 3, 3 }, s = { 2, 1 }, p = { 1, 1 }, d = { 1, 1 }, g = 16 } }
        run_epilogue("bf16", dw, "silu", true, false, seed + 30, "nhwc")
        run_epilogue("f32", dw, "gelu", false, false, seed + 40, "nhwc")
        -- the tensor cores: y written by the GEMM, by the split-k sum (the sixth case) or, NCHW,
        -- by the transpose; the backward's recompute through the same launches
        local tc = {
          { "bf16", 1, "relu", true, true, "nhwc" }, { "f16", 6, "silu", false, false, "nchw" },
          { "bf16", 6, "gelu", true, false, "nhwc" }, { "bf16", 3, "identity", true, true, "nchw" },
          { "f16", 3, "tanh", false, false, "nhwc" }, { "bf16", 1, "mish", false, false, "nhwc" },
          -- a stem's 3 channels, padded
          { "f16", STEM, "silu", false, false, "nchw" }, { "bf16", STEM, "relu", true, true, "nhwc" },
          -- a strided 1 x 1 window: dx of dz spread out after its GEMM, past dz in the workspace
          { "bf16", 10, "silu", true, false, "nhwc" }, { "f16", 11, "relu", true, true, "nchw" },
        }
        for _, c in ipairs(tc) do
          seed = seed + 10
          local conv = run_epilogue(c[1], type(c[2]) == "table" and c[2] or TC_CASES[c[2]], c[3], c[4], c[5], seed, c[6])
          assert.is_truthy(conv.igemm, "the tensor cores' forward")
        end
      end)

      -- The epilogue sees the f32 sums in either layout (NCHW's keeps them in slabs for it):
      -- the two layouts give the same bits, forward and backward, split or not.
      it("gives the same bits through the epilogue in both layouts on the tensor cores", function()
        for i, c in ipairs({ { 16, 16, 1, 0, "gelu", false }, { 32, 24, 3, 1, "silu", true }, { 256, 16, 3, 1, "tanh", true } }) do
          local cin, cout, k, p, act, residual = c[1], c[2], c[3], c[4], c[5], c[6]
          local h = i == 3 and 2 or 5
          local x = tocha.randn({ 2, cin, h, h }, { dtype = "bf16", device = device, seed = 80 + i })
          local w = tocha.randn({ cout, cin, k, k }, { dtype = "bf16", device = device, seed = 90 + i }):mul(0.2)
          local b = tocha.randn({ cout }, { dtype = "bf16", device = device, seed = 100 + i })
          local r = tocha.randn({ 2, cout, h, h }, { dtype = "bf16", device = device, seed = 110 + i })
          local dy = tocha.randn({ 2, cout, h, h }, { dtype = "bf16", device = device, seed = 120 + i })
          local out = {}
          for _, layout in ipairs({ "nchw", "nhwc" }) do
            local conv = tocha.Conv2d.new(cin, cout, k, { padding = p, dtype = "bf16", layout = layout, activation = act,
              residual = residual })
            assert.is_truthy(conv.igemm)
            local function l(t) return layout == "nhwc" and to_nhwc(t) or t end
            local function back(t) return layout == "nhwc" and to_nchw(t) or t end
            local y = residual and conv:forward(l(x), l(r), w, b) or conv:forward(l(x), w, b)
            local g
            if residual then g = { conv:backward(l(x), l(r), w, b, l(dy)) } else g = { conv:backward(l(x), w, b, l(dy)) } end
            out[layout] = { back(y), back(g[1]), residual and back(g[2]) or nil, g[#g - 1], g[#g] }
            if i == 3 then assert.is_true(select(2, conv:igemm_split(l(x):shape())) > 1, "k split") end
          end
          for j = 1, 5 do
            if out.nchw[j] then assert.tensor.equal(out.nhwc[j], out.nchw[j], ("case %d result %d"):format(i, j)) end
          end
        end
      end)

      it("joins a model with its residual input: relu(conv(relu(conv(x))) + x)", function()
        local x = tocha.Model.input({ -1, 4, 6, 6 }, { name = "x", dtype = "f64" })
        local c1 = tocha.Conv2d.new(4, 4, 3, { padding = 1, dtype = "f64", activation = "relu" })
        local c2 = tocha.Conv2d.new(4, 4, 3, { padding = 1, dtype = "f64", activation = "relu", residual = true })
        local m = tocha.Model({ x }, { c2(c1(x):named("c1"), x):named("c2") }):load(2, device)
        local p = m:parameters()
        for i, name in ipairs({ "c1.weight", "c1.bias", "c2.weight", "c2.bias" }) do
          p[name]:copy(tocha.randn(p[name]:shape(), { dtype = "f64", device = device, seed = 60 + i }))
        end
        local xt = tocha.randn({ 2, 4, 6, 6 }, { dtype = "f64", device = device, seed = 65 })
        local h = c1:forward(xt, p["c1.weight"], p["c1.bias"])
        local y = c2:forward(h, xt, p["c2.weight"], p["c2.bias"])
        assert.tensor.equal(y, m:forward({ xt })[1])
        local _, cache = m:forward_train({ xt })
        local dy = tocha.randn(y:shape(), { dtype = "f64", device = device, seed = 66 })
        local grads, param_grads = m:backward({ dy }, cache)
        local dh, dr, dw2, db2 = c2:backward(h, xt, p["c2.weight"], p["c2.bias"], dy)
        local dx, dw1, db1 = c1:backward(xt, p["c1.weight"], p["c1.bias"], dh)
        assert.tensor.equal(dx:add(dr), grads[1])
        for name, g in pairs({ ["c1.weight"] = dw1, ["c1.bias"] = db1, ["c2.weight"] = dw2, ["c2.bias"] = db2 }) do
          assert.tensor.equal(g, param_grads[name], name)
        end
      end)

      it("matches central differences in f64 (tocha.gradcheck), through x and through the weight", function()
        local conv = tocha.Conv2d.new(3, 4, 3, { stride = 2, padding = 1, dtype = "f64" })
        local w = tocha.randn({ 4, 3, 3, 3 }, { dtype = "f64", device = device, seed = 1 })
        local b = tocha.randn({ 4 }, { dtype = "f64", device = device, seed = 2 })
        local x = tocha.randn({ 2, 3, 5, 6 }, { dtype = "f64", device = device, seed = 3 })
        local through_x = { forward = function(_, v) return conv:forward(v, w, b) end,
          backward = function(_, v, dy) return (conv:backward(v, w, b, dy)) end }
        local ok, report = tocha.gradcheck(through_x, x, { seed = 4 })
        assert(ok, ("max abs error %g"):format(report.max_abs))
        local through_w = { forward = function(_, v) return conv:forward(x, v, b) end,
          backward = function(_, v, dy) return select(2, conv:backward(x, v, b, dy)) end }
        ok, report = tocha.gradcheck(through_w, w, { seed = 5 })
        assert(ok, ("max abs error %g"):format(report.max_abs))
      end)

      it("runs in a model: conv, relu, depthwise conv, as the ops' own calls", function()
        local x = tocha.Model.input({ -1, 3, 6, 6 }, { name = "x", dtype = "f64" })
        local c1 = tocha.Conv2d.new(3, 4, 3, { padding = 1, dtype = "f64" })
        local act = tocha.Elementwise.new("relu", "f64")
        local c2 = tocha.Conv2d.new(4, 4, 3, { stride = 2, groups = 4, bias = false, dtype = "f64" })
        local m = tocha.Model({ x }, { c2(act(c1(x):named("c1"))):named("c2") }):load(2, device)
        local p = m:parameters()
        p["c1.weight"]:copy(tocha.randn({ 4, 3, 3, 3 }, { dtype = "f64", device = device, seed = 30 }))
        p["c1.bias"]:copy(tocha.randn({ 4 }, { dtype = "f64", device = device, seed = 31 }))
        p["c2.weight"]:copy(tocha.randn({ 4, 1, 3, 3 }, { dtype = "f64", device = device, seed = 32 }))
        local xt = tocha.randn({ 2, 3, 6, 6 }, { dtype = "f64", device = device, seed = 33 })
        local h = c1:forward(xt, p["c1.weight"], p["c1.bias"])
        local r = act:forward(h)
        local y = c2:forward(r, p["c2.weight"])
        assert.tensor.equal(y, m:forward({ xt })[1])
        local _, cache = m:forward_train({ xt })
        local dy = tocha.randn(y:shape(), { dtype = "f64", device = device, seed = 34 })
        local grads, param_grads = m:backward({ dy }, cache)
        local dr, dw2 = c2:backward(r, p["c2.weight"], dy)
        local dx, dw1, db1 = c1:backward(xt, p["c1.weight"], p["c1.bias"], act:backward(h, dr))
        assert.tensor.equal(dx, grads[1])
        assert.tensor.equal(dw1, param_grads["c1.weight"])
        assert.tensor.equal(db1, param_grads["c1.bias"])
        assert.tensor.equal(dw2, param_grads["c2.weight"])
      end)

      it("runs its tensor cores' forward and backward in a model, in the model's workspace, both layouts", function()
        for _, layout in ipairs({ "nhwc", "nchw" }) do
          local shape = layout == "nhwc" and { 2, 6, 6, 16 } or { 2, 16, 6, 6 }
          local x = tocha.Model.input({ -1, shape[2], shape[3], shape[4] }, { name = "x", dtype = "bf16" })
          local c1 = tocha.Conv2d.new(16, 32, 3, { padding = 1, dtype = "bf16", layout = layout })
          local c2 = tocha.Conv2d.new(32, 8, 1, { bias = false, dtype = "bf16", layout = layout })
          assert.is_truthy(c1.igemm and c2.igemm)
          local m = tocha.Model({ x }, { c2(c1(x):named("c1")):named("c2") }):load(2, device)
          local p = m:parameters()
          p["c1.weight"]:copy(small_ints({ 32, 16, 3, 3 }, "bf16", device, 40))
          p["c1.bias"]:copy(small_ints({ 32 }, "bf16", device, 41))
          p["c2.weight"]:copy(small_ints({ 8, 32, 1, 1 }, "bf16", device, 42))
          local xt = small_ints(shape, "bf16", device, 43)
          local h = c1:forward(xt, p["c1.weight"], p["c1.bias"])
          local y = c2:forward(h, p["c2.weight"])
          assert.tensor.equal(y, m:forward({ xt })[1])
          -- the backward, its workspace the model's too
          local _, cache = m:forward_train({ xt })
          local dy = small_ints(y:shape(), "bf16", device, 44)
          local grads, param_grads = m:backward({ dy }, cache)
          local dh, dw2 = c2:backward(h, p["c2.weight"], dy)
          local dx, dw1, db1 = c1:backward(xt, p["c1.weight"], p["c1.bias"], dh)
          assert.tensor.equal(dx, grads[1])
          assert.tensor.equal(dw1, param_grads["c1.weight"])
          assert.tensor.equal(db1, param_grads["c1.bias"])
          assert.tensor.equal(dw2, param_grads["c2.weight"])
        end
      end)

      it("refuses bad arguments, naming them, and goes on", function()
        fails("kernel_size: expected integers of at least 1, got 0", tocha.Conv2d.new, 3, 4, 0)
        fails("groups: expected a positive divisor of in_channels (3) and out_channels (4), got 2", tocha.Conv2d.new, 3, 4, 3,
          { groups = 2 })
        fails("stride: expected a number or {h, w}", tocha.Conv2d.new, 3, 4, 3, { stride = { 1, 2, 3 } })
        fails("unknown option of Conv2d", tocha.Conv2d.new, 3, 4, 3, { pad = 1 })
        local conv = tocha.Conv2d.new(3, 4, 3)
        local w, b = tocha.zeros({ 4, 3, 3, 3 }, { device = device }), tocha.zeros({ 4 }, { device = device })
        fails("x: expected 3 channels (in_channels), got 2", conv.forward, conv, tocha.zeros({ 1, 2, 5, 5 }, { device = device }),
          w, b)
        fails("x: height 2 with padding 0 is smaller than the dilated kernel (3)", conv.forward, conv,
          tocha.zeros({ 1, 3, 2, 5 }, { device = device }), w, b)
        fails("x: expected [N, C, H, W], got 3 dimensions", conv.forward, conv, tocha.zeros({ 3, 5, 5 }, { device = device }), w, b)
        fails('layout: expected "nchw" or "nhwc", got "nhcw"', tocha.Conv2d.new, 3, 4, 3, { layout = "nhcw" })
        -- the tensor cores' 16-byte chunks: a view 2 bytes past an aligned start is refused
        local tc = tocha.Conv2d.new(16, 16, 3, { padding = 1, dtype = "bf16", layout = "nhwc" })
        local w16, b16 = tocha.zeros({ 16, 16, 3, 3 }, { dtype = "bf16", device = device }),
          tocha.zeros({ 16 }, { dtype = "bf16", device = device })
        local odd = tocha.zeros({ 257 }, { dtype = "bf16", device = device }):narrow(1, 2, 256):view(1, 4, 4, 16)
        fails("x: the op's kernels read it in 16-byte chunks", tc.forward, tc, odd, w16, b16)
        fails("x: the op's kernels read it in 16-byte chunks", tc.backward, tc, odd, w16, b16,
          tocha.zeros({ 1, 4, 4, 16 }, { dtype = "bf16", device = device }))
        local nhwc = tocha.Conv2d.new(3, 4, 3, { layout = "nhwc" })
        fails("x: expected 3 channels (in_channels), got 5", nhwc.forward, nhwc, tocha.zeros({ 1, 3, 5, 5 }, { device = device }),
          w, b)
        fails("x: expected [N, H, W, C], got 3 dimensions", nhwc.forward, nhwc, tocha.zeros({ 5, 5, 3 }, { device = device }), w,
          b)
        assert.are.same({ 1, 3, 3, 4 }, nhwc:forward(tocha.zeros({ 1, 5, 5, 3 }, { device = device }), w, b):shape())
        assert.are.same({ 1, 4, 3, 3 }, conv:forward(tocha.zeros({ 1, 3, 5, 5 }, { device = device }), w, b):shape())
      end)
    end)
  end
end)
