-- Runs a check against a second load of tocha, as busted makes one for each spec file: every
-- tocha module is dropped from package.loaded, fn(again) runs with `again = require "tocha"`,
-- and the first load's modules are put back whatever fn did. Tensors keep the first load's
-- methods (an FFI metatype is set once), so fn sees the two loads meet as they do in a run of
-- several spec files. Raises fn's error after the modules are restored.
local M = {}

local function is_tocha(name) return name == "tocha" or name:match("^tocha%.") ~= nil end

function M.with_second_load(fn)
  local saved = {}
  for name, m in pairs(package.loaded) do
    if is_tocha(name) then saved[name] = m; package.loaded[name] = nil end
  end
  local ok, err = pcall(function() fn(require "tocha") end)
  for name in pairs(package.loaded) do
    if is_tocha(name) then package.loaded[name] = nil end
  end
  for name, m in pairs(saved) do package.loaded[name] = m end
  if not ok then error(err, 0) end
end

return M
