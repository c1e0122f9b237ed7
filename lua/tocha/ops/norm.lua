-- tocha.LayerNorm, tocha.RMSNorm, tocha.GroupNorm: normalisation layers, forward and backward
-- (to the input and to the weight and bias), every float dtype (halves computed in f32):
-- kernels/norm.cu with the form baked in, behind RuntimeOps, so that they join a tocha.Model
-- with their parameters (a model starts the weight at 1 and the bias at 0, as PyTorch does).
--
--   local ln = tocha.LayerNorm.new({ 768 })                       -- over the last dimension
--   local y = ln:forward(x, weight, bias)
--   local dx, dweight, dbias = ln:backward(x, weight, bias, dy)
--   local rms = tocha.RMSNorm.new({ 768 }, { eps = 1e-6 })       -- weight only
--   local gn = tocha.GroupNorm.new(32, 256)                       -- groups, channels (dimension 2)
--
-- Options as PyTorch's: eps (1e-5; RMSNorm: the dtype's machine epsilon), elementwise_affine
-- (LayerNorm, RMSNorm; default true), bias (LayerNorm; default true), affine (GroupNorm;
-- default true); dtype (default f32). Without affine parameters the op has none.
--
-- The backward has three launches of one kernel (kernels/norm.cu): dx a row at a time (its mean
-- and rstd, and group norm's sums a channel, kept in the op's workspace, op:workspace_bytes),
-- then the parameters' sums as a column reduction split over many CTAs, then the sum of the
-- splits' partials (skipped where one split does); a model gives the workspace, a direct call
-- allocates it. GroupNorm where a CTA a row would not keep the memory busy (too few rows, or
-- planes too short) takes the split path instead, kernels of its own (kernels/norm.cu,
-- kernel_for_launch): batch norm's split statistics over its (sample, channel) planes, three
-- launches forward and five backward (the unused ones of either path have empty grids).
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local raise = errors.raise

local M = {}

local BLOCK = 256
-- GroupNorm takes the row path (a CTA a row walking its planes) where it keeps the memory busy:
-- rows enough for two waves of a CTA a row on an H200 (132 SMs x 4 CTAs of BLOCK threads); or
-- planes of 16 KB and more (every thread 64 bytes in flight on each plane: 4 16-byte groups x
-- BLOCK) and rows enough that their CTAs hold 4 MB in flight (about the H200's 4.2 TB/s times
-- a round trip of 1 us: 256 rows x BLOCK x 64 bytes). Elsewhere the split path: shorter planes
-- leave a CTA's threads a round trip a plane for a group or two each, fewer rows leave SMs idle.
local SPLIT_ROWS = 2 * 132 * 4
local ROW_PLANE_BYTES, ROW_FLIGHT_ROWS = 4 * 16 * BLOCK, 256
local MACHINE_EPS = { f32 = 2 ^ -23, f64 = 2 ^ -52, f16 = 2 ^ -10, bf16 = 2 ^ -7 }

-- The options of a norm's constructor, eps checked.
local function check_options(opts, known, class)
  opts = op.options(opts, known, "tocha." .. class)
  if opts.eps ~= nil and (type(opts.eps) ~= "number" or not (opts.eps >= 0) or opts.eps == math.huge) then
    raise("eps: expected a non-negative number, got " .. errors.show(opts.eps))
  end
  return opts
end

-- The kernels' launch bounds, from the compiler's report for sm_90 (no spills, no local
-- memory): at most 64 registers a thread (four CTAs of 256 an SM) for the row path; f64's
-- Welford updates (a division an element) need more, and group norm's backward in halves takes
-- 56 left free where bounded to 64 it spills. Group norm's split kernels take 70 (forward) and
-- 78 (backward) left free and spill under 64: bounded to 85 (three CTAs an SM).
local function bounds(dt, grouped, backward, split)
  if dt == "f64" then return nil end
  if split then return { BLOCK, 3 } end
  if grouped and backward and dt ~= "f32" then return nil end
  return { BLOCK, 4 }
end

