-- tocha.comm: collectives over tensors of several devices of one process, with NCCL's
-- semantics: rank i is the i-th tensor of a list, one tensor a device.
--
--   tocha.comm.all_reduce({a, b} [, {op = "sum"}])      -- a and b both become a + b
--   tocha.comm.broadcast({a, b} [, {root = 1}])         -- b becomes a copy of a
--   tocha.comm.all_gather({a, b} [, outputs [, {}]])    -- each output: a and b along dim 1
--   tocha.comm.reduce_scatter({a, b} [, outputs, {op}]) -- output i: the i-th slice of a + b
--
-- Each takes {staged = true} among its options (the last argument) to skip NCCL.
--
-- Where every rank is a cuda device and NCCL loads (tocha.comm.nccl()), a call is one NCCL
-- group over the devices' current streams. Otherwise, or with {staged = true}, it runs staged:
-- the ranks' tensors meet on one device (the first rank's; for reduce_scatter each output's
-- own) through copies and are reduced there in rank order by tocha's own elementwise kernels,
-- in the tensors' dtype as NCCL reduces, so each rank gets the same bits. The staged path is
-- the CPU collective of the simulator's devices (sim, sim:1, ...).
local ffi = require "ffi"
local native = require "tocha.ffi"
local device = require "tocha.device"
local dtype = require "tocha.dtype"
local errors = require "tocha.errors"
local raise = errors.raise

local M = {}
local C, check = native.C, native.check
local NCCL_OP = { sum = C.TOCHA_REDUCE_SUM, mean = C.TOCHA_REDUCE_AVG, avg = C.TOCHA_REDUCE_AVG,
  prod = C.TOCHA_REDUCE_PROD, max = C.TOCHA_REDUCE_MAX, min = C.TOCHA_REDUCE_MIN }

-- tocha.comm.nccl(): NCCL's version ("2.21.5") when it loads, else nil and why not.
function M.nccl()
  local why, version = ffi.new("const char*[1]"), ffi.new("int[1]")
  if C.tocha_nccl_available(why, version) == 0 then return nil, ffi.string(why[0]) end
  local v = version[0]
  -- NCCL's code: major x 10000 + minor x 100 + patch since 2.9, major x 1000 + minor x 100 +
  -- patch before
  if v < 10000 then return ("%d.%d.%d"):format(math.floor(v / 1000), math.floor(v / 100) % 10, v % 100) end
  return ("%d.%d.%d"):format(math.floor(v / 10000), math.floor(v / 100) % 100, v % 100)
end

-- Runs collective kind (a tocha_collective) over inputs and outputs (lists of R tensors)
-- through NCCL where it can: every rank on cuda, NCCL loaded, opts.staged not set. Returns
-- whether it ran; false leaves the call to the staged path.
local function through_nccl(kind, op, root, inputs, outputs, opts)
  if opts and opts.staged then return false end
  for _, t in ipairs(inputs) do
    if device.wrap(t.dev).kind ~= "cuda" then return false end
  end
  if not M.nccl() then return false end
  local R = #inputs
  local ins, outs = ffi.new("tocha_tensor*[?]", R), ffi.new("tocha_tensor*[?]", R)
  for i = 1, R do ins[i - 1], outs[i - 1] = inputs[i], outputs[i] end
  check(C.tocha_nccl_collective(kind, op and NCCL_OP[op] or 0, root, R, ins, outs))
  return true
end

-- op name -> the in-place tensor method that folds one rank into the accumulator.
local FOLD = { sum = "add_", mean = "add_", avg = "add_", prod = "mul_", max = "maximum_", min = "minimum_" }
local OP_NAMES = "sum, mean (or avg), prod, max, min"

local function is_tensor(x) return ffi.istype("tocha_tensor", x) end

local function shape_text(t) return "[" .. table.concat(t:shape(), ", ") .. "]" end

