-- Fig. 6c: Based on AR, accuracy against width at the best learning rate, one line per BaseConv
-- kernel 1, 2, 3 (the default Based of the AR suite), 4 and long, plus BaseConv with long convs.
--   mechlab plots/paper/fig6c.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig6c", sweeps = { "ar", "based_ablation" }, title = "Based on AR by conv kernel (best LR)" }

-- the lines, in order: kernels 1-4, long, BaseConv long
local names = { "1", "2", "3", "4", "long", "BaseConv long" }
local function line(r)
  if r.long_only == true then return r.arch == "based" and 5 or 6 end
  return r.d_conv or 3
end

function recipe.draw(dirs, out)
  local rows = paper.rows(dirs, { "ar", "based_ablation" })
  local best, widths, lines = paper.accuracy_figure(rows, out, {
    title = "Based, AR", legend_title = "Conv.", palette = "blues", name = function(k) return names[k] end,
    where = function(r) return not r.pos_emb and (r.arch == "based" or r.long_only == true) end, group = line,
  })
  return paper.accuracy_keys(best, widths, lines, function(k) return "kernel " .. names[k] end)
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
