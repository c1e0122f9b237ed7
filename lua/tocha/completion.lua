-- tocha.completion: what Tab offers in the REPL (host/src/repl.c asks, libedit shows).
--
--   tocha.Ups<Tab>   -> tocha.UpsampleNearest2dForward, tocha.UpsampleNearest2dBackward
--   x:con<Tab>       -> x:contiguous ... (a tensor's methods), up:for<Tab> -> up:forward
--   pri<Tab>         -> print
--
-- M.candidates(word) completes an expression of names joined by "." and ":" against the
-- running session: globals, then the fields of each table along the path (and of the tables
-- their metatables' __index chains name), a tensor's methods after ":". Nothing is called and
-- no __index function runs: completing never has effects. (Inside a string, the REPL completes
-- file names itself.)
local M = {}

local MAX_CHAIN = 8

-- The value a dotted path names, read with rawget only; nil when a step is missing.
local function resolve(path)
  local v = _G
  for name in path:gmatch("[^%.:]+") do
    if type(v) ~= "table" then return nil end
    local found = rawget(v, name)
    if found == nil then
      -- a field reached through __index tables (classes), still without calling anything
      local mt, depth = getmetatable(v), 0
      while found == nil and type(mt) == "table" and type(rawget(mt, "__index")) == "table" and depth < MAX_CHAIN do
        found = rawget(rawget(mt, "__index"), name)
        mt, depth = getmetatable(rawget(mt, "__index")), depth + 1
      end
    end
    v = found
  end
  return v
end

-- The string keys v offers: its own, and those of its __index tables; functions only when
-- methods is set. A tensor (FFI cdata) offers tocha.Tensor's methods.
local function keys_of(v, methods, out)
  local tensor = package.loaded["tocha.tensor"]
  if tensor and tensor.is_tensor(v) then v = tensor.methods end
  local depth = 0
  while type(v) == "table" and depth < MAX_CHAIN do
    for k, value in pairs(v) do
      if type(k) == "string" and k:match("^[%a_][%w_]*$") and (not methods or type(value) == "function") then
        out[k] = true
      end
    end
    local mt = getmetatable(v)
    v = type(mt) == "table" and rawget(mt, "__index") or nil
    depth = depth + 1
  end
  return out
end

-- The completions of word (what the cursor ends), sorted; each is the whole word completed.
function M.candidates(word)
  if type(word) ~= "string" then return {} end
  local base, sep, prefix = word:match("^(.-)([%.:])([%w_]*)$")
  local names
  if base and base ~= "" then
    local v = resolve(base)
    if v == nil then return {} end
    names = keys_of(v, sep == ":", {})
  elseif word:match("^[%a_][%w_]*$") or word == "" then
    base, sep, prefix = "", "", word
    names = keys_of(_G, false, {})
    for _, k in ipairs({ "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "if", "in",
      "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while" }) do
      names[k] = true
    end
  else
    return {}
  end
  local out = {}
  for k in pairs(names) do
    if k:sub(1, #prefix) == prefix then out[#out + 1] = base .. sep .. k end
  end
  table.sort(out)
  return out
end

return M
