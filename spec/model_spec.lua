-- tocha.Model: DAGs of RuntimeOps (tocha's upsample, and ops written in Lua around a
-- tocha.kernel) loaded for a batch size and run forward with buffers planned by liveness; the
-- graph's errors named by node. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
require "tocha.assertions"
local ref = require "support.reference"
local numel = ref.numel
local up_ref = require "support.upsample_reference"

local Model = tocha.Model

-- The message of fn(...)'s error; fails when it returns.
local function error_of(fn, ...)
  local ok, message = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return message
end

-- Lua ops: y = a * x (one input) and y = x1 + x2 (two inputs, same shape).
local SCALE = [[
__device__ void scale_by(const float *x, float *y, long long n, float a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}]]
local ADD = [[
__device__ void add2(const float *a, const float *b, float *y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}]]
local scale_kernel = tocha.kernel { source = SCALE, name = "scale_by", params = "f32* x, f32* y, i64 n, f32 a" }
local add_kernel = tocha.kernel { source = ADD, name = "add2", params = "f32* a, f32* b, f32* y, i64 n" }

local function scale_op(a)
  return Model.op { name = "scale", kernel = scale_kernel,
    output_shape = function(shapes) return shapes[1] end,
    grid = function(s) return math.ceil(numel(s) / 128) end,
    args = function(ins, out, _, shape) return { ins[1], out, numel(shape), a } end }
end
-- The scale op with its backward: dx = a * dy (the same kernel).
local function trainable_scale_op(a)
  return Model.op { name = "tscale", kernel = scale_kernel, grad_kernel = scale_kernel,
    output_shape = function(shapes) return shapes[1] end,
    grid = function(s) return math.ceil(numel(s) / 128) end,
    args = function(ins, out, _, shape) return { ins[1], out, numel(shape), a } end,
    grad_args = function(_, _, dy, dxs, shapes) return { dy, dxs[1], numel(shapes[1]), a } end }
end
-- A Lua op with a parameter: y[b, c, i] = w[c] x[b, c, i]; dx = w dy, dw[c] = sum of dy x (one
-- thread a channel: plain, not fast).
local CHANNEL_SCALE = [[
__device__ void channel_scale(const float *x, const float *w, float *y, long long b, long long c, long long inner) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < b * c * inner) y[i] = w[(i / inner) % c] * x[i];
}
__device__ void channel_scale_grad(const float *x, const float *w, const float *dy, float *dx, float *dw,
                                   long long b, long long c, long long inner) {
  long long ch = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (ch >= c) return;
  float sum = 0;
  for (long long n = 0; n < b; ++n)
    for (long long k = 0; k < inner; ++k) {
      long long at = (n * c + ch) * inner + k;
      dx[at] = w[ch] * dy[at];
      sum += dy[at] * x[at];
    }
  dw[ch] = sum;
}]]
local scale_fwd = tocha.kernel { source = CHANNEL_SCALE, name = "channel_scale",
  params = "f32* x, f32* w, f32* y, i64 b, i64 c, i64 inner" }
local scale_bwd = tocha.kernel { source = CHANNEL_SCALE, name = "channel_scale_grad",
  params = "f32* x, f32* w, f32* dy, f32* dx, f32* dw, i64 b, i64 c, i64 inner" }
local function channel_scale_op(init)
  local function dims(s) return s[1], s[2], numel(s) / (s[1] * s[2]) end
  return Model.op { name = "cscale", kernel = scale_fwd, grad_kernel = scale_bwd,
    params = { { name = "weight", shape = function(ins) return { ins[1][2] } end, init = init } },
    output_shape = function(shapes) return shapes[1] end,
    grid = function(s) return math.ceil(numel(s) / 128) end,
    grad_grid = function(shapes) return math.ceil(shapes[1][2] / 128) end,
    args = function(ins, out, _, shape, ps) local b, c, k = dims(shape) return { ins[1], ps[1], out, b, c, k } end,
    grad_args = function(ins, _, dy, dxs, shapes, _, ps, gps)
      local b, c, k = dims(shapes[1])
      return { ins[1], ps[1], dy, dxs[1], gps[1], b, c, k }
    end }
end

local add_op = Model.op { name = "add", kernel = add_kernel,
  output_shape = function(shapes)
    if #shapes ~= 2 or table.concat(shapes[1], "x") ~= table.concat(shapes[2], "x") then
      error("add: expected two inputs of one shape")
    end
    return shapes[1]
  end,
  grid = function(s) return math.ceil(numel(s) / 128) end,
  args = function(ins, out, _, shape) return { ins[1], ins[2], out, numel(shape) } end }

