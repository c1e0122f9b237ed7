-- tocha.Embedding: a lookup table of `rows` vectors of `dim` values, its rows picked by integer
-- indices (PyTorch's nn.Embedding, Torch7's nn.LookupTable), forward and backward, every float
-- dtype: kernels/embedding.cu behind a RuntimeOp with the parameter "weight" [rows, dim], so
-- that it joins a tocha.Model as a layer (an imported ONNX Gather of an initializer is one).
--
--   local emb = tocha.Embedding.new(1000, 64)          -- f32; indices 1-based i64
--   local y = emb:forward(idx, weight)                  -- idx [B, T] -> y [B, T, 64]
--   local dweight = emb:backward(idx, weight, dy)       -- the indices get no gradient
--
-- Indices are 1-based by default, as Lua's and Torch7's (base = 0 for PyTorch's numbering);
-- wrap = true lets a negative index count from the table's end (ONNX's Gather). A direct
-- forward raises on an index outside the table, naming its position; inside a model, whose
-- launches are queued without a read back, that row of the output is NaN. The backward sorts
-- the positions by row on the device and sums each row's gradients in position order, so that
-- its bits are the same every run (no float atomics); a padding index's row gets gradient 0.
local device = require "tocha.device"
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local tensor = require "tocha.tensor"
local errors = require "tocha.errors"
local op = require "tocha.op"
local raise, show = errors.raise, errors.show

local M = {}

local Embedding = op.class("Embedding")
M.Embedding = Embedding

local ROWS_A_CTA = 8 -- the (32, 8) CTAs of the forward and of the gradient
local LIMIT = 2 ^ 31 - 1 -- positions and rows are counted in i32 by the backward's sort

local function count(v, what)
  v = op.integer(v, what)
  if v < 1 or v > LIMIT then raise(("%s: expected 1 to %d, got %s"):format(what, LIMIT, show(v))) end
  return v
end

