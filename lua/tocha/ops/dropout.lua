-- tocha.Dropout: y = x * keep / (1 - p), a new draw for each forward, from a seed; the gradient
-- from the same draw; in inference mode the identity. kernels/dropout.cu behind a RuntimeOp, so
-- that it joins a tocha.Model, every float dtype.
--
--   local drop = tocha.Dropout.new(0.1, { seed = 7 })
--   local y = drop:forward(x)            -- a fresh draw each call
--   local dx = drop:backward(x, dy)      -- the last forward's draw
--   drop:train(false)                    -- inference: y = x
--
-- The draw depends on (seed, step, element index) alone, so a run is the same on every device;
-- `step` counts the forwards. A direct call keeps the counter itself (one a device); in a model
-- it is the op's parameter "step" (i64 {1}, a buffer: saved with the model, not trained), so a
-- model's forwards draw afresh and its backward uses its forward_train's draw.
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local tensor = require "tocha.tensor"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local raise = errors.raise

local M = {}

local BLOCK = 256

local Dropout = op.class("Dropout")
M.Dropout = Dropout

-- Dropout.new(p [, {seed = 0, dtype = "f32"}]): p in [0, 1], the probability an element is zeroed.
function Dropout.new(p, opts)
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then raise("p: expected a probability from 0 to 1, got " .. errors.show(p)) end
  opts = op.options(opts, { seed = true, dtype = true }, "tocha.Dropout")
  local seed = opts.seed or 0
  if type(seed) ~= "number" or seed < 0 or seed ~= math.floor(seed) or seed >= 2 ^ 53 then
    raise("seed: expected an integer from 0 to 2^53, got " .. errors.show(seed))
  end
  local dt = op.float_dtype(opts.dtype, "dtype")
  local self = setmetatable({ kind = "dropout", p = p, seed = seed, dtype = dt, training = true, block_size = BLOCK,
    counters = {}, id = ("dropout__%g__%d__%s"):format(p, seed, dt) }, Dropout)
  local source = op.source("dropout.cu")
  self.kernel = kernel.new { source = source, name = "tocha_dropout", template_args = dtype.ctype(dt),
    params = ("%s* x, %s* y, i64* step, i64 n, f64 p, i64 seed, i32 training, i32 phase"):format(dt, dt) }
  self.grad_kernel = kernel.new { source = source, name = "tocha_dropout_backward", template_args = dtype.ctype(dt),
    params = ("%s* dy, %s* dx, i64* step, i64 n, f64 p, i64 seed, i32 training"):format(dt, dt) }
  self.backward_kernel = self.grad_kernel
  return self
end

-- drop:train([flag]): training mode (default true) or inference (false, the identity).
function Dropout:train(flag)
  local r = op.set_training(self, flag)
  return r
end

function Dropout:param_names() return { "step" } end
function Dropout:param_shapes() return { { 1 } } end
function Dropout:param_dtype() return "i64" end
function Dropout:param_trainable() return false end
-- (PyTorch's Dropout keeps no counter: a state dict does not hold it)
function Dropout:param_in_state_dict() return false end

function Dropout:compute_concrete_output_shape(input_shapes)
  local shape = op.one_input(input_shapes)
  op.check_shape(shape, "inputs[1]")
  local out = {}
  for i, s in ipairs(shape) do out[i] = s end
  return out
end

function Dropout:n_launches() return 2 end

-- Vectors a thread takes (dropout.cu's DROPOUT_VECTORS): the grid covers the flat tensor in
-- 16-byte vectors, that many a thread.
local VECTORS = 4

local function grid_of(self, n)
  local g = op.vector_grid(n, self.dtype, BLOCK * VECTORS)
  return g
end

function Dropout:grid_for_launch(i, input_shapes)
  op.launch_index(i, 2)
  if i == 2 then return self.training and { 1, 1, 1 } or { 0, 0, 0 } end
  return grid_of(self, op.numel(op.one_input(input_shapes)))
end

function Dropout:pack_args_for_launch(i, inputs, params, output, output_shape)
  op.launch_index(i, 2)
  local x, shape = op.input_of(inputs)
  op.check_output_shape(output_shape or shape, shape, "x's")
  params = op.list(params, "params")
  return { x, op.address(output, "output"), op.address(params[1], "params[1]"), op.numel(shape), self.p, self.seed,
    self.training and 1 or 0, i - 1 }
end

function Dropout:backward_grid(input_shapes) return grid_of(self, op.numel(op.one_input(input_shapes))) end

function Dropout:pack_backward_args(inputs, params, _, _, grad_output, _, grad_inputs)
  local _, shape = op.input_of(inputs)
  params, grad_inputs = op.list(params, "params"), op.list(grad_inputs, "grad_inputs")
  return { op.address(grad_output, "grad_output"), op.address(grad_inputs[1], "grad_inputs[1]"),
    op.address(params[1], "params[1]"), op.numel(shape), self.p, self.seed, self.training and 1 or 0 }
end

-- ---- direct calls: the step counter is the op's own, one a device ----

local function counter(self, x)
  local key = tostring(x.dev)
  local c = self.counters[key]
  if not c or c.freed ~= 0 then
    c = tensor.zeros({ 1 }, { dtype = "i64", device = device.wrap(x.dev) })
    self.counters[key] = c
  end
  return c
end

local function run_forward(self, x, y)
  local shape = x:shape()
  if y == nil then y = op.alloc_like(shape, x) end
  op.check_tensor(self, y, "y", x)
  op.same_shape(y, shape, "y", "x's")
  op.check_aliasing({ { y, "y" } }, { { x, "x" } })
  local step = counter(self, x)
  for i = 1, 2 do
    local grid = self:grid_for_launch(i, { shape })
    if grid[1] > 0 then
      op.launch_packed(self.kernel, device.wrap(x.dev), grid, self:block(), self:pack_args_for_launch(i, { x }, { step }, y, shape))
    end
  end
  return y
end

-- drop:forward(x [, y [, opts]]) -> y
function Dropout:forward(x, y, opts)
  op.check_tensor(self, x, "x")
  local r = op.on_stream(opts, x, run_forward, self, x, y)
  return r
end

local function run_backward(self, x, dy, dx)
  local shape = x:shape()
  op.check_tensor(self, dy, "dy", x)
  op.same_shape(dy, shape, "dy", "x's")
  if dx == nil then dx = op.alloc_like(shape, x) end
  op.check_tensor(self, dx, "dx", x)
  op.same_shape(dx, shape, "dx", "x's")
  op.check_aliasing({ { dx, "dx" } }, { { dy, "dy" } })
  op.launch_packed(self.grad_kernel, device.wrap(x.dev), self:backward_grid({ shape }), self:backward_block(),
    self:pack_backward_args({ x }, { counter(self, x) }, nil, shape, dy, 0, { dx }))
  return dx
end

-- drop:backward(x, dy [, dx [, opts]]) -> dx, from the last forward's draw on x's device.
function Dropout:backward(x, dy, dx, opts)
  op.check_tensor(self, x, "x")
  local r = op.on_stream(opts, x, run_backward, self, x, dy, dx)
  return r
end

op.finish(Dropout)
return M
