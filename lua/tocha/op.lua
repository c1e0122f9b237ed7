-- tocha.op: what every RuntimeOp written in Lua shares. An op is a class made by op.class(name):
-- it defines what differs (compute_concrete_output_shape, grid, pack_args, and for a backward
-- backward_grid and pack_backward_args, with the kernels in op.kernel and op.grad_kernel) and
-- op.finish(class) gives it the interface's defaults for the rest:
--
--   no activation inputs but one, no parameters, the natural row stride (output_shape[-1]),
--   one launch each way (the *_for_launch methods fall back to the plain ones, the launch index
--   checked), a backward exactly when the op has a grad_kernel, block() {op.block_size, 1, 1}
--   and backward_block() the same.
--
-- Beside the defaults, the checks every op's methods and direct calls make (sizes, addresses,
-- tensors, dtypes, launch indices), each in one place.
local ffi = require "ffi"
local native = require "tocha.ffi"
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local tensor = require "tocha.tensor"
local errors = require "tocha.errors"
local stream = require "tocha.stream"
local kernel = require "tocha.kernel"
local plan = require "tocha.plan"
local shape_facts = require "tocha.shape"
local file_io = require "tocha.file"
local C, check, raise = native.C, native.check, errors.raise

local M = {}

-- ---- sizes and shapes ----

-- v when it is an integer C takes as an int (the FFI would truncate 1.5 and wrap 2^32); else an
-- error naming what.
function M.integer(v, what)
  if type(v) ~= "number" or v ~= math.floor(v) or math.abs(v) >= 2 ^ 31 then
    raise(("%s: expected an integer, got %s"):format(what, errors.show(v)))
  end
  return v
end

