-- tocha.upsample: teeny-kernels' kernels, UpsampleNearest2dForward and UpsampleNearest2dBackward.
--
--   local up = tocha.UpsampleNearest2dForward.new(2, 2, 128)        -- f32 unless a dtype is given
--   local y  = up:forward(x)        -- x [B, C, H, W] -> y [B, C, 2H, 2W]
--   local dx = up:backward(x, dy)   -- through UpsampleNearest2dBackward(2, 2, block_iw)
--   local cl = tocha.UpsampleNearest2dForward.new(2, 2, nil, "f16", { layout = "nhwc" })
--   cl:forward(x)                   -- x [B, H, W, C] -> y [B, 2H, 2W, C] (channels last)
--
-- Fields, as teeny-kernels' are: name, id ("upsample_nearest2d_forward__f32__2__2__128"), scale_h,
-- scale_w, block_ow / block_iw, kernel_source (the .cu file), entry_point_source, source
-- (kernel_source .. "\n\n" .. entry_point_source), entry_point_name, hash (of source), and
-- args_signature, the parameter list a raw launch of .kernel is checked against; layout
-- ("nchw" or "nhwc"; teeny-kernels' is NCHW, and NHWC kernels' ids end in "__nhwc").
-- The forward kernel is also a RuntimeOp: every method of teeny-kernels' trait is callable, with
-- launch indices counted from 1 as Lua counts.
local ffi = require "ffi"
local native = require "tocha.ffi"
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local tensor = require "tocha.tensor"
local kernel = require "tocha.kernel"
local tuning = require "tocha.upsample_tuning"
local errors = require "tocha.errors"
local stream = require "tocha.stream"
local C, check, raise = native.C, native.check, errors.raise

local M = {}

-- Whether v passes to C as an int unchanged: the FFI would truncate 1.5 and wrap 2^32. The
-- limits of each constant are tocha_upsample_new's to check (one rule, in C).
local function check_int(what, v)
  if type(v) ~= "number" or v ~= v or v ~= math.floor(v) or v < -2 ^ 31 or v >= 2 ^ 31 then
    local got = type(v) == "number" and (v ~= v and "nan" or tostring(v)) or type(v)
    raise(("%s: expected an integer, got %s"):format(what, got))
  end
end

-- Wraps a tocha_upsample handle (owned elsewhere when owner is given) as a kernel table.
local constants = ffi.new("int32_t[6]") -- direction, dtype, scale_h, scale_w, block, layout
local function describe(handle, class, block_field, owner)
  local k = kernel.wrap(C.tocha_upsample_kernel(handle), owner or handle)
  C.tocha_upsample_constants(handle, constants)
  local self = setmetatable({
    handle = handle,
    owner = owner,
    name = ffi.string(C.tocha_upsample_name(handle)),
    id = ffi.string(C.tocha_upsample_id(handle)),
    dtype = dtype.name(constants[1]),
    scale_h = constants[2],
    scale_w = constants[3],
    layout = constants[5] == 1 and "nhwc" or "nchw",
    kernel = k,
    kernel_source = ffi.string(C.tocha_upsample_kernel_source(handle)),
    entry_point_source = k.entry_point_source,
    source = k.source,
    entry_point_name = k.entry_point_name,
    hash = k:hash(),
    args_signature = k.params,
  }, class)
  self[block_field] = constants[4]
  return self
end

local LAYOUTS = { nchw = 0, nhwc = 1 }

-- The options table of new(): { layout = "nchw" | "nhwc", block_iw = n (forward only) }.
local function options(opts, keys)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    raise(("options: expected a table, got %s"):format(type(opts)))
  end
  for k in pairs(opts) do
    if not keys[k] then raise(("options: unknown option '%s'"):format(tostring(k))) end
  end
  if opts.layout ~= nil and not LAYOUTS[opts.layout] then
    raise(("layout: expected \"nchw\" or \"nhwc\", got %s"):format(
      type(opts.layout) == "string" and ("\"" .. opts.layout .. "\"") or type(opts.layout)))
  end
  return opts
