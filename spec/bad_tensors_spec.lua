-- Bad input to tensors and devices: each answered by an error that names the argument and
-- the problem, and the process goes on working afterwards.
local tocha = require "tocha"

-- Asserts that fn raises exactly message (after the "file:line: " position).
local fails_with = require("support.assertions").fails_with

describe("tocha errors", function()
  after_each(function()
    -- The process is still usable: a tensor round-trips after every error.
    assert.are.same({ 1, 2, 3 }, tocha.tensor({ 1, 2, 3 }, { device = "sim" }):to_table())
  end)

  describe("dtypes", function()
    it("refuse an unknown dtype name", function()
      fails_with("tocha.zeros: dtype: unknown dtype 'float32' (expected f32, f64, f16, bf16, u8, i32 or i64)",
        function() tocha.zeros({ 2 }, { dtype = "float32" }) end)
    end)
    it("refuse a dtype that is not a string", function()
      fails_with("tocha.ones: dtype: expected a dtype name (f32, f64, f16, bf16, u8, i32, i64), got number",
        function() tocha.ones({ 2 }, { dtype = 3 }) end)
    end)
    it("refuse an unknown dtype in cast()", function()
      fails_with("tocha.Tensor:cast: dtype: unknown dtype 'f8' (expected f32, f64, f16, bf16, u8, i32 or i64)",
        function() tocha.ones({ 2 }):cast("f8") end)
    end)
  end)

  describe("shapes", function()
    it("refuse a negative size", function()
      fails_with("tocha.zeros: shape[2]: size must be a non-negative integer, got -3",
        function() tocha.zeros({ 2, -3 }) end)
    end)
    it("refuse a fractional size", function()
      fails_with("tocha.rand: shape[1]: size must be a non-negative integer, got 2.5",
        function() tocha.rand(2.5, 3) end)
    end)
    it("refuse a NaN size", function()
      fails_with("tocha.ones: shape[3]: size must be a non-negative integer, got nan",
        function() tocha.ones({ 1, 2, 0 / 0 }) end)
    end)
    it("refuse a huge size", function()
      fails_with("tocha.zeros: shape[1]: size 1e+300 is too large", function() tocha.zeros({ 1e300 }) end)
    end)
    it("refuse a shape whose element count overflows", function()
      fails_with("tocha.zeros: shape: too many elements (the limit is 72057594037927936 bytes per tensor)",
        function() tocha.zeros({ 2 ^ 40, 2 ^ 40 }) end)
    end)
    it("refuse more than 8 dimensions", function()
      fails_with("tocha.zeros: shape: expected 1 to 8 dimensions, got 9",
        function() tocha.zeros({ 1, 1, 1, 1, 1, 1, 1, 1, 1 }) end)
    end)
    it("refuse a shape that is not a table", function()
      fails_with("tocha.zeros: shape: expected a table of sizes, got string", function() tocha.zeros("2x3") end)
    end)
    it("refuse ragged nested data", function()
      fails_with("tocha.tensor: data[2]: ragged nesting: expected 2 elements, got 1",
        function() tocha.tensor({ { 1, 2 }, { 3 } }) end)
    end)
    it("refuse data that holds something other than numbers", function()
      fails_with("tocha.tensor: data[1][2]: expected a number, got string",
        function() tocha.tensor({ { 1, "x" } }) end)
    end)
  end)

  describe("nested data and methods", function()
    it("refuse data with holes, and data that holds itself", function()
      fails_with("tocha.tensor: data: expected a list without holes or other keys, got 2 keys",
        function() tocha.tensor({ 1, nil, 3 }) end)
      fails_with("tocha.tensor: data[1]: expected a list without holes or other keys, got 3 keys",
        function() tocha.tensor({ { 1, 2, x = 3 } }) end)
      local loop = {}
      loop[1] = loop
      fails_with("tocha.tensor: data: expected 1 to 8 dimensions, got more", function() tocha.tensor(loop) end)
    end)
    it("refuse a method called with a dot instead of a colon", function()
      local t = tocha.ones({ 2 }, { device = "sim" })
      fails_with("tocha.Tensor:free: self: expected a Tensor, got nil (call it as x:free(...))", function() t.free() end)
      fails_with("tocha.Tensor:fill: self: expected a Tensor, got number (call it as x:fill(...))", function() t.fill(3) end)
      assert.are.same({ 1, 1 }, t:to_table()) -- neither touched it
    end)
  end)

  describe("comparisons", function()
    it("refuse tolerances that are not numbers >= 0, and options that are not a table", function()
      local a = tocha.ones({ 2 }, { device = "sim" })
      fails_with("tocha.allclose: rtol: expected a number >= 0, got \"x\"", function() tocha.allclose(a, a, "x") end)
      fails_with("tocha.allclose: atol: expected a number >= 0, got -1", function() tocha.allclose(a, a, 0, -1) end)
      fails_with("tocha.compare: atol: expected a number >= 0, got nan", function() tocha.compare(a, a, { atol = 0 / 0 }) end)
      fails_with("tocha.compare: options: expected a table {rtol=, atol=}, got number", function() tocha.compare(a, a, 3) end)
    end)
  end)

  describe("host buffers", function()
    -- An FFI array smaller than the tensor was read into past its end (a crash), and a string
    -- shorter than the tensor was written from past its end (garbage in the tensor).
    local ffi = require "ffi"
    it("refuse to read into an FFI array smaller than what is read", function()
      local t = tocha.ones({ 1000 }, { device = "sim" })
      fails_with("tocha.Tensor:read: dst: holds 4 bytes, 4000 wanted", function() t:read(ffi.new("float[1]")) end)
      fails_with("tocha.Tensor:read: dst: holds 8 bytes, 12 wanted", function() t:read(ffi.new("float[2]"), 10, 3) end)
      assert.are.equal(1, t:read(ffi.new("float[3]"), 10, 3)[2]) -- what fits is read
    end)
    it("refuse to write from a string or FFI array smaller than the tensor", function()
      local t = tocha.zeros({ 4 }, { device = "sim" })
      fails_with("tocha.Tensor:write: src: holds 1 byte, 16 wanted", function() t:write("x") end)
      fails_with("tocha.Tensor:write: src: holds 8 bytes, 16 wanted", function() t:write(ffi.new("float[2]")) end)
      t:write(ffi.new("float[4]", { 1, 2, 3, 4 }))
      assert.are.same({ 1, 2, 3, 4 }, t:to_table())
    end)
    it("refuse a pointer, whose size cannot be checked, unless the count is given", function()
      local t = tocha.zeros({ 4 }, { device = "sim" })
      local p = ffi.cast("float *", ffi.new("float[4]"))
      fails_with("tocha.Tensor:read: dst: a pointer's size cannot be checked: pass offset and count", function() t:read(p) end)
      fails_with("tocha.Tensor:write: src: a pointer's size cannot be checked: pass nbytes", function() t:write(p) end)
      fails_with("tocha.Tensor:read: count: expected a non-negative integer, got 1.5", function() t:read(p, 0, 1.5) end)
      fails_with("tocha.Tensor:write: src: expected an FFI array or pointer, got table", function() t:write({}) end)
      fails_with("tocha.Tensor:read: dst: expected an FFI array or pointer, got ctype<uint64_t>",
        function() t:read(ffi.new("uint64_t", 0), 0, 1) end)
      -- a tensor given as host memory with a count had its own struct overwritten (found by the
      -- API fuzzer: a crash when that tensor was collected later)
      local other = tocha.zeros({ 1, 1, 2, 2 }, { device = "sim", dtype = "f16" })
      fails_with("tocha.Tensor:read: dst: expected host memory, got a tensor (t:copy copies between tensors)",
        function() t:read(other, 0, 4) end)
      fails_with("tocha.Tensor:write: src: expected host memory, got a tensor (t:copy copies between tensors)",
        function() t:write(other, 16) end)
      fails_with("tocha.Tensor:read: dst: expected an FFI array or pointer of numbers, got ctype<struct tocha_arg_list *>",
        function() t:read(ffi.new("tocha_arg_list[1]") + 0, 0, 1) end)
      assert.are.same({ 1, 1, 2, 2 }, other:shape())
    end)
  end)

  describe("copies", function()
    it("refuse mismatched shapes", function()
      fails_with("tocha.Tensor:copy: src: shapes differ: [2x3] and [3x2]",
        function() tocha.zeros({ 2, 3 }):copy(tocha.zeros({ 3, 2 })) end)
    end)
    it("refuse mismatched dtypes", function()
      fails_with("tocha.Tensor:copy: src: dtype f16 differs from dst's f32 (use cast)",
        function() tocha.zeros({ 2 }):copy(tocha.zeros({ 2 }, { dtype = "f16" })) end)
    end)
    it("refuse a source that is not a tensor", function()
      fails_with("tocha.Tensor:copy: src: expected a tensor, got table",
        function() tocha.zeros({ 2 }):copy({ 1, 2 }) end)
    end)
  end)

  describe("freed tensors", function()
    local t
    before_each(function()
      t = tocha.ones({ 3 })
      t:free()
    end)
    it("refuse to be read", function()
      fails_with("tocha.Tensor:to_table: tensor was freed", function() t:to_table() end)
    end)
    it("refuse to be filled", function()
      fails_with("tocha.Tensor:fill: tensor: tensor was freed", function() t:fill(1) end)
    end)
    it("refuse to be copied from", function()
      fails_with("tocha.Tensor:copy: src: tensor was freed", function() tocha.zeros({ 3 }):copy(t) end)
    end)
    it("refuse to be compared", function()
      fails_with("tocha.compare: a: tensor was freed", function() tocha.compare(t, tocha.ones({ 3 })) end)
    end)
  end)

  describe("devices", function()
    it("refuse an unknown device name", function()
      fails_with("tocha.zeros: device: unknown device 'tpu' (expected cuda, cuda:N, sim or sim:N)",
        function() tocha.zeros({ 2 }, { device = "tpu" }) end)
    end)
    it("refuse a device that does not exist", function()
      local ok, err = pcall(tocha.zeros, { 2 }, { device = "cuda:9" })
      assert.is_false(ok)
      assert.truthy(err:find("tocha.zeros: device: cuda:9 ", 1, true))
      assert.truthy(err:find("unavailable here") or err:find("does not exist"))
    end)
  end)

  describe("random fills", function()
    it("refuse an empty range", function()
      fails_with("tocha.rand: low, high: expected finite low < high, got 1, 1",
        function() tocha.rand({ 2 }, { low = 1, high = 1, seed = 1 }) end)
    end)
    it("refuse a negative std", function()
      fails_with("tocha.randn: mean, std: expected finite mean and std >= 0, got 0, -1",
        function() tocha.randn({ 2 }, { std = -1, seed = 1 }) end)
    end)
    it("refuse a fractional seed", function()
      fails_with("tocha.rand: seed: expected an integer from 0 to 2^53, got 1.5",
        function() tocha.rand({ 2 }, { seed = 1.5 }) end)
    end)
  end)
end)
