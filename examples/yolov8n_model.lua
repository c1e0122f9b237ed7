-- examples/yolov8n_model.lua: the YOLOv8n detector's architecture (Ultralytics' yolov8.yaml at
-- scale n: depth 0.33, width 0.25, 80 classes) as a tocha.Model, its parameters under
-- Ultralytics' names ("model.0.conv.weight", "model.22.cv2.0.2.bias", ...), so that a state dict
-- of theirs loads by name (m:load_state_dict). 3,157,200 parameters, as Ultralytics counts
-- them.
--
--   local yolo = require "yolov8n_model"
--   local m = yolo.build { size = 640 }         -- images [B, 3, 640, 640]
--   m:load(1); m:train(false)                    -- inference (BatchNorm's running statistics)
--   yolo.init(m, 640)                            -- the DFL weights and the anchors
--   local y = m:forward({ x })[1]               -- [B, 84, 8400]: xywh boxes (pixels), 80 scores
--
-- The pieces, as Ultralytics writes them: Conv = conv (no bias) + BatchNorm2d (eps 1e-3) +
-- SiLU; C2f = a 1x1 Conv, its output chunked in two, n Bottlenecks (two 3x3 Convs, a residual
-- add in the backbone) on the last chunk, each output joined, a 1x1 Conv; SPPF = a 1x1 Conv,
-- three 5x5 max pools in a row, all four joined, a 1x1 Conv; the neck upsamples by 2 and joins;
-- Detect = per level two 3x3 Convs and a 1x1 conv for the 64 box logits (4 sides x 16 bins) and
-- for the 80 class logits, the levels joined along the anchors, DFL (a softmax over each side's
-- 16 bins, then their expectation: a 1x1 convolution of fixed weights 0..15), dist2bbox against
-- the anchor points (each cell's centre), scaled by the level's stride, beside the sigmoid of
-- the class logits.
local tocha = require "tocha"

local M = {}

M.CLASSES, M.REG_MAX, M.STRIDES = 80, 16, { 8, 16, 32 }

-- A builder of one model's nodes, each op of dtype dt.
local function builder(dt)
  local b = {}

  -- Ultralytics' Conv: conv (k x k, stride s, padding k // 2, no bias) + BN + SiLU.
  function b.conv(x, name, c1, c2, k, s)
    local c = tocha.Conv2d.new(c1, c2, k, { stride = s or 1, padding = math.floor(k / 2), bias = false, dtype = dt })(x)
      :named(name .. ".conv")
    local n = tocha.BatchNorm2d.new(c2, { eps = 1e-3, momentum = 0.03, dtype = dt })(c):named(name .. ".bn")
    return tocha.Elementwise.new("silu", dt)(n)
  end

  -- A join of several nodes along the channels (a ChannelCat a pair).
  function b.cat(list)
    local acc = list[1]
    for i = 2, #list do acc = tocha.ChannelCat.new(dt)(acc, list[i]) end
    return acc
  end

  function b.bottleneck(x, name, c, shortcut)
    local y = b.conv(b.conv(x, name .. ".cv1", c, c, 3), name .. ".cv2", c, c, 3)
    if shortcut then return tocha.Elementwise.new("add", dt)(x, y) end
    return y
  end

  function b.c2f(x, name, c1, c2, n, shortcut)
    local c = math.floor(c2 / 2)
    local y = b.conv(x, name .. ".cv1", c1, 2 * c, 1)
    local parts = { tocha.ChannelChunk.new(2, 1, dt)(y), tocha.ChannelChunk.new(2, 2, dt)(y) }
    for i = 1, n do parts[#parts + 1] = b.bottleneck(parts[#parts], ("%s.m.%d"):format(name, i - 1), c, shortcut) end
    return b.conv(b.cat(parts), name .. ".cv2", (2 + n) * c, c2, 1)
  end

  function b.sppf(x, name, c1, c2)
    local c = math.floor(c1 / 2)
    local pool = tocha.MaxPool2d.new { kernel_size = 5, stride = 1, padding = 2, dtype = dt }
    local y = { b.conv(x, name .. ".cv1", c1, c, 1) }
    for i = 2, 4 do y[i] = pool(y[i - 1]) end
    return b.conv(b.cat(y), name .. ".cv2", 4 * c, c2, 1)
  end

  return b
end

-- Nodes joined along their last dimension: each [B, C, A_i] seen as [B C, A_i, 1] and joined
-- along dimension 2, then seen as [B, C, sum A_i].
local function cat_last(b, list, batch, channels, counts, dt)
  local seen, total = {}, 0
  for i, x in ipairs(list) do
    seen[i] = tocha.View.new({ batch * channels, counts[i], 1 }, { dtype = dt })(x)
    total = total + counts[i]
  end
  return tocha.View.new({ batch, channels, total }, { dtype = dt })(b.cat(seen))
end

-- M.build{size = 640 [, batch = 1, dtype = "f32", raw = false]}: the model for images [batch,
-- 3, size, size] (size a multiple of 32), its output [batch, 84, A]: for each of the A anchors
-- (size/8)^2 + (size/16)^2 + (size/32)^2, its box (centre x, centre y, width, height in pixels)
-- and 80 class scores; with raw, two outputs more: the box logits [batch, 64, A] and the class
-- logits [batch, 80, A] the decode starts from. Built for one batch size: load it with that one.
-- Returns the model and {anchors = A, counts = the anchors of each level}.
function M.build(opts)
  opts = opts or {}
  local size, batch, dt = opts.size or 640, opts.batch or 1, opts.dtype or "f32"
  assert(size % 32 == 0, "size: expected a multiple of 32")
  local b = builder(dt)
  local x = tocha.Model.input({ batch, 3, size, size }, { dtype = dt, name = "images" })
  -- backbone
  local h = b.conv(x, "model.0", 3, 16, 3, 2)
  h = b.conv(h, "model.1", 16, 32, 3, 2)
  h = b.c2f(h, "model.2", 32, 32, 1, true)
  h = b.conv(h, "model.3", 32, 64, 3, 2)
  local p3 = b.c2f(h, "model.4", 64, 64, 2, true)
  h = b.conv(p3, "model.5", 64, 128, 3, 2)
  local p4 = b.c2f(h, "model.6", 128, 128, 2, true)
  h = b.conv(p4, "model.7", 128, 256, 3, 2)
  h = b.c2f(h, "model.8", 256, 256, 1, true)
  local p5 = b.sppf(h, "model.9", 256, 256)
  -- neck: top-down, then bottom-up
  local up = tocha.UpsampleNearest2dForward.new(2, 2, nil, dt)
  local n12 = b.c2f(b.cat({ up(p5), p4 }), "model.12", 384, 128, 1, false)
  local n15 = b.c2f(b.cat({ up(n12), p3 }), "model.15", 192, 64, 1, false)
  local n18 = b.c2f(b.cat({ b.conv(n15, "model.16", 64, 64, 3, 2), n12 }), "model.18", 192, 128, 1, false)
  local n21 = b.c2f(b.cat({ b.conv(n18, "model.19", 128, 128, 3, 2), p5 }), "model.21", 384, 256, 1, false)
  -- Detect
  local nc, reg = M.CLASSES, M.REG_MAX
  local c2, c3 = 64, 80 -- max(16, 64 / 4, 4 reg_max), max(64, min(nc, 100))
  local boxes, scores, counts = {}, {}, {}
  for i, feat in ipairs({ { n15, 64 }, { n18, 128 }, { n21, 256 } }) do
    local name, side = ("model.22.%%s.%d"):format(i - 1), size / M.STRIDES[i]
    counts[i] = side * side
    local r = b.conv(b.conv(feat[1], name:format("cv2") .. ".0", feat[2], c2, 3), name:format("cv2") .. ".1", c2, c2, 3)
    r = tocha.Conv2d.new(c2, 4 * reg, 1, { dtype = dt })(r):named(name:format("cv2") .. ".2")
    local c = b.conv(b.conv(feat[1], name:format("cv3") .. ".0", feat[2], c3, 3), name:format("cv3") .. ".1", c3, c3, 3)
    c = tocha.Conv2d.new(c3, nc, 1, { dtype = dt })(c):named(name:format("cv3") .. ".2")
    boxes[i] = tocha.View.new({ batch, 4 * reg, counts[i] }, { dtype = dt })(r)
    scores[i] = tocha.View.new({ batch, nc, counts[i] }, { dtype = dt })(c)
  end
  local anchors = counts[1] + counts[2] + counts[3]
  local box = cat_last(b, boxes, batch, 4 * reg, counts, dt)   -- [B, 64, A]
  local cls = cat_last(b, scores, batch, nc, counts, dt)       -- [B, 80, A]
  -- DFL: a softmax over each side's bins, then the expectation (a 1x1 conv of weights 0..15)
  local bins = tocha.View.new({ batch, 4, reg, anchors }, { dtype = dt })(box)
  local p = tocha.Softmax.new(3, dt)(bins)
  local as_planes = tocha.View.new({ batch * 4, reg, anchors, 1 }, { dtype = dt })(p)
  local expect = tocha.Conv2d.new(reg, 1, 1, { bias = false, dtype = dt })(as_planes):named("model.22.dfl.conv")
  local dist = tocha.View.new({ batch, 4, anchors }, { dtype = dt })(expect)
  -- dist2bbox (xywh) against the anchor points, times the strides
  local lt, rb = tocha.ChannelChunk.new(2, 1, dt)(dist), tocha.ChannelChunk.new(2, 2, dt)(dist)
  local x1y1 = tocha.BroadcastConstant.new("sub", { 1, 2, anchors }, { dtype = dt, constant_first = true })(lt)
    :named("model.22.anchors_lt")
  local x2y2 = tocha.BroadcastConstant.new("add", { 1, 2, anchors }, { dtype = dt })(rb):named("model.22.anchors_rb")
  local sum = tocha.Elementwise.new("add", dt)(x1y1, x2y2)
  local centre = tocha.BroadcastConstant.new("mul", { 1 }, { dtype = dt })(sum):named("model.22.half")
  local wh = tocha.Elementwise.new("sub", dt)(x2y2, x1y1)
  local xywh = tocha.BroadcastConstant.new("mul", { 1, 1, anchors }, { dtype = dt })(b.cat({ centre, wh }))
    :named("model.22.strides")
  local y = b.cat({ xywh, tocha.Elementwise.new("sigmoid", dt)(cls) })
  local outputs = { y }
  if opts.raw then -- the head's logits before DFL and the decode, as copies (views cannot be outputs)
    outputs[2] = tocha.Elementwise.new("identity", dt)(box)
    outputs[3] = tocha.Elementwise.new("identity", dt)(cls)
  end
  return tocha.Model({ x }, outputs), { anchors = anchors, counts = counts }
end

-- The anchor points of images size x size: each cell's centre (x + 0.5, y + 0.5) in its level's
-- grid, level by level, row by row; and each anchor's stride. Two Lua lists: {x..., y...}
-- (2 x A) and the strides (A).
function M.anchor_points(size)
  local xs, ys, strides = {}, {}, {}
  for _, s in ipairs(M.STRIDES) do
    local side = size / s
    for gy = 0, side - 1 do
      for gx = 0, side - 1 do
        xs[#xs + 1], ys[#ys + 1], strides[#strides + 1] = gx + 0.5, gy + 0.5, s
      end
    end
  end
  local points = {}
  for i, v in ipairs(xs) do points[i] = v end
  for i, v in ipairs(ys) do points[#xs + i] = v end
  return points, strides
end

-- M.init(m, size): a loaded model's fixed values: the DFL weights 0..15, the anchors, the
-- strides and the 1/2 of the centre. (Buffers the builder's nodes hold; the DFL weight is a
-- parameter, as Ultralytics' is, and not trained there either.)
function M.init(m, size)
  local p = m:parameters()
  local dt = p["model.22.dfl.conv.weight"]:dtype()
  local dev = p["model.22.dfl.conv.weight"]:device()
  local function put(name, values, shape)
    p[name]:copy(tocha.tensor(values, { dtype = "f64", device = dev }):view(shape):cast(dt))
  end
  local bins = {}
  for k = 1, M.REG_MAX do bins[k] = k - 1 end
  put("model.22.dfl.conv.weight", bins, { 1, M.REG_MAX, 1, 1 })
  local points, strides = M.anchor_points(size)
  put("model.22.anchors_lt.constant", points, { 1, 2, #strides })
  put("model.22.anchors_rb.constant", points, { 1, 2, #strides })
  put("model.22.half.constant", { 0.5 }, { 1 })
  put("model.22.strides.constant", strides, { 1, 1, #strides })
  return m
end

-- The parameters Ultralytics counts: every trainable one (the BatchNorms' running statistics
-- and the anchors are buffers).
function M.parameter_count(m)
  local n = 0
  for _, t in pairs(m:trainable_parameters()) do n = n + t:numel() end
  return n
end

return M
