-- tocha.ChannelChunk: one of `chunks` equal parts of a tensor along dimension 2 (NCHW's
-- channels), forward and backward (the part's gradient in place, zeros elsewhere):
-- kernels/channel_chunk.cu with the dtype baked in, behind a RuntimeOp (tocha.op), so that it
-- joins a tocha.Model, as the other half of ChannelCat (a CSP block's split).
--
--   local first = tocha.ChannelChunk.new(2, 1)       -- the first of two parts, f32
--   local y = first:forward(x)                        -- [B, C, H, W] -> [B, C/2, H, W]
--   local dx = first:backward(x, dy)                  -- dy in channels 1..C/2, zeros elsewhere
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local raise = errors.raise

local M = {}

local ChannelChunk = op.class("ChannelChunk")
M.ChannelChunk = ChannelChunk

-- ChannelChunk.new(chunks, index [, dtype [, block]]): part index (1-based, as Lua counts) of
-- chunks; dtype any (default f32), block threads a CTA (default 256).
function ChannelChunk.new(chunks, index, dtype_name, block)
  op.integer(chunks, "chunks")
  op.integer(index, "index")
  if chunks < 1 then raise(("chunks: expected at least 1, got %d"):format(chunks)) end
  if index < 1 or index > chunks then raise(("index: expected 1 to %d, got %d"):format(chunks, index)) end
  local dt = dtype_name or "f32"
  dtype.id(dt)
  block = op.flat_block(block or 256)
  local source, ctype = op.source("channel_chunk.cu"), dtype.ctype(dt)
  local self = setmetatable({ kind = "channel_chunk", chunks = chunks, index = index, dtype = dt, block_size = block,
    id = ("channel_chunk__%d__%d__%s__%d"):format(chunks, index - 1, dt, block) }, ChannelChunk)
  self.kernel = kernel.new { source = source, name = "tocha_channel_chunk", template_args = ctype,
    params = ("%s* x, %s* y, i64 batch, i64 item, i64 offset, i64 run"):format(dt, dt) }
  self.grad_kernel = kernel.new { source = source, name = "tocha_channel_unchunk", template_args = ctype,
    params = ("%s* dy, %s* dx, i64 batch, i64 item, i64 offset, i64 run"):format(dt, dt) }
  self.backward_kernel = self.grad_kernel
  return self
end

-- The part's shape of a whole tensor of shape `whole` (named what): two or more dimensions,
-- dimension 2 divisible by chunks.
local function part_of(self, whole, what)
  op.check_shape(whole, what)
  if #whole < 2 then raise(("%s: expected 2 or more dimensions (dimension 2 is split), got %d"):format(what, #whole)) end
  if whole[2] % self.chunks ~= 0 then
    raise(("%s: dimension 2 (%d) does not split into %d equal chunks"):format(what, whole[2], self.chunks))
  end
  local part = {}
  for i, s in ipairs(whole) do part[i] = s end
  part[2] = whole[2] / self.chunks
  return part
end

-- The kernels' arguments for a whole tensor of shape `whole` whose part is `part_shape`: the two
-- addresses, then the batch, a batch item's length, and the part's offset and length in it.
local function args(self, whole, part_shape, addresses)
  local part = part_of(self, whole, "inputs[1]")
  op.check_output_shape(part_shape, part, "the chunk's")
  local batch = whole[1]
  local item = op.numel(whole) / batch
  local run = item / self.chunks
  return { addresses[1], addresses[2], batch, item, run * (self.index - 1), run }
end

-- ---- the RuntimeOp (tocha.op's defaults for the rest) ----

function ChannelChunk:compute_concrete_output_shape(input_shapes)
  return part_of(self, op.one_input(input_shapes), "inputs[1]")
end

ChannelChunk.grid = op.flat_grid

function ChannelChunk:pack_args(inputs, _, output, output_shape)
  local at, shapes = op.inputs_of(inputs, 1)
  return args(self, shapes[1], output_shape, { at[1], op.address(output, "output") })
end

-- The backward writes every element of dx: its grid covers the input.
function ChannelChunk:backward_grid(input_shapes)
  local whole = op.one_input(input_shapes)
  part_of(self, whole, "inputs[1]")
  return self:grid(whole)
end

function ChannelChunk:pack_backward_args(inputs, _, _, output_shape, grad_output, _, grad_inputs)
  local _, shapes = op.inputs_of(inputs, 1)
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  if #grad_inputs ~= 1 then raise(("grad_inputs: expected 1, got %d"):format(#grad_inputs)) end
  return args(self, shapes[1], output_shape,
    { op.address(grad_output, "grad_output"), op.address(grad_inputs[1], "grad_inputs[1]") })
end

-- Direct calls (op:forward, op:backward): tocha.op's, from the methods above.

op.finish(ChannelChunk)
return M
