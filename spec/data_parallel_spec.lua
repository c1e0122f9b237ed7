-- tocha.DataParallel on the simulator's two devices (sim, sim:1): training with a slice of each
-- batch a device gives the losses and parameters of training on one device with the whole
-- batch, every replica holds the same parameters after every step, buffers follow the first
-- replica, buckets of any size give the same gradients, and misuse is refused by name.
local tocha = require "tocha"

local DEVICES = { "sim", "sim:1" }

-- A small network: a convolution, optionally a batch norm, a linear layer; dtype dt.
local function build(dt, with_bn)
  local x_in = tocha.Model.input({ -1, 2, 6, 6 }, { name = "x", dtype = dt })
  local h = tocha.Conv2d.new(2, 4, 3, { padding = 1, activation = with_bn and "identity" or "relu", dtype = dt })(x_in):named("conv1")
  if with_bn then
    h = tocha.BatchNorm2d.new(4, { dtype = dt })(h):named("bn1")
    h = tocha.Elementwise.new("relu", dt)(h)
  end
  h = tocha.Flatten.new({ dtype = dt })(h)
  h = tocha.Linear.new(4 * 36, 5, { dtype = dt })(h):named("fc")
  return tocha.Model({ x_in }, { h })
end

local function batch(step, n, dt)
  local labels = {}
  for i = 1, n do labels[i] = (i * 7 + step) % 5 + 1 end
  return tocha.rand({ n, 2, 6, 6 }, { dtype = dt, seed = 100 + step, low = -1, high = 1, device = "sim" }),
    tocha.tensor(labels, { dtype = "i64", device = "sim" })
end

local function max_diff(a, b)
  local x, y = a:cast("f64"):to("sim"):to_table(true), b:cast("f64"):to("sim"):to_table(true)
  local d = 0
  for i = 1, #x do d = math.max(d, math.abs(x[i] - y[i])) end
  return d
end

-- Every replica's parameters (buffers too) equal the first's, bit for bit.
local function assert_replicas_equal(dp, what)
  local first = dp.models[1]:parameters()
  for r = 2, #dp.models do
    local p = dp.models[r]:parameters()
    for name, t in pairs(first) do
      assert.are.equal(DEVICES[r], p[name]:device())
      assert.are.equal(0, max_diff(t, p[name]), ("%s: %s on rank %d"):format(what, name, r))
    end
  end
end

