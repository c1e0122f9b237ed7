-- tocha.Elementwise: y = f(x) and y = g(a, b) element by element, forward and backward:
-- kernels/elementwise.cu with the function (its struct ew_fn_<name>, by name) and the dtype
-- baked in at construction, behind a RuntimeOp (tocha.op), so that it joins a tocha.Model.
--
--   local relu = tocha.Elementwise.new("relu")          -- f32, 256 threads a CTA
--   local y  = relu:forward(x)                          -- y = max(x, 0)
--   local dx = relu:backward(x, dy)                     -- dy where x > 0, else 0
--   local mul = tocha.Elementwise.new("mul", "bf16")
--   local p = mul:forward(a, b)                         -- computed in f32, stored as bf16
--   local da, db = mul:backward(a, b, dp)
--
-- Every tensor of a call has one shape and the op's dtype (no broadcasting: the channel bias
-- add is the op that broadcasts).
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local ffi = require "ffi"
local raise = errors.raise

local M = {}

local Elementwise = op.class("Elementwise")
M.Elementwise = Elementwise

M.DEFAULT_BLOCK = 256

-- The functions and their arity, in the order messages list them; each is a struct ew_fn_<name>
-- of kernels/elementwise.cu.
M.UNARY = { "identity", "neg", "abs", "exp", "log", "sqrt", "erf", "relu", "relu6", "sigmoid", "tanh", "silu", "gelu",
  "hardsigmoid", "hardswish", "leaky_relu", "elu", "celu", "selu", "softplus", "mish", "gelu_tanh" }
