# bench/lib/stage.sh: the stage rows: synthetic fetched records through
# rfp-classify and rfp-backoff | rfp-sink, against their jq peers
# (bench/peer_classify.jq, bench/peer_fates.jq | bench/peer_file.awk).
# Its globals are set by bench/run.sh (checked whole with it).
# shellcheck shell=bash disable=SC2034,SC2154

# gen_stage N: N synthetic records as rfp-fetch emits them; the last two
# digits of the number choose the outcome: 78% 200, 5% each 429 and 503
# (Retry-After: 1), 5% each timeout and reset, 1% 404, 1% 418; attempts
# 1..5 by hundreds.
gen_stage() {
	awk -v n="$1" 'BEGIN {
		sha = "a351971d7404b8f90c4abdea7b715c12c8133ac45f74cc07937c20fc199300f2"
		for (i = 1; i <= n; i++) {
			k = i % 100
			att = 1 + int(i / 100) % 5
			ra = ""; err = "null"; det = ""
			if (k < 78) st = 200
			else if (k < 83) { st = 429; ra = "\"retry_after\":\"1\"," }
			else if (k < 88) { st = 503; ra = "\"retry_after\":\"1\"," }
			else if (k < 93) { st = "null"; err = "\"timeout\""
				det = "\"error_detail\":\"Operation timed out after 2000 milliseconds\"," }
			else if (k < 98) { st = "null"; err = "\"reset\""
				det = "\"error_detail\":\"Connection reset by peer\"," }
			else if (k == 98) st = 404
			else st = 418
			printf "{\"id\":\"doc-%d\",\"url\":\"https://portal.example.org/portal/doc-%d\"," \
			    "\"endpoint\":\"portal\",\"attempt\":%d,\"status\":%s,\"error\":%s,%s" \
			    "\"elapsed_ms\":%d,\"response_at\":1795990507.%06d," \
			    "\"date\":\"Sun, 29 Nov 2026 22:15:07 GMT\",%s\"bytes\":%d," \
			    "\"sha256\":\"%s\",\"content_type\":\"application/json\"," \
			    "\"check\":null,\"body_path\":\"docs/doc-%d\"}\n",
			    i, i, att, st, err, det, 5 + i % 40, i % 1000000, ra,
			    40 + i % 9, sha, i
		}
	}'
}

# stage_scenario: the stage rows for each N of stage_ns.
stage_scenario() {
	local n
	mkdir -p "$work/stage"
	for n in $stage_ns; do
		run_stage "$n"
	done
	rm -f "$work"/stage/in-*.ndjson
}

