-- v3 (spec §9.2): AR accuracy by learning rate and width, one row per (architecture, learning
-- rate) of the main curves, the mean over seeds: how sensitive each cell is to the learning rate.
--   mechlab plots/paper/v3_lr_heatmap.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "v3_lr_heatmap", sweeps = { "ar" }, title = "v3: AR accuracy by learning rate and width",
  -- the quick profile has one learning rate; its slice (profile lr_slice) adds three
  slices = { quick = { ar = { "lr_slice" } } } }

function recipe.draw(dirs, out)
  local cells, archs, lrs, widths, seen = {}, {}, {}, {}, {}
  for _, r in ipairs(paper.results(dirs, "ar")) do
    if r.metric == "accuracy" and r.split == "test" and r.step_kind == "report" and paper.main_curve(r) then
      local k = r.arch .. "|" .. r.lr .. "|" .. r.d_model
      cells[k] = cells[k] or {}
      table.insert(cells[k], r.value)
      for list, v in pairs { [archs] = r.arch, [lrs] = r.lr, [widths] = r.d_model } do
        seen[list] = seen[list] or {}
        if not seen[list][v] then seen[list][v] = true; list[#list + 1] = v end
      end
    end
  end
  paper.sort_keys(archs)
  table.sort(lrs)
  table.sort(widths)
  local data, ylabels, keys = {}, {}, {}
  for _, a in ipairs(archs) do
    for _, lr in ipairs(lrs) do
      local row, parts = {}, {}
      for _, d in ipairs(widths) do
        local v = cells[a .. "|" .. lr .. "|" .. d]
        row[#row + 1] = v and paper.mean_sd(v) or 0 / 0
        if v then parts[#parts + 1] = string.format("d=%d %s", d, paper.fmt_mean(v)) end
      end
      if #parts > 0 then
        data[#data + 1] = row
        ylabels[#ylabels + 1] = string.format("%s  %g", paper.arch_name(a), lr)
        keys[#keys + 1] = string.format("%s lr %g: %s", paper.arch_name(a), lr, table.concat(parts, ", "))
      end
    end
  end
  local xlabels = {}
  for i, d in ipairs(widths) do xlabels[i] = tostring(d) end
  mech.plot.heatmap { data = data, xlabels = xlabels, ylabels = ylabels, cmap = "viridis", vmin = 0, vmax = 1,
    values = true, title = "AR accuracy (mean over seeds)", xlabel = "model width d", ylabel = "architecture, learning rate",
    colorbar = "accuracy", scale = 2, out = out }
  return keys
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