end

local function construct(direction, scale_h, scale_w, block, dtype_name, backward_block, layout)
  check_int("scale_h", scale_h)
  check_int("scale_w", scale_w)
  check_int(direction == 0 and "block_ow" or "block_iw", block)
  if backward_block ~= nil then check_int("block_iw", backward_block) end
  local id = dtype.id(dtype_name or "f32")
  local out = ffi.new("tocha_upsample*[1]")
  check(C.tocha_upsample_new(direction, id, scale_h, scale_w, block, backward_block or native.upsample_same_block,
    LAYOUTS[layout or "nchw"], out))
  return ffi.gc(out[0], C.tocha_upsample_destroy)
end

-- ---- shapes ----

-- The forward's output shape for x (4-D), checked by the op (every size within i32), as four
-- numbers.
local scratch_shape, scratch_out = ffi.new("tocha_shape"), ffi.new("tocha_shape")
local function output_dims_of(self, x)
  local d, xd = scratch_shape.dims, x.dims
  scratch_shape.ndim = 4
  d[0], d[1], d[2], d[3] = xd[0], xd[1], xd[2], xd[3]
  local st = C.tocha_op_compute_concrete_output_shape(C.tocha_upsample_op(self.handle),
    scratch_shape, 1, scratch_out)
  if st ~= 0 then raise((native.message():gsub("^inputs%[1%]", "x"))) end
  local o = scratch_out.dims
  return tonumber(o[0]), tonumber(o[1]), tonumber(o[2]), tonumber(o[3])
end

-- A 4-D tensor of like's dtype on like's device.
local function alloc_like(like, d0, d1, d2, d3)
  return tensor.alloc_4d(d0, d1, d2, d3, like.elem_type, device.wrap(like.dev))
end

local DIMS = { nchw = "[B, C, H, W]", nhwc = "[B, H, W, C]" }
local H_AXIS = { nchw = 2, nhwc = 1 } -- 0-based axis of H; W follows it

local function need_tensor(v, layout, what)
  if not tensor.is_tensor(v) then
    raise(("%s: expected a tensor, got %s"):format(what, type(v)))
  end
  if v.freed ~= 0 then raise(what .. ": tensor was freed") end
  if v.ndim ~= 4 then
    raise(("%s: expected a 4-D tensor %s, got %d-D"):format(what, DIMS[layout], v.ndim))
  end
end

-- A tensor argument C will take (it checks the rest), or an error naming it.
local function tensor_arg(v, what)
  if not tensor.is_tensor(v) then raise(("%s: expected a tensor, got %s"):format(what, type(v))) end
  return v
end

-- ---- UpsampleNearest2dBackward ----

local Backward = {}
Backward.__index = Backward
Backward.__tostring = function(k) return "tocha.UpsampleNearest2dBackward " .. k.id end
M.UpsampleNearest2dBackward = Backward

-- UpsampleNearest2dBackward.new(scale_h, scale_w [, block_iw [, dtype [, options]]]): without
-- block_iw, the fastest measured for the case (tocha.upsample_tuning); options { layout }.
function Backward.new(scale_h, scale_w, block_iw, dtype_name, opts)
  opts = options(opts, { layout = true })
  if block_iw == nil then block_iw = tuning.block(scale_h, scale_w, dtype_name, "backward", opts.layout) end
  local h = construct(1, scale_h, scale_w, block_iw, dtype_name, nil, opts.layout)
  return describe(h, Backward, "block_iw")
end

-- k:run(dy [, dx [, opts]]): dx = the gradient for dy, its H and W those of dy over the
-- scales. opts.stream: the stream to queue it on (else the current one).
-- Runs fn(...) on the stream opts names ({stream = s}), or on the current one; like is the
-- tensor whose device the work is on.
local function on_stream(opts, like, fn, ...)
  -- (where like is no tensor, fn raises that first)
  local s = opts ~= nil and tensor.is_tensor(like) and stream.option(opts, device.wrap(like.dev))
  if s then
    local r = s:use(fn, ...)
    return r
  end
  local r = fn(...)
  return r
