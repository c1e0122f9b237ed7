-- tocha.Pad: padding of a tensor of up to 8 dimensions (negative pads crop), forward and
-- backward, every float dtype: kernels/pad.cu with the mode baked in, behind a RuntimeOp, so
-- that it joins a tocha.Model. PyTorch's F.pad and ONNX's Pad.
--
--   local pad = tocha.Pad.new({ 1, 1, 2, 0 })                      -- W: 1 left, 1 right; H: 2 top
--   local mirror = tocha.Pad.new({ 3, 3, 3, 3 }, { mode = "reflect" })
--   local y = pad:forward(x)                                       -- [N, C, H, W] -> [N, C, H + 2, W + 2]
--   local dx = pad:backward(x, dy)
--
-- pad: PyTorch's order, pairs from the last dimension back ({left, right, top, bottom, ...}),
-- at most 8 pairs, each size an integer (negative: that many removed). Options: mode
-- "constant" (default; value, default 0, fills), "reflect" (mirrored without the edge; each pad
-- under the dimension's size), "replicate" (the edge repeated) or "circular" (as PyTorch's: the
-- crops first, then wrapped over what is left; each pad at most that); dtype (default f32). The backward sums, for each input element, the
-- gradients of the outputs that read it (kernels/pad.cu gathers them: one order on every device).
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local raise = errors.raise

local M = {}

local BLOCK = 256
local DIMS = 8
local MODES = { constant = 0, reflect = 1, replicate = 2, circular = 3 }

local Pad = op.class("Pad")
M.Pad = Pad

