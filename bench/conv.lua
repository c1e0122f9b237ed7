-- bench/conv.lua: convolutions of real networks, halves (and f32 read as tf32, dtype "tf32":
-- Conv2d's tf32 option, the implicit GEMM's cases only), NHWC and NCHW, batch 1, 16 and 64:
-- median device time over N calls (each call relays the weight out and allocates y, as a
-- direct call does), TFLOP/s (2 n oh ow out in kh kw / groups) and bytes moved (x, y and the
-- weight read or written once: the floor of a memory-bound case). Families (column op):
--   conv       Conv2d of ResNet-50 at 224 x 224 and YOLOv8n at 640 x 640 past their stems, the
--              tensor cores' implicit GEMM, forward and backward (dx, dweight and dbias in one
--              call, 2 x the forward's work);
--   conv+silu  YOLOv8n's Conv + BN + SiLU block at inference: one Conv2d with the activation in
--              its epilogue (the BatchNorm folded into its weights), against PyTorch's conv2d
--              then silu; forward;
--   deconv     ConvTranspose2d of a U-Net's and a VAE decoder's upsampling, forward and backward;
--   depthwise  the depthwise 3 x 3, 5 x 5 and 7 x 7 convolutions of MobileNetV2, EfficientNet
--              and ConvNeXt (their own kernels in NHWC, the direct ones' forward in NCHW;
--              memory-bound: GB/s and % of the copy bandwidth), forward and backward.
-- Each case's forward is checked first against the direct kernels in f32 (NCHW) on one image.
-- bench/conv_torch.py times PyTorch's peer of each row (cuDNN, its best algorithm, in its best
-- layout for the case) and writes the report.
--   tocha bench/conv.lua [--out DIR] [--launches N] [--only PATTERN] [--dtypes bf16,f16,tf32]
local tocha = require "tocha"
local timing = require "bench.timing"

