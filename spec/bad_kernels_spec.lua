-- Bad input to kernels made from source: the description (source, name, template arguments,
-- parameter list) and building (targets, compile errors with their log). Each is answered by
-- an error naming the argument, positioned at the caller's line, and the session goes on.
local tocha = require "tocha"
local kernels = require "support.kernels"
local AXPY, axpy = kernels.AXPY, kernels.axpy

local fails_with = require("support.assertions").fails_with

describe("bad kernels", function()
  after_each(function()
    -- The session still builds and launches kernels.
    local x = tocha.tensor({ 1, 2 }, { device = "sim" })
    local y = tocha.tensor({ 10, 20 }, { device = "sim" })
    axpy("f32", 2):launch(1, 32, x, y, 2, 1)
    assert.are.same({ 13, 25 }, y:to_table())
  end)

  describe("new()", function()
    it("refuses a parameter of unknown type", function()
      fails_with("tocha.kernel: params: parameter 2: unknown type 'int' (expected a tensor 'T*' or one of i32, i64, u32, u64, f32, f64)",
        function() tocha.kernel { source = AXPY, name = "axpy", params = "f32* x, int n" } end)
    end)
    it("refuses a tensor parameter of unknown dtype", function()
      fails_with("tocha.kernel: params: parameter 1: unknown tensor dtype 'float*' (expected f32*, f64*, f16*, bf16*, u8*, i32* or i64*)",
        function() tocha.kernel { source = AXPY, name = "axpy", params = "float* x" } end)
    end)
    it("refuses a name that is not an identifier", function()
      fails_with("tocha.kernel: name: expected a C identifier, got 'my kernel'",
        function() tocha.kernel { source = AXPY, name = "my kernel", params = "" } end)
    end)
    it("refuses a description that is not a table", function()
      fails_with("tocha.kernel: expected a table {source=, name=, params=}", function() tocha.kernel(5) end)
    end)
    it("refuses a missing source", function()
      fails_with("tocha.kernel: source: expected a string, got nil",
        function() tocha.kernel { name = "axpy", params = "f32* x" } end)
    end)
    it("refuses a missing name", function()
      fails_with("tocha.kernel: name: expected a string, got nil",
        function() tocha.kernel { source = AXPY, params = "f32* x" } end)
    end)
    it("refuses an empty name", function()
      fails_with("tocha.kernel: name: expected a C identifier, got ''",
        function() tocha.kernel { source = AXPY, name = "", params = "" } end)
    end)
    it("refuses params that are not a string", function()
      fails_with("tocha.kernel: params: expected a string, got number",
        function() tocha.kernel { source = AXPY, name = "axpy", params = 3 } end)
    end)
    it("refuses a field it does not know, by name, instead of ignoring it", function()
      local expected = "(expected source, name, template_args, params, options, launch_bounds, shared and file)"
      fails_with('tocha.kernel: "shared_mem": unknown field ' .. expected,
        function() tocha.kernel { source = "__device__ void f() {}", name = "f", params = "", shared_mem = 1024 } end)
      fails_with('tocha.kernel: "option": unknown field ' .. expected,
        function() tocha.kernel { source = "__device__ void f() {}", name = "f", params = "", option = { "-lineinfo" } } end)
      fails_with("tocha.kernel: 1: unknown field " .. expected,
        function() tocha.kernel { "__device__ void f() {}", name = "f", params = "" } end)
    end)
    it("refuses template arguments that are not a string", function()
      fails_with("tocha.kernel: template_args: expected a string, got number",
        function() tocha.kernel { source = AXPY, name = "axpy", params = "f32* x", template_args = 5 } end)
    end)
    it("refuses more parameters than a launch can carry", function()
      fails_with("tocha.kernel: params: more than 64 parameters",
        function()
          local names = {}
          for i = 1, 70 do names[i] = "i32 a" .. i end
          tocha.kernel { source = AXPY, name = "axpy", params = table.concat(names, ", ") }
        end)
    end)
    it("refuses a parameter name that is not an identifier", function()
      fails_with("tocha.kernel: params: parameter 1 has an invalid name '9x'",
        function() tocha.kernel { source = AXPY, name = "axpy", params = "f32* 9x" } end)
    end)
    it("refuses an empty parameter", function()
      fails_with("tocha.kernel: params: parameter 2 is empty or too long",
        function() tocha.kernel { source = AXPY, name = "axpy", params = "f32* x,," } end)
    end)
    it("refuses a parameter name given twice", function()
      fails_with("tocha.kernel: params: parameter 2 repeats the name 'x' of parameter 1",
        function() tocha.kernel { source = AXPY, name = "axpy", params = "f32* x, f32* x" } end)
    end)
  end)

  describe("build()", function()
    it("returns NVRTC's error at the source's own line, with that line, on a compile error", function()
      local k = tocha.kernel { source = "__device__ void broken(float *x) { x[0] = undefined_name; }",
        name = "broken", params = "f32* x" }
      local ok, err = pcall(k.build, k, "sm_90")
      assert.is_false(ok)
      assert.truthy(err:find("tocha.Kernel:build: NVRTC failed to compile for sm_90", 1, true))
      assert.truthy(err:find('broken.cu:1:43: error: identifier "undefined_name" is undefined', 1, true), err)
      assert.truthy(err:find("    1 | __device__ void broken", 1, true), err)
    end)

    it("reports the simulator compiler's errors the same way", function()
      local k = tocha.kernel { source = "__device__ void broken2(float *x) { x[0] = nope; }",
        name = "broken2", params = "f32* x" }
      local ok, err = pcall(k.build, k, "sim")
      assert.is_false(ok)
      assert.truthy(err:find("the simulator's compiler", 1, true))
      assert.truthy(err:find("nope", 1, true))
    end)

    it("refuses an unknown target", function()
      fails_with("tocha.Kernel:build: target: expected sm_XY (e.g. sm_90) or sim, got 'gfx90a'",
        function() axpy("f32", 2):build("gfx90a") end)
    end)
    it("refuses a target that is not a string", function()
      fails_with("tocha.Kernel:build: target: expected a string like sm_90 or sim",
        function() axpy("f32", 2):build(5) end)
    end)
    it("refuses a target with one digit", function()
      fails_with("tocha.Kernel:build: target: expected sm_XY (e.g. sm_90) or sim, got 'sm_9'",
        function() axpy("f32", 2):build("sm_9") end)
    end)
    it("reports a failed compile again on the next launch, and the session goes on", function()
      local broken = tocha.kernel { source = "__device__ void broken3(float *x) { x[0] = nope3; }",
        name = "broken3", params = "f32* x" }
      local x = tocha.zeros({ 1 }, { device = "sim" })
      for _ = 1, 2 do
        local ok, err = pcall(broken.launch, broken, 1, 1, x)
        assert.is_false(ok)
        assert.truthy(err:find("tocha.Kernel:launch: the simulator's compiler", 1, true))
        assert.truthy(err:find("nope3", 1, true))
      end
    end)
  end)
end)
