-- tocha.errors: how tocha's public functions report misuse, in the manner of lauxlib's
-- luaL_argerror, which finds the function's name and the caller's level itself.
--
--   errors.register(M, "Tensor:")   -- once per module: its public functions, by name
--   errors.raise("shape: expected a table of sizes, got string")
--     --> tocha.zeros: shape: expected a table of sizes, got string   (at the user's line)
--
-- raise() walks up the stack from where it is called, through tocha's own code (the files of
-- the modules that registered functions, and this one's), to the first frame that is not
-- tocha's: the user's line, where the error is raised. The name is the nearest registered
-- function below that frame: the public function the user called, even when it reached the
-- failing check through other public functions or internal helpers. No name or level is ever
-- passed along by hand. Public functions must not end in a tail call into code that may raise
-- (their frame would be gone); they keep `local r = f() return r`.
local M = {}

-- The registrations live in the Lua registry, not in this module: a module loaded again
-- (busted clears package.loaded between spec files; so may a user's script) gets a second
-- instance of this one, while tensors keep the methods of the first (an FFI metatype is set
-- once). Every instance must see every registration, or a check inside an old instance's
-- method would miss the public function of a new one above it.
local registry = debug.getregistry()
local state = registry["tocha.errors"] or { names = setmetatable({}, { __mode = "k" }), own = {} }
registry["tocha.errors"] = state
local names = state.names -- function -> public name
local own = state.own     -- source prefixes of tocha's own files

local function folder_of(source) return source:match("^(@.*[/\\])[^/\\]*$") end

own[folder_of(debug.getinfo(1, "S").source) or "@"] = true

-- Registers every function of table t under prefix .. key ("Tensor:" .. "fill"), and the
-- caller's folder as tocha's own code. Returns t.
function M.register(t, prefix)
  for k, v in pairs(t) do
    if type(v) == "function" and type(k) == "string" then names[v] = (prefix or "") .. k end
  end
  local folder = folder_of(debug.getinfo(2, "S").source)
  if folder then own[folder] = true end
  return t
end

-- Counts the file of the function `level` frames above the caller (1: the caller's caller) as
-- tocha's own code, whose lines errors pass over to reach the user's: what tocha.op does for the
-- file that defines an op class, wherever it lives (the file alone: the scripts beside it stay
-- the user's).
local own_files = {}
function M.own_caller(level)
  local info = debug.getinfo((level or 1) + 2, "S")
  if info and info.source:sub(1, 1) == "@" then own_files[info.source] = true end
end

-- Registers one function under name; returns it.
function M.name(fn, name)
  names[fn] = name
  return fn
end

local function is_own(source)
  if own_files[source] then return true end
  local folder = folder_of(source)
  return folder ~= nil and own[folder] == true
end

-- Raises "tocha.<public function>: <message>" at the line that called the public function
-- (or "tocha.<as>: <message>", when as is given, at the same line).
function M.raise(message, as)
  local level, name = 2, nil
  while true do
    local info = debug.getinfo(level, "fS")
    if not info then break end
    name = names[info.func] or name
    if not is_own(info.source) then break end
    level = level + 1
  end
  name = as or name
  error((name and ("tocha." .. name .. ": ") or "tocha: ") .. message, level)
end

-- Wraps every method of class (a table of functions taking self first) so that it refuses a
-- self that is_self rejects (a call with a dot instead of a colon: t.free()), and registers
-- each under prefix .. name, the method itself too (the wrapper ends in a tail call into it,
-- which leaves the method's frame alone on the stack). skip: names left as they are
-- (constructors). Returns class.
function M.methods(class, prefix, is_self, skip)
  local wrapped = {}
  for name, fn in pairs(class) do
    if type(fn) == "function" and type(name) == "string" and not (skip and skip[name]) and name:sub(1, 2) ~= "__" then
      names[fn] = prefix .. name
      wrapped[name] = M.name(function(self, ...)
        if not is_self(self) then
          M.raise(("self: expected a %s, got %s (call it as x:%s(...))"):format(prefix:sub(1, -2), type(self), name))
        end
        return fn(self, ...)
      end, prefix .. name)
    end
  end
  for name, fn in pairs(wrapped) do class[name] = fn end
  -- A class that is its objects' metatable gets its operators refused by name too.
  if rawget(class, "__index") == class then M.refuse_operators(class, prefix:sub(1, -2)) end
  local folder = folder_of(debug.getinfo(2, "S").source)
  if folder then own[folder] = true end
  return class
end

-- A value as a message shows it: a string quoted ("4", so that it is not taken for the number
-- 4), a number as Lua writes it (nan as nan), a boolean or nil by name, anything else by its
-- type ("table", "function", "cdata").
function M.show(v)
  local kind = type(v)
  if kind == "string" then
    if #v > 40 then v = v:sub(1, 37) .. "..." end
    return (("%q"):format(v):gsub("\\\n", "\\n"))
  end
  if kind == "number" then
    if v ~= v then return "nan" end
    -- an integer as it is written, not 9.007199254741e+15
    if v == math.floor(v) and math.abs(v) < 2 ^ 63 then return ("%.0f"):format(v) end
    return tostring(v)
  end
  if kind == "boolean" or kind == "nil" then return tostring(v) end
  return kind
end

local OPERATORS = { __add = "+", __sub = "-", __mul = "*", __div = "/", __mod = "%", __pow = "^",
  __unm = "unary -", __concat = "..", __lt = "<", __le = "<=" }

-- The class name of each metatable given refuse_operators.
state.classes = state.classes or setmetatable({}, { __mode = "k" })
local classes = state.classes

-- One refusal per operator for every class: Lua compares two tables only when both carry the
-- same __lt (or __le) function, so an event < a stream must reach the same one as an event <
-- an event. It names the first operand that is one of tocha's objects.
local refusals = {}
for key, symbol in pairs(OPERATORS) do
  refusals[key] = function(a, b)
    local name = classes[getmetatable(a)] or classes[getmetatable(b)] or "value"
    M.raise(("%s: a %s has no operators"):format(symbol, name), name .. "." .. key)
  end
end

-- Gives class (the metatable of one of tocha's objects: an event, a stream, a graph, a kernel,
-- a model) a named refusal for every operator it does not define, and for a call when it has
-- no __call: "tocha.Event.__add: +: a Event has no operators". Returns class.
function M.refuse_operators(class, name)
  classes[class] = name
  for key in pairs(OPERATORS) do
    if rawget(class, key) == nil then class[key] = refusals[key] end
  end
  if rawget(class, "__call") == nil then
    class.__call = M.name(function() M.raise(("a %s cannot be called; its methods are x:name(...)"):format(name)) end, name .. ".__call")
  end
  return class
end

-- Raises with message unless ok; returns ok.
function M.check(ok, message)
  if not ok then M.raise(message) end
  return ok
end

return M
