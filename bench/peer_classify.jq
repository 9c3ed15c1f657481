# The stage rows' jq peer of rfp-classify: the classification table of
# doc/design.md, in jq (bench/run.sh runs it as jq -c -f).
def cls:
  if .error != null then
    {class: (if (.error | IN("timeout", "connect", "reset", "deadline"))
             then "transient" else "permanent" end), reason: .error}
  elif (.status | type) != "number" then
    {class: "permanent",
     reason: (if .status == null then "no_outcome" else "bad_status" end)}
  elif .status >= 200 and .status <= 299 then
    (if .check != null and .check != false
     then {class: "permanent", reason: "invalid_body"}
     else {class: "ok", reason: "http_\(.status)"} end)
  elif (.status | IN(429, 500, 502, 503, 504)) then
    {class: "transient", reason: "http_\(.status)"}
  elif (.status | IN(400, 401, 403, 404, 422)) then
    {class: "permanent", reason: "http_\(.status)"}
  else {class: "permanent", reason: "unknown_http_\(.status)"} end;
if .fate != null then . else
  . + cls
  + {retry_after_s: (try (.retry_after | tonumber) catch null)} end
