-- tocha.save_npy / tocha.load_npy: NumPy's .npy format. Round trips of every dtype it has, bit
-- for bit; the bytes tocha writes read back here by the format's definition; files built here
-- byte by byte (versions 1.0 and 2.0, a 0-d array) loaded; bad files refused with the reason,
-- the session usable after. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
local ffi = require "ffi"
local ref = require "support.reference"
local files = require "support.files"
local slurp, spit, bytes_of = files.slurp, files.spit, files.bytes_of

-- A version major.0 file: the header padded to a 64-byte data offset.
local function npy(header, data, major)
  major = major or 1
  local lead = 6 + 2 + (major == 1 and 2 or 4)
  local pad = (64 - (lead + #header + 1) % 64) % 64
  header = header .. (" "):rep(pad) .. "\n"
  local n, len = #header, {}
  for i = 1, (major == 1 and 2 or 4) do len[i] = string.char(n % 256); n = math.floor(n / 256) end
  return "\147NUMPY" .. string.char(major, 0) .. table.concat(len) .. header .. data
end

describe("tocha.save_npy and tocha.load_npy", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("round-trip every dtype NumPy has, bit for bit, any shape", function()
        local path = os.tmpname()
        local seed = 0
        for _, dt in ipairs({ "f32", "f64", "f16", "u8", "i32", "i64" }) do
          for _, shape in ipairs({ { 7 }, { 2, 3, 4 }, { 1, 1, 2, 1, 3 } }) do
            seed = seed + 1
            local lo, hi = -1000, 1000
            if dt == "u8" then lo, hi = 0, 256 end
            local t = tocha.rand(shape, { dtype = dt, device = device, seed = seed, low = lo, high = hi })
            tocha.save_npy(path, t)
            local back = tocha.load_npy(path, { device = device })
            assert.are.equal(dt, back:dtype())
            assert.are.same(shape, back:shape())
            assert.are.equal(bytes_of(t), bytes_of(back))
          end
        end
        os.remove(path)
      end)

      it("write the format's bytes: magic, version 1.0, the dict, data at a 64-byte boundary", function()
        local path = os.tmpname()
        tocha.save_npy(path, tocha.tensor({ 1, 2, 3 }, { device = device }))
        local s = slurp(path)
        os.remove(path)
        assert.are.equal("\147NUMPY\1\0", s:sub(1, 8))
        local n = s:byte(9) + 256 * s:byte(10)
        assert.are.equal(0, (10 + n) % 64)
        local header = s:sub(11, 10 + n)
        assert.truthy(header:find("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 1, true), header)
        assert.are.equal("\n", header:sub(-1))
        assert.are.equal(ffi.string(ffi.new("float[3]", 1, 2, 3), 12), s:sub(11 + n))
        tocha.save_npy(path, tocha.zeros({ 2, 5 }, { device = device, dtype = "i64" }))
        assert.truthy(slurp(path):find("'descr': '<i8', 'fortran_order': False, 'shape': (2, 5), }", 1, true))
        os.remove(path)
      end)

      it("load files built from the format's definition: versions 1.0 and 2.0, a 0-d array", function()
        local path = os.tmpname()
        local d = ffi.new("double[6]", 1, 2, 3, 4, 5, 6.5)
        spit(path, npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", ffi.string(d, 48)))
        local t = tocha.load_npy(path, { device = device })
        assert.are.same({ 2, 3 }, t:shape())
        assert.are.same({ 1, 2, 3, 4, 5, 6.5 }, t:to_table(true))
        local i = ffi.new("int32_t[2]", -5, 7)
        spit(path, npy('{"descr": "<i4", "fortran_order": False, "shape": (2,)}', ffi.string(i, 8), 2))
        assert.are.same({ -5, 7 }, tocha.load_npy(path, { device = device }):to_table(true))
        spit(path, npy("{'descr': '|u1', 'fortran_order': False, 'shape': (), }", "\200"))
        local z = tocha.load_npy(path, { device = device })
        assert.are.same({ 1 }, z:shape())
        assert.are.same({ 200 }, z:to_table(true))
        os.remove(path)
      end)

      it("refuse what they cannot read or write, naming why, and go on", function()
        local path = os.tmpname()
        local f4 = ffi.string(ffi.new("float[2]", 1, 2), 8)
        for _, case in ipairs({
          { "NOTNUMPY", "not a .npy file" },
          { npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", f4), "big-endian data (>f4) is not read" },
          { npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", f4), "dtype <c8 has no tocha dtype" },
          { npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", f4), "the array is in Fortran order" },
          { npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f4), "truncated: 12 bytes of data wanted, 8 there" },
          { npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f4), "more data than its shape holds" },
          { npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 0), }", f4), "more data than its shape holds" },
          { npy("{'descr': '<f4', 'fortran_order': False}", f4), "the header has no 'shape' tuple" },
          { "\147NUMPY\9\0", "a .npy version 9.0" },
        }) do
          spit(path, case[1])
          local ok, message = pcall(tocha.load_npy, path, { device = device })
          assert.is_false(ok, case[2])
          assert.truthy(message:find("tocha.load_npy: " .. path .. ": ", 1, true), message)
          assert.truthy(message:find(case[2], 1, true), message)
        end
        local ok, message = pcall(tocha.save_npy, path, tocha.ones({ 2 }, { device = device, dtype = "bf16" }))
        assert.is_false(ok)
        assert.truthy(message:find('tocha.save_npy: t: bf16 has no NumPy dtype: cast it (t:cast("f32")) first', 1, true), message)
        ok, message = pcall(tocha.load_npy, path, ffi.cast("void *", 0))
        assert.is_false(ok)
        assert.truthy(message:find("tocha.load_npy: options: expected a table {device=}, got cdata", 1, true), message)
        ok, message = pcall(tocha.save_npy, path, 5)
        assert.is_false(ok)
        assert.truthy(message:find("tocha.save_npy: t: expected a tensor, got 5", 1, true), message)
        os.remove(path)
        assert.are.equal(2, tocha.ones({ 2 }, { device = device }):to_table()[2] * 2)
      end)
    end)
  end
end)
