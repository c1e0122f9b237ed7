-- tocha.scaled_dot_product_attention: the flash-style forward (kernels/attention.cu) on sim and,
-- tagged #gpu, on cuda, f16 and bf16, head sizes 16 to 128, with and without the causal mask,
-- sequences that end inside a tile of 64, more or fewer keys than queries; against attention
-- computed here in f64 from the inputs as stored (every output element and each row's
-- log-sum-exp), within the dtype's rounding of the probabilities and the output; options,
-- views, and bad arguments.
local tocha = require "tocha"
local ref = require "support.reference"
local fails = require("support.assertions").fails

local values = ref.values

-- o [heads, lq, d] and lse [heads, lq] in f64 from tables q, k, v (row-major), each o element
-- with the sum of |p v| terms and |o| beside it (its rounding bound's scale).
local function reference(q, k, v, heads, lq, lk, d, scale, causal)
  local o, sums, lse = {}, {}, {}
  for h = 0, heads - 1 do
    for i = 0, lq - 1 do
      local s, top = {}, -math.huge
      for j = 0, lk - 1 do
        if causal and j > i then
          s[j] = -math.huge
        else
          local acc = 0
          for c = 0, d - 1 do acc = acc + q[(h * lq + i) * d + c + 1] * k[(h * lk + j) * d + c + 1] end
          s[j] = acc * scale
        end
        top = math.max(top, s[j])
      end
      local total = 0
      for j = 0, lk - 1 do
        s[j] = s[j] == -math.huge and 0 or math.exp(s[j] - top)
        total = total + s[j]
      end
      lse[h * lq + i + 1] = top + math.log(total)
      for c = 0, d - 1 do
        local acc, abs = 0, 0
        for j = 0, lk - 1 do
          local term = s[j] / total * v[(h * lk + j) * d + c + 1]
          acc, abs = acc + term, abs + math.abs(term)
        end
        local e = (h * lq + i) * d + c + 1
        o[e], sums[e] = acc, abs + math.abs(acc) + 1e-30
      end
    end
  end
  return o, sums, lse
end

describe("tocha.scaled_dot_product_attention", function()
  -- Without a GPU, NVRTC and ptxas still build the kernel for the H200: the largest head size's
  -- 16 x 128 f32 accumulators a warp, q's fragments and the scores fit in registers.
  it("builds its kernel for sm_90 without local memory, every head size", function()
    for _, d in ipairs({ 16, 64, 128 }) do
      for _, causal in ipairs({ false, true }) do
        local k = require("tocha.attention").forward_kernel("bf16", d, causal)
        local info = k:info("sm_90")
        assert.are.equal(0, info["local"], d)
        assert.is_true(info.registers <= 255, tostring(d))
      end
    end
  end)

  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local function randn(shape, dt, seed) return tocha.randn(shape, { dtype = dt, device = device, seed = seed }) end

      it("equals softmax(scale q k^T) v within the dtype's rounding, every head size, causal or not", function()
        local seed = 0
        -- {lead dims, lq, lk, d, causal, dtype}
        for _, c in ipairs({
          { { 1, 2 }, 70, 90, 64, false, "bf16" }, { { 2, 1 }, 64, 64, 128, true, "f16" },
          { { 1 }, 130, 130, 32, true, "bf16" }, { { 1, 3 }, 5, 200, 16, false, "f16" },
          { { 1, 1 }, 100, 40, 48, true, "bf16" }, { { 1 }, 1, 1, 16, false, "f16" },
          { { 2 }, 33, 129, 96, true, "f16" },
        }) do
          seed = seed + 10
          local lead, lq, lk, d, causal, dt = c[1], c[2], c[3], c[4], c[5], c[6]
          local function shape(l)
            local s = {}
            for i, x in ipairs(lead) do s[i] = x end
            s[#s + 1], s[#s + 2] = l, d
            return s
          end
          local q, k, v = randn(shape(lq), dt, seed), randn(shape(lk), dt, seed + 1), randn(shape(lk), dt, seed + 2)
          local o, lse = tocha.scaled_dot_product_attention(q, k, v, { causal = causal, lse = true })
          assert.are.same(shape(lq), o:shape())
          assert.are.equal(dt, o:dtype())
          local heads = ref.numel(lead)
          local want, sums, want_lse = reference(values(q), values(k), values(v), heads, lq, lk, d, 1 / math.sqrt(d), causal)
          local label = ("%s %dx%dx%d d %d%s"):format(dt, heads, lq, lk, d, causal and " causal" or "")
          ref.compare_terms(o, { want, sums }, ref.product_tol[dt], label .. " o")
          local got_lse = values(lse)
          for e = 1, #want_lse do
            assert(math.abs(got_lse[e] - want_lse[e]) <= 1e-4 * (math.abs(want_lse[e]) + 1),
              ("%s lse %d: %.9g, expected %.9g"):format(label, e, got_lse[e], want_lse[e]))
          end
        end
      end)

      it("takes a scale and views (copied dense), and returns the dtype's zeros for no queries", function()
        local q, k, v = randn({ 2, 24, 32 }, "bf16", 50), randn({ 2, 24, 32 }, "bf16", 51), randn({ 2, 32, 24 }, "bf16", 52)
        local vt = v:transpose(2, 3) -- [2, 24, 32], a view
        local o = tocha.scaled_dot_product_attention(q, k, vt, { scale = 0.3 })
        local want, sums = reference(values(q), values(k), values(vt:contiguous()), 2, 24, 24, 32, 0.3, false)
        ref.compare_terms(o, { want, sums }, ref.product_tol.bf16, "scale 0.3, v a view")
        assert.are.same({ 2, 0, 32 }, tocha.scaled_dot_product_attention(randn({ 2, 0, 32 }, "bf16", 53), k, vt):shape())
      end)

      it("refuses bad arguments, naming them, and goes on", function()
        local q = randn({ 2, 8, 32 }, "bf16", 60)
        fails("q: expected f16 or bf16, got f32", tocha.scaled_dot_product_attention, q:cast("f32"), q, q)
        fails("k: expected bf16 (q's dtype), got f16", tocha.scaled_dot_product_attention, q, q:cast("f16"), q)
        fails("q: expected a head size (last dimension) that is a multiple of 16 up to 128, got 24",
          tocha.scaled_dot_product_attention, randn({ 2, 8, 24 }, "bf16", 61), q, q)
        fails("k: expected a head size of 32 (q's), got 16", tocha.scaled_dot_product_attention, q, randn({ 2, 8, 16 }, "bf16", 62), q)
        fails("v: expected 8 rows (k's), got 9", tocha.scaled_dot_product_attention, q, q, randn({ 2, 9, 32 }, "bf16", 63))
        fails("k: leading dimensions", tocha.scaled_dot_product_attention, q, randn({ 3, 8, 32 }, "bf16", 64), q)
        fails("opts: unknown option \"mask\"", tocha.scaled_dot_product_attention, q, q, q, { mask = true })
        fails("opts.scale: expected a finite number", tocha.scaled_dot_product_attention, q, q, q, { scale = 0 / 0 })
        fails("q: expected a tensor, got nil", tocha.scaled_dot_product_attention, nil, q, q)
        assert.are.same({ 2, 8, 32 }, tocha.scaled_dot_product_attention(q, q, q):shape())
      end)
    end)
  end
end)
