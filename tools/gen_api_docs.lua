-- Writes docs/api.md from the help registry (lua/mech/help.lua), atomically.
--   mechlab tools/gen_api_docs.lua [out = docs/api.md]
local out = arg and arg[1] or "docs/api.md"
mech.sys.write_atomic(out, require("mech.help").markdown())
print("wrote " .. out)
