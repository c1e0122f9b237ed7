-- tocha.ChannelChunk: one of `chunks` equal parts of a tensor along dimension 2 (NCHW's
-- channels), forward and backward (the part's gradient in place, zeros elsewhere): a kernel pair
-- (kernels/channel_chunk.cu) with the dtype baked in and a RuntimeOp (tocha.runtime_op), so
-- that it joins a tocha.Model, as the other half of ChannelCat (a CSP block's split).
--
--   local first = tocha.ChannelChunk.new(2, 1)       -- the first of two parts, f32
--   local y = first:forward(x)                        -- [B, C, H, W] -> [B, C/2, H, W]
--   local dx = first:backward(x, dy)                  -- dy in channels 1..C/2, zeros elsewhere
local ffi = require "ffi"
local native = require "tocha.ffi"
local dtype = require "tocha.dtype"
local errors = require "tocha.errors"
local runtime_op = require "tocha.runtime_op"
local op_base = require "tocha.op"
local C, check, raise = native.C, native.check, errors.raise

local M = {}

local ChannelChunk = {}
ChannelChunk.__index = ChannelChunk
ChannelChunk.__tostring = function(op) return "tocha.ChannelChunk " .. op.id end
M.ChannelChunk = ChannelChunk

local integer = op_base.integer

-- ChannelChunk.new(chunks, index [, dtype [, block]]): part index (1-based, as Lua counts) of
-- chunks; dtype any (default f32), block threads a CTA (default 256).
function ChannelChunk.new(chunks, index, dtype_name, block)
  integer(chunks, "chunks")
  integer(index, "index")
  if chunks >= 1 and (index < 1 or index > chunks) then -- (C counts from 0)
    raise(("index: expected 1 to %d, got %d"):format(chunks, index))
  end
  local id = dtype.id(dtype_name or "f32")
  block = integer(block or 256, "block")
  local out = ffi.new("tocha_channel_chunk*[1]")
  check(C.tocha_channel_chunk_new(chunks, index - 1, id, block, out))
  return runtime_op.wrap(ChannelChunk, "tocha_channel_chunk", out,
    { kind = "channel_chunk", chunks = chunks, index = index, dtype = dtype.name(id), block_size = block })
end

function ChannelChunk:runtime_op() return C.tocha_channel_chunk_op(self.handle) end
runtime_op.install(ChannelChunk)

local need_tensor, on_stream = op_base.live_tensor, op_base.on_stream

local alloc = op_base.alloc_like

local function run_forward(self, x, y)
  if y == nil then -- x's shape, dimension 2 divided; C checks it and names x
    local shape = x:shape()
    if #shape >= 2 then shape[2] = math.max(1, math.floor(shape[2] / self.chunks)) end
    y = alloc(shape, x)
  end
  check(C.tocha_channel_chunk_forward(self.handle, x, need_tensor(y, "y")))
  return y
end

-- op:forward(x [, y [, opts]]) -> y, allocated when not given. opts.stream: the stream.
function ChannelChunk:forward(x, y, opts)
  need_tensor(x, "x")
  local r = on_stream(opts, x, run_forward, self, x, y)
  return r
end

local function run_backward(self, x, dy, dx)
  dx = dx or alloc(x:shape(), x)
  check(C.tocha_channel_chunk_backward(self.handle, dy, need_tensor(dx, "dx")))
  return dx
end

-- op:backward(x, dy [, dx [, opts]]) -> dx, shaped like x (allocated when not given).
function ChannelChunk:backward(x, dy, dx, opts)
  need_tensor(x, "x")
  need_tensor(dy, "dy")
  local r = on_stream(opts, x, run_backward, self, x, dy, dx)
  return r
end

-- op(node): the node of this op in a tocha.Model graph.
ChannelChunk.__call = function(self, ...) return require("tocha.model").node(self, ...) end

errors.methods(ChannelChunk, "ChannelChunk:", function(op) return getmetatable(op) == ChannelChunk end, { new = true })
errors.name(ChannelChunk.new, "ChannelChunk.new")
return M