end

local run_backward
function Backward:run(dy, dx, opts)
  local r = on_stream(opts, dy, run_backward, self, dy, dx)
  return r
end

run_backward = function(self, dy, dx)
  need_tensor(dy, self.layout, "dy")
  if dx == nil then
    local h = H_AXIS[self.layout]
    local oh, ow = tonumber(dy.dims[h]), tonumber(dy.dims[h + 1])
    if oh % self.scale_h ~= 0 or ow % self.scale_w ~= 0 then
      raise(("dy: height %d and width %d must be multiples of the scales %d and %d")
        :format(oh, ow, self.scale_h, self.scale_w))
    end
    local shape = dy:shape()
    shape[h + 1], shape[h + 2] = oh / self.scale_h, ow / self.scale_w
    dx = alloc_like(dy, shape[1], shape[2], shape[3], shape[4])
  end
  tensor_arg(dx, "dx")
  check(C.tocha_upsample_backward(self.handle, dy, dx))
  return dx
end
Backward.backward = Backward.run

-- ---- UpsampleNearest2dForward ----

local Forward = {}
Forward.__index = Forward
Forward.__tostring = function(k) return "tocha.UpsampleNearest2dForward " .. k.id end
M.UpsampleNearest2dForward = Forward

-- UpsampleNearest2dForward.new(scale_h, scale_w [, block_ow [, dtype [, block_iw] [, options]]])
-- block_iw is the backward kernel's block width; it defaults to block_ow when block_ow is
-- given. Without them, each is the fastest measured for the case (tocha.upsample_tuning).
-- options: { layout = "nchw" (the default) or "nhwc", block_iw = n }, in block_iw's place or
-- after it.
function Forward.new(scale_h, scale_w, block_ow, dtype_name, block_iw, opts)
  if type(block_iw) == "table" and opts == nil then block_iw, opts = nil, block_iw end
  opts = options(opts, { layout = true, block_iw = true })
  if block_iw == nil then block_iw = opts.block_iw end
  if block_ow == nil then
    block_ow = tuning.block(scale_h, scale_w, dtype_name, "forward", opts.layout)
    block_iw = block_iw or tuning.block(scale_h, scale_w, dtype_name, "backward", opts.layout)
  end
  local h = construct(0, scale_h, scale_w, block_ow, dtype_name, block_iw, opts.layout)
  local self = describe(h, Forward, "block_ow")
  self.backward_kernel = describe(C.tocha_upsample_backward_kernel(h), Backward, "block_iw", h)
  return self
end

-- up:forward(x [, y [, opts]]): y = upsample(x); y is allocated on x's device when not given.
-- opts.stream: the stream to queue it on (else the current one).
local run_forward, run_gradient
function Forward:forward(x, y, opts)
  local r = on_stream(opts, x, run_forward, self, x, y)
  return r
end

run_forward = function(self, x, y)
  if y == nil then
    need_tensor(x, self.layout, "x")
    y = alloc_like(x, output_dims_of(self, x))
  end
  tensor_arg(x, "x")
  tensor_arg(y, "y")
  check(C.tocha_upsample_forward(self.handle, x, y))
  return y
end

-- up:backward(x, dy [, dx [, opts]]): dx, the gradient for dy, shaped like x; opts as forward's.
function Forward:backward(x, dy, dx, opts)
  local r = on_stream(opts, dy, run_gradient, self, x, dy, dx)
  return r
end

run_gradient = function(self, x, dy, dx)
  if dx == nil then
    need_tensor(x, self.layout, "x")
    local xd = x.dims
    dx = alloc_like(x, tonumber(xd[0]), tonumber(xd[1]), tonumber(xd[2]), tonumber(xd[3]))
  elseif tensor.is_tensor(x) and tensor.is_tensor(dx) then
    tensor.same_shape(x, dx, "dx")
  end
  tensor_arg(dy, "dy")
  tensor_arg(dx, "dx")
  check(C.tocha_upsample_backward(self.handle, dy, dx))
  return dx
end

