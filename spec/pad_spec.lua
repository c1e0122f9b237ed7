-- tocha.Pad: forward and backward on random shapes of 1 to 5 dimensions, pads of every sign
-- (negative ones crop), in every mode (constant with a fill value, reflect, replicate,
-- circular), every float dtype; every element against a reference written here from the
-- definition (each output's source index, dimension by dimension; the backward by scattering
-- dy through the same map), outputs poisoned first; central differences in f64; in a model
-- beside its direct calls; bad options and shapes. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
local ref = require "support.reference"
local fails = require("support.assertions").fails

-- The input index output index p reads along a dimension of n inputs, b before, a after; nil
-- for the fill (constant mode). Circular mode crops first and wraps over what is left.
local function source(mode, p, n, b, a)
  local j = p - b
  if mode ~= "circular" and j >= 0 and j < n then return j end
  if mode == "constant" then return nil end
  if mode == "reflect" then return j < 0 and -j or 2 * (n - 1) - j end
  if mode == "replicate" then return j < 0 and 0 or n - 1 end
  local lo = math.max(-b, 0)
  local m = n - lo - math.max(-a, 0)
  return (p - math.max(b, 0)) % m + lo
end

-- y and dx (flat, row-major) of padding x (flat, shape) by sides ({before, after} a dimension)
-- with dy; and each dx element's sum of |dy| terms.
local function pad_ref(mode, value, xv, shape, sides, dyv)
  local out = {}
  for k, n in ipairs(shape) do out[k] = n + sides[k][1] + sides[k][2] end
  local y, dx, dxabs = {}, {}, {}
  for i = 1, #xv do dx[i], dxabs[i] = 0, 0 end
  local total = ref.numel(out)
  for e = 0, total - 1 do
    local rest, at, stride, inside = e, 0, 1, true
    for k = #out, 1, -1 do
      local p = rest % out[k]
      rest = (rest - p) / out[k]
      local j = source(mode, p, shape[k], sides[k][1], sides[k][2])
      if j == nil then inside = false else at = at + j * stride end
      stride = stride * shape[k]
    end
    if inside then
      y[e + 1] = xv[at + 1]
      dx[at + 1] = dx[at + 1] + dyv[e + 1]
      dxabs[at + 1] = dxabs[at + 1] + math.abs(dyv[e + 1])
    else
      y[e + 1] = value
    end
  end
  return y, dx, dxabs, out
end

