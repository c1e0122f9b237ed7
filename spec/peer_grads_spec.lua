-- Gradients against PyTorch's: every op of the family (the ten unary and six binary elementwise
-- functions, the 2x2 upsample, the channel join and chunk, the channel bias add, sum, mean and
-- max over every element and one dimension) runs its backward on cuda in f64 on random shapes;
-- the inputs, dy and tocha's gradients go to a safetensors file, and torch.autograd recomputes
-- the gradients there (spec/support/peer_grads.py). Tagged #gpu: it runs where PyTorch is, the
-- GPU machine; pending where python3 lacks torch or safetensors.
local tocha = require "tocha"

local peers = require "support.peers"

describe("gradients beside PyTorch's #gpu", function()
  it("match torch.autograd for every op of the family, f64, random shapes", function()
    if not peers.available("torch, safetensors") then return pending("python3 with torch and safetensors is not installed here") end
    local device, seed = "cuda", 0
    local tensors, cases = {}, {}
    local function randn(shape, positive)
      seed = seed + 1
      local t = tocha.randn(shape, { dtype = "f64", device = device, seed = seed })
      if positive then t = tocha.Elementwise.new("exp", "f64"):forward(t) end
      return t
    end
    local function case(name, op, inputs, dy, grads)
      cases[name] = op
      for i, t in ipairs(inputs) do tensors[name .. ".in" .. i] = t end
      tensors[name .. ".dy"] = dy
      for i, g in ipairs(grads) do tensors[name .. ".grad" .. i] = g end
    end
    local shape = { 2, 3, 5, 7 }
    for _, fn in ipairs({ "neg", "abs", "exp", "log", "sqrt", "relu", "sigmoid", "tanh", "silu", "gelu" }) do
      local op = tocha.Elementwise.new(fn, "f64")
      local x = randn(shape, fn == "log" or fn == "sqrt")
      local dy = randn(shape)
      case("u_" .. fn, fn, { x }, dy, { op:backward(x, dy) })
    end
    for _, fn in ipairs({ "add", "sub", "mul", "div", "max", "min" }) do
      local op = tocha.Elementwise.new(fn, "f64")
      local a, b, dy = randn(shape), randn(shape, fn == "div"), randn(shape)
      local da, db = op:backward(a, b, dy)
      case("b_" .. fn, fn, { a, b }, dy, { da, db })
    end
    local up = tocha.UpsampleNearest2dForward.new(2, 2, nil, "f64")
    local x = randn({ 2, 3, 5, 7 })
    local dy = randn({ 2, 3, 10, 14 })
    case("upsample", "upsample2x2", { x }, dy, { up:backward(x, dy) })
    local cat = tocha.ChannelCat.new("f64")
    local a, b = randn({ 2, 3, 4, 5 }), randn({ 2, 5, 4, 5 })
    dy = randn({ 2, 8, 4, 5 })
    case("cat", "cat", { a, b }, dy, { cat:backward(a, b, dy) })
    local chunk = tocha.ChannelChunk.new(3, 2, "f64")
    x = randn({ 2, 6, 3, 5 })
    dy = randn({ 2, 2, 3, 5 })
    case("chunk", "chunk:3:2", { x }, dy, { chunk:backward(x, dy) })
    local bias = tocha.ChannelBiasAdd.new("f64")
    x, b = randn({ 3, 4, 9, 11 }), randn({ 4 })
    dy = randn({ 3, 4, 9, 11 })
    local dx, dbias = bias:backward(dy)
    case("bias", "bias", { x, b }, dy, { dx, dbias })
    for _, mode in ipairs({ "sum", "mean", "max" }) do
      for _, dim in ipairs({ 0, 1, 2, -1 }) do
        local op = tocha.Reduce.new(mode, dim ~= 0 and dim or nil, "f64")
        x = randn({ 4, 37, 53 })
        local y = op:forward(x)
        dy = randn(y:shape())
        case(("r_%s_%d"):format(mode, dim + 1), ("reduce:%s:%d"):format(mode, dim), { x }, dy, { op:backward(x, y, dy) })
      end
    end
    local path = os.tmpname()
    tocha.save(path, tensors, cases)
    local ok, out = peers.run("peer_grads.py", path)
    os.remove(path)
    print(out)
    assert.truthy(ok, out)
  end)
end)
