-- bench/tensor_math.lua: tensor math (operators with broadcasting, elementwise functions,
-- comparisons, reductions over all elements and dimensions, softmax, view copies, joins, flips
-- and rolls, running sums, sorts) on network
-- shapes and large tensors: median device time over N launches, GB/s of the bytes read plus
-- written, % of the device's copy bandwidth. Each case's result is checked against the same
-- expression on sim first. bench/tensor_math_torch.py times PyTorch's expression of each case
-- (the `torch` column) on the same shapes and writes the report beside this one's.
--   tocha bench/tensor_math.lua [--out DIR] [--launches N] [--only PATTERN] [--column_teams K] [--row_ctas N]
--   [--column_threads N] [--radix_from N]
-- (--only: the cases whose name matches one of the comma-separated Lua patterns)
local tocha = require "tocha"
local timing = require "bench.timing"

local opts = timing.arguments(arg, { out = "results/tmp-tensor_math", launches = 30, only = "", column_teams = 8,
  row_ctas = 792, column_threads = 262144, radix_from = 256 })
-- --column_teams K: the most row teams of the team columns kernel (1: never planned), for A/B runs
-- --row_ctas N: the most CTAs of a split rows pass; --column_threads N: a split columns pass's
-- threads (tocha.ops.reduction's plan), for A/B runs
local reduction = require "tocha.ops.reduction"
reduction.column_teams, reduction.row_ctas, reduction.column_threads = opts.column_teams, opts.row_ctas,
  opts.column_threads
-- --radix_from N: the shortest row a CTA radix-sorts (longer than N), for A/B runs
require("tocha.tensor_sort").RADIX_FROM = opts.radix_from
os.execute("mkdir -p '" .. opts.out .. "'")
local device = tocha.default_device()
print(("benchmark on %s (%s), %d launches each"):format(device.name, device.product, opts.launches))
local copy_gbps = timing.copy_rate(device)

-- {name, x shape, y shape or false, tocha's call, PyTorch's expression, bytes moved in elements
-- of the dtype as a function of (nx, ny, nout)}.
local function io(nx, ny, nout) return nx + ny + nout end
local BIG, NECK, ROWS = { 32, 160, 72, 72 }, { 16, 256, 80, 80 }, { 8192, 4096 }
local CASES = {
  { "x + y", NECK, NECK, function(x, y) return x + y end, "x + y", io },
  { "x * y[c]", NECK, { 256, 1, 1 }, function(x, y) return x * y end, "x * y", io },
  { "x + 1", BIG, false, function(x) return x + 1 end, "x + 1", io },
  { "exp", BIG, false, function(x) return x:exp() end, "x.exp()", io },
  { "silu", NECK, false, function(x) return x:silu() end, "torch.nn.functional.silu(x)", io },
  { "gt", BIG, false, function(x) return x:gt(0) end, "x.gt(0)", function(nx) return nx + nx / 4 end },
  { "where", NECK, NECK, function(x, y) return tocha.where(x:gt(0), x, y) end, "torch.where(x > 0, x, y)", io },
  { "clamp", BIG, false, function(x) return x:clamp(-1, 1) end, "x.clamp(-1, 1)", io },
  { "sum()", BIG, false, function(x) return x:sum() end, "x.sum()", io },
  { "sum(3)", BIG, false, function(x) return x:sum(3) end, "x.sum(2)", io },
  { "amax(4)", BIG, false, function(x) return x:amax(4) end, "x.amax(3)", io },
  { "mean(1)", NECK, false, function(x) return x:mean(1) end, "x.mean(0)", io },
  { "mean({3,4})", NECK, false, function(x) return x:mean({ 3, 4 }) end, "x.mean((2, 3))", io },
  { "var(2)", ROWS, false, function(x) return x:var(2) end, "x.var(1)", io },
  { "argmax(2)", ROWS, false, function(x) return x:argmax(2) end, "x.argmax(1)", function(nx, _, no) return nx + 2 * no end },
  { "softmax(2)", ROWS, false, function(x) return x:softmax(2) end, "x.softmax(1)", io },
  { "log_softmax(2)", { 65536, 80 }, false, function(x) return x:log_softmax(2) end, "x.log_softmax(1)", io },
  { "narrow contiguous", BIG, false, function(x) return x:narrow(3, 17, 96 > 72 and 40 or 40):contiguous() end,
    "x.narrow(2, 16, 40).contiguous()", function(_, _, no) return 2 * no end },
  { "NCHW->NHWC", BIG, false, function(x) return x:permute(1, 3, 4, 2):contiguous() end,
    "x.permute(0, 2, 3, 1).contiguous()", function(_, _, no) return 2 * no end },
  { "transpose copy", { 6144, 5120 }, false, function(x) return x:t():contiguous() end, "x.t().contiguous()",
    function(_, _, no) return 2 * no end },
  { "narrow channels", BIG, false, function(x) return x:narrow(2, 18, 96):contiguous() end,
    "x.narrow(1, 17, 96).contiguous()", function(_, _, no) return 2 * no end },
  { "narrow last, odd", BIG, false, function(x) return x:narrow(4, 2, 69):contiguous() end,
    "x.narrow(3, 1, 69).contiguous()", function(_, _, no) return 2 * no end },
  { "NHWC->NCHW", { 32, 72, 72, 160 }, false, function(x) return x:permute(1, 4, 2, 3):contiguous() end,
    "x.permute(0, 3, 1, 2).contiguous()", function(_, _, no) return 2 * no end },
  { "global avg pool", { 32, 2048, 7, 7 }, false, function(x) return x:mean({ 3, 4 }) end, "x.mean((2, 3))", io },
  { "softmax 1000", { 8192, 1000 }, false, function(x) return x:softmax(2) end, "x.softmax(1)", io },
  { "softmax 80", { 65536, 80 }, false, function(x) return x:softmax(2) end, "x.softmax(1)", io },
  { "argmax 32000", { 512, 32000 }, false, function(x) return x:argmax(2) end, "x.argmax(1)",
    function(nx, _, no) return nx + 2 * no end },
  { "x + y[c], rows", { 8192, 768 }, { 768 }, function(x, y) return x + y end, "x + y", io },
  { "cat 3 along C", NECK, NECK, function(x, y) return tocha.cat({ x, y, x }, 2) end, "torch.cat((x, y, x), 1)",
    function(nx, ny, no) return 2 * nx + ny + no end },
  { "stack 2", NECK, NECK, function(x, y) return tocha.stack({ x, y }) end, "torch.stack((x, y))", io },
  { "flip W", BIG, false, function(x) return x:flip(4) end, "x.flip(3)", io },
  { "roll H", BIG, false, function(x) return x:roll(5, 3) end, "x.roll(5, 2)", io },
  { "cumsum rows", ROWS, false, function(x) return x:cumsum(2) end, "x.cumsum(1)", io },
  { "cumsum columns", ROWS, false, function(x) return x:cumsum(1) end, "x.cumsum(0)", io },
  -- long rows, few of them (top-p sampling over a vocabulary; a flattened tensor): in chunks
  { "cumsum 32 rows of 50257", { 32, 50257 }, false, function(x) return x:cumsum(2) end, "x.cumsum(1)", io },
  { "cumsum one row 2^24", { 1, 16777216 }, false, function(x) return x:cumsum(2) end, "x.cumsum(1)", io },
  { "logsumexp(2)", ROWS, false, function(x) return x:logsumexp(2) end, "x.logsumexp(1)", io },
  { "norm(2)", ROWS, false, function(x) return x:norm(2, 2) end, "x.norm(2, 1)", io },
  -- sorts: the indices are the result timed (i64); the values are written too
  { "sort 1000", { 8192, 1000 }, false, function(x) local _, i = x:sort(2) return i end, "x.sort(1)",
    function(nx, _, no) return 2 * nx + no end },
  { "argsort 8400 desc", { 16, 8400 }, false, function(x) return x:argsort(2, true) end,
    "x.argsort(1, descending=True)", function(nx, _, no) return 2 * nx + no end },
  { "sort 80", { 65536, 80 }, false, function(x) local _, i = x:sort(2) return i end, "x.sort(1)",
    function(nx, _, no) return 2 * nx + no end },
  { "sort 300", { 16384, 300 }, false, function(x) local _, i = x:sort(2) return i end, "x.sort(1)",
    function(nx, _, no) return 2 * nx + no end },
  { "sort 4096", { 2048, 4096 }, false, function(x) local _, i = x:sort(2) return i end, "x.sort(1)",
    function(nx, _, no) return 2 * nx + no end },
  { "sort 32000", { 64, 32000 }, false, function(x) local _, i = x:sort(2) return i end, "x.sort(1)",
    function(nx, _, no) return 2 * nx + no end },
  -- one long row (a flattened tensor's sort, a median): the radix sort across CTAs, every tile of
  -- the row in one offsets CTA
  { "sort 2^20 one row", { 1, 1048576 }, false, function(x) local _, i = x:sort(2) return i end, "x.sort(1)",
    function(nx, _, no) return 2 * nx + no end },
  { "sort 2^24 one row", { 1, 16777216 }, false, function(x) local _, i = x:sort(2) return i end, "x.sort(1)",
    function(nx, _, no) return 2 * nx + no end },
  { "topk 300 of 8400", { 16, 8400 }, false, function(x) local _, i = x:topk(math.min(300, x:size(2)), 2) return i end, "x.topk(300, 1)",
    function(nx, _, no) return nx + 2 * no end },
  { "topk 5 of 1000", { 8192, 1000 }, false, function(x) local _, i = x:topk(5, 2) return i end, "x.topk(5, 1)",
    function(nx, _, no) return nx + 2 * no end },
}
if device.kind == "sim" then
  for _, c in ipairs(CASES) do
    local small = {}
    for i, s in ipairs(c[2]) do small[i] = math.min(s, 7) end
    c[2] = small
    if c[3] then
      local sy = {}
      for i, s in ipairs(c[3]) do sy[i] = math.min(s, 7) end
      c[3] = sy
    end
  end
  -- the narrows within the shrunken shapes
  local small_narrow = { ["narrow contiguous"] = { 3, 2, 3 }, ["narrow channels"] = { 2, 2, 4 },
    ["narrow last, odd"] = { 4, 2, 5 } }
  for _, c in ipairs(CASES) do
    local a = small_narrow[c[1]]
    if a then c[4] = function(x) return x:narrow(a[1], a[2], a[3]):contiguous() end end
  end
end
-- The dimension each narrow case narrows keeps its full size in the check against sim.
local FULL_DIM = { ["narrow contiguous"] = 3, ["narrow channels"] = 2, ["narrow last, odd"] = 4 }
local DTYPES = { "f32", "bf16" }

local numel = timing.numel

local rows = {}
for _, dt in ipairs(DTYPES) do
  for _, case in ipairs(CASES) do
    if not timing.selected(case[1], opts.only) then goto next_case end
    local name, sx, sy, call, torch_expr, bytes_of = case[1], case[2], case[3], case[4], case[5], case[6]
    -- checked against sim on a small version of the shape
    local small_x, small_y = {}, {}
    for i, s in ipairs(sx) do small_x[i] = math.min(s, 9) end
    if sy then for i, s in ipairs(sy) do small_y[i] = math.min(s, 9) end end
    if FULL_DIM[name] then small_x[FULL_DIM[name]] = sx[FULL_DIM[name]] end
    local xs = tocha.randn(small_x, { dtype = dt, device = "sim", seed = 1 })
    local ys = sy and tocha.randn(small_y, { dtype = dt, device = "sim", seed = 2 }) or nil
    local want = call(xs, ys)
    local got = call(xs:to(device.name), ys and ys:to(device.name))
    local r = tocha.compare(got:to("sim"):cast("f64"), want:cast("f64"), { rtol = 1e-2, atol = 1e-2 })
    if not r.ok then error(("%s %s: %d elements differ from sim's"):format(name, dt, r.mismatched)) end

    local sets = {}
    for s = 1, 2 do
      sets[s] = { x = tocha.randn(sx, { dtype = dt, device = device, seed = s }),
        y = sy and tocha.randn(sy, { dtype = dt, device = device, seed = s + 10 }) or nil }
    end
    local out = call(sets[1].x, sets[1].y)
    local size = dt == "f32" and 4 or 2
    local nout = out:numel() * (out:dtype() == "i64" and 8 / size or (out:dtype() == "u8" and 1 / size or 1))
    local bytes = bytes_of(numel(sx), sy and numel(sy) or 0, nout) * size
    out:free()
    local ms = timing.time_launches(device, function(k)
      local s = sets[k % 2 + 1]
      local y = call(s.x, s.y)
      y:free()
    end, opts.launches)
    local gbps = bytes / (ms * 1e6)
    local row = { name = name, dtype = dt, x = table.concat(sx, "x"), y = sy and table.concat(sy, "x") or "",
      torch = torch_expr, bytes = bytes, ms = ms, gbps = gbps, pct_copy = 100 * gbps / copy_gbps }
    rows[#rows + 1] = row
    print(("%-18s %-5s %-16s %9.4f ms %8.1f GB/s %6.1f%% of copy"):format(name, dt, row.x, ms, gbps, row.pct_copy))
    for s = 1, 2 do for _, t in pairs(sets[s]) do t:free() end end
    ::next_case::
  end
end

timing.write_csv(opts.out .. "/tocha.csv", { "name", "dtype", "x", "y", "torch", "bytes", "ms", "gbps", "pct_copy" }, rows)
print("wrote " .. opts.out .. "/tocha.csv")
