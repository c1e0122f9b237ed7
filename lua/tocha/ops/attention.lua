-- tocha.Attention: scaled dot-product attention as a RuntimeOp with a backward (so that it
-- joins a tocha.Model), through kernels/attention.cu: y = softmax(scale q k^T [+ causal mask]) v.
--
--   local att = tocha.Attention.new(64, { causal = true })   -- head size 64, bf16, scale 1/8
--   local y = att:forward(q, k, v)                  -- q [..., LQ, 64], k, v [..., LK, 64] -> [..., LQ, 64]
--   local dq, dk, dv = att:backward(q, k, v, dy)
--
-- The head size D (a multiple of 16 up to 128) is baked into the kernels at construction, as
-- a convolution's channels are. Options: causal (false), scale (nil: 1 / sqrt(D)), dtype (bf16
-- or f16). One launch forward.
-- The backward recomputes the forward into its workspace (o and each row's log-sum-exp: no
-- tensor kept between the passes) and then runs the flash backward: delta = the sum of dy o a
-- row, a pass over the key tiles adding dk, dv and (atomically, in f32) dq, and dq's rounding:
-- four launches, workspace o, lse, delta and dq's f32 sums.
local dtype = require "tocha.dtype"
local errors = require "tocha.errors"
local op = require "tocha.op"
local attention = require "tocha.attention"
local raise = errors.raise

local M = {}

local Attention = op.class("Attention")
M.Attention = Attention
Attention.input_names = { "q", "k", "v" }

local address, launch_index = op.address, op.launch_index

-- Attention.new(head_size [, {causal = false, scale, dtype = "bf16"}])
function Attention.new(head_size, opts)
  local d = op.integer(head_size, "head_size")
  if d % 16 ~= 0 or d < 16 or d > 128 then
    raise(("head_size: expected a multiple of 16 up to 128, got %d"):format(d))
  end
  opts = op.options(opts, { causal = "boolean", scale = true, dtype = true }, "Attention")
  local dt = opts.dtype or "bf16"
  if dt ~= "f16" and dt ~= "bf16" then raise(("dtype: expected f16 or bf16, got %s"):format(errors.show(dt))) end
  local scale = opts.scale
  if scale ~= nil and (type(scale) ~= "number" or scale ~= scale or math.abs(scale) == math.huge) then
    raise("scale: expected a finite number, got " .. errors.show(scale))
  end
  local self = setmetatable({ kind = "attention", head_size = d, causal = opts.causal == true, scale = scale or 1 / math.sqrt(d),
    dtype = dt, block_size = 128 }, Attention)
  self.id = ("attention__%d__%s__%s__%.17g"):format(d, dt, self.causal and "causal" or "full", self.scale)
  self.kernel = attention.forward_kernel(dt, d, self.causal)
  self.delta_kernel, self.main_kernel, self.dq_kernel = attention.backward_kernels(dt, d, self.causal)
  self.grad_kernel = self.main_kernel -- (a backward: a model asks for grad_kernel)
  return self
end

function Attention:n_activation_inputs() return 3 end

