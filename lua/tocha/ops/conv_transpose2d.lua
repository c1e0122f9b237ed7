-- tocha.ConvTranspose2d: PyTorch's nn.ConvTranspose2d on NCHW or NHWC tensors (a decoder's learned
-- upsampling), with its parameters "weight" [in, out / groups, kh, kw] and "bias" [out], forward
-- and backward, every float dtype. It is the gradient of a convolution: kernels/conv2d.cu's
-- direct kernels run with the roles swapped (the forward is a convolution's dx, dx a
-- convolution's forward, the weight gradient the weight kernel with x and dy exchanged, the
-- bias gradient a sum of dy a channel), the options baked in as Conv2d's are. Halves of groups
-- 1 with channel counts multiples of 8, where the default device has wgmma and dilation (k -
-- 1) >= padding, run on the tensor cores the same way (ops/conv2d_igemm.lua): the forward is
-- the implicit GEMM of the convolution's dx (x spread out by the stride, by the flipped
-- weight, + bias in its epilogue), dx that convolution's forward, dweight its weight
-- gradient with x and dy exchanged; the bias gradient stays the direct sum.
--
--   local up = tocha.ConvTranspose2d.new(256, 128, 2, { stride = 2 })   -- H, W doubled
--   local y = up:forward(x, w, b)
--   local dx, dw, db = up:backward(x, w, b, dy)
--
-- Options as PyTorch's: stride (1), padding (0), output_padding (0, less than the stride or the
-- dilation), dilation (1), each a number or {h, w}; groups (1); bias (true); dtype (f32); layout
-- ("nchw", or "nhwc": x [N, H, W, C] and y [N, OH, OW, C], the weight in PyTorch's layout).
-- Output size: (H - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1.
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local conv2d = require "tocha.ops.conv2d"
local igemm = require "tocha.ops.conv2d_igemm"
local raise = errors.raise

local M = {}

local ConvTranspose2d = op.class("ConvTranspose2d")
M.ConvTranspose2d = ConvTranspose2d
ConvTranspose2d.input_names = { "x" }

local address, input_of, one_input, launch_index = op.address, op.input_of, op.one_input, op.launch_index

local pair, flat_grid = conv2d.pair, conv2d.flat_grid
local check_aligned, need_workspace = conv2d.check_aligned, conv2d.need_workspace

-- ConvTranspose2d.new(in_channels, out_channels, kernel_size [, {stride, padding, output_padding,
-- dilation, groups, bias, dtype}])
function ConvTranspose2d.new(in_channels, out_channels, kernel_size, opts)
  in_channels, out_channels = conv2d.channels(in_channels, out_channels)
  local k = pair(kernel_size, "kernel_size", 1)
  opts = op.options(opts, { stride = true, padding = true, output_padding = true, dilation = true, groups = true,
    bias = "boolean", dtype = true, layout = true }, "ConvTranspose2d")
  local stride, padding = pair(opts.stride or 1, "stride", 1), pair(opts.padding or 0, "padding", 0)
  local output_padding, dilation = pair(opts.output_padding or 0, "output_padding", 0), pair(opts.dilation or 1, "dilation", 1)
  for i = 1, 2 do
    if output_padding[i] >= stride[i] and output_padding[i] >= dilation[i] then
      raise(("output_padding: expected less than the stride or the dilation, got %d"):format(output_padding[i]))
    end
  end
  local groups = conv2d.groups(opts.groups, in_channels, out_channels)
  local dt = op.float_dtype(opts.dtype, "dtype")
  local self = setmetatable({ kind = "conv_transpose2d", in_channels = in_channels, out_channels = out_channels,
    kernel_size = k, stride = stride, padding = padding, output_padding = output_padding, dilation = dilation,
    groups = groups, has_bias = opts.bias ~= false, dtype = dt, layout = conv2d.layout(opts.layout), block_size = 256 },
    ConvTranspose2d)
  local targs, consts, sizes = conv2d.kernel_args(dt, k, stride, padding, dilation, groups, self.layout)
  self.id = ("conv_transpose2d__%d__%d__%s__%d_%d__%s__%s"):format(in_channels, out_channels, consts:gsub(", ", "_"),
    output_padding[1], output_padding[2], self.has_bias and "bias" or "nobias", dt)
  local source = conv2d.source()
  -- In the convolution's terms: its input has this op's out_channels, its output in_channels.
  self.kernel = kernel.new { source = source, name = "tocha_conv_transpose2d_forward", template_args = targs,
    params = ("%s* x, %s* weight, %s* bias, %s* y, %s, i32 has_bias"):format(dt, dt, dt, dt, sizes) }
  self.grad_kernel = kernel.new { source = source, name = "tocha_conv2d_forward", template_args = targs .. ", ew_fn_identity",
    params = ("%s* x, %s* weight, %s* bias, %s* y, %s, i32 has_bias, %s* residual, %s* grad, i32 epilogue"):format(dt, dt,
      dt, dt, sizes, dt, dt) }
  self.weight_grad_kernel = kernel.new { source = source, name = "tocha_conv2d_backward_weight", template_args = targs,
    params = ("%s* x, %s* dy, %s* dweight, %s* dbias, %s, i32 has_bias"):format(dt, dt, dt, dt, sizes) }
  self.bias_grad_kernel = kernel.new { source = source, name = "tocha_conv2d_backward_bias",
    template_args = dtype.ctype(dt) .. (self.layout == "nhwc" and ", 1" or ", 0"),
    params = ("%s* dy, %s* dbias, i64 n, i64 co, i64 plane"):format(dt, dt) }
  -- the convolution whose dx this op is: out_channels into in_channels, the same window
  local shadow = { dtype = dt, in_channels = out_channels, out_channels = in_channels, kernel_size = k, stride = stride,
    padding = padding, dilation = dilation, layout = self.layout, activation = "identity" }
  -- (halves: f32's direct kernels here)
  if dt ~= "f32" and igemm.eligible(dt, groups, out_channels, in_channels) and igemm.eligible_dx(shadow) then
    self.igemm = igemm.new(shadow, true)
    self.igemm_dx = igemm.new(shadow)
    self.igemm_dw = igemm.new_dw(shadow)
  end
  return self
end

-- x's shape ([n, c, h, w], or [n, h, w, c] in layout nhwc) checked: n, c, h, w and the output's
-- height and width.
function ConvTranspose2d:sizes_of(shape, what)
  local n, c, h, w = conv2d.image_sizes(shape, what, self.in_channels, self.layout)
  local size, out = { h, w }, {}
  for i = 1, 2 do
    out[i] = (size[i] - 1) * self.stride[i] - 2 * self.padding[i] + self.dilation[i] * (self.kernel_size[i] - 1) +
      self.output_padding[i] + 1
    if out[i] < 1 then
      raise(("%s: %s %d gives an empty output with padding %d"):format(what, i == 1 and "height" or "width", size[i],
        self.padding[i]))
    end
  end
  return n, c, h, w, out[1], out[2]
end

-- ---- the RuntimeOp (tocha.op's defaults for the rest) ----

function ConvTranspose2d:param_names() return self.has_bias and { "weight", "bias" } or { "weight" } end
function ConvTranspose2d:param_shapes()
  local w = { self.in_channels, self.out_channels / self.groups, self.kernel_size[1], self.kernel_size[2] }
  return self.has_bias and { w, { self.out_channels } } or { w }
end

-- A model starts both parameters uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's fan_in
-- of this weight [in, out / groups, kh, kw]: out / groups x kh x kw.
function ConvTranspose2d:param_init_bound()
  return 1 / math.sqrt(self.out_channels / self.groups * self.kernel_size[1] * self.kernel_size[2])
end

function ConvTranspose2d:compute_concrete_output_shape(input_shapes)
  local n, _, _, _, oh, ow = self:sizes_of(one_input(input_shapes), "inputs[1]")
  return conv2d.image_shape(n, self.out_channels, oh, ow, self.layout)
end

function ConvTranspose2d:grid(output_shape)
  return flat_grid(op.numel(output_shape), self.block_size)
end

-- In the kernels' (a convolution's) terms the sizes are (n, c = out_channels, h = oh, w = ow,
-- co = in_channels, oh = x's h, ow = x's w).
function ConvTranspose2d:pack_args(inputs, params, output)
  local x, shape = input_of(inputs)
  local n, c, h, w, oh, ow = self:sizes_of(shape, "inputs[1]")
  params = op.list(params, "params")
  local y = address(output, "output")
  return { x, address(params[1], "params[1]"), self.has_bias and address(params[2], "params[2]") or y, y, n,
    self.out_channels, oh, ow, c, h, w, self.has_bias and 1 or 0 }
end

-- ---- the tensor cores' launches (ops/conv2d_igemm.lua), where the op takes them ----

-- The plans over x of this shape: the forward's (the convolution's dx: x of n images, in
-- channels, h x w, into oh x ow), dx's (its forward: dy into h x w) and dweight's, with the
-- sizes each runs over.
local function plans(self, shape)
  local n, c, h, w, oh, ow = self:sizes_of(shape, "inputs[1]")
  local co = self.out_channels
  return { forward = igemm.plan(self.igemm, n, c, h, w, oh, ow), dx = igemm.plan(self.igemm_dx, n, co, oh, ow, h, w),
    dw = igemm.plan_dw(self.igemm_dw, n, co, oh, ow, h, w), x_sizes = { n, c, h, w, oh, ow },
    y_sizes = { n, co, oh, ow, h, w } }
end

local function check_pixels(p, what)
  if p.tiles > 2 ^ 31 - 1 then raise(("inputs[1]: %d %s pixels, too many for one call"):format(p.m, what)) end
end

local function workspace_of(self, params)
  local at = #self:param_names() + 1
  return address(params[at] or 0, ("params[%d]"):format(at))
end

function ConvTranspose2d:n_launches() return self.igemm and igemm.LAUNCHES or 1 end

function ConvTranspose2d:workspace_bytes(input_shapes)
  if not self.igemm then return 0 end
  local p = plans(self, one_input(input_shapes))
  return math.max(p.forward.bytes, p.dx.bytes, p.dw.bytes)
end

function ConvTranspose2d:kernel_for_launch(i, input_shapes)
  launch_index(i, self:n_launches())
  if not self.igemm then return self.kernel end
  local p = plans(self, one_input(input_shapes))
  return (igemm.launch(self.igemm, i, p.forward, p.x_sizes, 0, 0, 0, nil, 0))
end

function ConvTranspose2d:grid_for_launch(i, input_shapes, output_shape)
  launch_index(i, self:n_launches())
  if not self.igemm then return self:grid(output_shape) end
  local p = plans(self, one_input(input_shapes))
  check_pixels(p.forward, "output")
  local _, grid = igemm.launch(self.igemm, i, p.forward, p.x_sizes, 0, 0, 0, nil, 0)
  return grid
end

function ConvTranspose2d:pack_args_for_launch(i, inputs, params, output, output_shape)
  launch_index(i, self:n_launches())
  if not self.igemm then return self:pack_args(inputs, params, output, output_shape) end
  params = op.list(params, "params")
  local ws = workspace_of(self, params)
  local x, shape = input_of(inputs)
  local p = plans(self, shape)
  need_workspace(ws, p.forward.bytes)
  local weight = address(params[1], "params[1]")
  check_aligned({ { x, "x" }, { weight, "weight" } })
  local _, _, args = igemm.launch(self.igemm, i, p.forward, p.x_sizes, x, address(output, "output"), weight,
    self.has_bias and address(params[2], "params[2]") or nil, ws)
  return args
end

-- The backward: dx (one direct launch, or the tensor cores' LAUNCHES), dweight (one direct
-- launch, or the tensor cores' DW_LAUNCHES), then dbias (a direct launch; an empty grid
-- without a bias).
local function dx_count(self) return self.igemm and igemm.LAUNCHES or 1 end
local function dw_count(self) return self.igemm and igemm.DW_LAUNCHES or 1 end
function ConvTranspose2d:n_backward_launches() return dx_count(self) + dw_count(self) + 1 end

-- The backward launches that write x's gradient alone (m:backward skips them where x needs
-- none): the dx launches, first to last.
function ConvTranspose2d:input_grad_launches(i)
  if i ~= 1 then return nil end
  return 1, dx_count(self)
end

-- Backward launch i for x of this shape: kernel, grid and (given addresses a = {x, dy, weight,
-- workspace, dx, dweight, dbias or nil}) its arguments.
local function backward_launch(self, i, shape, a)
  launch_index(i, self:n_backward_launches())
  local n, c, h, w, oh, ow = self:sizes_of(shape, "inputs[1]")
  local given = a ~= nil
  a = a or { 0, 0, 0, 0, 0, 0, nil }
  local x, dy, weight, ws, dx, dw, db = a[1], a[2], a[3], a[4], a[5], a[6], a[7]
  local cout = self.out_channels
  local p = self.igemm and plans(self, shape)
  if i <= dx_count(self) then
    -- dx [n, in, h, w]: a convolution of dy [n, out, oh, ow] by the weight, without a bias
    if not self.igemm then
      return self.grad_kernel, flat_grid(n * c * h * w, self.block_size),
        { dy, weight, dx, dx, n, cout, oh, ow, c, h, w, 0, dx, dx, 0 }
    end
    check_pixels(p.dx, "input")
    if given then need_workspace(ws, p.dx.bytes) end
    return igemm.launch(self.igemm_dx, i, p.dx, p.y_sizes, dy, dx, weight, nil, ws)
  end
  i = i - dx_count(self)
  if i <= dw_count(self) then
    -- dweight: the convolution's weight gradient with dy as its input and x as its output gradient
    if not self.igemm then
      return self.weight_grad_kernel, { conv2d.weight_grad_ctas(self:param_shapes()[1], 0), 1, 1 },
        { dy, x, dw, dw, n, cout, oh, ow, c, h, w, 0 }
    end
    if given then need_workspace(ws, p.dw.bytes) end
    return igemm.launch_dw(self.igemm_dw, i, p.dw, p.y_sizes, dy, x, dw, nil, ws, false)
  end
  if not self.has_bias then return self.bias_grad_kernel, { 0, 0, 0 }, {} end
  return self.bias_grad_kernel, { math.min(cout, 2 ^ 31 - 1), 1, 1 }, { dy, db, n, cout, oh * ow }
end

function ConvTranspose2d:backward_kernel_for_launch(i, input_shapes)
  return (backward_launch(self, i, one_input(input_shapes)))
end

function ConvTranspose2d:backward_grid_for_launch(i, input_shapes)
  local _, grid = backward_launch(self, i, one_input(input_shapes))
  return grid
end
ConvTranspose2d.backward_grid = function(self, ...) return self:backward_grid_for_launch(1, ...) end
ConvTranspose2d.pack_backward_args = function(self, ...) return self:pack_backward_args_for_launch(1, ...) end

function ConvTranspose2d:pack_backward_args_for_launch(i, inputs, params, _, _, grad_output, _, grad_inputs, grad_params)
  local x, shape = input_of(inputs)
  params, grad_inputs, grad_params = op.list(params, "params"), op.list(grad_inputs, "grad_inputs"),
    op.list(grad_params, "grad_params")
  local a = { x, address(grad_output, "grad_output"), address(params[1], "params[1]"),
    self.igemm and workspace_of(self, params) or 0, address(grad_inputs[1], "grad_inputs[1]"),
    address(grad_params[1], "grad_params[1]"), self.has_bias and address(grad_params[2], "grad_params[2]") or nil }
  if self.igemm then check_aligned({ { x, "x" }, { a[2], "dy" }, { a[3], "weight" } }) end
  local _, _, args = backward_launch(self, i, shape, a)
  return args
end

op.finish(ConvTranspose2d)
return M
