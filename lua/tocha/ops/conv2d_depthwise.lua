-- tocha.ops.conv2d_depthwise: Conv2d's depthwise convolutions (groups = in = out channels) on
-- kernels/conv2d_depthwise.cu, every float dtype: the forward and dx in layout nhwc, the weight
-- and bias gradients in both (NCHW's x and dy transposed to NHWC in the workspace first). The
-- launches of each pass, those not needed with empty grids:
--   forward, dx: 1. the weight [C, 1, kh, kw] relaid to [kh, kw, C]; 2. the kernel;
--   dweight, dbias: 1, 2. NCHW only: x and dy transposed to NHWC; 3. partial sums over splits
--     of the output pixels; 4. their sum into dweight (and dbias).
-- Workspace (regions 256-byte aligned): the relaid weight, or the NCHW copies and the partials.
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local op = require "tocha.op"

local M = {}
M.LAUNCHES, M.DW_LAUNCHES = 2, 4

-- Whether conv (a Conv2d) is depthwise: each channel its own group, one output channel each.
function M.eligible(conv)
  return conv.groups == conv.in_channels and conv.out_channels == conv.in_channels
end

local function align(bytes) return math.ceil(bytes / 256) * 256 end

-- The kernels for conv (depthwise): V channels a thread (16 bytes where the channels are a
-- multiple of it), U a thread of the gradients' partial sums (as many of V as keep its
-- (kh kw + 1) U sums within 80 registers). The multiprocessors to fill come from the default
-- device (132, an H200's, on the simulator).
function M.new(conv)
  local dev = require("tocha.device").default()
  local dt, c, k = conv.dtype, conv.in_channels, conv.kernel_size
  local size = dtype.size(dt)
  local v = c % (16 / size) == 0 and 16 / size or 1
  local words = dt == "f64" and 2 or 1 -- 4-byte registers a sum
  local u = v
  while u > 1 and (k[1] * k[2] + 1) * u * words > 80 do u = u / 2 end
  local ct = dtype.ctype(dt)
  local acc = dt == "f64" and "f64" or "f32"
  local text = op.source("activation.cuh") .. "\n" .. op.source("epilogue.cuh") .. "\n" .. op.source("conv2d_depthwise.cu")
  local window = ("%d, %d, %d, %d, %d, %d, %d, %d"):format(k[1], k[2], conv.stride[1], conv.stride[2], conv.padding[1],
    conv.padding[2], conv.dilation[1], conv.dilation[2])
  local sizes = "i64 n, i32 c, i32 h, i32 w, i32 oh, i32 ow"
  local g = { c = c, k = k, v = v, u = u, size = size, acc_size = dtype.size(acc), nchw = conv.layout == "nchw",
    sms = dev.kind == "cuda" and dev.multiprocessors or 132 }
  g.weight_kernel = kernel.new { source = text, name = "tocha_conv2d_dw_weight_rs",
    template_args = ("%s, %d, %d"):format(ct, k[1], k[2]), params = ("%s* w, %s* rs, i32 c"):format(dt, dt) }
  g.kernel = kernel.new { source = text, name = "tocha_conv2d_dw_forward",
    template_args = ("%s, %s, %d, ew_fn_%s"):format(ct, window, v, conv.activation),
    params = ("%s* x, %s* rs, %s* bias, %s* y, %s, i32 has_bias, %s* residual, %s* grad, i32 epilogue"):format(dt, dt, dt,
      dt, sizes, dt, dt) }
  g.dx_kernel = kernel.new { source = text, name = "tocha_conv2d_dw_backward_data",
    template_args = ("%s, %s, %d"):format(ct, window, v), params = ("%s* dy, %s* rs, %s* dx, %s"):format(dt, dt, dt, sizes) }
  g.partial_kernel = kernel.new { source = text, name = "tocha_conv2d_dw_grad_partial",
    template_args = ("%s, %s, %d"):format(ct, window, u),
    params = ("%s* x, %s* dy, %s* partial, %s"):format(dt, dt, acc, sizes) }
  g.sum_kernel = kernel.new { source = text, name = "tocha_conv2d_dw_grad_sum",
    template_args = ("%s, %d, %d"):format(ct, k[1], k[2]),
    params = ("%s* partial, %s* dweight, %s* dbias, i32 c, i32 splits, i32 has_bias"):format(acc, dt, dt) }
  if g.nchw then g.transpose_kernel = require("tocha.ops.conv2d_igemm").transpose_kernel(
    require("tocha.matmul").source() .. "\n" .. op.source("conv2d_igemm.cu"), dt, "ew_fn_identity") end
  return g
end

-- The forward's (and dx's) workspace: the relaid weight.
function M.bytes(g) return align(g.k[1] * g.k[2] * g.c * g.size) end

