-- A seeded fuzzer of the file readers: files that tocha.save and tocha.save_npy write (several
-- dtypes and shapes, empty ones among them, with metadata) are mutated (bytes flipped, set to edge values, cut short,
-- lengthened, bytes inserted and removed, the header length changed, JSON and dict fields
-- edited) and read back. Each read must either refuse the file with "tocha.load: ..." or
-- "tocha.load_npy: ..." (never a raw Lua or FFI error, a crash or a hang) or return tensors; an
-- unmutated file must come back equal. TOCHA_FILE_FUZZ_CASES sets the number of mutated files
-- (default 3000; a third as many ONNX files, mutated from fuzz/corpus/onnx_file and read by
-- tocha.onnx.read, the first TOCHA_FILE_FUZZ_IMPORTS (12) of those read imported by
-- tocha.onnx.load), TOCHA_FILE_FUZZ_SEED
-- the seed (default: the time, printed).
local tocha = require "tocha"
require "tocha.assertions"
local files = require "support.files"
local process = require "support.process"

local CASES = tonumber(os.getenv("TOCHA_FILE_FUZZ_CASES") or "3000")
local SEED = tonumber(os.getenv("TOCHA_FILE_FUZZ_SEED") or tostring(os.time()))
local ONNX_CASES = math.max(10, math.floor(CASES / 3))
-- Imports compile the kernels of the shapes a mutation makes (seconds each on sim): the first
-- files read are imported, this many.
local ONNX_IMPORTS = tonumber(os.getenv("TOCHA_FILE_FUZZ_IMPORTS") or "12")

local function le(n, bytes)
  local out = {}
  for i = 1, bytes do out[i] = string.char(n % 256); n = math.floor(n / 256) end
  return table.concat(out)
end

local EDGE = { 0, 1, 0x7f, 0x80, 0xff, 0x22, 0x5b, 0x5d, 0x7b, 0x7d, 0x2c, 0x3a, 0x27, 0x28, 0x29, 0x2d, 0x30, 0x39 }
local WORDS = { '"F32"', '"BF16"', '"X"', "-1", "1e999", "1.5", "[]", "{}", "null", "true", '"__metadata__"', "[0,4,8]",
  '"\\u0000"', "4294967296", "(1,)", "()", "(0,)", "[0]", "[2,0]", "'<f4'", "'>f8'", "True", "False", "9007199254740993" }

