-- tocha.ConvTranspose2d: PyTorch's nn.ConvTranspose2d on NCHW or NHWC tensors (a decoder's learned
-- upsampling), with its parameters "weight" [in, out / groups, kh, kw] and "bias" [out], forward
-- and backward, every float dtype. It is the gradient of a convolution: kernels/conv2d.cu's
-- direct kernels run with the roles swapped (the forward is a convolution's dx, dx a
-- convolution's forward, the weight gradient the weight kernel with x and dy exchanged, the
-- bias gradient a sum of dy a channel), the options baked in as Conv2d's are.
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
local raise = errors.raise

local M = {}

local ConvTranspose2d = op.class("ConvTranspose2d")
M.ConvTranspose2d = ConvTranspose2d
ConvTranspose2d.input_names = { "x" }

local address, input_of, one_input, launch_index = op.address, op.input_of, op.one_input, op.launch_index

local pair, flat_grid = conv2d.pair, conv2d.flat_grid

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
    params = ("%s* x, %s* weight, %s* bias, %s* y, %s, i32 has_bias, %s* residual, %s* grad, i32 epilogue"):format(dt, dt, dt, dt, sizes,
      dt, dt) }
  self.weight_grad_kernel = kernel.new { source = source, name = "tocha_conv2d_backward_weight", template_args = targs,
    params = ("%s* x, %s* dy, %s* dweight, %s* dbias, %s, i32 has_bias"):format(dt, dt, dt, dt, sizes) }
  self.bias_grad_kernel = kernel.new { source = source, name = "tocha_conv2d_backward_bias",
    template_args = dtype.ctype(dt) .. (self.layout == "nhwc" and ", 1" or ", 0"),
    params = ("%s* dy, %s* dbias, i64 n, i64 co, i64 plane"):format(dt, dt) }
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

function ConvTranspose2d:n_backward_launches() return 3 end

function ConvTranspose2d:backward_kernel_for_launch(i)
  launch_index(i, 3)
  if i == 1 then return self.grad_kernel end
  return i == 2 and self.weight_grad_kernel or self.bias_grad_kernel
end

function ConvTranspose2d:backward_grid_for_launch(i, input_shapes)
  launch_index(i, 3)
  local shape = one_input(input_shapes)
  self:sizes_of(shape, "inputs[1]")
  if i == 1 then return flat_grid(op.numel(shape), self.block_size) end
  if i == 2 then return { math.min(op.numel(self:param_shapes()[1]), 2 ^ 31 - 1), 1, 1 } end
  if not self.has_bias then return { 0, 0, 0 } end
  return { math.min(self.out_channels, 2 ^ 31 - 1), 1, 1 }
end
ConvTranspose2d.backward_grid = function(self, ...) return self:backward_grid_for_launch(1, ...) end
ConvTranspose2d.pack_backward_args = function(self, ...) return self:pack_backward_args_for_launch(1, ...) end

function ConvTranspose2d:pack_backward_args_for_launch(i, inputs, params, _, _, grad_output, _, grad_inputs, grad_params)
  launch_index(i, 3)
  local x, shape = input_of(inputs)
  local n, c, h, w, oh, ow = self:sizes_of(shape, "inputs[1]")
  params, grad_inputs, grad_params = op.list(params, "params"), op.list(grad_inputs, "grad_inputs"),
    op.list(grad_params, "grad_params")
  local dy = address(grad_output, "grad_output")
  local cout = self.out_channels
  -- dx [n, in, h, w]: a convolution of dy [n, out, oh, ow] by the weight, without a bias
  if i == 1 then
    local dx = address(grad_inputs[1], "grad_inputs[1]")
    return { dy, address(params[1], "params[1]"), dx, dx, n, cout, oh, ow, c, h, w, 0, dx, dx, 0 }
  end
  -- dweight: the weight kernel with dy as the convolution's input and x as its output gradient
  local dw = address(grad_params[1], "grad_params[1]")
  if i == 2 then return { dy, x, dw, dw, n, cout, oh, ow, c, h, w, 0 } end
  if not self.has_bias then return {} end
  return { dy, address(grad_params[2], "grad_params[2]"), n, cout, oh * ow }
end

op.finish(ConvTranspose2d)
return M
