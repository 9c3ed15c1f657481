# bench/lib/fetch.sh: the fetch scenarios (stampede, stampede-ra, flaky,
# throughput): every tool against a fresh mock portal, one row of
# $tsv each, and their checks and notes.
# Its globals are set by bench/run.sh (checked whole with it).
# shellcheck shell=bash disable=SC2034,SC2154

# fetch_scenario SCEN: every tool of the scenario, its rows in $tsv.
fetch_scenario() {
	local scen=$1 t ideal
	case $scen in
	stampede|stampede-ra)
		ideal=$(awk -v n="$stamp_n" -v r="$rate" \
		    'BEGIN { printf "%.3f", n / r }')
		for t in $(tools_with fetch stampede); do
			run_fetch "$scen" "$t" "$stamp_n" /portal/ portal doc-%d \
			    "$t_stamp" "" "$ideal"
		done
		;;
	flaky)
		for t in $(tools_with fetch); do
			run_fetch flaky "$t" "$flaky_n" /flaky/ flaky doc-%04d \
			    "$t_flaky" 2 - 1
		done
		;;
	throughput)
		# The slow peers once; the others the median of thru_k runs.
		run_fetch_median "$thru_k" "$(fast_tools)" throughput "$thru_n" \
		    /bulk/ bulk doc-%d "$t_thru" "" -
		run_fetch_median 1 "$(tools_with slow)" throughput "$thru_n" \
		    /bulk/ bulk doc-%d "$t_thru" "" -
		;;
	esac
}

# The fetch tools not tagged slow.
fast_tools() {
	local t slow
	slow=" $(tools_with slow) "
	for t in $(tools_with fetch); do
		case $slow in *" $t "*) ;; *) printf '%s ' "$t" ;; esac
	done
}

# run_fetch SCEN TOOL N PREFIX ENDPOINT IDFMT TIMEOUT MAXTIME IDEAL [SHUFFLE]:
# one run, its row in $tsv.
run_fetch() {
	run_fetch_row "$@"
	cat "$work/$1/$2/row" >>"$tsv"
}

# run_fetch_row ARGS: run_fetch_once, and once more if something outside
# the bench (a concurrent clean-up on a shared machine) killed the mock:
# a second such run is kept, flagged.
run_fetch_row() {
	mock_died=
	run_fetch_once "$@"
	[ -n "$mock_died" ] || return 0
	say "$1 $(tool_name "$2"): the mock portal died during the run; once more"
	echo "$1, $2: the mock portal died during the first run (killed from outside the bench?); the row is from a second run" >>"$notes"
	mock_died=
	run_fetch_once "$@"
}

# run_fetch_median K TOOLS SCEN N ARGS...: run each tool K times, taking
# the tools in turn (a slow spell of the shared disk then hits them
# alike: single runs here vary from 0.8 to 5 s); keep each tool's row of
# median makespan.
run_fetch_median() {
	local k=$1 tools=$2 scen=$3 t rows
	shift 3
	for t in $tools; do
		rm -f "$work/$scen/$t.rows"
	done
	for _ in $(seq 1 "$k"); do
		for t in $tools; do
			run_fetch_row "$scen" "$t" "$@"
			cat "$work/$scen/$t/row" >>"$work/$scen/$t.rows"
		done
	done
	for t in $tools; do
		rows=$work/$scen/$t.rows
		sort -t "$(printf '\t')" -k5,5g "$rows" |
		    sed -n "$(((k + 1) / 2))p" >>"$tsv"
		[ "$k" -eq 1 ] || echo "$scen, $(tool_name "$t"): median of $k runs, taken in turn with the other tools; makespans $(cut -f5 "$rows" | sort -g | paste -sd' ') s" >>"$notes"
	done
}

# fresh_dir DIR: an empty DIR.  One from an earlier run is moved aside, not
# removed, and removed with the rest at the end.  ext4 without a journal
# (as here) will not reuse an inode freed in the last minute or more, and
# skips the freed ones one by one: with 10,000 files removed just before a
# run, the next run's 10,000 creates cost 2.0-2.7 s of system time instead
# of 0.3, and the throughput ranking said more about whose files were
# removed last than about the tools.
fresh_dir() {
	if [ -e "$1" ]; then
		old_n=$((old_n + 1))
		# A work directory used by an earlier bench has old/ filled.
		while [ -e "$work/old/$old_n" ]; do old_n=$((old_n + 1)); done
		mkdir -p "$work/old"
		mv "$1" "$work/old/$old_n" || die "mv $1: failed"
	fi
	mkdir -p "$1/out"
}