-- One random mutation of s.
local function mutate(s, rng)
  local n, kind = #s, rng(1, 9)
  local at = rng(1, math.max(n, 1))
  if kind == 1 then -- flip a bit
    local b = s:byte(at) or 0
    return s:sub(1, at - 1) .. string.char(bit.bxor(b, bit.lshift(1, rng(0, 7)))) .. s:sub(at + 1)
  elseif kind == 2 then -- an edge byte
    return s:sub(1, at - 1) .. string.char(EDGE[rng(#EDGE)]) .. s:sub(at + 1)
  elseif kind == 3 then -- cut short
    return s:sub(1, rng(0, n - 1))
  elseif kind == 4 then -- lengthened
    return s .. ("\0"):rep(rng(1, 64))
  elseif kind == 5 then -- bytes inserted
    local bytes = {}
    for i = 1, rng(1, 8) do bytes[i] = string.char(rng(0, 255)) end
    return s:sub(1, at - 1) .. table.concat(bytes) .. s:sub(at)
  elseif kind == 6 then -- bytes removed
    return s:sub(1, at - 1) .. s:sub(at + rng(1, 8))
  elseif kind == 7 then -- a header length: safetensors' 8 bytes, or .npy's 2 at offset 8
    local lengths = { 0, 1, 7, n - 8, n, n + 1, 2 ^ 32, 2 ^ 53, 2 ^ 63 }
    local v = lengths[rng(#lengths)]
    if s:sub(1, 6) == "\147NUMPY" then return s:sub(1, 8) .. le(v % 65536, 2) .. s:sub(11) end
    return le(v, 8) .. s:sub(9)
  else -- a word of JSON or of a Python dict in place of a token of the header
    local header_end = math.min(n, 200)
    local from = rng(9, math.max(9, header_end))
    local to = from + rng(0, 6)
    return s:sub(1, from - 1) .. WORDS[rng(#WORDS)] .. s:sub(to + 1)
  end
end

-- The message must name the reader the spec called, at the start of the tocha error.
local function clean_refusal(err, reader)
  local text = tostring(err)
  return text:find("^tocha%." .. reader .. ": ") ~= nil or text:find("^[^\n]-:%d+: tocha%." .. reader .. ": ") ~= nil
end

describe("the file readers under mutated files", function()
  it(("refuse or read each of %d mutated safetensors and .npy files, and read unmutated ones back equal"):format(CASES), function()
    print(("[file fuzz] seed %d"):format(SEED))
    math.randomseed(SEED)
    local rng = math.random
    local dir = process.tempdir()
    local originals = {}
    local sources = {
      { "f32", { 2, 3 } }, { "f16", { 5 } }, { "bf16", { 1, 2, 2 } }, { "u8", { 7 } }, { "i32", { 3, 1 } },
      { "i64", { 2 } }, { "f64", { 1, 1, 1, 2 } }, { "f32", { 2, 0, 3 } }, { "u8", { 0 } },
    }
    for i, src in ipairs(sources) do
      local a = tocha.rand(src[2], { dtype = src[1], device = "sim", seed = i, high = 9 })
      local b = tocha.rand({ 3 }, { dtype = src[1], device = "sim", seed = 100 + i, high = 9 })
      local path = ("%s/%d.safetensors"):format(dir, i)
      tocha.save(path, { a = a, b = b }, { note = "case " .. i })
      local back = tocha.load(path, { device = "sim" })
      assert.tensor.equal(a, back.a)
      assert.tensor.equal(b, back.b)
      originals[#originals + 1] = { "load", files.slurp(path) }
      if src[1] ~= "bf16" then
        local npy = ("%s/%d.npy"):format(dir, i)
        tocha.save_npy(npy, a)
        assert.tensor.equal(a, tocha.load_npy(npy, { device = "sim" }))
        originals[#originals + 1] = { "load_npy", files.slurp(npy) }
      end
    end
    local path = dir .. "/mutated"
    local refused, read, bad = 0, 0, {}
    for _ = 1, CASES do
      local original = originals[rng(#originals)]
      local s = original[2]
      for _ = 1, rng(1, 3) do s = mutate(s, rng) end
      files.spit(path, s)
      local ok, err = pcall(tocha[original[1]], path, { device = "sim" })
      if ok then
        read = read + 1
      elseif clean_refusal(err, original[1]) then
        refused = refused + 1
      elseif #bad < 10 then
        bad[#bad + 1] = tostring(err)
      end
    end
    process.remove_tree(dir)
    print(("[file fuzz] seed %d: %d refused, %d read, %d bad"):format(SEED, refused, read, #bad))
    assert.are.same({}, bad, "seed " .. SEED)
    assert.are.equal(CASES, refused + read)
    -- the session goes on
    assert.are.same({ 1, 1 }, tocha.ones({ 2 }, { device = "sim" }):to_table())
  end)

  it(("refuse or read each of %d mutated ONNX files, importing the first %d read"):format(ONNX_CASES, ONNX_IMPORTS), function()
    print(("[onnx fuzz] seed %d"):format(SEED))
    math.randomseed(SEED)
    local rng = math.random
    local seeds = {}
    local corpus = (os.getenv("TOCHA_SOURCE_DIR") or ".") .. "/fuzz/corpus/onnx_file/"
    for _, name in ipairs({ "typed.onnx", "head.onnx", "neck.onnx" }) do
      seeds[#seeds + 1] = files.slurp(corpus .. name)
      assert.truthy(tocha.onnx.read(corpus .. name).nodes[1], name)
    end
    local dir = process.tempdir()
    local path = dir .. "/mutated.onnx"
    local refused, read, imported, bad = 0, 0, 0, {}
    for _ = 1, ONNX_CASES do
      local s = seeds[rng(#seeds)]
      for _ = 1, rng(1, 3) do s = mutate(s, rng) end
      files.spit(path, s)
      local ok, err = pcall(tocha.onnx.read, path)
      if ok then
        read = read + 1
        if read <= ONNX_IMPORTS then -- the importer over what the reader let through
          local loaded, lerr = pcall(tocha.onnx.load, path, { device = "sim" })
          if loaded then
            imported = imported + 1
          elseif not clean_refusal(lerr, "onnx.load") and #bad < 10 then
            bad[#bad + 1] = tostring(lerr)
          end
        end
      elseif clean_refusal(err, "onnx.read") then
        refused = refused + 1
      elseif #bad < 10 then
        bad[#bad + 1] = tostring(err)
      end
    end
    process.remove_tree(dir)
    print(("[onnx fuzz] seed %d: %d refused, %d read (%d imported)"):format(SEED, refused, read, imported))
    assert.are.same({}, bad, "seed " .. SEED)
    assert.are.equal(ONNX_CASES, refused + read)
  end)
end)
