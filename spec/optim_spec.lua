-- tocha.optim: SGD (plain, momentum, dampening, Nesterov, weight decay) and AdamW over several
-- parameters of different sizes (one launch, chunks crossing parameters), five steps each,
-- every element against PyTorch's update rules written out here in f64; halves keep f32
-- moments; state saved and loaded (a resumed run equals an unbroken one); a training step of a
-- model (forward_train, loss, backward, step) lowering its loss; bad arguments. On sim and,
-- tagged #gpu, on cuda.
local tocha = require "tocha"
local ref = require "support.reference"

local fails = require("support.assertions").fails

-- PyTorch's rules on plain lists (p, and states st = {buf} or {m, v}) for step t.
local function sgd_ref(p, g, st, o, t)
  for i = 1, #p do
    local gr = g[i] + (o.weight_decay or 0) * p[i]
    if (o.momentum or 0) ~= 0 then
      local buf = t == 1 and gr or o.momentum * st[1][i] + (1 - (o.dampening or 0)) * gr
      st[1][i] = buf
      gr = o.nesterov and gr + o.momentum * buf or buf
    end
    p[i] = p[i] - o.lr * gr
  end
end
local function adamw_ref(p, g, st, o, t)
  local b1, b2 = o.betas and o.betas[1] or 0.9, o.betas and o.betas[2] or 0.999
  local lr, eps, wd = o.lr or 1e-3, o.eps or 1e-8, o.weight_decay or 1e-2
  for i = 1, #p do
    p[i] = p[i] - lr * wd * p[i]
    st[1][i] = b1 * st[1][i] + (1 - b1) * g[i]
    st[2][i] = b2 * st[2][i] + (1 - b2) * g[i] * g[i]
    p[i] = p[i] - (lr / (1 - b1 ^ t)) * st[1][i] / (math.sqrt(st[2][i]) / math.sqrt(1 - b2 ^ t) + eps)
  end
end

