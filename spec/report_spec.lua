-- bench/report.py on a made-up run: each case against its targets, worked out by hand from the
-- report's definitions: x PyTorch (PyTorch's median time over tocha's) >= 1; cases of >= 64 MB
-- at >= 85% of copy, >= 90% for the rows suite at W = 1024; smaller cases in <= 1.3 x
-- max(launch floor, bytes / copy); with a baseline, rows cases within a point of it; within 1%
-- of a target, noise. Beside each case, the % of copy that a copy of the same bytes reached.
local process = require "support.process"

local src = assert(os.getenv("TOCHA_SOURCE_DIR"), "TOCHA_SOURCE_DIR is set by CTest")

local MB = 2 ^ 20
-- suite, name, op, dtype, layout, W, C, bytes, tocha ms, tocha % of copy, torch ms, torch % of copy,
-- the same bytes' copy in ms ("" where the run did not time one)
local CASES = {
  { "rows", "2x2 W=1024", "forward", "f32", "nchw", 1024, 16, 512 * MB, 0.130, 93.0, 0.260, 46.5, "0.1400" }, -- meets all
  { "rows", "2x2 W=1023", "forward", "u8", "nchw", 1023, 16, 512 * MB, 0.150, 84.0, 0.900, 14.0, "0.1400" }, -- under 85
  { "rows", "3x3 W=1024", "forward", "f16", "nchw", 1024, 16, 512 * MB, 0.140, 89.5, 0.400, 25.0, "0.1400" }, -- 89.5: noise
  { "rows", "4x4 W=1024", "forward", "f32", "nchw", 1024, 16, 512 * MB, 0.140, 88.0, 0.400, 30.0, "0.1400" }, -- 88 < 90
  { "shapes", "neck 640 P5 b16", "forward", "f16", "nhwc", 20, 512, 40 * MB, 0.0200, 47.0, 0.0180, 52.0, "0.0140" }, -- slower
  { "shapes", "map 7x7 b32", "backward", "f32", "nchw", 7, 2048, 16 * MB, 0.0100, 40.0, 0.0300, 13.0, "" }, -- 10 us
  { "sweep", "W=3", "forward", "bf16", "nchw", 3, 1, 256 * MB, 0.0700, 86.0, 0.2100, 28.0, "0.0700" }, -- meets all
  { "sweep", "C=3", "backward", "bf16", "nhwc", 32, 3, 256 * MB, 0.0800, 75.0, 0.0797, 75.3, "0.0700" }, -- 0.996x: noise
}

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local HEADER = "impl,suite,name,op,dtype,layout,B,C,H,W,scale_h,scale_w,block,bytes,median_ms,gbps,pct_copy,copy_gbps"

