-- bench/optim.lua: one AdamW and one SGD (momentum) step over a ResNet-18's 62 parameters (11.7 M,
-- f32), median device time over N steps, beside the step's bandwidth floor (AdamW moves 7 x 4
-- bytes an element: parameter read and written, gradient read, both moments read and written;
-- SGD with momentum 5 x 4). bench/optim_torch.py times PyTorch's fused AdamW and foreach SGD on
-- the same shapes and writes the report.
--   tocha bench/optim.lua [--out DIR] [--launches N]
local tocha = require "tocha"
local timing = require "bench.timing"

local opts = timing.arguments(arg, { out = "results/tmp-optim", launches = 50 })
os.execute("mkdir -p '" .. opts.out .. "'")
local device = tocha.default_device()
local copy_gbps = device.kind == "sim" and 1 or timing.copy_bandwidth(device)
print(("optimizer step on %s, copy %.1f GB/s"):format(device.name, copy_gbps))

-- ResNet-18's parameters: conv weights, batch-norm weights and biases, the classifier.
local shapes = { { 64, 3, 7, 7 }, { 64 }, { 64 } }
local function block(cin, cout, down)
  shapes[#shapes + 1] = { cout, cin, 3, 3 }; shapes[#shapes + 1] = { cout }; shapes[#shapes + 1] = { cout }
  shapes[#shapes + 1] = { cout, cout, 3, 3 }; shapes[#shapes + 1] = { cout }; shapes[#shapes + 1] = { cout }
  if down then shapes[#shapes + 1] = { cout, cin, 1, 1 }; shapes[#shapes + 1] = { cout }; shapes[#shapes + 1] = { cout } end
end
block(64, 64); block(64, 64)
block(64, 128, true); block(128, 128)
block(128, 256, true); block(256, 256)
block(256, 512, true); block(512, 512)
shapes[#shapes + 1] = { 1000, 512 }; shapes[#shapes + 1] = { 1000 }
if device.kind == "sim" then shapes = { { 64, 3, 7, 7 }, { 64 }, { 1000, 12 } } end
local total = 0
for _, s in ipairs(shapes) do
  local n = 1
  for _, v in ipairs(s) do n = n * v end
  total = total + n
end
print(("%d parameters, %d elements"):format(#shapes, total))

local rows = {}
for _, case in ipairs({ { "AdamW", { lr = 1e-3 }, 7 }, { "SGD", { lr = 0.1, momentum = 0.9 }, 5 } }) do
  local params, grads = {}, {}
  for i, s in ipairs(shapes) do
    local name = ("p%02d"):format(i)
    params[name] = tocha.randn(s, { device = device, seed = i })
    grads[name] = tocha.randn(s, { device = device, seed = 1000 + i })
  end
  local opt = tocha.optim[case[1]](params, case[2])
  local ms = timing.time_launches(device, function() opt:step(grads) end, opts.launches)
  local bytes = case[3] * 4 * total
  local floor_ms = bytes / (copy_gbps * 1e6)
  rows[#rows + 1] = { name = case[1], elements = total, bytes = bytes, ms = ms, floor_ms = floor_ms,
    pct_copy = 100 * floor_ms / ms }
  print(("%-6s %9.4f ms   floor %8.4f ms   %5.2fx the floor   %5.1f%% of copy"):format(case[1], ms, floor_ms, ms / floor_ms,
    100 * floor_ms / ms))
end
timing.write_csv(opts.out .. "/tocha.csv", { "name", "elements", "bytes", "ms", "floor_ms", "pct_copy" }, rows)
