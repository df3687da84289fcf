-- mech.nn's base (docs/nn.md, "Layers"), what every layer file requires: the Module class
-- (mech.nn.class: classes, children, parameters, printing), the stack of hook contexts
-- (mech.nn.hook_context: push_context, pop_context, active, wants, fire) and hooks on Lua trees
-- (mech.nn.hooks: hook_names, run_with_hooks, run_with_cache, add_hook, HookPoint), gathered
-- in one table.
local nn = require "mech.nn.class"
for k, f in pairs(require "mech.nn.hook_context") do nn[k] = f end
require "mech.nn.hooks"
return nn
