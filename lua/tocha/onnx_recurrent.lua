-- tocha.onnx's converters of ONNX's recurrent layers, LSTM, GRU and RNN (what torch.onnx.export
-- writes for nn.LSTM, nn.GRU and nn.RNN): each direction a tocha.Linear projecting every step's
-- input at once (W and the first half of B) and a tocha.Recurrent (R and B's second half), the
-- file's gate blocks reordered to PyTorch's (LSTM's i, o, f, c to i, f, c, o; GRU's z, r, h to
-- r, z, h). Y is the directions' h joined on axis 1, Y_h and Y_c the last step of each (the
-- first for the reverse direction). Refused, by name: layout 1 (batch first), clip,
-- input_forget, peepholes, other activations, a GRU with linear_before_reset 0, and per-item
-- sequence lengths other than the whole sequence. An initial state of zeros (PyTorch's default,
-- a constant once shapes fold) is the op's zero state; another becomes its h0 (and c0) inputs.
local Linear = require("tocha.ops.linear").Linear
local Recurrent = require("tocha.ops.recurrent").Recurrent
local views = require "tocha.ops.view"
local strided = require "tocha.ops.strided"
local ChannelCat = require("tocha.ops.channel_cat").ChannelCat

local M = {}

-- ONNX's gate blocks in PyTorch's order: block k of the op is block ORDER[k] (0-based) of the file.
local ORDER = { LSTM = { 0, 2, 3, 1 }, GRU = { 1, 0, 2 }, RNN = { 0 } }
local GATES = { LSTM = 4, GRU = 3, RNN = 1 }
-- The activations each type takes (ONNX's defaults), per direction.
local DEFAULT_ACTIVATIONS = { LSTM = { "Sigmoid", "Tanh", "Tanh" }, GRU = { "Sigmoid", "Tanh" }, RNN = { "Tanh" } }

-- The op's mode, from the node's type and activations (checked).
local function mode_of(self, n, dirs)
  local acts = self:attr(n, "activations")
  local per = DEFAULT_ACTIVATIONS[n.op_type]
  local mode = n.op_type == "LSTM" and "lstm" or n.op_type == "GRU" and "gru" or "rnn_tanh"
  if acts then
    if #acts ~= #per * dirs then
      self:fail(n, ("activations: %d given, %d expected (%d a direction)"):format(#acts, #per * dirs, #per))
    end
    for d = 0, dirs - 1 do
      for k = 1, #per do
        local a = acts[d * #per + k]
        if n.op_type == "RNN" and a == "Relu" and (d == 0 or mode == "rnn_relu") then
          mode = "rnn_relu"
        elseif a ~= per[k] or (n.op_type == "RNN" and mode == "rnn_relu") then
          self:fail(n, ("activations: %s where tocha takes %s"):format(table.concat(acts, ", "),
            n.op_type == "RNN" and "Tanh or Relu, the same for both directions" or table.concat(per, ", ") .. " (PyTorch's)"))
        end
      end
    end
  end
  return mode
end

-- Direction d's (0-based) rows of constant v ([dirs, G H, ...] or B's [dirs, 2 G H] half `half`),
-- gate blocks reordered, as a tensor of the model's dtype.
local function gate_rows(self, n, v, d, gates, hidden, order, half)
  local t = self:tensor_of(v):select(1, d + 1)
  if half then t = t:narrow(1, half * gates * hidden + 1, gates * hidden) end
  local blocks = {}
  for k, from in ipairs(order) do blocks[k] = t:narrow(1, from * hidden + 1, hidden) end
  return #blocks == 1 and blocks[1]:contiguous() or require("tocha").cat(blocks, 1)
end

local function zeros(count)
  local out = {}
  for i = 1, count do out[i] = 0 end
  return out
end

local function record(t) return { const = true, shape = t:shape(), tensor = t } end

-- Whether constant v is zeros throughout.
local function all_zero(self, n, v, what)
  for _, e in ipairs(self:values_of(n, v, what)) do
    if e ~= 0 then return false end
  end
  return true
end

-- The emitted record of x viewed as shape.
local function viewed(self, n, x, shape, hint)
  local r = self:emit(n, views.View.new(shape, { dtype = self.dtype }), { x }, nil, hint)
  return { node = r.node, shape = shape }
end

-- The records joined along dimension `a` (1-based) of their shape: one as it is, two by a
-- ChannelCat of their views [outer, size, inner].
local function joined(self, n, list, a)
  if #list == 1 then return list[1] end
  local shape = {}
  for k, s in ipairs(list[1].shape) do shape[k] = s end
  local outer, inner = 1, 1
  for k = 1, a - 1 do outer = outer * shape[k] end
  for k = a + 1, #shape do inner = inner * shape[k] end
  local parts = {}
  for i, v in ipairs(list) do parts[i] = viewed(self, n, v, { outer, v.shape[a], inner }) end
  shape[a] = list[1].shape[a] + list[2].shape[a]
  local cat = self:emit(n, ChannelCat.new(self.dtype), parts)
  return viewed(self, n, cat, shape)
end

-- Input i (initial_h, initial_c) of direction d as the op's [B, H] input, or nil for zeros.
local function initial(self, n, i, d, dirs, B, H, what, stem)
  local v = self:input(n, i)
  if not v then return nil end
  if #v.shape ~= 3 or v.shape[1] ~= dirs or v.shape[2] ~= B or v.shape[3] ~= H then
    self:fail(n, ("%s: expected [%d, %d, %d] (directions, batch, hidden_size), got [%s]"):format(what, dirs, B, H,
      table.concat(v.shape, ", ")))
  end
  if v.const and all_zero(self, n, v, what) then return nil end
  v = self:runtime(n, i, what)
  local hint = stem .. (i == 6 and "_h0" or "_c0")
  local part = self:emit(n, strided.Slice.new({ d }, { d + 1 }, { axes = { 1 }, dtype = self.dtype }), { v }, nil, hint)
  return viewed(self, n, part, { B, H }, hint)
end

local function convert(self, n)
  local kind = n.op_type
  local G, order = GATES[kind], ORDER[kind]
  if self:attr(n, "layout", 0) ~= 0 then self:fail(n, "layout 1 (batch first) is not supported (PyTorch exports layout 0)") end
  if self:attr(n, "clip") ~= nil then self:fail(n, "clip is not supported") end
  if self:attr(n, "input_forget", 0) ~= 0 then self:fail(n, "input_forget 1 is not supported") end
  if kind == "GRU" and self:attr(n, "linear_before_reset", 0) ~= 1 then
    self:fail(n, "linear_before_reset 0 is not supported (PyTorch's nn.GRU exports 1)")
  end
  local direction = self:attr(n, "direction", "forward")
  local dirs = direction == "bidirectional" and 2 or 1
  if direction ~= "forward" and direction ~= "reverse" and direction ~= "bidirectional" then
    self:fail(n, ("direction %q: expected forward, reverse or bidirectional"):format(direction))
  end
  local mode = mode_of(self, n, dirs)
  local x = self:runtime(n, 1, "X")
  if #x.shape ~= 3 then self:fail(n, ("X: expected [seq_length, batch, input_size], got [%s]"):format(table.concat(x.shape, ", "))) end
  local T, B, I = x.shape[1], x.shape[2], x.shape[3]
  local w, r = self:needed(n, 2, "W"), self:needed(n, 3, "R")
  if not w.const or not r.const then self:fail(n, "W and R must be initializers (constants)") end
  local H = self:attr(n, "hidden_size") or r.shape[3]
  if #w.shape ~= 3 or w.shape[1] ~= dirs or w.shape[2] ~= G * H or w.shape[3] ~= I then
    self:fail(n, ("W: expected [%d, %d, %d], got [%s]"):format(dirs, G * H, I, table.concat(w.shape, ", ")))
  end
  if #r.shape ~= 3 or r.shape[1] ~= dirs or r.shape[2] ~= G * H or r.shape[3] ~= H then
    self:fail(n, ("R: expected [%d, %d, %d], got [%s]"):format(dirs, G * H, H, table.concat(r.shape, ", ")))
  end
  local bias = self:input(n, 4)
  if bias and (not bias.const or #bias.shape ~= 2 or bias.shape[1] ~= dirs or bias.shape[2] ~= 2 * G * H) then
    self:fail(n, ("B: expected a constant [%d, %d]"):format(dirs, 2 * G * H))
  end
  local lens = self:input(n, 5)
  if lens then
    if not lens.const then self:fail(n, "sequence_lens must be a constant (per-item lengths are not supported)") end
    for _, v in ipairs(self:values_of(n, lens, "sequence_lens")) do
      if v ~= T then self:fail(n, ("sequence_lens: a length of %d in a sequence of %d is not supported"):format(v, T)) end
    end
  end
  local peep = kind == "LSTM" and self:input(n, 8)
  if peep and not (peep.const and all_zero(self, n, peep, "P")) then self:fail(n, "peepholes (P) are not supported") end
  local hs, h_last, c_last = {}, {}, {}
  for d = 0, dirs - 1 do
    local reverse = direction == "reverse" or d == 1
    local stem = (n.name ~= "" and n.name or kind:lower()) .. (dirs == 2 and (d == 0 and "_forward" or "_reverse") or "")
    local proj = Linear.new(I, G * H, { bias = bias ~= nil, dtype = self.dtype })
    local gx = self:emit(n, proj, { x }, { weight = record(gate_rows(self, n, w, d, G, H, order)),
      bias = bias and record(gate_rows(self, n, bias, d, G, H, order, 0)) }, stem .. "_input")
    local inputs = { gx }
    local h0 = initial(self, n, 6, d, dirs, B, H, "initial_h", stem)
    local c0 = kind == "LSTM" and initial(self, n, 7, d, dirs, B, H, "initial_c", stem)
    local given = h0 ~= nil or c0 ~= nil
    if given then
      -- a zero h0 beside a given c0 (or the reverse): the zeros as the op's input
      local zero = { const = true, shape = { B, H }, values = zeros(B * H) }
      inputs[2] = h0 or self:hold(n, zero, x)
      if kind == "LSTM" then inputs[3] = c0 or self:hold(n, zero, x) end
    end
    local op = Recurrent.new(mode, H, T, { reverse = reverse, initial_state = given, dtype = self.dtype })
    local rb = bias and record(gate_rows(self, n, bias, d, G, H, order, 1))
      or { const = true, shape = { G * H }, values = zeros(G * H) }
    local out = self:emit(n, op, inputs, { weight_hh = record(gate_rows(self, n, r, d, G, H, order)), bias_hh = rb }, stem)
    local last = reverse and 0 or T - 1
    local function part(starts, ends, axes, shape, what)
      local s = self:emit(n, strided.Slice.new(starts, ends, { axes = axes, dtype = self.dtype }), { out }, nil, stem .. what)
      return viewed(self, n, s, shape, stem .. what)
    end
    if kind == "LSTM" then
      hs[d + 1] = part({ 0 }, { 1 }, { 1 }, { T, 1, B, H }, "_y")
      h_last[d + 1] = part({ 0, last }, { 1, last + 1 }, { 1, 2 }, { 1, B, H }, "_y_h")
      c_last[d + 1] = part({ 1, last }, { 2, last + 1 }, { 1, 2 }, { 1, B, H }, "_y_c")
    else
      hs[d + 1] = viewed(self, n, out, { T, 1, B, H }, stem .. "_y")
      h_last[d + 1] = part({ last }, { last + 1 }, { 1 }, { 1, B, H }, "_y_h")
    end
  end
  self:set(n, 1, joined(self, n, hs, 2))
  self:set(n, 2, joined(self, n, h_last, 1))
  if kind == "LSTM" then self:set(n, 3, joined(self, n, c_last, 1)) end
end

-- Installs the converters into OPS (tocha.onnx's table of converters by op type).
function M.install(OPS)
  OPS.LSTM, OPS.GRU, OPS.RNN = convert, convert, convert
end

return M