-- The common part: kernels for the form (rms, affine: 0 none, 1 weight, 2 both).
local function build(self, rms, affine)
  local dt = self.dtype
  local targs = ("%s, %d, %d, %d"):format(dtype.ctype(dt), rms and 1 or 0, affine, self.groups and 1 or 0)
  -- Group norm's split path runs batch_norm.cu's split statistics: its source comes first.
  local source = op.source("batch_norm.cu") .. "\n" .. op.source("norm.cu")
  self.affine = affine
  self.block_size = BLOCK
  local params = ("%s* x, %s* w, %s* b, %s* y, u8* ws, i64 rows, i64 n, i64 G, i64 HW, "
    .. "f64 eps, i32 rows_mode, i64 psplits, i32 pwarps, i32 phase")
    :format(dt, dt, dt, dt)
  local grad_params = ("%s* x, %s* w, %s* dy, %s* dx, %s* dw, %s* db, u8* stats, i64 rows, i64 n, i64 G, "
    .. "i64 HW, f64 eps, i32 rows_mode, i64 splits, i64 psplits, i32 pwarps, i32 phase")
    :format(dt, dt, dt, dt, dt, dt)
  local function make(name, p, backward, split)
    return kernel.new { source = source, name = name, template_args = targs, params = p,
      launch_bounds = bounds(dt, self.groups, backward, split) }
  end
  self.kernel = make("tocha_norm", params, false, false)
  self.grad_kernel = make("tocha_norm_backward", grad_params, true, false)
  self.backward_kernel = self.grad_kernel
  if self.groups then
    -- The split path's kernels (same parameters), so that neither path's registers are the other's.
    self.split_kernel = make("tocha_group_norm_split", params, false, true)
    self.split_grad_kernel = make("tocha_group_norm_split_backward", grad_params, true, true)
  end
  return self
end

local function sizes_list(v, what)
  if type(v) == "number" then v = { v } end
  if type(v) ~= "table" or #v < 1 or #v > 8 then raise(what .. ": expected a size or a list of 1 to 8 sizes") end
  local out = {}
  for i, s in ipairs(v) do
    if type(s) ~= "number" or s ~= math.floor(s) or s < 1 then
      raise(("%s[%d]: expected a positive integer, got %s"):format(what, i, errors.show(s)))
    end
    out[i] = s
  end
  return out
end

local Methods = {}