# gen_inputs DIR N PREFIX ENDPOINT IDFMT [SHUFFLE]: a tool's inputs in DIR:
# manifest.ndjson, list.txt ("ID URL"), curl.cfg, all.ids (sorted), for the
# server on $port.  With SHUFFLE 1, the documents come in one fixed
# pseudo-random order (the same for every tool: a Park-Miller generator,
# not awk's rand()).
gen_inputs() {
	local d=$1 n=$2 prefix=$3 ep=$4 idfmt=$5 shuffle=${6:-0}
	awk -v n="$n" -v port="$port" -v pre="$prefix" -v ep="$ep" \
	    -v fmt="$idfmt" -v d="$d" -v shuffle="$shuffle" 'BEGIN {
		m = d "/manifest.ndjson"; l = d "/list.txt"
		c = d "/curl.cfg"; a = d "/all.ids"
		for (i = 1; i <= n; i++)
			o[i] = i
		x = 42
		for (i = n; shuffle && i > 1; i--) {
			x = (x * 16807) % 2147483647
			j = 1 + x % i
			t = o[i]; o[i] = o[j]; o[j] = t
		}
		for (k = 1; k <= n; k++) {
			i = o[k]
			id = sprintf(fmt, i)
			url = "http://127.0.0.1:" port pre id
			printf "{\"id\":\"%s\",\"url\":\"%s\",\"endpoint\":\"%s\"}\n", \
			    id, url, ep > m
			print id, url > l
			printf "url = \"%s\"\noutput = \"out/%s\"\n", url, id > c
			print id > a
		}
	}'
	sort -o "$d/all.ids" "$d/all.ids"
}

# run_tool TOOL DIR TIMEOUT MAXTIME SCALE: run_timed the tool on DIR's
# inputs (rfpipe with the configuration DIR/rfpipe.yaml; SCALE, when not
# empty, as its RFPIPE_TIME_SCALE).
run_tool() {
	local t=$1 d=$2 tmo=$3 maxtime=$4 sc=$5 mt=() all=() env=(env)
	[ -z "$maxtime" ] || mt=(-m "$maxtime")
	[ -z "$sc" ] || env=(env RFPIPE_TIME_SCALE="$sc")
	case $t in
	rfpipe*)
		run_timed "$d" "$tmo" /dev/null "${env[@]}" "$rfpipe" -j "$jobs" \
		    --seed 1 --progress=none --config "$d/rfpipe.yaml" \
		    --run-dir "$d/run" "$d/manifest.ndjson"
		;;
	naive)
		run_timed "$d" "$tmo" "$d/list.txt" env NAIVE_OUT="$d/out" \
		    NAIVE_MAX_TIME="$maxtime" xargs -P "$jobs" -n 2 sh \
		    "$here/naive_fetch.sh"
		;;
	curl|curl-all)
		[ "$t" = curl ] || all=(--retry-all-errors)
		run_timed "$d" "$tmo" /dev/null curl --parallel \
		    --parallel-max "$jobs" --retry 5 "${all[@]}" -fsS \
		    --no-progress-meter "${mt[@]}" -K "$d/curl.cfg" \
		    -w '%{exitcode} %{http_code} %{url}\n'
		;;
	curl-serial)
		# One at a time at the server's rate, told in advance.
		run_timed "$d" "$tmo" /dev/null curl --rate "$rate/s" --retry 5 \
		    -fsS --no-progress-meter "${mt[@]}" -K "$d/curl.cfg" \
		    -w '%{exitcode} %{http_code} %{url}\n'
		;;
	parallel)
		run_timed "$d" "$tmo" /dev/null parallel --will-cite -j "$jobs" \
		    --retries 5 --joblog "$d/joblog" --colsep ' ' \
		    curl -fsS "${mt[@]}" -o "$d/out/{1}" '{2}' :::: "$d/list.txt"
		;;
	asyncio)
		[ -z "$maxtime" ] || mt=(--timeout "$maxtime")
		run_timed "$d" "$tmo" /dev/null "$py" "$here/peer_asyncio.py" \
		    --out "$d/out" -j "$jobs" --seed 1 "${mt[@]}" "$d/list.txt"
		;;
	*)
		die "no such tool: $t"
		;;
	esac
}