M.BINARY = { "add", "sub", "mul", "div", "max", "min", "prelu" }
-- The functions with a constant baked into their kernels: its option's name and default.
local BAKED = { leaky_relu = { "negative_slope", 0.01 }, elu = { "alpha", 1 }, celu = { "alpha", 1 } }
local OWNERS = { negative_slope = "leaky_relu's", alpha = "elu's and celu's" }
local arity_of = {}
for _, name in ipairs(M.UNARY) do arity_of[name] = 1 end
for _, name in ipairs(M.BINARY) do arity_of[name] = 2 end
local function known()
  local all = {}
  for _, name in ipairs(M.UNARY) do all[#all + 1] = name end
  for _, name in ipairs(M.BINARY) do all[#all + 1] = name end
  return table.concat(all, ", ", 1, #all - 1) .. " or " .. all[#all]
end

-- The bits of a double as a C integer literal (a baked constant as its template argument).
local function double_bits(v)
  local box = ffi.new("double[1]", v)
  return tostring(ffi.cast("int64_t *", box)[0]):gsub("LL$", "") .. "LL"
end

-- Elementwise.new(fn [, dtype [, block [, {negative_slope = 0.01, alpha = 1}]]]): the op for fn
-- (a name above), of a float dtype (default f32), block threads a CTA (default 256; a multiple
-- of 32 up to 1024); negative_slope, leaky_relu's (PyTorch's default 0.01), and alpha, elu's and
-- celu's (default 1; celu's not 0), baked into its kernels.
function Elementwise.new(fn, dtype_name, block, opts)
  if type(fn) ~= "string" then raise("fn: expected a function name, got " .. type(fn)) end
  local arity = arity_of[fn]
  if not arity then raise(("fn: unknown function %s (expected %s)"):format(errors.show(fn), known())) end
  local dt = op.float_dtype(dtype_name, "dtype")
  block = op.flat_block(block or M.DEFAULT_BLOCK)
  opts = op.options(opts, { negative_slope = true, alpha = true }, "tocha.Elementwise")
  local baked = BAKED[fn]
  for _, name in ipairs({ "negative_slope", "alpha" }) do
    if opts[name] ~= nil and not (baked and baked[1] == name) then
      raise(("%s: %s option, not %s's"):format(name, OWNERS[name], fn))
    end
  end
  local value
  if baked then
    value = opts[baked[1]]
    if value == nil then value = baked[2] end
    if type(value) ~= "number" or value ~= value or math.abs(value) == math.huge then
      raise(("%s: expected a finite number, got %s"):format(baked[1], errors.show(value)))
    end
    if fn == "celu" and value == 0 then raise("alpha: celu's alpha cannot be 0") end
  end
  local source = op.source("activation.cuh") .. "\n" .. op.source("elementwise.cu")
  local struct = baked and ("ew_fn_%s<%s>"):format(fn, double_bits(value)) or "ew_fn_" .. fn
  local targs = ("%s, %s"):format(dtype.ctype(dt), struct)
  local self = setmetatable({ fn = fn, kind = fn, dtype = dt, block_size = block, arity = arity,
    id = ("elementwise_%s%s__%s__%d"):format(fn, value and ("_%.17g"):format(value) or "", dt, block) }, Elementwise)
  if baked then self[baked[1]] = value end
  local forward, backward
  if arity == 1 then
    forward = { "tocha_unary", ("%s* x, %s* y, i64 n"):format(dt, dt) }
    backward = { "tocha_unary_backward", ("%s* x, %s* dy, %s* dx, i64 n"):format(dt, dt, dt) }
  else
    forward = { "tocha_binary", ("%s* a, %s* b, %s* y, i64 n"):format(dt, dt, dt) }
    backward = { "tocha_binary_backward", ("%s* a, %s* b, %s* dy, %s* da, %s* db, i64 n"):format(dt, dt, dt, dt, dt) }
  end
  self.kernel = kernel.new { source = source, name = forward[1], template_args = targs, params = forward[2] }
  self.grad_kernel = kernel.new { source = source, name = backward[1], template_args = targs, params = backward[2] }
  self.backward_kernel = self.grad_kernel
  return self
end

-- ---- the RuntimeOp (tocha.op's defaults for the rest) ----

function Elementwise:n_activation_inputs() return self.arity end

-- The inputs' one shape: arity of them, each valid, all equal.
local function input_shape(self, shapes)
  op.input_shapes(shapes, self.arity)
  op.check_shape(shapes[1], "inputs[1]")
  if self.arity == 2 and not op.same_sizes(shapes[1], shapes[2]) then
    raise(("inputs[2]: expected shape %s (like inputs[1]), got %s"):format(op.shape_text(shapes[1]),
      op.shape_text(shapes[2])))
  end
  return shapes[1]
end

function Elementwise:compute_concrete_output_shape(input_shapes)
  local shape = input_shape(self, input_shapes)
  local out = {}
  for i, s in ipairs(shape) do out[i] = s end
  return out
end

Elementwise.grid = op.flat_grid

-- The input addresses and the elements, output_shape checked against the inputs' shape.
local function packed_inputs(self, inputs, output_shape)
  local at, shapes = op.inputs_of(inputs, self.arity)
  local shape = input_shape(self, shapes)
  op.check_output_shape(output_shape, shape, "the inputs'")
  return at, op.numel(shape)
end

function Elementwise:pack_args(inputs, _, output, output_shape)
  local at, n = packed_inputs(self, inputs, output_shape)
  local y = op.address(output, "output")
  if self.arity == 1 then return { at[1], y, n } end
  return { at[1], at[2], y, n }
end

function Elementwise:backward_grid(input_shapes)
  return self:grid(input_shape(self, input_shapes))
end

function Elementwise:pack_backward_args(inputs, _, _, output_shape, grad_output, _, grad_inputs)
  local at, n = packed_inputs(self, inputs, output_shape)
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  if #grad_inputs ~= self.arity then raise(("grad_inputs: expected %d, got %d"):format(self.arity, #grad_inputs)) end
  local dy = op.address(grad_output, "grad_output")
  if self.arity == 1 then return { at[1], dy, op.address(grad_inputs[1], "grad_inputs[1]"), n } end
  return { at[1], at[2], dy, op.address(grad_inputs[1], "grad_inputs[1]"), op.address(grad_inputs[2], "grad_inputs[2]"), n }
end

-- Direct calls (op:forward, op:backward): tocha.op's, from the methods above.

op.finish(Elementwise)
return M
