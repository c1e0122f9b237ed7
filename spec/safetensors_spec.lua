-- tocha.save / tocha.load: safetensors files. Round trips of every dtype, bit for bit; the
-- bytes tocha writes read back here by the format's definition (not by tocha.load); a file
-- built here byte by byte loaded by tocha; and malformed files refused with errors naming the
-- problem, the session usable after. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
local ffi = require "ffi"
local json = require "dkjson"
local ref = require "support.reference"
local files = require "support.files"
local slurp, spit, bytes_of = files.slurp, files.spit, files.bytes_of

local function tmp() return os.tmpname() end

local function le64(n)
  local out = {}
  for i = 1, 8 do out[i] = string.char(n % 256); n = math.floor(n / 256) end
  return table.concat(out)
end

-- A file of the given header table and data bytes, the header padded to 8 bytes.
local function file_of(header, data)
  local text = json.encode(header)
  text = text .. (" "):rep((8 - #text % 8) % 8)
  return le64(#text) .. text .. data
end

local function random(shape, dt, device, seed)
  local lo, hi = -1000, 1000
  if dt == "u8" then lo, hi = 0, 256 end
  return tocha.rand(shape, { dtype = dt, device = device, seed = seed, low = lo, high = hi })
end

describe("tocha.save and tocha.load", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("round-trip every dtype bit for bit, with metadata, on the device asked for", function()
        local tensors, seed = {}, 0
        for _, dt in ipairs(ref.all_dtypes) do
          seed = seed + 1
          tensors["t_" .. dt] = random({ 2, 3, 5 }, dt, device, seed)
        end
        tensors.scalarish = random({ 1 }, "f32", device, 99)
        local path = tmp()
        tocha.save(path, tensors, { step = "12", note = "a run" })
        local back, meta = tocha.load(path, { device = device })
        os.remove(path)
        assert.are.same({ step = "12", note = "a run" }, meta)
        local count = 0
        for name, t in pairs(tensors) do
          count = count + 1
          local b = back[name]
          assert.truthy(b, name)
          assert.are.equal(t:dtype(), b:dtype())
          assert.are.same(t:shape(), b:shape())
          assert.are.equal(tocha.device(device).name, b:device())
          assert.are.equal(bytes_of(t), bytes_of(b))
        end
        local n = 0
        for _ in pairs(back) do n = n + 1 end
        assert.are.equal(count, n)
      end)

      it("write what the format defines: length, JSON header padded to 8, ranges in name order", function()
        local a = tocha.tensor({ 1, 2, 3 }, { device = device })             -- f32
        local b = random({ 2, 2 }, "f16", device, 5)
        local path = tmp()
        tocha.save(path, { beta = b, alpha = a })
        local s = slurp(path)
        os.remove(path)
        local n = 0
        for i = 8, 1, -1 do n = n * 256 + s:byte(i) end
        assert.are.equal(0, n % 8)
        local header = json.decode(s:sub(9, 8 + n))
        assert.are.same({ dtype = "F32", shape = { 3 }, data_offsets = { 0, 12 } }, header.alpha)
        assert.are.same({ dtype = "F16", shape = { 2, 2 }, data_offsets = { 12, 20 } }, header.beta)
        assert.are.equal(8 + n + 20, #s)
        local data = s:sub(9 + n)
        assert.are.equal(bytes_of(a), data:sub(1, 12))
        assert.are.equal(bytes_of(b), data:sub(13, 20))
        -- 1.0f little-endian
        assert.are.equal(string.char(0, 0, 0x80, 0x3f), data:sub(1, 4))
      end)

      it("load a file built byte by byte from the format's definition", function()
        local f64 = ffi.new("double[2]", 0.25, -3)
        local i32 = ffi.new("int32_t[3]", 7, -8, 2 ^ 31 - 1)
        local data = ffi.string(i32, 12) .. ffi.string(f64, 16)
        local path = tmp()
        spit(path, file_of({ ints = { dtype = "I32", shape = { 3, 1 }, data_offsets = { 0, 12 } },
          halfs = { dtype = "F64", shape = { 2 }, data_offsets = { 12, 28 } },
          __metadata__ = { format = "pt" } }, data))
        local t, meta = tocha.load(path, { device = device })
        os.remove(path)
        assert.are.same({ format = "pt" }, meta)
        assert.are.same({ 7, -8, 2 ^ 31 - 1 }, t.ints:to_table(true))
        assert.are.same({ 3, 1 }, t.ints:shape())
        assert.are.same({ 0.25, -3 }, t.halfs:to_table(true))
        -- a scalar (shape [], as PyTorch writes a BatchNorm's num_batches_tracked) is shape {1}
        local count = ffi.new("int64_t[1]", 123456789012)
        spit(path, file_of({ n = { dtype = "I64", shape = setmetatable({}, { __jsontype = "array" }), data_offsets = { 0, 8 } } },
          ffi.string(count, 8)))
        t = tocha.load(path, { device = device })
        os.remove(path)
        assert.are.same({ 1 }, t.n:shape())
        assert.are.same({ 123456789012 }, t.n:to_table(true))
      end)

      it("refuse malformed files with the problem named, and go on", function()
        local path = tmp()
        local good = { x = { dtype = "F32", shape = { 2 }, data_offsets = { 0, 8 } } }
        local cases = {
          { "abc", "not a safetensors file: shorter than its 8-byte header length" },
          { le64(2 ^ 40) .. "{}", "not a safetensors file: a header of" },
          { le64(64) .. "{}", "truncated: the header says 64 bytes" },
          { file_of({ x = 3 }, ""), 'tensor "x": expected an object' },
          { le64(8) .. "[1, 2]  ", "the header is not a JSON object" },
          { le64(8) .. "{oops}  ", "the header is not a JSON object" },
          { file_of({ x = { dtype = "F8", shape = { 2 }, data_offsets = { 0, 2 } } }, "ab"), 'dtype "F8" is not one tocha has' },
          { file_of({ x = { dtype = "F32", shape = { 2, -1 }, data_offsets = { 0, 8 } } }, ("\0"):rep(8)), "shape[2]: expected a size, got -1" },
          { file_of({ x = { dtype = "F32", shape = { 3 }, data_offsets = { 0, 8 } } }, ("\0"):rep(8)), "hold 8 bytes, its shape and dtype 12" },
          { file_of(good, ("\0"):rep(4)), "pass the end of the data (4 bytes)" },
          { file_of(good, ("\0"):rep(12)), "4 bytes of data follow the last tensor" },
          { file_of({ x = { dtype = "F32", shape = { 1 }, data_offsets = { 4, 8 } } }, ("\0"):rep(8)), "its data starts at byte 4, where 0 was expected" },
          { file_of({ x = { dtype = "F32", shape = { 1 }, data_offsets = { 0, 4 } }, __metadata__ = 5 }, ("\0"):rep(4)),
            "__metadata__: expected an object of strings" },
        }
        for _, case in ipairs(cases) do
          spit(path, case[1])
          local ok, message = pcall(tocha.load, path, { device = device })
          assert.is_false(ok, case[2])
          assert.truthy(message:find("tocha.load: " .. path .. ": ", 1, true), message)
          assert.truthy(message:find(case[2], 1, true), message)
        end
        local ok_null, null_message = pcall(tocha.load, path, ffi.cast("void *", 0))
        assert.is_false(ok_null)
        assert.truthy(null_message:find("tocha.load: options: expected a table {device=}, got cdata", 1, true), null_message)
        os.remove(path)
        local ok, message = pcall(tocha.load, path)
        assert.is_false(ok)
        assert.truthy(message:find(("tocha.load: path: %q: no such file"):format(path), 1, true), message)
        assert.are.equal(3, tocha.ones({ 3 }, { device = device }):to_table()[3] * 3) -- still usable
      end)

      it("name bad arguments to save", function()
        local t = tocha.ones({ 2 }, { device = device })
        local freed = tocha.ones({ 2 }, { device = device })
        freed:free()
        for _, case in ipairs({
          { "tocha.save: path: expected a file name, got 5", 5, { t = t } },
          { "tocha.save: tensors: expected a table of name = tensor, got nil", "x" },
          { 'tocha.save: tensors["w"]: expected a tensor, got 3', "x", { w = 3 } },
          { 'tocha.save: tensors["w"]: tensor was freed', "x", { w = freed } },
          { 'tocha.save: tensors: expected names that are non-empty UTF-8 strings other than __metadata__, without NUL bytes, got "__metadata__"',
            "x", { __metadata__ = t } },
          { 'tocha.save: metadata: expected UTF-8 string keys and values, got "a" = 1', "x", { t = t }, { a = 1 } },
          { "tocha.save: path: /nonexistent-dir/x: cannot create a file in its folder: No such file or directory", "/nonexistent-dir/x", { t = t } },
        }) do
          local ok, message = pcall(tocha.save, unpack(case, 2))
          assert.is_false(ok, case[1])
          assert.truthy(message:find(case[1], 1, true), message)
        end
      end)
    end)
  end
end)
