-- tocha.UpsampleBilinear2d: bilinear or bicubic resizing of NCHW (or channels-last) tensors to
-- any size, forward and backward, every float dtype (halves computed in f32):
-- kernels/upsample_bilinear2d.cu behind a RuntimeOp, so that it joins a tocha.Model. PyTorch's
-- F.interpolate(x, size=, scale_factor=, mode="bilinear" or "bicubic", align_corners=) and ONNX's
-- Resize(mode="linear" or "cubic").
--
--   local up = tocha.UpsampleBilinear2d.new { scale = 2 }                 -- [B, C, H, W] -> [B, C, 2H, 2W]
--   local to = tocha.UpsampleBilinear2d.new { size = { 65, 65 }, align_corners = true }
--   local smooth = tocha.UpsampleBilinear2d.new { scale = 2, mode = "bicubic" }
--   local y = up:forward(x)
--   local dx = up:backward(x, dy)
--
-- Options: size (a number or {h, w}) or scale (a positive number or {h, w}: the output size is
-- floor(in x scale), and, as PyTorch does when given a scale factor, the source coordinate is
-- o / scale rather than o x in / out); align_corners (PyTorch's, default false), or coordinates,
-- ONNX's coordinate_transformation_mode: "half_pixel" (the default), "pytorch_half_pixel" (an
-- output of one pixel reads the first), "align_corners" or "asymmetric". dtype (default f32),
-- layout "nchw" (default) or "nhwc" ([B, H, W, C] -> [B, OH, OW, C]). mode "bilinear" (the
-- default) or "bicubic": the 4 x 4 inputs around the source point, edges repeated, weighted by
-- Keys' cubic convolution of coefficient cubic_a (default -0.75, PyTorch's; ONNX's cubic_coeff_a),
-- the source point not clamped to the image as bilinear's is (PyTorch's and ONNX's mapping).
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local raise = errors.raise

local M = {}

local BLOCK = 256
local COORDINATES = { half_pixel = true, pytorch_half_pixel = true, align_corners = true, asymmetric = true }

local UpsampleBilinear2d = op.class("UpsampleBilinear2d")
M.UpsampleBilinear2d = UpsampleBilinear2d

-- {h, w} from a number or a pair, each checked by ok (what it must be, for the message).
local function pair(v, what, ok, must)
  if type(v) == "number" then v = { v, v } end
  if type(v) ~= "table" or #v ~= 2 then raise(("%s: expected a number or {h, w}, got %s"):format(what, errors.show(v))) end
  for i = 1, 2 do
    if not ok(v[i]) then raise(("%s: expected %s, got %s"):format(what, must, errors.show(v[i]))) end
  end
  return { v[1], v[2] }
end

local function is_size(s) return type(s) == "number" and s == math.floor(s) and s >= 1 and s <= 2 ^ 31 - 1 end
local function is_scale(s) return type(s) == "number" and s > 0 and s < 2 ^ 31 end

-- UpsampleBilinear2d.new{size = | scale = [, align_corners =, coordinates =, dtype =, layout =]}
function UpsampleBilinear2d.new(opts)
  opts = op.options(opts, { size = true, scale = true, align_corners = "boolean", coordinates = true, dtype = true,
    layout = true, mode = true, cubic_a = "number" }, "tocha.UpsampleBilinear2d")
  if (opts.size == nil) == (opts.scale == nil) then raise("size, scale: expected one of them, got " ..
    (opts.size == nil and "neither" or "both")) end
  local dt = op.float_dtype(opts.dtype, "dtype")
  local layout = opts.layout or "nchw"
  if layout ~= "nchw" and layout ~= "nhwc" then raise(("layout: expected \"nchw\" or \"nhwc\", got %s"):format(errors.show(layout))) end
  local coordinates = opts.coordinates or (opts.align_corners and "align_corners" or "half_pixel")
  if not COORDINATES[coordinates] then
    raise(("coordinates: expected \"half_pixel\", \"pytorch_half_pixel\", \"align_corners\" or \"asymmetric\", got %s")
      :format(errors.show(coordinates)))
  end
  if opts.align_corners ~= nil and opts.coordinates ~= nil and (coordinates == "align_corners") ~= opts.align_corners then
    raise(("align_corners: %s contradicts coordinates %s"):format(tostring(opts.align_corners), coordinates))
  end
  local mode = opts.mode or "bilinear"
  if mode ~= "bilinear" and mode ~= "bicubic" then
    raise(("mode: expected \"bilinear\" or \"bicubic\", got %s"):format(errors.show(mode)))
  end
  if opts.cubic_a ~= nil and mode ~= "bicubic" then raise("cubic_a: only a bicubic resize (mode = \"bicubic\") takes it") end
  local cubic_a = opts.cubic_a or -0.75
  if cubic_a ~= cubic_a or math.abs(cubic_a) == math.huge then raise("cubic_a: expected a finite number, got " .. errors.show(cubic_a)) end
  local self = setmetatable({ kind = "upsample_bilinear2d", dtype = dt, layout = layout, coordinates = coordinates,
    mode = mode, cubic_a = cubic_a, block_size = BLOCK }, UpsampleBilinear2d)
  if opts.size ~= nil then
    self.size = pair(opts.size, "size", is_size, "sizes from 1 to 2^31 - 1")
  else
    self.scale = pair(opts.scale, "scale", is_scale, "positive numbers")
  end
  self.id = ("upsample_bilinear2d__%s__%s__%s__%s"):format(dt, layout, coordinates,
    self.size and ("size_%d_%d"):format(self.size[1], self.size[2]) or ("scale_%.17g_%.17g"):format(self.scale[1], self.scale[2]))
    .. (mode == "bicubic" and ("__bicubic_%.17g"):format(cubic_a) or "")
  local source = op.source("upsample_bilinear2d.cu")
  local targs = ("%s, %d, %d"):format(dtype.ctype(dt), layout == "nhwc" and 1 or 0, mode == "bicubic" and 1 or 0)
  local tail = "i64 total, i32 C, i32 H, i32 W, i32 OH, i32 OW, f64 ratio_h, f64 ratio_w, f64 half, f64 cubic_a"
  self.kernel = kernel.new { source = source, name = "tocha_upsample_bilinear2d", template_args = targs,
    params = ("%s* x, %s* y, %s"):format(dt, dt, tail) }
  self.grad_kernel = kernel.new { source = source, name = "tocha_upsample_bilinear2d_backward", template_args = targs,
    params = ("%s* dy, %s* dx, %s"):format(dt, dt, tail) }
  self.backward_kernel = self.grad_kernel
  return self
