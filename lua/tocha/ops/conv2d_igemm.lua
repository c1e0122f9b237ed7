-- tocha.ops.conv2d_igemm: Conv2d's forward on the tensor cores (kernels/conv2d_igemm.cu), which
-- halves of groups 1 with out channels a multiple of 8 take, in either layout, and its dx (the
-- same GEMM: dy, spread out by the stride, convolved with the flipped weight; in channels a
-- multiple of 8 too). The forward pads in channels that are not a multiple of 8 (a network's
-- stem: 3) with zeros to the next one, in x's copy and the relaid weight, so that the GEMM reads
-- whole 16-byte chunks: 8 / 3 of the stem's products are spent on zeros, still many times
-- faster than the direct kernel. The launches of one pass, those not needed having empty grids:
--   1. the weight [out, in, kh, kw] relaid out to [kh, kw, in, out] (the GEMM's B; for dx
--      flipped, [kh, kw, out, in]; in padded), unless the window is 1 x 1 and in needs no
--      padding (the weight is B as it lies);
--   2. NCHW: x transposed to NHWC; padded channels: x (either layout) copied as NHWC with them;
--   3. dx of a strided convolution only: dy spread out by the stride with zeros between, so that
--      dx is a stride-1 convolution of it (S_h S_w times the tensor cores' work of the direct
--      form, the zeros' products wasted, against a kernel that would skip them);
--   4. the implicit GEMM, into y (NHWC) or, NCHW, into an NHWC y of the workspace; where k is
--      split, into f32 slabs of the workspace instead;
--   5. split k only: the sum of the slabs, + bias, into the NHWC result;
--   6. dx of a strided 1 x 1 convolution without padding ("scatter"): launches 4 and 5 wrote dy's
--      pixels times the weight, one a dy pixel, to the workspace, and this spreads them out by
--      the stride with zeros between into the NHWC result (every other dx pixel is 0): the
--      GEMM's work is the direct form's, not S_h S_w times it, and launch 3 is empty;
--   7. NCHW only: the NHWC result transposed into y.
-- An NCHW forward with an activation or a residual ("fused") keeps its sums in f32 slabs even
-- unsplit, and launch 5 adds them straight into NCHW y through the epilogue (launch 7 empty),
-- so that the epilogue sees f32 sums in either layout.
-- The forward's last writer of y (the GEMM, the sum, or in NCHW the transpose) applies the
-- epilogue past the bias (kernels/epilogue.cuh): the residual, the activation, or in a
-- backward's recompute dz = dy F'(z) instead of y.
-- All of it in the op's workspace (regions 256-byte aligned): the relaid weight, then for NCHW
-- x's and y's NHWC copies, then dy spread out (or, scatter, the GEMM's rows before launch 6
-- spreads them), then the slabs.
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local op = require "tocha.op"
local errors = require "tocha.errors"

local M = {}
M.LAUNCHES = 7

-- Whether a convolution of these settings runs here: on the default device where it has wgmma
-- (the simulator, or compute capability 9.0; elsewhere the kernels' fallback loops are slow and
-- their shared memory more than some GPUs give a block, so the direct kernels serve). With
-- padded, the forward alone, whose in channels need not be a multiple of 8 (M.padded_channels).
-- f32 runs on matmul.cu's f32 tiles instead (tocha_conv2d_f32, any device), its channels in 4s,
-- or as tf32 (the opt-in) on the tensor cores where the device has wgmma.
function M.eligible(dt, groups, in_channels, out_channels, padded)
  if groups ~= 1 then return false end
  if dt == "f32" then return out_channels % 4 == 0 and (padded or in_channels % 4 == 0) end
  return M.has_wgmma() and (dt == "f16" or dt == "bf16") and (padded or in_channels % 8 == 0) and out_channels % 8 == 0
end

-- Whether the default device has wgmma (tocha.matmul's rule).
function M.has_wgmma() return require("tocha.matmul").has_wgmma() end

-- The forward GEMM's in channels: c rounded up to whole 16-byte chunks (8 halves, 4 f32).
function M.padded_channels(c, dt)
  local per = 16 / dtype.size(dt)
  return math.ceil(c / per) * per
end

local function source()
  return require("tocha.matmul").source() .. "\n" .. op.source("conv2d_igemm.cu")
end

-- Whether conv's dx runs here too: dx is the stride-1 convolution of dy (spread out by the
-- stride) by the flipped weight, which needs no negative padding (dilation (k - 1) >= padding).
function M.eligible_dx(conv)
  for i = 1, 2 do
    if conv.dilation[i] * (conv.kernel_size[i] - 1) < conv.padding[i] then return false end
  end
  return true
end

-- The kernels for conv's forward (a Conv2d: its dtype, channels, window, stride, padding,
-- dilation, tf32) or, with dx, for its dx (the stride-1 convolution of dy, channels swapped, by
-- the flipped weight, padding dilation (k - 1) - padding, no epilogue; with scatter, a strided
-- 1 x 1 window without padding takes launch 6's form: the caller's dx has no bias, which the
-- zeros between would lack), with the tile width:
-- 64, 128 or 256 output channels (the least that holds them up to 128, then 256 unless the
-- channels fill tiles of 128 better; for the f32 tiles 64 up to 64 channels, else 128; 128 for
-- tf32). The multiprocessors to fill with CTAs are the
-- default device's (132, an H200's, where that is the simulator). f32 with conv.tf32 runs the
-- tensor cores' kernel on f32 (tf32), its weight always relaid K-major (the forward's [out, kh,
-- kw, in] unless the window is 1 x 1 and in needs no padding; dx's flipped [in, kh, kw, out]).
function M.new(conv, dx, scatter)
  local matmul = require "tocha.matmul"
  local dev = require("tocha.device").default()
  local dt, c, o, k = conv.dtype, conv.in_channels, conv.out_channels, conv.kernel_size
  local stride, padding, dilation = conv.stride, conv.padding, conv.dilation
  scatter = dx and scatter and k[1] == 1 and k[2] == 1 and padding[1] == 0 and padding[2] == 0
    and (stride[1] > 1 or stride[2] > 1)
  if dx then
    c, o, stride = o, c, { 1, 1 }
    padding = { dilation[1] * (k[1] - 1) - padding[1], dilation[2] * (k[2] - 1) - padding[2] }
  end
  local tf32 = dt == "f32" and conv.tf32 == true
  local f32 = dt == "f32" and not tf32 -- the f32 tiles
  local bn = tf32 and 128 or o <= 64 and 64 or f32 and 128 or (o <= 128 or (o % 256 ~= 0 and o % 128 == 0)) and 128
    or 256
  local text, ct = source(), dtype.ctype(dt)
  local cp = dx and c or M.padded_channels(c, dt)
  local window = k[1] * k[2] > 1
  -- forward: a 1 x 1 window's weight [o, c] is B K-major; dx: a 1 x 1 window's [c', o'] is B as
  -- the relaid weight lies (MN-major), but for tf32, which reads B K-major only
  local g = { tile_n = bn, k = k[1] * k[2] * cp, out = o, nchw = conv.layout == "nchw", size = dtype.size(dt),
    relayout = window or cp ~= c or (tf32 and dx), channels = cp, padded = cp ~= c, tf32 = tf32,
    sms = dev.kind == "cuda" and dev.multiprocessors or 132, slice = tf32 and 32 or 64,
    dilate = dx and not scatter and (conv.stride[1] > 1 or conv.stride[2] > 1) and { conv.stride[1], conv.stride[2] }
      or nil, scatter = scatter or nil }
  local b_k_major = tf32 or not dx and not g.relayout
  local relayout_name = dx and (tf32 and "tocha_conv2d_weight_flip_kmajor" or "tocha_conv2d_weight_flip")
    or (tf32 and "tocha_conv2d_weight_orsc" or "tocha_conv2d_weight_rsck")
  -- the epilogue's function, in the kernel that writes y last
  local act = "ew_fn_" .. (dx and "identity" or conv.activation)
  local gemm_act = g.nchw and "ew_fn_identity" or act
  g.fused = g.nchw and not dx and (conv.activation ~= "identity" or conv.residual == true)
  g.weight_kernel = kernel.new { source = text, name = relayout_name,
    template_args = dx and ("%s, %d, %d, %d, %d"):format(ct, conv.in_channels, conv.out_channels, k[1], k[2])
      or ("%s, %d, %d, %d, %d, %d"):format(ct, c, cp, o, k[1], k[2]),
    params = ("%s* w, %s* relaid"):format(dt, dt) }
  if g.padded then
    g.pad_kernel = kernel.new { source = text, name = "tocha_conv2d_pad_channels",
      template_args = ("%s, %d, %d, %d"):format(ct, c, cp, g.nchw and 1 or 0),
      params = ("%s* x, %s* padded, i64 pixels, i64 plane"):format(dt, dt) }
  end
  g.kernel = kernel.new { source = text, name = f32 and "tocha_conv2d_f32" or "tocha_conv2d_igemm",
    template_args = ("%s, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %s"):format(ct, cp, o, k[1], k[2], stride[1],
      stride[2], padding[1], padding[2], dilation[1], dilation[2], bn, b_k_major and 1 or 0, gemm_act),
    params = ("%s* x, %s* weight, %s* bias, %s* y, f32* partial, i64 n, i32 h, i32 w, i32 oh, i32 ow, i32 has_bias, "
      .. "%s* residual, %s* grad, i32 epilogue"):format(dt, dt, dt, dt, dt, dt),
    -- tiles of 64 columns hold 32 sums a thread: two CTAs an SM (f32's 64 sums a thread fit two
    -- at 128 registers, as matmul's; its 32 of a tile of 64 take 111, and spill at three CTAs)
    launch_bounds = { 256, (f32 or bn == 64) and 2 or 1 },
    shared = not f32 and matmul.tensor_core_shared(bn) or nil }
  g.sum_kernel = kernel.new { source = text, name = "tocha_conv2d_split_sum", template_args = ct .. ", " .. gemm_act,
    params = ("f32* partial, %s* bias, %s* y, i64 count, i32 columns, i32 splits, i32 has_bias, %s* residual, %s* grad, "
      .. "i32 epilogue"):format(dt, dt, dt, dt) }
  g.transpose_kernel = M.transpose_kernel(text, dt, "ew_fn_identity")
  g.out_transpose_kernel = M.transpose_kernel(text, dt, act)
  if g.fused then
    g.nchw_sum_kernel = kernel.new { source = text, name = "tocha_conv2d_split_sum_nchw", template_args = ct .. ", " .. act,
      params = ("f32* partial, %s* bias, %s* y, i64 count, i32 columns, i32 splits, i32 has_bias, %s* residual, %s* grad, "
        .. "i32 epilogue, i64 plane"):format(dt, dt, dt, dt) }
  end
  g.dilate_kernel = kernel.new { source = text, name = "tocha_conv2d_spread", template_args = ("%s, %d, %d"):format(ct,
    conv.stride[1], conv.stride[2]), params = ("%s* src, %s* dst, i64 n, i64 h, i64 w, i64 dh, i64 dw, i64 c"):format(dt, dt) }
  return g
end

-- The transpose between NCHW and NHWC, writing through the epilogue of function act.
function M.transpose_kernel(text, dt, act)
  return kernel.new { source = text, name = "tocha_conv2d_transpose", template_args = dtype.ctype(dt) .. ", " .. act,
    params = ("%s* src, %s* dst, i64 rows, i64 cols, i64 batches, %s* residual, %s* grad, i32 epilogue"):format(dt, dt, dt,
      dt) }
end

local function align(bytes) return math.ceil(bytes / 256) * 256 end

-- The plan of a forward over n images of h x w (c channels) into oh x ow: the GEMM's rows m,
-- its tiles, the splits of k (1: none; k is split where the tiles fill less than half the
-- multiprocessors and each split keeps at least 4 slices (of 64; tf32's of 32) to pipeline, into
-- as many as make about one CTA a multiprocessor) and the workspace's regions (byte offsets)
-- and size.
function M.plan(g, n, c, h, w, oh, ow)
  local m = n * (g.scatter and h * w or oh * ow) -- (scatter: the GEMM's rows are dy's pixels)
  local tiles = math.ceil(m / 128) * math.ceil(g.out / g.tile_n)
  local slices = math.ceil(g.k / g.slice)
  local splits = 1
  if tiles > 0 and tiles * 2 <= g.sms then
    splits = math.max(1, math.min(math.floor(g.sms / tiles), math.floor(slices / 4)))
    splits = math.ceil(slices / math.ceil(slices / splits)) -- none empty
  end
  local p = { m = m, tiles = tiles, splits = splits, weight = 0 }
  local at = g.relayout and align(g.k * g.out * g.size) or 0
  if g.nchw or g.padded then -- x as NHWC (its channels padded)
    p.x = at
    at = p.x + align(n * h * w * (g.padded and g.channels or c) * g.size)
  end
  if g.nchw then
    if not g.fused then p.y, at = at, at + align(n * oh * ow * g.out * g.size) end
  end
  if g.dilate then -- dx of a strided convolution: dy spread out with zeros between its pixels
    p.dh, p.dw = (h - 1) * g.dilate[1] + 1, (w - 1) * g.dilate[2] + 1
    p.dilated, at = at, at + align(n * p.dh * p.dw * c * g.size)
  end
  if g.scatter then p.small, at = at, at + align(m * g.out * g.size) end -- dy's pixels times the weight
  if splits > 1 or g.fused then p.partial, at = at, at + splits * m * g.out * 4 end
  p.bytes = at
  return p
end

-- The transpose's grid for a batch of rows x cols matrices (its rows of tiles and its matrices
-- strided past 65535).
local function transpose_grid(rows, cols, batch)
  return { math.max(1, math.ceil(cols / 32)), math.max(1, math.min(math.ceil(rows / 32), 65535)), math.min(batch, 65535) }
end
M.transpose_grid = transpose_grid

-- Launch i's kernel, grid, and argument list for x of n images (c x h x w) into y (oh x ow):
-- addresses x, y, the weight, the bias (or nil) and the workspace; residual and grad, the
-- epilogue's (addresses shaped as y, or nil: kernels/epilogue.cuh). (For dx: dy of n images
-- (out x oh x ow) into dx (h x w), no bias.)
function M.launch(g, i, p, sizes, x, y, weight, bias, ws, residual, grad)
  local n, c, h, w, oh, ow = unpack(sizes)
  local none = { 0, 0, 0 }
  local x_nhwc = (g.nchw or g.padded) and ws + p.x or x
  local y_nhwc = g.nchw and not g.fused and ws + p.y or y
  local gemm_x, gemm_h, gemm_w = x_nhwc, h, w
  -- the epilogue's tensors go to y's last writer (those absent: y, unread)
  local flags = (residual and 1 or 0) + (grad and 2 or 0)
  residual, grad = residual or y, grad or y
  local gemm_flags = g.fused and 4 or g.nchw and 0 or flags -- 4: CONV_SLABS
  if g.dilate then gemm_x, gemm_h, gemm_w = ws + p.dilated, p.dh, p.dw end
  -- scatter: the GEMM (and the slabs' sum) writes dy's pixels to the workspace, launch 6 spreads them
  local gemm_y, gemm_oh, gemm_ow = y_nhwc, oh, ow
  if g.scatter then gemm_y, gemm_oh, gemm_ow = ws + p.small, h, w end
  if i == 1 then
    if not g.relayout then return g.weight_kernel, none, {} end
    return g.weight_kernel, { math.max(1, math.min(math.ceil(g.k * g.out / 256), 2 ^ 31 - 1)), 1, 1 }, { weight, ws }
  elseif i == 2 and g.padded then
    if n == 0 then return g.pad_kernel, none, {} end
    return g.pad_kernel, { math.max(1, math.min(math.ceil(n * h * w / 256), 2 ^ 31 - 1)), 1, 1 }, { x, x_nhwc, n * h * w, h * w }
  elseif i == 2 then
    if not g.nchw or n == 0 then return g.transpose_kernel, none, {} end
    return g.transpose_kernel, transpose_grid(c, h * w, n), { x, x_nhwc, c, h * w, n, x_nhwc, x_nhwc, 0 }
  elseif i == 3 then
    if not g.dilate or n == 0 then return g.dilate_kernel, none, {} end
    return g.dilate_kernel, { math.max(1, math.min(math.ceil(n * p.dh * p.dw * c * g.size / 16 / 256), 2 ^ 31 - 1)), 1, 1 },
      { x_nhwc, gemm_x, n, h, w, p.dh, p.dw, c }
  elseif i == 4 then
    if p.m == 0 then return g.kernel, none, {} end
    return g.kernel, { p.tiles, p.splits, 1 }, { gemm_x, g.relayout and ws or weight, bias or gemm_y, gemm_y,
      p.partial and ws + p.partial or gemm_y, n, gemm_h, gemm_w, gemm_oh, gemm_ow, bias and 1 or 0, residual, grad,
      gemm_flags }
  elseif i == 5 and g.fused then -- the slabs into NCHW y through the epilogue
    if p.m == 0 then return g.nchw_sum_kernel, none, {} end
    return g.nchw_sum_kernel, { math.max(1, math.min(math.ceil(p.m * g.out / 256), 2 ^ 31 - 1)), 1, 1 },
      { ws + p.partial, bias or y, y, p.m * g.out, g.out, p.splits, bias and 1 or 0, residual, grad, flags, oh * ow }
  elseif i == 5 then
    if p.splits == 1 then return g.sum_kernel, none, {} end
    return g.sum_kernel, { math.max(1, math.min(math.ceil(p.m * g.out / 256), 2 ^ 31 - 1)), 1, 1 },
      { ws + p.partial, bias or gemm_y, gemm_y, p.m * g.out, g.out, p.splits, bias and 1 or 0, residual, grad, gemm_flags }
  elseif i == 6 then
    if not g.scatter or p.m == 0 then return g.dilate_kernel, none, {} end
    return g.dilate_kernel, { math.max(1, math.min(math.ceil(n * oh * ow * g.out * g.size / 16 / 256), 2 ^ 31 - 1)), 1, 1 },
      { gemm_y, y_nhwc, n, h, w, oh, ow, g.out }
  end
  if not g.nchw or g.fused or p.m == 0 then return g.out_transpose_kernel, none, {} end
  return g.out_transpose_kernel, transpose_grid(oh * ow, g.out, n), { y_nhwc, y, oh * ow, g.out, n, residual, grad, flags }
end

-- ---- the weight gradient ----
--
-- dweight as a GEMM over the output pixels (kernels/conv2d_igemm.cu, tocha_conv2d_igemm_dw):
--   1, 2. NCHW only: x and dy transposed to NHWC in the workspace;
--   3. dy^T x patches into f32 slabs [out, kh kw in] of the workspace, the pixels split over
--      about one CTA a multiprocessor (each split at least 4 slices of 64 pixels; tf32's of 32);
--   4. with a bias, dbias's partial sums of dy a channel over splits of the pixels;
--   5. the slabs' sum into dweight in PyTorch's layout, and the partials' into dbias.
M.DW_LAUNCHES = 5

function M.new_dw(conv)
  local matmul = require "tocha.matmul"
  local dev = require("tocha.device").default()
  local dt, c, o, k = conv.dtype, conv.in_channels, conv.out_channels, conv.kernel_size
  local kw = k[1] * k[2] * c
  local tf32 = dt == "f32" and conv.tf32 == true
  local f32 = dt == "f32" and not tf32 -- the f32 tiles
  local bn = dt == "f32" and 128 or kw <= 64 and 64 or (kw <= 128 or (kw % 256 ~= 0 and kw % 128 == 0)) and 128 or 256
  -- the tiles' rows (output channels): 64 on the f32 tiles up to 64 channels, else 128
  local bm = f32 and o <= 64 and 64 or 128
  local text, ct = source(), dtype.ctype(dt)
  local g = { tile_n = bn, tile_m = bm, k = kw, out = o, sms = dev.kind == "cuda" and dev.multiprocessors or 132,
    nchw = conv.layout == "nchw", size = dtype.size(dt), tf32 = tf32, slice = tf32 and 32 or 64 }
  local shape = ("%d, %d, %d, %d"):format(c, o, k[1], k[2])
  g.kernel = kernel.new { source = text, name = f32 and "tocha_conv2d_f32_dw" or "tocha_conv2d_igemm_dw",
    template_args = ("%s, %s, %d, %d, %d, %d, %d, %d, %d%s"):format(ct, shape, conv.stride[1], conv.stride[2],
      conv.padding[1], conv.padding[2], conv.dilation[1], conv.dilation[2], bn, f32 and ", " .. bm or ""),
    params = ("%s* x, %s* dy, f32* partial, i64 n, i32 h, i32 w, i32 oh, i32 ow"):format(dt, dt),
    launch_bounds = { 256, (f32 or bn == 64) and 2 or 1 },
    shared = not f32 and matmul.tensor_core_shared(bn) or nil }
  g.sum_kernel = kernel.new { source = text, name = "tocha_conv2d_dw_sum", template_args = ct .. ", " .. shape,
    params = ("f32* partial, %s* dw, i32 splits, f32* bias_partial, %s* db, i32 bias_splits, i32 has_bias"):format(dt, dt) }
  g.bias_kernel = kernel.new { source = text, name = "tocha_conv2d_db_partial", template_args = ct,
    params = ("%s* dy, f32* bias_partial, i64 m, i32 o"):format(dt) }
  g.transpose_kernel = M.transpose_kernel(text, dt, "ew_fn_identity")
  return g
end

-- The weight gradient's plan over n images of c x h x w into oh x ow: tiles, splits, workspace
-- regions and bytes.
function M.plan_dw(g, n, c, h, w, oh, ow)
  local m = n * oh * ow
  local tiles = math.ceil(g.out / g.tile_m) * math.ceil(g.k / g.tile_n)
  local slices = math.ceil(m / g.slice)
  local splits = math.max(1, math.min(math.floor(g.sms / tiles + 0.5), math.floor(slices / 4)))
  splits = math.ceil(slices / math.ceil(slices / splits)) -- none empty
  -- dbias: CTAs of 32 channels by splits of the pixels, about two CTAs a multiprocessor
  local columns = math.ceil(g.out / 32)
  local bias_splits = math.max(1, math.min(math.ceil(2 * g.sms / columns), math.ceil(m / 64), 1024))
  local bias = align(splits * g.out * g.k * 4)
  local p = { m = m, tiles = tiles, splits = splits, bias = bias, bias_splits = bias_splits, columns = columns }
  local at = align(bias + bias_splits * g.out * 4)
  if g.nchw then -- x and dy as NHWC
    p.x = at
    p.dy = p.x + align(n * h * w * c * g.size)
    at = p.dy + align(m * g.out * g.size)
  end
  p.bytes = at
  return p
end

-- Weight-gradient launch i (1 to DW_LAUNCHES): kernel, grid, arguments for x, dy, dweight,
-- dbias (its launch runs where has_bias).
function M.launch_dw(g, i, p, sizes, x, dy, dw, db, ws, has_bias)
  local n, c, h, w, oh, ow = unpack(sizes)
  local none = { 0, 0, 0 }
  local x_nhwc, dy_nhwc = g.nchw and ws + p.x or x, g.nchw and ws + p.dy or dy
  if i == 1 then
    if not g.nchw or p.m == 0 then return g.transpose_kernel, none, {} end
    return g.transpose_kernel, transpose_grid(c, h * w, n), { x, x_nhwc, c, h * w, n, x_nhwc, x_nhwc, 0 }
  elseif i == 2 then
    if not g.nchw or p.m == 0 then return g.transpose_kernel, none, {} end
    return g.transpose_kernel, transpose_grid(g.out, oh * ow, n), { dy, dy_nhwc, g.out, oh * ow, n, dy_nhwc, dy_nhwc, 0 }
  elseif i == 3 then
    if p.m == 0 then return g.kernel, none, {} end
    -- (its gather locates pixels in 32 bits)
    if p.m >= 2 ^ 31 then errors.raise(("inputs[1]: %d output pixels, at most 2^31 - 1 a backward call"):format(p.m)) end
    return g.kernel, { p.tiles, p.splits, 1 }, { x_nhwc, dy_nhwc, ws, n, h, w, oh, ow }
  elseif i == 4 then
    if not has_bias or p.m == 0 then return g.bias_kernel, none, {} end
    return g.bias_kernel, { p.columns, p.bias_splits, 1 }, { dy_nhwc, ws + p.bias, p.m, g.out }
  end
  -- (with no pixels neither slabs nor partials are written: the gradients stay as given, zeros)
  if p.m == 0 then return g.sum_kernel, none, {} end
  return g.sum_kernel, { math.max(1, math.min(math.ceil(g.out * g.k / 256), 2 ^ 31 - 1)), 1, 1 },
    { ws, dw, p.splits, ws + p.bias, db or dw, p.bias_splits, has_bias and 1 or 0 }
end

return M
