-- The benchmark scripts run on sim, each on a case or two (a run there checks the script: its
-- checks against the reference kernels, its rows and its CSV; its times mean nothing), so that
-- a change to an op's options or a script is caught before a GPU run needs the script: the
-- channels-last BatchNorm rows of bench/layers.lua, the tf32 rows of bench/conv.lua, the
-- training step in both layouts (bench/train_step.lua), the tf32 rows of bench/networks.lua and
-- the data-parallel step (bench/data_parallel.lua), these three on the small ResNet of
-- spec/support/onnx_models.py, the all-reduce of bench/comm.lua over sim and sim:1, and the
-- recurrent layers of bench/recurrent.lua.
local tocha = require "tocha"
local process = require "support.process"
local peers = require "support.peers"

local src = os.getenv("TOCHA_SOURCE_DIR") or "."
local env = { TOCHA_DEVICE = "sim", LUA_PATH = (os.getenv("LUA_PATH") or ";;") .. ";" .. src .. "/?.lua" }

local dir
setup(function() dir = process.tempdir() end)
teardown(function() process.remove_tree(dir) end)

-- Runs bench/<script> with args; returns its stdout (raising with its output when it fails).
local function bench(script, args)
  local full = { src .. "/bench/" .. script }
  for _, a in ipairs(args) do full[#full + 1] = a end
  local out, err, status = process.tocha(full, "", env)
  assert(status == 0, ("%s exited %s:\n%s\n%s"):format(script, tostring(status), out, err:sub(-3000)))
  return out
end

local function read(path)
  local f = assert(io.open(path))
  local text = f:read("*a")
  f:close()
  return text
end

describe("the benchmark scripts on sim", function()
  it("bench/layers.lua times the channels-last BatchNorm rows after checking them", function()
    local out = bench("layers.lua", { "--out", dir .. "/layers", "--launches", "1", "--only", "BatchNorm2d train nhwc" })
    local csv = read(dir .. "/layers/tocha.csv")
    -- four shapes, forward and backward, in each dtype the script runs
    local rows = select(2, csv:gsub("BatchNorm2d train nhwc,", ""))
    assert.is_true(rows >= 8, csv)
    assert.truthy(out:find("wrote", 1, true), out)
  end)

  it("bench/conv.lua checks and times the tf32 rows beside the halves'", function()
    bench("conv.lua", { "--out", dir .. "/conv", "--launches", "1", "--only", "resnet50 l1 1x1 64%->64", "--dtypes", "tf32,bf16" })
    local csv = read(dir .. "/conv/tocha.csv")
    for _, dt in ipairs({ "tf32", "bf16" }) do
      for _, layout in ipairs({ "nhwc", "nchw" }) do
        assert.truthy(csv:find((",%s,%s,"):format(dt, layout)), dt .. " " .. layout .. "\n" .. csv)
      end
    end
    local out, _, status = process.tocha({ src .. "/bench/conv.lua", "--out", dir .. "/conv", "--dtypes", "f8" }, "", env)
    assert.are_not.equal(0, status, out)
  end)

  it("bench/recurrent.lua checks the LSTM and GRU layers against f64 and times forward and backward", function()
    local out = bench("recurrent.lua", { "--out", dir .. "/recurrent", "--launches", "1", "--only", "lstm 512,gru 512" })
    local csv = read(dir .. "/recurrent/tocha.csv")
    assert.truthy(csv:find("^name,pass,dtype,mode,steps,batch,input,hidden,flops,ms,tflops\n"), csv)
    for _, case in ipairs({ "lstm 512 T50 B64,", "gru 512 T50 B64," }) do
      for _, pass in ipairs({ "forward", "backward" }) do
        assert.truthy(csv:find(case .. pass .. ",f32,", 1, true), case .. pass .. "\n" .. csv)
      end
    end
    assert.truthy(out:find("wrote", 1, true), out)
  end)

  it("bench/comm.lua checks and times the staged all_reduce over sim and sim:1", function()
    local out = bench("comm.lua", { "--out", dir .. "/comm", "--calls", "2" })
    local csv = read(dir .. "/comm/tocha.csv")
    assert.truthy(csv:find("^op,path,ranks,bytes,ms,algbw_gbps,busbw_gbps\n"), csv)
    assert.truthy(csv:find("all_reduce,staged,2,65536,", 1, true), csv)
    assert.truthy(csv:find("all_reduce,staged,2,1048576,", 1, true), csv)
    assert.truthy(out:find("all_reduce over sim, sim:1 (2 ranks)", 1, true), out)
  end)

  describe("on an exported ResNet", function()
    local files
    setup(function()
      assert(peers.available("onnx, numpy"), "bench_scripts_spec needs python3 with onnx and numpy (Debian's python3-onnx)")
      files = dir .. "/onnx"
      os.execute("mkdir -p " .. process.quote(files))
      local ok, said = peers.run("onnx_models.py", process.quote(files))
      assert(ok, "onnx_models.py failed: " .. said)
    end)

    it("bench/train_step.lua trains it in both layouts", function()
      local out = bench("train_step.lua", { "--out", dir .. "/train", "--file", files .. "/resnet18.onnx", "--size", "32",
        "--batch", "2", "--steps", "1", "--only", "f32" })
      local csv = read(dir .. "/train/train_tocha.csv")
      assert.truthy(csv:find("^network,batch,dtype,layout,step_ms,loss\n"), csv)
      assert.truthy(csv:find("resnet18,2,f32,nhwc,", 1, true), csv)
      assert.truthy(csv:find("resnet18,2,f32,nchw,", 1, true), csv)
      assert.is_nil(out:find("nan", 1, true), out)
    end)

    it("bench/data_parallel.lua trains it on one device and on sim and sim:1, replicas equal", function()
      local out = bench("data_parallel.lua", { "--out", dir .. "/dp", "--file", files .. "/resnet18.onnx", "--size", "32",
        "--batch", "2", "--steps", "1" })
      local csv = read(dir .. "/dp/tocha.csv")
      assert.truthy(csv:find("^devices,batch_per_device,dtype,step_ms,images_per_s,efficiency,loss\n1,2,f32,"), csv)
      assert.truthy(csv:find("\n2,2,f32,", 1, true), csv)
      assert.truthy(out:find("2 devices  step", 1, true), out)
    end)

    it("bench/networks.lua checks and times its tf32 row", function()
      -- the script's file names: <network>_b<batch>.onnx and its input and PyTorch's logits
      local net = dir .. "/net"
      os.execute(("mkdir -p %s && cp %s/resnet18.onnx %s/resnet18_b1.onnx"):format(process.quote(net), process.quote(files),
        process.quote(net)))
      for _, what in ipairs({ "in", "out" }) do
        local t = tocha.load_npy(("%s/resnet18_%s1.npy"):format(files, what))
        tocha.save_npy(("%s/resnet18_b1_%s.npy"):format(net, what), t:narrow(1, 1, 1):contiguous())
      end
      bench("networks.lua", { "--out", net, "--launches", "1", "--only", "resnet18 b1 tf32" })
      local csv = read(net .. "/tocha.csv")
      assert.truthy(csv:find("resnet18,1,tf32,", 1, true), csv)
    end)
  end)
end)
