-- Fig. 3a: AR accuracy against width at the best learning rate per (architecture, width); the
-- paper's main curves pair Attention with learned positions with every other architecture
-- without.   mechlab plots/paper/fig3a.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "fig3a", sweeps = { "ar" }, title = "AR accuracy vs width (best LR)",
  -- the quick profile has one learning rate; its slice (profile lr_slice) adds three, and
  -- profile mamba_256 Mamba at the paper's d = 256 at its best of them
  slices = { quick = { ar = { "lr_slice", "mamba_256" } } } }

-- The key lines add the per-width attribution table of spec §6.7: Attrib at the layer-1 block input
-- of the selected runs (mean ± sd over seeds).
function recipe.draw(dirs, out)
  local rows = paper.results(dirs, "ar")
  -- the caption says which learning rates and seeds the points are; points that would overlap
  -- (the failing architectures near 0) are moved apart, centred on their width
  local best, widths, archs = paper.accuracy_figure(rows, out, { title = "AR", where = paper.main_curve, dodge = 6,
    selection_caption = true, caption = "overlapping points moved apart along x, centred on their width" })
  local keys = paper.accuracy_keys(best, widths, archs)
  for _, a in ipairs(archs) do
    local parts = {}
    for _, d in ipairs(widths) do
      local e = best[a][d]
      if e then
        local at = {}
        for _, pos in ipairs { "value", "query", "key" } do
          local v = paper.attrib_of_runs(rows, e.runs, pos)
          at[#at + 1] = #v > 0 and paper.fmt_mean(v, 2) or "-"
        end
        parts[#parts + 1] = string.format("d=%d V %s Q %s K %s", d, table.unpack(at))
      end
    end
    keys[#keys + 1] = paper.arch_name(a) .. " Attrib at the best LR: " .. table.concat(parts, ", ")
  end
  return keys
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
