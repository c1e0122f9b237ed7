-- tocha.BatchNorm2d: batch normalisation of [N, C, ...] per channel, forward and backward, in
-- training mode (the batch's statistics, the running ones updated by momentum) or inference
-- mode (the running statistics), every float dtype (halves computed in f32):
-- kernels/batch_norm.cu behind a RuntimeOp, so that it joins a tocha.Model.
--
--   local bn = tocha.BatchNorm2d.new(64)                  -- eps 1e-5, momentum 0.1, affine
--   local y = bn:forward(x, weight, bias, running_mean, running_var)
--   local dx, dweight, dbias = bn:backward(x, weight, bias, running_mean, running_var, dy)
--   bn:train(false)                                        -- inference: the running statistics
--   tocha.BatchNorm2d.new(64, { layout = "nhwc" })         -- x channels-last: [N, H, W, C]
--
-- Its parameters, in order: weight and bias (affine), running_mean and running_var
-- (track_running_stats; buffers: a model keeps and saves them, starts them at 0 and 1, and
-- leaves them out of m:trainable_parameters() and of backward's gradients). In a model,
-- m:train(flag) sets the mode of every op that has one (a direct call reads op.training).
-- Without running statistics the batch's are used in both modes, as PyTorch does.
--
-- Each direction is three launches of one kernel (kernels/batch_norm.cu): the channels'
-- statistics as a split reduction (C x splits CTAs, the partials in the workspace), a short pass
-- that merges them (a warp a channel) into per-channel coefficients, and the elementwise pass.
-- With the running statistics (inference) the forward is the elementwise pass alone and the
-- backward runs the first two only for the weight's and bias's gradients. The splits are planned
-- from the shape alone (M.splits), so a result is the same on every run and device.
-- Channels-last (layout "nhwc", x [..., C] with the channels the last dimension): the statistics
-- are a column reduction, a CTA a tile of up to 32 16-byte units of channels (M.tile) and a
-- share of the rows (M.splits_nhwc), and the elementwise pass reads each element's channel.
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local raise = errors.raise

local M = {}

local BLOCK = 256
local UNITS = 4 -- 16-byte units a thread has in flight (the kernel's BN_UNITS; half of them of x and dy)
-- Statistics CTAs that fill an H200 once: 132 SMs x 4 CTAs of BLOCK threads at the kernel's 56
-- to 64 registers, so that every CTA runs at once and none is left for a second, short wave.
local WAVE = 528
-- Channels-last kernels hold V channels' sums a thread (kernels/batch_norm.cu's
-- bn_partials_nhwc): 80 registers, three CTAs an SM, and a wave of 396.
local WAVE_NHWC = 396

-- The statistics pass's splits of each channel for x [N, C, plane] of dtype dt: enough CTAs
-- (C x splits) to fill the GPU about once, each thread with at least UNITS 16-byte units.
function M.splits(N, C, plane, dt)
  local units = math.ceil(N * plane / (16 / dtype.size(dt)))
  return math.max(1, math.min(math.floor(WAVE / C), math.floor(units / (UNITS * BLOCK))))
end

-- The channels-last statistics' column tile for C channels of dtype dt (the kernel's bn_tile).
function M.tile(C, dt)
  return math.min(C, 32 * (16 / dtype.size(dt)))
end

-- The channels-last statistics pass's splits of the R rows of x [R, C]: enough CTAs (column
-- tiles x splits) to fill the GPU about once, each thread with at least UNITS 16-byte units.
function M.splits_nhwc(R, C, dt)
  local tile = M.tile(C, dt)
  local units = math.ceil(R * tile / (16 / dtype.size(dt)))
  return math.max(1, math.min(math.floor(WAVE_NHWC / math.ceil(C / tile)), math.floor(units / (UNITS * BLOCK))))
end

-- The kernels' launch bounds: 64 registers a thread (four CTAs of BLOCK an SM, WAVE's count),
-- which the compiler's report for sm_90 shows spills nothing; channels-last, 80 (three CTAs,
-- WAVE_NHWC's count: 64 spilled up to 192 bytes a thread); f64 is left free (60-78).
local function bounds(dt, nhwc)
  if dt == "f64" then return nil end
  return { BLOCK, nhwc and 3 or 4 }
end

local BatchNorm2d = op.class("BatchNorm2d")
M.BatchNorm2d = BatchNorm2d

