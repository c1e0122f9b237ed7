-- Training beside PyTorch: examples/train_digits.lua runs on cuda, then PyTorch replays its first
-- 50 steps from the same initial parameters, batches and learning rates
-- (spec/support/peer_train.py); each step's loss must agree within 1e-4 relative (f32, TF32
-- off). Tagged #gpu: it runs where PyTorch is, the GPU machine; pending where python3 lacks
-- torch or numpy.
local peers = require "support.peers"
local runs = require "support.peer_runs"

describe("training beside PyTorch #gpu", function()
  it("gives PyTorch's loss for the first 50 steps of train_digits.lua (f32)", function()
    if not peers.available("torch, numpy") then return pending("python3 with torch and numpy is not installed here") end
    local ok, said = runs.train("cuda")
    assert.is_true(ok, said)
    assert.truthy(said:find("worst relative difference over 50 steps", 1, true), said)
  end)
end)
