-- bench/upsample.lua: times tocha's nearest-upsample kernels on the default device.
--
--   tocha bench/upsample.lua [--out DIR] [--suite rows|shapes|sweep]... [--quick] [--blocks]
--                            [--launches N] [--only PATTERN]
--
-- The suites are bench/cases.lua's (all three unless --suite names some). First the
-- device-to-device copy bandwidth and the launch floor (an empty kernel's launch to completion,
-- timed as the cases are), both measured in this run; then each case is checked against a
-- reference (a plain one-thread-per-element kernel of its layout, compared on the device
-- element for element) and only then timed: the median of device-event times over N launches
-- (default 50) after a warm-up, with two input/output sets in turn so that the L2 cache holds
-- a launch's input only where both sets fit in it. Effective bandwidth = (input bytes + output
-- bytes) / median time.
-- Writes DIR/tocha.csv (the cases' times, each beside a device copy that moves the same bytes,
-- timed the same way), DIR/cases.csv (for bench/upsample_torch.py) and
-- DIR/host.csv (copy and stream bandwidths, the launch floor, the host cost of a small launch
-- with its host part alone, with a new output each call, and the driver's own cost of the same
-- launch on cuda (bench/launch_floor.lua); a chain of 100 such launches called one by one and
-- replayed as a graph; cold and warm build times).
-- --blocks times every block width for each case, with a progress bar on a terminal.
-- --only keeps the cases whose label ("shapes forward f16 nhwc neck 640 P5 b16") matches a Lua
-- pattern.
local tocha = require "tocha"
local cases = require "bench.cases"

local opts = { out = "results/tmp", launches = 50 }
local i = 1
while i <= #arg do
  local a = arg[i]
  if a == "--out" then opts.out = arg[i + 1]; i = i + 1
  elseif a == "--quick" then opts.quick = true
  elseif a == "--blocks" then opts.blocks = true
  elseif a == "--suite" then
    opts.suites = opts.suites or {}
    opts.suites[#opts.suites + 1] = arg[i + 1]; i = i + 1
  elseif a == "--launches" then opts.launches = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--only" then opts.only = arg[i + 1]; i = i + 1
  else error("unknown argument " .. a) end
  i = i + 1
end
os.execute("mkdir -p '" .. opts.out .. "'")

local device = tocha.default_device()
local is_tty = os.getenv("TERM") and os.execute("test -t 2") == 0


local timing = require "bench.timing"
local function now_ms() return timing.now_us() / 1e3 end
local function time_launches(fn, n) return timing.time_launches(device, fn, n) end
local function copy_bandwidth() return timing.copy_bandwidth(device) end

-- Pure streams, for the floor of a read/write mix: 16-byte stores only, and 16-byte loads
-- only (summed into one word per thread so that nothing is optimised away).
local STREAMS = [[
__device__ void write_stream(int *p, long long n16, unsigned v)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n16; i += (long long)blockDim.x * gridDim.x) {
        tocha::pack16<int> q;
        q.set(0, (int)v); q.set(1, (int)v); q.set(2, (int)v); q.set(3, (int)v);
        tocha::store_pack(p + 4 * i, q);
    }
}
__device__ void write_stream_cs(int *p, long long n16, unsigned v)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n16; i += (long long)blockDim.x * gridDim.x) {
#ifdef TOCHA_SIM
        int q[4] = {(int)v, (int)v, (int)v, (int)v};
        memcpy(p + 4 * i, q, 16);
#else
        asm volatile("st.global.cs.v4.u32 [%0], {%1, %1, %1, %1};" ::"l"(p + 4 * i), "r"(v) : "memory");
#endif
    }
}
__device__ void read_stream(const int *p, int *out, long long n16)
{
    unsigned acc = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n16; i += (long long)blockDim.x * gridDim.x) {
        unsigned w[4];
        tocha::load16(p + 4 * i, w);
        acc ^= w[0] ^ w[1] ^ w[2] ^ w[3];
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = (int)acc;
}
]]

