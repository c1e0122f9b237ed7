-- The peer specs' way to PyTorch: whether python3 has the modules, and a run of one of the
-- Python scripts in spec/support.
local M = {}

-- The interpreter the scripts run under: the first python3 that had the modules asked for
-- (the one on PATH, else Debian's /usr/bin/python3, which has python3-torch and python3-onnx),
-- without the sanitizer build's preloaded runtime (PyTorch aborts under it; the scripts are not
-- what that build checks).
local python = "env -u LD_PRELOAD python3"

-- Whether a python3 can `import <modules>` (modules: "torch, numpy"); that one runs M.run's
-- scripts.
function M.available(modules)
  for _, exe in ipairs({ "python3", "/usr/bin/python3" }) do
    exe = "env -u LD_PRELOAD " .. exe
    local ok = os.execute(("%s -c 'import %s' >/dev/null 2>&1"):format(exe, modules))
    if ok == 0 or ok == true then
      python = exe
      return true
    end
  end
  return false
end

-- Runs spec/support/<script> with the arguments (each passed as it is) and returns whether it
-- exited 0, and everything it printed (its exit code last, as "rc=N").
function M.run(script, ...)
  local path = (os.getenv("TOCHA_SOURCE_DIR") or ".") .. "/spec/support/" .. script
  local p = io.popen(("%s %s %s 2>&1; echo rc=$?"):format(python, path, table.concat({ ... }, " ")))
  local out = p:read("*a")
  p:close()
  return out:match("rc=0%s*$") ~= nil, out
end

return M
