-- tocha.UpsampleBilinear2d: forward and backward on random shapes, to sizes up and down and by
-- whole and fractional scales, in every coordinate mode (half pixel, PyTorch's half pixel,
-- aligned corners, asymmetric), both layouts, every float dtype, bilinear and bicubic (two cubic
-- coefficients); every element against a reference written here from the definition (bilinear:
-- each axis's source coordinate clamped to the input, its two neighbours weighted linearly;
-- bicubic: the four around it, edges repeated, Keys' weights; the backward as the same weights'
-- transpose, scattered), outputs poisoned first; central differences in f64; in a model beside its
-- direct calls; bad options. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
local ref = require "support.reference"
local fails = require("support.assertions").fails

-- Keys' cubic convolution kernel of coefficient a at distance x.
local function keys(x, a)
  x = math.abs(x)
  if x <= 1 then return ((a + 2) * x - (a + 3)) * x * x + 1 end
  if x < 2 then return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a end
  return 0
end

-- One axis's taps: for each output o (0-based), a list of {input index, weight} from in to out;
-- bilinear: the source coordinate clamped to the input, its two neighbours; bicubic: not
-- clamped, the four around it (indices clamped: the edge repeated), weighted by keys.
local function taps(n_in, n_out, coordinates, scale, cubic_a)
  local t = {}
  for o = 0, n_out - 1 do
    local src
    if coordinates == "align_corners" then
      src = n_out > 1 and o * (n_in - 1) / (n_out - 1) or 0
    elseif coordinates == "pytorch_half_pixel" and n_out == 1 then
      src = 0
    else
      local r = scale and 1 / scale or n_in / n_out
      src = coordinates == "asymmetric" and o * r or (o + 0.5) * r - 0.5
    end
    if cubic_a then
      local f = math.floor(src)
      local list = {}
      for k = -1, 2 do list[#list + 1] = { math.min(math.max(f + k, 0), n_in - 1), keys(src - (f + k), cubic_a) } end
      t[o + 1] = list
    else
      src = math.min(math.max(src, 0), n_in - 1)
      local i0 = math.floor(src)
      t[o + 1] = { { i0, 1 - (src - i0) }, { math.min(i0 + 1, n_in - 1), src - i0 } }
    end
  end
  return t
end

-- y and dx (flat, NCHW order) of x (flat, NCHW shape) resized to OH x OW, with dy; and each
-- element's sum of the magnitudes its terms weigh (its rounding scale: the kernels compute the
-- weights from coordinates rounded to the compute type, as PyTorch's do). cubic_a: bicubic.
local function bilinear_ref(xv, shape, OH, OW, coordinates, scale, dyv, cubic_a)
  local B, C, H, W = shape[1], shape[2], shape[3], shape[4]
  local th = taps(H, OH, coordinates, scale and scale[1], cubic_a)
  local tw = taps(W, OW, coordinates, scale and scale[2], cubic_a)
  local y, yabs, dx, dxabs = {}, {}, {}, {}
  for i = 1, #xv do dx[i], dxabs[i] = 0, 0 end
  local e = 0
  for p = 0, B * C - 1 do
    for oh = 1, OH do
      for ow = 1, OW do
        e = e + 1
        local sum, abs = 0, 0
        for _, h in ipairs(th[oh]) do
          for _, w in ipairs(tw[ow]) do
            local wgt = h[2] * w[2]
            local at = (p * H + h[1]) * W + w[1] + 1
            sum, abs = sum + wgt * xv[at], abs + math.abs(xv[at])
            dx[at] = dx[at] + wgt * dyv[e]
            dxabs[at] = dxabs[at] + math.abs(dyv[e])
          end
        end
        y[e], yabs[e] = sum, abs
      end
    end
  end
  return y, yabs, dx, dxabs
end

-- (f32: a weight's error is about the coordinate's, up to 16 ulps of the 13 pixels drawn here)
local TOL = { f64 = 1e-12, f32 = 2e-5, f16 = 2e-3, bf16 = 1.6e-2 }

local function nhwc(t) return t:permute({ 1, 3, 4, 2 }):contiguous() end
local function nchw(t) return t:permute({ 1, 4, 2, 3 }):contiguous() end

describe("tocha.UpsampleBilinear2d", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      -- Every element of got (NCHW) within tol of want, relative to its terms' magnitudes.
      local function check(got, want, scale, dt, label)
        local g = ref.values(got)
        assert(#g == #want, ("%s: %d elements, expected %d"):format(label, #g, #want))
        for e = 1, #want do
          assert(math.abs(g[e] - want[e]) <= TOL[dt] * (scale[e] + 1e-300) and g[e] == g[e],
            ("%s: element %d is %.17g, expected %.17g"):format(label, e, g[e], want[e]))
        end
      end

      it("resizes forward and backward as defined, up and down, every coordinate mode, layout and float dtype", function()
        local rng = ref.rng("upsample_bilinear")
        local modes = { "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric" }
        local n = 0
        for _, dt in ipairs(ref.float_dtypes) do
          for _, coordinates in ipairs(modes) do
            for _, layout in ipairs({ "nchw", "nhwc" }) do
             for _, cubic_a in ipairs({ false, -0.75, -0.5 }) do
              n = n + 1
              local shape = { math.random(1, 2), math.random(1, 5), math.random(1, 9), math.random(1, 9) }
              local o = { coordinates = coordinates, dtype = dt, layout = layout, mode = cubic_a and "bicubic" or nil,
                cubic_a = cubic_a ~= -0.75 and cubic_a or nil }
              local scale
              if n % 3 == 0 then
                scale = { math.random(1, 7) / 2, math.random(1, 11) / 4 } -- whole and fractional
                o.scale = scale
              else
                o.size = { math.random(1, 13), math.random(1, 13) } -- up, down, to one pixel
              end
              local OH = o.size and o.size[1] or math.floor(shape[3] * scale[1])
              local OW = o.size and o.size[2] or math.floor(shape[4] * scale[2])
              if OH >= 1 and OW >= 1 then
                local op = tocha.UpsampleBilinear2d.new(o)
                local x = tocha.randn(shape, { dtype = dt, device = device, seed = rng.seed + n })
                local dy = tocha.randn({ shape[1], shape[2], OH, OW }, { dtype = dt, device = device, seed = rng.seed + 100 + n })
                local y, dx
                if layout == "nhwc" then
                  local out = { shape[1], OH, OW, shape[2] }
                  y = op:forward(nhwc(x), tocha.full(out, 0 / 0, { dtype = dt, device = device }))
                  dx = op:backward(nhwc(x), nhwc(dy), tocha.full({ shape[1], shape[3], shape[4], shape[2] }, 0 / 0,
                    { dtype = dt, device = device }))
                  y, dx = nchw(y), nchw(dx)
                else
                  y = op:forward(x, tocha.full({ shape[1], shape[2], OH, OW }, 0 / 0, { dtype = dt, device = device }))
                  dx = op:backward(x, dy, tocha.full(shape, 0 / 0, { dtype = dt, device = device }))
                end
                local wy, wys, wdx, wdxs = bilinear_ref(ref.values(x), shape, OH, OW, coordinates, scale, ref.values(dy),
                  cubic_a or nil)
                local label = ("%s %s %s %s %s -> %dx%d"):format(cubic_a and "bicubic " .. cubic_a or "bilinear", dt,
                  coordinates, layout, table.concat(shape, "x"), OH, OW)
                assert.are.same({ shape[1], shape[2], OH, OW }, y:shape(), label)
                check(y, wy, wys, dt, label .. " y")
                check(dx, wdx, wdxs, dt, label .. " dx")
              end
             end
            end
          end
        end
      end)

      it("takes PyTorch's options: align_corners, and a scale's o / scale mapping", function()
        local x = tocha.randn({ 1, 2, 5, 6 }, { dtype = "f64", device = device, seed = 3 })
        local a = tocha.UpsampleBilinear2d.new { size = { 9, 4 }, align_corners = true, dtype = "f64" }
        local b = tocha.UpsampleBilinear2d.new { size = { 9, 4 }, coordinates = "align_corners", dtype = "f64" }
        assert.is_true(tocha.allclose(a:forward(x), b:forward(x), 0, 0))
        -- scale 1.5 of 5 rows is 7 rows read at o / 1.5, not at o x 5 / 7
        local s = tocha.UpsampleBilinear2d.new { scale = 1.5, dtype = "f64" }
        local y = s:forward(x)
        assert.are.same({ 1, 2, 7, 9 }, y:shape())
        local wy = bilinear_ref(ref.values(x), { 1, 2, 5, 6 }, 7, 9, "half_pixel", { 1.5, 1.5 },
          ref.values(tocha.zeros({ 1, 2, 7, 9 }, { dtype = "f64" })))
        check(y, wy, ref.values(y:abs():add(1)), "f64", "scale 1.5")
        local sized = tocha.UpsampleBilinear2d.new { size = { 7, 9 }, dtype = "f64" }:forward(x)
        assert.is_false(tocha.allclose(y, sized, 0, 0), "a scale reads at o / scale")
      end)

      it("matches central differences in f64 (tocha.gradcheck), both layouts", function()
        for _, layout in ipairs({ "nchw", "nhwc" }) do
          for _, mode in ipairs({ "bilinear", "bicubic" }) do
            local op = tocha.UpsampleBilinear2d.new { size = { 5, 3 }, dtype = "f64", layout = layout, mode = mode }
            local x = tocha.randn(layout == "nhwc" and { 2, 4, 6, 3 } or { 2, 3, 4, 6 }, { dtype = "f64", device = device, seed = 9 })
            local ok, report = tocha.gradcheck(op, x, { seed = 4 })
            assert.is_true(ok, mode .. ": " .. tostring(report))
          end
        end
      end)

      it("runs in a model as in direct calls, backward included", function()
        local input = tocha.Model.input({ -1, 3, 6, 5 })
        local up = tocha.UpsampleBilinear2d.new { scale = 2 }
        local m = tocha.Model({ input }, { up(input) })
        m:load(2, device)
        local x = tocha.randn({ 2, 3, 6, 5 }, { device = device, seed = 11 })
        local out, cache = m:forward_train({ x })
        assert.is_true(tocha.allclose(out[1], up:forward(x), 0, 0))
        local dy = tocha.randn({ 2, 3, 12, 10 }, { device = device, seed = 12 })
        assert.is_true(tocha.allclose(m:backward({ dy }, cache)[1], up:backward(x, dy), 0, 0))
      end)

      it("refuses bad options and inputs by name", function()
        fails("size, scale: expected one of them, got neither", tocha.UpsampleBilinear2d.new, {})
        fails("size, scale: expected one of them, got both", tocha.UpsampleBilinear2d.new, { size = 2, scale = 2 })
        fails("size: expected sizes from 1 to 2^31 - 1, got 0", tocha.UpsampleBilinear2d.new, { size = { 0, 3 } })
        fails("scale: expected positive numbers, got -1", tocha.UpsampleBilinear2d.new, { scale = -1 })
        fails('coordinates: expected "half_pixel", "pytorch_half_pixel", "align_corners" or "asymmetric", got "tf"',
          tocha.UpsampleBilinear2d.new, { size = 2, coordinates = "tf" })
        fails("align_corners: true contradicts coordinates half_pixel", tocha.UpsampleBilinear2d.new,
          { size = 2, coordinates = "half_pixel", align_corners = true })
        fails('layout: expected "nchw" or "nhwc", got "chw"', tocha.UpsampleBilinear2d.new, { size = 2, layout = "chw" })
        fails('mode: expected "bilinear" or "bicubic", got "nearest"', tocha.UpsampleBilinear2d.new, { size = 2, mode = "nearest" })
        fails('cubic_a: only a bicubic resize (mode = "bicubic") takes it', tocha.UpsampleBilinear2d.new, { size = 2, cubic_a = -0.5 })
        fails("cubic_a: expected a finite number, got nan", tocha.UpsampleBilinear2d.new, { size = 2, mode = "bicubic", cubic_a = 0 / 0 })
        local op = tocha.UpsampleBilinear2d.new { scale = 0.25 }
        fails("x: a height of 3 scaled by 0.25 gives 0", op.forward, op,
          tocha.zeros({ 1, 1, 3, 8 }, { device = device }))
        fails("x: expected an NCHW shape of 4 sizes, got 3", op.forward, op, tocha.zeros({ 1, 3, 8 }, { device = device }))
        -- the process goes on
        assert.are.same({ 1, 1, 2, 2 }, op:forward(tocha.zeros({ 1, 1, 8, 8 }, { device = device })):shape())
      end)
    end)
  end
end)
