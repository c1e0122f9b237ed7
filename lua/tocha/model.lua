-- tocha.Model: a DAG of RuntimeOps, built from Lua in the manner of Torch7's nngraph, loaded
-- for a batch size and run forward with buffers planned by liveness.
--
--   local x = tocha.Model.input({ -1, 16, 20, 20 })   -- -1: the batch, given at load
--   local up = tocha.UpsampleNearest2dForward.new(2, 2)
--   local y = up(x)                                    -- calling an op on nodes makes a node
--   local m = tocha.Model({ x }, { y })
--   m:load(8)                                          -- shapes checked, buffers planned
--   local out = m:forward({ xt })                      -- out[1]: y's tensor
--
-- An op is anything with the RuntimeOp methods the forward needs: compute_concrete_output_shape
-- (input shapes -> output shape), grid(output shape), block(), pack_args(inputs, params,
-- output, output shape) and a `kernel` to launch with the packed arguments, and a `dtype`
-- (its output's). tocha's upsample kernels are such ops; tocha.Model.op builds one from Lua
-- functions around a tocha.kernel.
--
-- Buffers: each intermediate node's output lives in a block of the model's storage; once the
-- last node that reads it has run, its block serves a later node (best fit by size). The
-- model's outputs are tensors of their own, and m:forward returns them: the next forward
-- overwrites them (clone what must be kept).
local bit = require "bit"
local tensor = require "tocha.tensor"
local device = require "tocha.device"
local dtype = require "tocha.dtype"
local errors = require "tocha.errors"
local op_base = require "tocha.op"
local shape_facts = require "tocha.shape"
local plan = require "tocha.plan"
local ffi = require "ffi"
local native = require "tocha.ffi"
local raise, C = errors.raise, native.C

local M = {}

local Node = {}
Node.__index = Node

-- node:named(name): gives the node a name of its own (for errors, dot and its parameters'
-- names, "<node>.<param>"); returns the node. Before the model is made.
function Node:named(name)
  -- (dots are allowed, as in PyTorch's module paths "layer1.0.conv1": a parameter's name is
  -- what follows the last dot, since parameter names have none)
  if type(name) ~= "string" or name == "" or name:find("%s") or name:find("^%.") or name:find("%.$") or name:find("..", 1, true) then
    raise("name: expected a name without spaces, not starting or ending with a dot or holding two together, got "
      .. (type(name) == "string" and ('"' .. name .. '"') or type(name)))
  end
  self.name = name
  return self
end
Node.__tostring = function(n) return "tocha.Model node " .. n.name end

local Model = {}
Model.__index = Model

local next_id = 0
local function new_node(fields)
  next_id = next_id + 1
  fields.id = next_id
  return setmetatable(fields, Node)
end

local function is_node(v) return getmetatable(v) == Node end

-- A readable kind for an op: its class name where it has one.
-- Whether parameter i of node n is trained (a batch norm's running statistics are buffers: kept
-- and saved, not trained).
local function trainable(n, i)
  return not (n.op.param_trainable and n.op:param_trainable(i) == false)
end

-- Whether node n is a view of its input (Flatten, View): no launch, its output is its
-- input's memory seen with another shape.
local function is_view(n) return n.op ~= nil and n.op.is_view == true end

-- The node whose memory a view node shows (itself for any other node).
local function root_of(n)
  while is_view(n) do n = n.inputs[1] end
  return n
end

local function op_kind(op) return type(op.kind) == "string" and op.kind or "op" end

-- tocha.Model.input(shape [, opts]): an input node; shape's first size may be -1 (the batch).
-- opts: dtype (default f32), name.
function M.input(shape, opts)
  if type(shape) ~= "table" or #shape == 0 then raise("shape: expected a list of sizes, got " .. type(shape)) end
  for i, s in ipairs(shape) do
    if type(s) ~= "number" or s ~= math.floor(s) or (s < 1 and not (s == -1 and i == 1)) then
      raise(("shape[%d]: expected a positive integer (or -1 for the batch, first), got %s"):format(i, errors.show(s)))
    end
  end
  opts = opts or {}
  if type(opts) ~= "table" then raise("options: expected a table {dtype=, name=}, got " .. type(opts)) end
  local dt = opts.dtype or "f32"
  dtype.id(dt)
  local copy = {}
  for i, s in ipairs(shape) do copy[i] = s end
  local node = new_node { shape = copy, dtype = dt, inputs = {} }
  node.name = opts.name or ("input %d"):format(node.id)
  return node
end

-- tocha.Model.node(op, inputs...): the node of op applied to the given nodes (also op(inputs...)
-- for tocha's ops).
function M.node(op, ...)
  if type(op) ~= "table" or type(op.compute_concrete_output_shape) ~= "function" then
    raise("op: expected an op (RuntimeOp methods), got " .. type(op))
  end
  local inputs = { ... }
  local n = select("#", ...)
  if n == 0 then raise("inputs: an op needs at least one input node") end
  for i = 1, n do
    if not is_node(inputs[i]) then raise(("inputs[%d]: expected a node, got %s"):format(i, type(inputs[i]))) end
  end
  local node = new_node { op = op, inputs = inputs }
  node.name = ("%s %d"):format(op_kind(op), node.id)
  return node
end

-- tocha.Model.op{kernel =, dtype =, output_shape = function(input_shapes) ... end,
-- grid = function(output_shape) ... end, block = {x, y, z} or number,
-- args = function(input_addresses, output_address, input_shapes, output_shape) ... end [, name =]
-- [, grad_kernel =, grad_args = function(input_addresses, output_address, grad_output_address,
--    grad_input_addresses, input_shapes, output_shape) ... end [, grad_grid = function(input_shapes,
--    output_shape) ... end]]}:
-- [, params = { {name =, shape = function(input_shapes, output_shape) ... end [, init = number]}, ... }]
-- a RuntimeOp whose methods are these Lua functions around a tocha.kernel; with grad_kernel and
-- grad_args it has a backward (its grid grad_grid, else grid(output_shape)), which writes every
-- input's gradient. With params, args and grad_args get the parameters' addresses last (and
-- grad_args the addresses of their gradients after those), in the order listed; a parameter
-- starts at init (default 0) in every element.
local LuaOp = op_base.class("Model.op")

function M.op(spec)
  if type(spec) ~= "table" then raise("spec: expected a table, got " .. type(spec)) end
  for _, key in ipairs({ "output_shape", "grid", "args" }) do
    if type(spec[key]) ~= "function" then raise(("spec.%s: expected a function, got %s"):format(key, type(spec[key]))) end
  end
  if type(spec.kernel) ~= "table" or type(spec.kernel.launch) ~= "function" then
    raise("spec.kernel: expected a tocha.kernel, got " .. type(spec.kernel))
  end
  if spec.grad_kernel ~= nil or spec.grad_args ~= nil then
    if type(spec.grad_kernel) ~= "table" or type(spec.grad_kernel.launch) ~= "function" then
      raise("spec.grad_kernel: expected a tocha.kernel, got " .. type(spec.grad_kernel))
    end
    if type(spec.grad_args) ~= "function" then raise("spec.grad_args: expected a function, got " .. type(spec.grad_args)) end
    if type(spec.grad_grid) ~= "nil" and type(spec.grad_grid) ~= "function" then
      raise("spec.grad_grid: expected a function, got " .. type(spec.grad_grid))
    end
  end
  if spec.params ~= nil then
    if type(spec.params) ~= "table" then raise("spec.params: expected a list of {name, shape}, got " .. type(spec.params)) end
    for i, prm in ipairs(spec.params) do
      if type(prm) ~= "table" or type(prm.name) ~= "string" or prm.name == "" or type(prm.shape) ~= "function" then
        raise(("spec.params[%d]: expected {name = string, shape = function [, init = number]}"):format(i))
      end
      if type(prm.init) ~= "nil" and type(prm.init) ~= "number" then
        raise(("spec.params[%d].init: expected a number, got %s"):format(i, type(prm.init)))
      end
    end
  end
  local dt = spec.dtype or "f32"
  dtype.id(dt)
  local block = spec.block or 128
  if type(block) == "number" then block = { block, 1, 1 } end
  if type(block) ~= "table" then raise("spec.block: expected a number or {x, y, z}, got " .. type(block)) end
  return setmetatable({ kernel = spec.kernel, grad_kernel = spec.grad_kernel, dtype = dt, kind = spec.name or "op",
    id = spec.name or "op", spec = spec, block_dims = block }, LuaOp)
end

-- The RuntimeOp methods of an op made by tocha.Model.op (tocha.op's defaults for the rest).
local function no_backward(self)
  if not self.grad_kernel then raise("self: the op has no backward (give tocha.Model.op grad_kernel and grad_args)") end
end

function LuaOp:compute_concrete_output_shape(shapes) return self.spec.output_shape(shapes) end
function LuaOp:grid(output_shape) return self.spec.grid(output_shape) end
function LuaOp:block() return self.block_dims end
function LuaOp:pack_args(inputs, params, output, output_shape)
  local addresses, shapes = {}, {}
  for i, item in ipairs(inputs) do addresses[i], shapes[i] = item[1], item[2] end
  return self.spec.args(addresses, output, shapes, output_shape, params or {})
end
-- The backward methods a model calls, for ops given grad_kernel and grad_args.
function LuaOp:pack_backward_args(inputs, params, output, output_shape, grad_output, _, grad_inputs, grad_params)
  no_backward(self)
  local addresses, shapes = {}, {}
  for i, item in ipairs(inputs) do addresses[i], shapes[i] = item[1], item[2] end
  local g = tensor.is_tensor(grad_output) and grad_output.data or grad_output
  return self.spec.grad_args(addresses, output, g, grad_inputs, shapes, output_shape, params or {}, grad_params or {})
end
-- The parameter methods of the RuntimeOp, from spec.params.
function LuaOp:param_names()
  local names = {}
  for i, prm in ipairs(self.spec.params or {}) do names[i] = prm.name end
  return names
end
function LuaOp:param_shapes(input_shapes, output_shape)
  local shapes = {}
  for i, prm in ipairs(self.spec.params or {}) do shapes[i] = prm.shape(input_shapes, output_shape) end
  return shapes
end
function LuaOp:backward_grid(shapes, output_shape)
  no_backward(self)
  if self.spec.grad_grid then return self.spec.grad_grid(shapes, output_shape) end
  return self.spec.grid(output_shape)
end
function LuaOp:backward_block()
  no_backward(self)
  return self.block_dims
end
op_base.finish(LuaOp)

-- The nodes that outputs depend on, inputs first, in an order where each comes after its
-- inputs; raises for a cycle and for a leaf that is not one of the model's inputs.
local function order_of(inputs, outputs)
  local is_input = {}
  for _, n in ipairs(inputs) do is_input[n] = true end
  local order, state = {}, {}
  local function visit(n, from)
    if state[n] == "done" then return end
    if state[n] == "open" then raise(("outputs: the graph has a cycle through %s"):format(n.name)) end
    state[n] = "open"
    if not n.op then
      if not is_input[n] then
        raise(("outputs: %s reads %s, which is not one of the model's inputs"):format(from and from.name or "an output", n.name))
      end
    end
    for _, i in ipairs(n.inputs) do visit(i, n) end
    state[n] = "done"
    order[#order + 1] = n
  end
  for _, n in ipairs(outputs) do visit(n, nil) end
  return order
end

-- tocha.Model(inputs, outputs): a model from lists of nodes.
function M.new(inputs, outputs)
  for _, list in ipairs({ { inputs, "inputs" }, { outputs, "outputs" } }) do
    if type(list[1]) ~= "table" or #list[1] == 0 then raise(list[2] .. ": expected a list of nodes") end
    for i, n in ipairs(list[1]) do
      if not is_node(n) then raise(("%s[%d]: expected a node, got %s"):format(list[2], i, type(n))) end
    end
  end
  local listed = {}
  for i, n in ipairs(inputs) do
    if n.op then raise(("inputs[%d]: %s is not an input node (tocha.Model.input)"):format(i, n.name)) end
    -- One tensor a node: a node listed twice would take two tensors and read one of them.
    if listed[n] then raise(("inputs[%d]: %s is listed already, as inputs[%d]"):format(i, n.name, listed[n])) end
    listed[n] = i
  end
  local order = order_of(inputs, outputs)
  local input_index = {}
  for i, n in ipairs(inputs) do input_index[n] = i end
  return setmetatable({ inputs = inputs, outputs = outputs, order = order, input_index = input_index }, Model)
end

local shape_text, numel = shape_facts.text, shape_facts.numel

-- A parameter's seed from its name: FNV-1a over its bytes, 32 bits (the prime 2^24 + 403
-- multiplied in two parts, each exact in a double).
local function name_seed(name)
  local h = 2166136261
  for i = 1, #name do
    h = bit.bxor(h, name:byte(i)) % 4294967296
    h = ((h % 256) * 16777216 + h * 403) % 4294967296
  end
  return h
end

-- Raises unless shape (what node's op computed) is a list of 1 to 8 positive integer sizes: a
-- size of 2.5 would be cut to 2 on its way to C, a size of 0 or a string would reach the
-- planner.
local function check_output_shape(node, shape)
  if type(shape) ~= "table" or #shape < 1 or #shape > 8 then
    raise(("%s: its op's output shape: expected a list of 1 to 8 sizes, got %s"):format(node.name,
      type(shape) == "table" and (#shape .. " sizes") or errors.show(shape)))
  end
  for i, v in ipairs(shape) do
    if type(v) ~= "number" or v ~= math.floor(v) or v < 1 or v > 2 ^ 53 then
      raise(("%s: its op's output shape: size %d: expected a positive integer, got %s"):format(node.name, i, errors.show(v)))
    end
  end
  local n = 0
  for _ in pairs(shape) do n = n + 1 end
  if n ~= #shape then raise(("%s: its op's output shape: expected a list, got other keys"):format(node.name)) end
end

-- The addresses of node n's parameters, in its op's order.
-- An op that declares a workspace (op:workspace_bytes) finds its address after them.
local function param_addresses(self, n)
  local out = {}
  for i, t in ipairs(self.params[n] or {}) do out[i] = t.data end
  if n.op.workspace_bytes then out[#out + 1] = self.workspace and self.workspace.data or 0 end
  return out
end

-- Adds node n's forward launches to the plan p, its inputs and output at their slots' placeholder
-- addresses: one launch, or each of an op's n_launches() in turn (a launch whose grid has 0 CTAs
-- has nothing to do).
local function plan_node(self, p, n)
  if is_view(n) then return end -- no launch: its slot holds its input's address
  local op, ins, shapes = n.op, {}, {}
  for i, input in ipairs(n.inputs) do
    ins[i], shapes[i] = { plan.slot(self.slot[input]), self.shape[input] }, self.shape[input]
  end
  local out, out_shape, params = plan.slot(self.slot[n]), self.shape[n], param_addresses(self, n)
  local count = op.n_launches and op:n_launches() or 1
  if count == 1 then
    p:add(op.kernel, op:grid(out_shape), op:block(), op:pack_args(ins, params, out, out_shape))
    return
  end
  for i = 1, count do
    local grid = op:grid_for_launch(i, shapes, out_shape)
    if grid[1] > 0 then
      local k = op.kernel_for_launch and op:kernel_for_launch(i, shapes, out_shape) or op.kernel
      p:add(k, grid, op:block(), op:pack_args_for_launch(i, ins, params, out, out_shape))
    end
  end
end

-- The model's launch plan: a slot for every input and every op node's output (in self.order's
-- order), every node's launches packed once, and the parameters guarded. self.slots holds the
-- addresses of forward's buffers; a forward sets its inputs' slots and runs the plan.
local function build_plan(self)
  local slot, count = {}, 0
  for _, n in ipairs(self.inputs) do count = count + 1; slot[n] = count end
  for _, n in ipairs(self.order) do
    if n.op then count = count + 1; slot[n] = count end
  end
  self.slot = slot
  local p = plan.new(self.device, count)
  self.launch_range = {} -- node -> {first, count}: its launches in the plan (m:profile)
  for _, n in ipairs(self.order) do
    if n.op then
      local before = p:launches()
      plan_node(self, p, n)
      self.launch_range[n] = { before + 1, p:launches() - before }
      for i, t in ipairs(self.params[n] or {}) do p:guard(t, n.name .. "." .. self.param_names_of[n][i]) end
    end
  end
  self.slots = ffi.new("uint64_t[?]", math.max(count, 1))
  for _, n in ipairs(self.order) do
    -- (a view of a model input takes its address at each run: views_of_inputs)
    if n.op and self.buffer[n] then self.slots[slot[n] - 1] = self.buffer[n].tensor.data end
  end
  self.views_of_inputs = {}
  for _, n in ipairs(self.order) do
    if is_view(n) and not root_of(n).op then self.views_of_inputs[#self.views_of_inputs + 1] = n end
  end
  self.launch_plan = p
end

-- m:load(batch_size [, device]): the concrete shape of every node, and the buffers, allocated
-- on the device (default: the default device). Returns m.
function Model:load(batch, name)
  if type(batch) ~= "number" or batch ~= math.floor(batch) or batch < 1 then
    raise("batch_size: expected a positive integer, got " .. errors.show(batch))
  end
  local dev = device.get(name)
  local shape, dt = {}, {}
  local function input_shape(n)
    local s = {}
    for i, v in ipairs(n.shape) do s[i] = v == -1 and batch or v end
    shape[n], dt[n] = s, n.dtype
  end
  -- Every input, read by an output or not (forward still takes a tensor for it, backward gives
  -- false for its gradient).
  for _, n in ipairs(self.inputs) do input_shape(n) end
  for _, n in ipairs(self.order) do
    if not n.op then
      input_shape(n)
    else
      local ins = {}
      for i, input in ipairs(n.inputs) do
        ins[i] = shape[input]
        -- (an op whose input i is not of its own dtype says so: an embedding's indices)
        local want = n.op.input_dtype and n.op:input_dtype(i) or n.op.dtype or "f32"
        if dt[input] ~= want then
          raise(("%s: input %d (%s) is %s, the op takes %s"):format(n.name, i, input.name, dt[input], want))
        end
      end
      local ok, out = pcall(n.op.compute_concrete_output_shape, n.op, ins)
      if not ok then
        local shapes_text = {}
        for i, s in ipairs(ins) do shapes_text[i] = shape_text(s) end
        local why = tostring(out):gsub("^tocha[^:]*: ", "")
        raise(("%s: inputs %s: %s"):format(n.name, table.concat(shapes_text, ", "), why))
      end
      check_output_shape(n, out)
      local copy = {}
      for i, v in ipairs(out) do copy[i] = v end
      shape[n], dt[n] = copy, n.op.dtype or "f32"
    end
  end
  self.loads = (self.loads or 0) + 1 -- what a forward_train cache was made under
  -- Liveness: the position of each node's last reader.
  -- (A view's reader reads its root's memory: the root lives as long as its views are read.)
  local last = {}
  for i, n in ipairs(self.order) do
    for _, input in ipairs(n.inputs) do
      local r = root_of(input)
      last[r] = math.max(last[r] or 0, i)
    end
  end
  local is_output = {}
  for _, n in ipairs(self.outputs) do
    if is_view(n) then
      raise(("%s: a view node (%s) cannot be a model output: make its input the output and view it (t:view(...))")
        :format(n.name, op_kind(n.op)))
    end
    is_output[n] = true
  end
  local free, buffer, result = {}, {}, {}
  local blocks, held, without_reuse = 0, 0, 0
  for i, n in ipairs(self.order) do
    if is_view(n) then
      buffer[n] = buffer[root_of(n)] -- nil for a view of a model input
    elseif n.op and is_output[n] then
      result[n] = tensor.alloc(shape[n], dt[n], dev)
      buffer[n] = { tensor = result[n] }
    elseif n.op then
      local bytes = numel(shape[n]) * dtype.size(dt[n])
      local best
      for k, b in ipairs(free) do
        if b.bytes >= bytes and (not best or b.bytes < free[best].bytes) then best = k end
      end
      if best then
        buffer[n] = table.remove(free, best)
      else
        buffer[n] = { bytes = bytes, tensor = tensor.alloc({ bytes }, "u8", dev) }
        blocks, held = blocks + 1, held + bytes
      end
      without_reuse = without_reuse + bytes
    end
    -- The blocks whose last reader this node is serve the nodes after it (once each, however
    -- many times the node reads them).
    for _, input in ipairs(n.inputs) do
      local r = root_of(input)
      if last[r] == i and buffer[r] and not is_output[r] then
        free[#free + 1] = buffer[r]
        last[r] = nil
      end
    end
  end
  -- Parameters: each op's, by name "<node>.<param>", zeroed or filled with its init value.
  local params, by_name, param_names = {}, {}, {}
  for _, n in ipairs(self.order) do
    if n.op and n.op.param_names then
      local names = n.op:param_names()
      if #names > 0 then
        local ins = {}
        for i, input in ipairs(n.inputs) do ins[i] = shape[input] end
        local shapes = n.op:param_shapes(ins, shape[n])
        params[n], param_names[n] = {}, names
        for i, pname in ipairs(names) do
          local full = n.name .. "." .. pname
          if by_name[full] then raise(("%s: two parameters are named %s (name the nodes: node:named(name))"):format(n.name, full)) end
          -- loaded again (another batch, another device): a parameter of the same shape keeps
          -- its values, moved to the new device
          local t = self.param_by_name and self.param_by_name[full]
          -- a parameter's dtype: the node's, unless the op says otherwise (a dropout's step
          -- counter is i64)
          local pdt = n.op.param_dtype and n.op:param_dtype(i) or dt[n]
          local kept = t and t.freed == 0 and t:dtype() == pdt and shape_text(t:shape()) == shape_text(shapes[i])
          if kept and device.wrap(t.dev) ~= dev then t = t:to(dev) end
          if not kept then
            -- the value a parameter starts at: uniform in [-b, b) for an op's
            -- param_init_bound(i) = b (a linear or convolution layer's, as PyTorch's), drawn
            -- from a seed of the parameter's name, so that a model starts the same every time;
            -- else normal for an op's param_init_std(i); else a Lua op's spec's init, an op's
            -- param_init_value(i) (a norm's weight starts at 1, as PyTorch's), else 0
            local bound = n.op.param_init_bound and n.op:param_init_bound(i)
            local std = not bound and n.op.param_init_std and n.op:param_init_std(i)
            if bound then
              t = tensor.rand(shapes[i], { dtype = pdt, device = dev, seed = name_seed(full), low = -bound, high = bound })
            elseif std then -- normal with that deviation (an embedding's table, as PyTorch's)
              t = tensor.randn(shapes[i], { dtype = pdt, device = dev, seed = name_seed(full), std = std })
            else
              local init = (n.op.spec and n.op.spec.params[i].init)
                or (n.op.param_init_value and n.op:param_init_value(i)) or 0
              t = tensor.full(shapes[i], init, { dtype = pdt, device = dev })
            end
          end
          params[n][i], by_name[full] = t, t
        end
      end
    end
  end
  self.params, self.param_by_name, self.param_names_of = params, by_name, param_names
  -- One workspace for every op that asks for one (op:workspace_bytes): the ops run one after
  -- another on one stream, so they can share it; its size is the largest ask.
  local ws_bytes = 0
  for _, n in ipairs(self.order) do
    if n.op and n.op.workspace_bytes then
      local ins = {}
      for i, input in ipairs(n.inputs) do ins[i] = shape[input] end
      ws_bytes = math.max(ws_bytes, n.op:workspace_bytes(ins, shape[n]))
    end
  end
  self.workspace = ws_bytes > 0 and tensor.alloc({ ws_bytes }, "u8", dev) or nil
  self.device, self.batch, self.shape, self.dtype, self.buffer, self.result = dev, batch, shape, dt, buffer, result
  -- What the intermediates hold: blocks and bytes with reuse, and the bytes without it.
  self.plan = { blocks = blocks, bytes = held, without_reuse_bytes = without_reuse }
  -- Each node's dtype as its id too, which forward compares with a tensor's elem_type directly
  -- (no name lookup a call).
  self.dtype_id = {}
  for n, dtype_name in pairs(dt) do self.dtype_id[n] = dtype.id(dtype_name) end
  self.launch_plan = nil
  local ok, err = pcall(build_plan, self)
  if not ok then
    self.shape = nil -- a model whose launches cannot be planned is not loaded
    error(err, 0)
  end
  return self
end

-- Raises unless inputs is a list of tensors matching the model's inputs (count, shape,
-- dtype, device, live and contiguous), in the words of the function the user called.
local function check_inputs(self, inputs)
  if not self.shape then raise("self: the model is not loaded: call m:load(batch_size) first") end
  if type(inputs) ~= "table" then raise("inputs: expected a list of tensors, got " .. type(inputs)) end
  if #inputs ~= #self.inputs then
    raise(("inputs: expected %d tensors, got %d"):format(#self.inputs, #inputs))
  end
  local handle = self.device.handle
  for i, node in ipairs(self.inputs) do
    local t = inputs[i]
    local what = ("inputs[%d] (%s)"):format(i, node.name)
    if not tensor.is_tensor(t) then raise(("%s: expected a tensor, got %s"):format(what, type(t))) end
    if t.freed ~= 0 then raise(what .. ": tensor was freed") end
    if t.dense == 0 then raise(what .. ": not contiguous (a view): call :contiguous() on it first") end
    local want = self.shape[node]
    local same = t.ndim == #want
    for d = 1, #want do same = same and t.dims[d - 1] == want[d] end
    if not same then
      raise(("%s: expected shape %s, got %s"):format(what, shape_text(want), shape_text(t:shape())))
    end
    if t.elem_type ~= self.dtype_id[node] then
      raise(("%s: expected dtype %s, got %s"):format(what, self.dtype[node], t:dtype()))
    end
    if t.dev ~= handle then
      raise(("%s: the tensor is on %s, the model on %s"):format(what, device.wrap(t.dev).name, self.device.name))
    end
  end
end

-- m:forward(inputs): runs the model on the list of input tensors (in the order of the model's
-- inputs, each of its node's concrete shape and dtype, on the model's device); returns the
-- list of output tensors (the model's buffers, shaped as the outputs).
function Model:forward(inputs)
  check_inputs(self, inputs)
  local slots = self.slots
  for i, node in ipairs(self.inputs) do slots[self.slot[node] - 1] = inputs[i].data end
  for _, v in ipairs(self.views_of_inputs) do slots[self.slot[v] - 1] = slots[self.slot[root_of(v)] - 1] end
  local results = {}
  for i, n in ipairs(self.outputs) do
    local t = self.result[n]
    if t and t.freed ~= 0 then
      raise(("outputs[%d] (%s): the tensor a forward returned was freed: load the model again"):format(i, n.name))
    end
    results[i] = t or inputs[self.input_index[n]] -- an output may be an input
  end
  self.launch_plan:run(slots)
  return results
end

-- m:replace(name, op) -> a new model: this one with node `name`'s op swapped for op (a user's
-- kernel in its place, as a tocha.Model.op or a class of tocha.op): op takes the node's inputs
-- and must give its output's shape and dtype. The nodes after it are made again over the new
-- one (nodes are immutable); the rest are shared. When this model is loaded, the new one is
-- loaded alike (batch, device, training mode) and takes this one's parameters by name where
-- their shapes hold, the swapped node's too; op's own others start at their init values.
function Model:replace(name, op)
  if type(name) ~= "string" then raise("name: expected a node's name, got " .. errors.show(name)) end
  if type(op) ~= "table" or type(op.compute_concrete_output_shape) ~= "function" then
    raise("op: expected an op (RuntimeOp methods), got " .. errors.show(op))
  end
  local target
  for _, n in ipairs(self.order) do if n.op and n.name == name then target = n end end
  if not target then raise(("name: the model has no node named %s"):format(errors.show(name))) end
  -- every node from the target on, made again over the new nodes
  local made = {}
  local function remake(n)
    if made[n] then return made[n] end
    local inputs, changed = {}, n == target
    for i, input in ipairs(n.inputs) do
      inputs[i] = remake(input)
      changed = changed or inputs[i] ~= input
    end
    local out = n
    if changed then
      out = new_node { op = n == target and op or n.op, inputs = inputs }
      out.name = n.name
    end
    made[n] = out
    return out
  end
  local outputs = {}
  for i, n in ipairs(self.outputs) do outputs[i] = remake(n) end
  local m = M.new(self.inputs, outputs)
  if self.shape then
    if self.training ~= nil then m:train(self.training) end
    m:load(self.batch, self.device.name)
    local own = self:parameters()
    for pname, t in pairs(m:parameters()) do
      local from = own[pname]
      if from and shape_text(from:shape()) == shape_text(t:shape()) and from:dtype() == t:dtype() then t:copy(from) end
    end
  end
  return m
end

-- m:profile(inputs [, {reps = 10}]) -> rows: the forward's device time node by node: each node's
-- launches run alone between two events, reps times after one run to warm up, the median kept.
-- rows is a list in the forward's order of {name =, kind =, launches =, ms =, share =} (share
-- of the sum), with rows.total_ms (the sum) and rows.forward_ms (the median of whole forwards,
-- for the launch gaps the sum leaves out); print(tostring(rows)) gives them as a table. The
-- outputs are the forward's, as after m:forward(inputs).
function Model:profile(inputs, opts)
  check_inputs(self, inputs)
  if type(opts) ~= "nil" and type(opts) ~= "table" then raise("options: expected a table {reps =}, got " .. type(opts)) end
  local reps = opts and opts.reps or 10
  if type(reps) ~= "number" or reps < 1 or reps ~= math.floor(reps) then
    raise("reps: expected a positive integer, got " .. errors.show(reps))
  end
  local event = require "tocha.event"
  local start, stop = event.new(self.device.name), event.new(self.device.name)
  local function time(fn)
    start:record()
    fn()
    stop:record()
    return start:elapsed(stop)
  end
  self:forward(inputs) -- warm: kernels loaded, slots set
  local function median(list)
    table.sort(list)
    return list[math.floor((#list + 1) / 2)]
  end
  local rows, total = {}, 0
  for _, n in ipairs(self.order) do
    local range = self.launch_range[n]
    if range and range[2] > 0 then
      local times = {}
      for r = 1, reps do
        times[r] = time(function() self.launch_plan:run(self.slots, range[1], range[2]) end)
      end
      local ms = median(times)
      rows[#rows + 1] = { name = n.name, kind = op_kind(n.op), launches = range[2], ms = ms }
      total = total + ms
    end
  end
  local whole = {}
  for r = 1, reps do whole[r] = time(function() self.launch_plan:run(self.slots) end) end
  for _, row in ipairs(rows) do row.share = total > 0 and row.ms / total or 0 end
  rows.total_ms, rows.forward_ms = total, median(whole)
  return setmetatable(rows, { __tostring = function(t)
    local lines = { ("%-40s %-24s %8s %10s %7s"):format("node", "op", "launches", "ms", "share") }
    for _, row in ipairs(t) do
      lines[#lines + 1] = ("%-40s %-24s %8d %10.4f %6.1f%%"):format(row.name:sub(1, 40), row.kind:sub(1, 24), row.launches,
        row.ms, 100 * row.share)
    end
    lines[#lines + 1] = ("%-40s %-24s %8s %10.4f (a whole forward: %.4f ms)"):format("total", "", "", t.total_ms, t.forward_ms)
    return table.concat(lines, "\n")
  end })
end

-- m:forward_train(inputs) -> outputs, cache: the forward with every node's output kept in a
-- tensor of its own (new each call, no reuse), for m:backward. outputs are the cache's tensors.
function Model:forward_train(inputs)
  check_inputs(self, inputs)
  local slots = ffi.new("uint64_t[?]", math.max(self.launch_plan.n_slots, 1))
  local kept = {}
  for i, node in ipairs(self.inputs) do
    kept[node] = inputs[i]
    slots[self.slot[node] - 1] = inputs[i].data
  end
  for _, n in ipairs(self.order) do
    if is_view(n) then
      local t = kept[n.inputs[1]]:view(self.shape[n]) -- the same memory, another shape
      slots[self.slot[n] - 1], kept[n] = t.data, t
    elseif n.op then
      local t = tensor.alloc(self.shape[n], self.dtype[n], self.device)
      slots[self.slot[n] - 1], kept[n] = t.data, t
    end
  end
  self.launch_plan:run(slots)
  local outputs = {}
  for i, n in ipairs(self.outputs) do outputs[i] = kept[n] end
  return outputs, setmetatable({ model = self, tensors = kept, load = self.loads, batch = self.batch },
    { __metatable = "tocha.Model cache" })
end

-- Which nodes' gradients a backward needs: a node's where a wanted input (with want_inputs,
-- every float input) or a trainable parameter is at it or before it (PyTorch's requires_grad;
-- without want_inputs the model's inputs do not require it). A node made from integer inputs
-- alone needs none.
local function needs_grad(self, want_inputs)
  local wanted = {}
  -- (an integer input, an embedding's indices, has no gradient)
  for _, node in ipairs(self.inputs) do wanted[node] = want_inputs and dtype.is_float(self.dtype[node]) end
  for _, n in ipairs(self.order) do
    local w = not n.op and want_inputs and dtype.is_float(self.dtype[n]) -- (an input, in order too)
    for i = 1, #(self.params[n] or {}) do w = w or trainable(n, i) end
    for _, input in ipairs(n.inputs) do w = w or wanted[input] end
    wanted[n] = w
  end
  return wanted
end

-- m:backward(grad_outputs, cache [, {inputs = true}]) -> grad_inputs, grad_params: the gradients
-- for the model's inputs (a list in their order; false for an input no output depends on, and
-- for every input with inputs = false) and for its parameters (by name, as m:parameters()),
-- given one gradient per output and the cache of the forward_train they belong to. Nodes run
-- their backward in reverse order; where a node feeds several readers (or one reader twice, or
-- is also an output) the gradients it gets are summed in f32 (f64 for f64 nodes) and then
-- converted to its dtype. With inputs = false (a training step, PyTorch's inputs without
-- requires_grad) only what the trainable parameters' gradients need runs: a node runs its
-- backward only where it or a node before it has trainable parameters, and an op that says
-- which of its launches write an input's gradient alone (op:input_grad_launches, a Conv2d's dx)
-- skips them for an input that needs none (a stem's image).
function Model:backward(grad_outputs, cache, opts)
  if not self.shape then raise("self: the model is not loaded: call m:load(batch_size) first") end
  if type(cache) ~= "table" or getmetatable(cache) ~= "tocha.Model cache" or cache.model ~= self then
    raise("cache: expected the cache of this model's forward_train")
  end
  opts = op_base.options(opts, { inputs = "boolean" }, "m:backward")
  if opts.inputs == nil then opts = { inputs = true } end
  -- The cache's tensors have the shapes of the load they were made under.
  if cache.load ~= self.loads then
    raise(("cache: made under an earlier m:load (batch %d, now %d): run m:forward_train again"):format(cache.batch, self.batch))
  end
  for _, n in ipairs(self.order) do
    local t = cache.tensors[n]
    if t and t.freed ~= 0 then raise(("cache: the tensor of %s was freed"):format(n.name)) end
  end
  if type(grad_outputs) ~= "table" or #grad_outputs ~= #self.outputs then
    raise(("grad_outputs: expected %d tensors (one per output), got %s"):format(#self.outputs,
      type(grad_outputs) == "table" and tostring(#grad_outputs) or type(grad_outputs)))
  end
  for i, n in ipairs(self.outputs) do
    local g, what = grad_outputs[i], ("grad_outputs[%d] (%s)"):format(i, n.name)
    if not tensor.is_tensor(g) then raise(("%s: expected a tensor, got %s"):format(what, type(g))) end
    if g.freed ~= 0 then raise(what .. ": tensor was freed") end
    if g.dense == 0 then raise(what .. ": not contiguous (a view): call :contiguous() on it first") end
    if shape_text(g:shape()) ~= shape_text(self.shape[n]) or g:dtype() ~= self.dtype[n] then
      raise(("%s: expected %s %s, got %s %s"):format(what, shape_text(self.shape[n]), self.dtype[n],
        shape_text(g:shape()), g:dtype()))
    end
    if device.wrap(g.dev) ~= self.device then
      raise(("%s: the tensor is on %s, the model on %s"):format(what, device.wrap(g.dev).name, self.device.name))
    end
  end
  -- How many gradients each node gets: one per read, one per time it is an output.
  local readers = {}
  for _, n in ipairs(self.order) do
    for _, input in ipairs(n.inputs) do readers[input] = (readers[input] or 0) + 1 end
  end
  for _, n in ipairs(self.outputs) do readers[n] = (readers[n] or 0) + 1 end
  local wanted = needs_grad(self, opts.inputs)
  local grad, sum, received = {}, {}, {}
  local function receive(node, g)
    received[node] = (received[node] or 0) + 1
    if readers[node] == 1 then grad[node] = g; return end
    if not sum[node] then
      sum[node] = tensor.alloc(self.shape[node], self.dtype[node] == "f64" and "f64" or "f32", self.device)
    end
    native.check(C.tocha_tensor_accumulate(sum[node], g, received[node] == 1 and 1 or 0))
  end
  local function total(node)
    if not grad[node] and sum[node] then
      grad[node] = sum[node]:dtype() == self.dtype[node] and sum[node] or sum[node]:cast(self.dtype[node])
    end
    return grad[node]
  end
  for i, n in ipairs(self.outputs) do receive(n, grad_outputs[i]) end
  local param_grads = {}
  for k = #self.order, 1, -1 do
    local n = self.order[k]
    local g = n.op and wanted[n] and total(n)
    if g and is_view(n) then
      -- a view's gradient is its input's, seen with the input's shape
      receive(n.inputs[1], g:view(self.shape[n.inputs[1]]))
    elseif g then
      local op = n.op
      if not op.grad_kernel or not op.pack_backward_args or (op.has_backward and not op:has_backward()) then
        raise(("%s: its op has no backward"):format(n.name))
      end
      local ins, shapes, grads, addresses = {}, {}, {}, {}
      for i, input in ipairs(n.inputs) do
        ins[i], shapes[i] = { cache.tensors[input].data, self.shape[input] }, self.shape[input]
        if dtype.is_float(self.dtype[input]) then
          grads[i] = tensor.alloc(self.shape[input], self.dtype[input], self.device)
          addresses[i] = grads[i].data
        else
          addresses[i] = 0 -- integer inputs have no gradient; their ops write none
        end
      end
      local out_shape = self.shape[n]
      local grad_params = {}
      for i, t in ipairs(self.params[n] or {}) do
        local gp = tensor.zeros(t:shape(), { dtype = t:dtype(), device = self.device })
        if trainable(n, i) then param_grads[n.name .. "." .. self.param_names_of[n][i]] = gp end
        grad_params[i] = gp.data
      end
      local params, y = param_addresses(self, n), cache.tensors[n].data
      local count = op.n_backward_launches and op:n_backward_launches() or 1
      if count == 1 then
        local args = op:pack_backward_args(ins, params, y, out_shape, g, 0, addresses, grad_params)
        op_base.launch_packed(op.grad_kernel, self.device, op:backward_grid(shapes, out_shape), op:backward_block(), args)
      else
        local skipped = {} -- the launches of inputs' own gradients where those need none
        for i, input in ipairs(op.input_grad_launches and n.inputs or {}) do
          local first, last
          if not wanted[input] then first, last = op:input_grad_launches(i) end
          for launch = first or 1, last or 0 do skipped[launch] = true end
        end
        for launch = 1, count do
          local grid = not skipped[launch] and op:backward_grid_for_launch(launch, shapes, out_shape)
          if grid and grid[1] > 0 then
            local args = op:pack_backward_args_for_launch(launch, ins, params, y, out_shape, g, 0, addresses, grad_params)
            local kernel = op.backward_kernel_for_launch and op:backward_kernel_for_launch(launch, shapes, out_shape)
              or op.grad_kernel
            op_base.launch_packed(kernel, self.device, grid, op:backward_block(), args)
          end
        end
      end
      for i, input in ipairs(n.inputs) do
        if wanted[input] then receive(input, grads[i]) end
      end
    end
  end
  local result = {}
  for i, node in ipairs(self.inputs) do result[i] = wanted[node] and total(node) or false end
  return result, param_grads
end

-- ---- parameters ----

local function loaded(self)
  if not self.shape then raise("self: the model is not loaded: call m:load(batch_size) first") end
end

-- m:parameters(): the model's parameter tensors by name ("<node>.<param>"), the model's own:
-- writing into them changes what forward computes.
function Model:parameters()
  loaded(self)
  local out = {}
  for name, t in pairs(self.param_by_name) do out[name] = t end
  return out
end

-- m:trainable_parameters(): the parameters an optimizer steps, by name: m:parameters() without
-- the buffers (running statistics).
function Model:trainable_parameters()
  loaded(self)
  local out = {}
  for _, n in ipairs(self.order) do
    for i, t in ipairs(self.params[n] or {}) do
      if trainable(n, i) then out[n.name .. "." .. self.param_names_of[n][i]] = t end
    end
  end
  return out
end

-- m:train([flag]): every op with a training mode (a batch norm) in training mode (flag true, the
-- default) or inference mode (false); the launches are packed again if the model is loaded.
-- Returns m.
function Model:train(flag)
  if flag == nil then flag = true end
  if type(flag) ~= "boolean" then raise("flag: expected a boolean, got " .. type(flag)) end
  for _, n in ipairs(self.order) do
    if n.op and type(n.op.train) == "function" and n.op.training ~= nil then n.op:train(flag) end
  end
  self.training = flag
  if self.shape then build_plan(self) end
  return self
end

-- m:save_parameters(path): the parameters in a safetensors file (tocha.save).
function Model:save_parameters(path)
  loaded(self)
  require("tocha.safetensors").save(path, self.param_by_name)
end

-- m:load_parameters(path): every parameter from a safetensors file holding exactly the model's
-- names, each of its shape and dtype; nothing is changed unless all of them fit.
function Model:load_parameters(path)
  loaded(self)
  local file = require("tocha.safetensors").load(path, { device = self.device })
  for name, t in pairs(self.param_by_name) do
    local f = file[name]
    if not f then raise(("%s: holds no parameter %s"):format(path, name)) end
    if f:dtype() ~= t:dtype() or shape_text(f:shape()) ~= shape_text(t:shape()) then
      raise(("%s: %s is %s %s, the model's %s %s"):format(path, name, f:dtype(), shape_text(f:shape()), t:dtype(),
        shape_text(t:shape())))
    end
  end
  for name in pairs(file) do
    if not self.param_by_name[name] then raise(("%s: %s is not a parameter of the model"):format(path, name)) end
  end
  for name, t in pairs(self.param_by_name) do t:copy(file[name]) end
  return self
end

-- m:load_state_dict(source [, {strict = true}]): parameters by name from a state dict, as
-- PyTorch's module.load_state_dict takes one: source a safetensors file (what
-- safetensors.torch.save_file(model.state_dict(), path) writes) or a table of name -> tensor.
-- Names are the model's ("<node>.<param>": name the nodes as PyTorch's modules, "layer1.0.conv1").
-- Returns {missing =, unexpected =, mismatched =}: the model's names the source lacks, the
-- source's names the model lacks (PyTorch's BatchNorm counter "<bn>.num_batches_tracked", which
-- tocha does not keep, aside) and "<name>: <source shape> in the source, <model shape> in the
-- model" for each shape that differs, each list sorted. strict (the default) refuses a source
-- with any of them, listing them all, and changes nothing; otherwise every parameter that fits
-- is copied and the lists say what was not. A source tensor of another dtype or device is
-- converted. A model's own buffers that PyTorch's modules lack (a Dropout's step) are not
-- asked for.
function Model:load_state_dict(source, opts)
  loaded(self)
  if type(opts) ~= "nil" and type(opts) ~= "table" then raise("options: expected a table {strict =}, got " .. type(opts)) end
  local strict = true
  if opts and opts.strict ~= nil then
    if type(opts.strict) ~= "boolean" then raise("strict: expected a boolean, got " .. errors.show(opts.strict)) end
    strict = opts.strict
  end
  local dict, label
  if type(source) == "string" then
    dict, label = require("tocha.safetensors").load(source, { device = self.device.name }), source
  elseif type(source) == "table" then
    dict, label = source, "state_dict"
  else
    raise("source: expected a safetensors file name or a table of name = tensor, got " .. type(source))
  end
  local own = {}
  for _, n in ipairs(self.order) do
    for i, t in ipairs(self.params[n] or {}) do
      if not (n.op.param_in_state_dict and n.op:param_in_state_dict(i) == false) then
        own[n.name .. "." .. self.param_names_of[n][i]] = t
      end
    end
  end
  local missing, unexpected, mismatched, fits = {}, {}, {}, {}
  for name, t in pairs(own) do
    local f = dict[name]
    if f == nil then
      missing[#missing + 1] = name
    elseif not tensor.is_tensor(f) or f.freed ~= 0 then
      raise(("%s[%s]: expected a live tensor, got %s"):format(label, errors.show(name), errors.show(f)))
    elseif shape_text(f:shape()) ~= shape_text(t:shape()) then
      mismatched[#mismatched + 1] = ("%s: %s in the source, %s in the model"):format(name, shape_text(f:shape()),
        shape_text(t:shape()))
    else
      fits[name] = f
    end
  end
  for name in pairs(dict) do
    if type(name) ~= "string" then raise(("%s: expected names as keys, got %s"):format(label, errors.show(name))) end
    if not self.param_by_name[name] and not name:find("%.num_batches_tracked$") then unexpected[#unexpected + 1] = name end
  end
  table.sort(missing)
  table.sort(unexpected)
  table.sort(mismatched)
  if strict and #missing + #unexpected + #mismatched > 0 then
    local parts = {}
    if #missing > 0 then parts[#parts + 1] = "missing: " .. table.concat(missing, ", ") end
    if #unexpected > 0 then parts[#parts + 1] = "unexpected: " .. table.concat(unexpected, ", ") end
    if #mismatched > 0 then parts[#parts + 1] = "shapes that differ: " .. table.concat(mismatched, "; ") end
    raise(("%s does not fit the model (nothing loaded): %s"):format(label, table.concat(parts, "; ")))
  end
  for name, f in pairs(fits) do
    local t = own[name]
    if f.dev ~= t.dev then f = f:to(self.device.name) end
    if f:dtype() ~= t:dtype() then f = f:cast(t:dtype()) end
    t:copy(f)
  end
  return { missing = missing, unexpected = unexpected, mismatched = mismatched }
end

-- ---- captured forwards ----

local Capture = {}
Capture.__index = Capture
Capture.__tostring = function(c) return "tocha.Model capture on " .. c.model.device.name end

-- m:capture([batch_size]) -> c: the model's forward at its loaded batch (or loaded first for
-- batch_size) captured as a graph (cuda: a CUDA graph; sim: a recorded replay) on input
-- tensors of its own. c:replay(inputs) copies the given tensors into those, replays the graph
-- and returns the model's outputs (its buffers, as forward does). The forward runs once before
-- the capture, so that every kernel is loaded on the device.
function Model:capture(batch)
  if batch ~= nil then self:load(batch, self.device and self.device.name) end
  if not self.shape then raise("self: the model is not loaded: call m:load(batch_size) or pass batch_size") end
  local inputs = {}
  for i, node in ipairs(self.inputs) do
    inputs[i] = tensor.zeros(self.shape[node], { dtype = self.dtype[node], device = self.device })
  end
  self:forward(inputs)
  local g = require("tocha.graph").capture(function() return self:forward(inputs) end, self.device.name)
  -- The buffers and parameters the graph uses stay alive with it, even if the model is loaded
  -- again.
  return setmetatable({ model = self, inputs = inputs, graph = g, outputs = g.outputs[1],
    buffers = { self.buffer, self.result, self.params, self.workspace } }, Capture)
end

function Capture:replay(inputs)
  if type(inputs) ~= "table" or #inputs ~= #self.inputs then
    raise(("inputs: expected %d tensors, got %s"):format(#self.inputs, type(inputs) == "table" and #inputs or type(inputs)))
  end
  for i, t in ipairs(inputs) do
    if not tensor.is_tensor(t) then raise(("inputs[%d]: expected a tensor, got %s"):format(i, type(t))) end
  end
  for i, t in ipairs(inputs) do self.inputs[i]:copy(t) end
  self.graph:replay()
  return self.outputs
end

-- m:dot([path]): the graph in Graphviz dot, each node labelled with its name and, once the
-- model is loaded, its shape and dtype; written to path when one is given. Returns the text.
function Model:dot(path)
  if type(path) ~= "nil" and type(path) ~= "string" then raise("path: expected a file name, got " .. type(path)) end
  -- Text inside a dot string: backslashes and quotes escaped.
  local function escape(text) return (tostring(text):gsub('[\\"]', "\\%0")) end
  local is_output = {}
  for _, n in ipairs(self.outputs) do is_output[n] = true end
  local lines = { "digraph model {", "  rankdir=TB;" }
  for _, n in ipairs(self.order) do
    local label = escape(n.name)
    if self.shape then label = label .. "\\n" .. escape(shape_text(self.shape[n]) .. " " .. self.dtype[n]) end
    local shape = not n.op and "ellipse" or is_output[n] and "doubleoctagon" or "box"
    lines[#lines + 1] = ('  n%d [label="%s", shape=%s];'):format(n.id, label, shape)
  end
  for _, n in ipairs(self.order) do
    for _, input in ipairs(n.inputs) do lines[#lines + 1] = ("  n%d -> n%d;"):format(input.id, n.id) end
  end
  lines[#lines + 1] = "}"
  local text = table.concat(lines, "\n") .. "\n"
  if path then require("tocha.file").write_text(path, text) end
  return text
end

-- Whether v is a tocha.Model.
function M.is_model(v) return getmetatable(v) == Model end

setmetatable(M, { __call = function(_, inputs, outputs) return M.new(inputs, outputs) end })
errors.name(M.input, "Model.input")
errors.name(M.node, "Model.node")
errors.name(M.op, "Model.op")
errors.name(M.new, "Model")
errors.methods(Model, "Model:", function(m) return getmetatable(m) == Model end)
errors.refuse_operators(Node, "Model node")
errors.refuse_operators(LuaOp, "Model.op")
errors.methods(Capture, "Model capture:", function(c) return getmetatable(c) == Capture end)
return M
