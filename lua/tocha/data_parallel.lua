-- tocha.DataParallel: one model trained on several devices of this process, PyTorch's
-- DistributedDataParallel in one process. Each device holds a replica of the model (the same
-- graph and ops, parameters of its own); a batch is cut into equal slices along its first
-- dimension, one a device; after the backward each gradient is averaged over the devices
-- (tocha.comm.all_reduce, bucketed), so that one optimizer step a device leaves the same
-- parameters everywhere.
--
--   local dp = tocha.DataParallel(m, { "cuda:0", "cuda:1" }):load(128)  -- 64 a device
--   local opts = dp:optimizers(function(params) return tocha.optim.AdamW(params, { lr = 1e-3 }) end)
--   local loss = dp:train_step({ x }, labels, tocha.loss.cross_entropy, opts)
local tensor = require "tocha.tensor"
local device = require "tocha.device"
local dtype = require "tocha.dtype"
local comm = require "tocha.comm"
local errors = require "tocha.errors"
local raise = errors.raise

local M = {}
local DataParallel = {}
DataParallel.__index = DataParallel
DataParallel.__tostring = function(dp)
  local names = {}
  for i, d in ipairs(dp.devices) do names[i] = d.name end
  return "tocha.DataParallel over " .. table.concat(names, ", ")
end