-- The block width new() picks when given none.
function Forward.default_block(scale_h, scale_w, dtype_name, op, layout)
  return tuning.block(scale_h, scale_w, dtype_name, op or "forward", layout)
end

-- ---- the RuntimeOp methods ----

local function op(self) return C.tocha_upsample_op(self.handle) end

-- A shape table as a tocha_shape: up to 8 sizes, each an integer (the FFI would truncate 2.5;
-- the sizes' range is C's to check), and no other keys (a table with holes would lose sizes).
local function to_shape(t, what)
  if tensor.is_tensor(t) then t = t:shape() end
  if type(t) ~= "table" then raise(what .. ": expected a shape table") end
  local n, keys = #t, 0
  for _ in pairs(t) do keys = keys + 1 end
  if keys ~= n then raise(what .. ": expected a list of sizes, got a table with other keys or holes") end
  if n > 8 then raise(("%s: expected at most 8 sizes, got %d"):format(what, n)) end
  local s = ffi.new("tocha_shape")
  s.ndim = n
  for i = 1, n do
    local v = t[i]
    if type(v) ~= "number" or v ~= math.floor(v) or v < -2 ^ 53 or v > 2 ^ 53 then
      raise(("%s[%d]: expected an integer size, got %s"):format(what, i, tostring(v)))
    end
    s.dims[i - 1] = v
  end
  return s
end

-- An optional shape: nil (or a NULL pointer) stays NULL, anything else must be a shape.
local function optional_shape(t, what)
  if type(t) == "nil" then return nil end
  return to_shape(t, what)
end

-- Raises unless a tensor given for a buffer is live, of the kernel's dtype, and holds the
-- shape's elements (a raw address cannot be checked: the caller vouches for it).
local function check_fits(self, v, shape, what)
  if not tensor.is_tensor(v) then return end
  if v.freed ~= 0 then raise(what .. ": tensor was freed") end
  if dtype.name(v.elem_type) ~= self.dtype then
    raise(("%s: expected dtype %s (the kernel's), got %s"):format(what, self.dtype, dtype.name(v.elem_type)))
  end
  local n = 1
  for i = 0, shape.ndim - 1 do n = n * tonumber(shape.dims[i]) end
  if n > tonumber(v.count) then
    raise(("%s: the shape's %d elements do not fit in the tensor's %d"):format(what, n, tonumber(v.count)))
  end
end

