-- Fig. 3a: AR accuracy against width at the best learning rate per (architecture, width); the
-- paper's main curves pair Attention with learned positions with every other architecture
-- without.   mechlab plots/paper/fig3a.lua RESULTS_DIR OUT.png
local paper = require "mech.paper"
local sweep = require "mech.sweep"

local recipe = { id = "fig3a", sweeps = { "ar" }, title = "AR accuracy vs width (best LR)" }

function recipe.draw(dirs, out)
  local rows = sweep.results(dirs.ar)
  local best, widths, archs = paper.accuracy_figure(rows, out, {
    title = "AR", where = function(r) return r.pos_emb == (r.arch == "attention") end,
  })
  local keys = {}
  for _, a in ipairs(archs) do
    local parts = {}
    for _, d in ipairs(widths) do
      local e = best[a][d]
      if e then
        parts[#parts + 1] = e.n > 1 and string.format("d=%d: %.3f ± %.3f (lr %g)", d, e.mean, e.sd, e.lr) or
            string.format("d=%d: %.3f (lr %g)", d, e.mean, e.lr)
      end
    end
    keys[#keys + 1] = paper.arch_name(a) .. " " .. table.concat(parts, ", ")
  end
  return keys
end

if select("#", ...) > 0 then
  local dir, out = ...
  for _, line in ipairs(recipe.draw({ ar = dir }, out or "fig3a.png")) do print(line) end
end
return recipe
