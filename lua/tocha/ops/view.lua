-- tocha.Flatten and tocha.View: a tensor seen with another shape, in a tocha.Model without a
-- copy or a launch: the node's output is its input's memory (the model plans it so: the input's
-- buffer lives as long as the view is read, and the backward hands the gradient back reshaped).
--
--   local flat = tocha.Flatten.new()              -- [N, C, H, W] -> [N, C*H*W] (dims 2 to -1)
--   local v = tocha.View.new({ -1, 16, 8 })       -- one size -1: inferred
--   local y = flat(x_node)                        -- a node of a model
--   flat:forward(x)                               -- direct: x:view(...), no copy
--
-- A view node cannot be a model's output (the outputs are tensors of their own): make its input
-- the output and view that. Options: dtype (the model's check of its input, default f32; any
-- dtype: a view of an integer input, a text model's mask, is one too).
local dtype = require "tocha.dtype"
local errors = require "tocha.errors"
local op = require "tocha.op"
local raise = errors.raise

local function view_dtype(name)
  name = name or "f32"
  dtype.id(name)
  return name
end

local M = {}

local Methods = {}

function Methods:pack_args() raise("self: a view has no launch (a model plans it as its input's memory)") end
function Methods:grid() raise("self: a view has no launch (a model plans it as its input's memory)") end

-- The output shape for x's, a message about inputs[1] raised about x.
local function output_shape(self, x)
  local ok, r = pcall(self.compute_concrete_output_shape, self, { x:shape() })
  if not ok then raise((tostring(r):gsub("^.-inputs%[1%]", "x"))) end
  return r
end

-- op:forward(x): x seen with the output shape (no copy); op:backward(x, dy): dy seen with x's.
function Methods:forward(x)
  op.check_tensor(self, x, "x")
  local r = x:view(output_shape(self, x))
  return r
end
function Methods:backward(x, dy)
  op.check_tensor(self, x, "x")
  op.live_tensor(dy, "dy")
  local want = output_shape(self, x)
  op.same_shape(dy, want, "dy", "the view's output")
  local r = dy:view(x:shape())
  return r
end
function Methods:has_backward() return true end

local function view_class(name)
  local class = op.class(name)
  for k, fn in pairs(Methods) do class[k] = fn end
  return class
end

M.Flatten = view_class("Flatten")

-- Flatten.new([{start_dim = 2, end_dim = -1, dtype}]): dimensions start_dim to end_dim (1-based,
-- negative from the end) made one.
function M.Flatten.new(opts)
  opts = op.options(opts, { start_dim = true, end_dim = true, dtype = true }, "tocha.Flatten")
  local s, e = opts.start_dim or 2, opts.end_dim or -1
  op.integer(s, "start_dim")
  op.integer(e, "end_dim")
  if s == 0 or e == 0 then raise("start_dim: dimensions are 1-based (or negative from the end), got 0") end
  local self = setmetatable({ kind = "flatten", is_view = true, start_dim = s, end_dim = e,
    dtype = view_dtype(opts.dtype) }, M.Flatten)
  self.id = ("flatten__%d__%d__%s"):format(s, e, self.dtype)
  return self
end

function M.Flatten:compute_concrete_output_shape(input_shapes)
  local shape = op.one_input(input_shapes)
  op.check_shape(shape, "inputs[1]")
  local n = #shape
  local s = self.start_dim < 0 and n + 1 + self.start_dim or self.start_dim
  local e = self.end_dim < 0 and n + 1 + self.end_dim or self.end_dim
  if s < 1 or s > n or e < 1 or e > n or s > e then
    raise(("inputs[1]: dimensions %d to %d are not a range of its %d"):format(self.start_dim, self.end_dim, n))
  end
  local out = {}
  for i = 1, s - 1 do out[#out + 1] = shape[i] end
  out[#out + 1] = op.numel(shape, s, e)
  for i = e + 1, n do out[#out + 1] = shape[i] end
  return out
end
op.finish(M.Flatten)

M.View = view_class("View")

-- View.new(sizes [, {dtype}]): sizes a list, at most one -1 (inferred from the count).
function M.View.new(sizes, opts)
  opts = op.options(opts, { dtype = true }, "tocha.View")
  if type(sizes) ~= "table" or #sizes < 1 or #sizes > 8 then raise("sizes: expected a list of 1 to 8 sizes") end
  local inferred = 0
  for i, v in ipairs(sizes) do
    if type(v) ~= "number" or v ~= math.floor(v) or (v < 1 and v ~= -1) then
      raise(("sizes[%d]: expected a positive integer or -1, got %s"):format(i, errors.show(v)))
    end
    if v == -1 then inferred = inferred + 1 end
  end
  if inferred > 1 then raise("sizes: at most one size may be -1") end
  local copy = {}
  for i, v in ipairs(sizes) do copy[i] = v end
  local self = setmetatable({ kind = "view", is_view = true, sizes = copy, dtype = view_dtype(opts.dtype) },
    M.View)
  self.id = ("view__%s__%s"):format(table.concat(copy, "x"), self.dtype)
  return self
end

function M.View:compute_concrete_output_shape(input_shapes)
  local shape = op.one_input(input_shapes)
  op.check_shape(shape, "inputs[1]")
  local total, known, at = op.numel(shape), 1, nil
  local out = {}
  for i, v in ipairs(self.sizes) do
    out[i] = v
    if v == -1 then at = i else known = known * v end
  end
  if at then
    if total % known ~= 0 then
      raise(("inputs[1]: %d elements do not divide into sizes %s"):format(total, op.shape_text(self.sizes)))
    end
    out[at] = total / known
  elseif known ~= total then
    raise(("inputs[1]: %d elements, but sizes %s hold %d"):format(total, op.shape_text(self.sizes), known))
  end
  return out
end
op.finish(M.View)

return M