# tool_ids TOOL DIR: what the tool says, from its own output in DIR:
# DIR/ok.ids (the documents it saved) and DIR/failed.ids (those it reported
# failed, and did not also save), one id a line, sorted.
tool_ids() {
	local tool=$1 d=$2
	case $tool in
	rfpipe*)
		cat "$d"/run*/results.ndjson 2>/dev/null | jq -r '.id' |
		    sort -u >"$d/ok.ids"
		cat "$d"/run*/dead.ndjson 2>/dev/null | jq -r '.id' |
		    sort -u >"$d/failed.raw"
		;;
	*)
		(cd "$d/out" && find . -type f -size +0c | sed 's|^\./||') |
		    sort -u >"$d/ok.ids"
		peer_failed "$tool" "$d" | sort -u >"$d/failed.raw"
		;;
	esac
	comm -23 "$d/failed.raw" "$d/ok.ids" >"$d/failed.ids"
}

# peer_failed TOOL DIR: the documents a peer reported failed, as it says so.
peer_failed() {
	case $1 in
	naive)
		awk '$1 == "fail" { print $2 }' "$2/stdout" ;;
	curl|curl-all|curl-serial)
		awk '$1 != "0" { n = split($3, p, "/"); print p[n] }' \
		    "$2/stdout" ;;
	parallel)
		awk -F'\t' 'NR > 1 && $7 != "0" {
			n = split($9, w, " ")
			for (i = 1; i < n; i++)
				if (w[i] == "-o") {
					k = split(w[i + 1], p, "/")
					print p[k]
				}
		}' "$2/joblog" 2>/dev/null || true ;;
	asyncio)
		jq -r 'select(.ok | not) | .id' "$2/stdout" 2>/dev/null || true ;;
	esac
}

# fetch_config SCEN TOOL MAXTIME: rfpipe's configuration in a fetch
# scenario: the peers' per-request timeout, and for rfpipe-rate the rate of
# the stampede, told.
fetch_config() {
	echo "# bench: $1"
	[ -z "$3" ] || echo "timeout: $3"
	[ "$2" != rfpipe-rate ] ||
		sed '/^#/d' "$here/scenarios/stampede-rfpipe-rate.yaml"
}

# run_fetch_once SCEN TOOL N PREFIX ENDPOINT IDFMT TIMEOUT MAXTIME IDEAL
# [SHUFFLE]: one run in $work/SCEN/TOOL, its row in its file row.
run_fetch_once() {
	local scen=$1 tool=$2 n=$3 prefix=$4 ep=$5 idfmt=$6 tmo=$7 maxtime=$8
	local ideal=$9 shuffle=${10:-0} d ew requests r429 okn failn lost
	d=$work/$scen/$tool
	fresh_dir "$d"
	: >"$d/row"
	start_mock "$here/scenarios/$scen.yaml" "$d"
	gen_inputs "$d" "$n" "$prefix" "$ep" "$idfmt" "$shuffle"
	fetch_config "$scen" "$tool" "$maxtime" >"$d/rfpipe.yaml"
	run_tool "$tool" "$d" "$tmo" "$maxtime" ""
	ew=$(exit_word "$rc" "$d/time.txt")
	if ! stop_mock; then
		ew="$ew; mock died"
		mock_died=1
	fi

	# What the server saw, and what the tool says.
	requests=$(count_matches '"kind":"request"' "$d/mock.ndjson")
	r429=$(count_matches '"status":429' "$d/mock.ndjson")
	tool_ids "$tool" "$d"
	sort -u "$d/ok.ids" "$d/failed.ids" | comm -23 "$d/all.ids" - >"$d/lost.ids"
	okn=$(count_lines "$d/ok.ids")
	failn=$(count_lines "$d/failed.ids")
	lost=$(count_lines "$d/lost.ids")
	tsv_row "$d/row" "$scen" "$tool" "$n" "$ideal" "$elapsed" "$requests" \
	    "$r429" "$okn" "$failn" "$lost" "$(time_cpu "$d/time.txt")" \
	    "$(time_rss "$d/time.txt")" "$ew" rfpipe
	say "$scen $(tool_name "$tool"): ${elapsed}s, ok $okn/$n, failed $failn," \
	    "lost $lost, requests $requests, 429s $r429, exit $ew"
}

# check CONDITION... -- PASS-TEXT -- FAIL-TEXT: one line of $checks.
check() {
	local c=() pass
	while [ "$1" != -- ]; do
		c+=("$1")
		shift
	done
	pass=$2
	if "${c[@]}"; then
		echo "PASS $pass" >>"$checks"
	else
		echo "FAIL $4" >>"$checks"
	fi
}

