-- Tensor math, the layers, the losses and the optimizers beside PyTorch's: every case runs on
-- cuda in f64 on random inputs; the inputs, parameters, upstream gradients and tocha's outputs
-- and gradients go to a safetensors file, and PyTorch recomputes each there
-- (spec/support/peer_layers.py): outputs, torch.autograd's gradients, the running statistics
-- and torch.optim's steps, relative error at most 1e-12 of each result's largest magnitude.
-- Tagged #gpu: it runs where PyTorch is, the GPU machine; pending where python3 lacks torch.
local tocha = require "tocha"

local peers = require "support.peers"

describe("layers, losses and optimizers beside PyTorch's #gpu", function()
  it("match PyTorch in f64, forward and backward", function()
    if not peers.available("torch, safetensors") then return pending("python3 with torch and safetensors is not installed here") end
    local device, seed = "cuda", 0
    local tensors, cases = {}, {}
    local function randn(shape, mean)
      seed = seed + 1
      return tocha.randn(shape, { dtype = "f64", device = device, seed = seed, mean = mean or 0 })
    end
    -- A case: its op text for the Python side, then named lists of tensors.
    local function case(name, op, lists)
      cases[name] = op
      for kind, list in pairs(lists) do
        for i, t in ipairs(list) do tensors[("%s.%s%d"):format(name, kind, i)] = t end
      end
    end

    -- tensor math (outputs only: methods have no backward)
    local a, b = randn({ 3, 1, 5 }), randn({ 4, 1 })
    case("m_add", "math:add", { in_ = { a, b }, out = { a + b } })
    case("m_div", "math:div", { in_ = { a, b }, out = { a / b } })
    case("m_pow", "math:pow", { in_ = { a:abs() + 0.5, b }, out = { (a:abs() + 0.5) ^ b } })
    case("m_max", "math:maximum", { in_ = { a, b }, out = { a:maximum(b) } })
    case("m_rem", "math:remainder", { in_ = { a * 5, b + 2 }, out = { (a * 5) % (b + 2) } })
    local x = randn({ 4, 6, 5 })
    for _, fn in ipairs({ "exp", "log1p", "sigmoid", "tanh", "silu", "gelu", "erf", "sin", "rsqrt" }) do
      local input = (fn == "log1p" or fn == "rsqrt") and x:abs() or x
      case("u_" .. fn, "unary:" .. fn, { in_ = { input }, out = { input[fn](input) } })
    end
    case("m_where", "math:where", { in_ = { x:gt(0):cast("f64"), x, -x }, out = { tocha.where(x:gt(0), x, -x) } })
    case("m_clamp", "math:clamp", { in_ = { x }, out = { x:clamp(-0.5, 0.7) } })
    case("r_sum", "reduce:sum:2,3", { in_ = { x }, out = { x:sum({ 2, 3 }) } })
    case("r_mean", "reduce:mean:1,3", { in_ = { x }, out = { x:mean({ 1, 3 }) } })
    case("r_amax", "reduce:amax:2", { in_ = { x }, out = { x:amax(2) } })
    case("r_prod", "reduce:prod:3", { in_ = { x }, out = { x:prod(3) } })
    case("r_var", "reduce:var:2", { in_ = { x }, out = { x:var(2) } })
    case("r_std", "reduce:std:1,3", { in_ = { x }, out = { x:std({ 1, 3 }, false, 0) } })
    case("r_argmax", "reduce:argmax:3", { in_ = { x }, out = { x:argmax(3):cast("f64") } })
    case("r_softmax", "reduce:softmax:2", { in_ = { x }, out = { x:softmax(2) } })
    case("r_logsoftmax", "reduce:log_softmax:-1", { in_ = { x }, out = { x:log_softmax(-1) } })

    -- layers: forward and the gradients of inputs and parameters
    local function layer(name, op, spec, inputs, params)
      local args = {}
      for _, t in ipairs(inputs) do args[#args + 1] = t end
      for _, t in ipairs(params or {}) do args[#args + 1] = t end
      local y = op:forward(unpack(args))
      local dy = randn(y:shape())
      local grads
      if op.kind == "softmax" or op.kind == "log_softmax" then
        grads = { op:backward(inputs[1], y, dy) }
      else
        args[#args + 1] = dy
        grads = { op:backward(unpack(args)) }
      end
      case(name, spec, { in_ = inputs, p = params or {}, out = { y }, dy = { dy }, grad = grads })
    end
    local img = randn({ 2, 6, 11, 9 })
    layer("l_maxpool", tocha.MaxPool2d.new { kernel_size = 3, stride = 2, padding = 1, dtype = "f64" }, "maxpool:3:2:1:1:0", { img })
    layer("l_maxpool_dil", tocha.MaxPool2d.new { kernel_size = 2, stride = 1, dilation = 2, ceil_mode = true, dtype = "f64" },
      "maxpool:2:1:0:2:1", { img })
    layer("l_avgpool", tocha.AvgPool2d.new { kernel_size = 3, stride = 2, padding = 1, ceil_mode = true,
      count_include_pad = false, dtype = "f64" }, "avgpool:3:2:1:1:0", { img })
    layer("l_adaptive", tocha.AdaptiveAvgPool2d.new { output_size = { 5, 4 }, dtype = "f64" }, "adaptive:5:4", { img })
    layer("l_softmax", tocha.Softmax.new(2, "f64"), "softmax:2", { img })
    layer("l_logsoftmax", tocha.LogSoftmax.new(-1, "f64"), "log_softmax:-1", { img })
    layer("l_bc_mul", tocha.Broadcast.new("mul", "f64"), "broadcast:mul", { img, randn({ 2, 6, 1, 1 }) })
    layer("l_bc_div", tocha.Broadcast.new("div", "f64"), "broadcast:div", { randn({ 9 }), randn({ 4, 1 }):abs() + 0.5 })
    layer("l_bc_max", tocha.Broadcast.new("max", "f64"), "broadcast:max", { randn({ 3, 1, 5 }), randn({ 4, 1 }) })
    local seq = randn({ 3, 7, 16 }, 0.3)
    layer("l_layernorm", tocha.LayerNorm.new({ 7, 16 }, { dtype = "f64" }), "layer_norm:7,16:1e-05",
      { seq }, { randn({ 7, 16 }, 1), randn({ 7, 16 }) })
    layer("l_rmsnorm", tocha.RMSNorm.new({ 16 }, { dtype = "f64", eps = 1e-6 }), "rms_norm:16:1e-06", { seq }, { randn({ 16 }, 1) })
    layer("l_groupnorm", tocha.GroupNorm.new(3, 6, { dtype = "f64" }), "group_norm:3:6:1e-05",
      { img }, { randn({ 6 }, 1), randn({ 6 }) })
    -- convolutions and a product with their fused epilogues (activation, residual), a
    -- depthwise convolution in NHWC (its own kernels), a transposed one
    layer("l_conv_silu_res", tocha.Conv2d.new(6, 8, 3, { stride = 2, padding = 1, dtype = "f64", activation = "silu",
      residual = true }), "conv:2:1:1:1:silu:nchw", { img, randn({ 2, 8, 6, 5 }) }, { randn({ 8, 6, 3, 3 }), randn({ 8 }) })
    layer("l_dwconv_gelu", tocha.Conv2d.new(6, 6, 3, { padding = 2, dilation = 2, groups = 6, dtype = "f64",
      activation = "gelu", layout = "nhwc" }), "conv:1:2:2:6:gelu:nhwc", { img:permute(1, 3, 4, 2):contiguous() },
      { randn({ 6, 1, 3, 3 }), randn({ 6 }) })
    for i, act in ipairs({ "mish", "softplus", "selu", "gelu_tanh" }) do
      layer("l_conv_" .. act, tocha.Conv2d.new(6, 8, 3, { padding = 1, dtype = "f64", activation = act,
        layout = i % 2 == 0 and "nhwc" or "nchw" }), ("conv:1:1:1:1:%s:%s"):format(act, i % 2 == 0 and "nhwc" or "nchw"),
        { i % 2 == 0 and img:permute(1, 3, 4, 2):contiguous() or img }, { randn({ 8, 6, 3, 3 }), randn({ 8 }) })
    end
    layer("l_deconv", tocha.ConvTranspose2d.new(6, 4, 3, { stride = 2, padding = 1, output_padding = 1, dtype = "f64" }),
      "deconv:2:1:1:1:1", { img }, { randn({ 6, 4, 3, 3 }), randn({ 4 }) })
    layer("l_linear_gelu", tocha.Linear.new(16, 12, { dtype = "f64", activation = "gelu" }), "linear:gelu", { randn({ 3, 7, 16 }) },
      { randn({ 12, 16 }), randn({ 12 }) })
    local bn = tocha.BatchNorm2d.new(6, { dtype = "f64", momentum = 0.3 })
    local rm, rv = randn({ 6 }), tocha.rand({ 6 }, { dtype = "f64", device = device, seed = 500, low = 0.5, high = 2 })
    cases.bn_start = "none"
    tensors["bn_start.p1"], tensors["bn_start.p2"] = rm:clone(), rv:clone()
    local rm_nhwc, rv_nhwc = rm:clone(), rv:clone() -- the same start for the channels-last case
    layer("l_batchnorm", bn, "batch_norm:0.3:1e-05", { img }, { randn({ 6 }, 1), randn({ 6 }), rm, rv })
    -- channels-last: the statistics as a column reduction, each element's channel its own; the
    -- pools in units of channels (two f64 a 16-byte unit)
    local img_nhwc = img:permute(1, 3, 4, 2):contiguous()
    layer("l_batchnorm_nhwc", tocha.BatchNorm2d.new(6, { dtype = "f64", momentum = 0.3, layout = "nhwc" }),
      "batch_norm:0.3:1e-05:nhwc", { img_nhwc }, { randn({ 6 }, 1), randn({ 6 }), rm_nhwc, rv_nhwc })
    layer("l_maxpool_nhwc", tocha.MaxPool2d.new { kernel_size = 3, stride = 2, padding = 1, dtype = "f64", layout = "nhwc" },
      "maxpool:3:2:1:1:0:nhwc", { img_nhwc })
    layer("l_avgpool_nhwc", tocha.AvgPool2d.new { kernel_size = 3, stride = 2, padding = 1, ceil_mode = true,
      count_include_pad = false, dtype = "f64", layout = "nhwc" }, "avgpool:3:2:1:1:0:nhwc", { img_nhwc })

    -- losses: the loss and the gradient of the input (upstream 1)
    local logits = randn({ 8, 5 })
    local target = tocha.tensor({ 1, 5, 3, -100, 2, 2, 4, 1 }, { dtype = "i64", device = device })
    local function loss_case(name, spec, fn, input, tgt, opts)
      local l, g = fn(input, tgt, opts)
      case(name, spec, { in_ = { input, tgt:cast("f64") }, out = { l }, grad = { g } })
    end
    loss_case("ce", "cross_entropy:mean:0.1", tocha.loss.cross_entropy, logits, target, { label_smoothing = 0.1 })
    loss_case("ce_sum", "cross_entropy:sum:0", tocha.loss.cross_entropy, logits, target, { reduction = "sum" })
    loss_case("nll", "nll:mean:0", tocha.loss.nll, logits:log_softmax(2), target)
    local p, q = randn({ 4, 5 }), tocha.rand({ 4, 5 }, { dtype = "f64", device = device, seed = 900 })
    loss_case("mse", "mse:mean", tocha.loss.mse, p, randn({ 4, 5 }))
    loss_case("l1", "l1:sum", tocha.loss.l1, p, randn({ 4, 5 }), { reduction = "sum" })
    loss_case("bce", "bce_with_logits:mean", tocha.loss.bce_with_logits, p, q)

    -- optimizers: three steps from the same start with the same gradients
    for _, o in ipairs({ { "adamw", "AdamW", { lr = 0.01, weight_decay = 0.05, betas = { 0.8, 0.95 }, eps = 1e-7 } },
      { "sgd", "SGD", { lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 1e-3 } } }) do
      local w = randn({ 3, 4000 })
      local start = w:clone()
      local opt = tocha.optim[o[2]]({ w = w }, o[3])
      local gs = {}
      for s = 1, 3 do
        gs[s] = randn({ 3, 4000 })
        opt:step({ w = gs[s] })
      end
      case("o_" .. o[1], "optim:" .. o[1], { in_ = { start }, grad = gs, out = { w } })
    end

    local path = os.tmpname()
    tocha.save(path, tensors, cases)
    local ok, out = peers.run("peer_layers.py", path)
    os.remove(path)
    print(out)
    assert.truthy(ok, out)
  end)
end)
