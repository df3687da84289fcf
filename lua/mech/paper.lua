--- The paper (docs/reproduction.md): what the sweep files under experiments/paper/ and the figure
--- recipes under plots/paper/ share, one concern per file under lua/mech/paper/ and every field
--- gathered here, so that `paper.X` reaches each:
---   suite.lua      the suites' constants and profiles, which runs form the paper's curves
---   style.lua      names, the architectures' order, colours and markers
---   stats.lua      mean ± sd and the key lines stating them
---   selection.lua  a sweep's rows, the best learning rate per width, the 0.01 filter
---   draw.lua       the figure kinds (accuracy against width, Attrib boxes and scatters)
---   figures.lua    the figure list, read from the recipes, and a recipe run on its own
---   tables/        docs/reproduction.md's tables and claims ledger (paper.tables: tables/page.lua)
local paper = {}

for _, part in ipairs { "suite", "style", "stats", "selection", "draw", "figures" } do
  for k, v in pairs(require("mech.paper." .. part)) do paper[k] = v end
end

--- Which runs passed the 0.01 filter where the rows carry no denominators ({label = {run =
--- true}}), set by paper.use_recorded_filter; nil: the rows' attrib_den only.
paper.recorded_filter = nil

-- paper.figures, the list of recipes, is read from plots/paper/ when first asked for: the recipes
-- themselves require mech.paper.
setmetatable(paper, { __index = function(t, k)
  if k == "figures" then
    local list = paper.read_figures()
    rawset(t, "figures", list)
    return list
  end
  if k == "tables" then return require "mech.paper.tables.page" end
end })

return paper
