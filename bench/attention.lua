-- bench/attention.lua: scaled dot-product attention (kernels/attention.cu) on the shapes of
-- real models: BERT-base (12 heads of 64, 512 tokens), GPT-2 and LLaMA-style causal layers
-- (64 and 128 a head, 1024 to 8192 tokens), a ViT's 197 tokens, and a long sequence at batch 1;
-- bf16 and f16, forward (tocha.scaled_dot_product_attention) and backward (tocha.Attention's,
-- which recomputes the forward). Median device time over N calls, each allocating its results
-- as a user's call does, and TFLOP/s: 4 B H LQ LK D a forward (half that causal), 2.5 times
-- that a backward (PyTorch's and flash-attention's convention). Each case is checked first
-- against the f32 matmul + softmax composition on one head. bench/attention_torch.py times
-- PyTorch's F.scaled_dot_product_attention (its flash kernels) and writes the report.
--   tocha bench/attention.lua [--out DIR] [--launches N] [--only PATTERN] [--forward wgmma|mma_sync]
-- (--forward mma_sync: the mma.sync kernels, forward and backward, for head sizes 64 and 128
-- too, for an A/B run)
local tocha = require "tocha"
local timing = require "bench.timing"

local opts = timing.arguments(arg, { out = "results/tmp-attention", launches = 20, only = "", forward = "wgmma" })
if opts.forward ~= "wgmma" and opts.forward ~= "mma_sync" then error("--forward: expected wgmma or mma_sync, got " .. opts.forward) end
require("tocha.attention").prefer_mma_sync = opts.forward == "mma_sync"
os.execute("mkdir -p '" .. opts.out .. "'")
local device = tocha.default_device()
print(("benchmark on %s (%s), %d launches each"):format(device.name, device.product, opts.launches))

-- {name, batch, heads, tokens, head size, causal}
local CASES = {
  { "bert-base 512", 32, 12, 512, 64, false },
  { "vit-b 197", 64, 12, 197, 64, false },
  { "gpt2 1024 causal", 16, 12, 1024, 64, true },
  { "llama 2048 causal", 4, 32, 2048, 128, true },
  { "llama 4096 causal", 2, 32, 4096, 128, true },
  { "long 8192", 1, 16, 8192, 128, false },
  { "long 8192 causal", 1, 16, 8192, 64, true },
}
local DTYPES = { "bf16", "f16" }
if device.kind == "sim" then -- a run there checks the script; its times mean nothing
  DTYPES = { "bf16" }
  for _, c in ipairs(CASES) do c[2], c[3], c[4] = 1, 1, math.min(c[4], 80) end
end

local rows = {}
for _, c in ipairs(CASES) do
  if timing.selected(c[1], opts.only) then
    local name, b, h, l, d, causal = c[1], c[2], c[3], c[4], c[5], c[6]
    for _, dt in ipairs(DTYPES) do
      local function randn(seed) return tocha.randn({ b, h, l, d }, { dtype = dt, device = device.name, seed = seed }) end
      local sets = { { randn(1), randn(2), randn(3) }, { randn(4), randn(5), randn(6) } }
      -- one head against the f32 composition
      local q1, k1, v1 = sets[1][1]:narrow(1, 1, 1):narrow(2, 1, 1), sets[1][2]:narrow(1, 1, 1):narrow(2, 1, 1),
        sets[1][3]:narrow(1, 1, 1):narrow(2, 1, 1)
      local s = tocha.matmul(q1:cast("f32"), k1:cast("f32"):transpose(3, 4)):mul(1 / math.sqrt(d))
      if causal then -- -1e30 above the diagonal (key j > query i)
        local index = {}
        for i = 1, l do index[i] = i end
        local at = tocha.tensor(index, { dtype = "f32", device = device.name })
        s = s + at:view(1, l):gt(at:view(l, 1)):cast("f32"):mul(-1e30)
      end
      local want = tocha.matmul(s:softmax(4), v1:cast("f32"))
      local got = tocha.scaled_dot_product_attention(q1:contiguous(), k1:contiguous(), v1:contiguous(), { causal = causal })
      local r = tocha.compare(got:cast("f32"), want, { rtol = 2e-2, atol = 2e-2 })
      if not r.ok then error(("%s %s: %d elements differ from the composition's"):format(name, dt, r.mismatched)) end
      local flops = 4 * b * h * l * l * d * (causal and 0.5 or 1)
      local ms = timing.time_launches(device, function(i)
        local t = sets[i % 2 + 1]
        tocha.scaled_dot_product_attention(t[1], t[2], t[3], { causal = causal }):free()
      end, opts.launches)
      local function row(pass, f, t)
        rows[#rows + 1] = { name = name, pass = pass, dtype = dt, batch = b, heads = h, tokens = l, head_size = d,
          causal = causal and 1 or 0, flops = f, ms = t, tflops = f / (t * 1e9) }
        print(("%-20s %-8s %-5s %9.4f ms %8.1f TFLOP/s"):format(name, pass, dt, t, f / (t * 1e9)))
      end
      row("forward", flops, ms)
      local att = tocha.Attention.new(d, { causal = causal, dtype = dt })
      local dy = randn(7)
      local bms = timing.time_launches(device, function(i)
        local t = sets[i % 2 + 1]
        local dq, dk, dv = att:backward(t[1], t[2], t[3], dy)
        dq:free() dk:free() dv:free()
      end, opts.launches)
      row("backward", 2.5 * flops, bms)
      dy:free()
      for _, set in ipairs(sets) do for _, t in ipairs(set) do t:free() end end
    end
  end
end

timing.write_csv(opts.out .. "/tocha.csv",
  { "name", "pass", "dtype", "batch", "heads", "tokens", "head_size", "causal", "flops", "ms", "tflops" }, rows)
print("wrote " .. opts.out .. "/tocha.csv")
