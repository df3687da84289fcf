-- Fig. 6c: Based on AR, accuracy against width at the best learning rate, one line per BaseConv
-- kernel 1, 2, 3 (the default Based of the AR suite), 4 and long, plus BaseConv with long convs.
--   mechlab plots/paper/fig6c.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig6c", sweeps = { "ar", "based_ablation" }, title = "Based on AR by conv kernel (best LR)" }

-- the lines, in order: kernels 1-4, long, BaseConv long
local names = { "kernel 1", "kernel 2", "kernel 3", "kernel 4", "Based, long conv", "BaseConv, long conv" }
local function line(r)
  if r.long_only == true then return r.arch == "based" and 5 or 6 end
  return r.d_conv or 3
end
-- Based's kernels: a Blues shade and a marker each; BaseConv (another architecture) grey, dashed
local markers = { "circle", "triangle", "square", "diamond", "triangle_down" }
local function style(k)
  if k == 6 then return "#4d4d4d", "plus" end
  return mech.plot.color("blues", k - 1, 5), markers[k]
end

function recipe.draw(dirs, out)
  local rows = paper.rows(dirs, { "ar", "based_ablation" })
  local best, widths, lines = paper.accuracy_figure(rows, out, {
    title = "Based, AR", legend_title = "Conv.", style = style, dodge = 6, dashed = function(k) return k == 6 end,
    name = function(k) return names[k] end, selection_caption = true, caption = "kernel 3: the Based of the AR suite",
    where = function(r) return not r.pos_emb and (r.arch == "based" or r.long_only == true) end, group = line,
    width = 460,
  })
  return paper.accuracy_keys(best, widths, lines, function(k) return names[k] end)
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
