-- tocha.save_npy / tocha.load_npy: one tensor in NumPy's .npy format (numpy.save / numpy.load).
--
--   tocha.save_npy("y.npy", y)                        -- numpy.load("y.npy") in Python
--   local x = tocha.load_npy("x.npy" [, { device = "cuda" }])
--
-- The file: the magic "\x93NUMPY", a version (1.0 written; 1.0, 2.0 and 3.0 read), the header's
-- length (2 bytes in 1.0, 4 after), the header, a Python dict literal
-- {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and a newline so
-- that the data starts on a 64-byte boundary, then the elements in C order. dtypes: f32 <f4,
-- f64 <f8, f16 <f2, u8 |u1, i32 <i4, i64 <i8; bf16 has no NumPy dtype (cast it first). Files in
-- Fortran order, big-endian or of other dtypes are refused with the reason.
local tensor = require "tocha.tensor"
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local errors = require "tocha.errors"
local file = require "tocha.file"
local raise, show = errors.raise, errors.show

local M = {}

local DESCR = { f32 = "<f4", f64 = "<f8", f16 = "<f2", u8 = "|u1", i32 = "<i4", i64 = "<i8" }
local BY_DESCR = {}
for name, d in pairs(DESCR) do BY_DESCR[d] = name end
BY_DESCR["<u1"] = "u8"
local MAGIC = "\147NUMPY"

local function le(n, bytes)
  local out = {}
  for i = 1, bytes do out[i] = string.char(n % 256); n = math.floor(n / 256) end
  return table.concat(out)
end

local function read_le(s)
  local n = 0
  for i = #s, 1, -1 do n = n * 256 + s:byte(i) end
  return n
end

-- tocha.save_npy(path, t): t's elements in a version 1.0 .npy file.
function M.save_npy(path, t)
  if type(path) ~= "string" then raise("path: expected a file name, got " .. show(path)) end
  if not tensor.is_tensor(t) then raise("t: expected a tensor, got " .. show(t)) end
  if t.freed ~= 0 then raise("t: tensor was freed") end
  local name = dtype.name(t.elem_type)
  local descr = DESCR[name]
  if not descr then raise(("t: %s has no NumPy dtype: cast it (t:cast(\"f32\")) first"):format(name)) end
  local shape = t:shape()
  local dims = #shape == 1 and (shape[1] .. ",") or table.concat(shape, ", ")
  local header = ("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }"):format(descr, dims)
  local total = 10 + #header + 1
  header = header .. (" "):rep((64 - total % 64) % 64) .. "\n"
  if #header > 65535 then raise("t: its shape makes a header too long for the format") end
  file.write(path, function(f)
    file.put(f, MAGIC, "\1\0", le(#header, 2), header)
    file.put_tensor(f, t:contiguous())
  end)
end

-- The header's dict literal, parsed as NumPy writes it: {'descr': '<f4', 'fortran_order':
-- False, 'shape': (2, 3), } with its three keys once each, values a quoted string, True/False
-- or a tuple of integers, and nothing after the closing brace but spaces and the newline.
-- Returns the dict, or nil and why not.
local function parse_header(text)
  local at = 1
  local function space() at = text:match("^%s*()", at) end
  local function value()
    local q = text:sub(at, at)
    if q == "'" or q == '"' then
      local body, after = text:match("^" .. q .. "([^" .. q .. "\\]*)" .. q .. "()", at)
      if not body then return nil end
      at = after
      return body
    end
    for word, v in pairs({ True = true, False = false }) do
      if text:sub(at, at + #word - 1) == word then at = at + #word return v end
    end
    if q ~= "(" then return nil end
    local body, after = text:match("^%(([^()]*)%)()", at)
    if not body then return nil end
    local out, rest = {}, body
    while true do
      local n, tail = rest:match("^%s*(%d+)L?%s*()")
      if not n then break end
      out[#out + 1] = tonumber(n)
      rest = rest:sub(tail)
      local comma = rest:match("^,()")
      if not comma then break end
      rest = rest:sub(comma)
    end
    -- (one element needs its comma, as Python writes (4,))
    if not rest:match("^%s*$") or (#out == 1 and not body:find(",", 1, true)) then return nil end
    at = after
    return out
  end
  local dict = {}
  space()
  if text:sub(at, at) ~= "{" then return nil, "the header is not a dict literal" end
  at = at + 1
  while true do
    space()
    if text:sub(at, at) == "}" then at = at + 1 break end
    local key = value()
    if type(key) ~= "string" then return nil, "the header's keys must be quoted strings" end
    if key ~= "descr" and key ~= "fortran_order" and key ~= "shape" then
      return nil, ("the header has a key %s, not one of descr, fortran_order, shape"):format(show(key))
    end
    if dict[key] ~= nil then return nil, ("the header names %s twice"):format(show(key)) end
    space()
    if text:sub(at, at) ~= ":" then return nil, "the header is not a dict literal" end
    at = at + 1
    space()
    local v = value()
    if v == nil then return nil, ("the header's %s: expected a string, True, False or a tuple of integers"):format(show(key)) end
    dict[key] = v
    space()
    local sep = text:sub(at, at)
    if sep == "," then at = at + 1 elseif sep ~= "}" then return nil, "the header is not a dict literal" end
  end
  if not text:sub(at):match("^ *\n?$") then return nil, "the header has text after its dict" end
  return dict
end

-- tocha.load_npy(path [, {device =}]): the file's array as a tensor on the device (default:
-- the default device).
function M.load_npy(path, opts)
  if type(path) ~= "string" then raise("path: expected a file name, got " .. show(path)) end
  if type(opts) ~= "nil" and type(opts) ~= "table" then raise("options: expected a table {device=}, got " .. show(opts)) end
  local dev = device.get(opts and opts.device)
  local f, size = file.open_read(path)
  local function fail(why)
    f:close()
    raise(("%s: %s"):format(path, why))
  end
  local head = f:read(8)
  if not head or #head < 8 or head:sub(1, 6) ~= MAGIC then fail("not a .npy file (no \\x93NUMPY magic)") end
  local major = head:byte(7)
  if major < 1 or major > 3 or head:byte(8) ~= 0 then
    fail(("a .npy version %d.%d, not one of 1.0, 2.0, 3.0"):format(major, head:byte(8)))
  end
  local len_bytes = f:read(major == 1 and 2 or 4)
  if not len_bytes or #len_bytes < (major == 1 and 2 or 4) then fail("truncated in its header length") end
  local n = read_le(len_bytes)
  local start = 8 + #len_bytes
  -- Every size the file claims is checked against its size before anything is read or allocated.
  if start + n > size then fail(("truncated: the header says %d bytes, the file has %d after it"):format(n, size - start)) end
  local header = f:read(n)
  if not header or #header < n then fail(("truncated: the header says %d bytes"):format(n)) end
  local dict, why = parse_header(header)
  if not dict then fail(why) end
  local descr, fortran, shape = dict.descr, dict.fortran_order, dict.shape
  if type(descr) ~= "string" then fail("the header has no 'descr' string") end
  local name = BY_DESCR[descr]
  if not name then
    if descr:sub(1, 1) == ">" then fail(("big-endian data (%s) is not read"):format(descr)) end
    fail(("dtype %s has no tocha dtype (f32 <f4, f64 <f8, f16 <f2, u8 |u1, i32 <i4, i64 <i8)"):format(descr))
  end
  if fortran ~= false then
    fail(fortran == true and "the array is in Fortran order: save it in C order (numpy.ascontiguousarray)"
      or "the header has no 'fortran_order'")
  end
  if type(shape) ~= "table" then fail("the header has no 'shape' tuple of integers") end
  if #shape == 0 then shape = { 1 } end -- a 0-d array: one element
  if #shape > 8 then fail(("shape: %d dimensions, tocha tensors have at most 8"):format(#shape)) end
  local count = 1 -- (a size 0 makes an empty tensor and no data, as numpy.save writes it)
  for _, s in ipairs(shape) do count = count * s end
  local bytes = count * dtype.size(name)
  local left = size - start - n
  if bytes > left then fail(("truncated: %.0f bytes of data wanted, %d there"):format(bytes, left)) end
  if left > bytes then fail("more data than its shape holds") end
  local t = tensor.empty(shape, { dtype = name, device = dev })
  if not file.get_tensor(f, t, bytes) then fail(("truncated: %.0f bytes of data wanted"):format(bytes)) end
  f:close()
  return t
end

errors.name(M.save_npy, "save_npy")
errors.name(M.load_npy, "load_npy")
return M
