-- tocha.scaled_dot_product_attention and tocha.Attention: the flash-style forward and backward
-- (kernels/attention.cu) on sim and, tagged #gpu, on cuda, f16 and bf16, head sizes 16 to 128,
-- with and without the causal mask, sequences that end inside a tile of 64, more or fewer keys
-- than queries; against attention and its gradients computed here in f64 from the inputs as
-- stored (every element of o, dq, dk, dv and each row's log-sum-exp), within the dtype's
-- rounding of the probabilities, ds and the outputs; in a model; options, views, and bad
-- arguments.
local tocha = require "tocha"
require "tocha.assertions"
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

-- The gradients in f64: dv = p^T dy, ds = p (dy v^T - delta), delta = the rows' sum of dy o,
-- dq = scale ds k, dk = scale ds^T q; each with its bound's scale beside it: the sums of |terms|
-- with |ds| taken as p (|dy v^T| + the sum of |dy o|) (the rounding of o moves delta by that).
local function reference_backward(q, k, v, dy, heads, lq, lk, d, scale, causal)
  local o = reference(q, k, v, heads, lq, lk, d, scale, causal)
  local g = { dq = { {}, {} }, dk = { {}, {} }, dv = { {}, {} } }
  for _, name in ipairs({ "dq", "dk", "dv" }) do
    local n = (name == "dq" and lq or lk) * heads * d
    for e = 1, n do g[name][1][e], g[name][2][e] = 0, 1e-30 end
  end
  local function at(h, l, r, c) return (h * l + r) * d + c + 1 end
  for h = 0, heads - 1 do
    for i = 0, lq - 1 do
      local s, top = {}, -math.huge
      for j = 0, lk - 1 do
        local acc = 0
        for c = 0, d - 1 do acc = acc + q[at(h, lq, i, c)] * k[at(h, lk, j, c)] end
        s[j] = (causal and j > i) and -math.huge or acc * scale
        top = math.max(top, s[j])
      end
      local total = 0
      for j = 0, lk - 1 do
        s[j] = s[j] == -math.huge and 0 or math.exp(s[j] - top)
        total = total + s[j]
      end
      local delta, spread = 0, 0
      for c = 0, d - 1 do
        delta = delta + dy[at(h, lq, i, c)] * o[at(h, lq, i, c)]
        spread = spread + math.abs(dy[at(h, lq, i, c)] * o[at(h, lq, i, c)])
      end
      for j = 0, lk - 1 do
        local p = s[j] / total
        local dp, dp_abs = 0, 0
        for c = 0, d - 1 do
          dp, dp_abs = dp + dy[at(h, lq, i, c)] * v[at(h, lk, j, c)], dp_abs + math.abs(dy[at(h, lq, i, c)] * v[at(h, lk, j, c)])
        end
        local ds, ds_mag = p * (dp - delta), p * (dp_abs + spread)
        for c = 0, d - 1 do
          local ev, ek, eq = at(h, lk, j, c), at(h, lk, j, c), at(h, lq, i, c)
          g.dv[1][ev], g.dv[2][ev] = g.dv[1][ev] + p * dy[eq], g.dv[2][ev] + math.abs(p * dy[eq])
          g.dk[1][ek], g.dk[2][ek] = g.dk[1][ek] + scale * ds * q[eq], g.dk[2][ek] + math.abs(scale * ds_mag * q[eq])
          g.dq[1][eq], g.dq[2][eq] = g.dq[1][eq] + scale * ds * k[ek], g.dq[2][eq] + math.abs(scale * ds_mag * k[ek])
        end
      end
    end
  end
  return g
end

-- A head's tensor shape: the leading (batch, head) dimensions, then l rows of d.
local function shape_of(lead, l, d)
  local s = {}
  for i, x in ipairs(lead) do s[i] = x end
  s[#s + 1], s[#s + 2] = l, d
  return s
end

describe("tocha.scaled_dot_product_attention", function()
  -- Without a GPU, NVRTC and ptxas still build the kernels for the H200: the largest head size's
  -- f32 accumulators (o; the backward's dk, dv and a tile's dq), fragments and scores fit in
  -- registers.
  -- Head sizes 64 and 128 take the wgmma forward (sim and sm_90 have it), others and, where
  -- asked (prefer_mma_sync), those too the mma.sync one.
  it("builds its kernels for sm_90 without local memory, every head size", function()
    local attention = require "tocha.attention"
    for _, d in ipairs({ 16, 64, 128 }) do
      for _, causal in ipairs({ false, true }) do
        local kernels = { attention.forward_kernel("bf16", d, causal), attention.backward_kernels("bf16", d, causal) }
        local main = select(2, attention.backward_kernels("bf16", d, causal))
        assert.are.equal(d == 16 and "tocha_attention_forward" or "tocha_attention_forward_wg", kernels[1].name)
        assert.are.equal(d == 16 and "tocha_attention_backward" or "tocha_attention_backward_wg", main.name)
        kernels[#kernels + 1] = main
        if d > 16 then
          assert.truthy(kernels[1]:ptx("sm_90"):find("wgmma.mma_async", 1, true), d)
          assert.truthy(main:ptx("sm_90"):find("wgmma.mma_async", 1, true), d)
          attention.prefer_mma_sync = true
          kernels[#kernels + 1] = attention.forward_kernel("bf16", d, causal)
          kernels[#kernels + 1] = select(2, attention.backward_kernels("bf16", d, causal))
          attention.prefer_mma_sync = false
          assert.are.equal("tocha_attention_forward", kernels[#kernels - 1].name)
          assert.are.equal("tocha_attention_backward", kernels[#kernels].name)
        end
        for _, k in ipairs(kernels) do
          local info = k:info("sm_90")
          assert.are.equal(0, info["local"], d)
          assert.is_true(info.registers <= 255, tostring(d))
        end
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
          local function shape(l) return shape_of(lead, l, d) end
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

      -- the wgmma forward (head sizes 64, 128) and the mma.sync one on the same inputs: both
      -- within the dtype's rounding of the reference; on sim, whose tensor cores sum each k step
      -- alike for both instructions, bit for bit, and so are the two backwards' gradients
      it("runs head sizes 64 and 128 on wgmma as the mma.sync kernels do, forward and backward", function()
        local attention = require "tocha.attention"
        local seed = 300
        for _, c in ipairs({ { 64, false, 70, 150, "bf16" }, { 128, true, 130, 130, "f16" }, { 64, true, 1, 65, "f16" },
          { 128, false, 64, 3, "bf16" } }) do
          seed = seed + 10
          local d, causal, lq, lk, dt = c[1], c[2], c[3], c[4], c[5]
          local q, k, v = randn({ 2, lq, d }, dt, seed), randn({ 2, lk, d }, dt, seed + 1), randn({ 2, lk, d }, dt, seed + 2)
          local wg, wg_lse = tocha.scaled_dot_product_attention(q, k, v, { causal = causal, lse = true })
          attention.prefer_mma_sync = true
          local ok, mma, mma_lse = pcall(tocha.scaled_dot_product_attention, q, k, v, { causal = causal, lse = true })
          attention.prefer_mma_sync = false
          assert.is_true(ok, tostring(mma))
          local label = ("%s d %d %dx%d%s"):format(dt, d, lq, lk, causal and " causal" or "")
          local want, sums = reference(values(q), values(k), values(v), 2, lq, lk, d, 1 / math.sqrt(d), causal)
          ref.compare_terms(wg, { want, sums }, ref.product_tol[dt], label .. " wgmma")
          ref.compare_terms(mma, { want, sums }, ref.product_tol[dt], label .. " mma.sync")
          if device == "sim" then
            assert.is_true(tocha.allclose(wg, mma, 0, 0), label)
            assert.is_true(tocha.allclose(wg_lse, mma_lse, 0, 0), label .. " lse")
            local dy = randn({ 2, lq, d }, dt, seed + 3)
            local wg_grads = { tocha.Attention.new(d, { causal = causal, dtype = dt }):backward(q, k, v, dy) }
            attention.prefer_mma_sync = true
            local mma_op = tocha.Attention.new(d, { causal = causal, dtype = dt })
            attention.prefer_mma_sync = false
            assert.are.equal("tocha_attention_backward", mma_op.main_kernel.name)
            local mma_grads = { mma_op:backward(q, k, v, dy) }
            for i, what in ipairs({ "dq", "dk", "dv" }) do
              assert.is_true(tocha.allclose(wg_grads[i], mma_grads[i], 0, 0), label .. " " .. what)
            end
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

      it("tocha.Attention: forward as the function's, backward against f64 gradients, causal or not", function()
        local seed = 200
        for _, c in ipairs({ { { 1, 2 }, 70, 90, 32, false, "bf16" }, { { 2 }, 64, 64, 64, true, "f16" },
          { { 1 }, 100, 40, 16, true, "bf16" }, { { 1 }, 20, 130, 128, false, "f16" } }) do
          seed = seed + 10
          local lead, lq, lk, d, causal, dt = c[1], c[2], c[3], c[4], c[5], c[6]
          local function shape(l) return shape_of(lead, l, d) end
          local att = tocha.Attention.new(d, { causal = causal, dtype = dt })
          local q, k, v = randn(shape(lq), dt, seed), randn(shape(lk), dt, seed + 1), randn(shape(lk), dt, seed + 2)
          local y = att:forward(q, k, v)
          assert.tensor.equal(tocha.scaled_dot_product_attention(q, k, v, { causal = causal }), y)
          local dy = randn(y:shape(), dt, seed + 3)
          local dq, dk, dv = att:backward(q, k, v, dy)
          local heads = ref.numel(lead)
          local want = reference_backward(values(q), values(k), values(v), values(dy), heads, lq, lk, d, 1 / math.sqrt(d),
            causal)
          local label = ("%s %dx%dx%d d %d%s"):format(dt, heads, lq, lk, d, causal and " causal" or "")
          ref.compare_terms(dv, want.dv, ref.product_tol[dt], label .. " dv")
          ref.compare_terms(dk, want.dk, ref.product_tol[dt], label .. " dk")
          ref.compare_terms(dq, want.dq, ref.product_tol[dt], label .. " dq")
        end
        fails("head_size: expected a multiple of 16 up to 128, got 20", tocha.Attention.new, 20)
        local att = tocha.Attention.new(32)
        fails("q: expected a head size (last dimension) of 32, got 16", att.forward, att, randn({ 2, 4, 16 }, "bf16", 1),
          randn({ 2, 4, 16 }, "bf16", 2), randn({ 2, 4, 16 }, "bf16", 3))
      end)

      it("tocha.Attention joins a model: its backward's workspace the model's", function()
        local inputs = {}
        for i, name in ipairs({ "q", "k", "v" }) do
          inputs[i] = tocha.Model.input({ -1, 2, 40, 32 }, { name = name, dtype = "bf16" })
        end
        local att = tocha.Attention.new(32, { causal = true })
        local m = tocha.Model(inputs, { att(inputs[1], inputs[2], inputs[3]):named("att") }):load(2, device)
        local q, k, v = randn({ 2, 2, 40, 32 }, "bf16", 300), randn({ 2, 2, 40, 32 }, "bf16", 301),
          randn({ 2, 2, 40, 32 }, "bf16", 302)
        local y = att:forward(q, k, v)
        assert.tensor.equal(y, m:forward({ q, k, v })[1])
        local _, cache = m:forward_train({ q, k, v })
        local dy = randn(y:shape(), "bf16", 303)
        local grads = m:backward({ dy }, cache)
        local dq, dk, dv = att:backward(q, k, v, dy)
        -- dq's f32 sums come from the key tiles' atomic adds, in no fixed order: a last bit of the
        -- dtype may differ between two runs
        local close = tocha.compare(grads[1]:cast("f32"), dq:cast("f32"), { rtol = 2 ^ -7, atol = 1e-6 })
        assert(close.ok, ("dq: %d elements differ by more than the last bit"):format(close.mismatched or -1))
        assert.tensor.equal(dk, grads[2])
        assert.tensor.equal(dv, grads[3])
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
