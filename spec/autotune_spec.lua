-- tocha.autotune on sim: configurations of a user kernel built, checked against the first one's
-- result and timed; the broken ones dropped with notes; the choice remembered per key in memory
-- and on disk, where a second process finds it without timing anything; a damaged record
-- timed again.
local tocha = require "tocha"
local process = require "support.process"
local ref = require "support.reference"
local fails_with = require("support.assertions").fails_with

-- y[i] = 2 x[i] + 1, each thread ELEMS elements; WRONG adds an error on purpose; BROKEN does
-- not compile.
local SOURCE = [[
template <int ELEMS, int WRONG>
__device__ void affine(const float *x, float *y, int n)
{
    const int first = (blockIdx.x * blockDim.x + threadIdx.x) * ELEMS;
    for (int e = 0; e < ELEMS; ++e)
        if (first + e < n) y[first + e] = 2.0f * x[first + e] + 1.0f + (float)WRONG;
#ifdef BROKEN
    this does not compile;
#endif
}]]

-- Records go to the specs' kernel cache: each run's names are its own.
local RUN = ("%d-%d"):format(os.time(), math.random(1, 1e9))

local function spec(name, configs, extra)
  local s = {
    name = name .. "-" .. RUN,
    configs = configs,
    build = function(cfg)
      return tocha.kernel { source = SOURCE, name = "affine", params = "f32* x, f32* y, i32 n",
        template_args = ("%d, %d"):format(cfg.elems, cfg.wrong or 0), options = cfg.broken and { "-DBROKEN" } or nil }
    end,
    launch = function(k, cfg, x, y, n)
      local per_block = cfg.block * cfg.elems
      k:launch(math.ceil(n / per_block), cfg.block, x, y, n)
    end,
    outputs = { 2 },
  }
  for k, v in pairs(extra or {}) do s[k] = v end
  return s
end

local function check_affine(x, y)
  local xs, ys = x:to_table(), y:to_table()
  for i = 1, #xs do assert.are.equal(ref.convert(ref.convert(2 * xs[i], "f32") + 1, "f32"), ys[i], i) end
end

