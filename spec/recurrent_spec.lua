-- tocha.Recurrent: LSTM, GRU and the two Elman RNNs over a sequence, each direction, from a
-- zero state and from a given one, against a reference written here in Lua (f64, the gate
-- equations of PyTorch's nn.LSTM, nn.GRU and nn.RNN); gradients of every input and parameter
-- against central differences of that reference; halves within their rounding; the op in a
-- tocha.Model after a Linear (forward_train, backward); bad arguments. On sim and, tagged #gpu,
-- on cuda.
local tocha = require "tocha"
local ref = require "support.reference"
local fails = require("support.assertions").fails

local GATES = { lstm = 4, gru = 3, rnn_tanh = 1, rnn_relu = 1 }

local function sigmoid(v) return 1 / (1 + math.exp(-v)) end
local function tanh(v)
  local e = math.exp(-2 * math.abs(v))
  local t = (1 - e) / (1 + e)
  return v < 0 and -t or t
end

-- The reference: gx [T][B][G H], w [G H][H], b [G H], h0, c0 [B][H] (nil: zeros) as flat Lua
-- lists (row-major); gives h [T][B][H] and c (LSTM) as flat lists.
local function reference(mode, T, B, H, reverse, gx, w, b, h0, c0)
  local G = GATES[mode]
  local hs, cs = {}, {}
  local h, c = {}, {}
  for e = 1, B * H do h[e], c[e] = h0 and h0[e] or 0, c0 and c0[e] or 0 end
  for s = 1, T do
    local t = reverse and T - s or s - 1
    local nh, nc = {}, {}
    for bi = 0, B - 1 do
      local gh = {}
      for r = 0, G * H - 1 do
        local acc = b[r + 1]
        for k = 0, H - 1 do acc = acc + h[bi * H + k + 1] * w[r * H + k + 1] end
        gh[r] = acc
      end
      local function x(r) return gx[(t * B + bi) * G * H + r + 1] end
      for j = 0, H - 1 do
        local e = bi * H + j + 1
        if mode == "lstm" then
          local i = sigmoid(x(j) + gh[j])
          local f = sigmoid(x(H + j) + gh[H + j])
          local g = tanh(x(2 * H + j) + gh[2 * H + j])
          local o = sigmoid(x(3 * H + j) + gh[3 * H + j])
          nc[e] = f * c[e] + i * g
          nh[e] = o * tanh(nc[e])
        elseif mode == "gru" then
          local r = sigmoid(x(j) + gh[j])
          local z = sigmoid(x(H + j) + gh[H + j])
          local n = tanh(x(2 * H + j) + r * gh[2 * H + j])
          nh[e] = (1 - z) * n + z * h[e]
        else
          local a = x(j) + gh[j]
          nh[e] = mode == "rnn_tanh" and tanh(a) or math.max(a, 0)
        end
      end
    end
    h, c = nh, nc
    for e = 1, B * H do
      hs[t * B * H + e] = h[e]
      cs[t * B * H + e] = c[e]
    end
  end
  return hs, cs
end

-- The reference's output as the op lays it out ([T, B, H], or [2, T, B, H] for an LSTM).
local function reference_out(mode, T, B, H, reverse, lists)
  local hs, cs = reference(mode, T, B, H, reverse, lists.gx, lists.w, lists.b, lists.h0, lists.c0)
  if mode ~= "lstm" then return hs end
  local out = {}
  for e = 1, T * B * H do out[e], out[T * B * H + e] = hs[e], cs[e] end
  return out
end

local function case(mode, T, B, H, opts, device, dt)
  local G = GATES[mode]
  local seed = #mode * 7 + T * 3 + B + (opts.reverse and 100 or 0) + (opts.initial_state and 200 or 0)
  local t = {
    gx = tocha.randn({ T, B, G * H }, { dtype = "f64", device = device, seed = seed }),
    w = tocha.randn({ G * H, H }, { dtype = "f64", device = device, seed = seed + 1 }):mul(0.6),
    b = tocha.randn({ G * H }, { dtype = "f64", device = device, seed = seed + 2 }):mul(0.5),
  }
  if opts.initial_state then
    t.h0 = tocha.randn({ B, H }, { dtype = "f64", device = device, seed = seed + 3 })
    if mode == "lstm" then t.c0 = tocha.randn({ B, H }, { dtype = "f64", device = device, seed = seed + 4 }) end
  end
  if dt and dt ~= "f64" then -- inputs rounded to dt, the reference fed the rounded values
    for k, v in pairs(t) do t[k] = v:cast(dt) end
  end
  local lists = {}
  for k, v in pairs(t) do lists[k] = ref.values(v) end
  return t, lists
end

-- The op's inputs then parameters in its call order.
local function args_of(t)
  local list = { t.gx }
  if t.h0 then list[#list + 1] = t.h0 end
  if t.c0 then list[#list + 1] = t.c0 end
  list[#list + 1] = t.w
  list[#list + 1] = t.b
  return list
end

local function check_close(got, want, tol, label)
  local g = ref.values(got)
  assert(#g == #want, ("%s: %d elements, expected %d"):format(label, #g, #want))
  local top = 0
  for _, v in ipairs(want) do top = math.max(top, math.abs(v)) end
  for e = 1, #want do
    local err = math.abs(g[e] - want[e])
    assert(err <= tol * math.max(top, 1), ("%s: element %d is %.17g, expected %.17g"):format(label, e, g[e], want[e]))
  end
end

describe("tocha.Recurrent", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("computes every step of LSTM, GRU and both RNNs as the reference, each direction, from zero and given states", function()
        for _, mode in ipairs({ "lstm", "gru", "rnn_tanh", "rnn_relu" }) do
          for _, opts in ipairs({ {}, { reverse = true }, { initial_state = true }, { reverse = true, initial_state = true } }) do
            local T, B, H = 5, 3, 6
            local t, lists = case(mode, T, B, H, opts, device)
            local op = tocha.Recurrent.new(mode, H, T, { reverse = opts.reverse, initial_state = opts.initial_state,
              dtype = "f64" })
            local want = reference_out(mode, T, B, H, opts.reverse, lists)
            local shape = mode == "lstm" and { 2, T, B, H } or { T, B, H }
            local y = tocha.full(shape, 0 / 0, { dtype = "f64", device = device }) -- poisoned
            local args = args_of(t)
            args[#args + 1] = y
            assert.are.equal(y, op:forward(unpack(args)))
            check_close(y, want, 1e-12, ("%s %s"):format(mode, op.id))
          end
        end
      end)

      it("gives the gradient of gx, h0, c0, weight_hh and bias_hh that central differences of the reference give", function()
        for _, mode in ipairs({ "lstm", "gru", "rnn_tanh", "rnn_relu" }) do
          for _, opts in ipairs({ { initial_state = true }, { reverse = true }, { reverse = true, initial_state = true },
            { steps = 1 }, { steps = 1, initial_state = true } }) do
            local T, B, H = opts.steps or 3, 2, 3
            local t, lists = case(mode, T, B, H, opts, device)
            local op = tocha.Recurrent.new(mode, H, T, { reverse = opts.reverse, initial_state = opts.initial_state,
              dtype = "f64" })
            local out_n = (mode == "lstm" and 2 or 1) * T * B * H
            local dy = tocha.randn({ out_n }, { dtype = "f64", device = device, seed = 77 })
            local dyl = ref.values(dy)
            dy = dy:view(mode == "lstm" and { 2, T, B, H } or { T, B, H })
            local args = args_of(t)
            args[#args + 1] = dy
            local grads = { op:backward(unpack(args)) }
            local names = { "gx" }
            if t.h0 then names[#names + 1] = "h0" end
            if t.c0 then names[#names + 1] = "c0" end
            names[#names + 1], names[#names + 2] = "w", "b"
            local function loss()
              local y = reference_out(mode, T, B, H, opts.reverse, lists)
              local s = 0
              for e = 1, out_n do s = s + y[e] * dyl[e] end
              return s
            end
            for k, name in ipairs(names) do
              local list, want = lists[name], {}
              for e = 1, #list do
                local keep, step = list[e], 1e-6
                list[e] = keep + step
                local up = loss()
                list[e] = keep - step
                local down = loss()
                list[e] = keep
                want[e] = (up - down) / (2 * step)
              end
              check_close(grads[k], want, 1e-7, ("d%s of %s %s"):format(name, mode, op.id))
            end
          end
        end
      end)

      it("runs the products of f32 and halves (16-byte tiles, tensor cores) forward and backward as f64 does", function()
        for _, case_ in ipairs({ { "f32", 8, 1e-5 }, { "f16", 16, 2e-2 }, { "bf16", 16, 8e-2 } }) do
          local dt, H, tol = case_[1], case_[2], case_[3]
          for _, mode in ipairs({ "lstm", "gru" }) do
            local T, B = 4, 3
            local t = case(mode, T, B, H, { initial_state = true, reverse = true }, device, dt)
            local function run(d)
              local op = tocha.Recurrent.new(mode, H, T, { initial_state = true, reverse = true, dtype = d })
              local args = {}
              for i, v in ipairs(args_of(t)) do args[i] = v:cast(d) end
              local y = op:forward(unpack(args))
              args[#args + 1] = tocha.randn(y:shape(), { dtype = "f64", device = device, seed = 5 }):cast(d)
              return y, { op:backward(unpack(args)) }
            end
            local y, grads = run(dt)
            local y64, grads64 = run("f64")
            check_close(y, ref.values(y64), tol, ("%s %s y"):format(mode, dt))
            for k, g in ipairs(grads) do check_close(g, ref.values(grads64[k]), tol, ("%s %s gradient %d"):format(mode, dt, k)) end
          end
        end
      end)

      it("runs f32, f16 and bf16 within their rounding of the reference", function()
        for _, dt in ipairs({ "f32", "f16", "bf16" }) do
          for _, mode in ipairs({ "lstm", "gru" }) do
            local T, B, H = 6, 4, 16 -- (16: the products of halves on the tensor cores)
            local t, lists = case(mode, T, B, H, { initial_state = true }, device, dt)
            local op = tocha.Recurrent.new(mode, H, T, { initial_state = true, dtype = dt })
            local y = op:forward(unpack(args_of(t)))
            local tol = ({ f32 = 1e-5, f16 = 2e-2, bf16 = 8e-2 })[dt]
            check_close(y, reference_out(mode, T, B, H, false, lists), tol, ("%s %s"):format(mode, dt))
          end
        end
      end)

      it("trains in a model after a Linear: forward_train and backward give the direct calls' values", function()
        local T, B, I, H = 4, 3, 5, 8
        local Model = tocha.Model
        local x = Model.input({ T, B, I }, { dtype = "f64", name = "x" }) -- (time first: the batch is fixed)
        local proj = tocha.Linear.new(I, 4 * H, { dtype = "f64" })
        local lstm = tocha.Recurrent.new("lstm", H, T, { dtype = "f64", reverse = true })
        local gx = proj(x):named("proj")
        local m = Model({ x }, { lstm(gx):named("lstm") }):load(B, device)
        local xv = tocha.randn({ T, B, I }, { dtype = "f64", device = device, seed = 9 })
        local out, cache = m:forward_train({ xv })
        local p = m:parameters()
        local gxv = proj:forward(xv, p["proj.weight"], p["proj.bias"])
        local want = lstm:forward(gxv, p["lstm.weight_hh"], p["lstm.bias_hh"])
        assert.is_true(tocha.allclose(out[1], want, 0, 0))
        local g = tocha.randn({ 2, T, B, H }, { dtype = "f64", device = device, seed = 10 })
        local grads, pg = m:backward({ g }, cache)
        local dgx, dw, db = lstm:backward(gxv, p["lstm.weight_hh"], p["lstm.bias_hh"], g)
        assert.is_true(tocha.allclose(pg["lstm.weight_hh"], dw, 0, 0))
        assert.is_true(tocha.allclose(pg["lstm.bias_hh"], db, 0, 0))
        local dx = proj:backward(xv, p["proj.weight"], p["proj.bias"], dgx)
        assert.is_true(tocha.allclose(grads[1], dx, 1e-13, 1e-13))
      end)

      it("refuses bad arguments, naming them", function()
        fails("mode: expected \"lstm\", \"gru\", \"rnn_tanh\" or \"rnn_relu\", got \"rnn\"", tocha.Recurrent.new, "rnn", 4, 2)
        fails("hidden_size: expected a positive size, got 0", tocha.Recurrent.new, "gru", 0, 2)
        fails("steps: expected a positive size, got -1", tocha.Recurrent.new, "gru", 4, -1)
        fails("dtype: expected a float dtype", tocha.Recurrent.new, "gru", 4, 2, { dtype = "i32" })
        local op = tocha.Recurrent.new("gru", 4, 2, { initial_state = true })
        local w, b = tocha.zeros({ 12, 4 }, { device = device }), tocha.zeros({ 12 }, { device = device })
        local h0 = tocha.zeros({ 3, 4 }, { device = device })
        fails("gx: expected [2 (steps), batch, 12 (3 gates x hidden_size 4)], got [3, 3, 12]", op.forward, op,
          tocha.zeros({ 3, 3, 12 }, { device = device }), h0, w, b)
        fails("h0: expected the initial state [3, 4] (batch, hidden_size), got [2, 4]", op.forward, op,
          tocha.zeros({ 2, 3, 12 }, { device = device }), tocha.zeros({ 2, 4 }, { device = device }), w, b)
        fails("weight_hh: expected shape [12, 4]", op.forward, op, tocha.zeros({ 2, 3, 12 }, { device = device }), h0,
          tocha.zeros({ 4, 12 }, { device = device }), b)
        local y = op:forward(tocha.zeros({ 2, 3, 12 }, { device = device }), h0, w, b)
        assert.are.same({ 2, 3, 4 }, y:shape())
        -- the f32 products read h0 in 16-byte chunks: a view one element in is refused
        local odd = tocha.zeros({ 13 }, { device = device }):narrow(1, 2, 12):view({ 3, 4 })
        fails("h0: the op's kernels read it in 16-byte chunks, but its data starts 4 bytes past a 16-byte boundary",
          op.forward, op, tocha.zeros({ 2, 3, 12 }, { device = device }), odd, w, b)
        assert.are.same({ 2, 3, 4 }, op:forward(tocha.zeros({ 2, 3, 12 }, { device = device }), h0, w, b):shape())
      end)
    end)
  end
end)