-- v when it is a positive integer C takes as an int (a layer's size); else raises naming what.
function M.positive(v, what)
  v = M.integer(v, what)
  if v < 1 then raise(("%s: expected a positive size, got %d"):format(what, v)) end
  return v
end

-- Shapes (tocha.shape): numel, shape_text, check_shape, same_sizes.
M.numel, M.shape_text, M.check_shape, M.same_sizes = shape_facts.numel, shape_facts.text, shape_facts.check, shape_facts.same

-- input_shapes checked to hold n shapes (their sizes are each op's to check); returns them.
function M.input_shapes(input_shapes, n)
  if type(input_shapes) ~= "table" or #input_shapes ~= n then
    raise(("inputs: expected %d input shape%s, got %s"):format(n, n == 1 and "" or "s",
      type(input_shapes) == "table" and #input_shapes or type(input_shapes)))
  end
  return input_shapes
end

-- The one shape of a one-input op's input_shapes.
function M.one_input(input_shapes) return M.input_shapes(input_shapes, 1)[1] end

-- A 1-based launch index i checked against count; returns i.
function M.launch_index(i, count)
  if type(i) ~= "number" or i ~= math.floor(i) or i < 1 or i > count then
    raise(("launch: expected an integer from 1 to %d, got %s"):format(count, errors.show(i)))
  end
  return i
end

-- A list argument (nil: empty), or an error naming what.
function M.list(v, what)
  if v == nil then return {} end
  if type(v) ~= "table" then raise(("%s: expected a list, got %s"):format(what, type(v))) end
  return v
end

-- A shape argument of the RuntimeOp methods (a list of sizes, or a tensor for its shape) as a
-- list of integer sizes: at most 8, no holes or other keys (a table with holes would lose
-- sizes). The sizes' range is each op's to check.
function M.sizes(t, what)
  if tensor.is_tensor(t) then return t:shape() end
  if type(t) ~= "table" then raise(what .. ": expected a shape table") end
  local n, keys = #t, 0
  for _ in pairs(t) do keys = keys + 1 end
  if keys ~= n then raise(what .. ": expected a list of sizes, got a table with other keys or holes") end
  if n > 8 then raise(("%s: expected at most 8 sizes, got %d"):format(what, n)) end
  for i = 1, n do
    local v = t[i]
    if type(v) ~= "number" or v ~= math.floor(v) or v < -2 ^ 53 or v > 2 ^ 53 then
      raise(("%s[%d]: expected an integer size, got %s"):format(what, i, errors.show(v)))
    end
  end
  return t
end

-- ---- addresses ----

-- v, when it is a live dense tensor; else an error naming what.
function M.live_tensor(v, what)
  if not tensor.is_tensor(v) then raise(("%s: expected a tensor, got %s"):format(what, type(v))) end
  if v.freed ~= 0 then raise(what .. ": tensor was freed") end
  if v.dense == 0 then raise(what .. ": not contiguous (a view): call :contiguous() on it first") end
  -- Ops plan grids from positive sizes (as models do from their shapes): an empty tensor is
  -- refused here, in one place, rather than met as a grid of 0 in each op.
  if v.count == 0 then
    raise(("%s: an empty tensor (shape %s): ops and models take tensors without a size 0"):format(what, M.shape_text(v:shape())))
  end
  return v
end

-- A launch address as uint64_t: a live dense tensor's, a non-negative integer, or an address
-- (uint64_t or a pointer).
function M.address(v, what)
  if tensor.is_tensor(v) then
    M.live_tensor(v, what or "address")
    return v.data
  end
  if type(v) == "number" and v >= 0 and v < 2 ^ 53 and v == math.floor(v) then return ffi.cast("uint64_t", v) end
  if type(v) == "cdata" and (ffi.istype("uint64_t", v) or tostring(ffi.typeof(v)):find("%*")) then
    return ffi.cast("uint64_t", v)
  end
  raise(("%s: expected a tensor or an address, got %s"):format(what or "address", type(v)))
end

-- Raises unless v, when it is a tensor given for a buffer of `shape`, is live, dense, of the
-- op's dtype and holds the shape's elements (a raw address cannot be checked: the caller
-- vouches for it).
function M.fits(self, v, shape, what)
  if not tensor.is_tensor(v) then return end
  M.live_tensor(v, what)
  if dtype.name(v.elem_type) ~= self.dtype then
    raise(("%s: expected dtype %s (the kernel's), got %s"):format(what, self.dtype, dtype.name(v.elem_type)))
  end
  local n = M.numel(shape)
  if n > tonumber(v.count) then
    raise(("%s: the shape's %d elements do not fit in the tensor's %d"):format(what, n, tonumber(v.count)))
  end
end

-- The n inputs of an op's pack methods, each a tensor or {address, shape}: their addresses
-- and shapes, in order.
function M.inputs_of(inputs, n)
  if type(inputs) ~= "table" or #inputs ~= n then
    raise(("inputs: expected %d input%s (a tensor or {address, shape} each), got %s"):format(n, n == 1 and "" or "s",
      type(inputs) == "table" and #inputs or type(inputs)))
  end
  local addresses, shapes = {}, {}
  for i = 1, n do
    local item, what = inputs[i], ("inputs[%d]"):format(i)
    if tensor.is_tensor(item) then
      addresses[i], shapes[i] = M.address(item, what), item:shape()
    elseif type(item) == "table" and type(item[2]) == "table" then
      addresses[i], shapes[i] = M.address(item[1], what .. "[1]"), item[2]
    else
      raise(("%s: expected a tensor or {address, shape}, got %s"):format(what, type(item)))
    end
  end
  return addresses, shapes
end

-- inputs[1] of a one-input op, given as a tensor or {address, shape}: its address and shape.
function M.input_of(inputs)
  local addresses, shapes = M.inputs_of(inputs, 1)
  return addresses[1], shapes[1]
end

-- ---- dtypes and kernels ----

-- The options table of a constructor: {} for nil; a key not in `known` refused by name (a
-- misspelt option would otherwise change nothing), and each known as "boolean" checked to be
-- one. owner names the constructor in messages ("tocha.LayerNorm").
function M.options(opts, known, owner)
  if opts == nil then return {} end
  if type(opts) ~= "table" then raise("options: expected a table of options, got " .. type(opts)) end
  for key, v in pairs(opts) do
    local kind = known[key]
    if not kind then raise(("%s: unknown option of %s"):format(errors.show(key), owner)) end
    if kind == "boolean" and type(v) ~= "boolean" then raise(("%s: expected a boolean, got %s"):format(key, type(v))) end
  end
  return opts
end

-- op:train([flag]) for an op with a training mode (batch norm, dropout): sets self.training
-- (default true); returns self.
function M.set_training(self, flag)
  if flag == nil then flag = true end
  if type(flag) ~= "boolean" then raise("flag: expected a boolean, got " .. type(flag)) end
  self.training = flag
  return self
end

-- A float dtype's name (default f32), checked.
function M.float_dtype(name, what)
  name = name or "f32"
  dtype.id(name)
  if not dtype.is_float(name) then
    raise(("%s: expected a float dtype (f32, f64, f16, bf16), got %s"):format(what, name))
  end
  return name
end

-- A block width for a flat kernel (one thread a 16-byte vector or element): a multiple of 32
-- from 32 to 1024.
function M.flat_block(v)
  if type(v) ~= "number" or v ~= math.floor(v) or v < 32 or v > 1024 or v % 32 ~= 0 then
    raise("block: expected a multiple of 32 from 32 to 1024, got " .. errors.show(v))
  end
  return v
end

-- The grid of a flat kernel over `elements` of dtype dt: a thread a 16-byte vector, `block`
-- threads a CTA, at least 1 CTA and at most 2^31 - 1 (the kernels stride beyond).
function M.vector_grid(elements, dt, block)
  local per_vector = math.max(1, math.floor(16 / dtype.size(dt)))
  local ctas = math.ceil(math.ceil(elements / per_vector) / block)
  return { math.max(1, math.min(ctas, 2 ^ 31 - 1)), 1, 1 }
end

-- The grid of a kernel a thread an element over `elements`, `block` threads a CTA: at least 1
-- CTA and at most 2^31 - 1 (the kernel strides beyond).
function M.element_grid(elements, block)
  return { math.max(1, math.min(math.ceil(elements / block), 2 ^ 31 - 1)), 1, 1 }
end

-- The grid method of a flat op (a thread a 16-byte vector of the output, op.block_size threads
-- a CTA): class.grid = op.flat_grid.
function M.flat_grid(self, output_shape)
  M.check_shape(output_shape, "output_shape")
  return M.vector_grid(M.numel(output_shape), self.dtype, self.block_size)
end

-- The folders op.source searches for kernel files that libtocha does not carry (an op of one's
-- own, kept beside one's scripts): TOCHA_KERNEL_PATH's (colon-separated), then any a script
-- appends.
M.kernel_path = {}
for dir in (os.getenv("TOCHA_KERNEL_PATH") or ""):gmatch("[^:]+") do M.kernel_path[#M.kernel_path + 1] = dir end

-- A kernel file's text: libtocha's own (kernels/<file>, embedded when it was built), else the
-- first regular file of that name in a folder of op.kernel_path.
function M.source(file)
  if type(file) ~= "string" or file == "" or file:find("\0", 1, true) then
    raise("file: expected a kernel file's name, got " .. errors.show(file))
  end
  local text = C.tocha_kernel_library_source(file)
  if text ~= nil then return ffi.string(text) end
  for _, dir in ipairs(M.kernel_path) do
    local path = dir .. "/" .. file
    if file_io.kind(path) == "regular" then
      local f = file_io.open_read(path)
      local s = f:read("*a")
      f:close()
      return s
    end
  end
  raise(("%s: not a kernel file of this libtocha nor of op.kernel_path {%s}"):format(file,
    table.concat(M.kernel_path, ", ")))
end
errors.name(M.source, "op.source")

-- ---- direct calls ----

-- Raises unless tensor t has dtype want, which the message calls the op's (or the op's
-- `whose`: "index_dtype", "from").
function M.check_dtype(t, what, want, whose)
  if t:dtype() ~= want then
    raise(("%s: expected dtype %s (the op's%s), got %s"):format(what, want, whose and " " .. whose or "", t:dtype()))
  end
end

-- Raises unless tensor t is on the device of like, a tensor the message calls like_name
-- (default x).
function M.same_device(t, what, like, like_name)
  if t.dev ~= like.dev then
    raise(("%s: the tensor is on %s, %s on %s"):format(what, device.wrap(t.dev).name, like_name or "x",
      device.wrap(like.dev).name))
  end
end

-- Raises unless t is a live dense tensor of the op's dtype (and on the device of like, a tensor
-- the message calls like_name, default x, when given).
function M.check_tensor(self, t, what, like, like_name)
  M.live_tensor(t, what)
  M.check_dtype(t, what, self.dtype)
  if like then M.same_device(t, what, like, like_name) end
end

-- Raises unless t has the given shape, which the message calls `like`.
function M.same_shape(t, shape, what, like)
  local got = t:shape()
  if not M.same_sizes(got, shape) then
    raise(("%s: expected shape %s (%s), got %s"):format(what, M.shape_text(shape), like, M.shape_text(got)))
  end
end

-- Raises unless the output_shape a pack method was given is `want` (which the message calls
-- like): the shape the op computes from its inputs.
function M.check_output_shape(output_shape, want, like)
  if type(output_shape) ~= "table" then raise("output_shape: expected a shape, got " .. type(output_shape)) end
  if not M.same_sizes(want, output_shape) then
    raise(("output_shape: expected shape %s (%s), got %s"):format(M.shape_text(want), like, M.shape_text(output_shape)))
  end
end

-- A tensor of shape with like's dtype, on like's device.
function M.alloc_like(shape, like)
  return tensor.alloc(shape, dtype.name(like.elem_type), device.wrap(like.dev))
end

-- Raises, naming both, when an output tensor shares memory with another output or, other than
-- element for element, with an input (tocha_tensor_check_aliasing). outputs and inputs: lists
-- of {tensor, name}.
local function tensor_list(list)
  local ts, names = ffi.new("const tocha_tensor *[?]", #list), ffi.new("const char *[?]", #list)
  for i, item in ipairs(list) do ts[i - 1], names[i - 1] = item[1], item[2] end
  return ts, names
end
local pair_outs, pair_ins = ffi.new("const tocha_tensor *[1]"), ffi.new("const tocha_tensor *[1]")
local pair_out_names, pair_in_names = ffi.new("const char *[1]"), ffi.new("const char *[1]")
-- check_aliasing for one output and one input, without building lists (a direct call's path).
function M.check_aliasing_pair(output, output_name, input, input_name)
  pair_outs[0], pair_out_names[0], pair_ins[0], pair_in_names[0] = output, output_name, input, input_name
  check(C.tocha_tensor_check_aliasing(pair_outs, pair_out_names, 1, pair_ins, pair_in_names, 1))
end
function M.check_aliasing(outputs, inputs)
  local outs, out_names = tensor_list(outputs)
  local ins, in_names = tensor_list(inputs)
  check(C.tocha_tensor_check_aliasing(outs, out_names, #outputs, ins, in_names, #inputs))
end

-- Launches k on dev's current stream with `shared` bytes of dynamic shared memory (checked after
-- the kernel, the arguments and the dimensions): the checks and the packing both forms share.
local function launch_with_shared(k, dev, grid, block, shared, args)
  if getmetatable(k) ~= kernel.Kernel then raise("kernel: expected a tocha kernel (op.kernel), got " .. type(k)) end
  local list = plan.arg_list(args)
  local g, b = plan.dims(grid, "grid"), plan.dims(block, "block")
  shared = kernel.shared_bytes(shared, "shared")
  check(C.tocha_kernel_launch_packed_shared(k.handle, device.get(dev).handle, g, b, shared, list))
end

-- Launches the tocha kernel k on dev (a device name, object or handle) with the arguments an
-- op packed (numbers, and addresses as uint64_t cdata: tocha.plan.arg_list's rules), on the
-- stream opts names ({stream = s}) or the current one: the launch a model's plan makes, once.
function M.launch_packed(k, dev, grid, block, args, opts)
  local s = opts ~= nil and stream.option(opts, device.get(dev))
  if s then
    s:use(M.launch_packed, k, dev, grid, block, args)
    return
  end
  launch_with_shared(k, dev, grid, block, getmetatable(k) == kernel.Kernel and k.shared or 0, args)
end
errors.name(M.launch_packed, "launch_packed")

-- launch_packed with `shared` bytes of dynamic shared memory in place of the kernel's own, on the
-- current stream: for kernels whose shared memory follows the launch's size.
function M.launch_packed_shared(k, dev, grid, block, shared, args)
  launch_with_shared(k, dev, grid, block, shared, args)
end
errors.name(M.launch_packed_shared, "launch_packed_shared")

-- fn(...) run with opts.stream current when opts names one (checked against like's device, like
-- a tensor), else as it is; returns fn's first two results.
function M.on_stream(opts, like, fn, ...)
  local s = opts ~= nil and tensor.is_tensor(like) and stream.option(opts, device.wrap(like.dev))
  if s then
    local a, b = s:use(fn, ...)
    return a, b
  end
  local a, b = fn(...)
  return a, b
end

-- Raises unless a residual input (inputs[i]) has the output's shape `out`: an epilogue reads it
-- at the output's offsets.
function M.check_residual(shape, out, i)
  local what = ("inputs[%d]"):format(i or 2)
  M.check_shape(shape, what)
  if not M.same_sizes(shape, out) then
    raise(("%s: expected the output's shape %s (the residual), got %s"):format(what, M.shape_text(out), M.shape_text(shape)))
  end
end

-- Raises unless each address of list (pairs {address, name}) is 16-byte aligned: what the
-- kernels that read their operands in 16-byte chunks (the tensor cores', the f32 tiles') need,
-- which a view at an odd offset is not.
function M.check_aligned(list)
  for _, a in ipairs(list) do
    local off = tonumber(ffi.cast("uint64_t", a[1]) % 16)
    if off ~= 0 then
      raise(("%s: the op's kernels read it in 16-byte chunks, but its data starts %d bytes past a 16-byte boundary "
        .. "(a view at an odd offset: copy it into a fresh tensor)"):format(a[2], off))
    end
  end
end

-- ---- the interface's defaults ----

local Defaults = {}

local function no_backward() raise("self: the op has no backward") end

function Defaults:n_activation_inputs() return 1 end
function Defaults:param_names() return {} end
function Defaults:param_shapes() return {} end
function Defaults:param_init_data() return nil end
function Defaults:has_backward() return self.grad_kernel ~= nil end
function Defaults:block() return { self.block_size, 1, 1 } end
function Defaults:backward_block()
  if not self:has_backward() then no_backward() end
  return self:block()
end
function Defaults:forward_output_row_stride(output_shape)
  local shape = M.check_shape(output_shape, "output_shape")
  return shape[#shape]
end
function Defaults:backward_grad_output_row_stride(output_shape)
  local shape = M.check_shape(output_shape, "output_shape")
  return shape[#shape]
end
-- The kernel of launch i (forward, backward): the op's one kernel of each direction, unless an
-- op of several launches picks among kernels of its own from the input shapes.
function Defaults:kernel_for_launch() return self.kernel end
function Defaults:backward_kernel_for_launch() return self.grad_kernel end
function Defaults:n_launches() return 1 end
function Defaults:n_backward_launches() return self:has_backward() and 1 or 0 end
function Defaults:grid_for_launch(i, _, output_shape)
  M.launch_index(i, self:n_launches())
  return self:grid(output_shape)
end
function Defaults:pack_args_for_launch(i, ...)
  M.launch_index(i, self:n_launches())
  return self:pack_args(...)
end
function Defaults:backward_grid() no_backward() end
function Defaults:pack_backward_args() no_backward() end
function Defaults:backward_grid_for_launch(i, ...)
  M.launch_index(i, self:n_backward_launches())
  return self:backward_grid(...)
end
function Defaults:pack_backward_args_for_launch(i, ...)
  M.launch_index(i, self:n_backward_launches())
  return self:pack_backward_args(...)
end

-- ---- direct calls, the defaults: one node of a model, run on tensors ----
--
--   op:forward(x1, ..., xn [, p1, ..., pm] [, y [, opts]])            -> y
--   op:backward(x1, ..., xn [, p1, ..., pm], dy [, dx1, ..., dxn [, opts]]) -> dx1, ..., dxn [, dp1, ..., dpm]
--
-- for n = n_activation_inputs() and the m parameters of param_names(); inputs are named by
-- class.input_names (default "x" for one, else "a", "b", ...), the parameters by their names.
-- They make the launches a model makes: the output shape, every launch's grid and packed
-- arguments (the RuntimeOp methods, so a direct call is the model's path), a workspace when
-- the op asks for one, a launch of 0 CTAs skipped. Outputs are allocated when not given (the
-- parameters' gradients zeroed, as the model's are); the backward passes no forward output
-- (address 0) unless the op says its backward reads it (op:backward_reads_output() true: the
-- forward runs first, as a model's forward_train keeps y); else an op whose backward reads y
-- defines backward itself.

local function default_names(n)
  if n == 1 then return { "x" } end
  local names = {}
  for i = 1, n do names[i] = string.char(96 + i) end
  return names
end

-- What a RuntimeOp method raises about inputs[i], in the direct call's names: "inputs[2]: ..."
-- becomes "b: ...", raised at the user's line.
local function named(names, fn, ...)
  local ok, a = pcall(fn, ...)
  if ok then return a end
  local message = tostring(a):gsub("^[^\n]-:%d+: ", "", 1)
  local bare, n = message:gsub("^tocha%.[%w_.]+:[%w_]+: ", "", 1)
  if n == 0 then bare = message:gsub("^tocha[%w_.]*: ", "", 1) end
  message = bare
  message = message:gsub("inputs%[(%d+)%]", function(i) return names[tonumber(i)] or ("inputs[" .. i .. "]") end)
  raise(message)
end

local function shapes_of(list)
  local shapes = {}
  for i, t in ipairs(list) do shapes[i] = t:shape() end
  return shapes
end

-- The tensors of a direct call: n inputs, then the parameters, each live, dense, of the op's
-- dtype and on the first's device; then what follows them.
local function call_tensors(self, ...)
  local names = self.input_names or default_names(self:n_activation_inputs())
  local param_names = self:param_names()
  local tensors = {}
  for i = 1, #names + #param_names do
    local t, what = select(i, ...), names[i] or param_names[i - #names]
    M.check_tensor(self, t, what, tensors[1], names[1])
    tensors[i] = t
  end
  local inputs, params = {}, {}
  for i = 1, #names do inputs[i] = tensors[i] end
  for i = 1, #param_names do params[i] = tensors[#names + i] end
  return names, param_names, inputs, params, select(#tensors + 1, ...)
end

-- The addresses after the inputs in a pack: the parameters', then the workspace's (0 for none)
-- when the op declares one; and the workspace tensor, kept until the launches are queued.
local function param_addresses(self, params, shapes, out, like)
  local addresses = {}
  for i, t in ipairs(params) do addresses[i] = t.data end
  if not self.workspace_bytes then return addresses end
  local bytes = self:workspace_bytes(shapes, out)
  local ws = bytes > 0 and tensor.alloc({ bytes }, "u8", device.wrap(like.dev)) or nil
  addresses[#addresses + 1] = ws and ws.data or 0
  return addresses, ws
end

local function check_params(self, names, params, shapes, out)
  local want = self:param_shapes(shapes, out)
  for i, t in ipairs(params) do M.same_shape(t, want[i], names[i], "the op's parameter") end
end

-- Every launch of one direction: count of them, kernel_of(i), grid_of(i) and pack(i) for each.
local function launch_all(kernel_of, dev, block, count, grid_of, pack)
  for i = 1, count do
    local grid = grid_of(i)
    if grid[1] > 0 then M.launch_packed(kernel_of(i), dev, grid, block, pack(i)) end
  end
end

local function run_forward(self, names, param_names, inputs, params, y)
  local shapes = shapes_of(inputs)
  local out = named(names, self.compute_concrete_output_shape, self, shapes)
  check_params(self, param_names, params, shapes, out)
  if y == nil then y = M.alloc_like(out, inputs[1]) end
  M.check_tensor(self, y, "y", inputs[1], names[1])
  M.same_shape(y, out, "y", "the output for " .. table.concat(names, " and "))
  local list = {}
  for i, t in ipairs(inputs) do list[i] = { t, names[i] } end
  M.check_aliasing({ { y, "y" } }, list)
  local addresses, ws = param_addresses(self, params, shapes, out, y)
  local count = self:n_launches()
  launch_all(function(i) return count == 1 and self.kernel or self:kernel_for_launch(i, shapes, out) end,
    device.wrap(y.dev), self:block(), count,
    function(i) return count == 1 and self:grid(out) or self:grid_for_launch(i, shapes, out) end,
    function(i)
      if count == 1 then return self:pack_args(inputs, addresses, y, out) end
      return self:pack_args_for_launch(i, inputs, addresses, y, out)
    end)
  if ws then ws:free() end -- after the launches in stream order, as any tensor's block
  return y
end

function Defaults:forward(...)
  local names, param_names, inputs, params, y, opts = call_tensors(self, ...)
  local r = M.on_stream(opts, inputs[1], run_forward, self, names, param_names, inputs, params, y)
  return r
end

local function run_backward(self, names, param_names, inputs, params, dy, given)
  local shapes = shapes_of(inputs)
  local out = named(names, self.compute_concrete_output_shape, self, shapes)
  check_params(self, param_names, params, shapes, out)
  M.check_tensor(self, dy, "dy", inputs[1], names[1])
  M.same_shape(dy, out, "dy", "the output for " .. table.concat(names, " and "))
  local grads, grad_addresses, outputs = {}, {}, {}
  for i, x in ipairs(inputs) do
    local g, what = given[i], "d" .. names[i]
    if g == nil then g = M.alloc_like(shapes[i], x) end
    M.check_tensor(self, g, what, inputs[1], names[1])
    M.same_shape(g, shapes[i], what, names[i] .. "'s shape")
    grads[i], grad_addresses[i], outputs[i] = g, g.data, { g, what }
  end
  local param_grads, param_grad_addresses = {}, {}
  for i, t in ipairs(params) do
    param_grads[i] = tensor.zeros(t:shape(), { dtype = t:dtype(), device = device.wrap(t.dev) })
    param_grad_addresses[i] = param_grads[i].data
  end
  local list = { { dy, "dy" } }
  for i, t in ipairs(inputs) do list[#list + 1] = { t, names[i] } end
  M.check_aliasing(outputs, list)
  local y = self.backward_reads_output and self:backward_reads_output()
    and run_forward(self, names, param_names, inputs, params) or nil
  local addresses, ws = param_addresses(self, params, shapes, out, dy)
  local count, stride = self:n_backward_launches(), self:backward_grad_output_row_stride(out)
  launch_all(function(i) return count == 1 and self.grad_kernel or self:backward_kernel_for_launch(i, shapes, out) end,
    device.wrap(dy.dev), self:backward_block(), count,
    function(i) return count == 1 and self:backward_grid(shapes, out) or self:backward_grid_for_launch(i, shapes, out) end,
    function(i)
      if count == 1 then
        return self:pack_backward_args(inputs, addresses, y and y.data, out, dy, stride, grad_addresses, param_grad_addresses)
      end
      return self:pack_backward_args_for_launch(i, inputs, addresses, y and y.data, out, dy, stride, grad_addresses,
        param_grad_addresses)
    end)
  if ws then ws:free() end
  if y then y:free() end
  for i, g in ipairs(param_grads) do grads[#inputs + i] = g end
  return grads
end

function Defaults:backward(...)
  if not self:has_backward() then no_backward() end
  local names, param_names, inputs, params = call_tensors(self, ...)
  local at = #names + #param_names
  local dy = select(at + 1, ...)
  M.live_tensor(dy, "dy")
  local given = {}
  for i = 1, #names do given[i] = select(at + 1 + i, ...) end
  local opts = select(at + 2 + #names, ...)
  local grads = M.on_stream(opts, inputs[1], run_backward, self, names, param_names, inputs, params, dy, given)
  return unpack(grads)
end

-- A new op class named name (tocha.<name>): its objects' metatable, shown as "tocha.<name> <id>",
-- and callable on model nodes (op(node, ...): the node of the op in a tocha.Model graph). The
-- file that calls it counts as tocha's own for error positions (errors.own_caller).
function M.class(name)
  errors.own_caller(1) -- the op's file: its checks raise at the user's line, as tocha's own do
  local class = { op_class_name = name }
  class.__index = class
  class.__tostring = function(o) return ("tocha.%s %s"):format(name, o.id or "") end
  class.__call = function(o, ...) return require("tocha.model").node(o, ...) end
  return class
end

-- The plain forms of an op that defines only the per-launch ones (its launches need the input
-- shapes, which grid(output_shape) is not given).
local function per_launch_only(per_launch)
  return function() raise(("self: the op plans its launches from its input shapes: call %s(i, ...)"):format(per_launch)) end
end

-- Its arguments as a list with their count (n), nils included.
local function results(...) return { n = select("#", ...), ... } end

-- Gives class the defaults of every method it does not define, and names its methods for
-- errors ("tocha.<name>:<method>: ..."), constructor aside. Call it once the class is written:
-- it raises when the class lacks compute_concrete_output_shape, or both grid and
-- grid_for_launch, or both pack_args and pack_args_for_launch.
function M.finish(class)
  local name = class.op_class_name
  if type(rawget(class, "compute_concrete_output_shape")) ~= "function" then
    error(("tocha.op.finish: %s defines no compute_concrete_output_shape"):format(name), 2)
  end
  for _, pair in ipairs({ { "grid", "grid_for_launch" }, { "pack_args", "pack_args_for_launch" } }) do
    local plain, per_launch = pair[1], pair[2]
    if rawget(class, plain) == nil then
      if rawget(class, per_launch) == nil then
        error(("tocha.op.finish: %s defines neither %s nor %s"):format(name, plain, per_launch), 2)
      end
      class[plain] = per_launch_only(per_launch)
    end
  end
  -- Each default a function of the class's own (errors are named by the function, so one shared
  -- by every class would be named after whichever class came last), not a tail call, so that
  -- its frame stays on the stack for tocha.errors to find.
  for method, fn in pairs(Defaults) do
    if rawget(class, method) == nil then
      class[method] = function(...)
        local r = results(fn(...))
        return unpack(r, 1, r.n)
      end
    end
  end
  if class.new then errors.name(class.new, name .. ".new") end
  errors.methods(class, name .. ":", function(o) return getmetatable(o) == class end, { new = true })
  return class
end

return M