-- Embedding.new(rows, dim [, {dtype = "f32", index_dtype = "i64", base = 1, wrap = false,
-- padding_idx}]): padding_idx (in the indices' numbering) is a row whose gradient stays 0.
function Embedding.new(rows, dim, opts)
  rows, dim = count(rows, "rows"), count(dim, "dim")
  opts = op.options(opts, { dtype = true, index_dtype = true, base = true, wrap = true, padding_idx = true },
    "Embedding.new")
  local dt = op.float_dtype(opts.dtype, "dtype")
  local it = opts.index_dtype or "i64"
  if it ~= "i64" and it ~= "i32" then raise(("index_dtype: expected i64 or i32, got %s"):format(show(it))) end
  local base = opts.base == nil and 1 or opts.base
  if base ~= 0 and base ~= 1 then raise(("base: expected 0 or 1, got %s"):format(show(base))) end
  local wrap = opts.wrap or false
  if type(wrap) ~= "boolean" then raise(("wrap: expected a boolean, got %s"):format(show(wrap))) end
  local padding = -1
  if opts.padding_idx ~= nil then
    local p = op.integer(opts.padding_idx, "padding_idx")
    local r = p - base
    if wrap and r < 0 then r = r + rows end
    if r < 0 or r >= rows then
      raise(("padding_idx: %d is outside the table's %d rows (base %d)"):format(p, rows, base))
    end
    padding = r
  end
  local ct, ic = dtype.ctype(dt), dtype.ctype(it)
  local self = setmetatable({ kind = "embedding", dtype = dt, index_dtype = it, rows = rows, dim = dim, base = base,
    wrap = wrap, padding = padding, block_size = 32 * ROWS_A_CTA,
    id = ("embedding__%d__%d__%s__%s__%d%s%s"):format(rows, dim, dt, it, base, wrap and "__wrap" or "",
      padding >= 0 and "__pad" .. padding or "") }, Embedding)
  local source = op.source("embedding.cu")
  self.kernel = kernel.new { source = source, name = "tocha_embedding", template_args = ct .. ", " .. ic,
    params = ("%s* idx, %s* weight, %s* y, i64 n, i64 rows, i64 dim, i64 base, i32 wrap, i64* bad, i32 record"):format(it, dt, dt) }
  self.index_kernel = kernel.new { source = source, name = "tocha_embedding_index", template_args = ic,
    params = ("%s* idx, i32* start, i32* cursor, i32* sorted, i32 n, i32 rows, i64 base, i32 wrap"):format(it) }
  self.grad_kernel = kernel.new { source = source, name = "tocha_embedding_grad", template_args = ct,
    params = ("%s* dy, i32* start, i32* sorted, %s* dweight, i64 rows, i64 dim, i64 padding"):format(dt, dt) }
  return self
end

-- ---- the RuntimeOp (tocha.op's defaults for the rest) ----

Embedding.input_names = { "idx" }
function Embedding:input_dtype() return self.index_dtype end
function Embedding:param_names() return { "weight" } end
function Embedding:param_shapes() return { { self.rows, self.dim } } end
-- PyTorch's nn.Embedding starts at N(0, 1).
function Embedding:param_init_std() return 1 end
function Embedding:n_backward_launches() return 2 end

function Embedding:compute_concrete_output_shape(input_shapes)
  local shape = op.one_input(input_shapes)
  if type(shape) ~= "table" or #shape > 7 then raise("inputs[1]: expected a shape of 0 to 7 sizes") end
  local out, n = {}, 1
  for i, s in ipairs(shape) do
    if type(s) ~= "number" or s ~= math.floor(s) or s < 0 then
      raise(("inputs[1][%d]: expected a size, got %s"):format(i, show(s)))
    end
    out[i], n = s, n * s
  end
  if n > LIMIT then raise(("inputs[1]: %d indices, past the %d the backward sorts"):format(n, LIMIT)) end
  out[#out + 1] = self.dim
  return out
end

local function positions(output_shape) return op.numel(output_shape) / output_shape[#output_shape] end

local function rows_grid(n) return { math.max(1, math.min(math.ceil(n / ROWS_A_CTA), 65535 * 16)), 1, 1 } end

function Embedding:block() return { 32, ROWS_A_CTA, 1 } end
-- (the sort's single CTA is one of these too: 256 threads)
function Embedding:backward_block() return { 32, ROWS_A_CTA, 1 } end

function Embedding:grid(output_shape)
  op.check_shape(output_shape, "output_shape")
  local n = positions(output_shape)
  if n == 0 then return { 0, 0, 0 } end
  return rows_grid(n)
end

-- bad: an i64 tensor's address for the first bad position (none in a model: not recorded).
function Embedding:pack_args(inputs, params, output, output_shape, bad)
  local idx, shape = op.input_of(inputs)
  params = op.list(params, "params")
  local out = self:compute_concrete_output_shape({ shape })
  if output_shape ~= nil then op.check_output_shape(output_shape, out, "idx's") end
  return { idx, op.address(params[1], "params[1]"), op.address(output, "output"), positions(out), self.rows, self.dim,
    self.base, self.wrap and 1 or 0, bad or op.address(output, "output"), bad and 1 or 0 }
end

-- The backward's workspace: start (rows + 1), cursor (rows) and the sorted positions (n), i32.
local function workspace_of(self, n) return (2 * self.rows + 1 + n) * 4 end

function Embedding:workspace_bytes(input_shapes)
  local out = self:compute_concrete_output_shape(input_shapes)
  return workspace_of(self, positions(out))
end

function Embedding:backward_kernel_for_launch(i)
  op.launch_index(i, 2)
  return i == 1 and self.index_kernel or self.grad_kernel
end

function Embedding:backward_grid_for_launch(i)
  op.launch_index(i, 2)
  if i == 1 then return { 1, 1, 1 } end
  return rows_grid(self.rows)
end

function Embedding:pack_backward_args_for_launch(i, inputs, params, _, _, grad_output, _, _, grad_params)
  local idx, shape = op.input_of(inputs)
  local n = positions(self:compute_concrete_output_shape({ shape })) -- (checked: at most LIMIT)
  params, grad_params = op.list(params, "params"), op.list(grad_params, "grad_params")
  local ws = op.address(params[2] or 0, "params[2]")
  if ws == 0 then raise("params: the backward needs its workspace (op:workspace_bytes) after the weight") end
  local start, cursor = ws, ws + (self.rows + 1) * 4
  local sorted = cursor + self.rows * 4
  op.launch_index(i, 2)
  if i == 1 then return { idx, start, cursor, sorted, n, self.rows, self.base, self.wrap and 1 or 0 } end
  return { op.address(grad_output, "grad_output"), start, sorted, op.address(grad_params[1], "grad_params[1]"), self.rows,
    self.dim, self.padding }
end

-- ---- direct calls ----

local function check_indices(self, idx)
  if not tensor.is_tensor(idx) then raise("idx: expected a tensor of indices, got " .. type(idx)) end
  op.live_tensor(idx, "idx")
  op.check_dtype(idx, "idx", self.index_dtype, "index_dtype")
end

local function check_weight(self, weight, idx)
  op.check_tensor(self, weight, "weight", idx, "idx")
  op.same_shape(weight, { self.rows, self.dim }, "weight", "the table's [rows, dim]")
end

local function run_forward(self, idx, weight, y)
  local out = self:compute_concrete_output_shape({ idx:shape() })
  if y == nil then y = op.alloc_like(out, weight) end
  op.check_tensor(self, y, "y", idx, "idx")
  op.same_shape(y, out, "y", "idx's shape and dim")
  op.check_aliasing({ { y, "y" } }, { { weight, "weight" } })
  local n = positions(out)
  if n == 0 then return y end
  local dev = device.wrap(idx.dev)
  local bad = tensor.zeros({ 1 }, { dtype = "i64", device = dev })
  op.launch_packed(self.kernel, dev, self:grid(out), self:block(), self:pack_args({ { idx.data, idx:shape() } },
    { weight.data }, y.data, out, bad.data))
  local at = tonumber(bad:to_host()[0])
  bad:free()
  if at ~= 0 then
    local flat = idx:view({ n })
    local v = flat:narrow(1, at, 1):contiguous():to_host()[0]
    raise(("idx: index %s at position %d is outside the table's %d rows (base %d%s)"):format(tostring(v):gsub("LL$", ""),
      at, self.rows, self.base, self.wrap and ", negative from the end" or ""))
  end
  return y
end

-- op:forward(idx, weight [, y [, opts]]) -> y of shape idx's plus dim.
function Embedding:forward(idx, weight, y, opts)
  check_indices(self, idx)
  check_weight(self, weight, idx)
  return op.on_stream(opts, idx, run_forward, self, idx, weight, y)
end

local function run_backward(self, idx, weight, dy, dweight)
  local out = self:compute_concrete_output_shape({ idx:shape() })
  op.check_tensor(self, dy, "dy", idx, "idx")
  op.same_shape(dy, out, "dy", "the output for idx")
  if dweight == nil then dweight = op.alloc_like({ self.rows, self.dim }, weight) end
  op.check_tensor(self, dweight, "dweight", idx, "idx")
  op.same_shape(dweight, { self.rows, self.dim }, "dweight", "weight's")
  op.check_aliasing({ { dweight, "dweight" } }, { { dy, "dy" }, { weight, "weight" } })
  local dev = device.wrap(idx.dev)
  local ws = tensor.alloc({ workspace_of(self, positions(out)) }, "u8", dev)
  for i = 1, 2 do
    op.launch_packed(self:backward_kernel_for_launch(i), dev, self:backward_grid_for_launch(i),
      self:backward_block(), self:pack_backward_args_for_launch(i, { { idx.data, idx:shape() } },
        { weight.data, ws.data }, nil, out, dy.data, 0, {}, { dweight.data }))
  end
  ws:free()
  return dweight
end

-- op:backward(idx, weight, dy [, dweight [, opts]]) -> dweight (every row written).
function Embedding:backward(idx, weight, dy, dweight, opts)
  check_indices(self, idx)
  check_weight(self, weight, idx)
  return op.on_stream(opts, idx, run_backward, self, idx, weight, dy, dweight)
end

op.finish(Embedding)

return M
