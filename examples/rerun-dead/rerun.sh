#!/bin/sh
# rerun.sh RUN [CONFIG]: try again, in a new run directory RUN-again, the
# documents of RUN that ran out of attempts.  dead.ndjson is a manifest as
# it stands: rfp-fetch clears the previous attempt's fields (status, error,
# attempt, fate, dead_reason, ...) from every record that carries a
# terminal fate before it sends it again.
set -eu
run=${1:?usage: rerun.sh RUN [CONFIG]}
again=$run-again.ndjson
jq -c 'select(.dead_reason=="exhausted")' "$run/dead.ndjson" >"$again"
if [ ! -s "$again" ]; then
	echo "rerun.sh: no document of $run ran out of attempts" >&2
	exit 0
fi
exec rfpipe ${2:+--config "$2"} --run-dir "$run-again" "$again"