describe("tocha.Model", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("runs a DAG of upsamples and Lua ops, a node read twice, for the batch it was loaded with", function()
        local up = tocha.UpsampleNearest2dForward.new(2, 3, 64)
        local x = Model.input({ -1, 2, 3, 4 }, { name = "x" })
        local a = scale_op(3)(x)
        local b = scale_op(2)(a)
        local c = scale_op(5)(b)        -- would take a's block, were it given back after b
        local s = add_op(a, c)          -- a is read by b and by s: its block must outlive c
        local y = up(s)
        local m = Model({ x }, { y })
        for _, batch in ipairs({ 1, 4 }) do
          m:load(batch, device)
          local xt = tocha.rand({ batch, 2, 3, 4 }, { device = device, seed = batch })
          local out = m:forward({ xt })
          local xs = xt:to_table(true)
          local sum = {} -- in f32, step by step as the kernels round
          for i, v in ipairs(xs) do
            local av = ref.convert(3 * v, "f32")
            local cv = ref.convert(5 * ref.convert(2 * av, "f32"), "f32")
            sum[i] = ref.convert(av + cv, "f32")
          end
          assert.are.same(up_ref.forward(sum, { batch, 2, 3, 4 }, 2, 3), out[1]:to_table(true))
          assert.are.same({ batch, 2, 6, 12 }, out[1]:shape())
        end
      end)

      it("gives a block read twice by one node back once, and returns an input that is an output", function()
        local x = Model.input({ -1, 4 })
        local a = scale_op(3)(x)
        local d = add_op(a, a)           -- reads a twice: a's block must go back once
        local e = scale_op(2)(d)         -- both would take that block, were it there twice
        local f = scale_op(5)(d)
        local m = Model({ x }, { add_op(e, f), x }):load(2, device)
        local xt = tocha.rand({ 2, 4 }, { device = device, seed = 7 })
        local out = m:forward({ xt })
        local want = {}
        for i, v in ipairs(xt:to_table(true)) do
          local dv = ref.convert(2 * ref.convert(3 * v, "f32"), "f32")
          want[i] = ref.convert(ref.convert(2 * dv, "f32") + ref.convert(5 * dv, "f32"), "f32")
        end
        assert.are.same(want, out[1]:to_table(true))
        assert.are.equal(xt, out[2])
      end)

      it("plans a chain of 20 ops in two blocks, and allocates nothing per forward", function()
        local x = Model.input({ -1, 8, 16, 16 })
        local h = x
        for i = 1, 20 do h = scale_op(i % 2 == 0 and 2 or 0.5)(h) end
        local m = Model({ x }, { h }):load(2, device)
        -- 19 intermediates of 16 KiB: two blocks with reuse, 19 without
        assert.are.equal(2, m.plan.blocks)
        assert.is_true(m.plan.bytes <= m.plan.without_reuse_bytes / 2)
        local xt = tocha.rand({ 2, 8, 16, 16 }, { device = device, seed = 3 })
        m:forward({ xt })
        local before = tocha.memory.stats(device).allocations
        local out = m:forward({ xt })
        assert.are.equal(before, tocha.memory.stats(device).allocations)
        assert.tensor.equal(xt, out[1]) -- ten halvings, ten doublings
      end)

      it("checks its inputs by name: count, shape, dtype, device, freed, and being loaded", function()
        local up = tocha.UpsampleNearest2dForward.new(2, 2, 64)
        local x = Model.input({ -1, 1, 2, 2 }, { name = "image" })
        local m = Model({ x }, { up(x) })
        local message = error_of(m.forward, m, {})
        assert.truthy(message:find("tocha.Model:forward: self: the model is not loaded", 1, true), message)
        m:load(2, device)
        local good = tocha.zeros({ 2, 1, 2, 2 }, { device = device })
        local freed = tocha.zeros({ 2, 1, 2, 2 }, { device = device })
        freed:free()
        for _, case in ipairs({
          { {}, "inputs: expected 1 tensors, got 0" },
          { { tocha.zeros({ 1, 1, 2, 2 }, { device = device }) }, "inputs[1] (image): expected shape [2, 1, 2, 2], got [1, 1, 2, 2]" },
          { { tocha.zeros({ 2, 1, 2, 2 }, { device = device, dtype = "f16" }) }, "inputs[1] (image): expected dtype f32, got f16" },
          { { freed }, "inputs[1] (image): tensor was freed" },
          { { 5 }, "inputs[1] (image): expected a tensor, got number" },
        }) do
          message = error_of(m.forward, m, case[1])
          assert.truthy(message:find("tocha.Model:forward: " .. case[2], 1, true), message)
        end
        if device ~= "sim" then
          message = error_of(m.forward, m, { tocha.zeros({ 2, 1, 2, 2 }, { device = "sim" }) })
          assert.truthy(message:find("inputs[1] (image): the tensor is on sim, the model on", 1, true), message)
        end
        assert.are.equal(32, #m:forward({ good })[1]:to_table(true)) -- [2, 1, 4, 4]
      end)

      -- x -> up -> u; out = gelu(u) * u: u has two readers, so its gradient is a sum.
      local function neck(dt)
        local x = Model.input({ -1, 3, 4, 5 }, { dtype = dt, name = "x" })
        local up = tocha.UpsampleNearest2dForward.new(2, 2, nil, dt)
        local gelu, mul = tocha.Elementwise.new("gelu", dt), tocha.Elementwise.new("mul", dt)
        local u = up(x)
        return Model({ x }, { mul(gelu(u), u) }), up, gelu, mul
      end

      it("trains: forward_train keeps each node, backward sums a fan-out's gradients in f32", function()
        for _, dt in ipairs({ "f32", "f16", "bf16" }) do
          local m, up, gelu, mul = neck(dt)
          m:load(2, device)
          local x = tocha.randn({ 2, 3, 4, 5 }, { dtype = dt, device = device, seed = 61 })
          local dy = tocha.randn({ 2, 3, 8, 10 }, { dtype = dt, device = device, seed = 62 })
          local outs, cache = m:forward_train({ x })
          assert.tensor.equal(m:forward({ x })[1], outs[1])
          local dx = m:backward({ dy }, cache)[1]
          -- the same by hand: the two gradients of u, each in dt, summed in f32
          local u = up:forward(x)
          local a = gelu:forward(u)
          local da, du_mul = mul:backward(a, u, dy)
          local du_gelu = gelu:backward(u, da)
          local add32 = tocha.Elementwise.new("add", "f32")
          local du = add32:forward(du_gelu:cast("f32"), du_mul:cast("f32")):cast(dt)
          local want = up:backward(x, du)
          assert.are.equal(dt, dx:dtype())
          assert.tensor.equal(want, dx)
        end
      end)

      it("matches central differences end to end in f64 (tocha.gradcheck through the model)", function()
        local m = neck("f64")
        m:load(1, device)
        local wrapped = {
          forward = function(_, x) return m:forward({ x })[1]:clone() end,
          backward = function(_, x, dy)
            local _, cache = m:forward_train({ x })
            return m:backward({ dy }, cache)[1]
          end,
        }
        local x = tocha.randn({ 1, 3, 4, 5 }, { dtype = "f64", device = device, seed = 63 })
        local ok, report = tocha.gradcheck(wrapped, x, { seed = 5 })
        assert(ok, ("max abs error %g at %s"):format(report.max_abs, tostring(report.worst)))
      end)

      it("captures its forward as a graph that replays on new input values", function()
        local m, up, gelu, mul = neck("f32")
        m:load(2, device)
        local c = m:capture()
        for seed = 71, 73 do
          local x = tocha.randn({ 2, 3, 4, 5 }, { device = device, seed = seed })
          local got = c:replay({ x })[1]:to_table(true)
          local u = up:forward(x)
          assert.are.same(mul:forward(gelu:forward(u), u):to_table(true), got)
        end
        -- loaded again (other buffers): the capture keeps its own and still replays right
        m:load(1, device)
        local x = tocha.randn({ 2, 3, 4, 5 }, { device = device, seed = 74 })
        collectgarbage("collect")
        local u = up:forward(x)
        assert.tensor.equal(mul:forward(gelu:forward(u), u), c:replay({ x })[1])
        local message = error_of(c.replay, c, { tocha.zeros({ 2, 3, 4, 4 }, { device = device }) })
        assert.truthy(message:find("tocha.Model capture:replay: src: ", 1, true), message)
        message = error_of(c.replay, c, {})
        assert.truthy(message:find("tocha.Model capture:replay: inputs: expected 1 tensors, got 0", 1, true), message)
      end)

      it("trains through an op written in Lua that has a backward", function()
        local x = Model.input({ -1, 3, 4, 5 }, { name = "x" })
        local up, relu = tocha.UpsampleNearest2dForward.new(2, 2), tocha.Elementwise.new("relu")
        local m = Model({ x }, { relu(trainable_scale_op(3)(up(x))) }):load(2, device)
        local xt = tocha.randn({ 2, 3, 4, 5 }, { device = device, seed = 81 })
        local dy = tocha.randn({ 2, 3, 8, 10 }, { device = device, seed = 82 })
        local _, cache = m:forward_train({ xt })
        local dx = m:backward({ dy }, cache)[1]
        local s = up:forward(xt):to_table(true)
        local g = dy:to_table(true)
        local ds = {}
        for i = 1, #s do ds[i] = (3 * s[i] > 0 and g[i] or 0) * 3 end
        local dst = tocha.empty(dy:shape(), { dtype = "f64", device = device })
        dst:write(require("ffi").new("double[?]", #ds, ds), #ds * 8)
        local want = up:backward(xt, dst:cast("f32"))
        assert.tensor.equal(want, dx)
        local message = error_of(Model.op, { kernel = scale_kernel, grad_kernel = scale_kernel,
          output_shape = function() end, grid = function() end, args = function() end })
        assert.truthy(message:find("tocha.Model.op: spec.grad_args: expected a function, got nil", 1, true), message)
      end)

      it("captures a forward that keeps the parameters it reads, even after they are freed", function()
        local x = Model.input({ -1, 3, 2, 2 }, { name = "x" })
        local m = Model({ x }, { channel_scale_op(3)(x):named("scale") }):load(1, device)
        local c = m:capture()
        local xt = tocha.randn({ 1, 3, 2, 2 }, { device = device, seed = 93 })
        local want = c:replay({ xt })[1]:to_table(true)
        m:parameters()["scale.weight"]:free()
        collectgarbage()
        -- Of the weight's size, so that a pool would hand its block out again.
        local others = {}
        for i = 1, 4 do others[i] = tocha.full({ 3 }, 100 + i, { device = device }) end
        assert.are.same(want, c:replay({ xt })[1]:to_table(true))
        for i = 1, 4 do assert.are.same({ 100 + i, 100 + i, 100 + i }, others[i]:to_table()) end
        local xs = xt:to_table(true)
        for i = 1, #xs do assert.are.equal(tocha.tensor({ 3 * xs[i] }):to_table()[1], want[i]) end
      end)

      it("refuses a forward once a parameter or a returned output is freed, naming it", function()
        local x = Model.input({ -1, 3, 2, 2 }, { name = "x" })
        local m = Model({ x }, { scale_op(2)(channel_scale_op(3)(x):named("scale")):named("double") }):load(1, device)
        local xt = tocha.randn({ 1, 3, 2, 2 }, { device = device, seed = 95 })
        local first = m:forward({ xt })[1]:to_table(true)
        for i, v in ipairs(xt:to_table(true)) do
          assert.are.equal(ref.convert(2 * ref.convert(3 * v, "f32"), "f32"), first[i])
        end
        m:forward({ xt })[1]:free()
        local message = error_of(m.forward, m, { xt })
        assert.truthy(message:find("outputs[1] (double): the tensor a forward returned was freed", 1, true), message)
        m:load(1, device) -- new buffers: it runs again
        assert.are.same(first, m:forward({ xt })[1]:to_table(true))
        m:parameters()["scale.weight"]:free()
        message = error_of(m.forward, m, { xt })
        assert.truthy(message:find("scale.weight: tensor was freed", 1, true), message)
        m:load(1, device) -- a fresh weight, of its init value
        assert.are.same(first, m:forward({ xt })[1]:to_table(true))
        assert.are.same(first, m:forward_train({ xt })[1]:to_table(true))
      end)

      it("holds parameters by name, trains them, and saves and loads them as safetensors", function()
        local x = Model.input({ -1, 3, 2, 2 }, { name = "x" })
        local y = channel_scale_op(2)(x):named("scale")
        local m = Model({ x }, { y }):load(2, device)
        local params = m:parameters()
        assert.are.same({ "scale.weight" }, (function() local k = {} for name in pairs(params) do k[#k + 1] = name end return k end)())
        assert.are.same({ 2, 2, 2 }, params["scale.weight"]:to_table())
        local xt = tocha.randn({ 2, 3, 2, 2 }, { device = device, seed = 91 })
        local xs = xt:to_table(true)
        local out = m:forward({ xt })[1]:to_table(true)
        for i = 1, #xs do assert.are.equal(tocha.tensor({ 2 * xs[i] }):to_table()[1], out[i]) end
        -- new weights through a file
        local path = os.tmpname()
        tocha.save(path, { ["scale.weight"] = tocha.tensor({ 1, -1, 0.5 }, { device = device }) })
        m:load_parameters(path)
        assert.are.same({ 1, -1, 0.5 }, m:parameters()["scale.weight"]:to_table())
        local got = m:forward({ xt })[1]:to_table(true)
        local w = { 1, -1, 0.5 }
        for i = 1, #xs do assert.are.equal(w[math.floor((i - 1) / 4) % 3 + 1] * xs[i], got[i]) end
        m:save_parameters(path)
        local saved = tocha.load(path)
        assert.are.same({ 1, -1, 0.5 }, saved["scale.weight"]:to_table())
        -- the parameter's gradient: dw[c] = sum over the batch and pixels of dy * x
        local dy = tocha.randn({ 2, 3, 2, 2 }, { device = device, seed = 92 })
        local _, cache = m:forward_train({ xt })
        local grads, pgrads = m:backward({ dy }, cache)
        local ds, want = dy:to_table(true), { 0, 0, 0 }
        for i = 1, #xs do
          local c = math.floor((i - 1) / 4) % 3 + 1
          want[c] = want[c] + ds[i] * xs[i]
        end
        local dw = pgrads["scale.weight"]:to_table()
        for c = 1, 3 do assert.is_true(math.abs(dw[c] - want[c]) < 1e-5, ("dw[%d] %g, want %g"):format(c, dw[c], want[c])) end
        assert.are.same({ 2, 3, 2, 2 }, grads[1]:shape())
        -- files that do not fit are refused, and nothing changes
        tocha.save(path, { ["scale.weight"] = tocha.ones({ 4 }, { device = device }) })
        local message = error_of(m.load_parameters, m, path)
        assert.truthy(message:find("scale.weight is f32 [4], the model's f32 [3]", 1, true), message)
        tocha.save(path, { ["scale.weight"] = tocha.ones({ 3 }, { device = device }), other = tocha.ones({ 1 }, { device = device }) })
        message = error_of(m.load_parameters, m, path)
        assert.truthy(message:find("other is not a parameter of the model", 1, true), message)
        tocha.save(path, { unrelated = tocha.ones({ 1 }, { device = device }) })
        message = error_of(m.load_parameters, m, path)
        assert.truthy(message:find("holds no parameter scale.weight", 1, true), message)
        assert.are.same({ 1, -1, 0.5 }, m:parameters()["scale.weight"]:to_table())
        m:load(3, device) -- another batch: the parameters keep their values
        assert.are.same({ 1, -1, 0.5 }, m:parameters()["scale.weight"]:to_table())
        os.remove(path)
        message = error_of(x.named, x, "a b")
        assert.truthy(message:find('name: expected a name without spaces, not starting or ending with a dot or holding two '
          .. 'together, got "a b"', 1, true), message)
      end)

      it("runs only what the parameters' gradients need when the inputs need none (inputs = false)", function()
        -- fn's results and the kernels it launched, in order (tocha.op's launch_packed watched)
        local op_base = require "tocha.op"
        local function launched(fn)
          local launch, kernels = op_base.launch_packed, {}
          op_base.launch_packed = function(k, ...)
            kernels[#kernels + 1] = k
            return launch(k, ...)
          end
          local results = { pcall(fn) }
          op_base.launch_packed = launch
          assert(results[1], results[2])
          return kernels, unpack(results, 2)
        end
        local function count(kernels, wanted)
          local k = 0
          for _, v in ipairs(kernels) do k = k + ((v == wanted or v.name == wanted) and 1 or 0) end
          return k
        end
        local x = Model.input({ -1, 3, 9, 9 }, { name = "x" })
        local p = tocha.Pad.new({ 1, 1, 1, 1 })(x):named("pad")
        local stem = tocha.Conv2d.new(3, 4, 7, { stride = 2, padding = 3 })(p):named("stem")
        local y = tocha.Conv2d.new(4, 5, 3, { padding = 1, activation = "relu" })(stem):named("c2")
        local m = Model({ x }, { y }):load(2, device)
        local ys, cache = m:forward_train({ tocha.randn({ 2, 3, 9, 9 }, { device = device, seed = 93 }) })
        local dy = tocha.randn(ys[1]:shape(), { device = device, seed = 94 })
        local all, full_inputs, full = launched(function() return m:backward({ dy }, cache) end)
        local some, inputs, grads = launched(function() return m:backward({ dy }, cache, { inputs = false }) end)
        -- the same parameter gradients, bit for bit; no input gradient
        assert.are.same({ 2, 3, 9, 9 }, full_inputs[1]:shape())
        assert.are.same({ false }, inputs)
        for name, g in pairs(full) do assert.are.same(g:to_table(true), grads[name]:to_table(true), name) end
        -- skipped: the stem's dx (its input, the pad, needs none) and the pad's backward
        assert.are.same({ 2, 1 }, { count(all, "tocha_conv2d_backward_data"), count(some, "tocha_conv2d_backward_data") })
        assert.are.same({ 1, 0 }, { count(all, "tocha_pad_rows_backward"), count(some, "tocha_pad_rows_backward") })
        assert.are.equal(#all - 2, #some)
        assert.truthy(error_of(m.backward, m, { dy }, cache, { inputs = 1 }):find("inputs: expected a boolean, got number", 1, true))
        -- a Linear first: its dx product skipped (the two layers' dx products may share a kernel),
        -- the weights' gradients the same
        local v = Model.input({ -1, 8 }, { name = "v" })
        local first = tocha.Linear.new(8, 8)
        local out = tocha.Linear.new(8, 4, { activation = "relu" })(first(v):named("fc1")):named("fc2")
        local mlp = Model({ v }, { out }):load(3, device)
        local outs, c2 = mlp:forward_train({ tocha.randn({ 3, 8 }, { device = device, seed = 95 }) })
        local g = tocha.randn(outs[1]:shape(), { device = device, seed = 96 })
        local mlp_all, _, mlp_full = launched(function() return mlp:backward({ g }, c2) end)
        local mlp_some, mlp_inputs, mlp_grads = launched(function() return mlp:backward({ g }, c2, { inputs = false }) end)
        assert.are.same({ count(mlp_all, first.dx_kernel) - 1, #mlp_all - 1 }, { count(mlp_some, first.dx_kernel), #mlp_some })
        assert.are.same({ false }, mlp_inputs)
        for name, t in pairs(mlp_full) do assert.are.same(t:to_table(true), mlp_grads[name]:to_table(true), name) end
        -- a ConvTranspose2d first (a decoder's input): its dx launch skipped, its weight's and
        -- bias's gradients the same
        local z = Model.input({ -1, 4, 5, 5 }, { name = "z" })
        local up = tocha.ConvTranspose2d.new(4, 3, 2, { stride = 2 })
        local dec = Model({ z }, { up(z):named("up") }):load(2, device)
        local zs, c3 = dec:forward_train({ tocha.randn({ 2, 4, 5, 5 }, { device = device, seed = 97 }) })
        local gz = tocha.randn(zs[1]:shape(), { device = device, seed = 98 })
        local dec_all, _, dec_full = launched(function() return dec:backward({ gz }, c3) end)
        local dec_some, dec_inputs, dec_grads = launched(function() return dec:backward({ gz }, c3, { inputs = false }) end)
        assert.are.same({ 1, 0 }, { count(dec_all, up.grad_kernel), count(dec_some, up.grad_kernel) })
        assert.are.equal(#dec_all - 1, #dec_some)
        assert.are.same({ false }, dec_inputs)
        for name, t in pairs(dec_full) do assert.are.same(t:to_table(true), dec_grads[name]:to_table(true), name) end
      end)

      it("loads a state dict by PyTorch's module names, listing what is missing, unexpected or mis-shaped", function()
        local x = Model.input({ -1, 3, 6, 6 })
        local conv = tocha.Conv2d.new(3, 4, 3, { padding = 1 })(x):named("layer1.0.conv1")
        local bn = tocha.BatchNorm2d.new(4)(conv):named("layer1.0.bn1")
        local drop = tocha.Dropout.new(0.5)(bn):named("drop")
        local flat = tocha.Flatten.new()(drop)
        local fc = tocha.Linear.new(144, 5)(flat):named("fc")
        local m = Model({ x }, { fc }):load(2, device)
        local names = {}
        for name in pairs(m:parameters()) do names[#names + 1] = name end
        table.sort(names)
        assert.are.same({ "drop.step", "fc.bias", "fc.weight", "layer1.0.bn1.bias", "layer1.0.bn1.running_mean",
          "layer1.0.bn1.running_var", "layer1.0.bn1.weight", "layer1.0.conv1.bias", "layer1.0.conv1.weight" }, names)
        -- a state dict as PyTorch writes it: f64 here (converted on load), BatchNorm's counter beside
        local dict, seed = {}, 40
        for _, name in ipairs(names) do
          if name ~= "drop.step" then
            seed = seed + 1
            dict[name] = tocha.rand(m:parameters()[name]:shape(), { dtype = "f64", device = "sim", seed = seed, low = 0.5 })
          end
        end
        dict["layer1.0.bn1.num_batches_tracked"] = tocha.tensor({ 7 }, { dtype = "i64", device = "sim" })
        local path = os.tmpname()
        tocha.save(path, dict)
        local report = m:load_state_dict(path)
        os.remove(path)
        assert.are.same({ missing = {}, unexpected = {}, mismatched = {} }, report)
        for name, t in pairs(dict) do
          if not name:find("num_batches") then
            local want = ref.values(t)
            for i, v in ipairs(want) do want[i] = ref.convert(v, "f32") end
            assert.are.same(want, ref.values(m:parameters()[name]), name)
          end
        end
        -- missing, unexpected and mis-shaped: strict refuses all three and loads nothing
        local before = ref.values(m:parameters()["fc.weight"])
        local bad = {}
        for name, t in pairs(dict) do bad[name] = t end
        bad["fc.bias"], bad["fc.extra"] = nil, tocha.ones({ 2 }, { device = "sim" })
        bad["layer1.0.conv1.weight"] = tocha.ones({ 4, 3, 1, 1 }, { device = "sim" })
        bad["fc.weight"] = tocha.zeros({ 5, 144 }, { device = "sim" })
        local message = error_of(m.load_state_dict, m, bad)
        assert.truthy(message:find("state_dict does not fit the model (nothing loaded): missing: fc.bias; unexpected: "
          .. "fc.extra; shapes that differ: layer1.0.conv1.weight: [4, 3, 1, 1] in the source, [4, 3, 3, 3] in the model", 1, true),
          message)
        assert.are.same(before, ref.values(m:parameters()["fc.weight"]))
        -- not strict: what fits is loaded and the lists say the rest
        report = m:load_state_dict(bad, { strict = false })
        assert.are.same({ missing = { "fc.bias" }, unexpected = { "fc.extra" },
          mismatched = { "layer1.0.conv1.weight: [4, 3, 1, 1] in the source, [4, 3, 3, 3] in the model" } }, report)
        for _, v in ipairs(ref.values(m:parameters()["fc.weight"])) do assert.are.equal(0, v) end
        assert.truthy(error_of(m.load_state_dict, m, 5):find("source: expected a safetensors file name or a table", 1, true))
        assert.truthy(error_of(m.load_state_dict, m, bad, { strict = 1 }):find("strict: expected a boolean", 1, true))
      end)

      it("swaps a node's op for another (replace) and times each node (profile)", function()
        local x = Model.input({ -1, 4, 6, 6 }, { name = "x" })
        local conv = tocha.Conv2d.new(4, 8, 3, { padding = 1 })(x):named("conv")
        local act = tocha.Elementwise.new("relu")(conv):named("act")
        local pool = tocha.MaxPool2d.new { kernel_size = 2 }(act):named("pool")
        local m = Model({ x }, { pool }):load(2, device)
        local xt = tocha.randn({ 2, 4, 6, 6 }, { device = device, seed = 8 })
        local want = m:forward({ xt })[1]:to_table(true)
        -- relu as a Lua op of one's own: y = max(x, 0) by x * (x > 0) in a kernel written here
        local RELU = [[
__device__ void my_relu(const float *x, float *y, long long n)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}]]
        local kr = tocha.kernel { source = RELU, name = "my_relu", params = "f32* x, f32* y, i64 n" }
        local mine = Model.op { name = "my_relu", kernel = kr, dtype = "f32", block = 128,
          output_shape = function(s) return { unpack(s[1]) } end,
          grid = function(o) return { math.ceil(numel(o) / 128), 1, 1 } end,
          args = function(ins, out, _, o) return { ins[1], out, numel(o) } end }
        local m2 = m:replace("act", mine)
        assert.are_not.equal(m, m2)
        assert.are.same(want, m2:forward({ xt })[1]:to_table(true)) -- the same bits, the conv's parameters shared
        assert.are.same(ref.values(m:parameters()["conv.weight"]), ref.values(m2:parameters()["conv.weight"]))
        assert.are.equal("my_relu", m2.order[3].op.kind)
        assert.are.equal("relu", m.order[3].op.kind) -- the first model is as it was
        assert.are.same(want, m:forward({ xt })[1]:to_table(true))
        local rows = m2:profile({ xt }, { reps = 3 })
        assert.are.same({ "conv", "act", "pool" }, { rows[1].name, rows[2].name, rows[3].name })
        assert.are.same({ "conv2d", "my_relu", "maxpool2d" }, { rows[1].kind, rows[2].kind, rows[3].kind })
        local sum, shares = 0, 0
        for _, r in ipairs(rows) do
          -- (the convolution's implicit GEMM: a relayout, the GEMM and the transposes of NCHW)
          assert.is_true(r.ms >= 0 and r.launches == (r.name == "conv" and 4 or 1), r.name .. " " .. r.launches)
          sum, shares = sum + r.ms, shares + r.share
        end
        assert.is_true(math.abs(sum - rows.total_ms) <= 1e-9 * (1 + sum) and math.abs(shares - 1) < 1e-9)
        assert.is_true(rows.forward_ms > 0)
        assert.truthy(tostring(rows):find("\nact +my_relu +1 "), tostring(rows))
        assert.are.same(want, m2:forward({ xt })[1]:to_table(true)) -- profile leaves the outputs a forward gives
        assert.truthy(error_of(m.replace, m, "nowhere", mine):find('the model has no node named "nowhere"', 1, true))
        assert.truthy(error_of(m.replace, m, "act", 5):find("op: expected an op", 1, true))
        assert.truthy(error_of(m.profile, m, { xt }, { reps = 0 }):find("reps: expected a positive integer", 1, true))
      end)

      it("names what backward refuses: a foreign cache, wrong gradients, an op without a backward", function()
        local m = neck("f32")
        m:load(1, device)
        local x = tocha.randn({ 1, 3, 4, 5 }, { device = device, seed = 64 })
        local _, cache = m:forward_train({ x })
        local other = neck("f32")
        other:load(1, device)
        local _, other_cache = other:forward_train({ x })
        local dy = tocha.zeros({ 1, 3, 8, 10 }, { device = device })
        for _, case in ipairs({
          { { { dy }, other_cache }, "cache: expected the cache of this model's forward_train" },
          { { { dy }, { model = m, tensors = {} } }, "cache: expected the cache of this model's forward_train" },
          { { {}, cache }, "grad_outputs: expected 1 tensors (one per output), got 0" },
          { { { tocha.zeros({ 1, 3, 4, 5 }, { device = device }) }, cache },
            "): expected [1, 3, 8, 10] f32, got [1, 3, 4, 5] f32" },
        }) do
          local message = error_of(m.backward, m, unpack(case[1]))
          assert.truthy(message:find("tocha.Model:backward: ", 1, true), message)
          assert.truthy(message:find(case[2], 1, true), message)
        end
        local xi = Model.input({ 1, 4 }, { name = "v" })
        local lua_op = Model({ xi }, { scale_op(3)(xi) }):load(1, device)
        local outs, c = lua_op:forward_train({ tocha.ones({ 1, 4 }, { device = device }) })
        local message = error_of(lua_op.backward, lua_op, { outs[1] }, c)
        assert.truthy(message:find("tocha.Model:backward: scale %d+: its op has no backward"), message)
      end)

      it("refuses a cache made under an earlier load, and one whose tensors were freed", function()
        local m = neck("f32")
        m:load(1, device)
        local _, cache = m:forward_train({ tocha.randn({ 1, 3, 4, 5 }, { device = device, seed = 65 }) })
        m:load(2, device)
        local dy = tocha.zeros({ 2, 3, 8, 10 }, { device = device })
        local message = error_of(m.backward, m, { dy }, cache)
        assert.truthy(message:find("tocha.Model:backward: cache: made under an earlier m:load (batch 1, now 2): run m:forward_train again", 1, true), message)
        local outs, fresh = m:forward_train({ tocha.randn({ 2, 3, 4, 5 }, { device = device, seed = 66 }) })
        outs[1]:free()
        message = error_of(m.backward, m, { dy }, fresh)
        assert.truthy(message:find("tocha.Model:backward: cache: the tensor of ", 1, true), message)
        assert.truthy(message:find(" was freed", 1, true), message)
      end)

      it("runs with an input no output reads: forward takes its tensor, backward gives false", function()
        local a, unused = Model.input({ -1, 4 }, { name = "a" }), Model.input({ -1, 2, 3 }, { name = "unused" })
        local m = Model({ a, unused }, { trainable_scale_op(3)(a) }):load(2, device)
        local x = tocha.tensor({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 } }, { device = device })
        local y = m:forward({ x, tocha.zeros({ 2, 2, 3 }, { device = device }) })[1]
        assert.are.same({ { 3, 6, 9, 12 }, { 15, 18, 21, 24 } }, y:to_table())
        local message = error_of(m.forward, m, { x, tocha.zeros({ 2, 3 }, { device = device }) })
        assert.truthy(message:find("inputs[2] (unused): expected shape [2, 2, 3], got [2, 3]", 1, true), message)
        local _, cache = m:forward_train({ x, tocha.zeros({ 2, 2, 3 }, { device = device }) })
        local grads = m:backward({ tocha.ones({ 2, 4 }, { device = device }) }, cache)
        assert.are.same({ { 3, 3, 3, 3 }, { 3, 3, 3, 3 } }, grads[1]:to_table())
        assert.is_false(grads[2])
      end)

      it("refuses an output shape that is not a list of positive integers, naming the node", function()
        local x = Model.input({ 1, 4 }, { name = "x" })
        for _, case in ipairs({
          { { 2.5 }, "size 1: expected a positive integer, got 2.5" },
          { { 0 }, "size 1: expected a positive integer, got 0" },
          { { "4" }, 'size 1: expected a positive integer, got "4"' },
          { {}, "expected a list of 1 to 8 sizes, got 0 sizes" },
          { 4, "expected a list of 1 to 8 sizes, got 4" },
          { { 1, 2, 3, 4, 5, 6, 7, 8, 9 }, "expected a list of 1 to 8 sizes, got 9 sizes" },
          { { 4, n = 1 }, "expected a list, got other keys" },
        }) do
          local op = Model.op { name = "bad", kernel = scale_kernel,
            output_shape = function() return case[1] end,
            grid = function() return 1 end, args = function() return {} end }
          local m = Model({ x }, { op(x):named("odd") })
          local message = error_of(m.load, m, 1, device)
          assert.truthy(message:find("tocha.Model:load: odd: its op's output shape: " .. case[2], 1, true), message)
        end
      end)
    end)
  end

  it("refuses an input listed twice", function()
    local x = Model.input({ 1, 4 }, { name = "x" })
    local message = error_of(Model, { x, x }, { scale_op(2)(x) })
    assert.truthy(message:find("tocha.Model: inputs[2]: x is listed already, as inputs[1]", 1, true), message)
  end)

  it("writes its graph in Graphviz dot, with shapes once loaded", function()
    local up = tocha.UpsampleNearest2dForward.new(2, 2, 64)
    local x = Model.input({ -1, 1, 2, 2 }, { name = 'x "raw"' })
    local a = scale_op(2)(x)
    local m = Model({ x }, { add_op(up(a), up(a)) })
    local text = m:dot()
    assert.truthy(text:find('^digraph model {\n'), text)
    assert.truthy(text:find(('n%d [label="x \\"raw\\"", shape=ellipse];'):format(x.id), 1, true), text)
    local _, edges = text:gsub(" %-> ", "")
    assert.are.equal(5, edges) -- x->a, a->up twice, the two ups->add
    m:load(3, "sim")
    local path = os.tmpname()
    assert.are.equal(m:dot(path), assert(io.open(path)):read("*a"))
    os.remove(path)
    assert.truthy(m:dot():find(('n%d [label="scale %d\\n[3, 1, 2, 2] f32", shape=box];'):format(a.id, a.id), 1, true))
    local message = error_of(m.dot, m, 5)
    assert.truthy(message:find("tocha.Model:dot: path: expected a file name, got number", 1, true), message)
  end)

  it("names the graph's faults by node: unknown inputs, cycles, shapes and dtypes an op refuses", function()
    local up = tocha.UpsampleNearest2dForward.new(2, 2, 64)
    local x = Model.input({ -1, 1, 2, 2 }, { name = "x" })
    local stray = Model.input({ 1, 1, 2, 2 }, { name = "stray" })
    local message = error_of(Model, { x }, { add_op(up(x), up(stray)) })
    assert.truthy(message:find("tocha.Model: outputs: upsample %d+ reads stray, which is not one of the model's inputs"), message)
    local a = scale_op(2)(x)
    local b = scale_op(2)(a)
    a.inputs[1] = b -- made by hand: a cycle
    message = error_of(Model, { x }, { b })
    assert.truthy(message:find("tocha.Model: outputs: the graph has a cycle through scale", 1, true), message)
    local flat = Model.input({ -1, 4, 4 }, { name = "flat" })
    local m = Model({ flat }, { up(flat) })
    message = error_of(m.load, m, 2, "sim")
    assert.truthy(message:find("tocha.Model:load: upsample %d+: inputs %[2, 4, 4%]: "), message)
    local half = Model.input({ 1, 1, 2, 2 }, { dtype = "f16", name = "half" })
    m = Model({ half }, { up(half) })
    message = error_of(m.load, m, 1, "sim")
    assert.truthy(message:find("input 1 (half) is f16, the op takes f32", 1, true), message)
    message = error_of(Model.input, { 2, -1 })
    assert.truthy(message:find("tocha.Model.input: shape[2]: expected a positive integer (or -1 for the batch, first), got -1", 1, true), message)
    message = error_of(Model, { up(x) }, { up(x) })
    assert.truthy(message:find("tocha.Model: inputs%[1%]: upsample %d+ is not an input node"), message)
    message = error_of(Model.node, up)
    assert.truthy(message:find("tocha.Model.node: inputs: an op needs at least one input node", 1, true), message)
    message = error_of(Model.op, { kernel = scale_kernel })
    assert.truthy(message:find("tocha.Model.op: spec.output_shape: expected a function, got nil", 1, true), message)
    message = error_of(m.load, m, 0)
    assert.truthy(message:find("tocha.Model:load: batch_size: expected a positive integer, got 0", 1, true), message)
  end)
end)
