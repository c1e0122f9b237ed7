-- bench/matmul.lua: matrix products (tocha.matmul, and the Linear layer's shapes) on square
-- sizes and the shapes of real models: median device time over N launches and TFLOP/s (2 m n
-- k a product). Each case's result is checked against sim's on a small version of the shape
-- first. bench/matmul_torch.py times torch.matmul (cuBLAS) on the same cases and writes the
-- report beside this one's.
--   tocha bench/matmul.lua [--out DIR] [--launches N] [--only PATTERN]
-- (--only: the cases whose name matches one of the comma-separated Lua patterns)
local tocha = require "tocha"
local timing = require "bench.timing"

local opts = timing.arguments(arg, { out = "results/tmp-matmul", launches = 30, only = "" })
os.execute("mkdir -p '" .. opts.out .. "'")
local device = tocha.default_device()
print(("benchmark on %s (%s), %d launches each"):format(device.name, device.product, opts.launches))

-- {name, a shape, b shape (as stored), b transposed (a view of b:t(), as a Linear's weight),
-- dtypes}. Shapes: square products, a transformer's linear layers over 8192 tokens (768 ->
-- 3072 -> 768, and 4096 x 4096), attention's batched products (32 heads' 512 x 64 by 64 x
-- 512), a classifier's head (8192 x 2048 -> 1000), a size not a multiple of the tiles.
-- ("tf32": f32 tensors multiplied with tf32 = true, PyTorch's allow_tf32 on that row alone)
local HALVES, ALL = { "f16", "bf16" }, { "f16", "bf16", "f32", "tf32" }
local CASES = {
  { "square 1024", { 1024, 1024 }, { 1024, 1024 }, false, ALL },
  { "square 2048", { 2048, 2048 }, { 2048, 2048 }, false, ALL },
  { "square 4096", { 4096, 4096 }, { 4096, 4096 }, false, { "f16", "bf16", "tf32" } },
  { "square 8192", { 8192, 8192 }, { 8192, 8192 }, false, HALVES },
  { "linear 768->3072", { 8192, 768 }, { 3072, 768 }, true, ALL },
  { "linear 3072->768", { 8192, 3072 }, { 768, 3072 }, true, { "f16", "bf16", "tf32" } },
  { "linear 4096->4096", { 4096, 4096 }, { 4096, 4096 }, true, { "f16", "bf16", "tf32" } }, -- (tf32: square 4096 K-major)
  { "attention scores", { 32, 512, 64 }, { 32, 64, 512 }, false, HALVES },
  { "classifier 2048->1000", { 8192, 2048 }, { 1000, 2048 }, true, HALVES },
  { "square 1000", { 1000, 1000 }, { 1000, 1000 }, false, HALVES },
}
-- On sim (a run there checks the script; its times mean nothing), every side at most 96.
if device.kind == "sim" then
  for _, c in ipairs(CASES) do
    for _, s in ipairs({ c[2], c[3] }) do
      for i = 1, #s do s[i] = math.min(s[i], 96) end
    end
  end
end

local function shape_text(s) return table.concat(s, "x") end

local rows = {}
for _, case in ipairs(CASES) do
  local name, sa, sb, transposed, dtypes = case[1], case[2], case[3], case[4], case[5]
  if not timing.selected(name, opts.only) then goto next_case end
  for _, label in ipairs(dtypes) do
    local dt, mm_opts = label == "tf32" and "f32" or label, { tf32 = label == "tf32" }
    -- checked against sim on the shape cut to at most 40 a side
    local small_a, small_b = {}, {}
    for i, s in ipairs(sa) do small_a[i] = math.min(s, 40) end
    for i, s in ipairs(sb) do small_b[i] = math.min(s, 40) end
    local a0 = tocha.randn(small_a, { dtype = dt, device = "sim", seed = 1 })
    local b0 = tocha.randn(small_b, { dtype = dt, device = "sim", seed = 2 })
    local want = tocha.matmul(a0, transposed and b0:t() or b0, mm_opts)
    local a1, b1 = a0:to(device.name), b0:to(device.name)
    local got = tocha.matmul(a1, transposed and b1:t() or b1, mm_opts)
    local r = tocha.compare(got:to("sim"):cast("f64"), want:cast("f64"), { rtol = 2e-2, atol = 2e-2 })
    if not r.ok then error(("%s %s: %d elements differ from sim's"):format(name, label, r.mismatched)) end

    local sets = {}
    for s = 1, 2 do
      local b = tocha.randn(sb, { dtype = dt, device = device, seed = s + 10 })
      sets[s] = { a = tocha.randn(sa, { dtype = dt, device = device, seed = s }), b = b, bv = transposed and b:t() or b }
    end
    local m, k = sa[#sa - 1], sa[#sa]
    local n = transposed and sb[#sb - 1] or sb[#sb]
    local batch = #sa == 3 and sa[1] or 1
    local ms = timing.time_launches(device, function(i)
      local s = sets[i % 2 + 1]
      local c = tocha.matmul(s.a, s.bv, mm_opts)
      c:free()
    end, opts.launches)
    local tflops = 2 * batch * m * n * k / (ms * 1e9)
    local row = { name = name, dtype = label, a = shape_text(sa), b = shape_text(sb), transposed = transposed and 1 or 0,
      flops = 2 * batch * m * n * k, ms = ms, tflops = tflops }
    rows[#rows + 1] = row
    print(("%-22s %-5s %-14s %-14s%s %9.4f ms %8.1f TFLOP/s"):format(name, label, row.a, row.b, transposed and " (b^T)" or "",
      ms, tflops))
    for s = 1, 2 do sets[s].a:free() sets[s].b:free() end
  end
  ::next_case::
end

timing.write_csv(opts.out .. "/tocha.csv", { "name", "dtype", "a", "b", "transposed", "flops", "ms", "tflops" }, rows)
print("wrote " .. opts.out .. "/tocha.csv")