describe("tocha.DataParallel", function()
  it("trains as one device does with the whole batch (f64, SGD with momentum), replicas equal after every step", function()
    for _, bucket in ipairs({ 25 * 2 ^ 20, 600 }) do
      local single = build("f64"):load(8, "sim")
      local dp = tocha.DataParallel(build("f64"), DEVICES, { bucket_bytes = bucket }):load(8)
      if bucket == 600 then assert.is_true(#dp.buckets >= 3, #dp.buckets) else assert.are.equal(1, #dp.buckets) end
      local opt = tocha.optim.SGD(single:trainable_parameters(), { lr = 0.05, momentum = 0.9 })
      local opts = dp:optimizers(function(p) return tocha.optim.SGD(p, { lr = 0.05, momentum = 0.9 }) end)
      for step = 1, 4 do
        local x, y = batch(step, 8, "f64")
        local out, cache = single:forward_train({ x })
        local loss, g = tocha.loss.cross_entropy(out[1], y)
        local _, grads = single:backward({ g }, cache)
        opt:step(grads)
        local dp_loss = dp:train_step({ x }, y, tocha.loss.cross_entropy, opts)
        local want = loss:to_table(true)[1]
        assert.is_true(math.abs(dp_loss - want) <= 1e-12 * math.abs(want), ("step %d: %.17g vs %.17g"):format(step, dp_loss, want))
        assert_replicas_equal(dp, "step " .. step)
        for name, t in pairs(single:parameters()) do
          assert.is_true(max_diff(t, dp:parameters()[name]) <= 1e-12, ("step %d %s"):format(step, name))
        end
      end
    end
  end)

  it("keeps f32 replicas bit-equal under AdamW, with a batch norm's statistics taken from the first", function()
    local dp = tocha.DataParallel(build("f32", true), DEVICES):load(6)
    local opts = dp:optimizers(function(p) return tocha.optim.AdamW(p, { lr = 1e-2 }) end)
    local losses = {}
    for step = 1, 3 do
      local x, y = batch(step, 6, "f32")
      losses[step] = dp:train_step({ x }, y, tocha.loss.cross_entropy, opts)
      assert.is_true(losses[step] > 0 and losses[step] < 10, losses[step])
    end
    -- Each replica's forward updates its statistics from its own slice, so they differ after
    -- one; the next forward starts every replica from the first's, as PyTorch DDP's
    -- broadcast_buffers does: a replica's own values (here 1000) are gone, and the momentum of
    -- 0.1 moves the first's by one slice's statistics only.
    local mean1 = dp.models[1]:parameters()["bn1.running_mean"]
    local mean2 = dp.models[2]:parameters()["bn1.running_mean"]
    assert.is_true(max_diff(mean1, mean2) > 0)
    mean2:fill(1000)
    local before = mean1:to_table(true)
    dp:forward_train({ (batch(9, 6, "f32")) })
    local after1, after2 = mean1:to_table(true), mean2:to_table(true)
    for c = 1, 4 do
      assert.is_true(after1[c] ~= before[c])
      assert.is_true(math.abs(after2[c] - 0.9 * before[c]) < 0.2, ("channel %d: %g from %g"):format(c, after2[c], before[c]))
    end
    local trainable = dp.models[1]:trainable_parameters()
    for name, t in pairs(trainable) do
      assert.are.equal(0, max_diff(t, dp.models[2]:parameters()[name]), name)
    end
  end)

  it("trains over four sim devices as over one (a child process with TOCHA_SIM_DEVICES=4)", function()
    local process = require "support.process"
    local script = process.write_script([[
      local tocha = require "tocha"
      local function build()
        local x_in = tocha.Model.input({ -1, 6 }, { name = "x", dtype = "f64" })
        local h = tocha.Linear.new(6, 7, { dtype = "f64", activation = "tanh" })(x_in):named("fc1")
        return tocha.Model({ x_in }, { tocha.Linear.new(7, 3, { dtype = "f64" })(h):named("fc2") })
      end
      local single = build():load(8, "sim")
      local dp = tocha.DataParallel(build(), { "sim", "sim:1", "sim:2", "sim:3" }, { bucket_bytes = 100 }):load(8)
      local opt = tocha.optim.AdamW(single:trainable_parameters(), { lr = 0.01 })
      local opts = dp:optimizers(function(p) return tocha.optim.AdamW(p, { lr = 0.01 }) end)
      local worst = 0
      for step = 1, 3 do
        local x = tocha.rand({ 8, 6 }, { dtype = "f64", seed = step, low = -1, high = 1, device = "sim" })
        local y = tocha.tensor({ 1, 2, 3, 1, 2, 3, 1, 2 }, { dtype = "i64", device = "sim" })
        local out, cache = single:forward_train({ x })
        local loss, g = tocha.loss.cross_entropy(out[1], y)
        local _, grads = single:backward({ g }, cache)
        opt:step(grads)
        local l4 = dp:train_step({ x }, y, tocha.loss.cross_entropy, opts)
        worst = math.max(worst, math.abs(l4 - loss:item()))
      end
      for name, t in pairs(single:parameters()) do
        local a = t:to_table(true)
        for r = 1, 4 do
          local b = dp.models[r]:parameters()[name]:to("sim"):to_table(true)
          for i = 1, #a do worst = math.max(worst, math.abs(a[i] - b[i])) end
        end
      end
      print(#dp.buckets, worst < 1e-12, dp.models[4]:parameters()["fc1.weight"]:device())
    ]])
    local out, err, status = process.run { args = { script }, env = { TOCHA_SIM_DEVICES = "4" } }
    os.remove(script)
    assert.are.equal(0, status, err)
    -- 100-byte buckets: no two of fc2's weight (168 bytes) and bias (24), fc1's weight (336)
    -- and bias (56), neighbours in reverse model order, fit one together, so four buckets
    assert.are.equal("4\ttrue\tsim:3\n", out)
  end)

  it("scatters a batch into equal slices, one a device, and takes slices placed already", function()
    local dp = tocha.DataParallel(build("f32"), DEVICES):load(4)
    local t = tocha.tensor({ 1, 2, 3, 4, 5, 6, 7, 8 }):view(4, 2)
    local s = dp:scatter(t)
    assert.are.same({ 1, 2, 3, 4 }, s[1]:to_table(true))
    assert.are.same({ 5, 6, 7, 8 }, s[2]:to_table(true))
    assert.are.equal("sim:1", s[2]:device())
    assert.are.same({ 2, 2 }, s[2]:shape())
    assert.are.equal(s, dp:scatter(s))
    -- a step on placed slices is the step on the whole batch
    local x, y = batch(3, 4, "f32")
    local a = tocha.DataParallel(build("f32"), DEVICES):load(4)
    local b = tocha.DataParallel(build("f32"), DEVICES):load(4)
    local oa = a:optimizers(function(p) return tocha.optim.SGD(p, { lr = 0.1 }) end)
    local ob = b:optimizers(function(p) return tocha.optim.SGD(p, { lr = 0.1 }) end)
    assert.are.equal(a:train_step({ x }, y, tocha.loss.cross_entropy, oa),
      b:train_step({ b:scatter(x) }, b:scatter(y), tocha.loss.cross_entropy, ob))
    for name, p in pairs(a:parameters()) do assert.are.equal(0, max_diff(p, b:parameters()[name]), name) end
    assert.has_error(function() dp:scatter({ s[1] }) end,
      "tocha.DataParallel:scatter: t: expected a tensor of the whole batch or a list of 2 slices, one a device, got a list of 1")
    assert.has_error(function() dp:scatter({ s[2], s[1] }) end, "tocha.DataParallel:scatter: t[1]: on sim:1, but device 1 is sim")
    assert.has_error(function() dp:scatter({ s[1], tocha.ones({ 3, 2 }, { device = "sim:1" }) }) end,
      "tocha.DataParallel:scatter: t[2]: expected a slice of 2 along the first dimension, got shape [3, 2]")
  end)

  it("puts every replica in inference mode and back with dp:train", function()
    local dp = tocha.DataParallel(build("f32", true), DEVICES):load(4)
    assert.are.equal(dp, dp:train(false))
    for _, m in ipairs(dp.models) do assert.is_false(m.training) end
    -- inference mode: the running statistics (0 and 1 at the start) normalize, and stay
    local x = batch(1, 4, "f32")
    local outs = dp:forward_train({ x })
    assert.are.same({ 0, 0, 0, 0 }, dp.models[2]:parameters()["bn1.running_mean"]:to_table(true))
    local whole = build("f32", true):load(4, "sim"):train(false)
    for name, p in pairs(dp:parameters()) do whole:parameters()[name]:copy(p) end
    local want = whole:forward({ x })[1]:to_table(true)
    local got = {}
    for _, o in ipairs({ outs[1][1], outs[2][1] }) do for _, v in ipairs(o:to_table(true)) do got[#got + 1] = v end end
    assert.are.same(want, got)
    dp:train(true)
    for _, m in ipairs(dp.models) do assert.is_true(m.training) end
  end)

  it("moves a model's parameters with their values when it is loaded on another device", function()
    local m = build("f32"):load(2, "sim")
    local before = m:parameters()["fc.weight"]:to_table(true)
    m:parameters()["fc.bias"]:fill(0.25)
    m:load(2, "sim:1")
    local p = m:parameters()
    assert.are.equal("sim:1", p["fc.weight"]:device())
    assert.are.same(before, p["fc.weight"]:to_table(true))
    assert.are.same({ 0.25, 0.25, 0.25, 0.25, 0.25 }, p["fc.bias"]:to_table(true))
    local y = m:forward({ tocha.rand({ 2, 2, 6, 6 }, { device = "sim:1", seed = 3 }) })[1]
    assert.are.equal("sim:1", y:device())
  end)

  it("refuses misuse by name", function()
    local m = build("f32")
    assert.has_error(function() tocha.DataParallel({}, DEVICES) end, "tocha.DataParallel: model: expected a tocha.Model, got table")
    assert.has_error(function() tocha.DataParallel(m, "sim") end,
      'tocha.DataParallel: devices: expected a list of devices (names such as "cuda:0", "sim:1"), got "sim"')
    assert.has_error(function() tocha.DataParallel(m, { "sim", "sim" }) end, "tocha.DataParallel: devices[2]: sim is listed already, as devices[1]")
    assert.has_error(function() tocha.DataParallel(m, { "sim", "sim:7" }) end,
      "tocha.DataParallel: devices[2]: device: sim:7 does not exist (this process has sim:0 to sim:1; TOCHA_SIM_DEVICES sets how many, at most 8)")
    assert.has_error(function() tocha.DataParallel(m, DEVICES, { bucket_bytes = 0 }) end,
      "tocha.DataParallel: options.bucket_bytes: expected a positive whole number of bytes, got 0")
    local dp = tocha.DataParallel(m, DEVICES)
    assert.has_error(function() dp:scatter(tocha.ones({ 4 })) end, "tocha.DataParallel:scatter: self: not loaded: call dp:load(batch_size) first")
    assert.has_error(function() dp:load(5) end, "tocha.DataParallel:load: batch_size: 5 does not divide among 2 devices")
    dp:load(4)
    assert.has_error(function() dp:scatter(tocha.ones({ 6, 2 })) end,
      "tocha.DataParallel:scatter: t: expected the whole batch, 4 along the first dimension, got shape [6, 2]")
    local x, y = batch(1, 4, "f32")
    local opts = dp:optimizers(function(p) return tocha.optim.SGD(p, { lr = 0.1 }) end)
    assert.has_error(function() dp:train_step({ x }, y, tocha.loss.cross_entropy, { opts[1] }) end,
      "tocha.DataParallel:train_step: optimizers: expected a list of 2 optimizers (dp:optimizers), got table")
    assert.has_error(function() dp:train_step(x, y, tocha.loss.cross_entropy, opts) end,
      "tocha.DataParallel:train_step: inputs: expected a list of tensors, got cdata")
    assert.has_error(function() dp:all_reduce_gradients({ {}, {} }) end,
      "tocha.DataParallel:all_reduce_gradients: grads[1]: no gradient for fc.weight")
    assert.has_error(function() dp:all_reduce_gradients({ {}, 3 }) end,
      "tocha.DataParallel:all_reduce_gradients: grads[2]: expected a table of gradients by parameter name, got 3")
    local wrong = {}
    for name, t in pairs(dp.models[1]:trainable_parameters()) do wrong[name] = tocha.zeros(t:shape()) end
    wrong["fc.bias"] = tocha.zeros({ 1, 5 })
    assert.has_error(function() dp:all_reduce_gradients({ wrong, wrong }) end,
      "tocha.DataParallel:all_reduce_gradients: grads[1].fc.bias: f32 [1, 5], but the parameter is f32 [5]")
    assert.has_error(function() dp.load(nil, 4) end, "tocha.DataParallel:load: self: expected a DataParallel, got nil (call it as x:load(...))")
    -- Still usable after every refusal.
    local loss = dp:train_step({ x }, y, tocha.loss.cross_entropy, opts)
    assert.is_true(loss > 0)
    assert_replicas_equal(dp, "after the refusals")
  end)
end)
