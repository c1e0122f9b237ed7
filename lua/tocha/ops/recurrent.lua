-- tocha.Recurrent: the recurrence of an LSTM, a GRU or an Elman RNN layer over a whole sequence,
-- one direction, forward and backward (through time), every float dtype, behind a RuntimeOp so
-- that a model holds a recurrent layer as two nodes: a tocha.Linear projecting every step's
-- input at once (gx = x W_ih^T + b_ih, one product over T x B rows), then this op.
--
--   local proj = tocha.Linear.new(input_size, 4 * hidden)            -- [T, B, I] -> [T, B, 4H]
--   local lstm = tocha.Recurrent.new("lstm", hidden, T)              -- weight_hh [4H, H], bias_hh [4H]
--   local hc = lstm:forward(proj:forward(x, w_ih, b_ih), w_hh, b_hh) -- [2, T, B, H]: h then c
--   local gru = tocha.Recurrent.new("gru", hidden, T, { reverse = true, initial_state = true })
--   local h = gru:forward(gx, h0, w_hh, b_hh)                        -- [T, B, H]
--
-- Modes "lstm" (gates i, f, g, o), "gru" (r, z, n; ONNX's linear_before_reset = 1), "rnn_tanh"
-- and "rnn_relu", the gate blocks in PyTorch's order (nn.LSTM's weight_hh_l0 is this op's
-- weight_hh as it is). The output holds h at every step, time-aligned ([T, B, H]), and for an
-- LSTM c at every step after it ([2, T, B, H]), so that a reader takes the last step's state
-- (ONNX's Y_h, Y_c) and the backward recomputes the gates from it. reverse walks from the last
-- step to the first (a bidirectional layer is two ops); initial_state adds inputs h0 [B, H]
-- (and c0 for an LSTM), else the state before the first step is zero.
--
-- The forward is 2 launches a step: gh = h_prev weight_hh^T + bias_hh by kernels/matmul.cu's
-- products (the Linear's own kernels, so tensor cores for halves), into the workspace, then
-- kernels/recurrent.cu's cell, which writes h and c. The first step from a zero state has no
-- product (gh is the bias). The backward walks the steps back, 3 launches each (gh recomputed;
-- the cell's backward writing d gx; d h_prev = d gh weight_hh, the next step's carry), then
-- d weight_hh = sum over steps of d gh^T h_prev in one product over (T - 1) B rows plus one for
-- h0, and d bias_hh, the sum of d gh over T B rows, by tocha.Reduce's passes. The steps are
-- baked in (T launches a direction, fixed when the op is made). Halves keep the gates, h, c and
-- the backward's carries in the dtype between steps (computing each step in f32), so their
-- error grows with the steps; f32 and f64 keep f32 and f64. The products of f32 (hidden_size a
-- multiple of 4) and halves (of 8) read h0, weight_hh and a given dgx in 16-byte chunks: those
-- must be 16-byte aligned (a fresh tensor is), which a launch checks.
local dtype = require "tocha.dtype"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local op = require "tocha.op"
local matmul = require "tocha.matmul"
local reduction = require "tocha.ops.reduction"
local raise, show = errors.raise, errors.show

local M = {}

local Recurrent = op.class("Recurrent")
M.Recurrent = Recurrent

local address, launch_index = op.address, op.launch_index
local BLOCK = 256
local MODES = { lstm = { 0, 4 }, gru = { 1, 3 }, rnn_tanh = { 2, 1 }, rnn_relu = { 3, 1 } }
M.MODES = { "lstm", "gru", "rnn_tanh", "rnn_relu" }

local positive = op.positive

local function source()
  return op.source("activation.cuh") .. "\n" .. op.source("recurrent.cu")
end

-- Recurrent.new(mode, hidden_size, steps [, {reverse = false, initial_state = false, dtype = "f32"}]).
function Recurrent.new(mode, hidden_size, steps, opts)
  if type(mode) ~= "string" or not MODES[mode] then
    raise(("mode: expected \"lstm\", \"gru\", \"rnn_tanh\" or \"rnn_relu\", got %s"):format(show(mode)))
  end
  local hidden, T = positive(hidden_size, "hidden_size"), positive(steps, "steps")
  opts = op.options(opts, { reverse = "boolean", initial_state = "boolean", dtype = true }, "Recurrent")
  local dt = op.float_dtype(opts.dtype, "dtype")
  local code, gates = MODES[mode][1], MODES[mode][2]
  local self = setmetatable({ kind = "recurrent", mode = mode, hidden = hidden, steps = T, gates = gates,
    reverse = opts.reverse == true, initial = opts.initial_state == true, dtype = dt, block_size = BLOCK,
    id = ("recurrent__%s__%d__%d__%s%s%s"):format(mode, hidden, T, dt, opts.reverse and "__reverse" or "",
      opts.initial_state and "__initial" or "") }, Recurrent)
  self.input_names = { "gx" }
  if self.initial then
    self.input_names[2] = "h0"
    if mode == "lstm" then self.input_names[3] = "c0" end
  end
  local gh = gates * hidden
  -- the products a Linear of hidden -> gates x hidden makes: gh, d h_prev, d weight_hh
  local _
  self.product, _, _, self.product_kind = matmul.launch_of(dt, 1, hidden, gh, 1, "row", "col")
  self.dh_product, _, _, self.dh_kind = matmul.launch_of(dt, 1, gh, hidden, 1, "row", "row")
  self.dw_product, _, _, self.dw_kind = matmul.launch_of(dt, gh, 1, hidden, 1, "col", "row")
  local compute = dt == "f64" and "double" or "float"
  local args = ("%s, %s, %d"):format(dtype.ctype(dt), compute, code)
  self.kernel = kernel.new { source = source(), name = "tocha_recurrent_cell", template_args = args,
    params = ("%s* gx, %s* gh, %s* bias_hh, %s* h_prev, %s* c_prev, %s* h, %s* c, i64 batch, i64 hidden, i32 zero_state")
      :format(dt, dt, dt, dt, dt, dt, dt) }
  self.grad_kernel = kernel.new { source = source(), name = "tocha_recurrent_cell_backward", template_args = args,
    params = ("%s* gx, %s* gh, %s* bias_hh, %s* h_prev, %s* c_prev, %s* dy_h, %s* dy_c, %s* dh_carry, %s* dc_in, "
      .. "%s* dgx, %s* dgh, %s* dc_out, %s* dh_direct, i64 batch, i64 hidden, i32 zero_state, i32 start")
      :format(dt, dt, dt, dt, dt, dt, dt, dt, dt, dt, dt, dt, dt) }
  self.fill_kernel = kernel.new { source = op.source("fill.cu"), name = "tocha_fill", template_args = dtype.ctype(dt),
    params = ("%s* y, i64 n, f64 value"):format(dt) }
  self.sum_kernel = kernel.new { source = op.source("reduction.cu"), name = "tocha_reduce",
    template_args = dtype.ctype(dt) .. ", 0",
    params = ("u8* x, i32 x_acc, u8* y, i32 y_acc, %s* copy, i64 outer, i64 n, i64 inner, i64 splits, f64 divisor, i32 rows")
      :format(dt) }
  return self
end

-- ---- shapes ----

function Recurrent:n_activation_inputs() return #self.input_names end
function Recurrent:param_names() return { "weight_hh", "bias_hh" } end
function Recurrent:param_shapes()
  return { { self.gates * self.hidden, self.hidden }, { self.gates * self.hidden } }
end
-- PyTorch's nn.LSTM, nn.GRU and nn.RNN start every parameter uniform in [-1/sqrt(H), 1/sqrt(H)).
function Recurrent:param_init_bound() return 1 / math.sqrt(self.hidden) end

-- The batch size of input shapes {gx [, h0 [, c0]]}, each checked.
local function batch_of(self, input_shapes)
  local shapes = op.input_shapes(input_shapes, self:n_activation_inputs())
  local gx = shapes[1]
  op.check_shape(gx, "inputs[1]")
  local want = self.gates * self.hidden
  if #gx ~= 3 or gx[1] ~= self.steps or gx[3] ~= want then
    raise(("inputs[1]: expected [%d (steps), batch, %d (%d gates x hidden_size %d)], got %s"):format(self.steps, want,
      self.gates, self.hidden, op.shape_text(gx)))
  end
  for i = 2, #shapes do
    op.check_shape(shapes[i], ("inputs[%d]"):format(i))
    if #shapes[i] ~= 2 or shapes[i][1] ~= gx[2] or shapes[i][2] ~= self.hidden then
      raise(("inputs[%d]: expected the initial state [%d, %d] (batch, hidden_size), got %s"):format(i, gx[2], self.hidden,
        op.shape_text(shapes[i])))
    end
  end
  return gx[2]
end

function Recurrent:compute_concrete_output_shape(input_shapes)
  local b = batch_of(self, input_shapes)
  if self.mode == "lstm" then return { 2, self.steps, b, self.hidden } end
  return { self.steps, b, self.hidden }
end

-- ---- the workspace ----

local function round(bytes) return math.ceil(bytes / 256) * 256 end

-- The bias gradient's reduction passes over d gh [T B, gates x hidden].
local function bias_passes(self, b)
  return reduction.plan(1, self.steps * b, self.gates * self.hidden, BLOCK, self.dtype)
end

-- Byte offsets of the workspace's parts for batch b: gh (a step's product), dgh (GRU: d gh of
-- every step; the others' is d gx), dh (the carry), direct (GRU's d h_prev beside the
-- product's), dc (LSTM's carry), partials (the bias gradient's), and the total. Kept for up to
-- LAYOUTS_KEPT batch sizes (every launch of a step asks for it); callers only read it.
local LAYOUTS_KEPT = 64
local function layout(self, b)
  self.layouts = self.layouts or { count = 0 }
  if self.layouts[b] then return self.layouts[b] end
  if self.layouts.count >= LAYOUTS_KEPT then self.layouts = { count = 0 } end
  local size = dtype.size(self.dtype)
  local row, state = b * self.gates * self.hidden * size, b * self.hidden * size
  local at, parts = 0, {}
  local function take(name, bytes)
    parts[name] = at
    at = at + round(bytes)
  end
  take("gh", row)
  if self.mode == "gru" then take("dgh", row * self.steps) end
  take("dh", state)
  if self.mode == "gru" then take("direct", state) end
  if self.mode == "lstm" then take("dc", state) end
  take("partials", reduction.partial_bytes(bias_passes(self, b), self.dtype))
  parts.total = at
  self.layouts[b], self.layouts.count = parts, self.layouts.count + 1
  return parts
end

function Recurrent:workspace_bytes(input_shapes) return layout(self, batch_of(self, input_shapes)).total end

-- ---- addresses of a launch ----

-- The time index (0-based) of walk step s (1-based) and of the step before it.
local function times(self, s)
  local t = self.reverse and self.steps - s or s - 1
  return t, self.reverse and t + 1 or t - 1
end

-- Addresses of one step s: gx's row block, h's and c's in the output, and the state before it
-- (h0, c0 or the output's step before; nil from a zero state).
local function step_addresses(self, s, b, inputs, output)
  local size = dtype.size(self.dtype)
  local t, tp = times(self, s)
  local gx = op.inputs_of(inputs, self:n_activation_inputs())
  local per_step = b * self.hidden * size
  local h_all, c_all = address(output, "output"), nil
  if self.mode == "lstm" then c_all = h_all + self.steps * per_step end
  local r = { gx = gx[1] + t * b * self.gates * self.hidden * size, h = h_all + t * per_step,
    c = c_all and c_all + t * per_step }
  if s > 1 then
    r.h_prev, r.c_prev = h_all + tp * per_step, c_all and c_all + tp * per_step
  elseif self.initial then
    r.h_prev, r.c_prev = gx[2], gx[3]
  end
  return r
end

-- The workspace's address among params (after the two parameters).
local function workspace(params)
  params = op.list(params, "params")
  local ws = address(params[3] or 0, "params[3]")
  if ws == 0 then raise("params: the op needs its workspace (op:workspace_bytes) after weight_hh and bias_hh") end
  return params, ws
end

-- The product gh = h_prev weight_hh^T + bias_hh of step s (nil from a zero state).
local function gh_args(self, s, b, inputs, params, output)
  local p, ws = workspace(params)
  local a = step_addresses(self, s, b, inputs, output)
  if not a.h_prev then return nil end
  local w, bias = address(p[1], "params[1]"), address(p[2], "params[2]")
  if self.product_kind then op.check_aligned({ { a.h_prev, s == 1 and "h0" or "y" }, { w, "weight_hh" } }) end
  local gh = ws + layout(self, b).gh
  return { a.h_prev, w, bias, gh, b, self.gates * self.hidden, self.hidden, 0, 0, 0, 1, gh, gh, 0 }
end

local function product_grid(kind, k, m, n) return matmul.grid_of(kind, m, n, 1, "x", k.tile_n) end

-- ---- the forward: 2 launches a step ----

function Recurrent:n_launches() return 2 * self.steps end

function Recurrent:kernel_for_launch(i)
  launch_index(i, self:n_launches())
  return i % 2 == 1 and self.product or self.kernel
end

function Recurrent:grid_for_launch(i, input_shapes)
  launch_index(i, self:n_launches())
  local b = batch_of(self, input_shapes)
  local s = math.floor((i + 1) / 2)
  if i % 2 == 1 then
    if s == 1 and not self.initial then return { 0, 0, 0 } end
    return product_grid(self.product_kind, self.product, b, self.gates * self.hidden)
  end
  return op.element_grid(b * self.hidden, BLOCK)
end

function Recurrent:pack_args_for_launch(i, inputs, params, output, output_shape)
  launch_index(i, self:n_launches())
  local _, shapes = op.inputs_of(inputs, self:n_activation_inputs())
  local b = batch_of(self, shapes)
  local s = math.floor((i + 1) / 2)
  if i % 2 == 1 then return gh_args(self, s, b, inputs, params, output) or {} end
  local p, ws = workspace(params)
  local a = step_addresses(self, s, b, inputs, output)
  local zero = a.h_prev == nil
  -- (what the kernel does not read or write is passed as h: a launch takes device addresses only)
  return { a.gx, ws + layout(self, b).gh, address(p[2], "params[2]"), a.h_prev or a.h, a.c_prev or a.h, a.h, a.c or a.h, b,
    self.hidden, zero and 1 or 0 }
end

-- ---- the backward: 3 launches a step, then d weight_hh (3) and d bias_hh (2) ----

function Recurrent:backward_reads_output() return true end
function Recurrent:n_backward_launches() return 3 * self.steps + 5 end

-- Launch i as {step, part} (part 1: gh; 2: the cell; 3: d h_prev) or {nil, k} for the k-th
-- launch after the steps (1, 2: d weight_hh's products; 3: its zero fill; 4, 5: d bias_hh).
local function backward_launch(self, i)
  launch_index(i, self:n_backward_launches())
  local steps = 3 * self.steps
  if i > steps then return nil, i - steps end
  return self.steps - math.floor((i - 1) / 3), (i - 1) % 3 + 1
end

function Recurrent:backward_kernel_for_launch(i)
  local s, part = backward_launch(self, i)
  if s then return part == 1 and self.product or part == 2 and self.grad_kernel or self.dh_product end
  if part <= 2 then return self.dw_product end
  return part == 3 and self.fill_kernel or self.sum_kernel
end

function Recurrent:backward_grid_for_launch(i, input_shapes)
  local b = batch_of(self, input_shapes)
  local s, part = backward_launch(self, i)
  local g, h = self.gates * self.hidden, self.hidden
  if s then
    if part == 2 then return op.element_grid(b * h, BLOCK) end
    if s == 1 and not self.initial then return { 0, 0, 0 } end
    if part == 1 then return product_grid(self.product_kind, self.product, b, g) end
    return product_grid(self.dh_kind, self.dh_product, b, h)
  end
  if part == 1 then return self.steps > 1 and product_grid(self.dw_kind, self.dw_product, g, h) or { 0, 0, 0 } end
  if part == 2 then return self.initial and product_grid(self.dw_kind, self.dw_product, g, h) or { 0, 0, 0 } end
  if part == 3 then return (self.steps == 1 and not self.initial) and op.element_grid(g * h, BLOCK) or { 0, 0, 0 } end
  local p = bias_passes(self, b)[part - 3]
  if not p then return { 0, 0, 0 } end
  return reduction.pass_grid(p, BLOCK, self.dtype)
end

function Recurrent:pack_backward_args_for_launch(i, inputs, params, output, _, grad_output, _, grad_inputs, grad_params)
  local _, shapes = op.inputs_of(inputs, self:n_activation_inputs())
  local b = batch_of(self, shapes)
  local s, part = backward_launch(self, i)
  local p, ws = workspace(params)
  local parts = layout(self, b)
  local size, g, h = dtype.size(self.dtype), self.gates * self.hidden, self.hidden
  grad_inputs, grad_params = op.list(grad_inputs, "grad_inputs"), op.list(grad_params, "grad_params")
  local dgx = address(grad_inputs[1], "grad_inputs[1]")
  local dgh = self.mode == "gru" and ws + parts.dgh or dgx
  local w = address(p[1], "params[1]")
  if s then
    if part == 1 then return gh_args(self, s, b, inputs, params, output) or {} end
    local t = times(self, s)
    local dgh_t = dgh + t * b * g * size
    local carry = ws + parts.dh
    if part == 3 then -- d h_prev = d gh weight_hh (+ GRU's direct part): the carry, or d h0
      local to = s > 1 and carry or address(grad_inputs[2], "grad_inputs[2]")
      local direct = self.mode == "gru" and ws + parts.direct or nil
      if self.dh_kind then op.check_aligned({ { dgh_t, "dgx" }, { to, "dh0" } }) end
      return { dgh_t, w, to, to, b, h, g, 0, 0, 0, 0, direct or to, to, direct and 1 or 0 }
    end
    local a = step_addresses(self, s, b, inputs, output)
    local dy = address(grad_output, "grad_output")
    local per_step = b * h * size
    -- (what the kernel does not read or write is passed as the carry: device addresses only)
    local dc = self.mode == "lstm" and ws + parts.dc or carry
    local dc_out = dc
    if s == 1 and self.mode == "lstm" and self.initial then dc_out = address(grad_inputs[3], "grad_inputs[3]") end
    return { a.gx, ws + parts.gh, address(p[2], "params[2]"), a.h_prev or carry, a.c_prev or carry, dy + t * per_step,
      self.mode == "lstm" and dy + (self.steps + t) * per_step or carry, carry, dc, dgx + t * b * g * size, dgh_t, dc_out,
      self.mode == "gru" and ws + parts.direct or carry, b, h, a.h_prev and 0 or 1, s == self.steps and 1 or 0 }
  end
  local dw = address(grad_params[1], "grad_params[1]")
  local h_all = address(output, "output")
  local per_step = b * h * size
  if part == 1 then -- d weight_hh = sum over the steps after the first of d gh_t^T h_prev
    local first_dgh = self.reverse and dgh or dgh + b * g * size
    local prev = self.reverse and h_all + per_step or h_all
    if self.dw_kind then op.check_aligned({ { first_dgh, "dgx" }, { dw, "dweight_hh" } }) end
    return { first_dgh, prev, dw, dw, g, h, (self.steps - 1) * b, 0, 0, 0, 0, dw, dw, 0 }
  end
  if part == 2 then -- + d gh of the first step^T h0
    local t = times(self, 1)
    local h0 = address(op.inputs_of(inputs, self:n_activation_inputs())[2], "inputs[2]")
    if self.dw_kind then op.check_aligned({ { h0, "h0" } }) end
    return { dgh + t * b * g * size, h0, dw, dw, g, h, b, 0, 0, 0, 0, dw, dw, self.steps > 1 and 1 or 0 }
  end
  if part == 3 then return { dw, g * h, 0 } end
  local passes = bias_passes(self, b)
  return reduction.pass_args(passes, part - 3, dgh, address(grad_params[2], "grad_params[2]"), ws + parts.partials, 1)
end

op.finish(Recurrent)
return M
