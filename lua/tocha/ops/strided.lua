-- tocha.Permute and tocha.Slice: a strided view of x copied dense, as a RuntimeOp, so that a
-- model can hold PyTorch's x.permute(...).contiguous() and x[a:b:s, ...] (ONNX's Transpose and
-- Slice). Both launch kernels/strided_copy.cu's element path (the copy tocha's views take to
-- become dense), its source the view: sizes, strides (a step's sign kept) and a start offset
-- worked out from x's shape.
--
--   local p = tocha.Permute.new({ 1, 3, 4, 2 })          -- NCHW -> NHWC
--   local s = tocha.Slice.new({ 1 }, { -1 }, { axes = { 3 }, steps = { 2 } })  -- x[:, :, 1:-1:2]
--   local y = p:forward(x)                               -- or p(node) in a model
--
-- Backward: Permute's dx is dy copied back through the inverse permutation (one launch);
-- Slice's dx is zeros with dy copied into the sliced places (a fill, then the copy with dx's
-- view as the destination), so that an imported network trains through both.
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local ffi = require "ffi"
local raise = errors.raise

local M = {}

local BLOCK = 256

local function copy_kernel(dt)
  local sizes = {}
  for _, p in ipairs({ "d", "s", "t" }) do for i = 0, 7 do sizes[#sizes + 1] = ("i64 %s%d"):format(p, i) end end
  return kernel.new { source = op.source("strided_copy.cu"), name = "tocha_strided_copy",
    template_args = tostring(dtype.size(dt)), file = "strided_copy.cu",
    params = "u8* src, u8* dst, i64 n, i32 ndim, " .. table.concat(sizes, ", ") }
end

local dense_strides = require("tocha.shape").dense_strides

-- The methods both classes share: self:view(x_shape) gives {shape, strides, offset} of the view
-- of x (in elements) whose dense copy is the output.
local Methods = {}

function Methods:compute_concrete_output_shape(input_shapes)
  local x = op.one_input(input_shapes)
  op.check_shape(x, "inputs[1]")
  return self:view(x).shape
end

function Methods:grid(output_shape)
  local n = op.numel(output_shape)
  return { math.max(1, math.min(math.ceil(n / (BLOCK * 4)), 2 ^ 31 - 1)), 1, 1 }
end

function Methods:pack_args(inputs, _, output, output_shape)
  local x, shape = op.input_of(inputs)
  local v = self:view(shape)
  op.check_output_shape(output_shape or v.shape, v.shape, "the view's shape")
  local n = op.numel(v.shape)
  local t = dense_strides(v.shape)
  local args = { ffi.cast("uint64_t", x) + v.offset * dtype.size(self.dtype), op.address(output, "output"), n, #v.shape }
  for _, list in ipairs({ v.shape, v.strides, t }) do
    for i = 1, 8 do args[#args + 1] = list[i] or (list == v.shape and 1 or 0) end
  end
  return args
end

-- The copy kernel's arguments from src to dst over `shape`, with src strides s and dst strides
-- t (in elements; dst already at its offset).
local function copy_args(src, dst, shape, s, t)
  local args = { src, dst, op.numel(shape), #shape }
  for _, list in ipairs({ shape, s, t }) do
    for i = 1, 8 do args[#args + 1] = list[i] or (list == shape and 1 or 0) end
  end
  return args
end

-- The backward: Slice's (zero_first) a fill of dx, then each class's backward_copy.
function Methods:has_backward() return true end
function Methods:n_backward_launches() return self.zero_first and 2 or 1 end

function Methods:backward_kernel_for_launch(i)
  op.launch_index(i, self:n_backward_launches())
  return (self.zero_first and i == 1) and self.fill_kernel or self.grad_kernel
end

function Methods:backward_grid_for_launch(i, input_shapes)
  op.launch_index(i, self:n_backward_launches())
  local x = op.one_input(input_shapes)
  op.check_shape(x, "inputs[1]")
  -- (the grid-stride copy and fill: dx's elements, or the slice's dy ones)
  return self:grid(self.zero_first and i == 2 and self:view(x).shape or x)
end
function Methods:backward_grid(input_shapes) return self:backward_grid_for_launch(1, input_shapes) end

function Methods:pack_backward_args_for_launch(i, inputs, _, _, _, grad_output, _, grad_inputs)
  op.launch_index(i, self:n_backward_launches())
  local _, shape = op.input_of(inputs)
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  local dx, dy = op.address(grad_inputs[1], "grad_inputs[1]"), op.address(grad_output, "grad_output")
  if self.zero_first and i == 1 then return { dx, op.numel(shape), 0 } end
  return self:backward_copy(shape, dy, dx)
end
function Methods:pack_backward_args(...) return self:pack_backward_args_for_launch(1, ...) end

local function strided_class(name)
  local class = op.class(name)
  for k, fn in pairs(Methods) do class[k] = fn end
  return class
end

-- ---- Permute ----

M.Permute = strided_class("Permute")

-- Permute.new(dims [, {dtype = "f32"}]): dimension i of the output is dimension dims[i] of x
-- (1-based), as x.permute(dims) copied dense. Any dtype.
function M.Permute.new(dims, opts)
  opts = op.options(opts, { dtype = true }, "tocha.Permute")
  if type(dims) ~= "table" or #dims < 1 or #dims > 8 then raise("dims: expected a list of 1 to 8 dimensions") end
  local seen = {}
  for i, d in ipairs(dims) do
    if type(d) ~= "number" or d ~= math.floor(d) or d < 1 or d > #dims or seen[d] then
      raise(("dims[%d]: expected each of 1 to %d once, got %s"):format(i, #dims, errors.show(d)))
    end
    seen[d] = true
  end
  local dt = opts.dtype or "f32"
  dtype.id(dt)
  local self = setmetatable({ kind = "permute", dims = { unpack(dims) }, dtype = dt, block_size = BLOCK,
    id = ("permute__%s__%s"):format(table.concat(dims, "_"), dt) }, M.Permute)
  self.kernel = copy_kernel(dt)
  self.grad_kernel = self.kernel
  return self
end

function M.Permute:view(x)
  if #x ~= #self.dims then
    raise(("inputs[1]: %d dimensions, the permutation has %d"):format(#x, #self.dims))
  end
  local strides, shape, s = dense_strides(x), {}, {}
  for i, d in ipairs(self.dims) do shape[i], s[i] = x[d], strides[d] end
  return { shape = shape, strides = s, offset = 0 }
end

-- dx[x's index] = dy at the place the permutation put it: over x's shape, dy's strides taken
-- back through the inverse permutation.
function M.Permute:backward_copy(x, dy, dx)
  local v = self:view(x)
  local dy_strides, s = dense_strides(v.shape), {}
  for i, d in ipairs(self.dims) do s[d] = dy_strides[i] end
  return copy_args(dy, dx, x, s, dense_strides(x))
end

op.finish(M.Permute)

-- ---- Slice ----

M.Slice = strided_class("Slice")

-- Slice.new(starts, ends [, {axes, steps, dtype = "f32"}]): along each axis (tocha's dimensions:
-- 1-based, negative from the end; default 1, 2, ...), the elements starts[i], starts[i] +
-- steps[i], ... short of ends[i], with the indices as Python's x[a:b:s] and ONNX's Slice take
-- them: 0-based, the end excluded, negative from the end, clamped to the dimension (so 0 and
-- math.huge take all); a negative step walks back from start. Any dtype; an empty slice is
-- refused.
function M.Slice.new(starts, ends, opts)
  opts = op.options(opts, { axes = true, steps = true, dtype = true }, "tocha.Slice")
  local n = type(starts) == "table" and #starts or -1
  if n < 1 or type(ends) ~= "table" or #ends ~= n then
    raise("starts, ends: expected two lists of one length")
  end
  local axes, steps = opts.axes, opts.steps
  if axes == nil then
    axes = {}
    for i = 1, n do axes[i] = i end
  end
  if steps == nil then
    steps = {}
    for i = 1, n do steps[i] = 1 end
  end
  if type(axes) ~= "table" or #axes ~= n or type(steps) ~= "table" or #steps ~= n then
    raise("axes, steps: expected lists as long as starts")
  end
  for i = 1, n do
    for _, c in ipairs({ { starts[i], "starts" }, { ends[i], "ends" } }) do
      if type(c[1]) ~= "number" or c[1] ~= c[1] then raise(("%s[%d]: expected a number, got %s"):format(c[2], i, errors.show(c[1]))) end
    end
    if type(axes[i]) ~= "number" or axes[i] ~= math.floor(axes[i]) or axes[i] == 0 then
      raise(("axes[%d]: expected a dimension (1-based, negative from the end), got %s"):format(i, errors.show(axes[i])))
    end
    if type(steps[i]) ~= "number" or steps[i] ~= math.floor(steps[i]) or steps[i] == 0 or math.abs(steps[i]) >= 2 ^ 53 then
      raise(("steps[%d]: expected a non-zero integer, got %s"):format(i, errors.show(steps[i])))
    end
  end
  local dt = opts.dtype or "f32"
  dtype.id(dt)
  local function text(list) return table.concat(list, "_") end
  local self = setmetatable({ kind = "slice", starts = { unpack(starts) }, ends = { unpack(ends) }, axes = { unpack(axes) },
    steps = { unpack(steps) }, dtype = dt, block_size = BLOCK, zero_first = true,
    id = ("slice__%s__%s__%s__%s__%s"):format(text(starts), text(ends), text(axes), text(steps), dt) }, M.Slice)
  self.kernel = copy_kernel(dt)
  self.grad_kernel = self.kernel
  self.fill_kernel = kernel.new { source = op.source("fill.cu"), name = "tocha_fill", template_args = dtype.ctype(dt),
    params = ("%s* y, i64 n, f64 value"):format(dt) }
  return self
end

-- slice:view(x_shape [, empty_ok]): the strided view {shape, strides, offset} (elements) of x
-- it copies; an empty slice raises unless empty_ok (a constant's fold may be empty).
function M.Slice:view(x, empty_ok)
  local strides, shape, s = dense_strides(x), {}, {}
  for i, v in ipairs(x) do shape[i], s[i] = v, strides[i] end
  local offset, done = 0, {}
  for i, a in ipairs(self.axes) do
    local d = a < 0 and #x + a + 1 or a
    if d < 1 or d > #x then raise(("inputs[1]: axes[%d] = %d is not one of its %d dimensions"):format(i, a, #x)) end
    if done[d] then raise(("axes[%d]: dimension %d is sliced twice"):format(i, d)) end
    done[d] = true
    local size, step = x[d], self.steps[i]
    -- as Python's slice.indices: negative from the end, then clamped
    local function index(v, low, high)
      if v < 0 then v = v + size end
      return math.max(low, math.min(high, v))
    end
    local first, last
    if step > 0 then
      first, last = index(self.starts[i], 0, size), index(self.ends[i], 0, size)
    else
      first, last = index(self.starts[i], -1, size - 1), index(self.ends[i], -1, size - 1)
    end
    local count = step > 0 and math.max(0, math.ceil((last - first) / step)) or math.max(0, math.ceil((first - last) / -step))
    if count == 0 and not empty_ok then
      raise(("inputs[1]: the slice of dimension %d is empty (tocha's tensors here have no size 0)"):format(d))
    end
    shape[d], s[d] = count, strides[d] * step
    offset = offset + first * strides[d]
  end
  return { shape = shape, strides = s, offset = offset }
end

-- After dx is zeroed: dy (dense, the view's shape) copied into dx's places of the view.
function M.Slice:backward_copy(x, dy, dx)
  local v = self:view(x)
  return copy_args(dy, ffi.cast("uint64_t", dx) + v.offset * dtype.size(self.dtype), v.shape, dense_strides(v.shape),
    v.strides)
end

op.finish(M.Slice)

return M