end

-- The input's [B, C, H, W] (from its layout's shape) and the output's, in NCHW order.
local function sizes(self, shape)
  op.check_shape(shape, "inputs[1]")
  if #shape ~= 4 then raise(("inputs[1]: expected an %s shape of 4 sizes, got %d"):format(self.layout:upper(), #shape)) end
  local s = self.layout == "nhwc" and { shape[1], shape[4], shape[2], shape[3] } or shape
  local out = { s[1], s[2] }
  for i = 1, 2 do
    out[2 + i] = self.size and self.size[i] or math.floor(s[2 + i] * self.scale[i])
    if out[2 + i] < 1 or out[2 + i] > 2 ^ 31 - 1 then
      raise(("inputs[1]: a %s of %d scaled by %g gives %d"):format(i == 1 and "height" or "width", s[2 + i], self.scale[i],
        out[2 + i]))
    end
  end
  if s[3] > 2 ^ 31 - 1 or s[4] > 2 ^ 31 - 1 or s[2] > 2 ^ 31 - 1 then raise("inputs[1]: a size of 2^31 or more") end
  return s, out
end

-- The source step and offset of one axis from in to out (upsample_bilinear2d.cu's mapping).
local function ratio(self, i, n, o)
  local c = self.coordinates
  if c == "align_corners" then return o > 1 and (n - 1) / (o - 1) or 0 end
  -- (an output of one pixel reads source 0: ratio 1 puts (0 + 0.5) 1 - 0.5 there, clamped or not)
  if c == "pytorch_half_pixel" and o == 1 then return 1 end
  return self.scale and 1 / self.scale[i] or n / o
end

local function as_layout(self, s) return self.layout == "nhwc" and { s[1], s[3], s[4], s[2] } or s end

function UpsampleBilinear2d:compute_concrete_output_shape(input_shapes)
  local _, out = sizes(self, op.one_input(input_shapes))
  return as_layout(self, out)
end

local function grid_of(elements) return op.element_grid(elements, BLOCK) end

function UpsampleBilinear2d:grid(output_shape)
  op.check_shape(output_shape, "output_shape")
  return grid_of(op.numel(output_shape))
end

-- The kernels' sizes and mapping after the two pointers: total (the elements the launch
-- writes: the output's forward, the input's backward), C, H, W, OH, OW, ratios, half.
local function tail(self, s, out, total)
  local half = (self.coordinates == "half_pixel" or self.coordinates == "pytorch_half_pixel") and 0.5 or 0
  return total, s[2], s[3], s[4], out[3], out[4], ratio(self, 1, s[3], out[3]), ratio(self, 2, s[4], out[4]), half,
    self.cubic_a
end

function UpsampleBilinear2d:pack_args(inputs, _, output, output_shape)
  local x, shape = op.input_of(inputs)
  local s, out = sizes(self, shape)
  if output_shape then op.check_output_shape(output_shape, as_layout(self, out), "the resize's output for its input") end
  return { x, op.address(output, "output"), tail(self, s, out, op.numel(out)) }
end

function UpsampleBilinear2d:backward_grid(input_shapes)
  local shape = op.one_input(input_shapes)
  sizes(self, shape)
  return grid_of(op.numel(shape))
end

function UpsampleBilinear2d:pack_backward_args(inputs, _, _, output_shape, grad_output, _, grad_inputs)
  local _, shape = op.input_of(inputs)
  local s, out = sizes(self, shape)
  if output_shape then op.check_output_shape(output_shape, as_layout(self, out), "the resize's output for its input") end
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  return { op.address(grad_output, "grad_output"), op.address(grad_inputs[1], "grad_inputs[1]"),
    tail(self, s, out, op.numel(shape)) }
end

op.finish(UpsampleBilinear2d)
return M
