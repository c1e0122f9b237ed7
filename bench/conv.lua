-- bench/conv.lua: Conv2d forward on the convolutions of real networks (ResNet-50 at 224 x 224,
-- YOLOv8n at 640 x 640), halves on the tensor cores (the implicit GEMM), NHWC and NCHW (which
-- transposes x and y around the same GEMM), batch 16 and 64: median
-- device time over N calls (each call relays the weight out and allocates y, as a direct call
-- does) and TFLOP/s (2 n oh ow out in kh kw); the backward too (dx, dweight and dbias in one
-- call, 2 x the forward's work). Each case's forward is checked first against the
-- direct kernels (NCHW, f32 sums) on one image of it. bench/conv_torch.py times PyTorch's
-- conv2d (cuDNN, its best algorithm, in its best layout for the case) and writes the report.
--   tocha bench/conv.lua [--out DIR] [--launches N] [--only PATTERN]
local tocha = require "tocha"
local timing = require "bench.timing"

local opts = timing.arguments(arg, { out = "results/tmp-conv", launches = 20, only = "" })
os.execute("mkdir -p '" .. opts.out .. "'")
local device = tocha.default_device()
print(("benchmark on %s (%s), %d launches each"):format(device.name, device.product, opts.launches))

-- {name, in channels, out channels, kernel, stride, padding, input height = width}
local CASES = {
  { "resnet50 l1 1x1 64->64", 64, 64, 1, 1, 0, 56 },
  { "resnet50 l1 3x3 64->64", 64, 64, 3, 1, 1, 56 },
  { "resnet50 l1 1x1 64->256", 64, 256, 1, 1, 0, 56 },
  { "resnet50 l1 1x1 256->64", 256, 64, 1, 1, 0, 56 },
  { "resnet50 l2 3x3 s2 128->128", 128, 128, 3, 2, 1, 56 },
  { "resnet50 l2 3x3 128->128", 128, 128, 3, 1, 1, 28 },
  { "resnet50 l2 1x1 128->512", 128, 512, 1, 1, 0, 28 },
  { "resnet50 l2 1x1 512->128", 512, 128, 1, 1, 0, 28 },
  { "resnet50 l3 3x3 256->256", 256, 256, 3, 1, 1, 14 },
  { "resnet50 l3 1x1 256->1024", 256, 1024, 1, 1, 0, 14 },
  { "resnet50 l3 1x1 1024->256", 1024, 256, 1, 1, 0, 14 },
  { "resnet50 l4 3x3 512->512", 512, 512, 3, 1, 1, 7 },
  { "resnet50 l4 1x1 512->2048", 512, 2048, 1, 1, 0, 7 },
  { "resnet50 l4 1x1 2048->512", 2048, 512, 1, 1, 0, 7 },
  { "yolov8n 3x3 s2 16->32", 16, 32, 3, 2, 1, 320 },
  { "yolov8n 3x3 16->16", 16, 16, 3, 1, 1, 160 },
  { "yolov8n 1x1 32->32", 32, 32, 1, 1, 0, 160 },
  { "yolov8n 3x3 s2 32->64", 32, 64, 3, 2, 1, 160 },
  { "yolov8n 3x3 32->32", 32, 32, 3, 1, 1, 80 },
  { "yolov8n 3x3 s2 64->128", 64, 128, 3, 2, 1, 80 },
  { "yolov8n 3x3 64->64", 64, 64, 3, 1, 1, 40 },
  { "yolov8n 3x3 s2 128->256", 128, 256, 3, 2, 1, 40 },
  { "yolov8n 1x1 256->256", 256, 256, 1, 1, 0, 20 },
}
local BATCHES, DTYPES = { 16, 64 }, { "bf16", "f16" }
if device.kind == "sim" then -- a run there checks the script; its times mean nothing
  BATCHES, DTYPES = { 1 }, { "bf16" }
  for _, c in ipairs(CASES) do c[7] = math.min(c[7], 8) end
end

local rows = {}
-- One case in one dtype and layout: checked, then timed at each batch size into rows.
local function run_case(name, cin, cout, k, s, p, size, dt, layout)
  local nhwc = layout == "nhwc"
  local conv = tocha.Conv2d.new(cin, cout, k, { stride = s, padding = p, dtype = dt, layout = layout })
  assert(conv.igemm, name .. ": not on the tensor cores")
  local w = tocha.randn({ cout, cin, k, k }, { dtype = dt, device = device.name, seed = 3 }):mul(1 / math.sqrt(cin * k * k))
  local b = tocha.randn({ cout }, { dtype = dt, device = device.name, seed = 4 })
  -- one image against the direct kernels
  local direct = tocha.Conv2d.new(cin, cout, k, { stride = s, padding = p, dtype = dt })
  local x1 = tocha.randn({ 1, cin, size, size }, { dtype = dt, device = device.name, seed = 5 })
  local want = direct:forward(x1, w, b):cast("f32")
  local got = nhwc and conv:forward(x1:permute(1, 3, 4, 2):contiguous(), w, b):permute(1, 4, 2, 3):contiguous() or
    conv:forward(x1, w, b)
  local r = tocha.compare(got:cast("f32"), want, { rtol = 2e-2, atol = 2e-2 })
  if not r.ok then error(("%s %s %s: %d elements differ from the direct kernels'"):format(name, dt, layout, r.mismatched)) end
  for _, n in ipairs(BATCHES) do
    local xs = {}
    for i = 1, 2 do
      xs[i] = tocha.randn(nhwc and { n, size, size, cin } or { n, cin, size, size },
        { dtype = dt, device = device.name, seed = 10 + i })
    end
    local oh = math.floor((size + 2 * p - k) / s) + 1
    local flops = 2 * n * oh * oh * cout * cin * k * k
    local ms = timing.time_launches(device, function(i)
      local y = conv:forward(xs[i % 2 + 1], w, b)
      y:free()
    end, opts.launches)
    local _, splits = conv:igemm_split(xs[1]:shape())
    local function row(pass, f, t, tiled)
      rows[#rows + 1] = { name = name, pass = pass, dtype = dt, layout = layout, splits = splits, tensor_cores = tiled, n = n,
        cin = cin, cout = cout, k = k, stride = s, padding = p, size = size, flops = f, ms = t, tflops = f / (t * 1e9) }
      print(("%-28s %-8s %-5s %s n %-3d %9.4f ms %8.1f TFLOP/s"):format(name, pass, dt, layout, n, t, f / (t * 1e9)))
    end
    row("forward", flops, ms, "all")
    do -- the backward: dx and dweight (2 x the forward's work) and dbias
      local y = conv:forward(xs[1], w, b)
      local dy = tocha.randn(y:shape(), { dtype = dt, device = device.name, seed = 20 })
      y:free()
      local bms = timing.time_launches(device, function(i)
        local dx, dw, db = conv:backward(xs[i % 2 + 1], w, b, dy)
        dx:free() dw:free() db:free()
      end, opts.launches)
      row("backward", 2 * flops, bms, conv.igemm_dx and "all" or "dweight")
      dy:free()
    end
    for i = 1, 2 do xs[i]:free() end
  end
end

for _, case in ipairs(CASES) do
  if timing.selected(case[1], opts.only) then
    for _, dt in ipairs(DTYPES) do
      for _, layout in ipairs({ "nhwc", "nchw" }) do
        run_case(case[1], case[2], case[3], case[4], case[5], case[6], case[7], dt, layout)
      end
    end
  end
end

timing.write_csv(opts.out .. "/tocha.csv",
  { "name", "pass", "dtype", "layout", "splits", "tensor_cores", "n", "cin", "cout", "k", "stride", "padding", "size",
    "flops", "ms", "tflops" }, rows)
print("wrote " .. opts.out .. "/tocha.csv")
