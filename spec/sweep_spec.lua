-- tocha.sweep on sim: a two-axis sweep of two cases written as Markdown, CSV, a gnuplot script
-- and a plot, with the rows and columns the grid and the measures give; the simulator's figures
-- called CPU times, without % of copy; a reference joined on the axes; a spent budget that
-- runs nothing and says which points; every refusal named.
local tocha = require "tocha"
local process = require "support.process"
local fails_with = require("support.assertions").fails_with

local SCALE = [[
template <int B>
__device__ void scale(const float *x, float *y, int n)
{
    const int i = blockIdx.x * B + threadIdx.x;
    if (i < n) y[i] = 3.0f * x[i];
}]]

local function kernel(b)
  return tocha.kernel { source = SCALE, name = "scale", template_args = tostring(b), params = "f32* x, f32* y, i32 n" }
end

local function spec(out, extra)
  local k64, k128 = kernel(64), kernel(128)
  local s = {
    name = "scale",
    device = "sim",
    axes = { { "n", { 1000, 4000 } }, { "copies", { 1, 2 } } },
    cases = {
      b64 = function(p, st) for _ = 1, p.copies do k64:launch(math.ceil(p.n / 64), 64, st.x, st.y, p.n) end end,
      b128 = function(p, st) for _ = 1, p.copies do k128:launch(math.ceil(p.n / 128), 128, st.x, st.y, p.n) end end,
    },
    setup = function(p) return { x = tocha.rand({ p.n }, { device = "sim" }), y = tocha.zeros({ p.n }, { device = "sim" }) } end,
    teardown = function(_, st) st.x:free(); st.y:free() end,
    bytes = function(p) return 8 * p.n * p.copies end,
    reps = 3, warmup = 1, out = out, progress = false,
  }
  for k, v in pairs(extra or {}) do s[k] = v end
  return s
end

local function read(path) return assert(io.open(path, "r")):read("*a") end

describe("tocha.sweep", function()
  local dir
  before_each(function() dir = process.tempdir() end)
  after_each(function() process.remove_tree(dir) end)

  it("times every point of the grid for every case and writes a table, a CSV file and a plot", function()
    local r = tocha.sweep(spec(dir))
    assert.are.equal(8, #r.rows)
    local seen = {}
    for _, row in ipairs(r.rows) do
      seen[("%d %d %s"):format(row.n, row.copies, row.case)] = true
      assert.is_true(row.ms > 0 and row.min_ms <= row.ms and row.ms <= row.max_ms)
      assert.are.near(8 * row.n * row.copies / (row.ms * 1e6), row.gbps, 1e-9)
      assert.is_nil(row.pct_copy)
    end
    for _, n in ipairs({ 1000, 4000 }) do
      for _, c in ipairs({ 1, 2 }) do
        for _, case in ipairs({ "b64", "b128" }) do assert.is_true(seen[("%d %d %s"):format(n, c, case)]) end
      end
    end
    local md = read(dir .. "/scale.md")
    assert.truthy(md:find("^scale on sim %(CPU simulator, %d+ threads%), CPU times of the simulator %(no %% of copy%); "
      .. "median of 3 runs"), md)
    assert.truthy(md:find("\n| n | copies | case | median ms | min ms | max ms | ± % | GB/s |\n", 1, true), md)
    assert.are.equal(8, select(2, md:gsub("\n| %d+ | %d | b1?[26]4?8? |", "")), md)
    local csv = read(dir .. "/scale.csv")
    assert.truthy(csv:find("^n,copies,case,ms,min_ms,max_ms,spread_pct,gbps\n"), csv)
    assert.are.equal(9, select(2, csv:gsub("\n", "")))
    assert.truthy(read(dir .. "/scale.gp"):find('"scale.csv" using 1:', 1, true))
    if r.files.plot then
      assert.are.equal("\137PNG", read(r.files.plot):sub(1, 4))
    else
      assert.truthy(r.files.plot_note:find("gnuplot", 1, true))
    end
  end)

  it("puts a reference's times beside the rows it has, joined on the axes and the case", function()
    local ref = dir .. "/torch.csv"
    local f = assert(io.open(ref, "w"))
    f:write("n,copies,case,ms\n1000,1,b64,2.5\n4000,2,b128,0.125\n")
    f:close()
    local r = tocha.sweep(spec(nil, { reference = ref }))
    local joined = 0
    for _, row in ipairs(r.rows) do
      if row.ref_ms then
        joined = joined + 1
        assert.are.near(row.ref_ms / row.ms, row.ratio, 1e-12)
        assert.are.equal(row.n == 1000 and 2.5 or 0.125, row.ref_ms)
      end
    end
    assert.are.equal(2, joined)
    assert.truthy(tocha.sweep == require("tocha.sweep").run)
    assert.truthy(require("tocha.sweep").csv(r):find("^n,copies,case,ms,min_ms,max_ms,spread_pct,gbps,ref_ms,ratio\n"))
  end)

  it("runs nothing once its budget is spent, and says which points were left", function()
    local r = tocha.sweep(spec(dir, { budget_s = 0 }))
    assert.are.equal(0, #r.rows)
    assert.are.same({ "n=1000 copies=1", "n=1000 copies=2", "n=4000 copies=1", "n=4000 copies=2" }, r.skipped)
    assert.truthy(read(dir .. "/scale.md"):find("not run (the 0 s budget was spent): n=1000 copies=1; n=1000 copies=2; "
      .. "n=4000 copies=1; n=4000 copies=2", 1, true))
    assert.are.equal("no rows to plot", r.files.plot_note)
  end)

  it("refuses a spec it cannot use, naming the field", function()
    fails_with("tocha.sweep: axes: expected a list of {name, {values...}}",
      function() tocha.sweep { name = "s", axes = {}, run = print } end)
    fails_with("tocha.sweep: axes[1]: expected {name, {values...}}",
      function() tocha.sweep { name = "s", axes = { { "n" } }, run = print } end)
    fails_with("tocha.sweep: expected run (one case) or cases (named), not both",
      function() tocha.sweep { name = "s", axes = { { "n", { 1 } } } } end)
    fails_with('tocha.sweep: "axis": unknown field (expected name, axes, cases, run, setup, teardown, bytes, flops, '
      .. "peak_tflops, reps, warmup, budget_s, reference, out, device and progress)",
      function() tocha.sweep { name = "s", axis = {} } end)
    fails_with("tocha.sweep: reps: expected a whole number, got 0",
      function() tocha.sweep { name = "s", axes = { { "n", { 1 } } }, run = print, reps = 0 } end)
  end)
end)
