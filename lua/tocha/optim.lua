-- tocha.optim: SGD and AdamW over a model's parameters, each step one launch over all of them
-- (kernels/optim.cu, a multi-tensor kernel), their state kept on the device and saved or loaded
-- as safetensors.
--
--   local opt = tocha.optim.AdamW(m:parameters(), { lr = 1e-3, weight_decay = 1e-2 })
--   local out, cache = m:forward_train({ x })
--   local loss, dy = tocha.loss.cross_entropy(out[1], labels)
--   local _, grads = m:backward({ dy }, cache, { inputs = false })
--   opt:step(grads)                                  -- grads: name -> tensor, as m:backward gives
--
-- A model's backward gives new gradient tensors each call, so there is nothing to zero; to
-- accumulate over several batches, add them (g[name]:add_(g2[name])) before the step.
-- Options as PyTorch's: SGD {lr (required), momentum = 0, dampening = 0, nesterov = false,
-- weight_decay = 0}; AdamW {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 1e-2}.
-- Halves keep their moments and momentum in f32 (f64 parameters in f64).
local ffi = require "ffi"
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local tensor = require "tocha.tensor"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local raise = errors.raise

local M = {}

local CHUNK = 8192 -- kernels/optim.cu's OPTIM_CHUNK
local BLOCK = 256

