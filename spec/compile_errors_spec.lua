-- Compile errors in the kernel's own terms, from NVRTC (for sm_90, which needs no GPU) and from
-- the simulator's compiler: the source's file name, line and column, three lines of the source
-- around the error with a caret under the column, the first three errors and a count of the
-- rest; the generated entry point named as such; the whole log and translation unit only in
-- TOCHA_DUMP_DIR.
local tocha = require "tocha"
local process = require "support.process"
local fails_with = require("support.assertions").fails_with

local SAXPY = [[
template <int A>
__device__ void saxpy(const float *x, float *y, long long n)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = undefined_scale * x[i] + y[i];
}]]

local function build_error(k, target)
  local ok, err = pcall(k.build, k, target)
  assert.is_false(ok)
  return err
end

local function line_count(s) return select(2, s:gsub("\n", "")) + 1 end

describe("compile errors", function()
  -- Each compiler's header, its own words for the error, and (g++) the function it is in.
  local targets = { { "sm_90", "NVRTC failed to compile for sm_90:\n", 'identifier "undefined_scale" is undefined' },
    { "sim", "the simulator's compiler (c++) failed to compile:\n"
      .. "saxpy.cu: In function ‘void saxpy(const float*, float*, long long int)’:\n",
      "‘undefined_scale’ was not declared in this scope" } }
  for _, t in ipairs(targets) do
    local target, header, text = t[1], t[2], t[3]
    describe("from " .. target, function()
      it("name the source's own line and column, with three lines of it and a caret", function()
        local k = tocha.kernel { source = SAXPY, name = "saxpy", template_args = "3", params = "f32* x, f32* y, i64 n" }
        assert.are.equal("tocha.Kernel:build: " .. header
          .. "saxpy.cu:5:23: error: " .. text .. "\n"
          .. "    4 |     long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
          .. "    5 |     if (i < n) y[i] = undefined_scale * x[i] + y[i];\n"
          .. "      |                       ^\n"
          .. "    6 | }\n"
          .. "(set TOCHA_DUMP_DIR to keep the whole log and translation unit)", build_error(k, target))
      end)

      it("use the file name the kernel is given", function()
        local k = tocha.kernel { source = SAXPY, name = "saxpy", template_args = "3", params = "f32* x, f32* y, i64 n",
          file = "kernels/saxpy_v2.cu" }
        assert.truthy(build_error(k, target):find("\nkernels/saxpy_v2.cu:5:23: error: ", 1, true))
      end)

      it("show the first three errors and count the rest", function()
        local k = tocha.kernel { source = [[
__device__ void many(float *y)
{
    a = 1; b = 2; c = 3;
    d = 4; e = 5;
}]], name = "many", params = "f32* y" }
        local err = build_error(k, target)
        assert.truthy(err:find("many.cu:3:5: error: ", 1, true), err)
        assert.truthy(err:find("many.cu:3:12: error: ", 1, true), err)
        assert.truthy(err:find("many.cu:3:19: error: ", 1, true), err)
        assert.is_nil(err:find("many.cu:4:", 1, true), err)
        assert.truthy(err:find("\n(2 more errors)\n", 1, true), err)
        assert.is_true(line_count(err) <= 20, err)
      end)

      it("name the generated entry point when template_args do not fit the function", function()
        local k = tocha.kernel { source = [[
template <typename T>
__device__ void twice(T *y, int n)
{
    if ((int)threadIdx.x < n) y[threadIdx.x] = y[threadIdx.x] * T(2);
}]], name = "twice", template_args = "floa", params = "f32* y, i32 n" }
        local err = build_error(k, target)
        assert.truthy(err:find("\n<entry point>:3:11: error: ", 1, true), err)
        assert.truthy(err:find("    3 |     twice<floa>(y, n);\n", 1, true), err)
        assert.truthy(err:find("(<entry point> is the function tocha writes from the kernel's name, template_args and "
          .. "params: k.entry_point_source)", 1, true), err)
      end)

      it("keep the whole log and translation unit in TOCHA_DUMP_DIR, and say where", function()
        local dir = process.tempdir()
        local script = dir .. "/build.lua"
        local f = assert(io.open(script, "w"))
        f:write(([[
local tocha = require "tocha"
local k = tocha.kernel { source = %q, name = "saxpy", template_args = "3", params = "f32* x, f32* y, i64 n" }
local ok, err = pcall(k.build, k, %q)
io.write(err)
]]):format(SAXPY .. "\n// " .. target, target))
        f:close()
        local out = process.tocha({ script }, "", { TOCHA_DUMP_DIR = dir })
        local log, unit = out:match("the whole log: (%S+); the translation unit: (%S+)$")
        assert.truthy(log, out)
        local whole_unit = assert(io.open(unit)):read("*a")
        assert.truthy(whole_unit:find('#line 1 "saxpy.cu"\n', 1, true))
        assert.truthy(whole_unit:find("undefined_scale", 1, true))
        assert.truthy(assert(io.open(log)):read("*a"):find("undefined_scale", 1, true))
        process.remove_tree(dir)
      end)
    end)
  end

  it("refuse a file name that a #line directive cannot hold", function()
    fails_with("tocha.kernel: file: expected a file name of 1 to 200 characters without quotes, backslashes or line "
      .. "breaks", function()
        tocha.kernel { source = SAXPY, name = "saxpy", template_args = "3", params = "f32* x, f32* y, i64 n", file = 'a"b.cu' }
      end)
    fails_with("tocha.kernel: file: expected a string, got number",
      function() tocha.kernel { source = SAXPY, name = "saxpy", params = "f32* x, f32* y, i64 n", file = 5 } end)
  end)

  it("name the source's line in a failed device assert on sim", function()
    local k = tocha.kernel { source = [[
#include <assert.h>
__device__ void guarded(float *y)
{
    assert(y[0] > 0.0f);
}]], name = "guarded", params = "f32* y", file = "guarded.cu" }
    local y = tocha.zeros({ 1 }, { device = "sim" })
    local ok, err = pcall(k.launch, k, 1, 1, y)
    assert.is_false(ok)
    assert.truthy(err:find("assertion failed: y[0] > 0.0f (guarded.cu:4, in ", 1, true), err)
  end)
end)