-- The sizes of q, k and v's shapes, checked: heads (the leading dimensions' product), lq, lk, d.
function Attention:sizes_of(input_shapes)
  local shapes = op.input_shapes(input_shapes, 3)
  local qs, ks, vs = shapes[1], shapes[2], shapes[3]
  for i, name in ipairs({ "inputs[1]", "inputs[2]", "inputs[3]" }) do
    op.check_shape(shapes[i], name)
    if #shapes[i] < 2 then raise(("%s: expected [..., L, D], got %d dimensions"):format(name, #shapes[i])) end
  end
  local nd, d = #qs, qs[#qs]
  if d ~= self.head_size then
    raise(("inputs[1]: expected a head size (last dimension) of %d, got %d"):format(self.head_size, d))
  end
  local want_k = {}
  for i = 1, nd - 2 do want_k[i] = qs[i] end
  want_k[nd - 1], want_k[nd] = ks[#ks - 1], d
  if #ks ~= nd or not op.same_sizes(ks, want_k) then
    raise(("inputs[2]: expected the leading dimensions and head size of q %s, got %s"):format(op.shape_text(qs),
      op.shape_text(ks)))
  end
  if not op.same_sizes(vs, ks) then raise(("inputs[3]: expected k's shape %s, got %s"):format(op.shape_text(ks), op.shape_text(vs))) end
  local lq, lk = qs[nd - 1], ks[nd - 1]
  if lk == 0 and lq > 0 then raise("inputs[2]: expected at least one key") end
  if math.ceil(lq / 64) > 65535 or math.ceil(lk / 64) > 65535 then raise("inputs[1]: sequences of at most 4194240 rows") end
  local heads = 1
  for i = 1, nd - 2 do heads = heads * qs[i] end
  return heads, lq, lk, d
end

function Attention:compute_concrete_output_shape(input_shapes)
  self:sizes_of(input_shapes)
  local out = {}
  for i, s in ipairs(input_shapes[1]) do out[i] = s end
  return out
end

-- A CTA a head (x) and 64 queries (y); none for no queries.
function Attention:grid(output_shape)
  local nd, heads = #output_shape, 1
  for i = 1, nd - 2 do heads = heads * output_shape[i] end
  return { heads, math.ceil(output_shape[nd - 1] / 64), 1 }
end

local function align(bytes) return math.ceil(bytes / 256) * 256 end

-- The workspace's regions (byte offsets): the forward's lse, then (a backward) o, delta and dq's
-- f32 sums.
local function regions(self, heads, lq, d)
  local rows = heads * lq
  local r = { lse = 0 }
  r.o = align(rows * 4)
  r.delta = r.o + align(rows * d * dtype.size(self.dtype))
  r.dq = r.delta + align(rows * 4)
  r.bytes = r.dq + align(rows * d * 4)
  return r
end

function Attention:workspace_bytes(input_shapes)
  local heads, lq, _, d = self:sizes_of(input_shapes)
  return regions(self, heads, lq, d).bytes
end

function Attention:n_launches() return 1 end

function Attention:pack_args(inputs, params, output)
  local a, shapes = op.inputs_of(inputs, 3)
  local heads, lq, lk = self:sizes_of(shapes)
  params = op.list(params, "params")
  local ws = address(params[1] or 0, "params[1]")
  if ws == 0 and heads * lq > 0 then raise("params: the op needs its workspace (op:workspace_bytes)") end
  return { a[1], a[2], a[3], address(output, "output"), ws, heads, lq, lk, self.scale }
end

function Attention:n_backward_launches() return 4 end

-- Backward launch i: kernel, grid, and (given addresses a = {q, k, v, dy, workspace, dq, dk,
-- dv}) its arguments.
local function backward_launch(self, i, input_shapes, a)
  launch_index(i, 4)
  local heads, lq, lk, d = self:sizes_of(input_shapes)
  local delta_kernel, main, dq_kernel = self.delta_kernel, self.main_kernel, self.dq_kernel
  local rows = heads * lq
  local none = { 0, 0, 0 }
  a = a or { 0, 0, 0, 0, 0, 0, 0, 0 }
  local q, k, v, dy, ws, dq, dk, dv = unpack(a)
  local r = regions(self, heads, lq, d)
  local scale = self.scale
  local function flat(count) return { math.max(1, math.min(math.ceil(count / 128), 2 ^ 31 - 1)), 1, 1 } end
  if i == 1 then
    if rows == 0 then return self.kernel, none, {} end
    return self.kernel, { heads, math.ceil(lq / 64), 1 },
      { q, k, v, ws + r.o, ws + r.lse, heads, lq, lk, scale }
  elseif i == 2 then
    if rows == 0 then return delta_kernel, none, {} end
    return delta_kernel, flat(rows), { ws + r.o, dy, ws + r.delta, ws + r.dq, rows }
  elseif i == 3 then
    if heads == 0 or lk == 0 then return main, none, {} end
    return main, { heads, math.ceil(lk / 64), 1 }, { q, k, v, dy, ws + r.lse, ws + r.delta, ws + r.dq, dk, dv, heads, lq,
      lk, scale }
  end
  if rows == 0 then return dq_kernel, none, {} end
  return dq_kernel, flat(rows * d), { ws + r.dq, dq, rows * d }
end

function Attention:backward_kernel_for_launch(i, input_shapes) return (backward_launch(self, i, input_shapes)) end
function Attention:backward_grid_for_launch(i, input_shapes)
  local _, grid = backward_launch(self, i, input_shapes)
  return grid
end
Attention.backward_grid = function(self, ...) return self:backward_grid_for_launch(1, ...) end
Attention.pack_backward_args = function(self, ...) return self:pack_backward_args_for_launch(1, ...) end

function Attention:pack_backward_args_for_launch(i, inputs, params, _, _, grad_output, _, grad_inputs)
  local a, shapes = op.inputs_of(inputs, 3)
  params, grad_inputs = op.list(params, "params"), op.list(grad_inputs, "grad_inputs")
  local ws = address(params[1] or 0, "params[1]")
  if ws == 0 and self:workspace_bytes(shapes) > 0 then raise("params: the op needs its workspace (op:workspace_bytes)") end
  local _, _, args = backward_launch(self, i, shapes, { a[1], a[2], a[3], address(grad_output, "grad_output"), ws,
    address(grad_inputs[1], "grad_inputs[1]"), address(grad_inputs[2], "grad_inputs[2]"),
    address(grad_inputs[3], "grad_inputs[3]") })
  return args
end

op.finish(Attention)
return M
