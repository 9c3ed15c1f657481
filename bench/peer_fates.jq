# The stage rows' jq peer of rfp-backoff: each classified record's fate
# (no jitter: jq has no random numbers; no shared budget).  Its output goes
# through peer_file.awk, the peer of rfp-sink.
if .fate != null then . else
  (.attempt // 1) as $a |
  if .class == "ok" then .fate = "done"
  elif .class == "transient" and $a < 5 then
    .delay_s = ([30, 0.5 * pow(2; $a - 1)] | min) / 2
    | .delay_s = ([.delay_s, (.retry_after_s // 0)] | max)
    | .not_before = now + .delay_s | .fate = "retry"
  elif .class == "transient" then
    .fate = "dead" | .dead_reason = "exhausted"
  else .fate = "dead" | .dead_reason = "permanent" end end