-- The input's rows, row length n, G and HW (kernels/norm.cu's view), checked against the op.
function Methods:view(shape, what)
  op.check_shape(shape, what)
  if self.groups then
    if #shape < 2 then raise(("%s: expected [N, C, ...], got %d dimensions"):format(what, #shape)) end
    if shape[2] ~= self.channels then
      raise(("%s: expected %d channels (dimension 2), got %d"):format(what, self.channels, shape[2]))
    end
    local plane = op.numel(shape, 3)
    return shape[1] * self.groups, (self.channels / self.groups) * plane, self.groups, plane
  end
  local k = #self.normalized_shape
  if #shape < k then raise(("%s: expected at least %d dimensions, got %d"):format(what, k, #shape)) end
  for i = 1, k do
    if shape[#shape - k + i] ~= self.normalized_shape[i] then
      raise(("%s: the last dimensions %s are not the normalized shape %s"):format(what,
        op.shape_text({ select(#shape - k + 1, unpack(shape)) }), op.shape_text(self.normalized_shape)))
    end
  end
  local n = op.numel(self.normalized_shape)
  return op.numel(shape) / n, n, 1, 1
end

function Methods:param_names()
  if self.affine == 0 then return {} end
  if self.affine == 1 then return { "weight" } end
  return { "weight", "bias" }
end
function Methods:param_shapes()
  local shape = self.groups and { self.channels } or self.normalized_shape
  local out = {}
  for i = 1, self.affine do
    out[i] = {}
    for k, s in ipairs(shape) do out[i][k] = s end
  end
  return out
end
function Methods:param_init_value(i) return i == 1 and 1 or 0 end

function Methods:compute_concrete_output_shape(input_shapes)
  local shape = op.one_input(input_shapes)
  self:view(shape, "inputs[1]")
  local out = {}
  for i, s in ipairs(shape) do out[i] = s end
  return out
end

-- Layer and RMS norm's rows of HELD_FROM to HELD x BLOCK 16-byte groups (8 to 16 KB) go to a
-- CTA each, held in registers (rows_mode -2, kernels/norm.cu's NM_HELD): read once, where a
-- warp a row reads them two or three times and the later reads miss L1.
local HELD, HELD_FROM = 4, 512

-- The kernel's team (rows_mode: lanes of a warp a row, -1 a CTA a row, -2 a CTA a row held in
-- registers) and grid: held rows as above, else the row kernels' mapping
-- (tensor_reduce.team_mapping), from the row's length for layer and RMS norm and from a
-- channel plane's for group norm, which walks its row a plane at a time.
local function row_grid(self, rows, n, HW)
  if not self.groups then
    local groups = math.ceil(n * dtype.size(self.dtype) / 16)
    if groups >= HELD_FROM and groups <= HELD * BLOCK then return -2, { math.min(rows, 2 ^ 31 - 1), 1, 1 } end
  end
  return require("tocha.tensor_reduce").team_mapping(rows, self.groups and HW or n, 1, BLOCK, dtype.size(self.dtype))
end

-- Group norm's split path: each (sample, channel) plane's splits (batch_norm.lua's plan over
-- [1, N C, HW]), or 0 for the row path (layer and RMS norm; group norm with enough rows); and
-- whether its statistics take a warp a plane's split (1), where a split has under four
-- 16-byte units a thread of a CTA (a warp's lanes then keep 64 bytes in flight where a CTA's
-- threads would keep 16), or a CTA (0).
local function plane_splits(self, rows, n, HW)
  if not self.groups or rows >= SPLIT_ROWS then return 0, 0 end
  if HW * dtype.size(self.dtype) >= ROW_PLANE_BYTES and rows >= ROW_FLIGHT_ROWS then return 0, 0 end
  local psplits = require("tocha.ops.batch_norm").splits(1, rows * (n / HW), HW, self.dtype)
  local units = math.ceil(HW * dtype.size(self.dtype) / 16) / psplits
  return psplits, units < 4 * BLOCK and 1 or 0
end

-- The split path's statistics grid: a CTA, or a warp, an item (a plane's split).
local function partials_grid(self, rows, n, HW)
  local psplits, warps = plane_splits(self, rows, n, HW)
  local items = rows * (n / HW) * psplits
  return { warps == 1 and math.ceil(items * 32 / BLOCK) or items, 1, 1 }
end

-- The split path's elementwise pass: batch norm's grid, `per` 16-byte units a thread.
local function unit_grid(self, count, per)
  local units = math.ceil(count / (16 / dtype.size(self.dtype)))
  return { math.max(1, math.min(math.ceil(units / (per * BLOCK)), 2 ^ 31 - 1)), 1, 1 }
end

local NONE = { 0, 0, 0 }

function Methods:n_launches() return self.groups and 3 or 1 end

-- Launch i's grid: the row path's one launch, or the split path's partials (a CTA a plane's
-- split), merge (a warp a row) and elementwise pass.
function Methods:grid_for_launch(i, input_shapes)
  op.launch_index(i, self:n_launches())
  local rows, n, _, HW = self:view(op.one_input(input_shapes), "inputs[1]")
  local psplits = plane_splits(self, rows, n, HW)
  if psplits == 0 then
    if i > 1 then return NONE end
    local _, grid = row_grid(self, rows, n, HW)
    return grid
  end
  if i == 1 then return partials_grid(self, rows, n, HW) end
  if i == 2 then return { math.ceil(rows * 32 / BLOCK), 1, 1 } end
  return unit_grid(self, rows * n, 4)
end
function Methods:grid(output_shape) return self:grid_for_launch(1, { output_shape }) end

-- Launch i's kernel: the split path's own where the shape takes it, else the row path's.
function Methods:kernel_for_launch(i, input_shapes)
  op.launch_index(i, self:n_launches())
  local rows, n, _, HW = self:view(op.one_input(input_shapes), "inputs[1]")
  return plane_splits(self, rows, n, HW) > 0 and self.split_kernel or self.kernel
end
function Methods:backward_kernel_for_launch(i, input_shapes)
  op.launch_index(i, self:n_backward_launches())
  local rows, n, _, HW = self:view(op.one_input(input_shapes), "inputs[1]")
  return plane_splits(self, rows, n, HW) > 0 and self.split_grad_kernel or self.grad_kernel
end

-- The parameters' addresses (x's standing in for absent ones: a launch has no null pointers).
local function param_args(self, x, params)
  params = op.list(params, "params")
  local w = self.affine >= 1 and op.address(params[1], "params[1]") or x
  local b = self.affine == 2 and op.address(params[2], "params[2]") or x
  return w, b, params
end

-- The workspace's address, after the parameters; `needed` raises where it is missing.
local function workspace_arg(self, list, needed)
  local ws = list[self.affine + 1] or 0
  local at = op.address(ws, ("params[%d]"):format(self.affine + 1))
  if at == 0 and needed then
    raise("params: the op needs its workspace (op:workspace_bytes) after the parameters")
  end
  return at
end

function Methods:pack_args_for_launch(i, inputs, params, output, output_shape)
  op.launch_index(i, self:n_launches())
  local x, shape = op.input_of(inputs)
  op.check_output_shape(output_shape or shape, shape, "x's")
  local rows, n, G, HW = self:view(shape, "inputs[1]")
  local w, b, list = param_args(self, x, params)
  local psplits, warps = plane_splits(self, rows, n, HW)
  local ws = workspace_arg(self, list, psplits > 0)
  local mode = row_grid(self, rows, n, HW)
  return { x, w, b, op.address(output, "output"), ws ~= 0 and ws or x, rows, n, G, HW, self.eps, mode, psplits, warps,
    i - 1 }
end
function Methods:pack_args(...) return self:pack_args_for_launch(1, ...) end

function Methods:n_backward_launches() return self.groups and 5 or 3 end

local function acc_size(self) return self.dtype == "f64" and 8 or 4 end

-- The parameters' column reduction over R rows of `cols` columns (layer norm: x's rows and
-- columns; group norm: samples and channels): its tiles of 32 16-byte groups of columns and its
-- splits of the rows. Splits give about four CTAs an SM of an H200 (132 SMs) while each warp
-- keeps at least 8 rows (a CTA's 8 warps share a split's rows); a function of the shape alone,
-- so that the sums' order, and so their bits, are the same on every device.
local function column_plan(self, rows, n, G, HW)
  local R, cols = rows, n
  if self.groups then R, cols = rows / G, G * (n / HW) end
  local tiles = math.ceil(cols / (32 * 16 / dtype.size(self.dtype)))
  local splits = math.max(1, math.min(math.ceil(4 * 132 / tiles), math.floor(R / 64)))
  return tiles, splits, R, cols
end

-- Workspace, in the accumulator type: the rows' (mean, rstd), group norm's sums a (sample,
-- channel) and the splits' partial sums (kernels/norm.cu, tocha_norm_backward); on group norm's
-- split path the planes' partials and coefficients, the sums a plane and the column partials.
function Methods:workspace_bytes(input_shapes)
  local rows, n, G, HW = self:view(op.one_input(input_shapes), "inputs[1]")
  local psplits = plane_splits(self, rows, n, HW)
  local _, splits, R, cols = column_plan(self, rows, n, G, HW)
  local count
  if psplits > 0 then
    local planes = rows * (n / HW)
    count = 4 * planes * psplits + 4 * planes + 2 * planes
  else
    count = 2 * rows
    if self.affine > 0 and self.groups then count = count + 2 * R * cols end
  end
  if self.affine > 0 and splits > 1 then count = count + 2 * splits * cols end
  return count * acc_size(self)
end

-- Launch i's grid: the row path's dx (a team a row), the parameters' column reduction and the
-- sum of its splits; the split path's partials, merge (a warp a row), dx pass, then the same
-- column reduction and sum.
function Methods:backward_grid_for_launch(i, input_shapes)
  op.launch_index(i, self:n_backward_launches())
  local rows, n, G, HW = self:view(op.one_input(input_shapes), "inputs[1]")
  local psplits = plane_splits(self, rows, n, HW)
  local column = i - 1
  if psplits > 0 then
    if i == 1 then return partials_grid(self, rows, n, HW) end
    if i == 2 then return { math.ceil(rows * 32 / BLOCK), 1, 1 } end
    if i == 3 then return unit_grid(self, rows * n, 2) end
    column = i - 3
  elseif i == 1 then
    local _, grid = row_grid(self, rows, n, HW)
    return grid
  end
  if self.affine == 0 or column > 2 then return NONE end
  local tiles, splits = column_plan(self, rows, n, G, HW)
  if column == 1 then return { tiles, splits, 1 } end
  return splits > 1 and { tiles, 1, 1 } or NONE
end
Methods.backward_grid = function(self, ...) return self:backward_grid_for_launch(1, ...) end

function Methods:pack_backward_args_for_launch(i, inputs, params, _, _, grad_output, _, grad_inputs, grad_params)
  op.launch_index(i, self:n_backward_launches())
  local x, shape = op.input_of(inputs)
  local rows, n, G, HW = self:view(shape, "inputs[1]")
  local w, _, list = param_args(self, x, params)
  local ws = workspace_arg(self, list, true)
  grad_inputs = op.list(grad_inputs, "grad_inputs")
  grad_params = op.list(grad_params or {}, "grad_params")
  local dx = op.address(grad_inputs[1], "grad_inputs[1]")
  local dw = self.affine >= 1 and op.address(grad_params[1], "grad_params[1]") or dx
  local db = self.affine == 2 and op.address(grad_params[2], "grad_params[2]") or dx
  local mode = row_grid(self, rows, n, HW)
  local _, splits = column_plan(self, rows, n, G, HW)
  local psplits, warps = plane_splits(self, rows, n, HW)
  return { x, w, op.address(grad_output, "grad_output"), dx, dw, db, ws, rows, n, G, HW,
    self.eps, mode, splits, psplits, warps, i - 1 }
end
Methods.pack_backward_args = function(self, ...) return self:pack_backward_args_for_launch(1, ...) end

local function norm_class(name, constructor)
  local class = op.class(name)
  for k, fn in pairs(Methods) do class[k] = fn end
  class.new = function(...)
    local self = constructor(class, ...)
    return self
  end
  op.finish(class)
  return class
end

-- LayerNorm.new(normalized_shape [, {eps = 1e-5, elementwise_affine = true, bias = true, dtype}])
M.LayerNorm = norm_class("LayerNorm", function(class, normalized_shape, opts)
  opts = check_options(opts, { eps = true, elementwise_affine = "boolean", bias = "boolean", dtype = true }, "LayerNorm")
  local self = setmetatable({ kind = "layer_norm", normalized_shape = sizes_list(normalized_shape, "normalized_shape"),
    dtype = op.float_dtype(opts.dtype, "dtype"), eps = opts.eps or 1e-5 }, class)
  local affine = opts.elementwise_affine == false and 0 or (opts.bias == false and 1 or 2)
  self.id = ("layer_norm__%s__%s__%g__%d"):format(table.concat(self.normalized_shape, "x"), self.dtype, self.eps, affine)
  return build(self, false, affine)
end)

-- RMSNorm.new(normalized_shape [, {eps = the dtype's machine epsilon, elementwise_affine = true, dtype}])
M.RMSNorm = norm_class("RMSNorm", function(class, normalized_shape, opts)
  opts = check_options(opts, { eps = true, elementwise_affine = "boolean", dtype = true }, "RMSNorm")
  local dt = op.float_dtype(opts.dtype, "dtype")
  local self = setmetatable({ kind = "rms_norm", normalized_shape = sizes_list(normalized_shape, "normalized_shape"),
    dtype = dt, eps = opts.eps or MACHINE_EPS[dt] }, class)
  local affine = opts.elementwise_affine == false and 0 or 1
  self.id = ("rms_norm__%s__%s__%g__%d"):format(table.concat(self.normalized_shape, "x"), dt, self.eps, affine)
  return build(self, true, affine)
end)

-- GroupNorm.new(num_groups, num_channels [, {eps = 1e-5, affine = true, dtype}]): over dimension 2.
M.GroupNorm = norm_class("GroupNorm", function(class, groups, channels, opts)
  groups, channels = op.integer(groups, "num_groups"), op.integer(channels, "num_channels")
  if groups < 1 then raise("num_groups: expected a positive integer, got " .. groups) end
  if channels < 1 or channels % groups ~= 0 then
    raise(("num_channels: expected a positive multiple of num_groups (%d), got %d"):format(groups, channels))
  end
  opts = check_options(opts, { eps = true, affine = "boolean", dtype = true }, "GroupNorm")
  local self = setmetatable({ kind = "group_norm", groups = groups, channels = channels,
    dtype = op.float_dtype(opts.dtype, "dtype"), eps = opts.eps or 1e-5 }, class)
  local affine = opts.affine == false and 0 or 2
  self.id = ("group_norm__%d__%d__%s__%g__%d"):format(groups, channels, self.dtype, self.eps, affine)
  return build(self, false, affine)
end)

return M