# run_stage N: the four stage runs on N records.
run_stage() {
	local n=$1 d=$work/stage/$1 in=$work/stage/in-$1.ndjson
	rm -rf "$d"
	mkdir -p "$d"
	[ -s "$in" ] || gen_stage "$n" >"$in"
	stage_classify "$n" "$d" "$in"
	stage_backoff_sink "$n" "$d" "$d/classified.ndjson"
	stage_jq_classify "$n" "$d" "$in"
	stage_jq_file "$n" "$d" "$d/classified.ndjson"
	rm -rf "$d/jqfile"/*.ndjson "$d/backoff/run" "$d/backoff/retry.ndjson" \
	    "$d/classified.ndjson"
}

# stage_classify N DIR IN: rfp-classify, the median of five runs; its
# output in DIR/classified.ndjson.  On this shared machine a run of a
# second or two varies by a third from one run to the next (1.39, 2.03 and
# 2.30 s in one bench; 427,000 and 645,000 records/s in two benches of the
# same code), while jq's run of twenty seconds averages such spells out.
stage_classify() {
	local n=$1 d=$2 in=$3 scen k runs='' cls=$2/classified.ndjson lines
	scen="stage $(human "$n")"
	for k in 1 2 3 4 5; do
		mkdir -p "$d/classify$k"
		run_timed "$d/classify$k" "$t_stage" "$in" "$bin/rfp-classify"
		runs="$runs$elapsed $k $rc
"
		[ "$k" -eq 5 ] || rm -f "$d/classify$k/stdout"
	done
	read -r elapsed k rc <<<"$(printf '%s' "$runs" | sort -g | sed -n 3p)"
	echo "$scen, rfp-classify: median of 5 runs; makespans $(printf '%s' "$runs" | cut -d' ' -f1 | sort -g | paste -sd' ') s" >>"$notes"
	mv "$d/classify5/stdout" "$cls"
	lines=$(count_lines "$cls")
	tsv_row "$tsv" "$scen" rfp-classify "$n" - "$elapsed" - - \
	    "$(count_matches '"class":"ok"' "$cls")" - "$((n - lines))" \
	    "$(time_cpu "$d/classify$k/time.txt")" \
	    "$(time_rss "$d/classify$k/time.txt")" "$(exit_word "$rc")" \
	    rfp-classify
	say "$scen rfp-classify: ${elapsed}s (median of 5), $lines records out, exit $rc"
}

# stage_backoff_sink N DIR IN: rfp-backoff | rfp-sink, each stage timed on
# its own, in DIR/backoff.
stage_backoff_sink() {
	local n=$1 b=$2/backoff in=$3 scen t0 rcb rcs=0 ndone ndead nretry
	scen="stage $(human "$n")"
	mkdir -p "$b"
	t0=$(now)
	{ timeout -k 5 "$t_stage" /usr/bin/time -v -o "$b/time-backoff.txt" \
	    "$bin/rfp-backoff" --run-dir "$b/run" --admitted "$n" --seed 1 \
	    <"$in" 2>"$b/stderr-backoff" |
	    timeout -k 5 "$t_stage" /usr/bin/time -v -o "$b/time-sink.txt" \
	    "$bin/rfp-sink" --run-dir "$b/run" -q >"$b/retry.ndjson" \
	    2>"$b/stderr-sink"; } &
	wait "$!" || rcs=$?
	rcb=$(awk -F': ' '/Exit status/ { print $2 }' "$b/time-backoff.txt")
	elapsed=$(sub "$(now)" "$t0")
	ndone=$(count_lines "$b/run/results.ndjson")
	ndead=$(count_lines "$b/run/dead.ndjson")
	nretry=$(count_lines "$b/retry.ndjson")
	tsv_row "$tsv" "$scen" rfp-backoff "$n" - "$elapsed" - - - - - \
	    "$(time_cpu "$b/time-backoff.txt")" \
	    "$(time_rss "$b/time-backoff.txt")" "$(exit_word "${rcb:-?}")" \
	    rfp-backoff
	tsv_row "$tsv" "$scen" rfp-sink "$n" - "$elapsed" - - "$ndone" "$ndead" \
	    "$((n - ndone - ndead - nretry))" "$(time_cpu "$b/time-sink.txt")" \
	    "$(time_rss "$b/time-sink.txt")" "$(exit_word "$rcs")" rfp-backoff
	say "$scen rfp-backoff | rfp-sink: ${elapsed}s, done $ndone, dead $ndead," \
	    "retry $nretry"
	echo "stage $(human "$n"): rfp-backoff | rfp-sink filed $ndone done, $ndead dead, $nretry retry (to stdout, no FIFO)" >>"$notes"
}

# stage_jq_classify N DIR IN: the jq peer of rfp-classify, and whether the
# two agree on every record's class and reason.
stage_jq_classify() {
	local n=$1 d=$2/jq in=$3 scen lines cr
	scen="stage $(human "$n")"
	mkdir -p "$d"
	run_timed "$d" "$t_stage" "$in" jq -c -f "$here/peer_classify.jq"
	lines=$(count_lines "$d/stdout")
	tsv_row "$tsv" "$scen" jq-classify "$n" - "$elapsed" - - \
	    "$(count_matches '"class":"ok"' "$d/stdout")" - "$((n - lines))" \
	    "$(time_cpu "$d/time.txt")" "$(time_rss "$d/time.txt")" \
	    "$(exit_word "$rc")" rfp-classify
	say "$scen jq classify: ${elapsed}s, $lines records out, exit $rc"
	# A record's id, class and reason.
	cr='s/^\{"id":"([^"]*)".*"class":"([a-z]*)".*"reason":"([^"]*)".*/\1 \2 \3/'
	if cmp -s <(sed -E "$cr" "$2/classified.ndjson") <(sed -E "$cr" "$d/stdout")
	then
		echo "stage $(human "$n"): jq and rfp-classify agree on every record's class and reason" >>"$notes"
	else
		echo "stage $(human "$n"): jq and rfp-classify DISAGREE on some class/reason" >>"$notes"
	fi
	rm -f "$d/stdout"
}

