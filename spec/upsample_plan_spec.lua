-- The upsample's launch arithmetic has one source, kernels/upsample_plan.h, which the kernels
-- compile; lua/tocha/ops/upsample.lua sizes grids with the same arithmetic in Lua. Here a probe
-- kernel compiled from the header computes, on the device, each case's forward vectors,
-- backward run, runs and batch, and every number and every grid the ops give must equal it:
-- on every benchmark case (bench/cases.lua) at three block widths, and on random shapes of
-- every dtype.
local tocha = require "tocha"
local ffi = require "ffi"

local upsample = require "tocha.ops.upsample"
local plan = upsample.plan
local cases = dofile(assert(os.getenv("TOCHA_SOURCE_DIR"), "TOCHA_SOURCE_DIR is set by CTest") .. "/bench/cases.lua")

local FIELDS = 9 -- nhwc, B, C, H, W, OW, element size, scale_h, scale_w
local PROBE = [[
__device__ void upsample_plan_probe(long long *cases, long long *out, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long *c = cases + 9 * i;
    int nhwc = (int)c[0], size = (int)c[6], sh = (int)c[7], sw = (int)c[8];
    tocha_upsample_rows g = tocha_upsample_rows_of(nhwc, (int)c[1], (int)c[2], (int)c[3], (int)c[4], (int)c[5]);
    int run = tocha_upsample_backward_run(size, sw, nhwc);
    out[4 * i + 0] = tocha_upsample_forward_vectors(g, size, sh, 0);
    out[4 * i + 1] = run;
    out[4 * i + 2] = tocha_upsample_backward_runs(g, run, 0);
    out[4 * i + 3] = tocha_upsample_backward_batch(size, sh, sw, nhwc);
}
]]

-- The header's numbers for each case {layout, dtype, B, C, H, W, sh, sw}, as four lists.
local function header_numbers(list)
  local k = tocha.kernel { source = require("tocha.op").source("upsample_plan.h") .. "\n" .. PROBE,
    name = "upsample_plan_probe", params = "i64* cases, i64* out, i64 n" }
  local flat = {}
  for i, c in ipairs(list) do
    local layout, dt, b, ch, h, w, sh, sw = unpack(c)
    local row = { layout == "nhwc" and 1 or 0, b, ch, h, w, w * sw, require("tocha.dtype").size(dt), sh, sw }
    for j = 1, FIELDS do flat[(i - 1) * FIELDS + j] = row[j] end
  end
  local input = tocha.tensor(flat, { dtype = "i64", device = "sim" })
  local out = tocha.full({ 4 * #list }, -1, { dtype = "i64", device = "sim" })
  k:launch(math.ceil(#list / 128), 128, input, out, #list)
  return out:to_table()
end

local function check_cases(list, blocks)
  local got = header_numbers(list)
  for i, c in ipairs(list) do
    local layout, dt, b, ch, h, w, sh, sw = unpack(c)
    local what = table.concat({ layout, dt, b, ch, h, w, sh, sw }, " ")
    local size, nhwc = require("tocha.dtype").size(dt), layout == "nhwc"
    local vectors, run, runs, batch = got[4 * i - 3], got[4 * i - 2], got[4 * i - 1], got[4 * i]
    local rows = plan.rows(nhwc, b, ch, h, w, w * sw)
    assert.are.equal(vectors, plan.forward_vectors(rows, size, sh), what)
    assert.are.equal(run, plan.backward_run(size, sw, nhwc), what)
    assert.are.equal(runs, plan.backward_runs(rows, run), what)
    assert.are.equal(batch, plan.backward_batch(size, sh, sw, nhwc), what)
    local input = nhwc and { b, h, w, ch } or { b, ch, h, w }
    for _, block in ipairs(blocks) do
      local up = tocha.UpsampleNearest2dForward.new(sh, sw, block, dt, { layout = layout })
      local output = up:compute_concrete_output_shape({ input })
      local cap = 2 ^ 31 - 1
      assert.are.same({ math.min(cap, math.max(1, math.ceil(vectors / block))), 1, 1 }, up:grid(output), what)
      assert.are.same({ math.min(cap, math.max(1, math.ceil(runs / (batch * block)))), 1, 1 },
        up:backward_grid({ input }, output), what)
    end
  end
end

describe("the upsample's launch plan", function()
  it("is the header's on every benchmark case, at block widths 32, 128 and 1024", function()
    local list, seen = {}, {}
    for _, c in ipairs(cases.list()) do
      local b, ch, h, w = unpack(c.shape)
      local key = table.concat({ c.layout, c.dtype, b, ch, h, w, c.sh, c.sw }, " ")
      if not seen[key] then
        seen[key] = true
        list[#list + 1] = { c.layout, c.dtype, b, ch, h, w, c.sh, c.sw }
      end
    end
    assert.is_true(#list > 300, "the benchmark's cases")
    check_cases(list, { 32, 128, 1024 })
  end)

  it("is the header's on random shapes of every dtype and both layouts", function()
    math.randomseed(20261203)
    local list = {}
    for _ = 1, 400 do
      local dt = ({ "f32", "f64", "f16", "bf16", "u8", "i32", "i64" })[math.random(7)]
      list[#list + 1] = { math.random() < 0.5 and "nchw" or "nhwc", dt, math.random(1, 9), math.random(1, 70),
        math.random(1, 300), math.random(1, 300), math.random(1, 8), math.random(1, 8) }
    end
    check_cases(list, { 64 })
  end)
end)