describe("tocha.optim", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local seed = 0
      local function randn(shape, dt)
        seed = seed + 1
        return tocha.randn(shape, { dtype = dt or "f64", device = device, seed = seed })
      end
      local SIZES = { a = { 3 }, b = { 5, 4000 }, c = { 9000 } } -- b and c cross chunks of 8192

      local function run(kind, o, dt, steps)
        local params, plain, grads_by_step = {}, {}, {}
        for name, shape in pairs(SIZES) do
          params[name] = randn(shape, dt)
          plain[name] = params[name]:to_table(true)
        end
        local opt = tocha.optim[kind](params, o)
        local states = {}
        for name in pairs(SIZES) do
          states[name] = { {}, {} }
          for i = 1, #plain[name] do states[name][1][i], states[name][2][i] = 0, 0 end
        end
        for t = 1, steps do
          local grads = {}
          for name, shape in pairs(SIZES) do grads[name] = randn(shape, dt) end
          grads_by_step[t] = grads
          opt:step(grads)
          for name in pairs(SIZES) do
            local g = grads[name]:to_table(true)
            if kind == "SGD" then sgd_ref(plain[name], g, states[name], o, t) else adamw_ref(plain[name], g, states[name], o, t) end
            if dt ~= "f64" then
              for i = 1, #plain[name] do plain[name][i] = ref.convert(plain[name][i], dt) end
            end
          end
        end
        return params, plain, opt
      end

      local function check(params, plain, tol, label)
        for name in pairs(SIZES) do
          local got = params[name]:to_table(true)
          for i = 1, #got do
            local w = plain[name][i]
            assert(math.abs(got[i] - w) <= tol * math.max(1, math.abs(w)),
              ("%s %s[%d]: got %.12g, want %.12g"):format(label, name, i, got[i], w))
          end
        end
      end

      it("steps as PyTorch's rules, every option, f64", function()
        local cases = {
          { "SGD", { lr = 0.1 } },
          { "SGD", { lr = 0.05, momentum = 0.9, weight_decay = 1e-3 } },
          { "SGD", { lr = 0.05, momentum = 0.8, dampening = 0.3 } },
          { "SGD", { lr = 0.05, momentum = 0.9, nesterov = true } },
          { "AdamW", {} },
          { "AdamW", { lr = 0.01, betas = { 0.8, 0.99 }, eps = 1e-6, weight_decay = 0.1 } },
        }
        for _, c in ipairs(cases) do
          local params, plain = run(c[1], c[2], "f64", 5)
          check(params, plain, 1e-12, c[1])
        end
      end)

      it("keeps halves' moments in f32", function()
        for _, dt in ipairs({ "f32", "bf16" }) do
          local params, plain, opt = run("AdamW", { lr = 0.01 }, dt, 3)
          check(params, plain, dt == "f32" and 1e-5 or 1e-2, "AdamW " .. dt)
          local st = opt:state()
          assert.are.equal("f32", st["a.exp_avg"]:dtype())
        end
      end)

      it("saves and loads its state: a resumed run equals an unbroken one", function()
        local path = os.tmpname() .. ".safetensors"
        local p1, p2 = { w = randn({ 100 }) }, {}
        p2.w = p1.w:clone()
        local a, b = tocha.optim.AdamW(p1, { lr = 0.01 }), tocha.optim.AdamW(p2, { lr = 0.01 })
        local g1, g2 = randn({ 100 }), randn({ 100 })
        a:step({ w = g1 })
        b:step({ w = g1 })
        a:save(path)
        local c = tocha.optim.AdamW({ w = p1.w }, { lr = 0.01 })
        c:load(path)
        os.remove(path)
        c:step({ w = g2 })
        b:step({ w = g2 })
        assert.is_true(tocha.allclose(p1.w, p2.w, 0, 0))
        local _, steps = c:state()
        assert.are.equal(2, steps)
      end)

      it("trains a model: forward_train, loss, backward, step lower the loss", function()
        local input = tocha.Model.input({ -1, 6 })
        local ln = tocha.LayerNorm.new({ 6 })
        local m = tocha.Model({ input }, { ln(input) })
        m:load(32, device)
        local x = randn({ 32, 6 }, "f32")
        local labels = {}
        for i = 1, 32 do labels[i] = (i % 6) + 1 end
        local y = tocha.tensor(labels, { dtype = "i64", device = device })
        local opt = tocha.optim.AdamW(m:parameters(), { lr = 0.05, weight_decay = 0 })
        local first, last
        for step = 1, 30 do
          local out, cache = m:forward_train({ x })
          local loss, dy = tocha.loss.cross_entropy(out[1], y)
          local _, grads = m:backward({ dy }, cache)
          opt:step(grads)
          if step == 1 then first = loss:item() end
          last = loss:item()
        end
        assert(last < 0.8 * first, ("loss %.4f -> %.4f"):format(first, last))
      end)

      it("takes a new learning rate between steps: set_lr equals an optimizer made with it", function()
        for _, kind in ipairs({ "AdamW", "SGD" }) do
          local p1 = { w = randn({ 100 }) }
          local p2 = { w = p1.w:clone() }
          local a = tocha.optim[kind](p1, { lr = 0.05, momentum = kind == "SGD" and 0.9 or nil })
          local b = tocha.optim[kind](p2, { lr = 0.05, momentum = kind == "SGD" and 0.9 or nil })
          local g1, g2 = randn({ 100 }), randn({ 100 })
          a:step({ w = g1 })
          b:step({ w = g1 })
          local before = p1.w:to_table(true)
          assert.are.equal(a, a:set_lr(0.01))
          assert.are.equal(0.01, a:lr())
          a:step({ w = g2 })
          b:step({ w = g2 })
          -- both rules move a parameter by lr times what the state gives: a's move is b's / 5
          local wa, wb = p1.w:to_table(true), p2.w:to_table(true)
          for i = 1, #before do
            local da, db = wa[i] - before[i], wb[i] - before[i]
            assert.is_true(math.abs(da - db / 5) <= 1e-6 * math.abs(db) + 1e-7, ("%s [%d]: %g vs %g / 5"):format(kind, i, da, db))
          end
        end
        local opt = tocha.optim.AdamW({ w = randn({ 4 }) })
        local ok, message = pcall(opt.set_lr, opt, -1)
        assert.is_false(ok)
        assert.truthy(tostring(message):find("lr: expected a non-negative number, got -1", 1, true), message)
      end)

      it("refuses bad arguments by name", function()
        local p = { w = randn({ 4 }) }
        fails("lr: expected a learning rate (SGD has no default), got nil", tocha.optim.SGD, p, {})
        fails("nesterov: needs a momentum and zero dampening", tocha.optim.SGD, p, { lr = 1, nesterov = true })
        fails("betas[2]: expected a number in [0, 1), got 1", tocha.optim.AdamW, p, { betas = { 0.9, 1 } })
        fails('"momentum": unknown option of tocha.optim.AdamW', tocha.optim.AdamW, p, { momentum = 0.9 })
        fails("params: no parameters", tocha.optim.AdamW, {})
        fails('params["b"]: expected dtype f64 (as a), got f32', tocha.optim.AdamW, { a = randn({ 2 }), b = randn({ 2 }, "f32") })
        local opt = tocha.optim.AdamW(p)
        fails('grads["w"]: missing (every parameter needs its gradient)', opt.step, opt, {})
        fails('grads["w"]: expected shape [4] (its parameter\'s), got [5]', opt.step, opt, { w = randn({ 5 }) })
        fails('grads["v"]: no parameter of that name', opt.step, opt, { w = randn({ 4 }), v = randn({ 4 }) })
      end)
    end)
  end
end)
