-- tocha.ChannelCat: y = the concatenation of a and b along dimension 2 (NCHW's channels; any
-- tensor of two or more dimensions, equal but for that one), forward and backward (the split of
-- dy), a kernel pair (kernels/channel_cat.cu) with the dtype baked in and a RuntimeOp
-- (tocha.runtime_op), so that it joins a tocha.Model: the detector neck's join of an upsampled
-- map with its skip connection.
--
--   local cat = tocha.ChannelCat.new()               -- f32, 256 threads a CTA
--   local y = cat:forward(a, b)                      -- [B, Ca, H, W], [B, Cb, H, W] -> [B, Ca+Cb, H, W]
--   local da, db = cat:backward(a, b, dy)            -- dy's two parts
local ffi = require "ffi"
local native = require "tocha.ffi"
local dtype = require "tocha.dtype"
local errors = require "tocha.errors"
local runtime_op = require "tocha.runtime_op"
local op_base = require "tocha.op"
local C, check = native.C, native.check

local M = {}

local ChannelCat = {}
ChannelCat.__index = ChannelCat
ChannelCat.__tostring = function(op) return "tocha.ChannelCat " .. op.id end
M.ChannelCat = ChannelCat

-- ChannelCat.new([dtype [, block]]): dtype any (default f32), block threads a CTA (default 256).
function ChannelCat.new(dtype_name, block)
  local id = dtype.id(dtype_name or "f32")
  block = op_base.integer(block or 256, "block")
  local out = ffi.new("tocha_channel_cat*[1]")
  check(C.tocha_channel_cat_new(id, block, out))
  return runtime_op.wrap(ChannelCat, "tocha_channel_cat", out,
    { kind = "channel_cat", dtype = dtype.name(id), block_size = block })
end

function ChannelCat:runtime_op() return C.tocha_channel_cat_op(self.handle) end
runtime_op.install(ChannelCat)

local need_tensor, on_stream = op_base.live_tensor, op_base.on_stream

local alloc = op_base.alloc_like

local function run_forward(self, a, b, y)
  if y == nil then -- a's shape, dimension 2 the sum; C checks the rest and names a and b
    local shape = a:shape()
    if #shape >= 2 and b.ndim >= 2 then shape[2] = shape[2] + tonumber(b.dims[1]) end
    y = alloc(shape, a)
  end
  check(C.tocha_channel_cat_forward(self.handle, a, b, need_tensor(y, "y")))
  return y
end

-- cat:forward(a, b [, y [, opts]]) -> y, allocated when not given. opts.stream: the stream.
function ChannelCat:forward(a, b, y, opts)
  need_tensor(a, "a")
  need_tensor(b, "b")
  local r = on_stream(opts, a, run_forward, self, a, b, y)
  return r
end

local function run_backward(self, a, b, dy, da, db)
  da = da or alloc(a:shape(), a)
  db = db or alloc(b:shape(), b)
  check(C.tocha_channel_cat_backward(self.handle, dy, need_tensor(da, "da"), need_tensor(db, "db")))
  return da, db
end

-- cat:backward(a, b, dy [, da [, db [, opts]]]) -> da, db: dy's parts, shaped like a and b
-- (allocated when not given).
function ChannelCat:backward(a, b, dy, da, db, opts)
  need_tensor(a, "a")
  need_tensor(b, "b")
  need_tensor(dy, "dy")
  local ga, gb = on_stream(opts, a, run_backward, self, a, b, dy, da, db)
  return ga, gb
end

-- cat(node_a, node_b): the node of this op in a tocha.Model graph.
ChannelCat.__call = function(self, ...) return require("tocha.model").node(self, ...) end

errors.methods(ChannelCat, "ChannelCat:", function(op) return getmetatable(op) == ChannelCat end, { new = true })
errors.name(ChannelCat.new, "ChannelCat.new")
return M
