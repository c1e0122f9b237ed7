-- Files are never lost and only regular files are read or written (lua/tocha/file.lua): a
-- save that fails on the way leaves the file it would replace byte for byte and no temporary
-- beside it; FIFOs, devices and folders are refused by name, without blocking and without
-- being replaced; every size a header claims is checked against the file before anything is
-- allocated; files that break the safetensors or .npy format are refused by what is wrong; and
-- tocha.load reads every file tocha.save writes.
local tocha = require "tocha"
local process = require "support.process"
local files = require "support.files"

local quote = process.quote

local function fails(pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error matching " .. pattern)
  assert.truthy(tostring(err):find(pattern, 1, true), tostring(err))
end

-- The names in folder dir, sorted, one line each.
local function listing(dir)
  local p = io.popen("ls -A " .. quote(dir))
  local text = p:read("*a")
  p:close()
  return text
end

local function shell(cmd)
  local p = io.popen(cmd .. " 2>&1; echo rc=$?")
  local out = p:read("*a")
  p:close()
  return out
end

local function le(n, bytes)
  local out = {}
  for i = 1, bytes do out[i] = string.char(n % 256); n = math.floor(n / 256) end
  return table.concat(out)
end

-- A safetensors file of this header text and data.
local function safetensors(header, data) return le(#header, 8) .. header .. (data or "") end

describe("files", function()
  local dir
  before_each(function() dir = process.tempdir() end)
  after_each(function() process.remove_tree(dir) end)

  describe("a save that fails on the way", function()
    it("leaves the old file byte for byte and no temporary (a host read refused in a capture)", function()
      local path = dir .. "/run.safetensors"
      tocha.save(path, { w = tocha.ones({ 2, 3 }, { device = "sim" }) })
      local before = files.slurp(path)
      local a, b = tocha.ones({ 2 }, { device = "sim" }), tocha.zeros({ 3 }, { device = "sim" })
      fails("tocha.save: path: writing " .. ("%q"):format(path) .. " failed: cannot read a tensor to the host while a graph is being captured",
        tocha.graph, function() tocha.save(path, { a = a, b = b }) end, "sim")
      assert.are.equal(before, files.slurp(path))
      assert.are.equal("run.safetensors\n", listing(dir))
      local npy = dir .. "/x.npy"
      tocha.save_npy(npy, a)
      local npy_before = files.slurp(npy)
      fails("tocha.save_npy: path: writing", tocha.graph, function() tocha.save_npy(npy, b) end, "sim")
      assert.are.equal(npy_before, files.slurp(npy))
      assert.are.equal("run.safetensors\nx.npy\n", listing(dir))
    end)

    it("leaves the old file when the disk takes no more (a file size limit), in a child process", function()
      local path = dir .. "/big.safetensors"
      tocha.save(path, { w = tocha.ones({ 4 }, { device = "sim" }) })
      local before = files.slurp(path)
      local code = ("local t = require 'tocha' "
        .. "local ok, err = pcall(t.save, %q, { w = t.ones({ 1024, 1024 }, { device = 'sim' }) }) "
        .. "io.write(tostring(ok), ' ', tostring(err))"):format(path)
      local line = "trap '' XFSZ; ulimit -f 64; env TOCHA_DEVICE=sim %s -e %s"
      local out = shell(line:format(quote(process.exe), quote(code)))
      assert.truthy(out:find("false tocha.save: path: writing", 1, true), out)
      assert.truthy(out:find("(the file there, if any, is unchanged)", 1, true), out)
      assert.are.equal(before, files.slurp(path))
      assert.are.equal("big.safetensors\n", listing(dir))
    end)

    it("into a folder that does not exist says so and writes nothing", function()
      fails("cannot create a file in its folder: No such file or directory", tocha.save, dir .. "/no/such/run.safetensors",
        { w = tocha.ones({ 1 }, { device = "sim" }) })
      assert.are.equal("", listing(dir))
    end)
  end)

  it("keep a replaced file's permissions", function()
    local path = dir .. "/p.npy"
    tocha.save_npy(path, tocha.ones({ 2 }, { device = "sim" }))
    os.execute("chmod 640 " .. quote(path))
    tocha.save_npy(path, tocha.zeros({ 2 }, { device = "sim" }))
    assert.truthy(shell("stat -c %a " .. quote(path)):find("^640\n"))
    assert.are.same({ 0, 0 }, tocha.load_npy(path, { device = "sim" }):to_table())
  end)

  describe("that are not regular files", function()
    it("are refused for reading without blocking: a FIFO, a device, a folder", function()
      local fifo = dir .. "/pipe"
      assert.truthy(shell("mkfifo " .. quote(fifo)):find("rc=0"))
      for _, case in ipairs({
        { tocha.load, fifo, "is a FIFO (named pipe), not a regular file" },
        { tocha.load_npy, fifo, "is a FIFO (named pipe), not a regular file" },
        { tocha.image.read, fifo, "is a FIFO (named pipe), not a regular file" },
        { tocha.load, "/dev/zero", "is a device, not a regular file" },
        { tocha.load_npy, "/dev/null", "is a device, not a regular file" },
        { tocha.load, dir, "is a folder, not a regular file" },
      }) do
        fails(("path: %q %s"):format(case[2], case[3]), case[1], case[2])
      end
      fails(("tocha.load: path: %q: no such file"):format(dir .. "/missing.safetensors"), tocha.load, dir .. "/missing.safetensors")
      -- and in a child process under a time limit, as a user's script meets it
      local out, err, status = process.run { exe = "timeout",
        args = { "10", process.exe, "-e", ("require'tocha'.load(%q)"):format(fifo) }, env = { TOCHA_DEVICE = "sim" } }
      assert.are.equal(1, status, out .. err)
      assert.truthy(err:find("is a FIFO (named pipe), not a regular file", 1, true), err)
    end)

    it("are refused for writing and left as they were: a FIFO, a device node, a folder", function()
      local fifo = dir .. "/pipe"
      shell("mkfifo " .. quote(fifo))
      local t = tocha.ones({ 2 }, { device = "sim" })
      fails("is a FIFO (named pipe), not a regular file (nothing was written)", tocha.save, fifo, { t = t })
      fails("is a FIFO (named pipe), not a regular file (nothing was written)", tocha.save_npy, fifo, t)
      fails("is a device, not a regular file (nothing was written)", tocha.save, "/dev/null", { t = t })
      fails("is a folder, not a regular file (nothing was written)", tocha.save_npy, dir, t)
      assert.truthy(shell("test -p " .. quote(fifo)):find("rc=0"))
      assert.truthy(shell("test -c /dev/null"):find("rc=0"))
      assert.are.equal("pipe\n", listing(dir))
    end)
  end)

  describe("safetensors", function()
    it("with no tensors: tocha.load reads what tocha.save writes, metadata too", function()
      local path = dir .. "/empty.safetensors"
      tocha.save(path, {})
      local got, meta = tocha.load(path, { device = "sim" })
      assert.are.same({}, got)
      assert.is_nil(meta)
      tocha.save(path, {}, { note = "only metadata" })
      got, meta = tocha.load(path, { device = "sim" })
      assert.are.same({}, got)
      assert.are.same({ note = "only metadata" }, meta)
    end)

    it("refuses headers that break the format, by what is wrong", function()
      local path = dir .. "/bad.safetensors"
      local four = ("\0"):rep(4)
      for _, case in ipairs({
        { '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}', four, "data_offsets: expected [begin, end], two byte offsets" },
        { '{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}', four, "data_offsets: expected [begin, end]" },
        { '{"a":{"dtype":"F32","shape":[1],"data_offsets":["0",4]}}', four, "data_offsets: expected [begin, end]" },
        { '{"a":{"dtype":"F32","shape":[1],"data_offsets":{"1":0,"2":4}}}', four, "data_offsets: expected [begin, end]" },
        { '{"__metadata__":{"n":4},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', four, '__metadata__["n"]: expected a string, got 4' },
        { '{"__metadata__":["x"],"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', four, "__metadata__: expected an object of strings" },
        { '{"a\\u0000b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', four, "a tensor name must be non-empty, without NUL bytes" },
        { '{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', four, "a tensor name must be non-empty" },
        { '{"a":{"dtype":"F32","shape":{"1":1},"data_offsets":[0,4]}}', four, "shape: expected a list of sizes" },
        { '{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}', four, "shape[1]: expected a size, got 1.5" },
        { '{"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}}', four, "dtype 4 is not one tocha has" },
        { '{"a":[1,2]}', four, "expected an object {dtype, shape, data_offsets}" },
        { '[1, 2]', "", "the header is not a JSON object" },
        { '{"a":', "", "the header is not a JSON object" },
        { ("["):rep(100000), "", "the header is not a JSON object" },
        { '{"\255":1}', "", "the header is not UTF-8 text" },
        { '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', "", "pass the end of the data (0 bytes)" },
        { '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} xx', four, "the header has text after its JSON object" },
        { '{"a":{"dtype":"F32","shape":[9007199254740993],"data_offsets":[0,4]}}', four, "shape[1]: expected a size, got 9007199254740992" },
        { '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', ("\0"):rep(8), "4 bytes of data follow the last tensor" },
        { '{"a":{"dtype":"F32","shape":[4000000000000],"data_offsets":[0,4]}}', four, "hold 4 bytes, its shape and dtype 16000000000000" },
      }) do
        files.spit(path, safetensors(case[1], case[2]))
        fails(("tocha.load: %s: "):format(path), tocha.load, path, { device = "sim" })
        fails(case[3], tocha.load, path, { device = "sim" })
      end
    end)

    it("refuses a header length past the end of the file before reading it", function()
      local path = dir .. "/short.safetensors"
      files.spit(path, le(2 ^ 40, 8) .. "{}")
      fails("not a safetensors file: a header of", tocha.load, path, { device = "sim" })
      files.spit(path, le(4096, 8) .. "{}")
      fails("truncated: the header says 4096 bytes, the file has 2 after the length", tocha.load, path, { device = "sim" })
    end)

    it("refuses names it cannot write, quoting them", function()
      local t = tocha.ones({ 1 }, { device = "sim" })
      fails('tocha.save: tensors: expected names that are non-empty UTF-8 strings other than __metadata__, without NUL bytes, got "a\\0b"',
        tocha.save, dir .. "/n.safetensors", { ["a\0b"] = t })
      fails('tocha.save: tensors["4"]: expected a tensor, got 4', tocha.save, dir .. "/n.safetensors", { ["4"] = 4 })
      fails('tocha.save: tensors: expected names that are non-empty UTF-8 strings', tocha.save, dir .. "/n.safetensors", { ["\255"] = t })
      fails('tocha.save: metadata: expected UTF-8 string keys and values, got "k" = "\255"', tocha.save, dir .. "/n.safetensors",
        { t = t }, { k = "\255" })
      fails('tocha.save: metadata: expected UTF-8 string keys and values, got "k" = 4', tocha.save, dir .. "/n.safetensors", { t = t }, { k = 4 })
      assert.are.equal("", listing(dir))
    end)
  end)

  describe(".npy", function()
    it("refuses a header length past the end of the file before reading it (a 20-byte file)", function()
      local path = dir .. "/huge.npy"
      files.spit(path, "\147NUMPY\2\0" .. le(4000000000, 4) .. ("x"):rep(8))
      fails("tocha.load_npy: " .. path .. ": truncated: the header says 4000000000 bytes, the file has 8 after it",
        tocha.load_npy, path, { device = "sim" })
    end)

    it("refuses data shorter than its shape before reading it, and shapes that are no tuple of integers", function()
      local path = dir .. "/bad.npy"
      local function npy(dict, data)
        local header = dict .. (" "):rep((64 - (10 + #dict + 1) % 64) % 64) .. "\n"
        return "\147NUMPY\1\0" .. le(#header, 2) .. header .. (data or "")
      end
      for _, case in ipairs({
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 1000000), }", "", "truncated: 4000000000000000 bytes of data wanted, 0 there" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", "", 'the header\'s "shape": expected a string, True, False or a tuple of integers' },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", "", 'the header\'s "shape": expected a string, True, False or a tuple of integers' },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", "", 'the header\'s "shape": expected a string, True, False or a tuple of integers' },
        { "{'fortran_order': False, 'shape': (2,), }", "", "the header has no 'descr' string" },
        { "{'descr': '<f4', 'shape': (2,), }", "", "the header has no 'fortran_order'" },
        { "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", "", "big-endian data (>f4) is not read" },
        { "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", "", "dtype <c8 has no tocha dtype" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", ("\0"):rep(8), "more data than its shape holds" },
        { "{'x': \"'descr': '<f8'\", 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "", 'the header has a key "x", not one of' },
        { "{'descr': '<f8', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "", 'the header names "descr" twice' },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } xx", "", "the header has text after its dict" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", "", 'the header\'s "shape": expected' },
        { "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", "", 'the header\'s "fortran_order": expected' },
      }) do
        files.spit(path, npy(case[1], case[2]))
        fails(("tocha.load_npy: %s: %s"):format(path, case[3]), tocha.load_npy, path, { device = "sim" })
      end
      files.spit(path, npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", ("\0"):rep(8)))
      assert.are.same({ 0, 0 }, tocha.load_npy(path, { device = "sim" }):to_table())
    end)
  end)
end)
