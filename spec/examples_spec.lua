-- The examples run to the end and pass their checks, on sim, each in a tocha process of its own
-- started in a fresh folder, so that they find their data beside themselves and not in the
-- current folder: examples/quickstart.lua (`make demo`), examples/neck.lua (`make neck`),
-- raw_kernel.lua, row_sums.lua, upsample_image.lua, make_pattern_image.lua, train_digits.lua (on one device and
-- on two through tocha.DataParallel), yolov8n.lua and the
-- modules neck_model.lua and yolov8n_model.lua.
-- None writes into the checkout's examples/ or into the folder it runs in unless given an
-- output path there; an image example without one writes to /tmp and names the file.
local tocha = require "tocha"
require "tocha.assertions"
local process = require "support.process"
local isolated = require "support.isolated"

local source = os.getenv("TOCHA_SOURCE_DIR") or "."
local examples = source .. "/examples"
-- Absolute, so that the example's own path (arg[0]) leads back to its data from any folder.
if examples:sub(1, 1) ~= "/" then examples = (os.getenv("PWD") or ".") .. "/" .. examples end

local function listings()
  return { isolated.listing(examples), isolated.listing(examples .. "/data") }
end

-- run(name, args, check): the example in a fresh folder, with args; check(out, cwd) runs
-- before the folder goes. Asserts exit 0, nothing new in examples/ and examples/data/, and in
-- the folder only the names given in `args` (the output paths the caller asked for). The
-- folders are listed as soon as the example ends, before check removes what it reads.
local function run(name, args, check)
  local before, cwd = listings(), process.tempdir()
  local out, err, status = isolated.run(cwd, { examples .. "/" .. name, unpack(args or {}) }, { TOCHA_DEVICE = "sim" })
  local asked = {}
  for _, a in ipairs(args or {}) do asked[a] = true end
  local left, after = isolated.new_names(asked, isolated.listing(cwd)), listings()
  local ok, problem = pcall(function()
    assert.are.equal(0, status, err .. out)
    if check then check(out, cwd) end
  end)
  process.remove_tree(cwd)
  if not ok then error(problem, 0) end
  assert.are.same({}, left, "left in the folder it ran in")
  assert.are.same({}, isolated.new_names(before[1], after[1]), "new in examples/")
  assert.are.same({}, isolated.new_names(before[2], after[2]), "new in examples/data/")
  return out
end