-- Gradients are gathered into buckets of about this many bytes, one all_reduce a bucket
-- (PyTorch DDP's default bucket_cap_mb).
local BUCKET_BYTES = 25 * 2 ^ 20

local function is_tensor(x) return tensor.is_tensor(x) end

-- tocha.DataParallel(model, devices [, {bucket_bytes =}]): model (a tocha.Model, loaded or
-- not) is the first device's replica; the others are new models over its graph. devices: a
-- list of one or more distinct device names or devices.
function M.new(model, devices, opts)
  local Model = require "tocha.model"
  if not Model.is_model(model) then raise("model: expected a tocha.Model, got " .. errors.show(model)) end
  if type(devices) ~= "table" or #devices < 1 then
    raise("devices: expected a list of devices (names such as \"cuda:0\", \"sim:1\"), got " .. errors.show(devices))
  end
  if type(opts) ~= "nil" and type(opts) ~= "table" then raise("options: expected a table, got " .. errors.show(opts)) end
  local bucket = opts and opts.bucket_bytes or BUCKET_BYTES
  if type(bucket) ~= "number" or bucket < 1 or bucket ~= math.floor(bucket) then
    raise("options.bucket_bytes: expected a positive whole number of bytes, got " .. errors.show(bucket))
  end
  local devs, seen = {}, {}
  for i, d in ipairs(devices) do
    local ok, dev = pcall(device.get, d)
    if not ok then raise(("devices[%d]: %s"):format(i, tostring(dev):gsub("^tocha[^:]*: ", ""))) end
    if seen[dev] then raise(("devices[%d]: %s is listed already, as devices[%d]"):format(i, dev.name, seen[dev])) end
    seen[dev], devs[i] = i, dev
  end
  local models = { model }
  for r = 2, #devs do
    models[r] = Model.new(model.inputs, model.outputs)
    if model.training ~= nil then models[r].training = model.training end
  end
  return setmetatable({ models = models, devices = devs, bucket_bytes = bucket }, DataParallel)
end

local function loaded(self)
  if not self.batch then raise("self: not loaded: call dp:load(batch_size) first") end
end

-- The gradient buckets: trainable parameters in the reverse of the model's order (the order a
-- backward finishes them), cut where a bucket would pass bucket_bytes or the dtype changes;
-- each bucket a flat tensor a device.
local function plan_buckets(self)
  local m = self.models[1]
  local names, params = {}, m:trainable_parameters()
  for i = #m.order, 1, -1 do
    local n = m.order[i]
    for _, pname in ipairs(m.param_names_of[n] or {}) do
      local full = n.name .. "." .. pname
      if params[full] then names[#names + 1] = full end
    end
  end
  local buckets, current = {}, nil
  for _, name in ipairs(names) do
    local t = params[name]
    local dt, count = t:dtype(), t:numel()
    local bytes = count * dtype.size(dt)
    if not current or current.dtype ~= dt or (current.bytes > 0 and current.bytes + bytes > self.bucket_bytes) then
      current = { dtype = dt, bytes = 0, count = 0, entries = {} }
      buckets[#buckets + 1] = current
    end
    current.entries[#current.entries + 1] = { name = name, offset = current.count, count = count, shape = t:shape() }
    current.count, current.bytes = current.count + count, current.bytes + bytes
  end
  for _, b in ipairs(buckets) do
    b.flat = {}
    for r, dev in ipairs(self.devices) do b.flat[r] = tensor.empty({ b.count }, { dtype = b.dtype, device = dev }) end
  end
  return buckets
end

-- dp:load(batch_size): each replica loaded for batch_size / #devices (which must divide) on
-- its device, the first replica's parameters (buffers too) copied to the others. Returns dp.
function DataParallel:load(batch)
  local R = #self.devices
  if type(batch) ~= "number" or batch ~= math.floor(batch) or batch < 1 then
    raise("batch_size: expected a positive integer, got " .. errors.show(batch))
  end
  if batch % R ~= 0 then
    raise(("batch_size: %d does not divide among %d devices"):format(batch, R))
  end
  for r, m in ipairs(self.models) do m:load(batch / R, self.devices[r]) end
  self.batch, self.slice = batch, batch / R
  -- The buffers (parameters no optimizer steps: running statistics), which each forward
  -- copies from the first replica.
  local trainable = self.models[1]:trainable_parameters()
  self.buffer_names = {}
  for name in pairs(self.models[1]:parameters()) do
    if not trainable[name] then self.buffer_names[#self.buffer_names + 1] = name end
  end
  table.sort(self.buffer_names)
  self:broadcast_parameters()
  self.buckets = plan_buckets(self)
  return self
end

-- The first replica's parameters called names (a list) copied to every other replica.
local function broadcast_names(self, names)
  local all = {}
  for r, m in ipairs(self.models) do all[r] = m:parameters() end
  for _, name in ipairs(names) do
    local ranks = {}
    for r = 1, #self.models do ranks[r] = all[r][name] end
    comm.broadcast(ranks)
  end
end

-- Each parameter (buffers too, unless trainable_only) of every replica set to the first's.
function DataParallel:broadcast_parameters(trainable_only)
  loaded(self)
  local names = {}
  for name in pairs(trainable_only and self.models[1]:trainable_parameters() or self.models[1]:parameters()) do
    names[#names + 1] = name
  end
  broadcast_names(self, names)
end

-- dp:scatter(t): t's equal slices along its first dimension, slice r on device r (a list). t
-- has the whole batch (dp:load's batch_size) there. A list of slices already scattered (one a
-- device, on it, each a slice's batch along the first dimension) is checked and given back, so
-- that data placed once is not copied each step.
function DataParallel:scatter(t, what)
  loaded(self)
  what = what or "t"
  if type(t) == "table" and not is_tensor(t) then
    if #t ~= #self.devices then
      raise(("%s: expected a tensor of the whole batch or a list of %d slices, one a device, got a list of %d")
        :format(what, #self.devices, #t))
    end
    for r, s in ipairs(t) do
      if not is_tensor(s) then raise(("%s[%d]: expected a tensor, got %s"):format(what, r, errors.show(s))) end
      if device.wrap(s.dev) ~= self.devices[r] then
        raise(("%s[%d]: on %s, but device %d is %s"):format(what, r, device.wrap(s.dev).name, r, self.devices[r].name))
      end
      if s.ndim == 0 or s:size(1) ~= self.slice then
        raise(("%s[%d]: expected a slice of %d along the first dimension, got shape [%s]"):format(what, r, self.slice,
          table.concat(s:shape(), ", ")))
      end
    end
    return t
  end
  if not is_tensor(t) then raise(("%s: expected a tensor, got %s"):format(what, errors.show(t))) end
  if t.ndim == 0 or t:size(1) ~= self.batch then
    raise(("%s: expected the whole batch, %d along the first dimension, got shape [%s]"):format(what, self.batch,
      table.concat(t:shape(), ", ")))
  end
  local out = {}
  for r, dev in ipairs(self.devices) do out[r] = t:narrow(1, (r - 1) * self.slice + 1, self.slice):to(dev) end
  return out
end

-- dp:forward_train(inputs): inputs a list of whole-batch tensors (as the model's forward
-- takes, on any device; or each a list of slices, as dp:scatter gives); the first replica's
-- buffers (running statistics) are copied to the others first, as DDP does. Returns the
-- outputs a device (outputs[r] a list) and the caches.
function DataParallel:forward_train(inputs)
  loaded(self)
  if type(inputs) ~= "table" or is_tensor(inputs) then raise("inputs: expected a list of tensors, got " .. errors.show(inputs)) end
  if #self.models > 1 then broadcast_names(self, self.buffer_names) end
  local slices = {}
  for i, t in ipairs(inputs) do slices[i] = self:scatter(t, ("inputs[%d]"):format(i)) end
  local outputs, caches = {}, {}
  for r, m in ipairs(self.models) do
    local ins = {}
    for i = 1, #inputs do ins[i] = slices[i][r] end
    outputs[r], caches[r] = m:forward_train(ins)
  end
  return outputs, caches
end

-- dp:all_reduce_gradients(grads): grads[r] (name -> tensor, as m:backward gives) averaged over
-- the devices, a bucket at a time: each device's gradients copied into its bucket's flat
-- tensor, one all_reduce (mean) a bucket. Returns, a device, name -> views of the averaged
-- buckets (the same values on every device).
function DataParallel:all_reduce_gradients(grads)
  loaded(self)
  local R = #self.models
  if type(grads) ~= "table" or #grads ~= R then
    raise(("grads: expected a list of %d tables of gradients, one a device, got %s"):format(R, errors.show(grads)))
  end
  for r = 1, R do
    if type(grads[r]) ~= "table" or is_tensor(grads[r]) then
      raise(("grads[%d]: expected a table of gradients by parameter name, got %s"):format(r, errors.show(grads[r])))
    end
  end
  for r = 1, R do
    for _, b in ipairs(self.buckets) do
      for _, e in ipairs(b.entries) do
        local g = grads[r][e.name]
        if not is_tensor(g) then raise(("grads[%d]: no gradient for %s"):format(r, e.name)) end
        if g.freed ~= 0 then raise(("grads[%d].%s: the tensor was freed"):format(r, e.name)) end
        local shape = "[" .. table.concat(g:shape(), ", ") .. "]"
        if g:dtype() ~= b.dtype or shape ~= "[" .. table.concat(e.shape, ", ") .. "]" then
          raise(("grads[%d].%s: %s %s, but the parameter is %s [%s]"):format(r, e.name, g:dtype(), shape, b.dtype,
            table.concat(e.shape, ", ")))
        end
      end
    end
  end
  if R == 1 then return { grads[1] } end -- one device: nothing to average
  local out = {}
  for r = 1, R do out[r] = {} end
  for _, b in ipairs(self.buckets) do
    for r = 1, R do
      for _, e in ipairs(b.entries) do
        b.flat[r]:narrow(1, e.offset + 1, e.count):copy(grads[r][e.name]:reshape({ e.count }))
      end
    end
    comm.all_reduce(b.flat, { op = "mean" })
    for r = 1, R do
      for _, e in ipairs(b.entries) do out[r][e.name] = b.flat[r]:narrow(1, e.offset + 1, e.count):view(e.shape) end
    end
  end
  return out
end

-- dp:backward(grad_outputs, caches): grad_outputs[r] the gradients of replica r's outputs (a
-- list, as m:backward takes), caches from dp:forward_train. Returns the averaged parameter
-- gradients, a table name -> tensor a device.
function DataParallel:backward(grad_outputs, caches)
  loaded(self)
  local R = #self.models
  if type(grad_outputs) ~= "table" or #grad_outputs ~= R then
    raise(("grad_outputs: expected a list of %d lists of gradients, one a device"):format(R))
  end
  if type(caches) ~= "table" or #caches ~= R then raise(("caches: expected the %d caches of dp:forward_train"):format(R)) end
  local grads = {}
  for r, m in ipairs(self.models) do
    local _, g = m:backward(grad_outputs[r], caches[r], { inputs = false })
    grads[r] = g
  end
  return self:all_reduce_gradients(grads)
end

-- dp:optimizers(make): make(params) (params: a replica's trainable parameters) called for each
-- device; returns the list of optimizers, one a device.
function DataParallel:optimizers(make)
  loaded(self)
  if type(make) ~= "function" then raise("make: expected a function(params) returning an optimizer, got " .. errors.show(make)) end
  local out = {}
  for r, m in ipairs(self.models) do out[r] = make(m:trainable_parameters()) end
  return out
end

-- dp:train_step(inputs, target, loss_fn, optimizers): one step over the whole batch: forward
-- on every device, loss_fn(outputs[1], target_slice) -> loss, grad (tocha.loss's form) on each
-- slice, backward, the gradients averaged, each optimizer's step. Returns the loss averaged
-- over the devices (a number: the whole batch's mean loss when loss_fn averages).
function DataParallel:train_step(inputs, target, loss_fn, optimizers)
  loaded(self)
  if type(loss_fn) ~= "function" then raise("loss_fn: expected a function(output, target) -> loss, grad, got " .. errors.show(loss_fn)) end
  if type(optimizers) ~= "table" or #optimizers ~= #self.models then
    raise(("optimizers: expected a list of %d optimizers (dp:optimizers), got %s"):format(#self.models, errors.show(optimizers)))
  end
  local targets = self:scatter(target, "target")
  local outputs, caches = self:forward_train(inputs)
  local grad_outputs, losses = {}, {}
  for r = 1, #self.models do
    local loss, grad = loss_fn(outputs[r][1], targets[r])
    losses[r], grad_outputs[r] = loss, { grad }
  end
  local grads = self:backward(grad_outputs, caches)
  for r, opt in ipairs(optimizers) do opt:step(grads[r]) end
  -- The losses are read last, so that no device waits for the host in the middle of a step.
  local total = 0
  for r = 1, #losses do total = total + losses[r]:cast("f64"):to_table(true)[1] end
  return total / #self.models
end

-- dp:train([flag]): every replica in training mode (flag true, the default) or inference mode,
-- as m:train does for one model (the replicas share their ops, so each replica's launches are
-- packed again). Returns dp.
function DataParallel:train(flag)
  for _, m in ipairs(self.models) do m:train(flag) end
  return self
end

-- The first replica's parameters (name -> tensor): those a checkpoint saves.
function DataParallel:parameters()
  loaded(self)
  return self.models[1]:parameters()
end

errors.methods(DataParallel, "DataParallel:", function(v) return getmetatable(v) == DataParallel end)
M.new = errors.name(M.new, "DataParallel")
return M