local Optimizer = {}
Optimizer.__index = Optimizer
Optimizer.__tostring = function(o) return ("tocha.optim.%s (%d parameters)"):format(o.kind, #o.names) end

local function number_option(opts, key, default, what_range, ok)
  local v = opts[key]
  if v == nil then v = default end
  if type(v) ~= "number" or not ok(v) then raise(("%s: expected %s, got %s"):format(key, what_range, errors.show(v))) end
  return v
end

local function check_options(opts, known, kind) return op.options(opts, known, "tocha.optim." .. kind) end

-- The parameters: a table of name -> tensor (m:parameters()), in name order; one dtype and one
-- device for all.
local function parameter_list(params)
  if type(params) ~= "table" then raise("params: expected a table of name -> tensor (m:parameters()), got " .. type(params)) end
  local names = {}
  for name, t in pairs(params) do
    if type(name) ~= "string" then raise("params: expected names as keys, got " .. type(name)) end
    op.live_tensor(t, ("params[%q]"):format(name))
    names[#names + 1] = name
  end
  if #names == 0 then raise("params: no parameters") end
  table.sort(names)
  local first = params[names[1]]
  local dt = dtype.name(first.elem_type)
  if not dtype.is_float(dt) then raise(("params[%q]: expected a float tensor, got %s"):format(names[1], dt)) end
  for _, name in ipairs(names) do
    local t = params[name]
    if dtype.name(t.elem_type) ~= dt then
      raise(("params[%q]: expected dtype %s (as %s), got %s"):format(name, dt, names[1], dtype.name(t.elem_type)))
    end
    if t.dev ~= first.dev then raise(("params[%q]: on another device than %s"):format(name, names[1])) end
  end
  return names, dt, device.wrap(first.dev)
end

local function make(kind, params, opts, nstates)
  local names, dt, dev = parameter_list(params)
  local self = setmetatable({ kind = kind, names = names, params = {}, dtype = dt, device = dev, steps = 0,
    opts = opts }, Optimizer)
  local sdt = dt == "f64" and "f64" or "f32"
  self.state_dtype = sdt
  self.states = {}
  local chunks = 0
  for i, name in ipairs(names) do
    local t = params[name]
    self.params[i] = t
    local s = {}
    for k = 1, nstates do s[k] = tensor.zeros(t:shape(), { dtype = sdt, device = dev }) end
    self.states[i] = s
    chunks = chunks + math.ceil(tonumber(t.count) / CHUNK)
  end
  self.chunks = chunks
  if chunks > 2 ^ 31 - 1 then raise("params: more than 2^31 - 1 chunks of 8192 elements") end
  self.kernel = kernel.new { source = op.source("optim.cu"), name = "tocha_optim_step",
    template_args = ("%s, %d"):format(dtype.ctype(dt), kind == "SGD" and 0 or 1),
    params = "i64* table, i64 tensors, f64 lr, f64 a, f64 b, f64 c, f64 weight_decay, f64 bc1, f64 bc2, i32 nesterov, i32 first" }
  return self
end

-- tocha.optim.SGD(params [, opts])
function M.SGD(params, opts)
  opts = check_options(opts, { lr = true, momentum = true, dampening = true, nesterov = "boolean", weight_decay = true }, "SGD")
  if opts.lr == nil then raise("lr: expected a learning rate (SGD has no default), got nil") end
  local o = {
    lr = number_option(opts, "lr", nil, "a non-negative number", function(v) return v >= 0 end),
    momentum = number_option(opts, "momentum", 0, "a non-negative number", function(v) return v >= 0 end),
    dampening = number_option(opts, "dampening", 0, "a number", function(v) return v == v end),
    weight_decay = number_option(opts, "weight_decay", 0, "a non-negative number", function(v) return v >= 0 end),
    nesterov = opts.nesterov == true,
  }
  if o.nesterov and (o.momentum <= 0 or o.dampening ~= 0) then
    raise("nesterov: needs a momentum and zero dampening")
  end
  local self = make("SGD", params, o, o.momentum ~= 0 and 1 or 0)
  return self
end

-- tocha.optim.AdamW(params [, opts])
function M.AdamW(params, opts)
  opts = check_options(opts, { lr = true, betas = true, eps = true, weight_decay = true }, "AdamW")
  local betas = opts.betas or { 0.9, 0.999 }
  if type(betas) ~= "table" or #betas ~= 2 then raise("betas: expected {beta1, beta2}, got " .. errors.show(betas)) end
  for i = 1, 2 do
    if type(betas[i]) ~= "number" or not (betas[i] >= 0 and betas[i] < 1) then
      raise(("betas[%d]: expected a number in [0, 1), got %s"):format(i, errors.show(betas[i])))
    end
  end
  local o = {
    lr = number_option(opts, "lr", 1e-3, "a non-negative number", function(v) return v >= 0 end),
    eps = number_option(opts, "eps", 1e-8, "a non-negative number", function(v) return v >= 0 end),
    weight_decay = number_option(opts, "weight_decay", 1e-2, "a non-negative number", function(v) return v >= 0 end),
    betas = { betas[1], betas[2] },
  }
  local self = make("AdamW", params, o, 2)
  return self
end

-- opt:step(grads): one step; grads a table name -> gradient tensor (every parameter's, of its
-- shape, dtype and device). Returns opt.
function Optimizer:step(grads)
  if type(grads) ~= "table" then raise("grads: expected a table of name -> tensor (m:backward's second result), got " .. type(grads)) end
  local n = #self.names
  local tbl = ffi.new("uint64_t[?]", n * 6)
  local chunk = 0
  for i, name in ipairs(self.names) do
    local g, p = grads[name], self.params[i]
    if g == nil then raise(("grads[%q]: missing (every parameter needs its gradient)"):format(name)) end
    op.live_tensor(g, ("grads[%q]"):format(name))
    if p.freed ~= 0 then raise(("params[%q]: tensor was freed"):format(name)) end
    if dtype.name(g.elem_type) ~= self.dtype then
      raise(("grads[%q]: expected dtype %s, got %s"):format(name, self.dtype, dtype.name(g.elem_type)))
    end
    op.same_shape(g, p:shape(), ("grads[%q]"):format(name), "its parameter's")
    if g.dev ~= p.dev then raise(("grads[%q]: on another device than its parameter"):format(name)) end
    local s = self.states[i]
    tbl[(i - 1) * 6], tbl[(i - 1) * 6 + 1] = p.data, g.data
    tbl[(i - 1) * 6 + 2] = s[1] and s[1].data or p.data
    tbl[(i - 1) * 6 + 3] = s[2] and s[2].data or p.data
    tbl[(i - 1) * 6 + 4], tbl[(i - 1) * 6 + 5] = p.count, chunk
    chunk = chunk + math.ceil(tonumber(p.count) / CHUNK)
  end
  for name in pairs(grads) do
    if self.params_index == nil then
      self.params_index = {}
      for i, nm in ipairs(self.names) do self.params_index[nm] = i end
    end
    if not self.params_index[name] then raise(("grads[%q]: no parameter of that name"):format(tostring(name))) end
  end
  -- The table on the device: written again only when an address changed (a model's gradients
  -- come back at the same addresses from the memory pool, step after step).
  local same = self.table_host ~= nil
  if same then
    for k = 0, n * 6 - 1 do
      if self.table_host[k] ~= tbl[k] then same = false break end
    end
  end
  if not same then
    if self.table then self.table:free() end -- after the last step's launch in stream order
    self.table = tensor.alloc({ n * 6 }, "i64", self.device)
    self.table:write(tbl, n * 6 * 8)
    self.table_host = tbl
  end
  local table_t = self.table
  self.steps = self.steps + 1
  local o = self.opts
  local args
  if self.kind == "SGD" then
    args = { table_t.data, n, o.lr, o.momentum, o.dampening, 0, o.weight_decay, 1, 1, o.nesterov and 1 or 0,
      self.steps == 1 and 1 or 0 }
  else
    local b1, b2 = o.betas[1], o.betas[2]
    args = { table_t.data, n, o.lr, b1, b2, o.eps, o.weight_decay, 1 - b1 ^ self.steps, math.sqrt(1 - b2 ^ self.steps), 0, 0 }
  end
  op.launch_packed(self.kernel, self.device, { self.chunks, 1, 1 }, { BLOCK, 1, 1 }, args)
  return self
end

-- opt:state(): the state tensors by name ("<param>.exp_avg", "<param>.exp_avg_sq",
-- "<param>.momentum_buffer") and the step count.
-- opt:set_lr(lr): the learning rate of the steps that follow (a schedule: PyTorch's
-- param_group["lr"] = lr); returns opt. opt:lr() reads it.
function Optimizer:set_lr(lr)
  if type(lr) ~= "number" or lr ~= lr or lr < 0 or lr == math.huge then
    raise("lr: expected a non-negative number, got " .. errors.show(lr))
  end
  self.opts.lr = lr
  return self
end
function Optimizer:lr() return self.opts.lr end

function Optimizer:state()
  local out = {}
  local labels = self.kind == "SGD" and { "momentum_buffer" } or { "exp_avg", "exp_avg_sq" }
  for i, name in ipairs(self.names) do
    for k, s in ipairs(self.states[i]) do out[name .. "." .. labels[k]] = s end
  end
  return out, self.steps
end

-- opt:save(path): the state and the step count in a safetensors file (metadata "step", "kind").
function Optimizer:save(path)
  local state = self:state()
  require("tocha.safetensors").save(path, state, { step = tostring(self.steps), kind = self.kind })
end

-- opt:load(path): the state and the step count from a file opt:save wrote for the same
-- parameters; every tensor is checked (names, shapes, dtypes) before any is copied.
function Optimizer:load(path)
  local file, meta = require("tocha.safetensors").load(path, { device = self.device })
  local state = self:state()
  if not meta or meta.kind ~= self.kind or not tonumber(meta.step) then
    raise(("path: not a %s state (its metadata names kind %s)"):format(self.kind, meta and tostring(meta.kind) or "nil"))
  end
  for name, t in pairs(state) do
    local f = file[name]
    if not f then raise(("path: the file lacks %s"):format(name)) end
    if f:dtype() ~= t:dtype() then raise(("path: %s is %s, expected %s"):format(name, f:dtype(), t:dtype())) end
    op.same_shape(f, t:shape(), "path: " .. name, "the state's")
  end
  for name in pairs(file) do
    if not state[name] then raise(("path: %s is no state of this optimizer"):format(name)) end
  end
  for name, t in pairs(state) do t:copy(file[name]) end
  self.steps = tonumber(meta.step)
  return self
end

errors.register(M, "optim.")
errors.methods(Optimizer, "optim.Optimizer:", function(o) return getmetatable(o) == Optimizer end)
return M
