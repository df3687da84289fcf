--- Small helpers the Lua library shares: did-you-mean, deep copies, shell quoting, durations.
local util = {}

--- The key of `set` (a table whose keys are names) nearest to `name`, as mechlab's C side
--- chooses (ml_closest, src/core/closest.c: digits compared as numbers, substrings and the
--- shared synonym table, e.g. learning_rate -> lr); ties go to the first in sort order, so that
--- a message is the same on every run.
function util.closest(name, set)
  local names = {}
  for k in pairs(set) do
    if type(k) == "string" then names[#names + 1] = k end
  end
  table.sort(names)
  return require("mech").sys.closest(tostring(name), names)
end

--- A deep copy of plain data (tables copied, other values shared).
--- The message for the first key of opts not in the list `allowed` ("unknown option 'x' (did you
--- mean 'y'?)", the key cut to 80 characters), or nil when every key is allowed.
function util.unknown_option(opts, allowed)
  local set = {}
  for _, k in ipairs(allowed) do set[k] = true end
  for k in pairs(opts) do
    if not set[k] then
      return string.format("unknown option '%s' (did you mean '%s'?)", tostring(k):sub(1, 80),
        util.closest(tostring(k), set))
    end
  end
end

--- fail(fn, msg[, level]) raising "PREFIXfn: msg" at the caller of the function that calls it
--- (level 3, as error's levels count), for a module's argument errors.
function util.failer(prefix)
  return function(fn, msg, level) error(prefix .. fn .. ": " .. msg, level or 3) end
end

function util.copy(v)
  if type(v) ~= "table" then return v end
  local t = {}
  for k, x in pairs(v) do t[k] = util.copy(x) end
  return t
end

--- b's keys over a copy of a; tables with keys are merged key by key, lists replaced whole.
function util.deep_merge(a, b)
  local t = util.copy(a)
  for k, v in pairs(b) do
    if type(v) == "table" and type(t[k]) == "table" and #v == 0 and next(v) ~= nil then t[k] = util.deep_merge(t[k], v)
    else t[k] = util.copy(v) end
  end
  return t
end

--- s as one word of a POSIX shell command line.
function util.shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

--- Whole seconds as H:MM:SS.
function util.hms(seconds)
  seconds = math.ceil(seconds)
  return string.format("%d:%02d:%02d", seconds // 3600, seconds // 60 % 60, seconds % 60)
end

--- A progress line's time: MM:SS, H:MM:SS from an hour on, --:-- when unknown (nil, NaN, inf).
function util.clock(seconds)
  if not seconds or seconds ~= seconds or seconds == math.huge then return "--:--" end
  seconds = math.floor(seconds + 0.5)
  if seconds >= 3600 then return util.hms(seconds) end
  return string.format("%02d:%02d", seconds // 60, seconds % 60)
end

return util