local function made_up_run(dir)
  local ours, theirs = { HEADER .. ",mix_floor_pct_copy,same_copy_ms" }, { HEADER }
  for _, c in ipairs(CASES) do
    local head = ("%s,%s,%s,%s,%s,8,%d,32,%d,2,2"):format(c[1], c[2], c[3], c[4], c[5], c[7], c[6])
    ours[#ours + 1] = ("tocha,%s,128,%d,%.4f,3600,%.2f,4000,101,%s"):format(head, c[8], c[9], c[10], c[13])
    theirs[#theirs + 1] = ("torch,%s,0,%d,%.4f,1800,%.2f,4000"):format(head, c[8], c[11], c[12])
  end
  write(dir .. "/tocha.csv", table.concat(ours, "\n") .. "\n")
  write(dir .. "/torch.csv", table.concat(theirs, "\n") .. "\n")
  -- copy 4000 GB/s (so 16 MB takes 4.19 us), launch floor 5 us
  write(dir .. "/host.csv", "measure,value\ncopy_gbps,4000\nlaunch_floor_us,5\nwrite_only_pct_copy,101.5\n" ..
    "read_only_pct_copy,103\nforward_call_us,4.5\nforward_alloc_call_host_us,5\nchain_graph_launch_us,1.25\n" ..
    "cold_build_ms,300\n")
  -- PyTorch's host measures: its version (not a number) and two of tocha's measures
  write(dir .. "/torch_host.csv", "measure,value\ntorch_version,2.11.0\nforward_alloc_call_host_us,11.2\n" ..
    "chain_graph_launch_us,2.5\n")
end

-- Runs bench/report.py on dir (with extra arguments) and returns its report.md; the run must succeed.
local function run_report(dir, extra)
  local cmd = ("python3 %s/bench/report.py %s %s > %s/out.txt 2>&1"):format(process.quote(src), process.quote(dir),
    extra or "", process.quote(dir))
  local ok = os.execute(cmd)
  local out = assert(io.open(dir .. "/out.txt")):read("*a")
  assert(ok == 0 or ok == true, "report.py failed: " .. out)
  return assert(io.open(dir .. "/report.md")):read("*a")
end

-- Asserts that text holds line, word for word.
local function has(text, line) assert.truthy(text:find(line, 1, true), line .. "\n" .. text) end

describe("bench/report.py", function()
  local dir, report, png

  setup(function()
    dir = process.tempdir()
    made_up_run(dir)
    report = run_report(dir)
    png = assert(io.open(dir .. "/plot.png", "rb")):read("*a")
  end)

  teardown(function() process.remove_tree(dir) end)

  it("counts each suite's cases, those meeting every target, and those slower than PyTorch", function()
    has(report, "| rows | 4 | 2 | 0 |") -- 2x2 W=1024 met, 3x3 W=1024 noise
    has(report, "| shapes | 2 | 0 | 1 |")
    has(report, "| sweep | 2 | 1 | 0 |") -- C=3: 0.996x is noise, 75% of copy short
    has(report, "launch floor (an empty kernel, launch to completion): 5.00 us")
  end)

  it("marks each case against its targets", function()
    -- the same bytes' copy: 512 MB in 0.14 ms is 3834.8 GB/s, 95.9% of 4000
    has(report, "| forward f32 nchw 2x2 W=1024 | 8x16x32x1024 | 512.0 | 128 | 130.0 | 93.0 | 95.9 | 260.0 | 46.5 | 2.00 | met |")
    has(report, "| forward u8 nchw 2x2 W=1023 | 8x16x32x1023 | 512.0 | 128 | 150.0 | 84.0 | 95.9 | 900.0 | 14.0 | 6.00 | "
      .. "% of copy 84.00 (target 85.00): short |")
    has(report, "| forward f16 nchw 3x3 W=1024 | 8x16x32x1024 | 512.0 | 128 | 140.0 | 89.5 | 95.9 | 400.0 | 25.0 | 2.86 | "
      .. "% of copy 89.50 (target 90.00): noise |")
    has(report, "% of copy 88.00 (target 90.00): short")
    -- 40 MB is small: 1.3 x max(5 us, 40 MB / 4000 GB/s = 10.49 us) = 13.63 us, against 20 us
    has(report, "x PyTorch 0.90 (target 1.00): short, us 20.00 (target 13.63): short")
    -- 16 MB: 1.3 x max(5, 4.19) = 6.50 us, against 10 us; no copy of the same bytes timed
    has(report, "| backward f32 nchw map 7x7 b32 | 8x2048x32x7 | 16.0 | 128 | 10.0 | 40.0 | - | 30.0 | 13.0 | 3.00 | "
      .. "us 10.00 (target 6.50): short |")
    -- 256 MB in 0.07 ms: 3834.8 GB/s again
    has(report, "| backward bf16 nhwc C=3 | 8x3x32x32 | 256.0 | 128 | 80.0 | 75.0 | 95.9 | 79.7 | 75.3 | 1.00 | "
      .. "x PyTorch 1.00 (target 1.00): noise, % of copy 75.00 (target 85.00): short |")
  end)

  it("lists the cases short of a target, and leaves out the noise", function()
    local short = report:match("## Short of a target\n(.-)\n\n")
    assert.truthy(short, report)
    local _, n = short:gsub("\n%- ", "")
    assert.are.equal(5, n) -- u8 W=1023, f32 4x4, the neck, the 7x7 map, C=3
    assert.falsy(short:find("3x3 W=1024", 1, true))
    has(short, "- sweep backward bf16 nhwc C=3: ")
    -- 40 MB in 0.014 ms: 2995.9 GB/s, 74.9% of copy
    has(short, "us 20.00 (target 13.63): short; a copy of the same bytes: 74.9% of copy")
  end)

  it("compares the rows suite with a baseline run, a point of copy allowed", function()
    local base = process.tempdir()
    -- an earlier run's format (no suite, name or layout): 2x2 W=1024 at 95.0 (now 93.0, 2 lost)
    -- and 4x4 at 88.5 (now 88.0: within the point)
    write(base .. "/tocha.csv", "impl,op,dtype,B,C,H,W,scale_h,scale_w,block,bytes,median_ms,gbps,pct_copy,copy_gbps\n"
      .. "tocha,forward,f32,8,16,32,1024,2,2,64,1,1,1,95.0,4000\n"
      .. "tocha,forward,f32,8,16,32,1024,4,4,64,1,1,1,88.5,4000\n")
    local text = run_report(dir, "--baseline " .. process.quote(base))
    process.remove_tree(base)
    has(text, "| forward f32 nchw 2x2 W=1024 | 8x16x32x1024 | 512.0 | 128 | 130.0 | 93.0 | 95.9 | 260.0 | 46.5 | 2.00 | "
      .. "% of copy vs baseline 93.00 (target 94.00): short |")
    has(text, "| forward f32 nchw 4x4 W=1024 | 8x16x32x1024 | 512.0 | 128 | 140.0 | 88.0 | 95.9 | 400.0 | 30.0 | 2.86 | "
      .. "% of copy 88.00 (target 90.00): short |")
  end)

  it("tables the host measures and draws the plot", function()
    has(report, "| one small forward call from Lua (1x16x32x32), us | 4.50 | - |")
    has(report, "| the same with a new output each call, host side only, us | 5.00 | 11.20 |")
    has(report, "| the chain replayed as a graph: us per launch | 1.25 | 2.50 |")
    has(report, "| cold kernel build to first launch, ms | 300.00 | - |")
    assert.are.equal("\137PNG\r\n\26\n", png:sub(1, 8))
    assert.is_true(#png > 1000)
  end)
end)
