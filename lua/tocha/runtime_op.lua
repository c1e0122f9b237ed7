-- tocha.runtime_op: teeny-kernels' RuntimeOp methods in Lua, over an op's C tocha_runtime_op, for
-- every op tocha builds in C (the upsample forward, the elementwise ops): install(class) gives a
-- class whose objects have `runtime_op()` (the C handle) and `dtype` (its tensors' dtype name)
-- every method of the trait, with launch indices counted from 1 as Lua counts. launch_packed
-- launches a kernel with the arguments such an op packed: the path a model runtime takes.
local ffi = require "ffi"
local native = require "tocha.ffi"
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local tensor = require "tocha.tensor"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local stream = require "tocha.stream"
local plan = require "tocha.plan"
local op_base = require "tocha.op"
local C, check, raise = native.C, native.check, errors.raise

local M = {}
local Methods = {}

local function op(self) return self:runtime_op() end

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
      raise(("%s[%d]: expected an integer size, got %s"):format(what, i, errors.show(v)))
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
  if v.dense == 0 then raise(what .. ": not contiguous (a view): call :contiguous() on it first") end
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

-- An address for the C packers: tocha.op's rules, nil standing for none (0).
local function address(v, what)
  if v == nil then return 0 end
  return op_base.address(v, what)
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

-- The visitor's arguments as Lua values: addresses as uint64_t cdata, integers and floats as
-- numbers.
local function visited(list)
  local out = {}
  for i = 0, list.count - 1 do
    local a = list.args[i]
    if a.kind == 3 then out[i + 1] = ffi.new("uint64_t", a.i)
    elseif a.kind == 2 then out[i + 1] = tonumber(a.f)
    else out[i + 1] = tonumber(a.i) end
  end
  return out
end

function Methods:n_activation_inputs() return C.tocha_op_n_activation_inputs(op(self)) end

function Methods:param_shapes(input_shapes, output_shape)
  local ins, n = shapes(input_shapes or {}, "input_shapes")
  local out, count = ffi.new("tocha_shape[8]"), ffi.new("int[1]")
  check(C.tocha_op_param_shapes(op(self), ins, n, optional_shape(output_shape, "output_shape"), out, 8, count))
  local list = {}
  for i = 0, count[0] - 1 do list[i + 1] = from_shape(out[i]) end
  return list
end

function Methods:param_names()
  local names, count = ffi.new("const char *const *[1]"), ffi.new("int[1]")
  check(C.tocha_op_param_names(op(self), names, count))
  local list = {}
  for i = 0, count[0] - 1 do list[i + 1] = ffi.string(names[0][i]) end
  return list
end

-- nil: the slot is left zero-initialised.
function Methods:param_init_data(index)
  if type(index) ~= "nil" and (type(index) ~= "number" or index ~= math.floor(index) or math.abs(index) > 2 ^ 31) then
    raise("index: expected an integer, got " .. errors.show(index))
  end
  local data, size = ffi.new("const void *[1]"), ffi.new("uint64_t[1]")
  check(C.tocha_op_param_init_data(op(self), (index or 1) - 1, data, size))
  if data[0] == nil then return nil end
  return ffi.string(data[0], size[0])
end

function Methods:compute_concrete_output_shape(input_shapes)
  local ins, n = shapes(input_shapes, "input_shapes")
  local out = ffi.new("tocha_shape")
  check(C.tocha_op_compute_concrete_output_shape(op(self), ins, n, out))
  return from_shape(out)
end

function Methods:grid(output_shape)
  local g = ffi.new("uint32_t[3]")
  check(C.tocha_op_grid(op(self), to_shape(output_shape, "output_shape"), g))
  return dims3(g)
end

function Methods:block()
  local b = ffi.new("uint32_t[3]")
  C.tocha_op_block(op(self), b)
  return dims3(b)
end

-- A 1-based launch index checked against the op's count, as the C index (0-based).
local function launch_index(i, count) return op_base.launch_index(i, count) - 1 end

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
    raise("output_row_stride: expected an integer, got " .. errors.show(row_stride))
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
function Methods:pack_args(...)
  local args = pack_forward(self, nil, ...)
  return args -- not a tail call: errors name the caller's line
end

function Methods:forward_output_row_stride(output_shape)
  return tonumber(C.tocha_op_forward_output_row_stride(op(self),
    to_shape(output_shape, "output_shape")))
end

function Methods:has_backward() return C.tocha_op_has_backward(op(self)) ~= 0 end

function Methods:backward_grid(input_shapes, output_shape)
  local ins, n = shapes(input_shapes, "input_shapes")
  local g = ffi.new("uint32_t[3]")
  check(C.tocha_op_backward_grid(op(self), ins, n, optional_shape(output_shape, "output_shape"), g))
  return dims3(g)
end

function Methods:backward_block()
  local b = ffi.new("uint32_t[3]")
  check(C.tocha_op_backward_block(op(self), b))
  return dims3(b)
end

-- up:pack_backward_args(inputs, params, output, output_shape, grad_output,
--                       grad_output_row_stride, grad_inputs, grad_params)
function Methods:pack_backward_args(...)
  local args = pack_backward(self, nil, ...)
  return args -- not a tail call: errors name the caller's line
end

function Methods:backward_grad_output_row_stride(output_shape)
  return tonumber(C.tocha_op_backward_grad_output_row_stride(op(self),
    to_shape(output_shape, "output_shape")))
end

function Methods:n_launches() return C.tocha_op_n_launches(op(self)) end
function Methods:n_backward_launches() return C.tocha_op_n_backward_launches(op(self)) end

function Methods:grid_for_launch(i, input_shapes, output_shape)
  local ins, n = shapes(input_shapes, "input_shapes")
  local g = ffi.new("uint32_t[3]")
  local index = launch_index(i, C.tocha_op_n_launches(op(self)))
  check(C.tocha_op_grid_for_launch(op(self), index, ins, n, to_shape(output_shape, "output_shape"), g))
  return dims3(g)
end

function Methods:pack_args_for_launch(i, ...)
  local args = pack_forward(self, i, ...)
  return args -- not a tail call: errors name the caller's line
end

function Methods:backward_grid_for_launch(i, input_shapes, output_shape)
  local ins, n = shapes(input_shapes, "input_shapes")
  local g = ffi.new("uint32_t[3]")
  local index = launch_index(i, C.tocha_op_n_backward_launches(op(self)))
  check(C.tocha_op_backward_grid_for_launch(op(self), index, ins, n,
    optional_shape(output_shape, "output_shape"), g))
  return dims3(g)
end

function Methods:pack_backward_args_for_launch(i, ...)
  local args = pack_backward(self, i, ...)
  return args -- not a tail call: errors name the caller's line
end

-- Launches the kernel with arguments an op packed (raw addresses and numbers): at most
-- TOCHA_MAX_PARAMS of them, a list without holes, each a number or an address (uint64_t cdata).
function M.launch_packed(k, dev, grid, block, args, opts)
  local s = opts ~= nil and stream.option(opts, device.get(dev))
  if s then
    s:use(M.launch_packed, k, dev, grid, block, args)
    return
  end
  if getmetatable(k) ~= kernel.Kernel then raise("kernel: expected a tocha kernel (up.kernel), got " .. type(k)) end
  local list = plan.arg_list(args)
  local g, b = plan.dims(grid, "grid"), plan.dims(block, "block")
  check(C.tocha_kernel_launch_packed(k.handle, device.get(dev).handle, g, b, list))
end

-- ---- the C ops' Lua objects ----

-- The object of class around a C op handle out[0] from <prefix>_new (collected with
-- <prefix>_destroy): fields, plus handle, id, kernel, and backward_kernel, which is also the
-- grad_kernel a model launches with pack_backward_args.
function M.wrap(class, prefix, out, fields)
  local handle = ffi.gc(out[0], C[prefix .. "_destroy"])
  local backward = kernel.wrap(C[prefix .. "_backward_kernel"](handle), handle)
  fields.handle = handle
  fields.id = ffi.string(C[prefix .. "_id"](handle))
  fields.kernel = kernel.wrap(C[prefix .. "_kernel"](handle), handle)
  fields.backward_kernel, fields.grad_kernel = backward, backward
  return setmetatable(fields, class)
end

-- Gives class every RuntimeOp method (those it defines itself stay). Each is a closure of the
-- class's own, not a tail call, so that tocha.errors names an error by the class it came from.
function M.install(class)
  for name, fn in pairs(Methods) do
    if class[name] == nil then
      class[name] = function(...)
        local r = fn(...)
        return r
      end
    end
  end
  return class
end

errors.name(M.launch_packed, "launch_packed")
return M
