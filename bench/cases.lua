-- bench/cases.lua: the benchmark's cases, shared by the Lua benchmark and (through the CSV it
-- writes) the PyTorch one. Three suites:
--   rows    the long rows: scales 2x2, 3x3, 4x4, 2x1, 1x2 at widths 1024, 1020 and 1023, about
--           512 MB moved each (input read once + output written once), NCHW;
--   shapes  what networks feed an upsample: detector necks, U-Net and image-VAE decoders,
--           feature pyramids, super-resolution and GAN generators, 7x7 and 8x8 maps, a
--           3-channel image, in both layouts;
--   sweep   about 256 MB moved at 2x2: NCHW over the width W from 1 to 4096, NHWC over the
--           channels C from 1 to 512.
-- Every case: {suite, name, op, dtype, layout, shape = {B, C, H, W} (by meaning, whatever the
-- layout), sh, sw, bytes}.
local M = {}

M.suites = { "rows", "shapes", "sweep" }
local SIZES = { f32 = 4, f16 = 2, bf16 = 2, u8 = 1 }
local FORWARD_DTYPES = { "f32", "f16", "bf16", "u8" }
local BACKWARD_DTYPES = { "f32", "f16", "bf16" }

-- The input of an upsample in each network, {name, B, C, H, W}, scale 2x2.
M.networks = {
  -- YOLO-style necks (P5 -> P4 and P4 -> P3 of a 640 and a 1280 input) at batch 1, 16 and 64.
  { "neck 640 P5 b1", 1, 512, 20, 20 }, { "neck 640 P4 b1", 1, 256, 40, 40 },
  { "neck 640 P5 b16", 16, 512, 20, 20 }, { "neck 640 P4 b16", 16, 256, 40, 40 },
  { "neck 640 P5 b64", 64, 512, 20, 20 }, { "neck 640 P4 b64", 64, 256, 40, 40 },
  { "neck 1280 P5 b1", 1, 512, 40, 40 }, { "neck 1280 P4 b1", 1, 256, 80, 80 },
  { "neck 1280 P5 b16", 16, 512, 40, 40 }, { "neck 1280 P4 b16", 16, 256, 80, 80 },
  { "neck 1280 P5 b64", 64, 512, 40, 40 }, { "neck 1280 P4 b64", 64, 256, 80, 80 },
  -- U-Net decoder of a 256x256 input, batch 16.
  { "unet 16x16 b16", 16, 512, 16, 16 }, { "unet 32x32 b16", 16, 256, 32, 32 },
  { "unet 64x64 b16", 16, 128, 64, 64 }, { "unet 128x128 b16", 16, 64, 128, 128 },
  -- Image-VAE decoder (512x512 output), batch 1 and 4.
  { "vae 64x64 b1", 1, 512, 64, 64 }, { "vae 128x128 b1", 1, 512, 128, 128 },
  { "vae 256x256 b1", 1, 256, 256, 256 }, { "vae 128x128 b4", 4, 512, 128, 128 },
  -- Feature pyramid of an 800x1344 input, 256 channels, batch 2.
  { "fpn P5 b2", 2, 256, 25, 42 }, { "fpn P4 b2", 2, 256, 50, 84 }, { "fpn P3 b2", 2, 256, 100, 168 },
  -- Super-resolution (x2 twice, 64 channels) and a GAN generator's first stages, batch 16 and 64.
  { "sr 64x64 b16", 16, 64, 64, 64 }, { "sr 128x128 b16", 16, 64, 128, 128 },
  { "gan 4x4 b64", 64, 512, 4, 4 }, { "gan 8x8 b64", 64, 512, 8, 8 }, { "gan 16x16 b64", 64, 256, 16, 16 },
  -- 7x7 and 8x8 maps.
  { "map 7x7 b32", 32, 2048, 7, 7 }, { "map 8x8 b32", 32, 512, 8, 8 },
  -- A 3-channel image at 2x.
  { "image 224 b64", 64, 3, 224, 224 }, { "image 512 b8", 8, 3, 512, 512 },
  -- Narrow rows seen in practice.
  { "narrow 128x16 b64", 64, 64, 128, 16 }, { "narrow 128x16 b128", 128, 64, 128, 16 },
  { "narrow 64x32 b128", 128, 64, 64, 32 }, { "wide 256x256 b8", 8, 64, 256, 256 },
}

M.sweep_widths = { 1, 2, 3, 4, 7, 8, 13, 16, 20, 31, 32, 40, 64, 80, 100, 128, 255, 256, 512, 640,
  1023, 1024, 1920, 2048, 4096 }
