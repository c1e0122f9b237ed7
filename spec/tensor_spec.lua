-- Tensors on every device against plain-Lua references: constructors, fills, random fills,
-- casts, tables, copies, comparison. Shapes and values are random; the seed is printed.
local tocha = require "tocha"
local ref = require "support.reference"

local POISON = 77

-- Every element of t (flat, f64) equals expect(i) (1-based), within tol(i) when given.
local function assert_elements(t, expect, tol, label)
  local got = t:to_table(true)
  assert.are.equal(t:numel(), #got)
  for i = 1, #got do
    local e = expect(i)
    local ok
    if e ~= e then ok = got[i] ~= got[i]
    elseif tol then ok = math.abs(got[i] - e) <= tol(i, e)
    else ok = got[i] == e end
    if not ok then
      error(("%s: element %d is %.17g, expected %.17g"):format(label or "tensor", i, got[i], e), 2)
    end
  end
end

for _, dev in ipairs(ref.devices()) do
  describe("tocha.tensor on " .. dev.name .. dev.tag, function()
    local device = dev.name
    setup(function() ref.rng("tensor " .. device) end)

    describe("zeros(), ones(), full() and fill()", function()
      it("write every element of every dtype", function()
        for _, dt in ipairs(ref.all_dtypes) do
          local shape = ref.random_shape(4, 9)
          local value = ref.convert(math.random(-1000, 1000) / 8, dt)
          local t = tocha.empty(shape, { dtype = dt, device = device }):fill(POISON)
          t:fill(value)
          assert_elements(t, function() return value end, nil, dt)
          assert_elements(tocha.zeros(shape, { dtype = dt, device = device }), function() return 0 end, nil, dt)
          assert_elements(tocha.ones(shape, { dtype = dt, device = device }), function() return 1 end, nil, dt)
          assert_elements(tocha.full(shape, value, { dtype = dt, device = device }), function() return value end, nil, dt)
        end
      end)

      it("converts the fill value as a cast does", function()
        assert_elements(tocha.full({ 3 }, 300.7, { dtype = "u8", device = device }), function() return 255 end)
        assert_elements(tocha.full({ 3 }, -2.9, { dtype = "i32", device = device }), function() return -2 end)
        assert_elements(tocha.full({ 3 }, 1 / 3, { dtype = "f16", device = device }),
          function() return ref.convert(1 / 3, "f16") end)
      end)
    end)

    describe("rand() and randn()", function()
      it("give Philox uniform values exactly, for every dtype", function()
        for _, dt in ipairs(ref.all_dtypes) do
          local seed = math.random(0, 2 ^ 40)
          local low, high = -3, 5
          if dt == "u8" then low = 0 end
          local t = tocha.empty(ref.random_shape(3, 11), { dtype = dt, device = device }):fill(POISON)
          t:uniform(seed, low, high)
          local integer = ref.convert(0.5, dt) ~= 0.5
          assert_elements(t, function(i)
            return ref.convert(ref.uniform(i - 1, seed, low, high, integer), dt)
          end, nil, dt .. " seed " .. seed)
        end
      end)

      it("give Box-Muller normal values within one rounding, for every dtype", function()
        -- Devices' log() and cos() may differ from the host's in the last bits (a few ulps of
        -- f64); after that, one rounding to the dtype.
        for _, dt in ipairs(ref.all_dtypes) do
          local seed = math.random(0, 2 ^ 40)
          local mean, std = dt == "u8" and 100 or 0.5, 2
          local t = tocha.randn(ref.random_shape(3, 11), { dtype = dt, device = device, seed = seed,
            mean = mean, std = std })
          local integer = ref.convert(0.5, dt) ~= 0.5
          local exact = {}
          assert_elements(t, function(i)
            exact[i] = ref.normal(i - 1, seed, mean, std, false)
            return ref.convert(ref.normal(i - 1, seed, mean, std, integer), dt)
          end, function(i, e)
            if integer then return 1 end
            return math.abs(e) * ref.eps[dt] + 16 * 2 ^ -52 * (math.abs(mean) + math.abs(exact[i] - mean))
          end, dt .. " seed " .. seed)
        end
      end)

      it("uniform values stay within [low, high) and look uniform", function()
        local t = tocha.rand({ 100000 }, { dtype = "f64", device = device, seed = 7, low = 2, high = 4 })
        local v = t:to_table(true)
        local sum, lo, hi = 0, math.huge, -math.huge
        for i = 1, #v do
          sum = sum + v[i]
          lo, hi = math.min(lo, v[i]), math.max(hi, v[i])
        end
        assert.is_true(lo >= 2 and hi < 4)
        assert.is_true(math.abs(sum / #v - 3) < 0.01)
      end)

      it("is reproducible for a seed and differs between seeds", function()
        local a = tocha.randn({ 64 }, { device = device, seed = 11 })
        local b = tocha.randn({ 64 }, { device = device, seed = 11 })
        local c = tocha.randn({ 64 }, { device = device, seed = 12 })
        assert.is_true(tocha.compare(a, b, { rtol = 0, atol = 0 }).ok)
        assert.is_false(tocha.allclose(a, c))
      end)
    end)

    describe("cast()", function()
      -- Values that exercise rounding, saturation, truncation and NaN.
      local specials = { 0, -0.0, 1, -1, 0.5, -0.5, 1.5, 2.5, -2.5, 1 / 3, 255, 256, 300.9, -7.99,
        65504, 65520, 1e6, -1e6, 2 ^ 31, -2 ^ 31 - 1, 2 ^ 53, 1e30, -1e30, 1e-8, 3.0e-39,
        0 / 0, math.huge, -math.huge }

      it("converts between every pair of dtypes as the reference does", function()
        for _, from in ipairs(ref.all_dtypes) do
          -- The source holds the specials as its dtype stores them.
          local src = tocha.tensor(specials, { dtype = from, device = device })
          local stored = src:to_table(true)
          for i, v in ipairs(specials) do
            local e = ref.convert(v, from)
            assert(stored[i] == e or (e ~= e and stored[i] ~= stored[i]),
              ("%s stored %.17g as %.17g, expected %.17g"):format(from, v, stored[i], e))
          end
          for _, to in ipairs(ref.all_dtypes) do
            local dst = tocha.empty({ #specials }, { dtype = to, device = device }):fill(POISON)
            src:cast_into(dst)
            assert_elements(dst, function(i)
              local e = ref.convert(stored[i], to)
              if from == "i64" and to ~= "i64" and ref.convert(0.5, to) ~= 0.5 then
                return ref.convert(stored[i], to) -- integer to integer keeps bits: same here
              end
              return e
            end, nil, from .. " -> " .. to)
          end
        end
      end)

      it("keeps every bit of i64 between i64 tensors", function()
        local big = 2 ^ 53 + 2
        local t = tocha.tensor({ big, -big }, { dtype = "i64", device = device })
        local c = t:cast("i64")
        assert.are.same({ big, -big }, c:to_table())
      end)

      it("converts random values of random shapes", function()
        for _ = 1, 4 do
          local from = ref.all_dtypes[math.random(#ref.all_dtypes)]
          local to = ref.all_dtypes[math.random(#ref.all_dtypes)]
          local src = tocha.rand(ref.random_shape(4, 8), { dtype = from, device = device,
            seed = math.random(0, 1e6), low = -300, high = 300 })
          local values = src:to_table(true)
          local dst = src:cast(to)
          assert.are.same(src:shape(), dst:shape())
          assert_elements(dst, function(i) return ref.convert(values[i], to) end, nil, from .. " -> " .. to)
        end
      end)
    end)

    describe("tensor() and to_table()", function()
      it("round-trip nested tables of every dtype", function()
        for _, dt in ipairs(ref.all_dtypes) do
          local shape = ref.random_shape(3, 5)
          local n, flat = 1, {}
          for _, s in ipairs(shape) do n = n * s end
          for i = 1, n do flat[i] = ref.convert(math.random(-20000, 20000) / 16, dt) end
          local pos = 0
          local function nest(d)
            local out = {}
            for i = 1, shape[d] do
              if d == #shape then pos = pos + 1; out[i] = flat[pos] else out[i] = nest(d + 1) end
            end
            return out
          end
          local data = nest(1)
          local t = tocha.tensor(data, { dtype = dt, device = device })
          assert.are.same(shape, t:shape())
          assert.are.same(data, t:to_table())
          assert.are.same(flat, t:to_table(true))
        end
      end)

      it("to_table() reads the elements as they are, with no device memory beside the tensor", function()
        local specials = { 0 / 0, math.huge, -math.huge, -0.0, 2 ^ -24, 2 ^ -133, 65504, -1.5 }
        for _, dt in ipairs({ "f16", "bf16", "f32", "f64" }) do
          local t = tocha.tensor(specials, { dtype = dt, device = device })
          local before = tocha.memory.stats(device).allocations
          local got = t:to_table()
          assert.are.equal(before, tocha.memory.stats(device).allocations, dt)
          assert.is_true(got[1] ~= got[1], dt) -- NaN
          for i = 2, #specials do
            local want = ref.convert(specials[i], dt)
            assert.are.equal(want, got[i], ("%s element %d"):format(dt, i))
            assert.are.equal(1 / want, 1 / got[i], ("%s element %d: the sign of zero"):format(dt, i))
          end
        end
      end)
    end)

    describe("methods", function()
      it("report shape, dtype, device, numel and nbytes", function()
        local t = tocha.zeros({ 2, 3, 4 }, { dtype = "bf16", device = device })
        assert.are.same({ 2, 3, 4 }, t:shape())
        assert.are.equal(3, t:size(2))
        assert.are.equal(3, t:dim())
        assert.are.equal("bf16", t:dtype())
        assert.are.equal(tocha.device(device).name, t:device())
        assert.are.equal(24, t:numel())
        assert.are.equal(48, t:nbytes())
      end)

      it("print as matrices, a 2-D slice at a time under its index, dtype, shape and device last", function()
        local name = tocha.device(device).name
        local t = tocha.tensor({ { { { 0.125, -1.5, 2 }, { 3, 0, -0.75 } } } }, { device = device })
        assert.are.equal(table.concat({
          "[1,1,:,:]",
          "  0.1250  -1.5000   2.0000",
          "  3.0000   0.0000  -0.7500",
          "",
          "tocha.Tensor f32 [1x1x2x3] " .. name }, "\n"), tostring(t))
        assert.are.equal(" 1  7\n\ntocha.Tensor i32 [2] " .. name,
          tostring(tocha.tensor({ 1, 7 }, { dtype = "i32", device = device })))
        assert.are.equal("1e-04 *\n 1.0000  2.5000\n\ntocha.Tensor f32 [2] " .. name,
          tostring(tocha.tensor({ 0.0001, 0.00025 }, { device = device })))
        local big = tocha.ones({ 2, 3, 40, 50 }, { dtype = "f16", device = device })
        local text = tostring(big)
        assert.truthy(text:find(" 1  1  1  ...  1  1  1\n", 1, true), text) -- edges of a row
        assert.truthy(text:find("\n...\n", 1, true), text)                 -- rows left out
        assert.truthy(text:find("[2,3,:,:]", 1, true), text)
        local last = "\ntocha.Tensor f16 [2x3x40x50] " .. name
        assert.are.equal(last, text:sub(-#last))
        local lines = select(2, text:gsub("\n", ""))
        assert.is_true(lines < 60, tostring(lines))
        big:free()
        assert.are.equal("tocha.Tensor f16 [2x3x40x50] " .. name .. " (freed)", tostring(big))
      end)

      it("clone() and copy() move values between tensors and devices", function()
        local a = tocha.rand({ 5, 7 }, { dtype = "f16", device = device, seed = 3 })
        local b = a:clone()
        assert.are.same(a:to_table(), b:to_table())
        local c = tocha.empty({ 5, 7 }, { dtype = "f16", device = "sim" }):fill(POISON)
        c:copy(a)
        assert.are.same(a:to_table(), c:to_table())
        local d = c:clone(device)
        assert.are.equal(tocha.device(device).name, d:device())
        assert.are.same(a:to_table(), d:to_table())
      end)

      it("write() and read() move raw host buffers", function()
        local ffi = require "ffi"
        local src = ffi.new("int32_t[6]", { 1, -2, 3, -4, 5, -6 })
        local t = tocha.empty({ 2, 3 }, { dtype = "i32", device = device }):write(src, 24)
        assert.are.same({ { 1, -2, 3 }, { -4, 5, -6 } }, t:to_table())
        local out = ffi.new("int32_t[2]")
        t:read(out, 3, 2)
        assert.are.same({ -4, 5 }, { out[0], out[1] })
        local host = t:to_host()
        assert.are.equal(-6, host[5])
      end)

      it("free() is idempotent and later use is an error", function()
        local t = tocha.ones({ 4 }, { device = device })
        t:free()
        t:free()
        assert.is_true(t:is_freed())
        assert.has_error(function() t:to_table() end, "tocha.Tensor:to_table: tensor was freed")
      end)
    end)

    describe("compare() and allclose()", function()
      it("report max abs and rel differences and mismatches as the reference does", function()
        for _, dt in ipairs({ "f32", "f64", "f16", "bf16", "i32" }) do
          local shape = ref.random_shape(3, 9)
          local a = tocha.rand(shape, { dtype = dt, device = device, seed = math.random(0, 1e6), low = -9, high = 9 })
          local b = tocha.rand(shape, { dtype = dt, device = device, seed = math.random(0, 1e6), low = -9, high = 9 })
          local va, vb = a:to_table(true), b:to_table(true)
          local rtol, atol = 0.1, 0.5
          local max_abs, max_rel, bad, first = 0, 0, 0, nil
          for i = 1, #va do
            local d = math.abs(va[i] - vb[i])
            max_abs = math.max(max_abs, d)
            if d > 0 then max_rel = math.max(max_rel, d / math.max(math.abs(vb[i]), 1e-300)) end
            if d > atol + rtol * math.abs(vb[i]) then bad = bad + 1; first = first or i end
          end
          local r = tocha.compare(a, b, { rtol = rtol, atol = atol })
          assert.are.equal(max_abs, r.max_abs)
          assert.is_true(math.abs(r.max_rel - max_rel) <= 1e-12 * max_rel)
          assert.are.equal(bad, r.mismatched)
          assert.are.equal(first, r.first_mismatch)
          assert.are.equal(bad == 0, tocha.allclose(a, b, rtol, atol))
        end
      end)

      it("treats NaN as equal to NaN only", function()
        local a = tocha.tensor({ 0 / 0, 1, 0 / 0 }, { device = device })
        local b = tocha.tensor({ 0 / 0, 0 / 0, 2 }, { device = device })
        local r = tocha.compare(a, b)
        assert.are.equal(2, r.mismatched)
        assert.are.equal(2, r.first_mismatch)
      end)

      it("compares tensors of different dtypes in f64", function()
        local a = tocha.tensor({ 1, 2, 3 }, { dtype = "i32", device = device })
        local b = tocha.tensor({ 1, 2, 3.25 }, { dtype = "f16", device = device })
        local r = tocha.compare(a, b, { rtol = 0, atol = 0 })
        assert.are.equal(0.25, r.max_abs)
        assert.are.equal(1, r.mismatched)
      end)
    end)
  end)
end
