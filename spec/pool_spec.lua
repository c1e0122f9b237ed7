-- tocha.MaxPool2d, AvgPool2d and AdaptiveAvgPool2d: forward and backward on random NCHW shapes
-- with every option (kernel, stride, padding, dilation, ceil mode, count_include_pad, adaptive
-- sizes that do not divide), every element checked against a reference written here from
-- PyTorch's documented definitions (output sizes, windows, divisors, the element max pooling
-- takes); each mapping the host picks on shapes that take it (max pooling's backward by tiles of
-- windows, with halos, gaps, ties and NaNs, and the walk where a tile would not fit; adaptive
-- pooling to 1 x 1 and through windows that do not overlap, dx at any alignment), every dtype;
-- in a model beside its direct calls; bad options. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
local pool = require "tocha.ops.pool"
local ref = require "support.reference"

local fails = require("support.assertions").fails

-- PyTorch's output size of a windowed pool.
local function out_size(n, k, s, p, d, ceil)
  local o = math.floor((n + 2 * p - d * (k - 1) - 1 + (ceil and s - 1 or 0)) / s) + 1
  if ceil and (o - 1) * s >= n + p then o = o - 1 end
  return o
end

-- The reference: y and dx (flat lists) of pooling x (flat, NCHW shape) with dy (flat), and
-- the sums of the magnitudes of each dx and each y element's terms (their rounding scales: a
-- kernel may add the terms in another order than this reference does).
local function pool_ref(mode, o, xv, shape, dyv)
  local B, C, H, W = shape[1], shape[2], shape[3], shape[4]
  local OH, OW
  if mode == "adaptive" then OH, OW = o.output_size[1], o.output_size[2]
  else
    OH = out_size(H, o.k[1], o.s[1], o.p[1], o.d[1], o.ceil)
    OW = out_size(W, o.k[2], o.s[2], o.p[2], o.d[2], o.ceil)
  end
  local y, dx, dxabs, yabs = {}, {}, {}, {}
  for i = 1, #xv do dx[i], dxabs[i] = 0, 0 end
  local function at(b, c, h, w) return ((b * C + c) * H + h) * W + w + 1 end
  local e = 0
  for b = 0, B - 1 do for c = 0, C - 1 do for oh = 0, OH - 1 do for ow = 0, OW - 1 do
    e = e + 1
    local members, divisor = {}, 0
    if mode == "adaptive" then
      local h0, h1 = math.floor(oh * H / OH), math.ceil((oh + 1) * H / OH)
      local w0, w1 = math.floor(ow * W / OW), math.ceil((ow + 1) * W / OW)
      for h = h0, h1 - 1 do for w = w0, w1 - 1 do members[#members + 1] = at(b, c, h, w) end end
      divisor = #members
    elseif mode == "avg" then
      local h0, w0 = oh * o.s[1] - o.p[1], ow * o.s[2] - o.p[2]
      local h1, w1 = math.min(h0 + o.k[1], H + o.p[1]), math.min(w0 + o.k[2], W + o.p[2])
      local padded = (h1 - h0) * (w1 - w0)
      for h = math.max(h0, 0), math.min(h1, H) - 1 do
        for w = math.max(w0, 0), math.min(w1, W) - 1 do members[#members + 1] = at(b, c, h, w) end
      end
      divisor = o.count_include_pad and padded or #members
    else
      for kh = 0, o.k[1] - 1 do
        local h = oh * o.s[1] - o.p[1] + kh * o.d[1]
        if h >= 0 and h < H then
          for kw = 0, o.k[2] - 1 do
            local w = ow * o.s[2] - o.p[2] + kw * o.d[2]
            if w >= 0 and w < W then members[#members + 1] = at(b, c, h, w) end
          end
        end
      end
    end
    if mode == "max" then
      local best
      for _, i in ipairs(members) do
        if not best or xv[i] > xv[best] or xv[i] ~= xv[i] then best = i end
      end
      y[e], yabs[e] = xv[best], 0
      dx[best] = dx[best] + dyv[e]
      dxabs[best] = dxabs[best] + math.abs(dyv[e])
    else
      local sum, abs = 0, 0
      for _, i in ipairs(members) do sum, abs = sum + xv[i], abs + math.abs(xv[i]) end
      y[e], yabs[e] = sum / divisor, abs / divisor
      for _, i in ipairs(members) do
        dx[i] = dx[i] + dyv[e] / divisor
        dxabs[i] = dxabs[i] + math.abs(dyv[e] / divisor)
      end
    end
  end end end end
  return y, dx, { B, C, OH, OW }, dxabs, yabs
end

-- got against want within ulps (4 unless given) of max(1, |want|, scale[i]); scale, where given,
-- is each element's sum of term magnitudes (see pool_ref).
local function check(got, want, dt, label, ulps, scale)
  local g = got:to_table(true)
  assert.are.equal(#want, #g, label .. ": element count")
  for i = 1, #want do
    local w = ref.convert(want[i], dt)
    local tol = (ulps or 4) * ref.eps[dt] * math.max(1, math.abs(w), scale and scale[i] or 0)
    if not (math.abs(g[i] - w) <= tol or (w ~= w and g[i] ~= g[i])) then
      error(("%s [%d]: got %.10g, want %.10g"):format(label, i, g[i], w), 2)
    end
  end
end

describe("2-D pooling", function()
  -- Without a GPU, NVRTC and ptxas still build the kernels for the H200.
  it("builds its channels-last kernels for sm_90 without local memory", function()
    for _, dt in ipairs({ "f32", "bf16", "f64" }) do
      for _, class in ipairs({ tocha.MaxPool2d, tocha.AvgPool2d }) do
        local op = class.new { kernel_size = 3, stride = 2, padding = 1, layout = "nhwc", dtype = dt }
        for _, k in ipairs({ op.kernel, op.grad_kernel }) do assert.are.equal(0, k:info("sm_90")["local"], dt) end
      end
    end
  end)

  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local seed = 0
      local function randn(shape, dt)
        seed = seed + 1
        return tocha.randn(shape, { dtype = dt, device = device, seed = seed })
      end

      local CASES = {
        { "max", { kernel_size = 2 } },
        { "max", { kernel_size = 3, stride = 2, padding = 1 } },
        { "max", { kernel_size = { 3, 2 }, stride = { 2, 1 }, padding = { 1, 0 }, dilation = { 2, 1 } } },
        { "max", { kernel_size = 3, stride = 2, ceil_mode = true } },
        { "max", { kernel_size = 5, stride = 1, padding = 2 } },
        { "avg", { kernel_size = 2 } },
        { "avg", { kernel_size = 3, stride = 2, padding = 1 } },
        { "avg", { kernel_size = 3, stride = 2, padding = 1, count_include_pad = false } },
        { "avg", { kernel_size = 3, stride = 2, ceil_mode = true, count_include_pad = false } },
        { "adaptive", { output_size = 1 } },
        { "adaptive", { output_size = { 3, 5 } } },
        { "adaptive", { output_size = 7 } },
      }
      local CLASS = { max = tocha.MaxPool2d, avg = tocha.AvgPool2d, adaptive = tocha.AdaptiveAvgPool2d }

      it("pools forward and backward as PyTorch defines it, every option, f32 and f64", function()
        ref.rng("pool")
        for _, case in ipairs(CASES) do
          for _, dt in ipairs({ "f32", "f64" }) do
            local mode, opts = case[1], case[2]
            local shape = { math.random(1, 2), math.random(1, 3), math.random(5, 13), math.random(5, 13) }
            local o = {}
            for k, v in pairs(opts) do o[k] = v end
            o.dtype = dt
            local op = CLASS[mode].new(o)
            local function p2(v, d) v = v or d; return type(v) == "number" and { v, v } or v end
            local r = { k = p2(opts.kernel_size, 1) }
            r.s, r.p, r.d = p2(opts.stride, r.k), p2(opts.padding, 0), p2(opts.dilation, 1)
            r.ceil, r.count_include_pad, r.output_size = opts.ceil_mode, opts.count_include_pad ~= false, p2(opts.output_size, 1)
            local x = randn(shape, dt)
            local y = op:forward(x)
            local dy = randn(y:shape(), dt)
            local dx = op:backward(x, dy)
            local wy, wdx, wshape, wscale, yscale = pool_ref(mode, r, x:to_table(true), shape, dy:to_table(true))
            local label = ("%s %s %s %s"):format(mode, dt, table.concat(shape, "x"), require("tocha.errors").show(opts.kernel_size or opts.output_size))
            assert.are.same(wshape, y:shape(), label)
            check(y, wy, dt, label .. " y", 4, yscale)
            check(dx, wdx, dt, label .. " dx", 8, wscale)
          end
        end
      end)

      it("routes max pooling's gradient to the first of equal elements, a NaN over numbers", function()
        local x = tocha.tensor({ { { { 1, 1, 2, 2 }, { 1, 1, 2, 0 / 0 } } } }, { device = device })
        local op = tocha.MaxPool2d.new { kernel_size = 2 }
        local y = op:forward(x):to_table()[1][1][1]
        assert.are.equal(1, y[1])
        assert.is_true(y[2] ~= y[2])
        local dx = op:backward(x, tocha.full({ 1, 1, 1, 2 }, 5, { device = device })):to_table()[1][1]
        assert.are.same({ { 5, 0, 0, 0 }, { 0, 0, 0, 5 } }, dx)
      end)

      it("computes halves in f32", function()
        for _, dt in ipairs({ "f16", "bf16" }) do
          local op = tocha.AvgPool2d.new { kernel_size = 3, stride = 2, padding = 1, dtype = dt }
          local x = randn({ 2, 3, 9, 8 }, dt)
          local y = op:forward(x)
          local dy = randn(y:shape(), dt)
          local r = { k = { 3, 3 }, s = { 2, 2 }, p = { 1, 1 }, d = { 1, 1 }, count_include_pad = true }
          local wy, wdx = pool_ref("avg", r, x:to_table(true), x:shape(), dy:to_table(true))
          check(y, wy, dt, "avg " .. dt, 1)
          check(op:backward(x, dy), wdx, dt, "avg dx " .. dt, 1)
        end
      end)

      -- layout nhwc: x and dy permuted to [B, H, W, C], y and dx permuted back, against the
      -- reference, every case, with a NaN and ties among the max cases' elements
      it("pools channels-last tensors (layout nhwc) forward and backward as NCHW's, every option, f32 and bf16", function()
        ref.rng("pool nhwc")
        for i, case in ipairs(CASES) do
          local mode, opts = case[1], case[2]
          local dt = i % 2 == 0 and "bf16" or "f32"
          -- channels in whole 16-byte units (a thread 4 f32 or 8 bf16 of them) or not
          local channels = { 1, 3, 4, 5, 8, 12, 16, 24 }
          local shape = { math.random(1, 2), channels[math.random(#channels)], math.random(5, 13), math.random(5, 13) }
          local o = { layout = "nhwc", dtype = dt }
          for k, v in pairs(opts) do o[k] = v end
          local op = CLASS[mode].new(o)
          assert.is_true(op:has_backward())
          local x = randn(shape, dt)
          if mode == "max" then -- ties and a NaN
            local v = x:to_table(true)
            for j = 1, #v, 7 do v[j] = 0.5 end
            v[math.floor(#v / 2)] = 0 / 0
            x = tocha.tensor(v, { dtype = dt, device = device }):view(shape)
          end
          local y = op:forward(x:permute(1, 3, 4, 2):contiguous())
          local function p2(v, d) v = v or d; return type(v) == "number" and { v, v } or v end
          local r = { k = p2(opts.kernel_size, 1) }
          r.s, r.p, r.d = p2(opts.stride, r.k), p2(opts.padding, 0), p2(opts.dilation, 1)
          r.ceil, r.count_include_pad, r.output_size = opts.ceil_mode, opts.count_include_pad ~= false, p2(opts.output_size, 1)
          local dy = randn({ y:shape()[1], y:shape()[4], y:shape()[2], y:shape()[3] }, dt)
          local wy, wdx, wshape, wscale, yscale = pool_ref(mode, r, x:to_table(true), shape, dy:to_table(true))
          assert.are.same({ wshape[1], wshape[3], wshape[4], wshape[2] }, y:shape(), mode)
          local what = ("%s nhwc %s %s"):format(mode, dt, table.concat(shape, "x"))
          check(y:permute(1, 4, 2, 3):contiguous(), wy, dt, what, dt == "f32" and 4 or 1, yscale)
          local dx = op:backward(x:permute(1, 3, 4, 2):contiguous(), dy:permute(1, 3, 4, 2):contiguous())
          check(dx:permute(1, 4, 2, 3):contiguous(), wdx, dt, what .. " dx", 8, wscale)
        end
        fails('layout: expected "nchw" or "nhwc", got "nchwc"', tocha.MaxPool2d.new, { kernel_size = 2, layout = "nchwc" })
      end)

      -- channels-last x and y off 16-byte alignment: a channel a thread instead of 16-byte units,
      -- the same values, forward and backward
      it("pools channels-last tensors at an odd offset as aligned ones", function()
        for _, dt in ipairs({ "f32", "bf16" }) do
          local op = tocha.MaxPool2d.new { kernel_size = 3, stride = 2, padding = 1, layout = "nhwc", dtype = dt }
          local x = randn({ 2, 9, 8, 16 }, dt)
          local want = op:forward(x)
          local n = ref.numel(x:shape())
          local block = tocha.zeros({ n + 1 }, { dtype = dt, device = device })
          local shifted = block:narrow(1, 2, n):view(x:shape())
          shifted:copy(x)
          local out = tocha.zeros({ ref.numel(want:shape()) + 1 }, { dtype = dt, device = device })
          local y = out:narrow(1, 2, ref.numel(want:shape())):view(want:shape())
          op:forward(shifted, y)
          assert.is_true(tocha.allclose(y, want, 0, 0), dt)
          assert.are.equal(0, out:to_table()[1], "the element before y is left alone")
          local dy = randn(want:shape(), dt)
          assert.is_true(tocha.allclose(op:backward(shifted, dy), op:backward(x, dy), 0, 0), dt .. " dx")
        end
      end)

      it("runs in a model as in direct calls, backward included", function()
        local input = tocha.Model.input({ -1, 3, 12, 12 })
        local mp = tocha.MaxPool2d.new { kernel_size = 3, stride = 2, padding = 1 }
        local gap = tocha.AdaptiveAvgPool2d.new { output_size = 1 }
        local m = tocha.Model({ input }, { gap(mp(input)) })
        m:load(2, device)
        local x = randn({ 2, 3, 12, 12 })
        local out, cache = m:forward_train({ x })
        local want = gap:forward(mp:forward(x))
        assert.is_true(tocha.allclose(out[1], want, 0, 0))
        local dy = randn({ 2, 3, 1, 1 })
        local grads = m:backward({ dy }, cache)
        local mid = mp:forward(x)
        local wdx = mp:backward(x, gap:backward(mid, dy))
        assert.is_true(tocha.allclose(grads[1], wdx, 0, 0))
      end)

      -- A nested table of `shape` from gen(), for tensors of chosen values (ties, NaNs).
      local function nested(shape, gen, d)
        d = d or 1
        local t = {}
        for i = 1, shape[d] do t[i] = d == #shape and gen() or nested(shape, gen, d + 1) end
        return t
      end
      -- The reference's options for a case's constructor options.
      local function ref_opts(opts)
        local function p2(v, d) v = v or d; return type(v) == "number" and { v, v } or v end
        local r = { k = p2(opts.kernel_size, 1) }
        r.s, r.p, r.d = p2(opts.stride, r.k), p2(opts.padding, 0), p2(opts.dilation, 1)
        r.ceil, r.count_include_pad, r.output_size = opts.ceil_mode, opts.count_include_pad ~= false, p2(opts.output_size, 1)
        return r
      end
      -- One case: forward and backward of CLASS[mode] with opts on x, every element against the
      -- reference; dx written into a view one element into a larger block when `offset`.
      local function run_case(mode, opts, x, dt, offset)
        local o = {}
        for k, v in pairs(opts) do o[k] = v end
        o.dtype = dt
        local op = CLASS[mode].new(o)
        local y = op:forward(x)
        local dy = randn(y:shape(), dt)
        local dx
        if offset then
          local n = x:numel()
          local block = tocha.full({ n + 1 }, 7, { dtype = dt, device = device })
          dx = block:narrow(1, 2, n):view(x:shape())
          op:backward(x, dy, dx)
          assert.are.equal(7, block:to_table()[1], "the element before dx is left alone")
        else
          dx = op:backward(x, dy)
        end
        local shape = x:shape()
        local wy, wdx, wshape, wscale, yscale = pool_ref(mode, ref_opts(opts), x:to_table(true), shape, dy:to_table(true))
        local label = ("%s %s %s %s"):format(mode, dt, table.concat(shape, "x"),
          require("tocha.errors").show(opts.kernel_size or opts.output_size))
        assert.are.same(wshape, y:shape(), label)
        local half = dt == "f16" or dt == "bf16"
        check(y, wy, dt, label .. " y", half and 1 or 4, yscale)
        check(dx, wdx, dt, label .. " dx", half and 2 or 8, wscale)
      end

      it("gathers max pooling's gradient by tiles of windows: many tiles, halos, gaps, ties and NaNs, every dtype", function()
        ref.rng("pool tiles")
        local TILED = {
          { { kernel_size = 3, stride = 2, padding = 1 }, { 2, 2, 37, 70 } }, -- 3 x 2 tiles of 8 x 32, halo 1
          { { kernel_size = 2 }, { 1, 3, 40, 70 } }, -- no halo
          { { kernel_size = { 3, 2 }, stride = { 2, 1 }, padding = { 1, 0 }, dilation = { 2, 1 } }, { 1, 2, 30, 40 } },
          { { kernel_size = 3, stride = 2, ceil_mode = true }, { 1, 2, 36, 67 } },
          { { kernel_size = 5, stride = 1, padding = 2 }, { 1, 1, 20, 40 } }, -- halo 4
          { { kernel_size = 2, stride = 3 }, { 1, 2, 31, 50 } }, -- elements no window holds
          { { kernel_size = 3, stride = 2, padding = 1, block = 64 }, { 1, 2, 21, 45 } }, -- fewer threads than windows
          { { kernel_size = 2, stride = 1, block = 1024 }, { 1, 1, 12, 14 } }, -- tiles of 16 x 16
        }
        for _, case in ipairs(TILED) do
          local opts, shape = case[1], case[2]
          local r = ref_opts(opts)
          assert.is_true(pool.max_tile(r.k, r.s, r.d, 8, "f64") > 0, "the case takes the tiles")
          for _, dt in ipairs({ "f32", "f64", "f16", "bf16" }) do
            -- Small integers: many ties; a NaN now and then.
            local x = tocha.tensor(nested(shape, function()
              if math.random() < 0.02 then return 0 / 0 end
              return math.random(-3, 3)
            end), { dtype = dt, device = device })
            run_case("max", opts, x, dt)
          end
          run_case("max", opts, randn(shape, "f32"), "f32")
        end
      end)

      it("walks the windows where a tile of them would not fit in shared memory", function()
        local opts = { kernel_size = 25, stride = 1, padding = 0 }
        assert.are.equal(0, pool.max_tile({ 25, 25 }, { 1, 1 }, { 1, 1 }, 8, "f64"))
        local x = tocha.tensor(nested({ 1, 2, 27, 29 }, function() return math.random(-2, 2) end), { dtype = "f64", device = device })
        run_case("max", opts, x, "f64")
      end)

      it("pools adaptively to 1 x 1 and through windows that do not overlap, every dtype, dx at any alignment", function()
        ref.rng("pool adaptive")
        local ADAPTIVE = {
          { 1, { 2, 3, 7, 7 } }, { 1, { 1, 5, 1, 1 } }, { 1, { 2, 2, 33, 65 } }, { 1, { 3, 5, 3, 3 } },
          { 1, { 3, 7, 2, 2 } }, -- planes of 4: a 16-byte group of f32, half of one of halves
          { { 2, 3 }, { 2, 2, 8, 9 } }, { { 4, 4 }, { 1, 3, 12, 16 } }, { { 5, 1 }, { 1, 2, 10, 3 } },
          { { 3, 5 }, { 1, 2, 7, 11 } }, -- windows that overlap: the walk
        }
        for _, case in ipairs(ADAPTIVE) do
          for _, dt in ipairs({ "f32", "f64", "f16", "bf16" }) do
            run_case("adaptive", { output_size = case[1] }, randn(case[2], dt), dt)
            run_case("adaptive", { output_size = case[1] }, randn(case[2], dt), dt, true)
          end
        end
      end)

      it("refuses bad options and inputs by name", function()
        fails("kernel_size: expected a number or {h, w}, got nil", tocha.MaxPool2d.new, {})
        fails("padding: 2 is more than half the kernel's extent 3", tocha.MaxPool2d.new, { kernel_size = 3, padding = 2 })
        fails("stride: expected positive integers, got 0", tocha.AvgPool2d.new, { kernel_size = 2, stride = 0 })
        fails('"dilation": unknown option of tocha.AvgPool2d', tocha.AvgPool2d.new, { kernel_size = 2, dilation = 2 })
        fails("ceil_mode: expected a boolean, got number", tocha.MaxPool2d.new, { kernel_size = 2, ceil_mode = 1 })
        fails("output_size: expected a number or {h, w}, got nil", tocha.AdaptiveAvgPool2d.new, {})
        fails("dtype: expected a float dtype (f32, f64, f16, bf16), got i32", tocha.MaxPool2d.new, { kernel_size = 2, dtype = "i32" })
        local op = tocha.MaxPool2d.new { kernel_size = 5 }
        fails("x: a height of 3 is smaller than the window", op.forward, op, randn({ 1, 1, 3, 9 }))
        fails("x: expected an NCHW shape of 4 sizes, got 3", op.forward, op, randn({ 1, 9, 9 }))
      end)
    end)
  end
end)