-- BatchNorm2d.new(num_features [, {eps = 1e-5, momentum = 0.1, affine = true,
-- track_running_stats = true, dtype, layout = "nchw"}]): layout "nhwc" takes x channels-last.
function BatchNorm2d.new(channels, opts)
  channels = op.integer(channels, "num_features")
  if channels < 1 then raise("num_features: expected a positive integer, got " .. channels) end
  opts = op.options(opts, { eps = true, momentum = true, affine = "boolean", track_running_stats = "boolean", dtype = true,
    layout = true }, "tocha.BatchNorm2d")
  local layout = opts.layout or "nchw"
  if layout ~= "nchw" and layout ~= "nhwc" then
    raise(("layout: expected \"nchw\" or \"nhwc\", got %s"):format(errors.show(opts.layout)))
  end
  local eps, momentum = opts.eps or 1e-5, opts.momentum or 0.1
  if type(eps) ~= "number" or not (eps >= 0) or eps == math.huge then -- not (>=): NaN too
    raise("eps: expected a non-negative number, got " .. errors.show(eps))
  end
  if type(momentum) ~= "number" or not (momentum >= 0 and momentum <= 1) then
    raise("momentum: expected a number from 0 to 1, got " .. errors.show(momentum))
  end
  local dt = op.float_dtype(opts.dtype, "dtype")
  local affine, running = opts.affine ~= false, opts.track_running_stats ~= false
  local self = setmetatable({ kind = "batch_norm", channels = channels, eps = eps, momentum = momentum, dtype = dt,
    affine = affine, running = running, training = true, block_size = BLOCK, nhwc = layout == "nhwc",
    id = ("batch_norm__%d__%s__%g__%g__%d%d%s"):format(channels, dt, eps, momentum, affine and 1 or 0, running and 1 or 0,
      layout == "nhwc" and "__nhwc" or "") },
    BatchNorm2d)
  local source, limits = op.source("batch_norm.cu"), bounds(dt, layout == "nhwc")
  local targs = ("%s, %d, %d, %d"):format(dtype.ctype(dt), affine and 1 or 0, running and 1 or 0, layout == "nhwc" and 1 or 0)
  self.kernel = kernel.new { source = source, name = "tocha_batch_norm", template_args = targs, launch_bounds = limits,
    params = ("%s* x, %s* w, %s* b, %s* running_mean, %s* running_var, %s* y, u8* ws, i64 N, i64 C, "
      .. "i64 plane, i64 splits, f64 eps, f64 momentum, i32 training, i32 phase")
      :format(dt, dt, dt, dt, dt, dt) }
  self.grad_kernel = kernel.new { source = source, name = "tocha_batch_norm_backward", template_args = targs, launch_bounds = limits,
    params = ("%s* x, %s* w, %s* running_mean, %s* running_var, %s* dy, %s* dx, %s* dw, %s* db, "
      .. "u8* ws, i64 N, i64 C, i64 plane, i64 splits, f64 eps, i32 training, i32 phase")
      :format(dt, dt, dt, dt, dt, dt, dt, dt) }
  self.backward_kernel = self.grad_kernel
  return self
end

-- bn:train([flag]): training mode (default true) or inference mode (false); returns bn.
function BatchNorm2d:train(flag)
  local r = op.set_training(self, flag)
  return r
end

-- Whether this call uses the batch's statistics.
local function batch_stats(self) return self.training or not self.running end

