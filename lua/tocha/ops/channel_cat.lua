-- tocha.ChannelCat: y = the concatenation of a and b along dimension 2 (NCHW's channels; any
-- tensor of two or more dimensions, equal but for that one), forward and backward (the split of
-- dy): kernels/channel_cat.cu with the dtype baked in, behind a RuntimeOp (tocha.op), so that it
-- joins a tocha.Model: the detector neck's join of an upsampled map with its skip connection.
--
--   local cat = tocha.ChannelCat.new()               -- f32, 256 threads a CTA
--   local y = cat:forward(a, b)                      -- [B, Ca, H, W], [B, Cb, H, W] -> [B, Ca+Cb, H, W]
--   local da, db = cat:backward(a, b, dy)            -- dy's two parts
--
-- Per batch item, y's item is a's (sa elements) followed by b's (sb): the kernels copy those
-- runs, a 16-byte vector a thread where both runs are whole vectors.
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local raise = errors.raise

local M = {}

local ChannelCat = op.class("ChannelCat")
M.ChannelCat = ChannelCat

-- ChannelCat.new([dtype [, block]]): dtype any (default f32), block threads a CTA (default 256).
function ChannelCat.new(dtype_name, block)
  local dt = dtype_name or "f32"
  dtype.id(dt)
  block = op.flat_block(block or 256)
  local source, ctype = op.source("channel_cat.cu"), dtype.ctype(dt)
  local self = setmetatable({ kind = "channel_cat", dtype = dt, block_size = block,
    id = ("channel_cat__%s__%d"):format(dt, block) }, ChannelCat)
  self.kernel = kernel.new { source = source, name = "tocha_channel_cat", template_args = ctype,
    params = ("%s* a, %s* b, %s* y, i64 batch, i64 sa, i64 sb"):format(dt, dt, dt) }
  self.grad_kernel = kernel.new { source = source, name = "tocha_channel_split", template_args = ctype,
    params = ("%s* dy, %s* da, %s* db, i64 batch, i64 sa, i64 sb"):format(dt, dt, dt) }
  self.backward_kernel = self.grad_kernel
  return self
end

-- The joined shape of parts a and b (named name_a, name_b): two or more dimensions, equal but
-- for dimension 2, which is the sum of both.
local function joined(a, b, name_a, name_b)
  op.check_shape(a, name_a)
  op.check_shape(b, name_b)
  if #a < 2 then raise(("%s: expected 2 or more dimensions (dimension 2 is joined), got %d"):format(name_a, #a)) end
  local want, out = {}, {}
  for i, s in ipairs(a) do want[i], out[i] = s, s end
  want[2] = #b == #a and b[2] or 1
  if not op.same_sizes(want, b) then
    raise(("%s: expected shape %s (like %s but for dimension 2), got %s"):format(name_b, op.shape_text(want), name_a,
      op.shape_text(b)))
  end
  out[2] = a[2] + b[2]
  return out
end

-- The kernels' arguments: the three addresses, then the batch and both runs' lengths.
local function args(a, b, addresses)
  local batch = a[1]
  return { addresses[1], addresses[2], addresses[3], batch, op.numel(a) / batch, op.numel(b) / batch }
end

-- The output shape the pack methods were given, checked against the parts' joined one.
local function check_output(a, b, output_shape)
  local out = joined(a, b, "inputs[1]", "inputs[2]")
  op.check_output_shape(output_shape, out, "the inputs' joined")
end

-- ---- the RuntimeOp (tocha.op's defaults for the rest) ----

function ChannelCat:n_activation_inputs() return 2 end

function ChannelCat:compute_concrete_output_shape(input_shapes)
  local shapes = op.input_shapes(input_shapes, 2)
  return joined(shapes[1], shapes[2], "inputs[1]", "inputs[2]")
end

ChannelCat.grid = op.flat_grid

function ChannelCat:pack_args(inputs, _, output, output_shape)
  local at, shapes = op.inputs_of(inputs, 2)
  check_output(shapes[1], shapes[2], output_shape)
  return args(shapes[1], shapes[2], { at[1], at[2], op.address(output, "output") })
end

function ChannelCat:backward_grid(input_shapes)
  return self:grid(self:compute_concrete_output_shape(input_shapes))
end

function ChannelCat:pack_backward_args(inputs, _, _, output_shape, grad_output, _, grad_inputs)
  local _, shapes = op.inputs_of(inputs, 2)
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  if #grad_inputs ~= 2 then raise(("grad_inputs: expected 2, got %d"):format(#grad_inputs)) end
  check_output(shapes[1], shapes[2], output_shape)
  return args(shapes[1], shapes[2], { op.address(grad_output, "grad_output"),
    op.address(grad_inputs[1], "grad_inputs[1]"), op.address(grad_inputs[2], "grad_inputs[2]") })
end

-- Direct calls (op:forward, op:backward): tocha.op's, from the methods above.

op.finish(ChannelCat)
return M
