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
-- The block width new() takes when given none. The kernels give each thread one 16-byte vector
-- or run per step of a flat grid-stride loop, so the width only decides how CTAs fill the SMs;
-- on the H200, over every seventh case of the three suites at widths 32 to 1024
-- (bench/upsample.lua --quick --blocks), 128 is the best median for both kernels in both
-- layouts, within 0.7% of every width from 64 to 512, and no case's best beats it by more than
-- the noise of its size.
local DEFAULT_BLOCK = 128
local errors = require "tocha.errors"
local runtime_op = require "tocha.runtime_op"
local op_base = require "tocha.op"
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
    if not keys[k] then raise(("options: unknown option %s"):format(errors.show(k))) end
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
-- block_iw, DEFAULT_BLOCK (128, the fastest measured); options { layout }.
function Backward.new(scale_h, scale_w, block_iw, dtype_name, opts)
  opts = options(opts, { layout = true })
  if block_iw == nil then block_iw = DEFAULT_BLOCK end
  local h = construct(1, scale_h, scale_w, block_iw, dtype_name, nil, opts.layout)
  return describe(h, Backward, "block_iw")
end

-- k:run(dy [, dx [, opts]]): dx = the gradient for dy, its H and W those of dy over the
-- scales. opts.stream: the stream to queue it on (else the current one).
-- Runs fn(...) on the stream opts names ({stream = s}), or on the current one; like is the
-- tensor whose device the work is on.
local on_stream = op_base.on_stream

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
-- given. Without them, each is DEFAULT_BLOCK (128, the fastest measured).
-- options: { layout = "nchw" (the default) or "nhwc", block_iw = n }, in block_iw's place or
-- after it.
function Forward.new(scale_h, scale_w, block_ow, dtype_name, block_iw, opts)
  if type(block_iw) == "table" and opts == nil then block_iw, opts = nil, block_iw end
  opts = options(opts, { layout = true, block_iw = true })
  if block_iw == nil then block_iw = opts.block_iw end
  if block_ow == nil then
    block_ow = DEFAULT_BLOCK
    block_iw = block_iw or DEFAULT_BLOCK
  end
  local h = construct(0, scale_h, scale_w, block_ow, dtype_name, block_iw, opts.layout)
  local self = describe(h, Forward, "block_ow")
  self.backward_kernel = describe(C.tocha_upsample_backward_kernel(h), Backward, "block_iw", h)
  self.grad_kernel = self.backward_kernel.kernel -- what a model launches with pack_backward_args
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

-- The block width new() picks when given none (the same for every case).
function Forward.default_block() return DEFAULT_BLOCK end

-- ---- the RuntimeOp methods (tocha.runtime_op's, on the forward kernel's tocha_runtime_op) ----

function Forward:runtime_op() return C.tocha_upsample_op(self.handle) end
runtime_op.install(Forward)
M.launch_packed = runtime_op.launch_packed

-- up(node, ...): the node of this op in a tocha.Model graph.
Forward.__call = function(self, ...) return require("tocha.model").node(self, ...) end
Forward.kind = "upsample"

local CONSTRUCTORS = { new = true, default_block = true }
errors.methods(Backward, "UpsampleNearest2dBackward:", function(k) return getmetatable(k) == Backward end, CONSTRUCTORS)
errors.name(Backward.new, "UpsampleNearest2dBackward.new")
errors.methods(Forward, "UpsampleNearest2dForward:", function(k) return getmetatable(k) == Forward end, CONSTRUCTORS)
errors.name(Forward.new, "UpsampleNearest2dForward.new")
errors.name(Forward.default_block, "UpsampleNearest2dForward.default_block")
return M
