-- tocha.save / tocha.load: named tensors in a safetensors file, the format PyTorch's and
-- Hugging Face's tools read and write (safetensors.torch.load_file / save_file).
--
--   tocha.save("run.safetensors", { weight = w, bias = b })
--   local t = tocha.load("run.safetensors" [, { device = "cuda" }])   -- t.weight, t.bias
--
-- The file: an unsigned 64-bit little-endian header length N, N bytes of JSON (an object
-- naming each tensor's dtype, shape and [begin, end) byte range in the data that follows, and
-- an optional "__metadata__" object of strings), padded with spaces to a multiple of 8, then
-- the tensors' bytes, little-endian, one after another with no gaps. tocha writes the tensors
-- in name order and reads any file whose ranges cover the data exactly once. The JSON is read
-- and written by dkjson (Debian's lua-dkjson).
local json = require "dkjson"
local tensor = require "tocha.tensor"
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local errors = require "tocha.errors"
local file = require "tocha.file"
local raise, show = errors.raise, errors.show

local M = {}

local CODES = { f32 = "F32", f64 = "F64", f16 = "F16", bf16 = "BF16", u8 = "U8", i32 = "I32", i64 = "I64" }
local DTYPES = {}
for name, code in pairs(CODES) do DTYPES[code] = name end

-- Headers beyond this are refused before they are read (the format's own limit is 100 MB).
local MAX_HEADER = 100 * 2 ^ 20

local function le64(n)
  local bytes = {}
  for i = 1, 8 do
    bytes[i] = string.char(n % 256)
    n = math.floor(n / 256)
  end
  return table.concat(bytes)
end

local function read_le64(s)
  local n = 0
  for i = 8, 1, -1 do n = n * 256 + s:byte(i) end
  return n
end

-- Whether s is valid UTF-8 (the format's header is; Python's reader refuses one that is not).
local function utf8_valid(s)
  local i, n = 1, #s
  while i <= n do
    local c = s:byte(i)
    local len = c < 0x80 and 1 or (c >= 0xC2 and c <= 0xDF) and 2 or (c >= 0xE0 and c <= 0xEF) and 3
      or (c >= 0xF0 and c <= 0xF4) and 4 or nil
    if not len or i + len - 1 > n then return false end
    for k = i + 1, i + len - 1 do
      local b = s:byte(k)
      if b < 0x80 or b > 0xBF then return false end
    end
    i = i + len
  end
  return true
end

-- tocha.save(path, tensors [, metadata]): tensors a table of name -> tensor (any device,
-- dtype and shape); metadata an optional table of string -> string. Replaces the file.
function M.save(path, tensors, metadata)
  if type(path) ~= "string" then raise("path: expected a file name, got " .. show(path)) end
  if type(tensors) ~= "table" then raise("tensors: expected a table of name = tensor, got " .. show(tensors)) end
  local names = {}
  for name, t in pairs(tensors) do
    if type(name) ~= "string" or name == "" or name == "__metadata__" or name:find("\0", 1, true) or not utf8_valid(name) then
      raise(("tensors: expected names that are non-empty UTF-8 strings other than __metadata__, without NUL bytes, got %s"):format(
        show(name)))
    end
    if not tensor.is_tensor(t) then raise(("tensors[%s]: expected a tensor, got %s"):format(show(name), show(t))) end
    if t.freed ~= 0 then raise(("tensors[%s]: tensor was freed"):format(show(name))) end
    names[#names + 1] = name
  end
  table.sort(names)
  -- (an object even when empty: dkjson writes an empty table as [])
  local header, at = setmetatable({}, { __jsontype = "object" }), 0
  for _, name in ipairs(names) do
    local t = tensors[name]
    local bytes = tonumber(t.bytes)
    header[name] = { dtype = CODES[dtype.name(t.elem_type)], shape = t:shape(), data_offsets = { at, at + bytes } }
    at = at + bytes
  end
  if type(metadata) ~= "nil" then
    if type(metadata) ~= "table" then raise("metadata: expected a table of strings, got " .. show(metadata)) end
    local copy = setmetatable({}, { __jsontype = "object" })
    for k, v in pairs(metadata) do
      if type(k) ~= "string" or type(v) ~= "string" or not utf8_valid(k) or not utf8_valid(v) then
        raise(("metadata: expected UTF-8 string keys and values, got %s = %s"):format(show(k), show(v)))
      end
      copy[k] = v
    end
    header.__metadata__ = copy
  end
  local keyorder = { "__metadata__" }
  for _, name in ipairs(names) do keyorder[#keyorder + 1] = name end
  local text = json.encode(header, { keyorder = keyorder })
  text = text .. (" "):rep((8 - #text % 8) % 8)
  file.write(path, function(f)
    file.put(f, le64(#text), text)
    for _, name in ipairs(names) do file.put_tensor(f, tensors[name]:contiguous()) end
  end)
end

-- A JSON array of dkjson's decoding, with nothing but its n elements.
local function is_list(v, n)
  if type(v) ~= "table" then return false end
  local mt = getmetatable(v)
  if mt and mt.__jsontype ~= "array" then return false end
  local count = 0
  for _ in pairs(v) do count = count + 1 end
  return count == #v and (n == nil or #v == n)
end

local function is_count(v) return type(v) == "number" and v >= 0 and v == math.floor(v) and v < 2 ^ 53 end

-- tocha.load(path [, {device =}]): the file's tensors, a table of name -> tensor on the device
-- (default: the default device), and its metadata table (or nil) second.
function M.load(path, opts)
  if type(path) ~= "string" then raise("path: expected a file name, got " .. show(path)) end
  if type(opts) ~= "nil" and type(opts) ~= "table" then raise("options: expected a table {device=}, got " .. show(opts)) end
  local dev = device.get(opts and opts.device)
  local f, size = file.open_read(path)
  local function fail(why)
    f:close()
    raise(("%s: %s"):format(path, why))
  end
  local head = f:read(8)
  if not head or #head < 8 then fail("not a safetensors file: shorter than its 8-byte header length") end
  local n = read_le64(head)
  if n > MAX_HEADER then fail(("not a safetensors file: a header of %.0f bytes (at most 100 MB)"):format(n)) end
  if 8 + n > size then fail(("truncated: the header says %d bytes, the file has %d after the length"):format(n, size - 8)) end
  local text = f:read(n) or "" -- (reading 0 bytes at the end gives nil)
  if not utf8_valid(text) then fail("the header is not UTF-8 text") end
  -- (dkjson raises on some input, such as nesting deeper than Lua's stack, instead of returning
  -- its error)
  local decoded, header, stop, jerr = pcall(json.decode, text, 1, nil)
  if not decoded then header, jerr = nil, "nested too deeply" end
  -- (what follows the object may only be the format's padding)
  if header ~= nil and not text:sub(stop):match("^ *$") then
    fail("the header has text after its JSON object")
  end
  -- (dkjson marks what it decodes: an array is a table too)
  local kind = type(header) == "table" and getmetatable(header) and getmetatable(header).__jsontype
  if kind ~= "object" then fail("the header is not a JSON object" .. (jerr and (": " .. tostring(jerr)) or "")) end
  local data_size = size - 8 - n
  local metadata = header.__metadata__
  if metadata ~= nil then
    local mt = type(metadata) == "table" and getmetatable(metadata)
    if not (mt and mt.__jsontype == "object") then fail("__metadata__: expected an object of strings") end
    for k, v in pairs(metadata) do
      if type(v) ~= "string" then fail(("__metadata__[%s]: expected a string, got %s"):format(show(k), show(v))) end
    end
    setmetatable(metadata, nil)
  end
  -- Every entry checked before anything is allocated; the ranges must tile the data.
  local entries = {}
  for name, e in pairs(header) do
    if name ~= "__metadata__" then
      local what = ("tensor %s"):format(show(name))
      if type(name) ~= "string" or name == "" or name:find("\0", 1, true) then
        fail(what .. ": a tensor name must be non-empty, without NUL bytes")
      end
      if type(e) ~= "table" or getmetatable(e).__jsontype ~= "object" then
        fail(what .. ": expected an object {dtype, shape, data_offsets}")
      end
      local dt = DTYPES[e.dtype]
      if not dt then fail(("%s: dtype %s is not one tocha has (F32, F64, F16, BF16, U8, I32, I64)"):format(what, show(e.dtype))) end
      if not is_list(e.shape) then fail(what .. ": shape: expected a list of sizes") end
      if #e.shape > 8 then fail(("%s: shape: %d dimensions, tocha tensors have at most 8"):format(what, #e.shape)) end
      local numel = 1
      for i, s in ipairs(e.shape) do
        if not is_count(s) then fail(("%s: shape[%d]: expected a size, got %s"):format(what, i, show(s))) end
        numel = numel * s
      end
      -- a scalar (PyTorch's 0-dimensional tensors: a BatchNorm's num_batches_tracked) is read as
      -- shape {1}, tocha's scalar
      if #e.shape == 0 then e.shape = { 1 } end
      local o = e.data_offsets
      if not is_list(o, 2) or not is_count(o[1]) or not is_count(o[2]) or o[1] > o[2] then
        fail(what .. ": data_offsets: expected [begin, end], two byte offsets with begin <= end")
      end
      local bytes = numel * dtype.size(dt)
      if o[2] - o[1] ~= bytes then
        fail(("%s: data_offsets [%d, %d] hold %d bytes, its shape and dtype %d"):format(what, o[1], o[2], o[2] - o[1], bytes))
      end
      if o[2] > data_size then
        fail(("%s: data_offsets [%d, %d] pass the end of the data (%d bytes)"):format(what, o[1], o[2], data_size))
      end
      entries[#entries + 1] = { name = name, dtype = dt, shape = e.shape, begin = o[1], finish = o[2] }
    end
  end
  -- An empty tensor's range is [a, a]: it goes before a tensor whose data starts at a.
  table.sort(entries, function(a, b) return a.begin < b.begin or (a.begin == b.begin and a.finish < b.finish) end)
  local at = 0
  for _, e in ipairs(entries) do
    if e.begin ~= at then
      fail(("tensor %q: its data starts at byte %d, where %d was expected (ranges must follow one another)"):format(e.name, e.begin, at))
    end
    at = e.finish
  end
  if at ~= data_size then fail(("%d bytes of data follow the last tensor"):format(data_size - at)) end
  local out = {}
  for _, e in ipairs(entries) do
    local t = tensor.empty(e.shape, { dtype = e.dtype, device = dev })
    if not file.get_tensor(f, t, e.finish - e.begin) then fail(("tensor %s: the file ends inside its data"):format(show(e.name))) end
    out[e.name] = t
  end
  f:close()
  return out, metadata
end

errors.name(M.save, "save")
errors.name(M.load, "load")
return M