-- Write-only and read-only bandwidth (GB/s) over 1 GiB, by the kernels above.
local function stream_bandwidths()
  local n = 256 * 2 ^ 20
  local buf = tocha.empty({ n }, { dtype = "i32", device = device }):fill(1)
  local sink = tocha.empty({ 1024 * 1024 }, { dtype = "i32", device = device })
  local write = tocha.kernel { source = STREAMS, name = "write_stream", params = "i32* p, i64 n16, u32 v" }
  local read = tocha.kernel { source = STREAMS, name = "read_stream", params = "i32* p, i32* out, i64 n16" }
  local blocks = device.kind == "sim" and 8 or 4096
  local wms = time_launches(function() write:launch(blocks, 256, buf, n / 4, 7) end, 20)
  local rms = time_launches(function() read:launch(blocks, 256, buf, sink, n / 4) end, 20)
  local write_cs = tocha.kernel { source = STREAMS, name = "write_stream_cs", params = "i32* p, i64 n16, u32 v" }
  local cms = time_launches(function() write_cs:launch(blocks, 256, buf, n / 4, 7) end, 20)
  print(("write-only with st.global.cs: %.1f GB/s"):format(n * 4 / (cms * 1e6)))
  buf:free(); sink:free()
  return n * 4 / (wms * 1e6), n * 4 / (rms * 1e6)
end

-- Plain mappings, as independent reference kernels: one thread per element, in each layout
-- (NHWC: the pixel's channels last).
local REFERENCE = [[
template <typename D, int SH, int SW, bool NHWC>
__device__ void reference_forward(const D *x, D *y, long long B, int C, int H, int W)
{
    const long long OH = (long long)H * SH, OW = (long long)W * SW, n = B * C * OH * OW;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < n; j += (long long)blockDim.x * gridDim.x) {
        if (NHWC) {
            const long long c = j % C, ow = j / C % OW, oh = j / C / OW % OH, b = j / C / OW / OH;
            y[j] = x[((b * H + oh / SH) * W + ow / SW) * C + c];
        } else {
            const long long ow = j % OW, oh = j / OW % OH, p = j / (OW * OH);
            y[j] = x[(p * H + oh / SH) * W + ow / SW];
        }
    }
}
template <typename D, int SH, int SW, bool NHWC>
__device__ void reference_backward(const D *dy, D *dx, long long B, int C, int H, int W)
{
    typedef typename tocha::accumulator<D>::type A;
    const long long OH = (long long)H * SH, OW = (long long)W * SW, n = B * C * H * W;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < n; j += (long long)blockDim.x * gridDim.x) {
        A s = A(0);
        for (int a = 0; a < SH; ++a)
            for (int b = 0; b < SW; ++b) {
                long long at;
                if (NHWC) {
                    const long long c = j % C, iw = j / C % W, ih = j / C / W % H, bb = j / C / W / H;
                    at = ((bb * OH + ih * SH + a) * OW + iw * SW + b) * C + c;
                } else {
                    const long long iw = j % W, ih = j / W % H, p = j / ((long long)W * H);
                    at = (p * OH + ih * SH + a) * OW + iw * SW + b;
                }
                s += tocha::widen<A>(dy[at]);
            }
        dx[j] = tocha::narrow<D>(s);
    }
}
]]
local CTYPES = { f32 = "float", f16 = "__half", bf16 = "__nv_bfloat16", u8 = "unsigned char" }
local function reference(op, c)
  return tocha.kernel { source = REFERENCE, name = "reference_" .. op,
    template_args = ("%s, %d, %d, %s"):format(CTYPES[c.dtype], c.sh, c.sw, tostring(c.layout == "nhwc")),
    params = ("%s* a, %s* b, i64 B, i32 C, i32 H, i32 W"):format(c.dtype, c.dtype) }
end

local function check(c, k, expect, got)
  local r = tocha.compare(got, expect, { rtol = 0, atol = 0 })
  if not r.ok then
    error(("%s %s %s: %d elements differ from the reference (first at %d)"):format(c.op, c.dtype,
      k.id, r.mismatched, r.first_mismatch))
  end