local function flat(count)
  return { math.max(1, math.min(math.ceil(count / 256), 2 ^ 31 - 1)), 1, 1 }
end

-- Forward launch i (1 or 2) for x of n images of h x w into oh x ow: kernel, grid, arguments
-- (addresses x, y, the weight, the bias or nil, the workspace, and the epilogue's residual and
-- grad, shaped as y, or nil).
function M.launch(g, i, sizes, x, y, weight, bias, ws, residual, grad)
  local n, c, h, w, oh, ow = unpack(sizes)
  if i == 1 then return g.weight_kernel, flat(g.k[1] * g.k[2] * c), { weight, ws, c } end
  local count = n * oh * ow * c / g.v
  if count == 0 then return g.kernel, { 0, 0, 0 }, {} end
  local flags = (residual and 1 or 0) + (grad and 2 or 0)
  return g.kernel, flat(count), { x, ws, bias or y, y, n, c, h, w, oh, ow, bias and 1 or 0, residual or y, grad or y,
    flags }
end

-- dx launch i (1 or 2): dy of n images of oh x ow into dx (h x w).
function M.launch_dx(g, i, sizes, dy, dx, weight, ws)
  local n, c, h, w, oh, ow = unpack(sizes)
  if i == 1 then return g.weight_kernel, flat(g.k[1] * g.k[2] * c), { weight, ws, c } end
  local count = n * h * w * c / g.v
  if count == 0 then return g.dx_kernel, { 0, 0, 0 }, {} end
  return g.dx_kernel, flat(count), { dy, ws, dx, n, c, h, w, oh, ow }
end

-- The gradients' plan over n images of c x h x w into oh x ow: CTAs of 32 U channels by
-- splits of the pixels (about two CTAs a multiprocessor in all, each split at least 64 pixels),
-- and the workspace's regions (the NCHW copies, the partials) and size.
function M.plan_grad(g, n, c, h, w, oh, ow)
  local pixels = n * oh * ow
  local columns = math.ceil(c / (32 * g.u))
  local splits = math.max(1, math.min(math.ceil(2 * g.sms / columns), math.ceil(pixels / 64), 65535))
  local p = { pixels = pixels, columns = columns, splits = splits }
  local at = 0
  if g.nchw then
    p.x, p.dy = at, align(n * h * w * c * g.size)
    at = p.dy + align(pixels * c * g.size)
  end
  p.partial = at
  p.bytes = at + align(splits * (g.k[1] * g.k[2] + 1) * c * g.acc_size)
  return p
end

-- Gradient launch i (1 to DW_LAUNCHES) for x of n images (c x h x w) and dy (oh x ow): kernel,
-- grid, arguments for the addresses x, dy, dweight, dbias (or nil) and the workspace.
function M.launch_grad(g, i, p, sizes, x, dy, dw, db, ws)
  local n, c, h, w, oh, ow = unpack(sizes)
  local none = { 0, 0, 0 }
  local x_nhwc, dy_nhwc = g.nchw and ws + p.x or x, g.nchw and ws + p.dy or dy
  if i <= 2 then
    if not g.nchw or p.pixels == 0 then return g.transpose_kernel or g.sum_kernel, none, {} end
    local src, dst, plane = x, x_nhwc, h * w
    if i == 2 then src, dst, plane = dy, dy_nhwc, oh * ow end
    return g.transpose_kernel, require("tocha.ops.conv2d_igemm").transpose_grid(c, plane, n),
      { src, dst, c, plane, n, dst, dst, 0 }
  elseif i == 3 then
    if p.pixels == 0 then return g.partial_kernel, none, {} end
    return g.partial_kernel, { p.columns, p.splits, 1 }, { x_nhwc, dy_nhwc, ws + p.partial, n, c, h, w, oh, ow }
  end
  -- (with no pixels the gradients stay as given, zeros)
  if p.pixels == 0 then return g.sum_kernel, none, {} end
  return g.sum_kernel, flat(c * (g.k[1] * g.k[2] + 1)), { ws + p.partial, dw, db or dw, c, p.splits, db and 1 or 0 }
end

return M
