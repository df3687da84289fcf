--- Tasks made outside C (docs/tasks.md, "Your own task"), every function gathered here (the
--- binding calls them by name: src/lua/task.c, dataset.c), one job a file under
--- lua/mech/task_custom/:
---   definition.lua  what such a task is in C and in Lua: its options' checks, its C task, and the
---                   record of the task mech.task.load is making
---   lua_task.lua    written in Lua (mech.task.new), made by a module from its options
---                   (mech.task.load, mech.task.register); a record's module, when trusted
---   draw.lua        task:dataset and task:sample: the documents drawn, or a file task's
---   record.lua      what a task records (task:spec, task:config) and the task of a record of any
---                   kind (mech.task.from_spec, mech.task.from_checkpoint)
---   jsonl.lua       read from a JSON-lines file (mech.task.from_jsonl), written back (ds:write_jsonl)
---   tokens.lua      text to token ids (task:to_tokens)
---
--- Such a task is a C task of kind CUSTOM (src/tasks/custom.c: vocabulary, names, declared
--- positions, corruption pool, holdout; every document is checked there and stored in the same
--- dataset storage as the built-in tasks', so batches and training steps cost the same). Its Lua
--- definition is the task userdata's user value.
local M = {}

for _, part in ipairs { "lua_task", "draw", "record", "jsonl", "tokens" } do
  for k, v in pairs(require("mech.task_custom." .. part)) do M[k] = v end
end

return M