# stage_jq_file N DIR IN: the jq peer of rfp-backoff, filing through awk,
# the peer of rfp-sink.
stage_jq_file() {
	local n=$1 d=$2/jqfile in=$3 ndone ndead nretry
	mkdir -p "$d"
	# shellcheck disable=SC2016  # expanded by that sh
	run_timed "$d" "$t_stage" "$in" sh -c \
	    'jq -c -f "$1" | awk -v r=results.ndjson -v d=dead.ndjson -v t=retry.ndjson -f "$2"' \
	    sh "$here/peer_fates.jq" "$here/peer_file.awk"
	ndone=$(count_lines "$d/results.ndjson")
	ndead=$(count_lines "$d/dead.ndjson")
	nretry=$(count_lines "$d/retry.ndjson")
	tsv_row "$tsv" "stage $(human "$n")" jq-file "$n" - "$elapsed" - - \
	    "$ndone" "$ndead" "$((n - ndone - ndead - nretry))" \
	    "$(time_cpu "$d/time.txt")" "$(time_rss "$d/time.txt")" \
	    "$(exit_word "$rc")" rfp-backoff
	say "stage $(human "$n") jq fate | awk file: ${elapsed}s, done $ndone, dead $ndead, retry $nretry"
}

# stage_checks: rfp-classify at least ten times jq at the larger N, and
# each stage's peak RSS flat in N and small.
stage_checks() {
	local small big cs js st rs rb ok
	# shellcheck disable=SC2086  # one word per N
	set -- $stage_ns
	small=$1
	big=${2:-$1}
	has "stage $(human "$big")" rfp-classify || return 0
	cs=$(awk -v n="$big" -v m="$(get "stage $(human "$big")" rfp-classify makespan)" 'BEGIN { printf "%.0f", n / m }')
	js=$(awk -v n="$big" -v m="$(get "stage $(human "$big")" jq-classify makespan)" 'BEGIN { printf "%.0f", n / m }')
	echo "$(pf le "$((js * 10))" "$cs") stage: rfp-classify $cs records/s >= 10 x jq $js records/s ($(awk -v a="$cs" -v b="$js" 'BEGIN { printf "%.1f", a / b }') x) at $(human "$big")" >>"$checks"
	for st in rfp-classify rfp-backoff rfp-sink; do
		rs=$(get "stage $(human "$small")" "$st" rss_kb)
		rb=$(get "stage $(human "$big")" "$st" rss_kb)
		ok=PASS
		awk -v a="$rs" -v b="$rb" 'BEGIN { exit !(b <= a * 1.10 + 512) }' ||
			ok=FAIL
		[ "$rb" -le 16384 ] && [ "$rs" -le 16384 ] || ok=FAIL
		echo "$ok stage: $st peak RSS $(fmt "$rs" '%d' | awk '{ printf "%.1f", $1 / 1024 }') MiB at $(human "$small"), $(awk -v b="$rb" 'BEGIN { printf "%.1f", b / 1024 }') MiB at $(human "$big") (same within 10% + 0.5 MiB, <= 16 MiB)" >>"$checks"
	done
}