# behind_makespan SCEN TOOL: the peers TOOL is not ahead of on makespan
# (ahead: more documents succeeded, or as many sooner).
behind_makespan() {
	local scen=$1 ms ok p pms pok
	ms=$(get "$scen" "$2" makespan)
	ok=$(get "$scen" "$2" ok)
	for p in $(tools_with peer); do
		has "$scen" "$p" || continue
		pms=$(get "$scen" "$p" makespan)
		pok=$(get "$scen" "$p" ok)
		if [ "$ok" -gt "$pok" ] ||
		    { [ "$ok" -eq "$pok" ] && lt "$ms" "$pms"; }; then
			continue
		fi
		printf ' %s (%ss, ok %s)' "$p" "$pms" "$pok"
	done
	return 0
}

# behind_429 SCEN TOOL: the peers TOOL is not ahead of on 429s (fewer, or
# none at all).
behind_429() {
	local scen=$1 r p pr
	r=$(get "$scen" "$2" r429)
	for p in $(tools_with peer); do
		has "$scen" "$p" || continue
		pr=$(get "$scen" "$p" r429)
		if [ "$r" -lt "$pr" ] || { [ "$r" -eq 0 ] && [ "$pr" -eq 0 ]; }
		then
			continue
		fi
		printf ' %s (%s)' "$p" "$pr"
	done
	return 0
}

# stampede_checks SCEN: rfpipe, told the rate or not, ahead of every peer
# on makespan and on 429s, and within its target of the ideal.
stampede_checks() {
	local scen=$1 n ideal r rms rok r429 bad x lim
	has "$scen" rfpipe || return 0
	n=$(get "$scen" rfpipe n)
	ideal=$(get "$scen" rfpipe ideal)
	for r in rfpipe rfpipe-rate; do
		has "$scen" "$r" || continue
		rms=$(get "$scen" "$r" makespan)
		rok=$(get "$scen" "$r" ok)
		r429=$(get "$scen" "$r" r429)
		bad=$(behind_makespan "$scen" "$r")
		check [ -z "$bad" ] -- \
		    "$scen: $r (${rms}s, ok $rok/$n) ahead of every peer on makespan" -- \
		    "$scen: $r (${rms}s, ok $rok/$n) not ahead on makespan of:$bad"
		bad=$(behind_429 "$scen" "$r")
		check [ -z "$bad" ] -- \
		    "$scen: $r ($r429 429s) ahead of every peer on 429s" -- \
		    "$scen: $r ($r429 429s) not ahead on 429s of:$bad"
		x=1.1
		[ "$r" != rfpipe ] || x=1.3
		lim=$(fmt "$ideal" '%.3f' | awk -v x="$x" '{ printf "%.2f", $1 * x }')
		check within "$rms" "$lim" "$rok" "$n" -- \
		    "$scen: $r makespan ${rms}s <= $lim s ($x x ideal $(fmt "$ideal" '%.1f') s) with all $n documents succeeded" -- \
		    "$scen: $r makespan ${rms}s vs limit $lim s ($x x ideal $(fmt "$ideal" '%.1f') s), ok $rok/$n (the target needs both)"
		stampede_note "$scen" "$r" "$rms" "$n"
	done
}

# within MAKESPAN LIMIT OK N: the makespan within its limit, all succeeded.
within() { le "$1" "$2" && [ "$3" -eq "$4" ]; }

# stampede_note SCEN TOOL MAKESPAN N: the tool against the serial reference.
stampede_note() {
	local pms
	has "$1" curl-serial || return 0
	pms=$(get "$1" curl-serial makespan)
	echo "$1: $2 took ${3}s, $(awk -v a="$3" -v b="$pms" 'BEGIN { printf "%.2f", a / b }') x the serial reference (curl --rate $rate/s, told the limit: ${pms}s, ok $(get "$1" curl-serial ok)/$4, $(get "$1" curl-serial r429) 429s)" >>"$notes"
}

