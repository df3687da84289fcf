--- The paper's figures: one recipe per figure, plots/paper/<id>.lua, returning {id, sweeps, title,
--- draw} and, optionally, slices = {profile = {sweep = {other profiles}}}: at that profile the
--- sweep's rows take those profiles' rows too, where they have been run (the quick profile's AR
--- curves and its learning-rate slice). The figure list is read from those files (nothing repeats what they say), and the
--- sweeps of experiments/paper/ are found beside them. Part of mech.paper.
local util = require "mech.util"

local figures = {}

-- Found as mech.find does: a copy under the working directory first, else the installation's.
local function found(path) return mech.find(path) or path end
function figures.sweep_file(name) return found("experiments/paper/" .. name .. ".lua") end
function figures.recipe_file(id) return found("plots/paper/" .. id .. ".lua") end

-- Ids in natural order: numbers compared as numbers (fig3a ... fig9b, fig10, then v3_*).
local function natural_key(id) return (id:gsub("%d+", function(d) return string.format("%09d", tonumber(d)) end)) end

--- The recipes' ids: every plots/paper/<id>.lua under the working directory and in mechlab's
--- home (recipe_file takes the working directory's copy first), in natural order.
function figures.recipe_ids()
  local ids, seen = {}, {}
  for _, dir in ipairs { "plots/paper", mech.home and (mech.home .. "/plots/paper") } do
    local p = io.popen("ls -A " .. util.shell_quote(dir) .. " 2>/dev/null")
    for name in p:lines() do
      local id = name:match("^(.+)%.lua$")
      if id and not seen[id] then seen[id] = true; ids[#ids + 1] = id end
    end
    p:close()
  end
  table.sort(ids, function(a, b) return natural_key(a) < natural_key(b) end)
  return ids
end

--- The figures: {id, sweeps, slices} per recipe (sweeps: the experiments/paper/ sweeps it reads),
--- in natural order of their ids. A recipe whose id differs from its file name is an error.
function figures.read_figures()
  local list = {}
  for _, id in ipairs(figures.recipe_ids()) do
    local recipe = dofile(figures.recipe_file(id))
    if type(recipe) ~= "table" or recipe.id ~= id or type(recipe.sweeps) ~= "table" then
      error(string.format("mech.paper: plots/paper/%s.lua does not return a recipe {id = \"%s\", sweeps = {...}}", id, id), 0)
    end
    list[#list + 1] = { id = id, sweeps = recipe.sweeps, slices = recipe.slices or {} }
  end
  return list
end

--- A recipe run on its own: `mechlab plots/paper/<id>.lua DIR [OUT.png]`, DIR either the entry
--- point's directory (its sweeps under DIR/sweeps/<name>) or, for a one-sweep figure, the sweep's.
function figures.main(recipe, dir, out)
  local dirs = {}
  for _, s in ipairs(recipe.sweeps) do
    dirs[s] = mech.sys.exists(dir .. "/sweeps/" .. s) and (dir .. "/sweeps/" .. s) or dir
  end
  for _, line in ipairs(recipe.draw(dirs, out or (recipe.id .. ".png"))) do print(line) end
end

return figures
