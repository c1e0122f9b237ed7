-- tocha.Elementwise: y = f(x) and y = g(a, b) element by element, forward and backward, each a
-- CUDA C kernel pair (kernels/elementwise.cu) with the function and dtype baked in at
-- construction, and a RuntimeOp (tocha.runtime_op), so that it joins a tocha.Model.
--
--   local relu = tocha.Elementwise.new("relu")          -- f32, 256 threads a CTA
--   local y  = relu:forward(x)                          -- y = max(x, 0)
--   local dx = relu:backward(x, dy)                     -- dy where x > 0, else 0
--   local mul = tocha.Elementwise.new("mul", "bf16")
--   local p = mul:forward(a, b)                         -- computed in f32, stored as bf16
--   local da, db = mul:backward(a, b, dp)
--
-- Unary: neg, abs, exp, log, sqrt, relu, sigmoid, tanh, silu, gelu (exact, with erf). Binary:
-- add, sub, mul, div, max, min. Every tensor of a call has one shape and the op's dtype.
local ffi = require "ffi"
local native = require "tocha.ffi"
local dtype = require "tocha.dtype"
local errors = require "tocha.errors"
local runtime_op = require "tocha.runtime_op"
local op_base = require "tocha.op"
local C, check, raise = native.C, native.check, errors.raise

local M = {}

local Elementwise = {}
Elementwise.__index = Elementwise
Elementwise.__tostring = function(op) return "tocha.Elementwise " .. op.id end
M.Elementwise = Elementwise

M.DEFAULT_BLOCK = 256

-- Elementwise.new(fn [, dtype [, block]]): the op for fn (a name above), of dtype (default f32),
-- block threads a CTA (default 256; a multiple of 32 up to 1024, checked in C).
function Elementwise.new(fn, dtype_name, block)
  if type(fn) ~= "string" then raise("fn: expected a function name, got " .. type(fn)) end
  local id = dtype.id(dtype_name or "f32")
  block = op_base.integer(block or M.DEFAULT_BLOCK, "block")
  local out = ffi.new("tocha_elementwise*[1]")
  check(C.tocha_elementwise_new(fn, id, block, out))
  return runtime_op.wrap(Elementwise, "tocha_elementwise", out,
    { fn = fn, kind = fn, dtype = dtype.name(id), block_size = block, arity = C.tocha_elementwise_arity(out[0]) })
end

function Elementwise:runtime_op() return C.tocha_elementwise_op(self.handle) end

runtime_op.install(Elementwise)

local need_tensor, on_stream = op_base.live_tensor, op_base.on_stream

-- A tensor shaped like `like`, of its dtype and on its device.
local function alloc_like(like) return op_base.alloc_like(like:shape(), like) end


local function run_forward(self, a, b, y)
  if y == nil then y = alloc_like(a) end
  check(C.tocha_elementwise_forward(self.handle, a, b, need_tensor(y, "y")))
  return y
end

-- op:forward(x [, y [, opts]]) (unary) or op:forward(a, b [, y [, opts]]) (binary): y, allocated
-- like the input when not given. opts.stream: the stream to queue it on.
function Elementwise:forward(...)
  local a, b, y, opts
  if self.arity == 1 then
    a, y, opts = ...
    need_tensor(a, "x")
  else
    a, b, y, opts = ...
    need_tensor(a, "a")
    need_tensor(b, "b")
  end
  local r = on_stream(opts, a, run_forward, self, a, b, y)
  return r
end

local function run_backward(self, a, b, dy, da, db)
  if da == nil then da = alloc_like(a) end
  if self.arity == 2 and db == nil then db = alloc_like(b) end
  check(C.tocha_elementwise_backward(self.handle, a, b, dy, need_tensor(da, self.arity == 1 and "dx" or "da"),
    self.arity == 2 and need_tensor(db, "db") or nil))
  return da, db
end

-- op:backward(x, dy [, dx [, opts]]) -> dx (unary), op:backward(a, b, dy [, da [, db [, opts]]])
-- -> da, db (binary): the gradients for dy, allocated like the inputs when not given.
function Elementwise:backward(...)
  local a, b, dy, da, db, opts
  if self.arity == 1 then
    a, dy, da, opts = ...
    need_tensor(a, "x")
  else
    a, b, dy, da, db, opts = ...
    need_tensor(a, "a")
    need_tensor(b, "b")
  end
  need_tensor(dy, "dy")
  local ga, gb = on_stream(opts, a, run_backward, self, a, b, dy, da, db)
  if self.arity == 1 then return ga end
  return ga, gb
end

-- op(node...): the node of this op in a tocha.Model graph.
Elementwise.__call = function(self, ...) return require("tocha.model").node(self, ...) end

errors.methods(Elementwise, "Elementwise:", function(op) return getmetatable(op) == Elementwise end, { new = true })
errors.name(Elementwise.new, "Elementwise.new")
return M