function BatchNorm2d:param_names()
  local names = {}
  if self.affine then names[#names + 1], names[#names + 2] = "weight", "bias" end
  if self.running then names[#names + 1], names[#names + 2] = "running_mean", "running_var" end
  return names
end
function BatchNorm2d:param_shapes()
  local out = {}
  for i = 1, #self:param_names() do out[i] = { self.channels } end
  return out
end
function BatchNorm2d:param_init_value(i)
  local name = self:param_names()[i]
  return (name == "weight" or name == "running_var") and 1 or 0
end
function BatchNorm2d:param_trainable(i)
  local name = self:param_names()[i]
  return name == "weight" or name == "bias"
end

-- x's shape as the kernel's [N, C, plane]: NCHW's [N, C, ...] as it is, channels-last's
-- [..., C] as [rows, C, 1].
function BatchNorm2d:view(shape, what)
  op.check_shape(shape, what)
  if #shape < 2 then
    raise(("%s: expected %s, got %d dimensions"):format(what, self.nhwc and "[N, ..., C]" or "[N, C, ...]", #shape))
  end
  local at = self.nhwc and #shape or 2
  if shape[at] ~= self.channels then
    raise(("%s: expected %d channels (dimension %d), got %d"):format(what, self.channels, at, shape[at]))
  end
  if self.nhwc then return op.numel(shape) / shape[at], shape[at], 1 end
  return shape[1], shape[2], op.numel(shape, 3)
end

-- The statistics pass's splits for x viewed as [N, C, plane].
function BatchNorm2d:splits(N, C, plane)
  if self.nhwc then return M.splits_nhwc(N, C, self.dtype) end
  return M.splits(N, C, plane, self.dtype)
end

function BatchNorm2d:compute_concrete_output_shape(input_shapes)
  local shape = op.one_input(input_shapes)
  self:view(shape, "inputs[1]")
  local out = {}
  for i, s in ipairs(shape) do out[i] = s end
  return out
end

function BatchNorm2d:n_launches() return 3 end
function BatchNorm2d:n_backward_launches() return 3 end

-- The workspace: C x splits partials of 4 values (f32, f64 for f64), then 4 coefficients a
-- channel.
function BatchNorm2d:workspace_bytes(input_shapes)
  local N, C, plane = self:view(op.one_input(input_shapes), "inputs[1]")
  return 4 * C * (self:splits(N, C, plane) + 1) * (self.dtype == "f64" and 8 or 4)
end

-- Launch i's grid: 1, a CTA a (channel, split); 2, a warp a channel; 3, the elementwise pass,
-- `per` 16-byte units a thread (it strides over what a grid does not cover). stats: whether
-- launches 1 and 2 run.
local function grid(self, i, input_shapes, stats, per)
  local N, C, plane = self:view(op.one_input(input_shapes), "inputs[1]")
  if i < 3 and not stats then return { 0, 0, 0 } end
  if i == 1 and self.nhwc then return { math.ceil(C / M.tile(C, self.dtype)) * self:splits(N, C, plane), 1, 1 } end
  if i == 1 then return { C * self:splits(N, C, plane), 1, 1 } end
  if i == 2 then return { math.ceil(C * 32 / BLOCK), 1, 1 } end
  local units = math.ceil(N * C * plane / (16 / dtype.size(self.dtype)))
  return { math.max(1, math.min(math.ceil(units / (per * BLOCK)), 2 ^ 31 - 1)), 1, 1 }
end

function BatchNorm2d:grid_for_launch(i, input_shapes)
  op.launch_index(i, 3)
  return grid(self, i, input_shapes, batch_stats(self), UNITS)
end
-- The backward's statistics run for the batch's statistics or for the parameters' gradients.
function BatchNorm2d:backward_grid_for_launch(i, input_shapes)
  op.launch_index(i, 3)
  return grid(self, i, input_shapes, batch_stats(self) or self.affine, UNITS / 2)
end
BatchNorm2d.backward_grid = function(self, ...) return self:backward_grid_for_launch(1, ...) end

-- The parameters' addresses by name and the workspace's (x's standing in for absent ones: a
-- launch has no null pointers).
local function addresses(self, x, params)
  params = op.list(params, "params")
  local at, names = {}, self:param_names()
  for i, name in ipairs(names) do at[name] = op.address(params[i], ("params[%d]"):format(i)) end
  local ws = params[#names + 1] or 0
  if op.address(ws, ("params[%d]"):format(#names + 1)) == 0 then
    raise("params: the op needs its workspace (op:workspace_bytes) after the parameters")
  end
  at.ws = op.address(ws, "workspace")
  for _, name in ipairs({ "weight", "bias", "running_mean", "running_var" }) do at[name] = at[name] or x end
  return at
end

function BatchNorm2d:pack_args_for_launch(i, inputs, params, output, output_shape)
  op.launch_index(i, 3)
  local x, shape = op.input_of(inputs)
  op.check_output_shape(output_shape or shape, shape, "x's")
  local N, C, plane = self:view(shape, "inputs[1]")
  local at = addresses(self, x, params)
  return { x, at.weight, at.bias, at.running_mean, at.running_var, op.address(output, "output"), at.ws, N, C, plane,
    self:splits(N, C, plane), self.eps, self.momentum, batch_stats(self) and 1 or 0, i - 1 }
end

function BatchNorm2d:pack_backward_args_for_launch(i, inputs, params, _, _, grad_output, _, grad_inputs, grad_params)
  op.launch_index(i, 3)
  local x, shape = op.input_of(inputs)
  local N, C, plane = self:view(shape, "inputs[1]")
  local at = addresses(self, x, params)
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  grad_params = op.list(grad_params or {}, "grad_params")
  local dx = op.address(grad_inputs[1], "grad_inputs[1]")
  local dw = self.affine and op.address(grad_params[1], "grad_params[1]") or dx
  local db = self.affine and op.address(grad_params[2], "grad_params[2]") or dx
  return { x, at.weight, at.running_mean, at.running_var, op.address(grad_output, "grad_output"), dx, dw, db, at.ws,
    N, C, plane, self:splits(N, C, plane), self.eps, batch_stats(self) and 1 or 0, i - 1 }
end

op.finish(BatchNorm2d)
return M
