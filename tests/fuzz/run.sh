#!/bin/sh
# run.sh: run libFuzzer targets built by fuzz.mk and report on each.
#
#   tests/fuzz/run.sh DIR SECONDS TARGET...
#
# For each TARGET, replay tests/fuzz/crashes/TARGET/* (regressions), then
# fuzz DIR/bin/fuzz-TARGET for SECONDS on DIR/corpus/TARGET, a copy of
# tests/fuzz/corpus/TARGET that the run may grow.  Crash inputs go to
# DIR/artifacts/, logs to DIR/log/.  Prints executions per target.
# FUZZ_ARGS in the environment adds libFuzzer flags (e.g. -jobs, -dict).
# Exit status: 0 when no target crashed, leaked or timed out; 1 otherwise;
# 2 on bad usage.
set -u

if [ $# -lt 3 ]; then
	echo "usage: tests/fuzz/run.sh dir seconds target..." >&2
	exit 2
fi
dir=$1
secs=$2
shift 2
src=tests/fuzz
: "${UBSAN_OPTIONS:=print_stacktrace=1}"
export UBSAN_OPTIONS
mkdir -p "$dir/log" "$dir/artifacts" || exit 1

# The lines of a sanitizer or contract report worth repeating.
report='^==[0-9]+==ERROR|^SUMMARY|contract broken'
failed=0
summary=""
for t in "$@"; do
	bin=$dir/bin/fuzz-$t
	corpus=$dir/corpus/$t
	log=$dir/log/$t.log
	status=ok
	if [ ! -x "$bin" ]; then
		echo "fuzz: $t: no binary $bin (run make fuzz-build)" >&2
		exit 1
	fi
	mkdir -p "$corpus" || exit 1
	if [ -d "$src/corpus/$t" ]; then
		cp -R "$src/corpus/$t/." "$corpus/" || exit 1
	fi
	dict=
	if [ -f "$src/$t.dict" ]; then
		dict=-dict=$src/$t.dict
	fi

	# Known crashes first: each must now run clean.
	if [ -d "$src/crashes/$t" ] &&
	    [ -n "$(ls -A "$src/crashes/$t")" ]; then
		if ! "$bin" -timeout=5 \
		    -artifact_prefix="$dir/artifacts/$t-replay-" \
		    "$src/crashes/$t"/* \
		    >"$dir/log/$t-replay.log" 2>&1; then
			status="saved crash fails"
			echo "fuzz: $t: a saved crash still fails;" \
			    "see $dir/log/$t-replay.log" >&2
			grep -E "$report|^Running: " "$dir/log/$t-replay.log" |
			    tail -n 6 >&2
		fi
	fi

	echo "fuzz: $t: ${secs}s"
	# shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
	"$bin" ${dict:+"$dict"} ${FUZZ_ARGS:-} -max_total_time="$secs" \
	    -max_len=65536 -timeout=5 -print_final_stats=1 \
	    -artifact_prefix="$dir/artifacts/$t-" "$corpus" >"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" |
	    tail -n 1)
	if [ "$rc" -ne 0 ]; then
		if [ "$status" = ok ]; then
			status="fuzzing failed (exit $rc)"
		else
			status="$status; fuzzing failed (exit $rc)"
		fi
		echo "fuzz: $t: libFuzzer exited $rc; see $log" >&2
		grep -E "$report|^artifact_prefix" "$log" | tail -n 6 >&2
	fi
	case $status in
	ok) ;;
	*) failed=1 ;;
	esac
	summary="$summary$(printf '%-8s %12s  %s' "$t" "${execs:-?}" "$status")
"
done

printf '%-8s %12s  %s\n%s' target executions status "$summary"
if [ "$failed" -ne 0 ]; then
	echo "fuzz: failures above; inputs in $dir/artifacts/" >&2
	exit 1
fi
exit 0
