-- ONNX files in: tocha.onnx.read (the file as Lua values) and tocha.onnx.load (a tocha.Model),
-- against networks built with the onnx package and computed in float64 NumPy
-- (spec/support/onnx_models.py; Debian's python3-onnx), and against files that must be refused.
local tocha = require "tocha"
local ref = require "support.reference"
local files = require "support.files"
local process = require "support.process"

local peers = require "support.peers"

local dir
local function path(name) return dir .. "/" .. name end

setup(function()
  assert(peers.available("onnx, numpy"),
    "onnx_spec needs python3 with onnx and numpy (Debian's python3-onnx; scripts/install-deps.sh installs it)")
  dir = process.tempdir()
  local ok, said = peers.run("onnx_models.py", process.quote(dir))
  assert(ok, "onnx_models.py failed: " .. said)
end)

teardown(function() if dir then os.execute("rm -rf " .. process.quote(dir)) end end)

local function error_of(fn, ...)
  local ok, message = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(message)
end

-- Every element of got within rtol of the largest magnitude of want.
local function close(got, want, rtol, what)
  local g, w = ref.values(got), ref.values(want)
  assert.are.equal(#w, #g, what .. ": element count")
  local big = 0
  for i = 1, #w do big = math.max(big, math.abs(w[i])) end
  for i = 1, #w do
    if math.abs(g[i] - w[i]) > rtol * big or g[i] ~= g[i] then
      error(("%s[%d]: got %.9g, want %.9g (tolerance %g of %g)"):format(what, i, g[i], w[i], rtol, big))
    end
  end
end

describe("tocha.onnx.read", function()
  it("reads the graph, attributes of every kind and tensors from every typed field", function()
    local f = tocha.onnx.read(path("typed.onnx"))
    assert.are.equal(13, f.opsets[""])
    assert.are.equal("typed", f.producer)
    assert.are.equal(1, #f.nodes)
    local n = f.nodes[1]
    assert.are.same({ "pass", "Identity", { "x" }, { "y" } }, { n.name, n.op_type, n.inputs, n.outputs })
    local a = n.attributes
    assert.are.equal("a\0b", a.note) -- bytes, a NUL among them
    assert.are.same({ 3, -4 }, a.sizes)
    assert.are.same({ 0.5, 2 }, a.gains)
    assert.are.same({ "up", "down" }, a.modes)
    assert.are.same({ 1.5, -9 }, { a.gain, a.count })
    assert.are.same({ -1, 2 }, f.inputs[1].shape)
    assert.are.equal("n", f.inputs[1].dim_names[1])
    assert.are.same({ -1, 2 }, f.outputs[1].shape) -- a dimension the file leaves open
    local want = {
      f16 = { "f16", { 3 }, { 1.5, -2, 0.25 } }, bf16 = { "bf16", { 3 }, { 1.5, -2, 0.25 } },
      i8 = { nil, { 2 }, { -3, 7 } }, u8 = { "u8", { 2 }, { 200, 3 } }, bool = { nil, { 3 }, { 1, 0, 1 } },
      i32 = { "i32", { 2 }, { -70000, 5 } }, i64 = { "i64", { 2, 1 }, { 2 ^ 40, -5 } },
      f64 = { "f64", { 2 }, { 0.1, 2.5 } }, f32 = { "f32", { 1 }, { 1.25 } }, scalar = { "f32", {}, { 4 } },
      empty = { "f32", { 0, 3 }, {} },
    }
    local count = 0
    for name, w in pairs(want) do
      local t = f.initializers[name]
      assert.are.same({ w[1], w[2], w[3] }, { t:dtype(), t:shape(), t:values() }, name)
      if w[1] then
        local tt = t:to_tensor({ device = "sim" })
        assert.are.same(#w[2] > 0 and w[2] or { 1 }, tt:shape(), name)
        assert.are.same(w[3], ref.values(tt), name)
      end
      count = count + 1
    end
    assert.are.equal(count, #f.initializer_order)
  end)

  it("refuses what is not an ONNX model, naming the file, and stays usable", function()
    local good = files.slurp(path("residual.onnx"))
    local bad = path("broken.onnx")
    local cases = {
      { "", "the model has no graph" },
      { "hello, world", "not an ONNX model" },
      { good:sub(1, #good - 17), "not an ONNX model" },
      { good:sub(1, 200), "not an ONNX model" },
    }
    for i, case in ipairs(cases) do
      files.spit(bad, case[1])
      local message = error_of(tocha.onnx.read, bad)
      assert.truthy(message:find("tocha.onnx.read: " .. bad, 1, true), ("case %d: %s"):format(i, message))
      assert.truthy(message:find(case[2], 1, true), ("case %d: %s"):format(i, message))
    end
    -- nested attribute graphs, 120 deep, each a valid message: refused before protobuf-c recurses
    local function len(n)
      local out = ""
      repeat
        local b = n % 128
        n = math.floor(n / 128)
        out = out .. string.char(n > 0 and b + 128 or b)
      until n == 0
      return out
    end
    local graph = ""
    for _ = 1, 120 do
      local attribute = string.char(0x32) .. len(#graph) .. graph -- AttributeProto.g (6)
      local node = string.char(0x2a) .. len(#attribute) .. attribute -- NodeProto.attribute (5)
      graph = string.char(0x0a) .. len(#node) .. node -- GraphProto.node (1)
    end
    files.spit(bad, string.char(0x3a) .. len(#graph) .. graph) -- ModelProto.graph (7)
    local message = error_of(tocha.onnx.read, bad)
    assert.truthy(message:find("nest deeper than 100", 1, true), message)
    assert.truthy(error_of(tocha.onnx.read, path("missing.onnx")):find("no such file", 1, true))
    assert.truthy(error_of(tocha.onnx.read, dir):find("not a regular file", 1, true))
    assert.truthy(error_of(tocha.onnx.read, 7):find("path: expected a file name, got 7", 1, true))
    os.remove(bad)
    assert.are.equal(12, #tocha.onnx.read(path("residual.onnx")).nodes)
  end)
end)

describe("tocha.onnx.load", function()
  local NETWORKS = { residual = 2, mobile = 1, neck = 2, head = 1, resnet18 = 1, views = 3, reductions = 2, joins = 4, attention = 2,
    resize_pad = 14, windows = 2, einsum = 3, upsample9 = 2, resize10 = 2, masked = 2,
    leaky = 2, instnorm = 2, activations = 12, shuffles = 6, sequence = 4, product = 1, classic = 7, exporter18 = 6,
    folds = 4, recurrent = 4 }
  -- (ReduceProd has no backward: the gradient check leaves it out)
  local NO_BACKWARD = { product = true }
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      for name, outputs in pairs(NETWORKS) do
        it(("runs %s as NumPy computes it (f32, every output element)"):format(name), function()
          local x = tocha.load_npy(path(name .. "_in1.npy"), { device = dev.name })
          local m = tocha.onnx.load(path(name .. ".onnx"), { batch_size = x:shape()[1], device = dev.name })
          local outs = m:forward({ x })
          assert.are.equal(outputs, #outs)
          for i = 1, outputs do
            local want = tocha.load_npy(path(("%s_out%d.npy"):format(name, i)))
            assert.are.same(want:shape(), outs[i]:shape())
            close(outs[i], want, 1e-4, ("%s output %d"):format(name, i))
          end
        end)
      end

      it("keeps the initializers' names as parameter names and loads them exactly (fuse = false)", function()
        local x = tocha.load_npy(path("residual_in1.npy"), { device = dev.name })
        local m = tocha.onnx.load(path("residual.onnx"), { batch_size = 2, device = dev.name, fuse = false })
        local f = m.onnx
        local p = m:parameters()
        local names = {}
        for name in pairs(p) do names[#names + 1] = name end
        table.sort(names)
        local want = {}
        for _, name in ipairs(f.initializer_order) do want[#want + 1] = name end
        table.sort(want)
        assert.are.same(want, names)
        for _, name in ipairs(names) do assert.are.same(f.initializers[name]:values(), ref.values(p[name]), name) end
        close(m:forward({ x })[1], tocha.load_npy(path("residual_out1.npy")), 1e-4, "residual, unfused")
      end)

      it("fuses each Conv with the BatchNormalization, residual Add and activation after it", function()
        local kinds = {}
        for _, name in ipairs({ "residual", "mobile" }) do
          local m = tocha.onnx.load(path(name .. ".onnx"), { batch_size = 2, device = dev.name })
          for _, n in ipairs(m.order) do
            if n.op and n.op.kind == "conv2d" then
              kinds[#kinds + 1] = ("%s %s%s"):format(n.name, n.op.activation, n.op.residual and " +residual" or "")
            end
          end
          if name == "residual" then
            local p = m:parameters()
            assert.is_nil(p["bn1.weight"]) -- folded into conv1's weight and bias
            assert.truthy(p["conv1.weight"] and p["conv1.bias"] and p["conv2.bias"])
          end
        end
        assert.are.same({ "conv1 relu", "conv2 relu +residual", "dw hardswish", "pw silu", "se hardsigmoid" }, kinds)
      end)

      -- layout "nhwc" (the default) keeps the activations channels-last from the first Conv on:
      -- what layout "nchw" gives (the convolutions' sums in the same order), a Permute where the
      -- input comes in, the pools channels-last, and the logits a view (1 x 1 pixels); unfused,
      -- the batch norms channels-last as well.
      it("keeps the convolutions' activations channels-last (layout nhwc), as nchw computes them", function()
        for _, name in ipairs({ "residual", "resnet18", "mobile" }) do
          local x = tocha.load_npy(path(name .. "_in1.npy"), { device = dev.name })
          local got = {}
          for _, layout in ipairs({ "nhwc", "nchw" }) do
            local m = tocha.onnx.load(path(name .. ".onnx"), { batch_size = x:shape()[1], device = dev.name, layout = layout })
            got[layout] = m:forward({ x })
            local permutes, convs = 0, 0
            for _, n in ipairs(m.order) do
              if n.op and n.op.kind == "permute" then permutes = permutes + 1 end
              if n.op and n.op.kind == "conv2d" then
                convs = convs + 1
                assert.are.equal(layout, n.op.layout, n.name)
              end
            end
            if layout == "nchw" then assert.are.equal(0, permutes, name) end
            if name == "residual" or name == "resnet18" then -- in once, pools channels-last, out as a view
              assert.are.equal(layout == "nhwc" and 1 or 0, permutes, name .. " " .. layout)
            end
            assert.is_true(convs > 0)
          end
          -- unfused, the batch norms stay channels-last too: no Permute beside the input's
          local m = tocha.onnx.load(path(name .. ".onnx"), { batch_size = x:shape()[1], device = dev.name, fuse = false })
          local permutes, norms = 0, 0
          for _, n in ipairs(m.order) do
            if n.op and n.op.kind == "permute" then permutes = permutes + 1 end
            if n.op and n.op.kind == "batch_norm" then
              norms = norms + 1
              assert.is_true(n.op.nhwc, n.name)
            end
          end
          if name == "residual" or name == "resnet18" then
            assert.are.equal(1, permutes, name .. " unfused")
            assert.is_true(norms > 0, name .. " unfused has batch norms")
          end
          local unfused = m:forward({ x })
          -- (the global average pool sums in another order)
          for i = 1, #got.nchw do
            close(got.nhwc[i], got.nchw[i], 1e-6, name .. " output " .. i)
            close(unfused[i], got.nchw[i], 1e-5, name .. " unfused output " .. i)
          end
        end
        assert.truthy(error_of(tocha.onnx.load, path("residual.onnx"), { layout = "chw" }):find(
          'layout: expected "nhwc" or "nchw", got "chw"', 1, true))
      end)

      it("runs in f16 and bf16, the file's weights cast", function()
        local x = tocha.load_npy(path("residual_in1.npy"), { device = dev.name })
        local want = tocha.load_npy(path("residual_out1.npy"))
        for dt, tol in pairs({ f16 = 1e-2, bf16 = 5e-2 }) do
          local m = tocha.onnx.load(path("residual.onnx"), { batch_size = 2, device = dev.name, dtype = dt })
          close(m:forward({ x:cast(dt) })[1], want, tol, "residual logits " .. dt)
        end
      end)

      -- imported under tocha.set_float32_matmul_precision("high"), the convolutions and the
      -- classifier read f32 as tf32: within tf32's rounding of the f32 logits, and not them
      it("runs f32 on tf32 where the precision switch says so at import", function()
        local x = tocha.load_npy(path("resnet18_in1.npy"), { device = dev.name })
        local want = tocha.load_npy(path("resnet18_out1.npy"))
        local old = tocha.set_float32_matmul_precision("high")
        local ok, m = pcall(tocha.onnx.load, path("resnet18.onnx"), { batch_size = x:shape()[1], device = dev.name })
        tocha.set_float32_matmul_precision(old)
        assert.is_true(ok, tostring(m))
        local convs = 0
        for _, n in ipairs(m.order) do
          if n.op and n.op.kind == "conv2d" and n.op.igemm then
            assert.is_true(n.op.tf32, n.name)
            convs = convs + 1
          end
        end
        assert.is_true(convs > 0)
        local got = m:forward({ x })[1]
        close(got, want, 1e-2, "resnet18 logits tf32")
        local f32 = tocha.onnx.load(path("resnet18.onnx"), { batch_size = x:shape()[1], device = dev.name })
        assert.is_false(tocha.allclose(got, f32:forward({ x })[1], 0, 0), "tf32 gave f32's logits")
      end)
    end)
  end

  -- Training an imported network: the gradient of every network's input (all its outputs
  -- dotted with a random dy) against central differences of its forward, in f64 on sim, both
  -- layouts, fused and not: the backward of every op the import places (Permutes and Slices of
  -- the layout changes and views, MatMul of attention, BroadcastConstant, Constant, NHWC pools).
  it("trains through every network: the input's gradient against finite differences", function()
    local function as_op(m)
      local o = {}
      function o:forward(x)
        local flat = {}
        for _, y in ipairs(m:forward({ x })) do for _, v in ipairs(ref.values(y)) do flat[#flat + 1] = v end end
        return tocha.tensor(flat, { dtype = "f64", device = "sim" })
      end
      function o:backward(x, dy)
        local outs, cache = m:forward_train({ x })
        local d, at, parts = ref.values(dy), 0, {}
        for i, y in ipairs(outs) do
          local n, v = ref.numel(y:shape()), {}
          for j = 1, n do v[j] = d[at + j] end
          at = at + n
          parts[i] = tocha.tensor(v, { dtype = "f64", device = "sim" }):view(y:shape())
        end
        return m:backward(parts, cache)[1]
      end
      return o
    end
    for name in pairs(NETWORKS) do
      local x = not NO_BACKWARD[name] and tocha.load_npy(path(name .. "_in1.npy"), { device = "sim" }):cast("f64")
      for _, layout in ipairs(x and { "nhwc", "nchw" } or {}) do
        for _, fuse in ipairs({ true, false }) do
          local m = tocha.onnx.load(path(name .. ".onnx"), { batch_size = x:shape()[1], device = "sim", dtype = "f64",
            layout = layout, fuse = fuse })
          local ok, report = tocha.gradcheck(as_op(m), x, { max_checks = 8, seed = #name })
          assert.is_true(ok, ("%s %s fuse %s: %s"):format(name, layout, tostring(fuse), tostring(report)))
        end
      end
    end
  end)

  it("takes integer inputs as a Gather's indices into constant tables (negative ones from the end) and cast to floats", function()
    for _, dev in ipairs({ "sim" }) do
      local ids = tocha.load_npy(path("tokens_in1.npy"), { device = dev })
      local mask = tocha.load_npy(path("tokens_in2.npy"), { device = dev })
      assert.are.same({ "i64", "i64" }, { ids:dtype(), mask:dtype() })
      for _, layout in ipairs({ "nhwc", "nchw" }) do
        local m = tocha.onnx.load(path("tokens.onnx"), { batch_size = 2, device = dev, layout = layout })
        local params = m:parameters()
        assert.are.same({ 20, 4 }, params["words.weight"]:shape()) -- PyTorch's name for the table
        assert.are.same({ 20, 6 }, params["shapes.weight"]:shape()) -- [20, 2, 3] rows flattened
        local outs = m:forward({ ids, mask })
        for i = 1, 3 do
          local want = tocha.load_npy(path(("tokens_out%d.npy"):format(i)))
          assert.are.same(want:shape(), outs[i]:shape())
          close(outs[i], want, 0, ("tokens output %d"):format(i)) -- rows copied, one rounding: exact
        end
        local _, cache = m:forward_train({ ids, mask })
        local dy = {}
        for i = 1, 3 do dy[i] = tocha.randn(outs[i]:shape(), { device = dev, seed = i }) end
        local grads, pgrads = m:backward(dy, cache)
        assert.are.same({ false, false }, grads) -- integer inputs have no gradient
        local want = tocha.Embedding.new(20, 4, { base = 0, wrap = true }):backward(ids, params["words.weight"], dy[1])
        assert.is_true(tocha.allclose(pgrads["words.weight"], want, 0, 0), "the word table's gradient")
      end
    end
  end)

  it("takes a uint8 image and a BOOL mask as u8 inputs, cast to floats", function()
    local img = tocha.load_npy(path("bytes_in1.npy"), { device = "sim" })
    local keep = tocha.load_npy(path("bytes_in2.npy"), { device = "sim" })
    assert.are.same({ "u8", "u8" }, { img:dtype(), keep:dtype() })
    local m = tocha.onnx.load(path("bytes.onnx"), { batch_size = 2, device = "sim" })
    local outs = m:forward({ img, keep })
    for i = 1, 2 do close(outs[i], tocha.load_npy(path(("bytes_out%d.npy"):format(i))), 0, ("bytes output %d"):format(i)) end
  end)

  it("refuses a node it cannot import, naming the file, the node and why", function()
    for file, want in pairs({
      bad_op = 'node "mystery": op type "Det" is not one tocha imports',
      bad_einsum = 'node "contract" (Einsum): equation "ij,jk->ik" names 2 dimensions an operand; A has 4, B 4',
      bad_einsum_diagonal = 'node "diagonal" (Einsum): equation "bcii,bcij->bcij": tocha takes batched matrix products',
      bad_pads = 'node "lopsided" (AveragePool): padding 0, 0 before and 1, 1 after H and W: tocha pads both sides alike here',
      bad_unknown_input = 'node "lost" (Relu): input "nowhere" is made by no earlier node, initializer or graph input',
      bad_external = 'initializer "w" keeps its data in an external file',
      bad_short_raw = 'initializer "w" holds 140 bytes of raw data; its 36 elements take 144',
      bad_tensorless = 'node "hollow" (Constant) attribute "value": of type TENSOR without a tensor',
      bad_axis = 'node "wide" (LayerNormalization): axis -70368744177665 is outside [-4, 3] for 4 dimensions',
      bad_pad_wrap = 'node "wrap_twice" (Pad): inputs[1]: circular pads of 5 and 0 on a dimension of 4: each must be at most the size',
      bad_resize_cubic = 'node "smooth" (Resize): exclude_outside 1: tocha\'s cubic resize repeats the edge, as PyTorch\'s bicubic (exclude_outside 0)',
      bad_gru_reset = 'node "reset_first" (GRU): linear_before_reset 0 is not supported (PyTorch\'s nn.GRU exports 1)',
      bad_lstm_clip = 'node "clipped" (LSTM): clip is not supported',
      bad_pool_indices = 'node "argmax_pool" (MaxPool): the Indices output is not supported',
      bad_tile_long = 'node "twice" (Tile): repeating dimension 1 of size 2 of a computed tensor is not supported (size 1 only)',
      bad_blocksize = 'node "shuffle" (DepthToSpace): blocksize 3: the 2 channels are not a multiple of its square',
      bad_selu = "node \"scaled\" (Selu): alpha 2 and gamma 1.0507: tocha's selu is PyTorch's (1.6733, 1.0507)",
      bad_conv1d_weight = 'node "conv1d" (Conv): W must be an initializer of 3 dimensions for a 1-D x',
      bad_int_relu = 'node "rectify_ids" (Relu): input 1 is the integer input "ids" (i64): tocha reads a computed integer '
        .. 'tensor only as the indices of a Gather from a constant table, or cast to floats',
      bad_gather_axis = 'node "columns" (Gather): a Gather of a constant by computed indices takes axis 0 (the table\'s rows)',
      bad_gather_float = 'node "by_floats" (Gather): indices: a computed tensor of floats: tocha gathers by an integer input',
    }) do
      local message = error_of(tocha.onnx.load, path(file .. ".onnx"))
      assert.truthy(message:find(("tocha.onnx.load: %s: %s"):format(path(file .. ".onnx"), want), 1, true), message)
    end
    assert.truthy(error_of(tocha.onnx.load, path("head.onnx"), { batch_size = 0 }):find("batch_size: expected a positive integer", 1, true))
    assert.truthy(error_of(tocha.onnx.load, path("head.onnx"), { bacth_size = 2 }):find("bacth_size", 1, true))
    assert.truthy(error_of(tocha.onnx.load, path("head.onnx"), { dtype = "i32" }):find("dtype", 1, true))
  end)
end)

describe("tocha.BroadcastConstant", function()
  it("computes g(x, c) and g(c, x) with the constant broadcast, as a direct call and in a model", function()
    local x = tocha.randn({ 2, 3, 4, 5 }, { seed = 11, device = "sim" })
    local c = tocha.rand({ 1, 3, 1, 1 }, { seed = 12, low = 0.5, high = 2, device = "sim" })
    local xs, cs = ref.values(x), ref.values(c)
    for _, case in ipairs({ { "sub", false, function(a, b) return a - b end }, { "div", true, function(a, b) return b / a end },
      { "mul", false, function(a, b) return a * b end } }) do
      local op = tocha.BroadcastConstant.new(case[1], { 1, 3, 1, 1 }, { constant_first = case[2] })
      local y = tocha.full({ 2, 3, 4, 5 }, 777, { device = "sim" })
      op:forward(x, c, y)
      local ys = ref.values(y)
      for i = 1, #xs do
        local ch = math.floor((i - 1) / 20) % 3 + 1
        local want = ref.convert(case[3](xs[i], cs[ch]), "f32")
        assert.is_true(math.abs(ys[i] - want) <= 1e-6 * math.max(1, math.abs(want)), ("%s [%d]"):format(case[1], i))
      end
    end
    local op = tocha.BroadcastConstant.new("add", { 4, 5 })
    local message = error_of(op.forward, op, x, c)
    assert.truthy(message:find("constant", 1, true), message)
  end)

  -- tocha.Constant: a node whose output is the tensor it holds (a class token joined to the
  -- patches), placed in the graph by an input it never reads.
  it("holds a constant as a node's output (Constant), its input never read", function()
    local x = tocha.Model.input({ -1, 3, 4 }, { name = "x" })
    local cls = tocha.Constant.new({ 2, 1, 4 })(x):named("cls")
    local m = tocha.Model({ x }, { tocha.ChannelCat.new()(cls, x) })
    m:load(2, "sim")
    local token = tocha.randn({ 2, 1, 4 }, { seed = 21, device = "sim" })
    m:parameters()["cls.constant"]:copy(token)
    local xt = tocha.randn({ 2, 3, 4 }, { seed = 22, device = "sim" })
    local y = m:forward({ xt })[1]
    assert.are.same({ 2, 4, 4 }, y:shape())
    local ys, ts, xs = ref.values(y), ref.values(token), ref.values(xt)
    for b = 0, 1 do
      for j = 1, 4 do assert.are.equal(ts[b * 4 + j], ys[b * 16 + j]) end
      for j = 1, 12 do assert.are.equal(xs[b * 12 + j], ys[b * 16 + 4 + j]) end
    end
    assert.is_false(m:parameters()["cls.constant"] == nil)
    -- backward: x's gradient is the join's part of dy alone (the constant's input gets zeros)
    local _, cache = m:forward_train({ xt })
    local dy = tocha.randn({ 2, 4, 4 }, { seed = 23, device = "sim" })
    local dx, grads = m:backward({ dy }, cache)
    local dys, dxs = ref.values(dy), ref.values(dx[1])
    for b = 0, 1 do
      for j = 1, 12 do assert.are.equal(dys[b * 16 + 4 + j], dxs[b * 12 + j]) end
    end
    assert.is_nil(grads["cls.constant"], "the constant is not trained")
    assert.truthy(error_of(tocha.Constant.new, { 0.5 }):find("shape", 1, true))
  end)
end)
