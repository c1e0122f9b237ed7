-- tocha.nn: Torch-style modules over tocha's ops, for experiment scripts.
--
--   local up = tocha.nn.UpsampleNearest2d(2)        -- scale_h = scale_w = 2
--   local y  = up:forward(x)                        -- also up.output
--   local dx = up:backward(x, dy)                   -- also up.gradInput
--
-- As in Torch's nn: forward calls updateOutput, backward calls updateGradInput (this module
-- has no parameters to accumulate gradients into). Kernels are made per input dtype on first
-- use, with the block width given (default: the one new() picks) and the layout ("nchw", the
-- default, or "nhwc": tocha.nn.UpsampleNearest2d(2, 2, nil, { layout = "nhwc" })).
local upsample = require "tocha.ops.upsample"
local tensor = require "tocha.tensor"
local errors = require "tocha.errors"
local raise = errors.raise

local M = {}

local UpsampleNearest2d = {}
UpsampleNearest2d.__index = UpsampleNearest2d
UpsampleNearest2d.__tostring = function(m)
  return ("tocha.nn.UpsampleNearest2d(%d, %d)"):format(m.scale_h, m.scale_w)
end

-- tocha.nn.UpsampleNearest2d(scale_h [, scale_w [, block [, options]]]); options { layout }.
function M.UpsampleNearest2d(scale_h, scale_w, block, opts)
  scale_w = scale_w or scale_h
  -- Construct once now so that bad scales fail here, at the caller's line.
  local ok, err = pcall(upsample.UpsampleNearest2dForward.new, scale_h, scale_w, block, nil, opts)
  if not ok then
    error((tostring(err):gsub("^[^:]*:%d+: ", ""):gsub("UpsampleNearest2dForward%.new", "nn.UpsampleNearest2d")), 2)
  end
  return setmetatable({ scale_h = scale_h, scale_w = scale_w, block = block, options = opts,
    layout = err.layout, kernels = { f32 = err }, output = nil, gradInput = nil }, UpsampleNearest2d)
end

function UpsampleNearest2d:kernel_for(input)
  if not tensor.is_tensor(input) then
    raise("input: expected a tensor, got " .. type(input))
  end
  local name = input:dtype()
  local k = self.kernels[name]
  if not k then
    k = upsample.UpsampleNearest2dForward.new(self.scale_h, self.scale_w, self.block, name, self.options)
    self.kernels[name] = k
  end
  return k
end

function UpsampleNearest2d:updateOutput(input)
  self.output = self:kernel_for(input):forward(input)
  return self.output
end

function UpsampleNearest2d:updateGradInput(input, gradOutput)
  self.gradInput = self:kernel_for(input):backward(input, gradOutput)
  return self.gradInput
end

function UpsampleNearest2d:forward(input) return self:updateOutput(input) end
function UpsampleNearest2d:backward(input, gradOutput) return self:updateGradInput(input, gradOutput) end

errors.name(M.UpsampleNearest2d, "nn.UpsampleNearest2d")
-- A BatchNorm folded into the layer before it (tocha.fusion).
M.fold_batch_norm = errors.name(require("tocha.fusion").fold_batch_norm, "nn.fold_batch_norm")
errors.methods(UpsampleNearest2d, "nn.UpsampleNearest2d:", function(m) return getmetatable(m) == UpsampleNearest2d end)
return M