-- Checks list as the ranks' tensors of a collective: a non-empty list of live dense tensors
-- on distinct devices, of one dtype (and one shape unless shapes_vary). what names the list.
local function check_ranks(list, what, shapes_vary)
  if is_tensor(list) then raise(("%s: expected a list of tensors, one a device, got a tensor (a list of one is {t})"):format(what)) end
  if type(list) ~= "table" then
    raise(("%s: expected a list of tensors, one a device, got %s"):format(what, errors.show(list)))
  end
  if #list == 0 then raise(("%s: expected at least one tensor, got an empty list"):format(what)) end
  local seen = {}
  for i = 1, #list do
    local t = list[i]
    local name = ("%s[%d]"):format(what, i)
    if not is_tensor(t) then raise(("%s: expected a tensor, got %s"):format(name, errors.show(t))) end
    if t.freed ~= 0 then raise(("%s: the tensor was freed"):format(name)) end
    if t.dense == 0 then
      raise(("%s: expected a contiguous tensor (a collective works on whole buffers), got a strided view; use :contiguous()")
        :format(name))
    end
    local dev = device.wrap(t.dev).name
    if seen[dev] then raise(("%s: on %s, as %s[%d] is: each rank needs a device of its own"):format(name, dev, what, seen[dev])) end
    seen[dev] = i
    if t.elem_type ~= list[1].elem_type then
      raise(("%s: dtype %s, but %s[1] is %s"):format(name, dtype.name(t.elem_type), what, dtype.name(list[1].elem_type)))
    end
    if not shapes_vary and shape_text(t) ~= shape_text(list[1]) then
      raise(("%s: shape %s, but %s[1] is %s"):format(name, shape_text(t), what, shape_text(list[1])))
    end
  end
  return list
end

-- opts.op checked: the reduction's name (sum unless given) and whether it averages.
local function reduction(opts, what)
  if type(opts) ~= "nil" and type(opts) ~= "table" then raise(("%s: expected a table of options, got %s"):format(what, errors.show(opts))) end
  if opts and opts.staged ~= nil and type(opts.staged) ~= "boolean" then
    raise(("%s.staged: expected a boolean, got %s"):format(what, errors.show(opts.staged)))
  end
  local op = opts and opts.op or "sum"
  if not FOLD[op] then raise(("%s.op: expected one of %s, got %s"):format(what, OP_NAMES, errors.show(op))) end
  return op
end