local function shapes(list, what)
  if type(list) ~= "table" then raise(what .. ": expected a list of shapes") end
  local arr = ffi.new("tocha_shape[?]", math.max(#list, 1))
  for i = 1, #list do arr[i - 1] = to_shape(list[i], what .. "[" .. i .. "]") end
  return arr, #list
end

local function from_shape(s)
  local out = {}
  for i = 0, s.ndim - 1 do out[i + 1] = tonumber(s.dims[i]) end
  return out
end

local function dims3(a) return { tonumber(a[0]), tonumber(a[1]), tonumber(a[2]) } end

local function address(v, what)
  if tensor.is_tensor(v) then return v.data end
  if v == nil then return 0 end
  if type(v) ~= "number" and type(v) ~= "cdata" then
    raise(("%s: expected a tensor or an address, got %s"):format(what or "address", type(v)))
  end
  return ffi.cast("uint64_t", v)
end

-- Inputs are {tensor, ...} or {{address, shape}, ...}.
local function buffers(self, list)
  if type(list) ~= "table" then raise("inputs: expected a list of tensors or {address, shape}") end
  local arr = ffi.new("tocha_buffer[?]", math.max(#list, 1))
  for i = 1, #list do
    local item, what = list[i], ("inputs[%d]"):format(i)
    if tensor.is_tensor(item) then
      check_fits(self, item, to_shape(item, what), what)
      arr[i - 1].data = item.data
      arr[i - 1].shape = to_shape(item, what)
    elseif type(item) ~= "table" then
      raise(("%s: expected a tensor or {address, shape}, got %s"):format(what, type(item)))
    else
      arr[i - 1].shape = to_shape(item[2], what)
      check_fits(self, item[1], arr[i - 1].shape, what)
      arr[i - 1].data = address(item[1], what)
    end
  end
  return arr, #list
end

local function addresses(list, what)
  list = list or {}
  if type(list) ~= "table" then raise(("%s: expected a list, got %s"):format(what, type(list))) end
  local arr = ffi.new("uint64_t[?]", math.max(#list, 1))
  for i = 1, #list do arr[i - 1] = address(list[i], ("%s[%d]"):format(what, i)) end
  return arr, #list
end

-- The visitor's arguments as Lua values: addresses as uint64_t cdata, integers as numbers.
local function visited(list)
  local out = {}
  for i = 0, list.count - 1 do
    local a = list.args[i]
    out[i + 1] = a.kind == 3 and ffi.new("uint64_t", a.i) or tonumber(a.i)
  end
  return out
end

function Forward:n_activation_inputs() return C.tocha_op_n_activation_inputs(op(self)) end

function Forward:param_shapes(input_shapes, output_shape)
  local ins, n = shapes(input_shapes or {}, "input_shapes")
  local out, count = ffi.new("tocha_shape[8]"), ffi.new("int[1]")
  check(C.tocha_op_param_shapes(op(self), ins, n, optional_shape(output_shape, "output_shape"), out, 8, count))
  local list = {}
  for i = 0, count[0] - 1 do list[i + 1] = from_shape(out[i]) end
  return list
end

function Forward:param_names()
  local names, count = ffi.new("const char *const *[1]"), ffi.new("int[1]")
  check(C.tocha_op_param_names(op(self), names, count))
  local list = {}
  for i = 0, count[0] - 1 do list[i + 1] = ffi.string(names[0][i]) end
  return list
end

-- nil: the slot is left zero-initialised.
function Forward:param_init_data(index)
  if type(index) ~= "nil" and (type(index) ~= "number" or index ~= math.floor(index) or math.abs(index) > 2 ^ 31) then
    raise("index: expected an integer, got " .. tostring(index))
  end
  local data, size = ffi.new("const void *[1]"), ffi.new("uint64_t[1]")
  check(C.tocha_op_param_init_data(op(self), (index or 1) - 1, data, size))
  if data[0] == nil then return nil end
  return ffi.string(data[0], size[0])
end

function Forward:compute_concrete_output_shape(input_shapes)
  local ins, n = shapes(input_shapes, "input_shapes")
  local out = ffi.new("tocha_shape")
  check(C.tocha_op_compute_concrete_output_shape(op(self), ins, n, out))
  return from_shape(out)
end

function Forward:grid(output_shape)
  local g = ffi.new("uint32_t[3]")
  check(C.tocha_op_grid(op(self), to_shape(output_shape, "output_shape"), g))
  return dims3(g)
end

function Forward:block()
  local b = ffi.new("uint32_t[3]")
  C.tocha_op_block(op(self), b)
  return dims3(b)
end

-- A 1-based launch index checked against the op's count, as the C index (0-based).
local function launch_index(i, count)
  if type(i) ~= "number" or i ~= math.floor(i) or i < 1 or i > count then
    raise(("launch: expected an integer from 1 to %d, got %s"):format(count, tostring(i)))
  end
  return i - 1
end

-- The forward pack methods: `launch` is nil for pack_args, else 1-based for _for_launch.
-- What both directions start from: the inputs as buffers, the params as addresses, the output
-- shape (the shape of `shaped` when none is given) and an empty argument list. Errors are
-- raised at the user's line, two frames above this function.
local function pack_start(self, inputs, params, output_shape, shaped)
  local ins, n = buffers(self, inputs)
  local ps, np = addresses(params, "params")
  output_shape = output_shape or (tensor.is_tensor(shaped) and shaped:shape())
  return ins, n, ps, np, to_shape(output_shape, "output_shape"), ffi.new("tocha_arg_list")
end

local function pack_forward(self, launch, inputs, params, output, output_shape, row_stride)
  if type(row_stride) ~= "nil" and (type(row_stride) ~= "number" or row_stride ~= math.floor(row_stride)
      or math.abs(row_stride) >= 2 ^ 31) then
    raise("output_row_stride: expected an integer, got " .. tostring(row_stride))
  end
  local ins, n, ps, np, shape, list = pack_start(self, inputs, params, output_shape, output)
  check_fits(self, output, shape, "output")
  local st
  if launch then
    local index = launch_index(launch, C.tocha_op_n_launches(op(self)))
    st = C.tocha_op_pack_args_for_launch(op(self), index, ins, n, ps, np, address(output), shape, row_stride or 0, list)
  else
    st = C.tocha_op_pack_args(op(self), ins, n, ps, np, address(output), shape, row_stride or 0, list)
  end
  check(st)
  return visited(list)
end

-- The backward pack methods, likewise.
local function pack_backward(self, launch, inputs, params, output, output_shape, grad_output,
                             grad_stride, grad_inputs, grad_params)
  local ins, n, ps, np, shape, list = pack_start(self, inputs, params, output_shape, grad_output)
  check_fits(self, grad_output, shape, "grad_output")
  if type(grad_inputs) == "table" and n >= 1 then check_fits(self, grad_inputs[1], ins[0].shape, "grad_inputs[1]") end
  local gi, ngi = addresses(grad_inputs, "grad_inputs")
  local gp, ngp = addresses(grad_params, "grad_params")
  local st
  if launch then
    local index = launch_index(launch, C.tocha_op_n_backward_launches(op(self)))
    st = C.tocha_op_pack_backward_args_for_launch(op(self), index, ins, n, ps, np, address(output), shape,
      address(grad_output), grad_stride or 0, gi, ngi, gp, ngp, list)
  else
    st = C.tocha_op_pack_backward_args(op(self), ins, n, ps, np, address(output), shape,
      address(grad_output), grad_stride or 0, gi, ngi, gp, ngp, list)
  end
  check(st)
  return visited(list)
end

-- up:pack_args(inputs, params, output [, output_shape [, output_row_stride]]): the launch's Args.
function Forward:pack_args(...)
  local args = pack_forward(self, nil, ...)
  return args -- not a tail call: errors name the caller's line
end

function Forward:forward_output_row_stride(output_shape)
  return tonumber(C.tocha_op_forward_output_row_stride(op(self),
    to_shape(output_shape, "output_shape")))
end

function Forward:has_backward() return C.tocha_op_has_backward(op(self)) ~= 0 end

function Forward:backward_grid(input_shapes, output_shape)
  local ins, n = shapes(input_shapes, "input_shapes")
  local g = ffi.new("uint32_t[3]")
  check(C.tocha_op_backward_grid(op(self), ins, n, optional_shape(output_shape, "output_shape"), g))
  return dims3(g)
end

function Forward:backward_block()
  local b = ffi.new("uint32_t[3]")
  check(C.tocha_op_backward_block(op(self), b))
  return dims3(b)
end

-- up:pack_backward_args(inputs, params, output, output_shape, grad_output,
--                       grad_output_row_stride, grad_inputs, grad_params)
function Forward:pack_backward_args(...)
  local args = pack_backward(self, nil, ...)
  return args -- not a tail call: errors name the caller's line
end

function Forward:backward_grad_output_row_stride(output_shape)
  return tonumber(C.tocha_op_backward_grad_output_row_stride(op(self),
    to_shape(output_shape, "output_shape")))
end

function Forward:n_launches() return C.tocha_op_n_launches(op(self)) end
function Forward:n_backward_launches() return C.tocha_op_n_backward_launches(op(self)) end

function Forward:grid_for_launch(i, input_shapes, output_shape)
  local ins, n = shapes(input_shapes, "input_shapes")
  local g = ffi.new("uint32_t[3]")
  local index = launch_index(i, C.tocha_op_n_launches(op(self)))
  check(C.tocha_op_grid_for_launch(op(self), index, ins, n, to_shape(output_shape, "output_shape"), g))
  return dims3(g)
end

function Forward:pack_args_for_launch(i, ...)
  local args = pack_forward(self, i, ...)
  return args -- not a tail call: errors name the caller's line
end

function Forward:backward_grid_for_launch(i, input_shapes, output_shape)
  local ins, n = shapes(input_shapes, "input_shapes")
  local g = ffi.new("uint32_t[3]")
  local index = launch_index(i, C.tocha_op_n_backward_launches(op(self)))
  check(C.tocha_op_backward_grid_for_launch(op(self), index, ins, n,
    optional_shape(output_shape, "output_shape"), g))
  return dims3(g)
end

function Forward:pack_backward_args_for_launch(i, ...)
  local args = pack_backward(self, i, ...)
  return args -- not a tail call: errors name the caller's line
end

-- Launches the kernel with arguments an op packed (raw addresses and integers): at most
-- TOCHA_MAX_PARAMS of them, a list without holes, each a number or an address (uint64_t cdata).
local MAX_ARGS = (ffi.sizeof("tocha_arg_list") - ffi.offsetof("tocha_arg_list", "args")) / ffi.sizeof("tocha_arg")

-- A grid or block: a number (x) or {x [, y [, z]]} of positive integers, the rest 1 (the FFI
-- would copy one number to all three axes and truncate fractions).
local function launch_dims(v, what)
  if type(v) == "number" then v = { v } end
  if type(v) ~= "table" or #v < 1 or #v > 3 then raise(what .. ": expected a number or {x [, y [, z]]}") end
  local out = ffi.new("uint32_t[3]", 1, 1, 1)
  for i = 1, #v do
    local d = v[i]
    if type(d) ~= "number" or d ~= math.floor(d) or d < 1 or d > 2 ^ 32 - 1 then
      raise(("%s[%d]: expected a positive integer, got %s"):format(what, i, tostring(d)))
    end
    out[i - 1] = d
  end
  return out
end
function M.launch_packed(k, dev, grid, block, args, opts)
  local s = opts ~= nil and stream.option(opts, device.get(dev))
  if s then
    s:use(M.launch_packed, k, dev, grid, block, args)
    return
  end
  if getmetatable(k) ~= kernel.Kernel then raise("kernel: expected a tocha kernel (up.kernel), got " .. type(k)) end
  if type(args) ~= "table" then raise("args: expected a list of packed arguments, got " .. type(args)) end
  local n = 0
  for key in pairs(args) do
    if type(key) ~= "number" or key < 1 or key ~= math.floor(key) then
      raise("args: expected a list, got the key " .. tostring(key))
    end
    n = math.max(n, key)
  end
  if n > MAX_ARGS then raise(("args: expected at most %d arguments, got %d"):format(MAX_ARGS, n)) end
  local list = ffi.new("tocha_arg_list")
  list.count = n
  for i = 1, n do
    local v, a = args[i], list.args[i - 1]
    if type(v) == "number" then a.kind, a.f = 2, v
    elseif ffi.istype("uint64_t", v) then a.kind, a.i = 3, v
    else raise(("args[%d]: expected a number or an address (uint64_t), got %s"):format(i, type(v))) end
  end
  local g, b = launch_dims(grid, "grid"), launch_dims(block, "block")
  check(C.tocha_kernel_launch_packed(k.handle, device.get(dev).handle, g, b, list))
end

-- up(node, ...): the node of this op in a tocha.Model graph.
Forward.__call = function(self, ...) return require("tocha.model").node(self, ...) end
Forward.kind = "upsample"

local CONSTRUCTORS = { new = true, default_block = true }
errors.methods(Backward, "UpsampleNearest2dBackward:", function(k) return getmetatable(k) == Backward end, CONSTRUCTORS)
errors.name(Backward.new, "UpsampleNearest2dBackward.new")
errors.methods(Forward, "UpsampleNearest2dForward:", function(k) return getmetatable(k) == Forward end, CONSTRUCTORS)
errors.name(Forward.new, "UpsampleNearest2dForward.new")
errors.name(Forward.default_block, "UpsampleNearest2dForward.default_block")
errors.name(M.launch_packed, "launch_packed")
return M