end

-- A device-to-device copy that moves a case's bytes (half read, half written), timed as the
-- cases are, two buffer pairs in turn: what a kernel of that size can reach at best, fixed
-- costs (the launch, the ramp up and the tail of the grid) included.
local same_copy_cache = {}
local function same_copy_ms(bytes)
  if same_copy_cache[bytes] then return same_copy_cache[bytes] end
  local n = math.max(16, math.floor(bytes / 2 / 16) * 16)
  local pairs_ = {}
  for s = 1, 2 do
    pairs_[s] = { src = tocha.empty({ n }, { dtype = "u8", device = device }):fill(s),
      dst = tocha.empty({ n }, { dtype = "u8", device = device }) }
  end
  local ms = time_launches(function(k) local p = pairs_[k % 2 + 1]; p.dst:copy(p.src) end, opts.launches)
  for s = 1, 2 do pairs_[s].src:free(); pairs_[s].dst:free() end
  same_copy_cache[bytes] = ms * bytes / (2 * n)
  return same_copy_cache[bytes]
end

local function run_case(c, block, rows)
  local B, C, H, W = unpack(c.shape)
  local in_shape, out_shape = cases.tensor_shapes(c)
  local input_shape = c.op == "forward" and in_shape or out_shape
  local output_shape = c.op == "forward" and out_shape or in_shape
  local up = tocha.UpsampleNearest2dForward.new(c.sh, c.sw, block, c.dtype, block, { layout = c.layout })
  local sets = {}
  for s = 1, 2 do
    local lo, hi = -8, 8
    if c.dtype == "u8" then lo, hi = 0, 256 end
    sets[s] = { input = tocha.rand(input_shape, { dtype = c.dtype, device = device, seed = s, low = lo, high = hi }),
      output = tocha.empty(output_shape, { dtype = c.dtype, device = device }) }
  end
  local launch
  if c.op == "forward" then
    launch = function(k) local s = sets[k % 2 + 1]; up:forward(s.input, s.output) end
  else
    launch = function(k) local s = sets[k % 2 + 1]; up:backward(s.output, s.input, s.output) end
  end
  -- Check before timing: poison, run, compare with the reference kernel.
  local expect = tocha.empty(output_shape, { dtype = c.dtype, device = device })
  local ref = reference(c.op, c)
  ref:launch(1024, 256, sets[2].input, expect, B, C, H, W) -- launch(1) uses set 2
  sets[2].output:fill(77)
  launch(1)
  check(c, up, expect, sets[2].output)
  expect:free()
  local ms = time_launches(launch, opts.launches)
  local gbps = c.bytes / (ms * 1e6)
  for s = 1, 2 do sets[s].input:free(); sets[s].output:free() end
  rows[#rows + 1] = { "tocha", c.suite, c.name, c.op, c.dtype, c.layout, B, C, H, W, c.sh, c.sw, block, c.bytes, ms, gbps,
    same_copy_ms = same_copy_ms(c.bytes) }
  return ms, gbps
end

-- An empty kernel's launch to completion, timed as the cases are: the floor of a small case.
local function launch_floor_ms()
  local empty = tocha.kernel { source = "__device__ void empty_kernel(int n) { (void)n; }", name = "empty_kernel",
    params = "i32 n" }
  return time_launches(function() empty:launch(1, 32, 0) end, 200)
end

local function progress(done, total, label)
  if not is_tty then return end
  local width = 30
  local filled = math.floor(width * done / total)
  io.stderr:write(("\r[%s%s] %d/%d %s\27[K"):format(("#"):rep(filled), ("."):rep(width - filled),
    done, total, label))
  if done == total then io.stderr:write("\n") end
end

local function write_csv(path, header, rows)
  local f = assert(io.open(path, "w"))
  f:write(table.concat(header, ","), "\n")
  for _, r in ipairs(rows) do
    local cells = {}
    for k, v in ipairs(r) do
      if type(v) ~= "number" then cells[k] = tostring(v)
      elseif v == math.floor(v) then cells[k] = ("%d"):format(v)
      else cells[k] = ("%.6g"):format(v) end
    end
    f:write(table.concat(cells, ","), "\n")
  end
  f:close()