-- The reduction over ranks of sources (tensors of one shape on any devices), in rank order, as
-- a new tensor on dev.
local function reduce_onto(sources, op, dev)
  local acc = sources[1]:clone(dev)
  for i = 2, #sources do
    local s = sources[i]
    local here = device.wrap(s.dev) == dev and s or s:to(dev)
    acc[FOLD[op]](acc, here)
    if here ~= s then here:free() end
  end
  if op == "mean" or op == "avg" then acc:div_(#sources) end
  return acc
end

local function check_mean_dtype(op, t, what)
  if (op == "mean" or op == "avg") and not dtype.is_float(dtype.name(t.elem_type)) then
    raise(("%s.op: %s averages, which needs a float dtype, got %s"):format(what, op, dtype.name(t.elem_type)))
  end
end

-- all_reduce(tensors [, {op =}]): every tensor becomes the reduction (sum unless op says: mean
-- or avg, prod, max, min) of all of them, elementwise, in place. Returns tensors.
function M.all_reduce(tensors, opts)
  check_ranks(tensors, "tensors")
  local op = reduction(opts, "options")
  check_mean_dtype(op, tensors[1], "options")
  if tensors[1].count == 0 then return tensors end
  if through_nccl(C.TOCHA_ALL_REDUCE, op, 0, tensors, tensors, opts) then return tensors end
  local acc = reduce_onto(tensors, op, device.wrap(tensors[1].dev))
  for i = 1, #tensors do tensors[i]:copy(acc) end
  acc:free()
  return tensors
end

-- broadcast(tensors [, {root = 1}]): every tensor becomes a copy of tensors[root]. Returns
-- tensors.
function M.broadcast(tensors, opts)
  check_ranks(tensors, "tensors")
  if type(opts) ~= "nil" and type(opts) ~= "table" then raise(("options: expected a table of options, got %s"):format(errors.show(opts))) end
  local root = opts and opts.root or 1
  if type(root) ~= "number" or root ~= math.floor(root) or root < 1 or root > #tensors then
    raise(("options.root: expected a rank from 1 to %d, got %s"):format(#tensors, errors.show(root)))
  end
  if opts and opts.staged ~= nil and type(opts.staged) ~= "boolean" then
    raise(("options.staged: expected a boolean, got %s"):format(errors.show(opts.staged)))
  end
  if tensors[1].count > 0 and through_nccl(C.TOCHA_BROADCAST, nil, root - 1, tensors, tensors, opts) then return tensors end
  for i = 1, #tensors do
    if i ~= root then tensors[i]:copy(tensors[root]) end
  end
  return tensors
end

-- The shape of a gathered tensor: shape with its first dimension times ranks.
local function gathered_shape(t, ranks)
  local shape = t:shape()
  shape[1] = shape[1] * ranks
  return shape
end

-- Checks or makes outputs: one a rank, on that rank's device, of dtype like inputs[1] and of
-- shape shape_of(inputs[i]) (outputs nil: new tensors).
local function outputs_for(inputs, outputs, shape_of)
  if outputs == nil then
    outputs = {}
    for i, t in ipairs(inputs) do
      outputs[i] = require("tocha.tensor").empty(shape_of(t), { dtype = dtype.name(t.elem_type), device = device.wrap(t.dev) })
    end
    return outputs
  end
  if type(outputs) == "table" and not is_tensor(outputs) and #outputs == 0 and next(outputs) ~= nil then
    raise("outputs: got a table of options where the outputs go: pass nil before the options")
  end
  check_ranks(outputs, "outputs", true)
  if #outputs ~= #inputs then raise(("outputs: %d tensors for %d ranks"):format(#outputs, #inputs)) end
  for i, o in ipairs(outputs) do
    local name = ("outputs[%d]"):format(i)
    if o.dev ~= inputs[i].dev then
      raise(("%s: on %s, but inputs[%d] is on %s"):format(name, device.wrap(o.dev).name, i, device.wrap(inputs[i].dev).name))
    end
    if o.elem_type ~= inputs[1].elem_type then
      raise(("%s: dtype %s, but the inputs are %s"):format(name, dtype.name(o.elem_type), dtype.name(inputs[1].elem_type)))
    end
    local want = "[" .. table.concat(shape_of(inputs[i]), ", ") .. "]"
    if shape_text(o) ~= want then raise(("%s: shape %s, expected %s"):format(name, shape_text(o), want)) end
  end
  return outputs
end

local function check_first_dim(inputs, what)
  if inputs[1].ndim == 0 then raise(("%s[1]: expected a tensor of at least one dimension, got a scalar"):format(what)) end
end

-- all_gather(inputs [, outputs [, {staged}]]): each rank's output is every rank's input in rank order,
-- joined along the first dimension (PyTorch's all_gather_into_tensor): shape [R*d1, d2, ...]
-- for inputs [d1, d2, ...] over R ranks. outputs (one a rank, on its device) are made when not
-- given. Returns outputs.
function M.all_gather(inputs, outputs, opts)
  check_ranks(inputs, "inputs")
  check_first_dim(inputs, "inputs")
  if type(opts) == "table" and opts.op ~= nil then
    raise(("options.op: all_gather reduces nothing, got %s"):format(errors.show(opts.op)))
  end
  reduction(opts, "options")
  local R = #inputs
  outputs = outputs_for(inputs, outputs, function(t) return gathered_shape(t, R) end)
  local d1 = inputs[1]:size(1)
  if inputs[1].count == 0 then return outputs end
  if through_nccl(C.TOCHA_ALL_GATHER, nil, 0, inputs, outputs, opts) then return outputs end
  for i = 1, R do
    for j = 1, R do outputs[i]:narrow(1, (j - 1) * d1 + 1, d1):copy(inputs[j]) end
  end
  return outputs
end

-- reduce_scatter(inputs [, outputs [, {op =}]]): inputs [R*d1, d2, ...] over R ranks; rank i's
-- output [d1, d2, ...] is the reduction (as all_reduce's op) of every rank's i-th slice along
-- the first dimension. outputs are made when not given. Returns outputs.
function M.reduce_scatter(inputs, outputs, opts)
  check_ranks(inputs, "inputs")
  check_first_dim(inputs, "inputs")
  local op = reduction(opts, "options")
  check_mean_dtype(op, inputs[1], "options")
  local R = #inputs
  local rows = inputs[1]:size(1)
  if rows % R ~= 0 then
    raise(("inputs[1]: its first dimension %d does not divide among %d ranks"):format(rows, R))
  end
  local d1 = math.floor(rows / R)
  outputs = outputs_for(inputs, outputs, function(t)
    local shape = t:shape()
    shape[1] = d1
    return shape
  end)
  if inputs[1].count == 0 then return outputs end
  if through_nccl(C.TOCHA_REDUCE_SCATTER, op, 0, inputs, outputs, opts) then return outputs end
  for i = 1, R do
    local slices = {}
    for j = 1, R do slices[j] = inputs[j]:narrow(1, (i - 1) * d1 + 1, d1) end
    local acc = reduce_onto(slices, op, device.wrap(outputs[i].dev))
    outputs[i]:copy(acc)
    acc:free()
  end
  return outputs
end

-- Each function raises as tocha.comm.<name>.
for _, name in ipairs({ "all_reduce", "broadcast", "all_gather", "reduce_scatter" }) do
  M[name] = errors.name(M[name], "comm." .. name)
end

return M
