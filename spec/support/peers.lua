-- The peer specs' way to PyTorch: whether python3 has the modules, and a run of one of the
-- Python scripts in spec/support.
local M = {}

-- Whether `python3 -c 'import <modules>'` succeeds (modules: "torch, numpy").
function M.available(modules)
  local ok = os.execute(("python3 -c 'import %s' >/dev/null 2>&1"):format(modules))
  return ok == 0 or ok == true
end

-- Runs spec/support/<script> with the arguments (each passed as it is) and returns whether it
-- exited 0, and everything it printed (its exit code last, as "rc=N").
function M.run(script, ...)
  local path = (os.getenv("TOCHA_SOURCE_DIR") or ".") .. "/spec/support/" .. script
  local p = io.popen(("python3 %s %s 2>&1; echo rc=$?"):format(path, table.concat({ ... }, " ")))
  local out = p:read("*a")
  p:close()
  return out:match("rc=0%s*$") ~= nil, out
end

return M