-- Pad.new(pad [, {mode = "constant", value = 0, dtype = "f32"}])
function Pad.new(pad, opts)
  if type(pad) ~= "table" or #pad == 0 or #pad % 2 ~= 0 or #pad > 2 * DIMS then
    raise(("pad: expected a list of 2 to %d sizes (pairs from the last dimension back), got %s"):format(2 * DIMS,
      errors.show(pad)))
  end
  local sizes = {}
  for i = 1, #pad do
    local v = pad[i]
    if type(v) ~= "number" or v ~= math.floor(v) or math.abs(v) >= 2 ^ 31 then
      raise(("pad[%d]: expected an integer, got %s"):format(i, errors.show(v)))
    end
    sizes[i] = v
  end
  opts = op.options(opts, { mode = true, value = true, dtype = true }, "tocha.Pad")
  local mode = opts.mode or "constant"
  if type(mode) ~= "string" or not MODES[mode] then
    raise(("mode: expected \"constant\", \"reflect\", \"replicate\" or \"circular\", got %s"):format(errors.show(mode)))
  end
  local value = opts.value or 0
  if type(value) ~= "number" then raise("value: expected a number, got " .. errors.show(value)) end
  if value ~= 0 and mode ~= "constant" then raise(("value: a fill value is constant mode's, not %s's"):format(mode)) end
  local dt = op.float_dtype(opts.dtype, "dtype")
  local self = setmetatable({ kind = "pad", pad = sizes, mode = mode, value = value, dtype = dt, block_size = BLOCK,
    id = ("pad__%s__%s__%s__%.17g"):format(dt, mode, table.concat(sizes, "_"):gsub("-", "m"), value) }, Pad)
  -- Pads of two neighbouring dimensions only run a team of lanes a row of the planes they make,
  -- several elements a lane: the last two (the usual image padding), or the two before an
  -- unpadded last one (a channels-last image's H and W: pixels of `inner` channels, self.inner);
  -- others, a thread an element over up to 8 dimensions.
  local function zero_from(i)
    for k = i, #sizes do if sizes[k] ~= 0 then return false end end
    return true
  end
  local last_two = zero_from(5)
  self.inner = not last_two and sizes[1] == 0 and sizes[2] == 0 and zero_from(7)
  self.rows = last_two or self.inner
  local name, params = "tocha_pad_rows", "i64 planes, i64 h, i64 w, i64 oh, i64 ow, i64 inner, i64 top, i64 left, f64 value"
  if not self.rows then
    local dims = {}
    for _, p in ipairs({ "d", "o", "b" }) do for i = 0, DIMS - 1 do dims[#dims + 1] = ("i64 %s%d"):format(p, i) end end
    name, params = "tocha_pad", "i64 total, i32 ndim, " .. table.concat(dims, ", ") .. ", f64 value"
  end
  local source, targs = op.source("pad.cu"), ("%s, %d"):format(dtype.ctype(dt), MODES[mode])
  self.kernel = kernel.new { source = source, name = name, template_args = targs,
    params = ("%s* x, %s* y, %s"):format(dt, dt, params) }
  self.grad_kernel = kernel.new { source = source, name = name .. "_backward", template_args = targs,
    params = ("%s* dy, %s* dx, %s"):format(dt, dt, params) }
  self.backward_kernel = self.grad_kernel
  return self
end

-- The pads before and after dimension k (1-based) of an ndim shape (0 for the dimensions the
-- list leaves out).
local function sides(self, k, ndim)
  local pair = ndim - k + 1 -- pairs count from the last dimension
  return self.pad[2 * pair - 1] or 0, self.pad[2 * pair] or 0
end

-- The output's shape for x's, each dimension checked against the mode's limits.
local function out_shape(self, shape, what)
  op.check_shape(shape, what)
  if #self.pad / 2 > #shape then
    raise(("%s: %d pairs of pads for a tensor of %d dimensions"):format(what, #self.pad / 2, #shape))
  end
  local out = {}
  for k, n in ipairs(shape) do
    local before, after = sides(self, k, #shape)
    local kept = n - math.max(-before, 0) - math.max(-after, 0) -- what the crops leave
    if self.mode == "reflect" and (before >= kept or after >= kept) then
      raise(("%s: reflect pads of %d and %d on a dimension of %d: each must be under the size"):format(what, before, after, n))
    end
    if self.mode == "circular" and (before > kept or after > kept) then
      raise(("%s: circular pads of %d and %d on a dimension of %d: each must be at most the size"):format(what, before, after, n))
    end
    out[k] = n + before + after
    if out[k] < 1 then
      raise(("%s: pads of %d and %d leave nothing of dimension %d (size %d)"):format(what, before, after, k, n))
    end
  end
  return out
end

function Pad:compute_concrete_output_shape(input_shapes)
  return out_shape(self, op.one_input(input_shapes), "inputs[1]")
end

-- The bytes a lane of the rows kernels takes of a row at once (kernels/pad.cu's PAD_ROW_BYTES).
local ROW_BYTES = 32

-- The grid over a tensor of this shape that a kernel writes: a thread an element, or for the
-- rows kernels a team of lanes (as kernels/pad.cu's pad_row_team: the least power of two, at
-- most 32, whose ROW_BYTES a lane cover the row) a row: of the last dimension, or with
-- self.inner of the last two.
local function grid_of(self, shape)
  local elements = op.numel(shape)
  if not self.rows then return op.element_grid(elements, BLOCK) end
  local width, team, unroll = shape[#shape], 32, ROW_BYTES / dtype.size(self.dtype)
  if self.inner then width = width * (shape[#shape - 1] or 1) end
  while team > 1 and team / 2 * unroll >= width do team = team / 2 end
  return op.element_grid(elements / width * team, BLOCK)
end

function Pad:grid(output_shape)
  op.check_shape(output_shape, "output_shape")
  return grid_of(self, output_shape)
end

-- The kernels' arguments after the two pointers: total, ndim, the input's sizes, the output's,
-- the pads before, the fill value.
local function tail(self, shape, out, total)
  if self.rows then
    -- [planes, h, w, inner]: the padded pair the last two dimensions, or the two before the last
    local n, planes, inner = #shape, 1, 1
    if self.inner then n, inner = n - 1, shape[n] end
    for k = 1, n - 2 do planes = planes * shape[k] end
    local top, left = n > 1 and (sides(self, n - 1, #shape)) or 0, (sides(self, n, #shape))
    -- the kernels index along a row and its padded one in 32 bits (with a pass's 512 past the end)
    local row, padded = shape[n] * inner, out[n] * inner
    if row + padded + 512 >= 2 ^ 31 then
      raise(("inputs[1]: rows of %d elements padded to %d: the row kernels take under 2^31 together"):format(row, padded))
    end
    return planes, shape[n - 1] or 1, shape[n], out[n - 1] or 1, out[n], inner, top, left, self.value
  end
  local args = { total, #shape }
  for _, list in ipairs({ shape, out }) do
    for k = 1, DIMS do args[#args + 1] = list[k] or 1 end
  end
  for k = 1, DIMS do args[#args + 1] = k <= #shape and (sides(self, k, #shape)) or 0 end
  args[#args + 1] = self.value
  return unpack(args)
end

function Pad:pack_args(inputs, _, output, output_shape)
  local x, shape = op.input_of(inputs)
  local out = out_shape(self, shape, "inputs[1]")
  if output_shape then op.check_output_shape(output_shape, out, "the padded shape") end
  return { x, op.address(output, "output"), tail(self, shape, out, op.numel(out)) }
end

function Pad:backward_grid(input_shapes)
  local shape = op.one_input(input_shapes)
  out_shape(self, shape, "inputs[1]")
  return grid_of(self, shape)
end

function Pad:pack_backward_args(inputs, _, _, output_shape, grad_output, _, grad_inputs)
  local _, shape = op.input_of(inputs)
  local out = out_shape(self, shape, "inputs[1]")
  if output_shape then op.check_output_shape(output_shape, out, "the padded shape") end
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  return { op.address(grad_output, "grad_output"), op.address(grad_inputs[1], "grad_inputs[1]"),
    tail(self, shape, out, op.numel(shape)) }
end

op.finish(Pad)
return M
