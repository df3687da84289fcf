-- mech.nn: layers and modules as Lua objects (docs/nn.md, "Layers"). Reached as mech.nn (loaded on
-- first use) or require "mech.nn".
local nn = require "mech.nn.module"
nn.Linear = require "mech.nn.linear"
nn.Embedding = require "mech.nn.embedding"
local norm = require "mech.nn.norm"
nn.LayerNorm, nn.RMSNorm = norm.LayerNorm, norm.RMSNorm
nn.Conv1d = require "mech.nn.conv"
nn.MLP = require "mech.nn.mlp"
local containers = require "mech.nn.containers"
nn.Sequential, nn.ModuleList = containers.Sequential, containers.ModuleList
nn.Block = require "mech.nn.block"
for name, cls in pairs(require "mech.nn.mixers") do nn[name] = cls end
nn.cross_entropy = require("mech.nn.functional").cross_entropy
-- a Module class as a mixer of the language model (src/lua/mixer.c)
nn.register_mixer = mech.register_mixer
nn.LM = require "mech.nn.lm"
return nn
