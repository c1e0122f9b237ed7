-- Runs the tocha executable in a child process for the CLI, cache and environment specs.
local M = {}

M.exe = os.getenv("TOCHA_EXE") or "build/tocha"

local function quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
M.quote = quote

local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("*a")
  f:close()
  os.remove(path)
  return s
end

-- run{args = {...}, env = {NAME = value or false}, stdin = "text"} -> stdout, stderr, status.
-- env values of false unset the variable.
function M.run(opts)
  local out, err, input = os.tmpname(), os.tmpname(), os.tmpname()
  local f = assert(io.open(input, "wb"))
  f:write(opts.stdin or "")
  f:close()
  local unset, set = {}, {}
  for name, value in pairs(opts.env or {}) do
    if value then set[#set + 1] = name .. "=" .. quote(value) else unset[#unset + 1] = "-u " .. name end
  end
  local parts = { table.concat(unset, " "), table.concat(set, " ") }
  local cmd = { "env", table.concat(parts, " "), quote(opts.exe or M.exe) }
  for _, a in ipairs(opts.args or {}) do cmd[#cmd + 1] = quote(a) end
  local line = table.concat(cmd, " ") .. " <" .. input .. " >" .. out .. " 2>" .. err .. "; echo $?"
  local p = io.popen(line)
  local status = tonumber(p:read("*a"))
  p:close()
  os.remove(input)
  return slurp(out), slurp(err), status
end

-- A fresh empty folder under $TMPDIR.
function M.tempdir()
  local p = io.popen("mktemp -d")
  local dir = p:read("*l")
  p:close()
  return dir
end

function M.remove_tree(dir)
  if dir and dir:match("^/tmp/") then os.execute("rm -rf " .. quote(dir)) end
end

-- Writes text to a fresh .lua file and returns its path.
function M.write_script(text)
  local path = os.tmpname() .. ".lua"
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

-- The tocha executable with these arguments, stdin and environment: stdout, stderr, status.
function M.tocha(args, stdin, env)
  return M.run { args = args, stdin = stdin, env = env }
end

-- A child's default device under `env`: "name | why" on stdout.
function M.default_device(env)
  return M.run {
    args = { "-e", "local d, why = require('tocha').default_device() io.write(d.name, ' | ', why)" },
    env = env,
  }
end

return M
