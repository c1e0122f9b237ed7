-- tocha.file: how tocha's readers and writers of files open them (safetensors, .npy, PNG, a
-- model's dot and parameters).
--
--   local f, size = file.open_read(path)            -- a regular file, or a named refusal
--   file.write(path, function(f) f:write(...) end)   -- all or nothing
--
-- Only regular files are read or written: a FIFO would block the reader (or a writer) until
-- someone opens its other end, a device has no end (/dev/zero) or swallows what is written
-- (/dev/null), and a folder is no file; each is refused by name before it is opened. A write
-- goes to a temporary file beside the target (host/src/file.c), which is synced and renamed
-- over the target only once every byte is written: whatever fails on the way (a full disk, a
-- tensor that cannot be read, an error in the producer) leaves the old file byte for byte and
-- removes only the temporary. A target that is a link to a regular file is replaced by the new
-- file; the file it pointed to is left as it was.
local ffi = require "ffi"
local native = require "tocha.ffi"
local errors = require "tocha.errors"
local C, raise, show = native.C, errors.raise, errors.show

local M = {}

local KINDS = { [2] = "a folder", [3] = "a FIFO (named pipe)", [4] = "a device", [5] = "a socket", [6] = "not a regular file" }

local kind_buf = ffi.new("int[1]")

-- What path names: "missing", "regular", or the words for what it is instead.
local function kind_of(path)
  native.check(C.tocha_file_kind(path, kind_buf))
  local k = kind_buf[0]
  if k == 0 then return "missing" end
  if k == 1 then return "regular" end
  return KINDS[k] or KINDS[6]
end

-- What path names: "missing", "regular", or the words for what it is instead ("a folder", ...).
M.kind = kind_of

local function check_path(path)
  if type(path) ~= "string" then raise("path: expected a file name, got " .. show(path)) end
  if path == "" or path:find("\0", 1, true) then raise("path: expected a file name, got " .. show(path)) end
end

-- f, size: path opened for reading (binary), and its size in bytes; raises, naming the path,
-- unless it is a regular file that can be opened.
function M.open_read(path)
  check_path(path)
  local kind = kind_of(path)
  if kind == "missing" then raise(("path: %s: no such file"):format(show(path))) end
  if kind ~= "regular" then raise(("path: %s is %s, not a regular file"):format(show(path), kind)) end
  local f, err = io.open(path, "rb")
  if not f then raise(("path: %s"):format(tostring(err))) end
  local size = f:seek("end")
  f:seek("set", 0)
  return f, size
end

-- The message of an error raised inside a producer, without its position and the name of the
-- function inside that raised it (the public function the user called names the whole).
local function reason(err)
  local text = tostring(err)
  text = text:match("^[^\n]-:%d+: (.*)$") or text
  return text:match("^tocha[%w_.]*:?[%w_]*: (.*)$") or text
end

local name_buf = ffi.new("char[4096]")

-- Writes path all or nothing: produce(f, temp) writes the contents to f (the temporary file temp,
-- opened "wb"; a library that writes by name writes temp) and raises on failure; returns what
-- produce returns. Raises "path: writing <path> failed: <why>",
-- leaving the old file as it was.
function M.write(path, produce)
  check_path(path)
  local kind = kind_of(path)
  if kind ~= "missing" and kind ~= "regular" then
    raise(("path: %s is %s, not a regular file (nothing was written)"):format(show(path), kind))
  end
  native.check(C.tocha_file_temp(path, name_buf, 4096))
  local temp = ffi.string(name_buf)
  local f, err = io.open(temp, "wb")
  if not f then
    os.remove(temp)
    raise(("path: writing %s failed: %s"):format(show(path), tostring(err)))
  end
  local ok, result = pcall(produce, f, temp)
  local closed, cerr = f:close()
  if not ok or not closed then
    os.remove(temp)
    raise(("path: writing %s failed: %s (the file there, if any, is unchanged)"):format(show(path),
      ok and tostring(cerr) or reason(result)))
  end
  local st = C.tocha_file_commit(temp, path)
  if st ~= 0 then raise(("path: writing %s failed: %s"):format(show(path), native.message())) end
  return result
end

-- f:write(...) that raises on failure (a full disk): for producers.
function M.put(f, ...)
  local ok, err = f:write(...)
  if not ok then error(tostring(err), 0) end
end

if not pcall(ffi.typeof, "struct tocha_file_marker") then
  ffi.cdef [[
struct tocha_file_marker { int unused; };
void *malloc(size_t size);
void free(void *p);
]]
end

-- Pieces a tensor's bytes cross the host in: no buffer of a whole tensor, which LuaJIT's
-- ffi.new cannot make past 2 GiB.
local PIECE = 64 * 2 ^ 20

-- Writes t's bytes (a dense tensor) to f, a piece at a time; raises on failure.
function M.put_tensor(f, t)
  if t.count == 0 then return end -- an empty tensor has no bytes
  local size = tonumber(t.bytes)
  local elem = size / tonumber(t.count)
  local per = math.max(1, math.floor(PIECE / elem))
  local buf = ffi.new("uint8_t[?]", math.min(size, per * elem))
  local count = tonumber(t.count)
  for first = 0, count - 1, per do
    local n = math.min(per, count - first)
    t:read(buf, first, n)
    M.put(f, ffi.string(buf, n * elem))
  end
end

-- Reads bytes from f into t (a dense tensor of that many bytes); false when the file ends first.
-- The bytes are gathered in one host block from malloc (any size), then written at once.
function M.get_tensor(f, t, bytes)
  if bytes == 0 then return true end -- an empty tensor: nothing to read (and malloc(0) may give NULL)
  local block = ffi.C.malloc(bytes)
  if block == nil then raise(("out of host memory reading %d bytes"):format(bytes)) end
  block = ffi.gc(ffi.cast("uint8_t *", block), ffi.C.free)
  local at = 0
  while at < bytes do
    local chunk = f:read(math.min(PIECE, bytes - at))
    if not chunk or #chunk == 0 then return false end
    ffi.copy(block + at, chunk, #chunk)
    at = at + #chunk
  end
  t:write(block, bytes)
  ffi.C.free(ffi.gc(block, nil))
  return true
end

-- Writes text to path, all or nothing.
function M.write_text(path, text)
  M.write(path, function(f) M.put(f, text) end)
end

return M