describe("tocha.Pad", function()
  -- Without a GPU, NVRTC and ptxas still build the kernels for the H200.
  it("runs image pads (the last two dimensions) on row kernels without local memory", function()
    for _, mode in ipairs({ "constant", "reflect", "replicate", "circular" }) do
      for _, dt in ipairs({ "bf16", "f64" }) do
        local rows = tocha.Pad.new({ 1, 2, -1, 3 }, { mode = mode, dtype = dt })
        assert.is_true(rows.rows)
        for _, k in ipairs({ rows.kernel, rows.grad_kernel }) do assert.are.equal(0, k:info("sm_90")["local"], mode .. " " .. dt) end
        assert.is_false(tocha.Pad.new({ 1, 1, 0, 0, 1, 0 }, { mode = mode, dtype = dt }).rows)
        -- a channels-last image's H and W: rows of pixels of the last dimension's size
        local pixels = tocha.Pad.new({ 0, 0, 1, 2, -1, 3 }, { mode = mode, dtype = dt })
        assert.are.same({ true, true }, { pixels.rows, pixels.inner })
        for _, k in ipairs({ pixels.kernel, pixels.grad_kernel }) do assert.are.equal(0, k:info("sm_90")["local"], mode .. " " .. dt) end
      end
      -- a team of lanes a row, each lane 32 bytes of it a pass: the least power of two (at most
      -- 32) that covers the row in one pass
      local op = tocha.Pad.new({ 1, 1 }, { mode = mode })
      assert.are.same({ math.ceil(2 * 3 * 70 * 16 / 256), 1, 1 }, op:grid({ 2, 3, 70, 66 }))   -- 8 f32 a lane
      assert.are.same({ math.ceil(2 * 3 * 70 * 32 / 256), 1, 1 }, op:grid({ 2, 3, 70, 900 }))
      assert.are.same({ math.ceil(2 * 3 * 70 * 1 / 256), 1, 1 }, op:grid({ 2, 3, 70, 7 }))
      local halves = tocha.Pad.new({ 1, 1 }, { mode = mode, dtype = "f16" })
      assert.are.same({ math.ceil(2 * 3 * 70 * 8 / 256), 1, 1 }, halves:grid({ 2, 3, 70, 66 })) -- 16 a lane
      -- channels-last: a row is W pixels of C
      local nhwc = tocha.Pad.new({ 0, 0, 1, 1, 1, 1 }, { mode = mode })
      assert.are.same({ math.ceil(2 * 70 * 32 / 256), 1, 1 }, nhwc:grid({ 2, 70, 66, 16 }))
      assert.are.same({ math.ceil(2 * 70 * 4 / 256), 1, 1 }, nhwc:grid({ 2, 70, 8, 3 }))
    end
  end)

  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("pads and crops forward and backward as defined, every mode and float dtype", function()
        local rng = ref.rng("pad")
        local n = 0
        for _, dt in ipairs(ref.float_dtypes) do
          for _, mode in ipairs({ "constant", "reflect", "replicate", "circular" }) do
            for round = 1, 8 do
              n = n + 1
              local shape = {}
              for k = 1, math.random(1, 5) do shape[k] = math.random(1, k <= 2 and 3 or 6) end
              -- rounds 4 to 6: image pads (the rows kernels) on rows wider than a warp; round 6's
              -- rows take a team more than one pass (over 32 lanes of 32 bytes)
              if round > 3 then shape = { math.random(1, 2), math.random(1, 3), math.random(1, 6), math.random(30, 70) } end
              if round == 6 then shape = { 1, math.random(1, 2), math.random(1, 5), math.random(520, 1100) } end
              -- rounds 7 and 8: a channels-last image's H and W (pixels of 1 to 9 channels)
              if round > 6 then shape = { math.random(1, 2), math.random(1, 6), math.random(3, 40), math.random(1, 9) } end
              -- pads for the last `pairs` dimensions, of both signs, within the mode's limits
              local pairs, sides, pad = math.random(1, round > 3 and 2 or #shape), {}, {}
              for k = 1, #shape do sides[k] = { 0, 0 } end
              local first = 1
              if round > 6 then pairs, first, pad[1], pad[2] = 3, 2, 0, 0 end -- the channels unpadded
              for q = first, pairs do
                local k = #shape - q + 1
                local size = shape[k]
                local b, a
                repeat
                  b, a = math.random(-2, 4), math.random(-2, 4)
                  local kept = size - math.max(-b, 0) - math.max(-a, 0)
                  local ok = size + b + a >= 1 and kept >= 1
                  if mode == "reflect" then ok = ok and b < kept and a < kept end
                  if mode == "circular" then ok = ok and b <= kept and a <= kept end
                until ok
                sides[k] = { b, a }
                pad[2 * q - 1], pad[2 * q] = b, a
              end
              local value = mode == "constant" and math.random(-3, 3) / 2 or nil
              local op = tocha.Pad.new(pad, { mode = mode, value = value, dtype = dt })
              if round > 3 then assert.is_true(op.rows, "the rows kernels") end
              -- (H unpadded: the last two dimensions' rows, W's pads with none on the channels)
              if round > 6 then assert.are.equal(pad[5] ~= 0 or pad[6] ~= 0, op.inner, "pixels of the last dimension") end
              local x = tocha.randn(shape, { dtype = dt, device = device, seed = rng.seed + n })
              local out = op:compute_concrete_output_shape({ shape })
              local dy = tocha.randn(out, { dtype = dt, device = device, seed = rng.seed + 1000 + n })
              local wy, wdx, wscale = pad_ref(mode, value or 0, ref.values(x), shape, sides, ref.values(dy))
              local label = ("%s %s %s pad {%s}%s"):format(dt, mode, table.concat(shape, "x"), table.concat(pad, ", "),
                op.rows and " (rows)" or "")
              local y = op:forward(x, tocha.full(out, 0 / 0, { dtype = dt, device = device }))
              local dx = op:backward(x, dy, tocha.full(shape, 0 / 0, { dtype = dt, device = device }))
              assert.are.same(out, y:shape(), label)
              -- y copies (or fills): exact; dx sums the readers' dy
              local gy = ref.values(y)
              assert.are.equal(#wy, #gy, label .. " y")
              for e = 1, #wy do
                assert(gy[e] == ref.convert(wy[e], dt), ("%s y: element %d is %.17g, expected %.17g"):format(label, e, gy[e], wy[e]))
              end
              local got = ref.values(dx)
              local tol = ({ f64 = 1e-15, f32 = 4e-7, f16 = 2e-3, bf16 = 1.6e-2 })[dt]
              for e = 1, #wdx do
                assert(math.abs(got[e] - wdx[e]) <= tol * (wscale[e] + 1e-300),
                  ("%s dx: element %d is %.17g, expected %.17g"):format(label, e, got[e], wdx[e]))
              end
            end
          end
        end
      end)

      -- constant and replicate let crops take more than the size (the output keeps only pads):
      -- the row kernels then copy nothing from x
      it("crops past a row's size in constant and replicate modes, the channels-last rows too", function()
        for _, case in ipairs({ { "constant", { -4, 2 }, { 2, 3 } }, { "replicate", { -4, 2 }, { 2, 3 } },
          { "replicate", { 2, -4 }, { 2, 3 } }, { "constant", { 0, 0, -5, 3, 1, 0 }, { 2, 2, 4, 3 } },
          { "replicate", { 0, 0, 3, -6, 0, 1 }, { 1, 3, 4, 2 } } }) do
          local mode, pad, shape = case[1], case[2], case[3]
          local value = mode == "constant" and 7 or nil
          local op = tocha.Pad.new(pad, { mode = mode, value = value })
          assert.is_true(op.rows)
          local sides = {}
          for k = 1, #shape do
            local pair = #shape - k + 1
            sides[k] = { pad[2 * pair - 1] or 0, pad[2 * pair] or 0 }
          end
          local x = tocha.randn(shape, { device = device, seed = 61 })
          local out = op:compute_concrete_output_shape({ shape })
          local dy = tocha.randn(out, { device = device, seed = 62 })
          local wy, wdx = pad_ref(mode, value or 0, ref.values(x), shape, sides, ref.values(dy))
          local label = mode .. " {" .. table.concat(pad, ", ") .. "}"
          assert.are.same(wy, ref.values(op:forward(x, tocha.full(out, 0 / 0, { device = device }))), label)
          local got = ref.values(op:backward(x, dy, tocha.full(shape, 0 / 0, { device = device })))
          for e = 1, #wdx do assert(math.abs(got[e] - wdx[e]) <= 1e-6, label .. " dx " .. e) end
        end
      end)

      it("matches central differences in f64 (tocha.gradcheck), every mode", function()
        for _, mode in ipairs({ "constant", "reflect", "replicate", "circular" }) do
          local op = tocha.Pad.new({ 2, -1, 1, 2 }, { mode = mode, dtype = "f64" })
          local x = tocha.randn({ 2, 3, 4, 5 }, { dtype = "f64", device = device, seed = 5 })
          local ok, report = tocha.gradcheck(op, x, { seed = 6 })
          assert.is_true(ok, mode .. ": " .. tostring(report))
        end
      end)

      it("runs in a model as in direct calls, backward included", function()
        local input = tocha.Model.input({ -1, 2, 5, 5 })
        local pad = tocha.Pad.new({ 1, 2, 2, 1 }, { mode = "reflect" })
        local m = tocha.Model({ input }, { pad(input) })
        m:load(3, device)
        local x = tocha.randn({ 3, 2, 5, 5 }, { device = device, seed = 13 })
        local out, cache = m:forward_train({ x })
        assert.is_true(tocha.allclose(out[1], pad:forward(x), 0, 0))
        local dy = tocha.randn({ 3, 2, 8, 8 }, { device = device, seed = 14 })
        assert.is_true(tocha.allclose(m:backward({ dy }, cache)[1], pad:backward(x, dy), 0, 0))
      end)

      it("refuses bad options and shapes by name", function()
        fails("pad: expected a list of 2 to 16 sizes (pairs from the last dimension back), got table", tocha.Pad.new,
          { 1, 2, 3 })
        fails("pad[2]: expected an integer, got 0.5", tocha.Pad.new, { 1, 0.5 })
        fails('mode: expected "constant", "reflect", "replicate" or "circular", got "edge"', tocha.Pad.new, { 1, 1 },
          { mode = "edge" })
        fails("value: a fill value is constant mode's, not reflect's", tocha.Pad.new, { 1, 1 }, { mode = "reflect", value = 2 })
        local mirror = tocha.Pad.new({ 3, 0 }, { mode = "reflect" })
        fails("x: reflect pads of 3 and 0 on a dimension of 3: each must be under the size", mirror.forward, mirror,
          tocha.zeros({ 2, 3 }, { device = device }))
        local crop = tocha.Pad.new({ -2, -2 })
        fails("x: pads of -2 and -2 leave nothing of dimension 2 (size 4)", crop.forward, crop,
          tocha.zeros({ 2, 4 }, { device = device }))
        fails("x: 2 pairs of pads for a tensor of 1 dimensions", tocha.Pad.new({ 1, 1, 1, 1 }).forward,
          tocha.Pad.new({ 1, 1, 1, 1 }), tocha.zeros({ 4 }, { device = device }))
        -- the process goes on
        assert.are.same({ 2, 7 }, mirror:forward(tocha.zeros({ 2, 4 }, { device = device })):shape())
      end)
    end)
  end
end)