M.sweep_channels = { 1, 2, 3, 4, 8, 16, 24, 32, 64, 96, 128, 256, 512 }

local function bytes_of(dtype, shape, sh, sw)
  return shape[1] * shape[2] * shape[3] * shape[4] * SIZES[dtype] * (1 + sh * sw)
end

local function add(out, suite, name, op, dtype, layout, shape, sh, sw)
  out[#out + 1] = { suite = suite, name = name, op = op, dtype = dtype, layout = layout, shape = shape,
    sh = sh, sw = sw, bytes = bytes_of(dtype, shape, sh, sw) }
end

-- Both directions over their dtypes: each(op, dtype).
local function for_ops(each)
  for _, dt in ipairs(FORWARD_DTYPES) do each("forward", dt) end
  for _, dt in ipairs(BACKWARD_DTYPES) do each("backward", dt) end
end

local function rows_suite(out, target)
  local scales = { { 2, 2 }, { 3, 3 }, { 4, 4 }, { 2, 1 }, { 1, 2 } }
  for_ops(function(op, dt)
    for _, s in ipairs(scales) do
      for _, W in ipairs({ 1024, 1020, 1023 }) do
        local B, C = 8, 16
        local H = math.max(1, math.ceil(target / (SIZES[dt] * (1 + s[1] * s[2])) / (B * C * W)))
        add(out, "rows", ("%dx%d W=%d"):format(s[1], s[2], W), op, dt, "nchw", { B, C, H, W }, s[1], s[2])
      end
    end
  end)
end

local function shapes_suite(out, scale_down)
  for_ops(function(op, dt)
    for _, layout in ipairs({ "nchw", "nhwc" }) do
      for _, n in ipairs(M.networks) do
        local B = math.max(1, math.floor(n[2] / scale_down))
        add(out, "shapes", n[1], op, dt, layout, { B, n[3], n[4], n[5] }, 2, 2)
      end
    end
  end)
end

local function sweep_suite(out, target)
  for _, op in ipairs({ "forward", "backward" }) do
    for _, dt in ipairs({ "f32", "bf16", "u8" }) do
      if op == "forward" or dt ~= "u8" then
        for _, W in ipairs(M.sweep_widths) do
          local H = 32
          local planes = math.max(1, math.floor(target / (SIZES[dt] * 5 * H * W)))
          add(out, "sweep", ("W=%d"):format(W), op, dt, "nchw", { planes, 1, H, W }, 2, 2)
        end
        for _, C in ipairs(M.sweep_channels) do
          local H, W = 32, 32
          local B = math.max(1, math.floor(target / (SIZES[dt] * 5 * H * W * C)))
          add(out, "sweep", ("C=%d"):format(C), op, dt, "nhwc", { B, C, H, W }, 2, 2)
        end
      end
    end
  end
end

-- The cases of the suites named in opts.suites (default: all), sized for opts.target_bytes
-- (default 512 MB for rows, half that for the sweep; the simulator asks for less) and
-- opts.shape_scale (network batches divided by it; default 1). opts.quick: every seventh case.
function M.list(opts)
  opts = opts or {}
  local target = opts.target_bytes or 512 * 2 ^ 20
  local out = {}
  local wanted = {}
  for _, s in ipairs(opts.suites or M.suites) do wanted[s] = true end
  if wanted.rows then rows_suite(out, target) end
  if wanted.shapes then shapes_suite(out, opts.shape_scale or 1) end
  if wanted.sweep then sweep_suite(out, target / 2) end
  if opts.quick then
    local few = {}
    for i = 1, #out, 7 do few[#few + 1] = out[i] end
    out = few
  end
  return out
end

-- The shape of a case's tensors in its layout: its input's, then its output's, for a forward
-- (a backward reads the output's shape and writes the input's).
function M.tensor_shapes(c)
  local B, C, H, W = unpack(c.shape)
  local OH, OW = H * c.sh, W * c.sw
  if c.layout == "nhwc" then return { B, H, W, C }, { B, OH, OW, C } end
  return { B, C, H, W }, { B, C, OH, OW }
end

M.case_columns = { "suite", "name", "op", "dtype", "layout", "B", "C", "H", "W", "scale_h", "scale_w", "bytes" }
M.columns = { "impl", "suite", "name", "op", "dtype", "layout", "B", "C", "H", "W", "scale_h", "scale_w",
  "block", "bytes", "median_ms", "gbps", "pct_copy", "copy_gbps" }

return M