-- The /tmp file an image example names in its output (after "-> " or "wrote "), removed once
-- read: the image as a tensor on sim.
local function take_temp_image(out, pattern)
  local path = out:match(pattern)
  assert.truthy(path and path:match("^/tmp/") and path:sub(1, #examples + 1) ~= examples .. "/", out)
  local img = tocha.image.read(path, "sim")
  os.remove(path)
  return img
end

describe("the examples, each run from a fresh folder", function()
  it("neck.lua: a model of upsamples, joins, elementwise ops, a bias, a mean loss and a Lua op trains, matches central differences and replays", function()
    local out = run("neck.lua")
    assert.truthy(out:find("all checks passed", 1, true), out)
    assert.is_nil(out:find("MISMATCH", 1, true), out)
    local oks = select(2, out:gsub(" ok\n", ""))
    assert.are.equal(9, oks, out)
  end)

  it("train_digits.lua trains its CNN to >= 97% test accuracy and writes the run for PyTorch's replay", function()
    run("train_digits.lua", { "--out", "run" }, function(out, cwd)
      local acc = tonumber(out:match("\ntest accuracy ([%d.]+)%% after 330 steps %(360 images held out%)"))
      assert.truthy(acc and acc >= 97, out)
      assert.truthy(out:find("step  325/330  loss [%d.]+  [%d.]+ steps/s  %d+ s left"), out)
      local csv = io.open(cwd .. "/run/loss.csv"):read("*a")
      assert.are.equal(331, select(2, csv:gsub("\n", "")))
      local first = tonumber(csv:match("\n1,([%d.]+)\n"))
      assert.truthy(first > 2 and first < 2.6, "the first loss is about ln 10: " .. tostring(first))
      local batches = tocha.load_npy(cwd .. "/run/batches.npy", { device = "sim" })
      assert.are.same({ 330, 64 }, batches:shape())
      local seen = {}
      for i, k in ipairs(batches:to_table(true)) do
        assert.truthy(k >= 0 and k < 1797 and k % 5 ~= 0, "batch row " .. i .. " is a training image: " .. k)
        if i <= 22 * 64 then
          assert.is_nil(seen[k], "an epoch holds each image once")
          seen[k] = true
        end
      end
      local initial = tocha.load(cwd .. "/run/initial.safetensors", { device = "sim" })
      assert.are.same({ 16, 1, 3, 3 }, initial["conv1.weight"]:shape())
      assert.are.same({ 10, 64 }, initial["fc2.weight"]:shape())
    end)
  end)

  it("train_digits.lua --devices sim,sim:1 trains as the one-device run does, a half batch a device", function()
    local function losses(extra)
      local args = { "--steps", "25", "--out", "run" }
      for _, a in ipairs(extra) do args[#args + 1] = a end
      local csv
      run("train_digits.lua", args, function(out, cwd)
        assert.truthy(out:find("step   25/25  loss [%d.]+"), out)
        csv = io.open(cwd .. "/run/loss.csv"):read("*a")
      end)
      local list = {}
      for l in csv:gmatch("\n%d+,([-%d.e]+)") do list[#list + 1] = tonumber(l) end
      assert.are.equal(25, #list)
      return list
    end
    local one, two = losses({}), losses({ "--devices", "sim,sim:1" })
    for k = 1, 25 do
      -- f32: the two half batches' mean gradients against the whole batch's, over 25 AdamW steps
      assert.is_true(math.abs(one[k] - two[k]) <= 1e-5 * one[k], ("step %d: %.9g vs %.9g"):format(k, one[k], two[k]))
    end
    assert.is_true(two[25] < two[1])
  end)

  it("yolov8n.lua builds YOLOv8n (Ultralytics' 3,157,200 parameters), runs it and replays it", function()
    run("yolov8n.lua", { "--size", "64" }, function(out)
      assert.truthy(out:find("YOLOv8n on sim: 3157200 parameters, %d+ nodes, images %[1, 3, 64, 64%], 84 anchors"), out)
      assert.truthy(out:find("output [1, 84, 84]", 1, true), out)
    end)
  end)

  it("yolov8n_model.lua decodes its head as Ultralytics' Detect does: DFL, dist2bbox, strides, sigmoid", function()
    package.path = examples .. "/?.lua;" .. package.path
    local yolo = require "yolov8n_model"
    local size, batch = 64, 2
    local m, facts = yolo.build { size = size, batch = batch, raw = true }
    m:load(batch, "sim")
    yolo.init(m, size)
    local outs = m:forward({ tocha.rand({ batch, 3, size, size }, { seed = 3, device = "sim" }) })
    local y, box, cls = outs[1]:to_table(), outs[2]:to_table(), outs[3]:to_table()
    local points, strides = yolo.anchor_points(size)
    local A = facts.anchors
    assert.are.same({ 2 * A, A }, { #points, #strides })
    for bi = 1, batch do
      for a = 1, A do
        -- each side: the expectation of the softmax of its 16 bins
        local d = {}
        for side = 1, 4 do
          local big, sum, e = -math.huge, 0, 0
          for k = 1, 16 do big = math.max(big, box[bi][(side - 1) * 16 + k][a]) end
          for k = 1, 16 do
            local w = math.exp(box[bi][(side - 1) * 16 + k][a] - big)
            sum, e = sum + w, e + w * (k - 1)
          end
          d[side] = e / sum
        end
        local ax, ay, s = points[a], points[A + a], strides[a]
        local x1, y1, x2, y2 = ax - d[1], ay - d[2], ax + d[3], ay + d[4]
        local want = { (x1 + x2) / 2 * s, (y1 + y2) / 2 * s, (x2 - x1) * s, (y2 - y1) * s }
        for k = 1, 4 do
          assert.is_true(math.abs(y[bi][k][a] - want[k]) <= 1e-4 * math.max(1, math.abs(want[k])),
            ("image %d anchor %d box %d: %.7g, want %.7g"):format(bi, a, k, y[bi][k][a], want[k]))
        end
        for k = 1, 80 do
          local want_score = 1 / (1 + math.exp(-cls[bi][k][a]))
          assert.is_true(math.abs(y[bi][4 + k][a] - want_score) <= 1e-6, ("image %d anchor %d class %d"):format(bi, a, k))
        end
      end
    end
    assert.are.equal(3157200, yolo.parameter_count(m))
  end)

  it("quickstart.lua runs to its end", function()
    run("quickstart.lua")
  end)

  it("raw_kernel.lua launches its saxpy and checks it", function()
    local out = run("raw_kernel.lua")
    assert.truthy(out:find("(ok)", 1, true), out)
  end)

  it("row_sums.lua tests its cooperative kernel against Lua at three block sizes, times, tunes and sweeps it", function()
    local out = run("row_sums.lua")
    local oks = select(2, out:gsub("block +%d+: max relative error [%d.e+-]+ ok\n", ""))
    assert.are.equal(3, oks, out)
    assert.truthy(out:find("block 256: [%d.]+ ms, [%d.]+ GB/s %(CPU time%)"), out)
    assert.truthy(out:find("\ntuned: block %d+, [%d.]+ ms %(memory%)\n"), out)
    assert.are.equal(10, select(2, out:gsub("\n| %d+ | block%d%d%d%d | ", "")), out)
  end)

  it("neck_model.lua loads as a script (it is the module neck.lua and bench/model.lua require)", function()
    run("neck_model.lua")
  end)

  it("upsample_image.lua reads data/pattern.png beside itself and writes 4x4 into /tmp, naming the file", function()
    local shipped = tocha.image.read(examples .. "/data/pattern.png", "sim"):shape()
    run("upsample_image.lua", nil, function(out)
      local big = take_temp_image(out, "%-> (%S+%.png)")
      assert.are.same({ 1, shipped[2], shipped[3] * 4, shipped[4] * 4 }, big:shape())
    end)
  end)

  it("upsample_image.lua writes the output path it is given, in the folder it runs in", function()
    run("upsample_image.lua", { examples .. "/data/pattern.png", "out.png", "2" }, function(_, cwd)
      assert.are.same({ 1, 3, 64, 96 }, tocha.image.read(cwd .. "/out.png", "sim"):shape())
    end)
  end)

  it("make_pattern_image.lua draws the shipped pattern.png into /tmp, naming the file, or into the path given", function()
    local shipped = tocha.image.read(examples .. "/data/pattern.png", "sim")
    run("make_pattern_image.lua", nil, function(out)
      assert.tensor.equal(shipped, take_temp_image(out, "wrote (%S+%.png):"))
    end)
    run("make_pattern_image.lua", { "pattern.png" }, function(_, cwd)
      assert.tensor.equal(shipped, tocha.image.read(cwd .. "/pattern.png", "sim"))
    end)
  end)
end)
