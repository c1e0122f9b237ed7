-- tocha.Linear: y = x w^T + b over x's last dimension (PyTorch's nn.Linear), with its parameters
-- "weight" [out_features, in_features] and "bias" [out_features], forward and backward, every
-- float dtype: kernels/matmul.cu's products (the tensor cores for halves, the f32 kernel of
-- 8 x 8 outputs a thread for f32: the forward where in_features is a multiple of 8, or 4 for
-- f32, the backward where both are), reduction.cu for the bias gradient. A RuntimeOp written
-- here, so that it joins a tocha.Model as a layer with parameters.
--
--   local fc = tocha.Linear.new(768, 3072)                  -- f32, with a bias
--   local y = fc:forward(x, w, b)                            -- x [..., 768] -> y [..., 3072]
--   local dx, dw, db = fc:backward(x, w, b, dy)
--   local proj = tocha.Linear.new(512, 10, { bias = false, dtype = "bf16" })
--   local mlp = tocha.Linear.new(768, 3072, { activation = "gelu" })  -- y = gelu(x w^T + b), one launch
--
-- The forward is one launch, reading w [out, in] as it is stored (the product's B column-major).
-- The backward has four: dx = dy w (dy and w as stored), dw = dy^T x (dy read column-major),
-- and db, the sum of dy over its rows, in one or two reduction passes (the second, and both
-- without a bias, have grids of 0 CTAs); the passes' partials go to the op's workspace
-- (op:workspace_bytes), after the parameters in `params`. Those two kernels read 16-byte
-- chunks: their operands (x, w, dy, as tocha allocates them) must be 16-byte aligned, which a
-- launch checks.
--
-- activation ("identity", "relu", "sigmoid", "tanh", "silu", "gelu"; kernels/activation.cuh)
-- is applied to x w^T + b in the product's epilogue, before the one rounding to the dtype. Its
-- backward first recomputes z with the forward's kernel, writing dz = dy F'(z) to the start of
-- the workspace (one launch more, and no tensor kept from the forward), then runs the four
-- launches above over dz. residual (true: a second input "residual" shaped as y) is added in
-- the epilogue before F (a transformer block's x + proj(...)); the backward's first launch then
-- writes dz into d residual (dy copied there without an activation), and the rest read it.
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local matmul = require "tocha.matmul"
local Elementwise = require("tocha.ops.elementwise").Elementwise
local reduction = require "tocha.ops.reduction"
local raise = errors.raise

local M = {}

local Linear = op.class("Linear")
M.Linear = Linear
Linear.input_names = { "x" }

local address, launch_index = op.address, op.launch_index

local positive = op.positive

-- Linear.new(in_features, out_features [, {bias = true, dtype = "f32", activation = "identity",
-- residual = false, tf32}]): tf32 (f32 only; default: tocha.get_float32_matmul_precision() ==
-- "high" when the op is made) runs its three products on tf32 (tocha_matmul_tc on f32).
function Linear.new(in_features, out_features, opts)
  in_features, out_features = positive(in_features, "in_features"), positive(out_features, "out_features")
  opts = op.options(opts, { bias = "boolean", dtype = true, activation = true, residual = "boolean", tf32 = "boolean" },
    "Linear")
  local dt = op.float_dtype(opts.dtype, "dtype")
  local bias = opts.bias ~= false
  local act = matmul.activation(opts.activation, "activation")
  local tf32 = dt == "f32" and matmul.tf32(opts.tf32, "tf32")
  local self = setmetatable({ kind = "linear", in_features = in_features, out_features = out_features, dtype = dt,
    has_bias = bias, block_size = 256, activation = act, tf32 = tf32, residual = opts.residual == true,
    id = ("linear__%d__%d__%s__%s"):format(in_features, out_features, dt, bias and "bias" or "nobias")
      .. (act ~= "identity" and "__" .. act or "") .. (tf32 and "__tf32" or "") .. (opts.residual and "__residual" or "") },
    Linear)
  if self.residual then
    self.input_names = { "x", "residual" }
    -- the backward's d residual = dy, without an activation
    if act == "identity" then self.copy_kernel = Elementwise.new("identity", dt).kernel end
  end
  -- The kernels and whether they take the tensor cores depend on the features alone (the rows
  -- are never a consecutive dimension of an operand).
  local forward, _, _, forward_kind = matmul.launch_of(dt, 1, in_features, out_features, 1, "row", "col",
    { activation = act, tf32 = tf32 })
  local dx, _, _, backward_kind = matmul.launch_of(dt, 1, out_features, in_features, 1, "row", "row", { tf32 = tf32 })
  self.kernel, self.matrix_kind = forward, forward_kind
  self.dx_kernel, self.backward_matrix_kind = dx, backward_kind
  self.dw_kernel = matmul.launch_of(dt, out_features, 1, in_features, 1, "col", "row", { tf32 = tf32 })
  self.grad_kernel = kernel.new { source = op.source("reduction.cu"), name = "tocha_reduce",
    template_args = dtype.ctype(dt) .. ", 0",
    params = ("u8* x, i32 x_acc, u8* y, i32 y_acc, %s* copy, i64 outer, i64 n, i64 inner, i64 splits, f64 divisor, i32 rows")
      :format(dt) }
  return self
end

-- x's shape as (rows, in_features), checked against the op's features.
function Linear:rows_of(shape, what)
  op.check_shape(shape, what)
  local last = shape[#shape]
  if last ~= self.in_features then
    raise(("%s: expected a last dimension of %d (in_features), got %d"):format(what, self.in_features, last))
  end
  return op.numel(shape) / last
end

-- ---- the RuntimeOp (tocha.op's defaults for the rest) ----

-- With a residual the op has two inputs: x, then the residual, shaped as y.
function Linear:n_activation_inputs() return self.residual and 2 or 1 end

-- x's shape among input_shapes.
local function x_shape(self, input_shapes) return op.input_shapes(input_shapes, self:n_activation_inputs())[1] end

function Linear:param_names() return self.has_bias and { "weight", "bias" } or { "weight" } end
function Linear:param_shapes()
  local w = { self.out_features, self.in_features }
  return self.has_bias and { w, { self.out_features } } or { w }
end

-- A model starts both parameters uniform in [-1/sqrt(in), 1/sqrt(in)), as PyTorch's nn.Linear
-- (the weight's kaiming-uniform with a = sqrt(5) has that bound).
function Linear:param_init_bound() return 1 / math.sqrt(self.in_features) end

function Linear:compute_concrete_output_shape(input_shapes)
  local shapes = op.input_shapes(input_shapes, self:n_activation_inputs())
  local shape = shapes[1]
  self:rows_of(shape, "inputs[1]")
  local out = {}
  for i, s in ipairs(shape) do out[i] = s end
  out[#out] = self.out_features
  if self.residual then op.check_residual(shapes[2], out) end
  return out
end

-- A pack's inputs: x's address and shape, and the residual's address (nil for none), its shape
-- checked.
local function inputs_of(self, inputs)
  local addresses, shapes = op.inputs_of(inputs, self:n_activation_inputs())
  if self.residual then self:compute_concrete_output_shape(shapes) end
  return addresses[1], shapes[1], addresses[2]
end

-- The grid of kernel k (of `kind`) over an m x n result, numbering the tiles k is built for.
local function tile_grid(kind, k, m, n) return matmul.grid_of(kind, m, n, 1, "x", k.tile_n) end

function Linear:grid(output_shape)
  local rows = op.numel(output_shape) / self.out_features
  return tile_grid(self.matrix_kind, self.kernel, rows, self.out_features)
end

local check_aligned = op.check_aligned

function Linear:pack_args(inputs, params, output)
  local x, shape, residual = inputs_of(self, inputs)
  local rows = self:rows_of(shape, "inputs[1]")
  params = op.list(params, "params")
  local w, y = address(params[1], "params[1]"), address(output, "output")
  local b = self.has_bias and address(params[2], "params[2]") or y
  if self.matrix_kind then check_aligned({ { address(x, "inputs[1]"), "x" }, { w, "weight" } }) end
  return { x, w, b, y, rows, self.out_features, self.in_features, 0, 0, 0, self.has_bias and 1 or 0, residual or y, y,
    residual and 1 or 0 }
end

-- The bytes of dz = dy F'(z) at the workspace's start (0 without an activation: dz is dy; or
-- with a residual: dz is d residual).
local function dz_bytes(self, rows)
  if self.activation == "identity" or self.residual then return 0 end
  return math.ceil(rows * self.out_features * dtype.size(self.dtype) / 256) * 256
end
-- The backward's launches before dx's: dz's recompute where there is an activation, d residual's
-- copy of dy where there is a residual alone.
local function pre(self) return (self.activation == "identity" and not self.residual) and 0 or 1 end

-- The bias gradient's reduction passes over dy [rows, out_features].
function Linear:bias_passes(rows)
  return reduction.plan(1, rows, self.out_features, self.block_size, self.dtype)
end

function Linear:workspace_bytes(input_shapes)
  local rows = self:rows_of(x_shape(self, input_shapes), "inputs[1]")
  local bytes = dz_bytes(self, rows)
  if not self.has_bias then return bytes end
  return bytes + reduction.partial_bytes(self:bias_passes(rows), self.dtype)
end

function Linear:n_backward_launches() return 4 + pre(self) end

-- The backward launch that writes input i's gradient alone, as first and last (x's: dx); nil
-- for a residual, whose gradient comes with the launches before (m:backward's inputs = false).
function Linear:input_grad_launches(i)
  if i ~= 1 then return nil end
  return pre(self) + 1, pre(self) + 1
end

function Linear:backward_kernel_for_launch(i)
  launch_index(i, self:n_backward_launches())
  if i <= pre(self) then return self.copy_kernel or self.kernel end
  i = i - pre(self)
  if i == 1 then return self.dx_kernel end
  if i == 2 then return self.dw_kernel end
  return self.grad_kernel
end

function Linear:backward_grid_for_launch(i, input_shapes)
  launch_index(i, self:n_backward_launches())
  local rows = self:rows_of(x_shape(self, input_shapes), "inputs[1]")
  if i <= pre(self) then
    if self.copy_kernel then return op.vector_grid(rows * self.out_features, self.dtype, self.block_size) end
    return tile_grid(self.matrix_kind, self.kernel, rows, self.out_features)
  end
  i = i - pre(self)
  if i == 1 then return tile_grid(self.backward_matrix_kind, self.dx_kernel, rows, self.in_features) end
  if i == 2 then return tile_grid(self.backward_matrix_kind, self.dw_kernel, self.out_features, self.in_features) end
  if not self.has_bias then return { 0, 0, 0 } end
  local p = self:bias_passes(rows)[i - 2]
  if not p then return { 0, 0, 0 } end
  return reduction.pass_grid(p, self.block_size, self.dtype)
end
Linear.backward_grid = function(self, ...) return self:backward_grid_for_launch(1, ...) end
Linear.pack_backward_args = function(self, ...) return self:pack_backward_args_for_launch(1, ...) end

function Linear:pack_backward_args_for_launch(i, inputs, params, _, _, grad_output, _, grad_inputs, grad_params)
  launch_index(i, self:n_backward_launches())
  local x, shape, residual = inputs_of(self, inputs)
  local rows = self:rows_of(shape, "inputs[1]")
  params, grad_inputs, grad_params = op.list(params, "params"), op.list(grad_inputs, "grad_inputs"),
    op.list(grad_params, "grad_params")
  local w, dy = address(params[1], "params[1]"), address(grad_output, "grad_output")
  local dx, dw = address(grad_inputs[1], "grad_inputs[1]"), address(grad_params[1], "grad_params[1]")
  local n_in, n_out = self.in_features, self.out_features
  local at = self.has_bias and 3 or 2
  local ws, skip = address(params[at] or 0, ("params[%d]"):format(at)), dz_bytes(self, rows)
  if self.residual then
    local d_residual = address(grad_inputs[2], "grad_inputs[2]")
    if i == 1 then
      if self.copy_kernel then return { dy, d_residual, rows * n_out } end
      -- dz = dy F'(x w^T + b + residual) into d residual, by the forward's kernel
      if self.matrix_kind then check_aligned({ { x, "x" }, { w, "weight" } }) end
      local b = self.has_bias and address(params[2], "params[2]") or d_residual
      return { x, w, b, d_residual, rows, n_out, n_in, 0, 0, 0, self.has_bias and 1 or 0, residual, dy, 3 }
    end
    i, dy = i - 1, d_residual
  elseif skip > 0 then
    if ws == 0 then raise("params: the backward needs its workspace (op:workspace_bytes) after the parameters") end
    if i == 1 then -- dz = dy F'(x w^T + b), by the forward's kernel
      if self.matrix_kind then check_aligned({ { x, "x" }, { w, "weight" } }) end
      local b = self.has_bias and address(params[2], "params[2]") or ws
      return { x, w, b, ws, rows, n_out, n_in, 0, 0, 0, self.has_bias and 1 or 0, ws, dy, 2 }
    end
    i, dy = i - 1, ws
  end
  ws = ws + skip
  if i <= 2 and self.backward_matrix_kind then
    check_aligned({ { x, "x" }, { w, "weight" }, { dy, "dy" } })
  end
  -- dx [rows, in] = dy [rows, out] x w [out, in]
  if i == 1 then return { dy, w, dx, dx, rows, n_in, n_out, 0, 0, 0, 0, dx, dx, 0 } end
  -- dw [out, in] = dy^T [out, rows] x x [rows, in]
  if i == 2 then return { dy, x, dw, dw, n_out, n_in, rows, 0, 0, 0, 0, dw, dw, 0 } end
  if not self.has_bias then return {} end
  local passes = self:bias_passes(rows)
  if not passes[i - 2] then return {} end
  local db = address(grad_params[2], "grad_params[2]")
  if #passes > 1 and ws == skip then
    raise("params: the backward needs its workspace (op:workspace_bytes) after the weight and the bias")
  end
  return reduction.pass_args(passes, i - 2, dy, db, ws, 1)
end

op.finish(Linear)
return M
