-- Runs a script in a tocha process of its own from a fresh working folder, and lists folders
-- before and after, for the specs that check what a script writes (readme_spec.lua,
-- examples_spec.lua). Other people's processes write into the checkout and /tmp while a spec
-- runs, so the specs compare listings by the names a script could write, never whole trees.
local process = require "support.process"

local M = {}

-- The tocha executable as an absolute path: a relative TOCHA_EXE names it from the folder the
-- spec started in, which is not the folder the script runs in.
local function exe()
  local e = process.exe
  if e:sub(1, 1) == "/" then return e end
  return (os.getenv("PWD") or ".") .. "/" .. e
end

-- The names in dir (hidden ones too) as a set; an absent folder is empty.
function M.listing(dir)
  local names = {}
  local p = io.popen("ls -A " .. process.quote(dir) .. " 2>/dev/null")
  for name in p:lines() do names[name] = true end
  p:close()
  return names
end

-- The names in after that are not in before, sorted, those for which keep(name) holds (all
-- when keep is nil).
function M.new_names(before, after, keep)
  local new = {}
  for name in pairs(after) do
    if not before[name] and (keep == nil or keep(name)) then new[#new + 1] = name end
  end
  table.sort(new)
  return new
end

-- run(cwd, args, env) -> stdout, stderr, status: tocha with args, started in cwd.
function M.run(cwd, args, env)
  local cmd = { 'cd "$1" && shift && exec "$@"', "sh", cwd, exe() }
  for _, a in ipairs(args) do cmd[#cmd + 1] = a end
  return process.run { exe = "sh", args = { "-c", unpack(cmd) }, env = env }
end

return M
