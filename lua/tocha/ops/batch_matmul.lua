-- tocha.MatMul: the product of two computed tensors, a [..., m, k] by b [..., k, n] into
-- [..., m, n], batched over the dimensions before the last two (b's a batch of its own, or one
-- matrix that every matrix of a takes): attention's q k^T and p v as a model's node (ONNX's
-- MatMul of two computed tensors). kernels/matmul.cu's products, as tocha.matmul picks them
-- (the tensor cores for halves, the f32 tiles for f32, where k and n are whole 16-byte chunks;
-- the tiled kernel otherwise), with k and n baked in at construction as Linear's features are.
-- Backward: da = dy b^T and db = a^T dy (summed over a's batch where b is one matrix, as a
-- single product over a's rows), each one launch of the same kernels reading the transposes
-- in place (column-major operands).
--
--   local mm = tocha.MatMul.new(64, 197, { dtype = "bf16" })   -- k = 64, n = 197
--   local scores = mm:forward(q, kt)                             -- [B, H, 197, 64] x [B, H, 64, 197]
local errors = require "tocha.errors"
local op = require "tocha.op"
local matmul = require "tocha.matmul"
local raise = errors.raise

local M = {}

local MatMul = op.class("MatMul")
M.MatMul = MatMul
MatMul.input_names = { "a", "b" }

-- MatMul.new(k, n [, {dtype = "f32", tf32}]): a's columns and b's rows k, b's columns n; tf32 as
-- tocha.Linear's (f32 read as tf32; default from tocha.get_float32_matmul_precision()).
function MatMul.new(k, n, opts)
  k, n = op.integer(k, "k"), op.integer(n, "n")
  if k < 1 or n < 1 then raise(("k, n: expected positive sizes, got %d and %d"):format(k, n)) end
  opts = op.options(opts, { dtype = true, tf32 = "boolean" }, "MatMul")
  local dt = op.float_dtype(opts.dtype, "dtype")
  local tf32 = dt == "f32" and matmul.tf32(opts.tf32, "tf32")
  local self = setmetatable({ kind = "matmul", k = k, n = n, dtype = dt, block_size = 256, tf32 = tf32,
    id = ("matmul__%d__%d__%s%s"):format(k, n, dt, tf32 and "__tf32" or "") }, MatMul)
  -- the kernel depends on k and n alone (the consecutive dimensions of row-major a and b)
  local how = { tf32 = tf32 }
  local kernel, _, _, kind = matmul.launch_of(dt, 1, k, n, 1, "row", "row", how)
  self.kernel, self.matrix_kind = kernel, kind
  -- dy [m, n] by b^T [n, k] (b read column-major); a^T [k, m] (a read column-major) by dy [m, n]
  self.grad_a_kernel, _, _, self.grad_a_kind = matmul.launch_of(dt, 1, n, k, 1, "row", "col", how)
  self.grad_b_kernel, _, _, self.grad_b_kind = matmul.launch_of(dt, k, 1, n, 1, "col", "row", how)
  self.grad_kernel = self.grad_a_kernel
  return self
end

function MatMul:n_activation_inputs() return 2 end

-- The product's m and its batch for inputs of these shapes, and b's batch (1 or a's), checked.
local function sizes(self, a, b)
  op.check_shape(a, "inputs[1]")
  op.check_shape(b, "inputs[2]")
  if #a < 2 or #b < 2 then raise(("inputs: expected matrices (2 or more dimensions), got %d and %d"):format(#a, #b)) end
  if a[#a] ~= self.k then raise(("inputs[1]: expected %d columns (k), got %d"):format(self.k, a[#a])) end
  if b[#b - 1] ~= self.k or b[#b] ~= self.n then
    raise(("inputs[2]: expected %d x %d matrices (k x n), got %d x %d"):format(self.k, self.n, b[#b - 1], b[#b]))
  end
  local batch_a, batch_b = op.numel(a) / (a[#a - 1] * a[#a]), op.numel(b) / (b[#b - 1] * b[#b])
  if batch_b ~= 1 then
    local same = #a == #b
    for i = 1, #a - 2 do same = same and a[i] == b[i] end
    if not same then
      raise(("inputs[2]: batch dimensions %s do not match inputs[1]'s %s (equal ones, or one matrix)"):format(
        op.shape_text(b), op.shape_text(a)))
    end
  end
  return a[#a - 1], batch_a, batch_b
end

function MatMul:compute_concrete_output_shape(input_shapes)
  local shapes = op.input_shapes(input_shapes, 2)
  sizes(self, shapes[1], shapes[2])
  local out = {}
  for i, s in ipairs(shapes[1]) do out[i] = s end
  out[#out] = self.n
  return out
end

function MatMul:grid(output_shape)
  op.check_shape(output_shape, "output_shape")
  local m = output_shape[#output_shape - 1]
  return matmul.grid_of(self.matrix_kind, m, self.n, op.numel(output_shape) / (m * self.n), "a", self.kernel.tile_n)
end

function MatMul:pack_args(inputs, _, output)
  local at, shapes = op.inputs_of(inputs, 2)
  local m, batch, batch_b = sizes(self, shapes[1], shapes[2])
  local c = op.address(output, "output")
  if self.matrix_kind then
    for i, what in ipairs({ "a", "b" }) do
      if tonumber(at[i]) % 16 ~= 0 then
        raise(("inputs[%d] (%s): the matrix kernels need 16-byte aligned operands; this one is not (copy it)"):format(i, what))
      end
    end
  end
  return { at[1], at[2], c, c, m, self.n, self.k, batch > 1 and m * self.k or 0, batch_b > 1 and self.k * self.n or 0,
    m * self.n, 0, c, c, 0 }
end

-- ---- the backward: launch 1 da, launch 2 db ----

function MatMul:n_backward_launches() return 2 end

function MatMul:backward_kernel_for_launch(i)
  op.launch_index(i, 2)
  return i == 1 and self.grad_a_kernel or self.grad_b_kernel
end

function MatMul:backward_grid_for_launch(i, input_shapes)
  op.launch_index(i, 2)
  local shapes = op.input_shapes(input_shapes, 2)
  local m, batch, batch_b = sizes(self, shapes[1], shapes[2])
  if i == 1 then return matmul.grid_of(self.grad_a_kind, m, self.k, batch, "a", self.grad_a_kernel.tile_n) end
  return matmul.grid_of(self.grad_b_kind, self.k, self.n, batch_b > 1 and batch or 1, "b", self.grad_b_kernel.tile_n)
end
function MatMul:backward_grid(input_shapes) return self:backward_grid_for_launch(1, input_shapes) end

function MatMul:pack_backward_args_for_launch(i, inputs, _, _, _, grad_output, _, grad_inputs)
  op.launch_index(i, 2)
  local at, shapes = op.inputs_of(inputs, 2)
  local m, batch, batch_b = sizes(self, shapes[1], shapes[2])
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  local dy = op.address(grad_output, "grad_output")
  local k, n = self.k, self.n
  if i == 1 then
    local da = op.address(grad_inputs[1], "grad_inputs[1]")
    return { dy, at[2], da, da, m, k, n, batch > 1 and m * n or 0, batch_b > 1 and k * n or 0, m * k, 0, da, da, 0 }
  end
  local db = op.address(grad_inputs[2], "grad_inputs[2]")
  if batch_b > 1 then return { at[1], dy, db, db, k, n, m, m * k, m * n, k * n, 0, db, db, 0 } end
  -- one b for every matrix of a: a's rows of the whole batch as one product's k
  return { at[1], dy, db, db, k, n, m * batch, 0, 0, 0, 0, db, db, 0 }
end
function MatMul:pack_backward_args(...) return self:pack_backward_args_for_launch(1, ...) end

op.finish(MatMul)

return M
