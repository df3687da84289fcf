-- mech.nn: layers and modules as Lua objects (docs/nn.md, "Layers"). Reached as mech.nn (loaded on
-- first use) or require "mech.nn".
local nn = require "mech.nn.module"
return nn