end

-- ---- the run ----

local function label(c) return ("%s %s %s %s %s"):format(c.suite, c.op, c.dtype, c.layout, c.name) end
local sim = device.kind == "sim"
local list = cases.list { suites = opts.suites, quick = opts.quick, target_bytes = sim and 2 ^ 20 or nil,
  shape_scale = sim and 64 or nil }
if opts.only then
  local kept = {}
  for _, c in ipairs(list) do if label(c):find(opts.only) then kept[#kept + 1] = c end end
  list = kept
end
if sim then opts.launches = math.min(opts.launches, 3) end
print(("benchmark on %s (%s), %d cases, %d launches each"):format(device.name, device.product, #list, opts.launches))
local copy_gbps = copy_bandwidth()
print(("device-to-device copy: %.1f GB/s (read + written)"):format(copy_gbps))
local write_gbps, read_gbps = stream_bandwidths()
print(("16-byte streams: write-only %.1f GB/s (%.1f%% of copy), read-only %.1f GB/s (%.1f%% of copy)")
  :format(write_gbps, 100 * write_gbps / copy_gbps, read_gbps, 100 * read_gbps / copy_gbps))
local floor_ms = launch_floor_ms()
print(("launch floor (an empty kernel, launch to completion): %.2f us"):format(floor_ms * 1e3))

local case_rows = {}
for k, c in ipairs(list) do
  case_rows[k] = { c.suite, c.name, c.op, c.dtype, c.layout, c.shape[1], c.shape[2], c.shape[3], c.shape[4],
    c.sh, c.sw, c.bytes }
end
write_csv(opts.out .. "/cases.csv", cases.case_columns, case_rows)

local rows = {}
local blocks = opts.blocks and { 32, 64, 128, 256, 512, 1024 } or { false } -- false: the default
local total, done = #list * #blocks, 0
for _, c in ipairs(list) do
  for b = 1, #blocks do
    local block = blocks[b] or tocha.UpsampleNearest2dForward.default_block()
    local ms, gbps = run_case(c, block, rows)
    done = done + 1
    progress(done, total, label(c))
    if not is_tty or not opts.blocks then
      print(("%-40s block %-4d %9.4f ms %7.1f GB/s %5.1f%% of copy"):format(label(c), block, ms, gbps,
        100 * gbps / copy_gbps))
    end
  end
end
-- The floor of each case's mix: its input at the read-only rate, its output at the write-only
-- rate, as % of copy. Columns by name (cases.columns).
local at = {}
for k, v in ipairs(cases.columns) do at[v] = k end
for _, r in ipairs(rows) do
  local scale, bytes = r[at.scale_h] * r[at.scale_w], r[at.bytes]
  local in_bytes, out_bytes
  if r[at.op] == "forward" then in_bytes, out_bytes = bytes / (1 + scale), bytes * scale / (1 + scale)
  else in_bytes, out_bytes = bytes * scale / (1 + scale), bytes / (1 + scale) end
  local mix_gbps = bytes / (in_bytes / read_gbps + out_bytes / write_gbps)
  r[#r + 1] = 100 * r[at.gbps] / copy_gbps
  r[#r + 1] = copy_gbps
  r[#r + 1] = 100 * mix_gbps / copy_gbps
  r[#r + 1] = r.same_copy_ms
end
local columns = {}
for k, v in ipairs(cases.columns) do columns[k] = v end
columns[#columns + 1] = "mix_floor_pct_copy"
columns[#columns + 1] = "same_copy_ms"
write_csv(opts.out .. "/tocha.csv", columns, rows)

-- ---- host costs ----
local host = { { "copy_gbps", copy_gbps }, { "launch_floor_us", floor_ms * 1e3 },
  { "write_only_pct_copy", 100 * write_gbps / copy_gbps }, { "read_only_pct_copy", 100 * read_gbps / copy_gbps } }
do -- one small forward call from Lua: 20,000 calls, synchronized once
  local up = tocha.UpsampleNearest2dForward.new(2, 2, 128)
  local x = tocha.rand({ 1, 16, 32, 32 }, { device = device, seed = 1 })
  local y = up:forward(x)
  tocha.synchronize(device)
  local n = 20000
  local t0 = now_ms()
  for _ = 1, n do up:forward(x, y) end
  tocha.synchronize(device)
  host[#host + 1] = { "forward_call_us", (now_ms() - t0) * 1e3 / n }
  -- The host's part alone: batches of 250 calls, each timed and then drained, so that the
  -- launch queue never fills and no call waits for the GPU. Beside it, the driver's own cost
  -- of the same launch (an empty kernel of the same parameters, straight through libcuda).
  local function us_per_call(call, sync) return timing.host_us_per_call(call, sync, n) end
  local function sync() tocha.synchronize(device) end
  host[#host + 1] = { "forward_call_host_us", us_per_call(function() up:forward(x, y) end, sync) }
  -- The same call as scripts write it, a new output each time (dropped: the collector and the
  -- cache of freed blocks at work).
  host[#host + 1] = { "forward_alloc_call_host_us", us_per_call(function() up:forward(x) end, sync) }
  -- A chain of 100 of these launches, one call at a time and replayed as a captured graph:
  -- wall time per launch, each round of 100 drained.
  local chain = 100
  local function per_launch(round)
    local rounds = 50
    round()
    sync()
    local t1 = now_ms()
    for _ = 1, rounds do round() sync() end
    return (now_ms() - t1) * 1e3 / (rounds * chain)
  end
  host[#host + 1] = { "chain_direct_launch_us", per_launch(function() for _ = 1, chain do up:forward(x, y) end end) }
  local g = tocha.graph(function() for _ = 1, chain do up:forward(x, y) end end, device.name)
  host[#host + 1] = { "chain_graph_launch_us", per_launch(function() g:replay() end) }
  if device.kind == "cuda" then
    local launch, driver_sync, close = require("bench.launch_floor").empty_launch()
    if launch then
      host[#host + 1] = { "driver_launch_us", us_per_call(launch, driver_sync) }
      close()
    else
      io.stderr:write("launch floor not measured: ", driver_sync, "\n")
    end
  end
end
do -- builds: cold (no cache) and warm (disk cache) to the first launch, each in a fresh process
  local script = [[
    local tocha = require "tocha"
    local ffi = require "ffi"
    ffi.cdef "struct bench_ts { long s; long ns; }; int clock_gettime(int clk, struct bench_ts *ts);"
    local ts = ffi.new("struct bench_ts")
    local function now() ffi.C.clock_gettime(1, ts) return tonumber(ts.s) * 1e3 + tonumber(ts.ns) / 1e6 end
    local x = tocha.ones({ 1, 1, 8, 8 })
    tocha.synchronize()
    local t0 = now()
    local up = tocha.UpsampleNearest2dForward.new(2, 2, 96)
    up:forward(x)
    tocha.synchronize()
    io.write(now() - t0)
  ]]
  local exe = arg[-1] or "tocha"
  local dir = os.tmpname()
  os.remove(dir)
  local function run(env)
    local p = io.popen(env .. " '" .. exe .. "' -e '" .. script:gsub("'", "'\\''") .. "'")
    local out = p:read("*a")
    p:close()
    return tonumber(out)
  end
  host[#host + 1] = { "cold_build_ms", run("TOCHA_CACHE_DIR=" .. dir) }
  host[#host + 1] = { "warm_first_launch_ms", run("TOCHA_CACHE_DIR=" .. dir) }
  os.execute("rm -rf '" .. dir .. "'")
end
write_csv(opts.out .. "/host.csv", { "measure", "value" }, host)
for _, h in ipairs(host) do print(("%-28s %.3f"):format(h[1], h[2])) end
print("wrote " .. opts.out .. "/tocha.csv, cases.csv, host.csv")
