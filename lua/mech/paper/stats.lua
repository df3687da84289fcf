--- Statistics and the key lines that state them (mean ± sd over seeds or runs, the selection
--- behind a figure). Part of mech.paper.
local style = require "mech.paper.style"

local stats = {}

--- The mean and sample standard deviation of a list (sd 0 for one value).
function stats.mean_sd(list)
  local n, sum = #list, 0
  for _, v in ipairs(list) do sum = sum + v end
  local mean, ss = sum / n, 0
  for _, v in ipairs(list) do ss = ss + (v - mean) ^ 2 end
  return mean, n > 1 and math.sqrt(ss / (n - 1)) or 0
end

--- "mean ± sd" (or the single value), and the same for a list.
function stats.fmt_mean(values, digits)
  local m, sd = stats.mean_sd(values)
  local f = "%." .. (digits or 3) .. "f"
  if #values > 1 then return string.format(f .. " ± " .. f, m, sd) end
  return string.format(f, m)
end

--- One key line per line of an accuracy figure: "Attention: d=32 0.71 ± 0.12 (lr 0.001, 2 seeds), …".
function stats.accuracy_keys(best, widths, lines, name, prefix)
  local keys = {}
  for _, g in ipairs(lines) do
    local parts = {}
    for _, d in ipairs(widths) do
      local e = best[g][d]
      if e then
        parts[#parts + 1] = string.format("d=%d %s (lr %g%s)", d, stats.fmt_mean(e.values), e.lr,
          e.n > 1 and string.format(", %d seeds", e.n) or "")
      end
    end
    keys[#keys + 1] = (prefix or "") .. (name or style.arch_name)(g) .. ": " .. table.concat(parts, ", ")
  end
  return keys
end

--- A caption line saying what an accuracy figure selected: the learning rates tried and taken,
--- and the seeds averaged. rows: the rows the figure drew from; best: best_per_width's table.
function stats.selection_caption(rows, best)
  local tried, taken, seeds, run_seed = {}, {}, {}, {}
  for _, r in ipairs(rows) do
    if r.metric == "accuracy" and r.step_kind == "report" then
      tried[r.lr] = true
      run_seed[r.run] = r.seed
    end
  end
  for _, cells in pairs(best) do
    for _, e in pairs(cells) do
      taken[e.lr] = true
      for _, id in ipairs(e.runs) do if run_seed[id] then seeds[run_seed[id]] = true end end
    end
  end
  local function list(set)
    local l = {}
    for v in pairs(set) do l[#l + 1] = v end
    table.sort(l)
    for i, v in ipairs(l) do l[i] = string.format("%g", v) end
    return l
  end
  local lt, lk, ls = list(tried), list(taken), list(seeds)
  local lr = #lt == 1 and ("lr " .. lt[1] .. " (the only one run)")
    or string.format("best lr per cell of %s (taken: %s)", table.concat(lt, ", "), table.concat(lk, ", "))
  local seed = #ls == 1 and ("seed " .. ls[1]) or ("seeds " .. table.concat(ls, ", ") .. ": faded points each seed, line the mean")
  return lr .. "; " .. seed
end

--- Key lines of a scatter: per series, the mean ± sd of both coordinates.
function stats.scatter_keys(series, xname, yname)
  local keys = {}
  for _, sr in ipairs(series) do
    if #sr.x > 0 then
      keys[#keys + 1] = string.format("%s: %s %s, %s %s (%d runs)", sr.label, xname, stats.fmt_mean(sr.x, 2), yname,
        stats.fmt_mean(sr.y, 2), #sr.x)
    end
  end
  return keys
end

return stats
