-- The stack of hook contexts (docs/ARCHITECTURE.md, "Modules and the hook-context seam"): a module
-- does not know who observes it; its output, and every HookPoint's, fires as the site at its path
-- through the top context. A module's run_with_cache / run_with_hooks push one whose fire runs Lua
-- hooks; the C model running a Lua mixer pushes one whose fire is ml_site (src/lua/mixer.c).
-- Reached as mech.nn.push_context, pop_context, active, wants and fire.
local mech = _G.mech
local checks = require "mech.nn.checks"

local M = {}

-- Only the top context receives sites (the innermost run owns them).
local contexts, ncontexts = {}, 0

--- Pushes a hook context: a table with fire(path, tensor) -> tensor and optionally wants(path).
function M.push_context(ctx)
  if type(ctx) ~= "table" or type(ctx.fire) ~= "function" then
    error("mech.nn.push_context: argument 1 expected a table with a fire(path, tensor) function, got " ..
      (type(ctx) == "table" and "a table without fire" or type(ctx)), 2)
  end
  ncontexts = ncontexts + 1
  contexts[ncontexts] = ctx
end

--- Pops the top hook context (an error when there is none).
function M.pop_context()
  if ncontexts == 0 then error("mech.nn.pop_context: no hook context to pop", 2) end
  contexts[ncontexts] = nil
  ncontexts = ncontexts - 1
end

--- Whether a hook context is active (a layer may then pass its internal sites on).
function M.active() return ncontexts > 0 end

--- Whether the top hook context wants site `path` (false with none; true if it has no wants).
function M.wants(path)
  local ctx = contexts[ncontexts]
  if not ctx then return false end
  if ctx.wants then return ctx.wants(path) and true or false end
  return true
end

--- Fires site `path` with t through the top context; returns t (when none is active or t is no
--- tensor) or its replacement, which must have t's dtype and shape.
function M.fire(path, t)
  if ncontexts == 0 or not mech.is_tensor(t) then return t end
  local ctx = contexts[ncontexts]
  if ctx.wants and not ctx.wants(path) then return t end
  local r = ctx.fire(path, t)
  if r == nil or r == t then return t end
  if not mech.is_tensor(r) or r:dtype() ~= t:dtype() or not checks.same_shape(r, t) then
    error(string.format("mech.nn: hook at %s returned %s, expected a %s tensor of shape %s", path,
      mech.is_tensor(r) and ("a " .. r:dtype() .. " tensor of shape " .. checks.shape_str(r)) or type(r),
      t:dtype(), checks.shape_str(t)), 0)
  end
  return r
end

return M
