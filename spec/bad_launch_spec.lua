-- Bad launches of raw kernels: every argument is checked against the parameter list (count,
-- kind, dtype, integer value and range, freed tensors, device) and the grid and block against
-- the device's limits, before anything runs: the output is untouched and the kernel still
-- launches afterwards.
local tocha = require "tocha"
local ref = require "support.reference"
local axpy = require("support.kernels").axpy

local fails_with = require("support.assertions").fails_with
local process = require "support.process"

describe("bad launches", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

    describe("checks its arguments", function()
      local k, x, y
      before_each(function()
        k = axpy("f32", 2)
        x = tocha.zeros({ 8 }, { device = device })
        y = tocha.zeros({ 8 }, { device = device })
      end)
      after_each(function()
        -- Nothing was launched: y is untouched, and the kernel still launches.
        assert.are.same({ 0, 0, 0, 0, 0, 0, 0, 0 }, y:to_table())
        k:launch(1, 8, x, y, 8, 1)
        assert.are.same({ 1, 1, 1, 1, 1, 1, 1, 1 }, y:to_table())
        y:fill(0)
      end)

      it("by count", function()
        fails_with("tocha.Kernel:launch: expected 4 arguments for axpy_entry_point, got 3",
          function() k:launch(1, 8, x, y, 8) end)
      end)
      it("by kind: a number where a tensor goes", function()
        fails_with("tocha.Kernel:launch: argument 1 (x): expected a tensor of f32, got a number",
          function() k:launch(1, 8, 5, y, 8, 1) end)
      end)
      it("by kind: a tensor where a number goes", function()
        fails_with("tocha.Kernel:launch: argument 3 (n): expected i64, got a tensor",
          function() k:launch(1, 8, x, y, x, 1) end)
      end)
      it("by dtype", function()
        local h = tocha.zeros({ 8 }, { dtype = "f16", device = device })
        fails_with("tocha.Kernel:launch: argument 2 (y): expected dtype f32, got f16",
          function() k:launch(1, 8, x, h, 8, 1) end)
      end)
      it("by integer value", function()
        fails_with("tocha.Kernel:launch: argument 3 (n): expected an integer (i64), got 2.5",
          function() k:launch(1, 8, x, y, 2.5, 1) end)
      end)
      it("by freed tensor", function()
        local z = tocha.zeros({ 8 }, { device = device })
        z:free()
        fails_with("tocha.Kernel:launch: argument 1 (x): tensor was freed",
          function() k:launch(1, 8, z, y, 8, 1) end)
      end)
      it("by a value that is neither tensor nor number", function()
        fails_with("tocha.Kernel:launch: argument 4: expected a tensor or a number, got string",
          function() k:launch(1, 8, x, y, 8, "1") end)
      end)
      it("by block size", function()
        fails_with("tocha.Kernel:launch: block: 2048 threads per block, at most 1024",
          function() k:launch(1, { 64, 32 }, x, y, 8, 1) end)
      end)
      it("by grid size", function()
        fails_with("tocha.Kernel:launch: grid.y: must be 1 to 65535, got 70000",
          function() k:launch({ 1, 70000 }, 8, x, y, 8, 1) end)
      end)
      it("by a grid of zero blocks", function()
        fails_with("tocha.Kernel:launch: grid[1]: expected a positive integer, got 0",
          function() k:launch(0, 8, x, y, 8, 1) end)
      end)
      it("by a negative grid", function()
        fails_with("tocha.Kernel:launch: grid[1]: expected a positive integer, got -1",
          function() k:launch(-1, 8, x, y, 8, 1) end)
      end)
      it("by a fractional grid", function()
        fails_with("tocha.Kernel:launch: grid[1]: expected a positive integer, got 1.5",
          function() k:launch(1.5, 8, x, y, 8, 1) end)
      end)
      it("by a grid that is neither a number nor a list", function()
        fails_with("tocha.Kernel:launch: grid: expected a number or {x [, y [, z]]}",
          function() k:launch("1", 8, x, y, 8, 1) end)
      end)
      it("by a grid of four dimensions", function()
        fails_with("tocha.Kernel:launch: grid: expected a number or {x [, y [, z]]}",
          function() k:launch({ 1, 1, 1, 1 }, 8, x, y, 8, 1) end)
      end)
      it("by a grid.x past 2^31 - 1", function()
        fails_with("tocha.Kernel:launch: grid.x: must be 1 to 2147483647, got 2147483648",
          function() k:launch({ 2 ^ 31, 1, 1 }, 8, x, y, 8, 1) end)
      end)
      it("by a block of zero threads", function()
        fails_with("tocha.Kernel:launch: block[1]: expected a positive integer, got 0",
          function() k:launch(1, 0, x, y, 8, 1) end)
      end)
      it("by a NaN block dimension", function()
        fails_with("tocha.Kernel:launch: block[2]: expected a positive integer, got nan",
          function() k:launch(1, { 8, 0 / 0 }, x, y, 8, 1) end)
      end)
      it("by an infinite integer argument", function()
        fails_with("tocha.Kernel:launch: argument 3 (n): expected an integer (i64), got inf",
          function() k:launch(1, 8, x, y, math.huge, 1) end)
      end)
      it("by a missing argument in the middle", function()
        fails_with("tocha.Kernel:launch: argument 3: expected a tensor or a number, got nil",
          function() k:launch(1, 8, x, y, nil, 1) end)
      end)
      it("by device", function()
        if device == "sim" then return end -- needs a second device
        local other = tocha.zeros({ 8 }, { device = "sim" })
        fails_with(("tocha.Kernel:launch: argument 2 (y): tensor is on sim, the launch is on %s"):format(x:device()),
          function() k:launch(1, 8, x, other, 8, 1) end)
      end)
    end)

    it("checks i32 range", function()
      local k = tocha.kernel { source = "__device__ void nop(int n) {}", name = "nop", params = "i32 n" }
      k:launch(1, 1, 2 ^ 31 - 1)
      fails_with("tocha.Kernel:launch: argument 1 (n): 2147483648 is out of i32 range",
        function() k:launch(1, 1, 2 ^ 31) end)
    end)
    end)
  end

  describe("launch_packed()", function()
    -- More than TOCHA_MAX_PARAMS (64) arguments were written past a fixed array before the count was checked
    -- (a crash after the next collection).
    local up = tocha.UpsampleNearest2dForward.new(1, 1, 32)
    it("refuses more arguments than a launch holds, before writing any", function()
      local args = {}
      for n = 1, 70 do args[n] = 1 end
      fails_with("tocha.launch_packed: args: expected at most 64 arguments, got 70",
        function() tocha.launch_packed(up.kernel, "sim", { 1, 1, 1 }, { 32, 1, 1 }, args) end)
      collectgarbage()
      assert.are.same({ 1, 1, 2 }, tocha.tensor({ 1, 1, 2 }, { device = "sim" }):to_table()) -- alive
    end)
    it("refuses a kernel that is not one", function()
      fails_with("tocha.launch_packed: kernel: expected a tocha kernel (op.kernel), got table",
        function() tocha.launch_packed(up, "sim", 1, 32, {}) end)
      fails_with("tocha.launch_packed: kernel: expected a tocha kernel (op.kernel), got number",
        function() tocha.launch_packed(3, "sim", 1, 32, {}) end)
    end)
    it("refuses grids and blocks that are not {x [, y [, z]]} of positive integers", function()
      -- One number was copied to all three axes, fractions truncated.
      local x, y = tocha.ones({ 1, 1, 1, 32 }, { device = "sim" }), tocha.zeros({ 1, 1, 1, 32 }, { device = "sim" })
      local args = up:pack_args({ x }, {}, y)
      fails_with("tocha.launch_packed: grid[1]: expected a positive integer, got 1.5",
        function() tocha.launch_packed(up.kernel, "sim", 1.5, 32, args) end)
      fails_with("tocha.launch_packed: block: expected a number or {x [, y [, z]]}",
        function() tocha.launch_packed(up.kernel, "sim", 1, { 32, 1, 1, 1 }, args) end)
      tocha.launch_packed(up.kernel, "sim", 1, 32, args) -- a number is x alone
      assert.are.same(x:to_table(true), y:to_table(true))
    end)
    it("refuses a list with holes, other keys or values that are not arguments", function()
      fails_with("tocha.launch_packed: args[2]: expected a number or an address (uint64_t), got nil",
        function() tocha.launch_packed(up.kernel, "sim", { 1, 1, 1 }, { 32, 1, 1 }, { 1, nil, 3 }) end)
      fails_with("tocha.launch_packed: args: expected a list, got the key \"x\"",
        function() tocha.launch_packed(up.kernel, "sim", { 1, 1, 1 }, { 32, 1, 1 }, { x = 1 }) end)
      fails_with("tocha.launch_packed: args[1]: expected a number or an address (uint64_t), got string",
        function() tocha.launch_packed(up.kernel, "sim", { 1, 1, 1 }, { 32, 1, 1 }, { "x" }) end)
    end)
  end)
  describe("a kernel that reaches outside its tensors, on sim", function()
    -- Every thread writes its own element; thread 0 also writes x[at].
    local POKE = [[
__device__ void poke(float *x, long long n, long long at) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 1.0f;
  if (i == 0) x[at] = 2.0f;
}]]
    local FAULT = "^tocha%.Kernel:launch: kernel poke_entry_point: sim: illegal memory access at 0x%x+ " ..
      "%(outside every allocation%): " ..
      "the launch stopped there, and what it wrote before stays$"
    local k
    before_each(function() k = tocha.kernel { source = POKE, name = "poke", params = "f32* x, i64 n, i64 at" } end)

    local function faults(grid, x, n, at)
      local ok, err = pcall(k.launch, k, grid, 256, x, n, at)
      assert.is_false(ok)
      assert.truthy(tostring(err):find(FAULT), err)
    end

    it("fails the launch past a tensor's end (its 256-byte rounding), not the process", function()
      local x = tocha.zeros({ 1000 }, { device = "sim" })
      k:launch(4, 256, x, 1000, 1023) -- byte 4092: inside the allocation's rounding to 4096
      faults(4, x, 1000, 1024) -- the guard page
      faults(4, x, 1000, 2047) -- its last element
      -- The process goes on, and so do launches.
      x:fill(0)
      k:launch(4, 256, x, 1000, 999)
      local t = x:to_table()
      assert.are.equal(1000, #t)
      for i = 1, 1000 do assert.are.equal(1, t[i]) end
    end)

    -- (A wild index far from every tensor faults or not as the process's memory lies, on sim as
    -- on a GPU: these cases are the pages that are there to fault.)
    it("fails the launch just before a tensor's start, and keeps the allocation's size safe", function()
      -- 1000 floats fill their page: the elements before them are on the read-only page that
      -- holds the allocation's size.
      local x = tocha.zeros({ 1000 }, { device = "sim" })
      faults(4, x, 1000, -1)
      faults(4, x, 1000, -1024)
      -- 100 floats leave room below them in their page: a write there changes nothing tocha
      -- keeps, and the tensor is released as usual.
      local y = tocha.zeros({ 100 }, { device = "sim" })
      k:launch(1, 256, y, 100, -64)
      x:free()
      y:free()
      local z = tocha.ones({ 1000 }, { device = "sim" })
      assert.are.equal(1000, #z:to_table())
    end)

    it("stops a launch spread over the worker threads", function()
      local x = tocha.zeros({ 2 ^ 20 }, { device = "sim" })
      faults(4096, x, 2 ^ 20, 2 ^ 20 + 64)
      x:fill(0)
      k:launch(4096, 256, x, 2 ^ 20, 0)
      local t, ones = x:to_table(), 0
      for i = 1, #t do if t[i] == 1 then ones = ones + 1 end end
      assert.are.equal(2, t[1]) -- thread 0 wrote x[0] twice
      assert.are.equal(2 ^ 20 - 1, ones)
    end)

    it("leaves faults outside launches to the process: they still end it", function()
      local _, _, status = process.run { args = { "-e", [[
        local tocha = require "tocha"
        local x = tocha.zeros({ 8 }, { device = "sim" })
        tocha.kernel { source = "__device__ void f(float *x) { x[0] = 1.0f; }", name = "f", params = "f32* x" }
          :launch(1, 1, x)
        require("ffi").cast("int *", 16)[0] = 1
        print("alive")]] }, env = { TOCHA_CACHE_DIR = process.tempdir() } }
      assert.are_not.equal(0, status)
    end)
  end)
end)
