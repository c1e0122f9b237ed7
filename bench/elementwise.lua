-- bench/elementwise.lua: tocha.Elementwise's kernels and tocha.ChannelCat's (the join of two
-- equal tensors along dimension 2, as "cat"), forward and backward, over sizes from a
-- detector neck's activations to large tensors, in f32, f16 and bf16: median device time over N
-- launches (two tensor sets in turn, so that no launch finds its inputs in L2), GB/s of bytes
-- read plus written, % of the device's copy bandwidth, and a device copy of the same bytes timed
-- the same way. Each kernel's output is checked against the same op on sim before it is timed.
-- bench/elementwise_torch.py times PyTorch's same ops on the cases this writes.
--   tocha bench/elementwise.lua [--out DIR] [--launches N] [--quick]
local tocha = require "tocha"
local timing = require "bench.timing"

local opts = timing.arguments(arg, { out = "results/tmp-elementwise", launches = 50, quick = false })
os.execute("mkdir -p '" .. opts.out .. "'")
local device = tocha.default_device()
print(("benchmark on %s (%s), %d launches each"):format(device.name, device.product, opts.launches))

local FNS = { "relu", "gelu", "sigmoid", "exp", "add", "mul", "max", "cat" }
local DTYPES = { "f32", "f16", "bf16" }
-- Shapes: neck activations of a detector at batch 16 (P3 to P5 of a 640 input), then flat
-- tensors of 2^24 and 2^26 elements.
local SHAPES = { { 16, 256, 80, 80 }, { 16, 512, 40, 40 }, { 16, 1024, 20, 20 }, { 2 ^ 24 }, { 2 ^ 26 } }
if opts.quick then SHAPES = { { 16, 256, 80, 80 }, { 2 ^ 26 } } end
if device.kind == "sim" then SHAPES = { { 2, 3, 8, 8 }, { 1000 } } end -- the script's own check, not figures

local copy_gbps = timing.copy_rate(device)

local numel = timing.numel

local same_copy = {}
local function same_copy_ms(bytes)
  if same_copy[bytes] then return same_copy[bytes] end
  local n = math.max(16, math.floor(bytes / 2 / 16) * 16)
  local src = tocha.empty({ n }, { dtype = "u8", device = device }):fill(1)
  local dst = tocha.empty({ n }, { dtype = "u8", device = device })
  local ms = timing.time_launches(device, function() dst:copy(src) end, opts.launches)
  src:free(); dst:free()
  same_copy[bytes] = ms * bytes / (2 * n)
  return same_copy[bytes]
end

-- Checks op's output on device against the same op on sim, on a small tensor.
local function make(fn, dt)
  if fn ~= "cat" then return tocha.Elementwise.new(fn, dt) end
  local cat = tocha.ChannelCat.new(dt)
  cat.arity = 2
  return cat
end

local checked = {}
local function check(fn, dt)
  local key = fn .. dt
  if checked[key] then return end
  local sim_op, op = make(fn, dt), make(fn, dt)
  local a = tocha.randn({ 1, 4099 }, { dtype = dt, device = "sim", seed = 1 })
  local b = tocha.randn({ 1, 4099 }, { dtype = dt, device = "sim", seed = 2 })
  local want = (op.arity == 1 and sim_op:forward(a) or sim_op:forward(a, b)):cast("f64")
  local da, db = a:to(device.name), b:to(device.name)
  local got = (op.arity == 1 and op:forward(da) or op:forward(da, db)):to("sim"):cast("f64")
  -- f16 and bf16: one rounding of f32 results, whose last bits may differ between the device's
  -- math library and the host's
  local tol = ({ f32 = 1e-5, f16 = 1e-3, bf16 = 8e-3 })[dt]
  local r = tocha.compare(got, want, { rtol = tol, atol = tol })
  if not r.ok then error(("%s %s: %d elements differ from sim's"):format(fn, dt, r.mismatched)) end
  checked[key] = true
end

local rows = {}
for _, fn in ipairs(FNS) do
  for _, dt in ipairs(DTYPES) do
    check(fn, dt)
    local op = make(fn, dt)
    for _, shape in ipairs(SHAPES) do
      if fn == "cat" and #shape < 2 then shape = { 2, shape[1] / 2 } end
      local n = numel(shape)
      local size = dt == "f32" and 4 or 2
      local sets = {}
      for s = 1, 2 do
        sets[s] = { a = tocha.randn(shape, { dtype = dt, device = device, seed = s }),
          b = op.arity == 2 and tocha.randn(shape, { dtype = dt, device = device, seed = s + 10 }) or nil,
          dy = tocha.randn(fn == "cat" and { shape[1], 2 * shape[2], unpack(shape, 3) } or shape,
            { dtype = dt, device = device, seed = s + 20 }),
          y = tocha.empty(fn == "cat" and { shape[1], 2 * shape[2], unpack(shape, 3) } or shape,
            { dtype = dt, device = device }),
          d2 = op.arity == 2 and tocha.empty(shape, { dtype = dt, device = device }) or nil }
      end
      for _, dir in ipairs({ "forward", "backward" }) do
        local launch, tensors
        if dir == "forward" then
          tensors = op.arity + 1
          launch = function(k)
            local s = sets[k % 2 + 1]
            if op.arity == 1 then op:forward(s.a, s.y) else op:forward(s.a, s.b, s.y) end
          end
        else
          tensors = op.arity == 1 and 3 or 5
          launch = function(k)
            local s = sets[k % 2 + 1]
            if fn == "cat" then op:backward(s.a, s.b, s.dy, s.a, s.b)
            elseif op.arity == 1 then op:backward(s.a, s.dy, s.y)
            else op:backward(s.a, s.b, s.dy, s.y, s.d2) end
          end
        end
        local ms = timing.time_launches(device, launch, opts.launches)
        if fn == "cat" then tensors = 4 end -- a and b, and the joined tensor of both their sizes
        local bytes = tensors * n * size
        local gbps = bytes / (ms * 1e6)
        local row = { fn = fn, dir = dir, dtype = dt, shape = table.concat(shape, "x"), numel = n, bytes = bytes,
          ms = ms, gbps = gbps, pct_copy = 100 * gbps / copy_gbps, same_copy_ms = same_copy_ms(bytes) }
        rows[#rows + 1] = row
        print(("%-8s %-8s %-5s %-16s %9.4f ms %8.1f GB/s %6.1f%% of copy (same-bytes copy %.1f%%)"):format(fn, dir, dt,
          row.shape, ms, gbps, row.pct_copy, 100 * bytes / (row.same_copy_ms * 1e6) / copy_gbps))
      end
      for s = 1, 2 do for _, t in pairs(sets[s]) do t:free() end end
    end
  end
end

timing.write_csv(opts.out .. "/tocha.csv",
  { "fn", "dir", "dtype", "shape", "numel", "bytes", "ms", "gbps", "pct_copy", "same_copy_ms" }, rows)
local f = assert(io.open(opts.out .. "/host.csv", "w"))
f:write("measure,value\ncopy_gbps,", copy_gbps, "\n")
f:close()
print("wrote " .. opts.out .. "/tocha.csv")