local opts = timing.arguments(arg, { out = "results/tmp-conv", launches = 20, only = "", dtypes = "bf16,f16,tf32" })
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
for _, c in ipairs(CASES) do c.op = "conv" end
-- YOLOv8n's Conv blocks (Conv + BN + SiLU), fused
for i = 15, #CASES do
  local c = CASES[i]
  CASES[#CASES + 1] = { c[1] .. " +silu", c[2], c[3], c[4], c[5], c[6], c[7], op = "conv+silu" }
end
-- {name, in, out, kernel, stride, padding, input size, output padding}
for _, c in ipairs({
  { "unet up 2x2 s2 512->256", 512, 256, 2, 2, 0, 28, 0 }, { "unet up 2x2 s2 256->128", 256, 128, 2, 2, 0, 56, 0 },
  { "unet up 2x2 s2 128->64", 128, 64, 2, 2, 0, 112, 0 }, { "vae up 4x4 s2 256->128", 256, 128, 4, 2, 1, 32, 0 },
  { "decoder up 3x3 s2 op1 128->64", 128, 64, 3, 2, 1, 64, 1 },
}) do
  c.op = "deconv"
  CASES[#CASES + 1] = c
end
for _, c in ipairs({
  { "mobilenetv2 dw 3x3 144", 144, 144, 3, 1, 1, 56 }, { "mobilenetv2 dw 3x3 s2 144", 144, 144, 3, 2, 1, 56 },
  { "mobilenetv2 dw 3x3 192", 192, 192, 3, 1, 1, 28 }, { "mobilenetv2 dw 3x3 576", 576, 576, 3, 1, 1, 14 },
  { "mobilenetv2 dw 3x3 960", 960, 960, 3, 1, 1, 7 }, { "efficientnet dw 5x5 240", 240, 240, 5, 1, 2, 28 },
  { "convnext dw 7x7 96", 96, 96, 7, 1, 3, 56 },
}) do
  c.op = "depthwise"
  CASES[#CASES + 1] = c
end
local BATCHES, DTYPES = { 1, 16, 64 }, {}
for dt in opts.dtypes:gmatch("[^,]+") do
  if dt ~= "bf16" and dt ~= "f16" and dt ~= "tf32" then error("--dtypes: expected bf16, f16 or tf32, got " .. dt) end
  DTYPES[#DTYPES + 1] = dt
end
if device.kind == "sim" then -- a run there checks the script; its times mean nothing
  BATCHES = { 1 }
  for _, c in ipairs(CASES) do c[7] = math.min(c[7], 8) end
end

-- A row's dtype as the tensors hold it ("tf32": f32).
local function stored(dt) return dt == "tf32" and "f32" or dt end

-- The op of a case in dtype dt and layout, and its reference: the same op in f32, NCHW (the
-- direct kernels).
local function ops_of(c, dt, layout)
  local cin, cout, k, s, p = c[2], c[3], c[4], c[5], c[6]
  if c.op == "deconv" then
    local o = { stride = s, padding = p, output_padding = c[8], dtype = "f32" }
    local ref = tocha.ConvTranspose2d.new(cin, cout, k, o)
    o.layout, o.dtype = layout, dt
    return tocha.ConvTranspose2d.new(cin, cout, k, o), ref
  end
  local o = { stride = s, padding = p, dtype = "f32", groups = c.op == "depthwise" and cin or 1 }
  local ref = tocha.Conv2d.new(cin, cout, k, o)
  o.layout, o.dtype, o.activation = layout, stored(dt), c.op == "conv+silu" and "silu" or nil
  o.tf32 = dt == "tf32"
  return tocha.Conv2d.new(cin, cout, k, o), ref
end

local rows = {}
-- One case in one dtype and layout: checked, then timed at each batch size into rows.
local function run_case(c, dt, layout)
  local name, cin, cout, k, s, p, size = c[1], c[2], c[3], c[4], c[5], c[6], c[7]
  local nhwc = layout == "nhwc"
  local op, direct = ops_of(c, dt, layout)
  local depthwise = c.op == "depthwise"
  assert(depthwise or op.igemm, name .. ": not on the tensor cores")
  local wshape = c.op == "deconv" and { cin, cout, k, k } or { cout, depthwise and 1 or cin, k, k }
  local fan = depthwise and k * k or cin * k * k
  if dt == "tf32" then assert(op.tf32, name .. ": not on tf32") end
  local w = tocha.randn(wshape, { dtype = stored(dt), device = device.name, seed = 3 }):mul(1 / math.sqrt(fan))
  local b = tocha.randn({ cout }, { dtype = stored(dt), device = device.name, seed = 4 })
  -- one image against the direct kernels in f32, NCHW
  local x1 = tocha.randn({ 1, cin, size, size }, { dtype = stored(dt), device = device.name, seed = 5 })
  local want = direct:forward(x1:cast("f32"), w:cast("f32"), b:cast("f32"))
  if c.op == "conv+silu" then want = want:silu() end
  local got = nhwc and op:forward(x1:permute(1, 3, 4, 2):contiguous(), w, b):permute(1, 4, 2, 3):contiguous() or
    op:forward(x1, w, b)
  local r = tocha.compare(got:cast("f32"), want:cast("f32"), { rtol = 2e-2, atol = 2e-2 })
  if not r.ok then error(("%s %s %s: %d elements differ from the direct kernels'"):format(name, dt, layout, r.mismatched)) end
  local size_of = require("tocha.dtype").size(stored(dt))
  for _, n in ipairs(BATCHES) do
    local xs = {}
    for i = 1, 2 do
      xs[i] = tocha.randn(nhwc and { n, size, size, cin } or { n, cin, size, size },
        { dtype = stored(dt), device = device.name, seed = 10 + i })
    end
    local y0 = op:forward(xs[1], w, b)
    local ys = y0:shape()
    local oh = nhwc and ys[2] or ys[3]
    y0:free()
    -- a transposed convolution's work is its convolution's: each input pixel by the whole weight
    local macs = c.op == "deconv" and n * size * size * cin * cout * k * k or n * oh * oh * cout * fan
    local flops = 2 * macs
    local bytes = (n * cin * size * size + n * cout * oh * oh + wshape[1] * wshape[2] * k * k) * size_of
    local ms = timing.time_launches(device, function(i)
      local y = op:forward(xs[i % 2 + 1], w, b)
      y:free()
    end, opts.launches)
    local splits = 1
    if op.igemm and op.igemm_split then splits = select(2, op:igemm_split(xs[1]:shape())) end
    local function row(pass, f, t, tiled, moved)
      rows[#rows + 1] = { op = c.op, name = name, pass = pass, dtype = dt, layout = layout, splits = splits,
        tensor_cores = tiled, n = n, cin = cin, cout = cout, k = k, stride = s, padding = p, output_padding = c[8] or 0,
        size = size, flops = f, bytes = moved, ms = t, tflops = f / (t * 1e9), gbps = moved / (t * 1e6) }
      print(("%-32s %-9s %-8s %-5s %s n %-3d %9.4f ms %8.1f TFLOP/s %7.0f GB/s"):format(name, c.op, pass, dt, layout, n, t,
        f / (t * 1e9), moved / (t * 1e6)))
    end
    row("forward", flops, ms, depthwise and "none" or "all", bytes)
    if c.op ~= "conv+silu" then -- the backward: dx and dweight (2 x the forward's work) and dbias
      local y = op:forward(xs[1], w, b)
      local dy = tocha.randn(y:shape(), { dtype = stored(dt), device = device.name, seed = 20 })
      y:free()
      local bms = timing.time_launches(device, function(i)
        local dx, dw, db = op:backward(xs[i % 2 + 1], w, b, dy)
        dx:free() dw:free() db:free()
      end, opts.launches)
      -- read x, dy and w; written dx and dw
      row("backward", 2 * flops, bms, depthwise and "none" or op.igemm_dx and "all" or "dweight",
        2 * bytes - (n * cout * oh * oh) * size_of)
      dy:free()
    end
    for i = 1, 2 do xs[i]:free() end
  end
end

for _, case in ipairs(CASES) do
  if timing.selected(case[1], opts.only) then
    for _, dt in ipairs(DTYPES) do
      -- tf32: the implicit GEMM's convolutions (Conv2d of groups 1)
      if dt ~= "tf32" or case.op == "conv" or case.op == "conv+silu" then
        for _, layout in ipairs({ "nhwc", "nchw" }) do run_case(case, dt, layout) end
      end
    end
  end
end

timing.write_csv(opts.out .. "/tocha.csv",
  { "op", "name", "pass", "dtype", "layout", "splits", "tensor_cores", "n", "cin", "cout", "k", "stride", "padding",
    "output_padding", "size", "flops", "bytes", "ms", "tflops", "gbps" }, rows)
print("wrote " .. opts.out .. "/tocha.csv")