describe("tocha.autotune", function()
  local dir
  before_each(function() dir = process.tempdir() end)
  after_each(function() process.remove_tree(dir) end)

  it("drops a configuration that does not build and one that computes another result, and runs the fastest of the rest", function()
    local tuned = tocha.autotune(spec("affine-drop", {
      { elems = 1, block = 64 }, { elems = 4, block = 128, broken = true }, { elems = 2, block = 128, wrong = 1 },
      { elems = 4, block = 256 }, { elems = 8, block = 32 } }))
    local n = 5000
    local x = tocha.rand({ n }, { device = "sim", seed = 3 })
    local y = tocha.full({ n }, -7, { device = "sim" })
    tuned(x, y, n)
    check_affine(x, y)
    local cfg, how = tuned:choice(x, y, n)
    assert.are.equal("memory", how.source)
    assert.truthy(how.index == 1 or how.index == 4 or how.index == 5, how.index)
    assert.are.equal(cfg, tuned.configs[how.index])
    assert.are.equal(2, #how.dropped)
    assert.are.equal(2, how.dropped[1].index)
    assert.truthy(how.dropped[1].reason:find("^build failed: the simulator's compiler %(c%+%+%) failed to compile: "
      .. "affine.cu:8:5: error: "), how.dropped[1].reason)
    assert.are.equal(3, how.dropped[2].index)
    assert.truthy(how.dropped[2].reason:find("^wrong result: argument 2 differs from configuration 1's by up to 1"),
      how.dropped[2].reason)
    assert.are.equal(3, #how.times)
    -- read back from its record, the choice keeps the dropped ones and their reasons
    tuned:forget()
    local again, read = tuned:choice(x, y, n)
    assert.are.equal("disk", read.source)
    assert.are.equal(cfg, again)
    assert.are.same(how.dropped, read.dropped)
  end)

  it("puts the outputs back, so that a call does what one launch does", function()
    local acc = [[
template <int B>
__device__ void accumulate(const float *x, float *y, int n)
{
    const int i = blockIdx.x * B + threadIdx.x;
    if (i < n) y[i] += x[i];
}]]
    local tuned = tocha.autotune {
      name = "accumulate-" .. RUN, configs = { { B = 32 }, { B = 64 }, { B = 128 } }, outputs = { 2 },
      build = function(cfg)
        return tocha.kernel { source = acc, name = "accumulate", template_args = tostring(cfg.B), params = "f32* x, f32* y, i32 n" }
      end,
      launch = function(k, cfg, x, y, n) k:launch(math.ceil(n / cfg.B), cfg.B, x, y, n) end,
    }
    local x = tocha.ones({ 300 }, { device = "sim" })
    local y = tocha.full({ 300 }, 5, { device = "sim" })
    tuned(x, y, 300)
    for _, v in ipairs(y:to_table()) do assert.are.equal(6, v) end
  end)

  it("keys the choice by shapes, dtypes and scalars, and says so when verbose", function()
    local tuned = tocha.autotune(spec("affine-keys", { { elems = 1, block = 64 }, { elems = 2, block = 64 } }))
    local a, b = tocha.rand({ 100 }, { device = "sim" }), tocha.zeros({ 100 }, { device = "sim" })
    local c, d = tocha.rand({ 200 }, { device = "sim" }), tocha.zeros({ 200 }, { device = "sim" })
    select(2, tuned:choice(a, b, 100))
    assert.are.equal("tuned", select(2, tuned:choice(c, d, 200)).source)
    assert.are.equal("memory", select(2, tuned:choice(a, b, 100)).source)
    assert.are.equal("tuned", select(2, tuned:choice(a, b, 99)).source)
  end)

  it("records the choice on disk, where a second process finds it without timing", function()
    local script = process.write_script([[
local tocha = require "tocha"
local tuned = tocha.autotune {
  name = "child", configs = { { B = 32 }, { B = 64 }, { B = 128 }, { B = 256 } }, outputs = { 2 },
  build = function(cfg)
    return tocha.kernel { source = "template <int B> __device__ void halve(const float *x, float *y, int n) "
      .. "{ int i = blockIdx.x * B + threadIdx.x; if (i < n) y[i] = x[i] * 0.5f; }",
      name = "halve", template_args = tostring(cfg.B), params = "f32* x, f32* y, i32 n" }
  end,
  launch = function(k, cfg, x, y, n) k:launch(math.ceil(n / cfg.B), cfg.B, x, y, n) end,
}
local x, y = tocha.ones({ 1000 }, { device = "sim" }), tocha.zeros({ 1000 }, { device = "sim" })
local before = tocha.cache.stats().compiles
local cfg, how = tuned:choice(x, y, 1000)
tuned(x, y, 1000)
io.write(how.source, " ", how.index, " ", y:to_table()[1000])
]])
    local env = { TOCHA_CACHE_DIR = dir }
    local first, err1 = process.tocha({ script }, "", env)
    assert.truthy(first:match("^tuned %d 0.5$"), first .. err1)
    local second, err2 = process.tocha({ script }, "", env)
    assert.are.equal("disk" .. first:sub(6), second, err2)
    -- A damaged record is timed again (and replaced); TOCHA_AUTOTUNE=retune ignores a good one.
    local p = io.popen("ls " .. dir .. "/autotune")
    local name = p:read("*l")
    p:close()
    local f = assert(io.open(dir .. "/autotune/" .. name, "w"))
    f:write("tocha autotune 1\nkey nonsense\nchoice 99\n")
    f:close()
    assert.truthy(process.tocha({ script }, "", env):match("^tuned "))
    assert.truthy(process.tocha({ script }, "", env):match("^disk "))
    -- `tocha cache clear` removes the records with the kernels they were measured with.
    local cleared = process.tocha({ "cache", "clear" }, "", env)
    assert.truthy(cleared ~= "", cleared)
    local p2 = io.popen("ls " .. dir .. "/autotune")
    assert.is_nil(p2:read("*l"))
    p2:close()
    assert.truthy(process.tocha({ script }, "", env):match("^tuned "))
    env.TOCHA_AUTOTUNE = "retune,verbose"
    local out, err = process.tocha({ script }, "", env)
    assert.truthy(out:match("^tuned "), out)
    assert.truthy(err:find('tocha.autotune child: config %d {"B"=%d+}, [%d.]+ ms %(tuned%) for '), err)
    assert.are.equal(4, select(2, err:gsub('\n  config %d {"B"=%d+}: [%d.]+ ms', "")), err)
  end)

  it("tunes 16 configurations, times each and reports the sum of the timed runs", function()
    local configs = {}
    for e = 1, 4 do for b = 1, 4 do configs[#configs + 1] = { elems = 2 ^ (e - 1), block = 32 * 2 ^ (b - 1) } end end
    local tuned = tocha.autotune(spec("affine-16", configs, { reps = 3, min_ms = 0 }))
    local n = 20000
    local x, y = tocha.rand({ n }, { device = "sim" }), tocha.zeros({ n }, { device = "sim" })
    local _, how = tuned:choice(x, y, n)
    assert.are.equal("tuned", how.source)
    assert.are.equal(16, #how.times)
    local sum, best = 0, math.huge
    for _, t in ipairs(how.times) do
      assert.is_true(t.median_ms > 0)
      sum, best = sum + t.median_ms, math.min(best, t.median_ms)
    end
    assert.are.equal(best, how.median_ms)
    assert.is_true(how.timed_ms >= 3 * best and how.timed_ms > 0)
    tuned(x, y, n)
    check_affine(x, y)
  end)

  it("fails naming each configuration when none works", function()
    local tuned = tocha.autotune(spec("none", { { elems = 1, block = 64, broken = true }, { elems = 1, block = 2048 } }))
    local x, y = tocha.rand({ 10 }, { device = "sim" }), tocha.zeros({ 10 }, { device = "sim" })
    local ok, err = pcall(tuned, x, y, 10)
    assert.is_false(ok)
    assert.truthy(err:find("none-" .. RUN .. ": every configuration failed:\n  config 1 {", 1, true), err)
    assert.truthy(err:find("build failed: the simulator's compiler (c++) failed to compile: affine.cu:8:5: error: ", 1, true), err)
    assert.truthy(err:find("  config 2 {\"block\"=2048,\"elems\"=1}: launch failed: block.x: must be 1 to 1024, got 2048", 1, true), err)
  end)

  it("refuses a spec it cannot use, naming the field", function()
    fails_with("tocha.autotune: configs: expected a list of configurations",
      function() tocha.autotune { name = "x", configs = {}, build = print, launch = print } end)
    fails_with('tocha.autotune: "config": unknown field (expected name, configs, build, launch, key, outputs, check, '
      .. "rtol, atol, reps, min_ms and verbose)", function() tocha.autotune { name = "x", config = {} } end)
    fails_with("tocha.autotune: name: expected a name of letters, digits, '_', '.' and '-', got \"a b\"",
      function() tocha.autotune { name = "a b", configs = { {} }, build = print, launch = print } end)
    fails_with("tocha.autotune: outputs[1]: expected an argument position (1, 2, ...), got 0",
      function() tocha.autotune { name = "x", configs = { {} }, build = print, launch = print, outputs = { 0 } } end)
  end)
end)
