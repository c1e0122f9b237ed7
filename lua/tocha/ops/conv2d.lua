-- tocha.Conv2d: PyTorch's nn.Conv2d on NCHW or NHWC tensors, with its parameters "weight" [out, in /
-- groups, kh, kw] and "bias" [out], forward and backward, every float dtype, through
-- kernels/conv2d.cu with the window, stride, padding, dilation and groups baked into the
-- kernels. A RuntimeOp written here, so that it joins a tocha.Model as a layer.
--
--   local conv = tocha.Conv2d.new(64, 128, 3, { stride = 2, padding = 1 })
--   local y = conv:forward(x, w, b)                  -- x [N, 64, H, W] -> y [N, 128, OH, OW]
--   local dx, dw, db = conv:backward(x, w, b, dy)
--   local dw_conv = tocha.Conv2d.new(32, 32, 3, { padding = 1, groups = 32, bias = false })
--
-- Options as PyTorch's: stride (1), padding (0), dilation (1), each a number or {h, w}; groups
-- (1; in and out channels multiples of it); bias (true); dtype (f32); layout ("nchw", or "nhwc":
-- x [N, H, W, C] and y [N, OH, OW, CO], PyTorch's channels_last; the weight keeps PyTorch's
-- [out, in / groups, kh, kw] either way). Halves accumulate in f32.
--
-- Fused epilogue: activation ("identity", "relu", "sigmoid", "tanh", "silu", "gelu": y =
-- F(conv + bias), the Conv + BN + SiLU block of a YOLO with tocha.nn.fold_batch_norm's weights)
-- and residual (true: a second input "residual" shaped as y, added before F: ResNet's
-- relu(conv + bias + shortcut)), both in the kernel that writes y, so that the block is one
-- pass over y. The sum stays in f32 (f64 for f64) through the epilogue and is rounded once.
-- The backward recomputes z = conv + bias + residual with the forward's own kernels, writing
-- dz = dy F'(z) (into d residual where there is one, else the workspace), then runs dx, dweight
-- and dbias over dz: one forward's time more than a backward without the epilogue, and no
-- tensor kept from the forward.
--
-- tf32 (f32 only; default: tocha.get_float32_matmul_precision() == "high" when the op is made;
-- PyTorch's cudnn.allow_tf32): the forward, dx and dweight read f32 as tf32 on the tensor cores
-- where the default device has wgmma (elsewhere all of it is f32).
--
-- Kernels: the tensor cores' implicit GEMM (ops/conv2d_igemm.lua) for halves of groups 1 and
-- channel counts multiples of 8 where the default device has wgmma (and for tf32), and the same
-- GEMM on f32 tiles for f32 of groups 1 and channels in 4s, forward, dx and dweight (the forward
-- also for in channels not in whole 16-byte chunks, padded: a stem's 3); depthwise convolutions
-- (groups = in = out) on ops/conv2d_depthwise.lua's (the forward and dx in layout nhwc, the
-- weight gradient in both); the direct kernels of conv2d.cu otherwise (one thread an output
-- element forward and for dx, one CTA a weight element for dw and one an output channel for
-- the bias): correct for every option, slow.
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local igemm = require "tocha.ops.conv2d_igemm"
local depthwise = require "tocha.ops.conv2d_depthwise"
local raise = errors.raise

local M = {}

-- The source of conv2d.cu's kernels (the epilogue's headers first).
function M.source()
  return op.source("activation.cuh") .. "\n" .. op.source("epilogue.cuh") .. "\n" .. op.source("conv2d.cu")
end

local Conv2d = op.class("Conv2d")
M.Conv2d = Conv2d
Conv2d.input_names = { "x" }

local address, launch_index = op.address, op.launch_index

-- A size option: a number or {h, w}, each an integer at least `least`.
-- The checks and pieces Conv2d and ConvTranspose2d (conv_transpose2d.lua) share.

-- A size given as a number or {h, w}, each an integer of at least `least`, as {h, w}.
local function pair(v, what, least)
  if type(v) == "number" then v = { v, v } end
  if type(v) ~= "table" or #v ~= 2 then raise(("%s: expected a number or {h, w}, got %s"):format(what, errors.show(v))) end
  for i = 1, 2 do
    if type(v[i]) ~= "number" or v[i] ~= math.floor(v[i]) or v[i] < least then
      raise(("%s: expected integers of at least %d, got %s"):format(what, least, errors.show(v[i])))
    end
  end
  return { v[1], v[2] }
end
M.pair = pair

-- The channel counts, checked positive integers.
function M.channels(in_channels, out_channels)
  in_channels, out_channels = op.integer(in_channels, "in_channels"), op.integer(out_channels, "out_channels")
  if in_channels < 1 then raise(("in_channels: expected a positive count, got %d"):format(in_channels)) end
  if out_channels < 1 then raise(("out_channels: expected a positive count, got %d"):format(out_channels)) end
  return in_channels, out_channels
end

-- The groups option (default 1), a divisor of both channel counts.
function M.groups(v, in_channels, out_channels)
  local groups = op.integer(v or 1, "groups")
  if groups < 1 or in_channels % groups ~= 0 or out_channels % groups ~= 0 then
    raise(("groups: expected a positive divisor of in_channels (%d) and out_channels (%d), got %d"):format(in_channels,
      out_channels, groups))
  end
  return groups
end

-- The layout option (default "nchw"): "nchw", or "nhwc" for images stored channels innermost
-- ([N, H, W, C] tensors, PyTorch's channels_last memory as its own shape).
function M.layout(v)
  if v == nil then return "nchw" end
  if v ~= "nchw" and v ~= "nhwc" then raise(("layout: expected \"nchw\" or \"nhwc\", got %s"):format(errors.show(v))) end
  return v
end

-- An image batch's shape checked against in_channels and the layout: its n, c, h, w.
function M.image_sizes(shape, what, in_channels, layout)
  op.check_shape(shape, what)
  local nhwc = layout == "nhwc"
  if #shape ~= 4 then
    raise(("%s: expected [N, %s], got %d dimensions"):format(what, nhwc and "H, W, C" or "C, H, W", #shape))
  end
  local n, c, h, w = shape[1], shape[2], shape[3], shape[4]
  if nhwc then c, h, w = shape[4], shape[2], shape[3] end
  if c ~= in_channels then raise(("%s: expected %d channels (in_channels), got %d"):format(what, in_channels, c)) end
  return n, c, h, w
end

-- The shape of an image batch of n x c x h x w in the layout.
function M.image_shape(n, c, h, w, layout)
  if layout == "nhwc" then return { n, h, w, c } end
  return { n, c, h, w }
end

-- A grid of CTAs of `block` threads, one a thread for `count` items (at least one CTA).
function M.flat_grid(count, block)
  return { math.max(1, math.min(math.ceil(count / block), 2 ^ 31 - 1)), 1, 1 }
end

-- The template arguments of conv2d.cu's kernels (the dtype, then window, stride, padding,
-- dilation, groups and layout baked in), the text of its constants and its size parameters.
function M.kernel_args(dt, k, stride, padding, dilation, groups, layout)
  local consts = ("%d, %d, %d, %d, %d, %d, %d, %d, %d, %d"):format(k[1], k[2], stride[1], stride[2], padding[1],
    padding[2], dilation[1], dilation[2], groups, layout == "nhwc" and 1 or 0)
  return dtype.ctype(dt) .. ", " .. consts, consts, "i64 n, i64 c, i64 h, i64 w, i64 co, i64 oh, i64 ow"
end

-- Conv2d.new(in_channels, out_channels, kernel_size [, {stride, padding, dilation, groups, bias, dtype, layout,
-- activation, residual, tf32}])
function Conv2d.new(in_channels, out_channels, kernel_size, opts)
  in_channels, out_channels = M.channels(in_channels, out_channels)
  local k = pair(kernel_size, "kernel_size", 1)
  opts = op.options(opts, { stride = true, padding = true, dilation = true, groups = true, bias = "boolean", dtype = true,
    layout = true, activation = true, residual = "boolean", tf32 = "boolean" }, "Conv2d")
  local matmul = require "tocha.matmul"
  local activation = matmul.activation(opts.activation, "activation")
  local stride, padding, dilation = pair(opts.stride or 1, "stride", 1), pair(opts.padding or 0, "padding", 0),
    pair(opts.dilation or 1, "dilation", 1)
  local groups = M.groups(opts.groups, in_channels, out_channels)
  local dt = op.float_dtype(opts.dtype, "dtype")
  local self = setmetatable({ kind = "conv2d", in_channels = in_channels, out_channels = out_channels, kernel_size = k,
    stride = stride, padding = padding, dilation = dilation, groups = groups, has_bias = opts.bias ~= false, dtype = dt,
    layout = M.layout(opts.layout), block_size = 256, activation = activation, residual = opts.residual == true }, Conv2d)
  local tf32 = matmul.tf32(opts.tf32, "tf32") -- (checked whatever the dtype)
  self.tf32 = dt == "f32" and tf32 and igemm.eligible(dt, groups, in_channels, out_channels, true) and igemm.has_wgmma()
  if self.residual then self.input_names = { "x", "residual" } end
  local targs, consts, sizes = M.kernel_args(dt, k, stride, padding, dilation, groups, self.layout)
  self.id = ("conv2d__%d__%d__%s__%s__%s"):format(in_channels, out_channels, consts:gsub(", ", "_"),
    self.has_bias and "bias" or "nobias", dt)
  if activation ~= "identity" then self.id = self.id .. "__" .. activation end
  if self.residual then self.id = self.id .. "__residual" end
  if self.tf32 then self.id = self.id .. "__tf32" end
  local source = M.source()
  self.kernel = kernel.new { source = source, name = "tocha_conv2d_forward", template_args = targs .. ", ew_fn_" .. activation,
    params = ("%s* x, %s* weight, %s* bias, %s* y, %s, i32 has_bias, %s* residual, %s* grad, i32 epilogue"):format(dt, dt, dt, dt, sizes,
      dt, dt) }
  if self.residual and activation == "identity" then -- the backward's d residual = dy
    self.copy_kernel = kernel.new { source = source, name = "tocha_conv2d_copy", template_args = dtype.ctype(dt),
      params = ("%s* src, %s* dst, i64 count"):format(dt, dt) }
  end
  self.grad_kernel = kernel.new { source = source, name = "tocha_conv2d_backward_data", template_args = targs,
    params = ("%s* dy, %s* weight, %s* dx, %s"):format(dt, dt, dt, sizes) }
  self.weight_grad_kernel = kernel.new { source = source, name = "tocha_conv2d_backward_weight", template_args = targs,
    params = ("%s* x, %s* dy, %s* dweight, %s* dbias, %s, i32 has_bias"):format(dt, dt, dt, dt, sizes) }
  if igemm.eligible(dt, groups, in_channels, out_channels) then
    self.igemm = igemm.new(self)
    if igemm.eligible_dx(self) then self.igemm_dx = igemm.new(self, true, true) end
    self.igemm_dw = igemm.new_dw(self)
  elseif igemm.eligible(dt, groups, in_channels, out_channels, true) then
    -- in channels not in 8s (a stem's 3): the forward pads them; dx and the weight gradient,
    -- whose GEMMs would read them in 16-byte chunks, stay on the direct kernels
    self.igemm = igemm.new(self)
  elseif depthwise.eligible(self) then
    -- the forward and dx in layout nhwc, the weight gradient in both
    self.depthwise = depthwise.new(self)
  end
  return self
end

-- x's shape ([n, c, h, w], or [n, h, w, c] in layout nhwc) checked: n, c, h, w and the output's
-- height and width.
function Conv2d:sizes_of(shape, what)
  local n, c, h, w = M.image_sizes(shape, what, self.in_channels, self.layout)
  local size, out = { h, w }, {}
  for i = 1, 2 do
    local span = self.dilation[i] * (self.kernel_size[i] - 1) + 1
    out[i] = math.floor((size[i] + 2 * self.padding[i] - span) / self.stride[i]) + 1
    if out[i] < 1 then
      raise(("%s: %s %d with padding %d is smaller than the dilated kernel (%d)"):format(what, i == 1 and "height" or "width",
        size[i], self.padding[i], span))
    end
  end
  return n, c, h, w, out[1], out[2]
end

-- ---- the RuntimeOp (tocha.op's defaults for the rest) ----

function Conv2d:param_names() return self.has_bias and { "weight", "bias" } or { "weight" } end
function Conv2d:param_shapes()
  local w = { self.out_channels, self.in_channels / self.groups, self.kernel_size[1], self.kernel_size[2] }
  return self.has_bias and { w, { self.out_channels } } or { w }
end

-- A model starts both parameters uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in /
-- groups x kh x kw, as PyTorch's nn.Conv2d.
function Conv2d:param_init_bound()
  return 1 / math.sqrt(self.in_channels / self.groups * self.kernel_size[1] * self.kernel_size[2])
end

-- With a residual the op has two inputs: x, then the residual, shaped as y.
function Conv2d:n_activation_inputs() return self.residual and 2 or 1 end

-- x's shape among input_shapes.
local function x_shape(self, input_shapes) return op.input_shapes(input_shapes, self:n_activation_inputs())[1] end

function Conv2d:compute_concrete_output_shape(input_shapes)
  local shapes = op.input_shapes(input_shapes, self:n_activation_inputs())
  local n, _, _, _, oh, ow = self:sizes_of(shapes[1], "inputs[1]")
  local out = M.image_shape(n, self.out_channels, oh, ow, self.layout)
  if self.residual then op.check_residual(shapes[2], out) end
  return out
end

-- A pack's inputs: x's address and shape, and the residual's address (0 for none), its shape
-- checked.
local function inputs_of(self, inputs)
  local addresses, shapes = op.inputs_of(inputs, self:n_activation_inputs())
  if self.residual then self:compute_concrete_output_shape(shapes) end
  return addresses[1], shapes[1], addresses[2] or 0
end

local flat_grid = M.flat_grid

-- The CTAs of tocha_conv2d_backward_weight for a weight [co, c / G, kh, kw] and bias_channels
-- bias sums (0 without a bias): one an (out, in) channel pair where a window's kh x kw taps fit
-- a thread's registers (conv2d.cu's CONV_DW_TAPS_IN_REGISTERS) and there are pairs enough
-- (PAIRS_AT_LEAST) to spread over the GPU, one a weight element otherwise (the kernel tells
-- which from the grid).
local TAPS_IN_REGISTERS, PAIRS_AT_LEAST = 64, 32 -- (the first is conv2d.cu's CONV_DW_TAPS_IN_REGISTERS)
function M.weight_grad_ctas(weight_shape, bias_channels)
  local pairs, taps = weight_shape[1] * weight_shape[2], weight_shape[3] * weight_shape[4]
  local items = ((taps <= TAPS_IN_REGISTERS and pairs >= PAIRS_AT_LEAST) and pairs or pairs * taps) + bias_channels
  return math.min(items, 2 ^ 31 - 1)
end

local function igemm_plan(self, shape)
  local n, c, h, w, oh, ow = self:sizes_of(shape, "inputs[1]")
  return igemm.plan(self.igemm, n, c, h, w, oh, ow), { n, c, h, w, oh, ow }
end

-- The dx plan of the tensor cores for x of this shape: the plan and the sizes it runs over (dy
-- of n images, out channels, oh x ow, into h x w).
local function dx_plan(self, shape)
  local n, _, h, w, oh, ow = self:sizes_of(shape, "inputs[1]")
  return igemm.plan(self.igemm_dx, n, self.out_channels, oh, ow, h, w), { n, self.out_channels, oh, ow, h, w }
end

-- For the tensor cores' forward (or with dx, its dx) on x of this shape: its tiles and splits of
-- k (specs, benches).
function Conv2d:igemm_split(input_shape, dx)
  local p = dx and dx_plan(self, input_shape) or igemm_plan(self, input_shape)
  return p.tiles, p.splits
end

-- The depthwise kernels of a pass (forward, dx: layout nhwc; the weight gradient: both).
local function depthwise_fast(self) return self.depthwise and self.layout == "nhwc" and self.depthwise or nil end

-- The launches of each pass: the forward (and the backward's recompute of z), dx, dweight
-- with dbias, by the kernels that run them.
function Conv2d:n_launches()
  return self.igemm and igemm.LAUNCHES or depthwise_fast(self) and depthwise.LAUNCHES or 1
end
local function dx_count(self)
  return self.igemm_dx and igemm.LAUNCHES or depthwise_fast(self) and depthwise.LAUNCHES or 1
end
local function dw_count(self)
  return self.igemm_dw and igemm.DW_LAUNCHES or self.depthwise and depthwise.DW_LAUNCHES or 1
end

-- The bytes of dz = dy F'(z) at the workspace's start in a backward through an activation
-- without a residual (with one, dz is d residual; without an activation, dy itself).
local function dz_bytes(self, shape)
  if self.activation == "identity" or self.residual then return 0 end
  local n, _, _, _, oh, ow = self:sizes_of(shape, "inputs[1]")
  return math.ceil(n * self.out_channels * oh * ow * dtype.size(self.dtype) / 256) * 256
end

-- Each pass's workspace bytes for x of this shape (past dz's, in a backward).
local function forward_bytes(self, shape)
  if self.igemm then return igemm_plan(self, shape).bytes end
  return depthwise_fast(self) and depthwise.bytes(self.depthwise) or 0
end
local function dx_bytes(self, shape)
  if self.igemm_dx then return dx_plan(self, shape).bytes end
  return depthwise_fast(self) and depthwise.bytes(self.depthwise) or 0
end
local function grad_plan(self, shape)
  local n, c, h, w, oh, ow = self:sizes_of(shape, "inputs[1]")
  if self.igemm_dw then return igemm.plan_dw(self.igemm_dw, n, c, h, w, oh, ow), { n, c, h, w, oh, ow } end
  if self.depthwise then return depthwise.plan_grad(self.depthwise, n, c, h, w, oh, ow), { n, c, h, w, oh, ow } end
  return { bytes = 0 }, { n, c, h, w, oh, ow }
end

function Conv2d:workspace_bytes(input_shapes)
  local shape = x_shape(self, input_shapes)
  return dz_bytes(self, shape) + math.max(forward_bytes(self, shape), dx_bytes(self, shape), grad_plan(self, shape).bytes)
end

local function need_workspace(ws, bytes)
  if ws == 0 and bytes > 0 then raise("params: the op needs its workspace (op:workspace_bytes) after the parameters") end
end

-- Forward launch i for x of this shape: kernel, grid and (given addresses a = {x, y, weight,
-- bias or nil, workspace, residual or nil, grad or nil}: grad for the backward's dz) its
-- arguments.
local function forward_launch(self, i, shape, a)
  launch_index(i, self:n_launches())
  local given = a ~= nil
  a = a or { 0, 0, 0, nil, 0 }
  local x, y, weight, bias, ws, residual, grad = a[1], a[2], a[3], a[4], a[5], a[6], a[7]
  local n, c, h, w, oh, ow = self:sizes_of(shape, "inputs[1]")
  if self.igemm then
    local p, sizes = igemm_plan(self, shape)
    if p.tiles > 2 ^ 31 - 1 then raise(("inputs[1]: %d output pixels, too many for one call"):format(p.m)) end
    if given then need_workspace(ws, p.bytes) end
    return igemm.launch(self.igemm, i, p, sizes, x, y, weight, bias, ws, residual, grad)
  elseif depthwise_fast(self) then
    if given then need_workspace(ws, 1) end
    return depthwise.launch(self.depthwise, i, { n, c, h, w, oh, ow }, x, y, weight, bias, ws, residual, grad)
  end
  return self.kernel, flat_grid(n * self.out_channels * oh * ow, self.block_size), { x, weight, bias or y, y, n, c, h, w,
    self.out_channels, oh, ow, bias and 1 or 0, residual or y, grad or y, (residual and 1 or 0) + (grad and 2 or 0) }
end

function Conv2d:kernel_for_launch(i, input_shapes)
  return (forward_launch(self, i, x_shape(self, input_shapes)))
end

function Conv2d:grid_for_launch(i, input_shapes)
  local _, grid = forward_launch(self, i, x_shape(self, input_shapes))
  return grid
end

function Conv2d:grid(output_shape)
  return flat_grid(op.numel(output_shape), self.block_size)
end

local check_aligned = op.check_aligned

-- Whether the op's kernels read x, dy and the weight in 16-byte chunks (the tensor cores), or
-- read and write the activations in 16-byte vectors (the depthwise kernels of layout nhwc,
-- channels in 16-byte groups; their weight is relaid into the workspace first).
local function chunked(self) return self.igemm ~= nil and not self.igemm.padded end
local function vectors(self) return depthwise_fast(self) ~= nil and self.depthwise.v > 1 end

-- The forward's addresses from a pack's inputs, parameters and output (the workspace after
-- the parameters, 0 for none), x's shape, and the alignment checked.
local function forward_addresses(self, inputs, params, output)
  params = op.list(params, "params")
  local at = #self:param_names() + 1
  local x, shape, residual = inputs_of(self, inputs)
  local weight = address(params[1], "params[1]")
  if chunked(self) then check_aligned({ { x, "x" }, { weight, "weight" } }) end
  if vectors(self) then check_aligned({ { x, "x" }, { address(output, "output"), "y" } }) end
  return { x, address(output, "output"), weight, self.has_bias and address(params[2], "params[2]") or nil,
    address(params[at] or 0, ("params[%d]"):format(at)), self.residual and residual or nil }, shape
end

function Conv2d:pack_args(inputs, params, output)
  local a, shape = forward_addresses(self, inputs, params, output)
  local _, _, args = forward_launch(self, 1, shape, a)
  return args
end

function Conv2d:pack_args_for_launch(i, inputs, params, output)
  local a, shape = forward_addresses(self, inputs, params, output)
  local _, _, args = forward_launch(self, i, shape, a)
  return args
end

-- The backward: with an epilogue, first dz = dy F'(z) (the forward's launches again, writing dz
-- in y's place; a copy of dy into d residual for a residual alone); then dx, then dweight with
-- dbias, both over dz.
local function dz_count(self)
  if self.activation ~= "identity" then return self:n_launches() end
  return self.residual and 1 or 0
end
function Conv2d:n_backward_launches() return dz_count(self) + dx_count(self) + dw_count(self) end

-- The backward launches that write input i's gradient and nothing a later launch reads, first
-- and last (a model skips them where that input needs no gradient: a network's stem); nil for
-- an input without such launches (a residual's gradient comes with dz).
function Conv2d:input_grad_launches(i)
  if i ~= 1 then return nil end
  local pre = dz_count(self)
  return pre + 1, pre + dx_count(self)
end

-- Backward launch i for x of this shape: kernel, grid and (given addresses a = {x, dy, weight,
-- workspace, dx, dweight, dbias or nil, bias or nil, residual, d residual}) its arguments.
local function backward_launch(self, i, shape, a)
  launch_index(i, self:n_backward_launches())
  local n, c, h, w, oh, ow = self:sizes_of(shape, "inputs[1]")
  local given = a ~= nil
  a = a or { 0, 0, 0, 0, 0, 0, nil, nil, 0, 0 }
  local x, dy, weight, ws, dx, dw, db = a[1], a[2], a[3], a[4], a[5], a[6], a[7]
  local bias, residual, d_residual = a[8], a[9], a[10]
  local pre, skip = dz_count(self), dz_bytes(self, shape)
  if i <= pre then
    local count = n * self.out_channels * oh * ow
    if self.activation == "identity" then return self.copy_kernel, flat_grid(count, self.block_size), { dy, d_residual, count } end
    if not given then return forward_launch(self, i, shape) end
    need_workspace(ws, skip + forward_bytes(self, shape))
    local dz = self.residual and d_residual or ws
    return forward_launch(self, i, shape, { x, dz, weight, bias, ws + skip, self.residual and residual or nil, dy })
  end
  i = i - pre
  if self.activation ~= "identity" then dy = self.residual and d_residual or ws end
  if given then need_workspace(ws, skip + math.max(dx_bytes(self, shape), grad_plan(self, shape).bytes)) end
  ws = ws + skip
  local first = dx_count(self)
  if i <= first then
    if self.igemm_dx then
      local p, sizes = dx_plan(self, shape)
      if p.tiles > 2 ^ 31 - 1 then raise(("inputs[1]: %d input pixels, too many for one call"):format(p.m)) end
      return igemm.launch(self.igemm_dx, i, p, sizes, dy, dx, weight, nil, ws)
    elseif depthwise_fast(self) then
      return depthwise.launch_dx(self.depthwise, i, { n, c, h, w, oh, ow }, dy, dx, weight, ws)
    end
    return self.grad_kernel, flat_grid(n * c * h * w, self.block_size), { dy, weight, dx, n, c, h, w, self.out_channels, oh, ow }
  end
  i = i - first
  if self.igemm_dw or self.depthwise then
    local p, sizes = grad_plan(self, shape)
    if self.igemm_dw then return igemm.launch_dw(self.igemm_dw, i, p, sizes, x, dy, dw, db, ws, self.has_bias) end
    return depthwise.launch_grad(self.depthwise, i, p, sizes, x, dy, dw, db, ws)
  end
  return self.weight_grad_kernel, { M.weight_grad_ctas(self:param_shapes()[1], self.has_bias and self.out_channels or 0), 1, 1 },
    { x, dy, dw, db or dw, n, c, h, w, self.out_channels, oh, ow, self.has_bias and 1 or 0 }
end

function Conv2d:backward_kernel_for_launch(i, input_shapes)
  return (backward_launch(self, i, x_shape(self, input_shapes)))
end

function Conv2d:backward_grid_for_launch(i, input_shapes)
  local _, grid = backward_launch(self, i, x_shape(self, input_shapes))
  return grid
end
Conv2d.backward_grid = function(self, ...) return self:backward_grid_for_launch(1, ...) end
Conv2d.pack_backward_args = function(self, ...) return self:pack_backward_args_for_launch(1, ...) end

function Conv2d:pack_backward_args_for_launch(i, inputs, params, _, _, grad_output, _, grad_inputs, grad_params)
  local x, shape, residual = inputs_of(self, inputs)
  params, grad_inputs, grad_params = op.list(params, "params"), op.list(grad_inputs, "grad_inputs"),
    op.list(grad_params, "grad_params")
  local at = #self:param_names() + 1
  local a = { x, address(grad_output, "grad_output"), address(params[1], "params[1]"),
    address(params[at] or 0, ("params[%d]"):format(at)), address(grad_inputs[1], "grad_inputs[1]"),
    address(grad_params[1], "grad_params[1]"), self.has_bias and address(grad_params[2], "grad_params[2]") or nil,
    self.has_bias and address(params[2], "params[2]") or nil, residual,
    self.residual and address(grad_inputs[2], "grad_inputs[2]") or 0 }
  if chunked(self) then
    check_aligned({ { x, "x" }, { a[2], "dy" }, { a[3], "weight" } })
    if self.residual then check_aligned({ { a[10], "d residual" } }) end
    -- (a strided 1 x 1 window's dx is spread out in 16-byte chunks: conv2d_igemm's launch 6)
    if self.igemm_dx and self.igemm_dx.scatter and self.layout == "nhwc" then check_aligned({ { a[5], "dx" } }) end
  end
  if vectors(self) then
    check_aligned({ { x, "x" }, { a[2], "dy" }, { a[5], "dx" } })
    if self.residual then check_aligned({ { a[10], "d residual" } }) end
  end
  local _, _, args = backward_launch(self, i, shape, a)
  return args
end

-- (ConvTranspose2d's launches check the same)
M.check_aligned, M.need_workspace = check_aligned, need_workspace

op.finish(Conv2d)
return M