# Flaky: what rfpipe filed, document by document, against the truth.
flaky_checks() {
	local d=$work/flaky/rfpipe bad_ok bad_dead lost want_ok want_dead ex
	[ -d "$d" ] || return 0
	# Truth by the last two digits: 00 poison, 01 permanent, others succeed.
	awk '{ t = substr($1, length($1) - 1)
	    print $1, (t == "00" ? "poison" : t == "01" ? "permanent" : "ok") }' \
	    "$d/all.ids" >"$d/truth"
	{ jq -r '[.id, .dead_reason, .reason] | join(" ")' \
	    "$d/run/dead.ndjson" 2>/dev/null || true; } | sort >"$d/dead.reasons"
	# Every document that should succeed is in results.ndjson.
	bad_ok=$(awk '$2 == "ok" { print $1 }' "$d/truth" |
	    comm -23 - "$d/ok.ids" | nlines)
	# Every other one is in dead.ndjson with the right reason.
	bad_dead=$(awk 'NR == FNR { r[$1] = $2 " " $3; next }
	    $2 == "poison" && r[$1] != "exhausted http_503" { n++ }
	    $2 == "permanent" && r[$1] != "permanent http_404" { n++ }
	    END { print n + 0 }' "$d/dead.reasons" "$d/truth")
	lost=$(count_lines "$d/lost.ids")
	want_ok=$(awk '$2 == "ok"' "$d/truth" | nlines)
	want_dead=$(awk '$2 != "ok"' "$d/truth" | nlines)
	check [ "$bad_ok" -eq 0 ] -- \
	    "flaky: rfpipe succeeded all $want_ok non-poison, non-permanent documents" -- \
	    "flaky: rfpipe did not succeed $bad_ok of the $want_ok documents that can succeed"
	check [ "$bad_dead" -eq 0 ] -- \
	    "flaky: rfpipe reported all $want_dead poison/permanent documents dead with their reason (exhausted http_503 / permanent http_404)" -- \
	    "flaky: $bad_dead of $want_dead poison/permanent documents not in dead.ndjson with the expected reason"
	ex=$(get flaky rfpipe exit)
	case $lost:$ex in
	0:*) echo "PASS flaky: rfpipe lost no document" ;;
	*:killed) echo "FAIL flaky: rfpipe had not filed $lost documents when something outside the bench killed it (exit 'killed': rerun)" ;;
	*:timeout) echo "FAIL flaky: rfpipe had not filed $lost documents when the bench's ${t_flaky} s timeout stopped it" ;;
	*) echo "FAIL flaky: rfpipe lost $lost documents" ;;
	esac >>"$checks"
}

# Throughput: rfpipe's documents/s against curl --parallel's.
throughput_checks() {
	local rr cr
	has throughput rfpipe && has throughput curl || return 0
	rr=$(awk -v o="$(get throughput rfpipe ok)" \
	    -v m="$(get throughput rfpipe makespan)" 'BEGIN { printf "%.0f", o / m }')
	cr=$(awk -v o="$(get throughput curl ok)" \
	    -v m="$(get throughput curl makespan)" 'BEGIN { printf "%.0f", o / m }')
	echo "$(pf le "$cr" "$rr") throughput: rfpipe $rr docs/s >= curl --parallel $cr docs/s" >>"$checks"
}

# fetch_notes: what rfpipe's own files say (its summary, its adaptive pace,
# its breakers) and how many requests the server saw in flight at most.
fetch_notes() {
	local s r t f
	for s in stampede stampede-ra flaky throughput; do
		for r in rfpipe rfpipe-rate; do
			f=$work/$s/$r/run/summary.json
			[ -f "$f" ] || continue
			echo "$s, $r: $(jq -r '"succeeded \(.totals.succeeded), dead \(.totals.dead) (" + ([.totals.dead_by_reason | to_entries[] | select(.value > 0) | "\(.key) \(.value)"] | join(", ")) + "), attempts \(.run.attempts), budget left \(.budget.left // "n/a") of \(.budget.total // "n/a")"' "$f")"
		done
	done
	for s in stampede stampede-ra flaky throughput; do
		for r in rfpipe rfpipe-rate; do
			for f in "$work/$s/$r"/run/state/rate/*.json; do
				[ -f "$f" ] || continue
				echo "$s, $r: adaptive pace of endpoint $(jq -r '.endpoint' "$f") $(jq -r 'if .paced == 1 then "ended at \(.rate * 100 | round / 100) req/s, \(.cuts) cuts since it last started" else "ended unpaced (never pushed back, or let go as noise)" end' "$f")"
			done
			for f in "$work/$s/$r"/run/state/breaker/*.json; do
				[ -f "$f" ] || continue
				echo "$s, $r: circuit breaker of endpoint $(jq -r '.endpoint' "$f") opened $(jq -r '.openings' "$f") times, last cooldown $(jq -r '.cooldown' "$f") s, state at the end: $(jq -r '.state' "$f")"
			done
		done
	done
	for s in stampede stampede-ra flaky throughput; do
		for t in $(tools_with fetch stampede); do
			f=$work/$s/$t/mock.ndjson
			[ -f "$f" ] || continue
			echo "$s, $t: the server saw at most $(jq -s 'map(.inflight_total) | max' "$f") requests in flight (a hung request the client gave up on counts until the mock closes it)"
		done
	done
}
