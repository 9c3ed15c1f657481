# bench/lib/scale.sh: bench/run.sh --scale: documents/s of 1, 2 and 3
# pipelines, files state, PostgreSQL state and the PostgreSQL queue, on one
# PostgreSQL cluster, against an unlimited nginx (limit_req at 10^6 r/s,
# burst 10^6: never refuses), then against a limited one (limit_req at
# scale_rate r/s, burst 1 nodelay, 429s counted), then the stale-pace
# sequences (scale_stale, below); one table on stdout.  --cells picks runs
# by name.  On a machine of few cores the unlimited runs are bound by its
# CPU, which three pipelines share; the slow-* runs, against the mock
# portal answering every request in scale_lat_ms, are bound by what each
# pipeline keeps in flight (-j), as against a real portal: what three
# pipelines on one queue add there is what the queue lets them add.
# Its globals are set by bench/run.sh (checked whole with it).
# shellcheck shell=bash disable=SC2034,SC2154

# The runs: name, pipelines, mode (see scale_run).
scale_runs='files-1:1:files files-2:2:files files-3:3:files
pg-1:1:pg pg-2:2:pg pg-3:3:pg
queue-1:1:queue queue-2:2:queue queue-3:3:queue queue-3-apart:3:apart'
# Against the limited portal: enough to see whether the limit holds; told
# the rate (rfpipe.yaml, the limit's rate and burst), the PostgreSQL runs
# take the shared pace a lease at a time.
scale_lim_runs='lim-files-1:1:files lim-pg-1:1:pg lim-pg-3:3:pg
lim-queue-1:1:queue lim-queue-3:3:queue lim-pg-1-told:1:pg:told
lim-pg-3-told:3:pg:told lim-queue-3-told:3:queue:told'
scale_rate=500
# Against answers that take scale_lat_ms: -j bounds each pipeline.
scale_lat_runs='slow-pg-1:1:pg slow-queue-1:1:queue slow-queue-3:3:queue'
scale_lat_ms=100

scale_scenario() {
	local spec name h m
	scale_n=10000 scale_lim_n=2000 scale_lat_n=6000 scale_tmo=600
	scale_conf=''
	[ -z "$quick" ] || { scale_n=3000; scale_lim_n=1000; scale_lat_n=3000; }
	pg_start || die "scale: $(cat "$lim_notes")"
	: >"$work/scale.tsv"
	scale_ng=$work/scale/nginx
	nginx_start "$work/scale" 1000000 1000000 1 429
	for spec in $scale_runs; do
		IFS=: read -r name h m <<<"$spec"
		lim_selected "$name" || continue
		scale_run "$name" "$h" "$m" "$scale_n" unlimited
	done
	nginx_stop
	scale_lat
	scale_ng=$work/scale-lim/nginx
	nginx_start "$work/scale-lim" "$scale_rate" 1 1 429
	printf 'endpoints:\n  scale:\n    rate: %s\n    burst: 1\n' \
	    "$scale_rate" >"$work/scale-lim/told.yaml"
	for spec in $scale_lim_runs; do
		IFS=: read -r name h m told <<<"$spec"
		lim_selected "$name" || continue
		scale_conf=${told:+$work/scale-lim/told.yaml}
		scale_run "$name" "$h" "$m" "$scale_lim_n" \
		    "$scale_rate/s${told:+, told}"
	done
	scale_conf=''
	nginx_stop
	scale_stale
	scale_table
}

# scale_lat: the slow-* runs, against a fresh mock portal whose every answer
# takes scale_lat_ms (no limit: scale_refused counts none).
scale_lat() {
	local spec name h m d=$work/scale-lat any=''
	for spec in $scale_lat_runs; do
		IFS=: read -r name h m <<<"$spec"
		lim_selected "$name" && any=1
	done
	[ -n "$any" ] || return 0
	mkdir -p "$d"
	printf 'routes:\n  - match: "/doc/*"\n    endpoint: scale\n    delay_ms: %s\n' \
	    "$scale_lat_ms" >"$d/slow.yaml"
	# The endpoint's ceiling (shared by every host) lets three hosts
	# have -j each in flight.
	printf 'endpoints:\n  scale:\n    concurrency: %s\n' $((3 * jobs)) \
	    >"$d/conc.yaml"
	scale_ng=$d/none
	start_mock "$d/slow.yaml" "$d"
	for spec in $scale_lat_runs; do
		IFS=: read -r name h m <<<"$spec"
		lim_selected "$name" || continue
		scale_conf=$d/conc.yaml
		scale_run "$name" "$h" "$m" "$scale_lat_n" \
		    "answers in $scale_lat_ms ms"
	done
	scale_conf=''
	stop_mock || die "scale: the mock portal died"
}

# scale_refused: the 429s in the running nginx's access log so far.
scale_refused() {
	awk '$2 == 429 { n++ } END { print n + 0 }' \
	    "$scale_ng/logs/access.log" 2>/dev/null || echo 0
}

# scale_run NAME HOSTS MODE N PORTAL: HOSTS pipelines, -j 32 each, on N
# documents, with MODE files (a run directory each), pg (--state, shared),
# queue (--queue, the state shared there too) or apart (--queue, each
# pipeline's state in a database of its own: the queue alone shared).
# Without the queue each pipeline gets its share of the manifest; with it
# the manifest is loaded once, inside the timing, and every pipeline pulls.
scale_run() {
	local name=$1 hosts=$2 mode=$3 n=$4 portal=$5 d=$work/scale/$1
	local db=${1//-/_} h url='' ew='' rcs ok uniq t0 r0 c0 g0 busy dbcpu
	fresh_dir "$d"
	gen_inputs "$d" "$n" /doc/ scale doc-%d
	if [ "$mode" != files ]; then
		pg_createdb "$db" || die "scale: CREATE DATABASE failed"
		url=$(pg_url "$db")
	fi
	if [ "$mode" = apart ]; then
		for h in $(seq 1 "$hosts"); do
			pg_createdb "${db}_$h" || die "scale: CREATE DATABASE failed"
		done
	fi
	r0=$(scale_refused)
	c0=$(scale_cpu)
	g0=$(scale_pgcpu)
	t0=$(now)
	case $mode in queue|apart)
		"$bin/rfp-queue" --state "$url" load <"$d/manifest.ndjson" \
		    >/dev/null || ew="load failed; " ;;
	esac
	rcs=$(scale_pipelines "$d" "$hosts" "$mode" "$url" "$db")
	elapsed=$(sub "$(now)" "$t0")
	busy=$(scale_busy "$c0" "$(scale_cpu)")
	dbcpu=
	if [ "$mode" != files ]; then
		sleep 0.5	# the backends of closed connections exit
		dbcpu=$(awk -v a="$g0" -v b="$(scale_pgcpu)" -v n="$n" \
		    'BEGIN { printf "%.3f", 1000 * (b - a) / n }')
	fi
	{ cat "$d"/run*/results.ndjson 2>/dev/null || true; } | jq -r .id \
	    >"$d/ok.ids"
	ok=$(count_lines "$d/ok.ids")
	uniq=$(sort -u "$d/ok.ids" | nlines)
	case $mode in queue|apart)
		"$bin/rfp-queue" --state "$url" summary |
		    jq -e .reconciled >/dev/null || ew="${ew}not reconciled; " ;;
	esac
	tsv_row "$work/scale.tsv" "$name" "$hosts" "$mode" "$portal" "$n" \
	    "$elapsed" "$(awk -v n="$n" -v e="$elapsed" 'BEGIN { printf "%.0f", n / e }')" \
	    "$ok/$uniq" "$(($(scale_refused) - r0))" "$busy" "$ew$rcs" "$dbcpu"
	say "scale $name: $ok saved ($uniq distinct) of $n in ${elapsed}s, exit $ew$rcs"
}

# scale_cpu: the machine's busy and total CPU time so far (/proc/stat
# jiffies, every core): "BUSY TOTAL".
scale_cpu() {
	awk '$1 == "cpu" { t = 0; for (i = 2; i <= NF; i++) t += $i
		print t - $5 - $6, t; exit }' /proc/stat
}

# scale_pgcpu: the CPU seconds the PostgreSQL cluster has spent so far in
# the postmaster and its children reaped (every backend whose connection
# has closed; not the background workers, which live on).
scale_pgcpu() {
	local pid
	pid=$(head -n 1 "$pg_dir/data/postmaster.pid" 2>/dev/null) || pid=
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, "")
		printf "%.2f\n", ($12 + $13 + $14 + $15) / hz; f = 1 }
	    END { if (!f) print 0 }' "/proc/${pid:-0}/stat" 2>/dev/null || echo 0
}

# scale_busy "B0 T0" "B1 T1": the cores busy between the two marks, of
# nproc: whatever ran, rfpipe's stages, PostgreSQL and nginx alike.
scale_busy() {
	awk -v a="$1" -v b="$2" -v n="$(nproc)" 'BEGIN { split(a, x, " ")
		split(b, y, " "); t = y[2] - x[2]
		printf "%.2f", (t > 0 ? n * (y[1] - x[1]) / t : 0) }'
}

# scale_pipelines DIR HOSTS MODE URL DB: HOSTS pipelines at once, as
# scale_run says; prints their exits.
scale_pipelines() {
	local d=$1 hosts=$2 mode=$3 url=$4 db=$5 h p s pids='' rcs=''
	traps
	for h in $(seq 1 "$hosts"); do
		case $mode in
		queue) set -- --queue "$url" ;;
		apart) set -- --queue "$url" --state "$(pg_url "${db}_$h")" ;;
		*) awk -v h="$h" -v k="$hosts" 'NR % k == h % k' \
		    "$d/manifest.ndjson" >"$d/m$h.ndjson"
		   set -- ${url:+--state "$url"} "$d/m$h.ndjson" ;;
		esac
		(cd "$d" && PATH="$bin:$PATH" timeout -k 5 "$scale_tmo" \
		    "$rfpipe" -j "$jobs" --seed "$h" --progress=none \
		    ${scale_conf:+--config "$scale_conf"} \
		    --run-dir "$d/run$h" "$@" >"$d/stdout$h" 2>"$d/stderr$h") &
		pids="$pids $!"
	done
	for p in $pids; do
		s=0
		wait "$p" || s=$?
		rcs="$rcs${rcs:+ }$(exit_word "$s")"
	done
	echo "$rcs"
}

# scale_table: the runs as a Markdown table, and the checks.
scale_table() {
	echo "| run | pipelines | state | portal | documents | wall s | documents/s | saved/distinct | 429s | busy cores of $(nproc) | exit | PostgreSQL CPU ms a document |"
	echo "| --- | --: | --- | --- | --: | --: | --: | --: | --: | --: | --- | --: |"
	awk -F'\t' -v OFS=' | ' '{ print "| " $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, ($12 == "" ? "—" : $12) " |" }' \
	    "$work/scale.tsv"
	awk -F'\t' -v lim="$scale_rate" -v n="$(nproc)" -v lat="$scale_lat_ms" '
	    { r[$1] = $7; c[$1] = $10; g[$1] = $12 }
	    END { p = r["pg-1"]; q1 = r["queue-1"]; q3 = r["queue-3"]
		l1 = r["slow-queue-1"]; l3 = r["slow-queue-3"]
		if (l1 > 0 && l3 > 0)
			printf "\n    %s  answers in %d ms: three pipelines on one queue >= 1.5 x one (%.2f x; one pipeline with --state %d/s, through the queue %d/s)\n", \
			(l3 >= 1.5 * l1 ? "PASS" : "FAIL"), lat, l3 / l1, \
			r["slow-pg-1"], l1
		if (!(p > 0 && q1 > 0 && r["files-1"] > 0))
			exit	# --cells left them out
		printf "\n    %s  one pipeline through the queue >= 50%% of one with --state (%.0f%%)\n", \
		(q1 >= p / 2 ? "PASS" : "FAIL"), 100 * q1 / p
		printf "    %s  three pipelines on one queue >= 1.5 x one (%.2f x)\n", \
		(q3 >= 1.5 * q1 ? "PASS" : "FAIL"), q3 / q1
		# What the machine allows: one pipeline kept c cores busy,
		# three can go at most n / c times as fast.
		if (c["queue-1"] > 0)
			printf "    one pipeline through the queue kept %.2f of %d cores busy: three can be at most %.2f x as fast on this machine\n", \
			c["queue-1"], n, n / c["queue-1"]
		# The part every host shares: the CPU of the database.
		if (g["queue-1"] > 0 && g["queue-3"] > 0)
			printf "    PostgreSQL spent %.3f ms of CPU a document for one pipeline through the queue, %.3f for three: one database core serves at most %.0f documents/s, however many hosts pull\n", \
			g["queue-1"], g["queue-3"], 1000 / g["queue-3"]
		printf "\n    two and three against one: files %.2f x, %.2f x; --state %.2f x, %.2f x; the queue %.2f x, %.2f x (each state apart: %.2f x)\n", \
		r["files-2"] / r["files-1"], r["files-3"] / r["files-1"], \
		r["pg-2"] / p, r["pg-3"] / p, r["queue-2"] / q1, q3 / q1, \
		r["queue-3-apart"] / q1
		printf "    against %d r/s: one pipeline with --state %d/s, three %d/s; one through the queue %d/s, three %d/s\n", \
		lim, r["lim-pg-1"], r["lim-pg-3"], r["lim-queue-1"], r["lim-queue-3"]
		printf "    told %d r/s: one pipeline with --state %d/s, three %d/s; three through the queue %d/s\n", \
		lim, r["lim-pg-1-told"], r["lim-pg-3-told"], r["lim-queue-3-told"] }' "$work/scale.tsv"
	echo
	scale_stale_checks
	echo
	echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); rfpipe $rev0"
}

# The stale-pace sequences: what an earlier run on the same state leaves the
# next one, started at once, when the portal's limit changed in between.
# Each runs on a state of its own: with pg a new database (--state), with
# files one run directory that both runs use (rfpipe keeps the state in
# the run directory: only a run directory used again, a resume or
# --retry-dead, hands a pace on).  One pipeline, -j 32, a fresh nginx each
# run on the endpoint name "stale" (the pace's key): unlimited, or
# scale_slow r/s with no burst, nodelay, 429.
#   fresh-S      a fresh state, unlimited, scale_n documents: the reference
#   stale-a-S    after 300 documents at scale_slow r/s: unlimited, scale_n
#   fresh-lim-S  a fresh state, scale_slow r/s, 300 documents: the reference
#   stale-b-S    after scale_n documents unlimited: scale_slow r/s, 300
# Targets (issue 22): stale-a >= 50 % of fresh's documents/s; stale-b saves
# 300 of 300 with refusals <= 5 % of its requests.
scale_slow=20
scale_stale_runs='fresh:-:unlimited stale-a:slow:unlimited
fresh-lim:-:slow stale-b:unlimited:slow'

# scale_ids: the name of every run --scale makes, one a line.
scale_ids() {
	local spec st
	for spec in $scale_runs $scale_lim_runs $scale_lat_runs; do
		echo "${spec%%:*}"
	done
	for st in pg files; do
		for spec in $scale_stale_runs; do
			echo "${spec%%:*}-$st"
		done
	done
}

scale_stale() {
	local st spec name first next n
	for st in pg files; do
		for spec in $scale_stale_runs; do
			IFS=: read -r name first next <<<"$spec"
			name=$name-$st
			lim_selected "$name" || continue
			n=$scale_n
			[ "$next" = unlimited ] || n=300
			scale_seq "$name" "$st" "$first" "$next" "$n"
		done
	done
}

# scale_seq NAME STATE FIRST NEXT N: on a new state, a run against the
# portal FIRST (- for none: a fresh state), then at once the run measured:
# N documents against NEXT; one row of the table.
scale_seq() {
	local name=$1 st=$2 first=$3 next=$4 n=$5 d=$work/stale/$1 url='' rc
	local t0 c0 busy elapsed ok req ref portal=$4
	fresh_dir "$d"
	if [ "$st" = pg ]; then
		pg_createdb "${name//-/_}" || die "scale: CREATE DATABASE failed"
		url=$(pg_url "${name//-/_}")
	fi
	if [ "$first" != - ]; then
		scale_stale_portal "$d/first" "$first"
		scale_stale_run "$d/first" "$d/run${url:+-first}" "$url" \
		    "$([ "$first" = slow ] && echo 300 || echo "$scale_n")" \
		    first-%d >/dev/null
		nginx_stop
		portal="$portal, after $first"
	fi
	scale_stale_portal "$d/then" "$next"
	c0=$(scale_cpu)
	t0=$(now)
	rc=$(scale_stale_run "$d/then" "$d/run" "$url" "$n" doc-%d)
	elapsed=$(sub "$(now)" "$t0")
	busy=$(scale_busy "$c0" "$(scale_cpu)")
	nginx_stop
	# The documents of this run: in files, the run directory holds both.
	ok=$(jq -r 'select(.id | startswith("doc-")) | .id' \
	    "$d/run/results.ndjson" 2>/dev/null | sort -u | nlines)
	req=$(count_lines "$d/then/nginx/logs/access.log")
	ref=$(awk '$2 == 429 { n++ } END { print n + 0 }' \
	    "$d/then/nginx/logs/access.log" 2>/dev/null || echo 0)
	portal=${portal//slow/$scale_slow r\/s}
	tsv_row "$work/scale.tsv" "$name" 1 "$st" "$portal" "$n" "$elapsed" \
	    "$(awk -v n="$ok" -v e="$elapsed" 'BEGIN { printf "%.0f", n / e }')" \
	    "$ok/$ok" "$ref/$req" "$busy" "$rc"
	say "scale $name: $ok of $n saved in ${elapsed}s, $ref of $req requests refused, exit $rc"
}

# scale_stale_portal DIR KIND: a fresh nginx in DIR, unlimited or slow.
scale_stale_portal() {
	mkdir -p "$1"
	case $2 in
	unlimited) nginx_start "$1" 1000000 1000000 1 429 ;;
	*) nginx_start "$1" "$scale_slow" 0 1 429 ;;
	esac
}

# scale_stale_run DIR RUNDIR URL N IDFMT: one pipeline on N documents (ids
# IDFMT) against the nginx running; prints its exit.
scale_stale_run() {
	local d=$1 rd=$2 url=$3 s=0
	traps
	gen_inputs "$d" "$4" /doc/ stale "$5"
	(cd "$d" && PATH="$bin:$PATH" timeout -k 5 "$scale_tmo" "$rfpipe" \
	    -j "$jobs" --seed 1 --progress=none --run-dir "$rd" \
	    ${url:+--state "$url"} "$d/manifest.ndjson" >"$d/stdout" \
	    2>"$d/stderr") &
	wait "$!" || s=$?
	exit_word "$s"
}

# scale_stale_checks: the targets of the stale-pace sequences, for the
# states that ran.
scale_stale_checks() {
	awk -F'\t' -v slow="$scale_slow" '
	    { r[$1] = $7; saved[$1] = $8; ref[$1] = $9; n[$1] = $5 }
	    END {
		for (k = split("pg files", s, " "); k > 0; k--) {
			st = s[3 - k]
			a = "stale-a-" st; f = "fresh-" st; b = "stale-b-" st
			if ((a in r) && (f in r) && r[f] > 0)
				printf "    %s  %s: unlimited after %d r/s >= 50%% of a fresh state'"'"'s documents/s (%d/s of %d/s, %.0f%%)\n", \
				    (r[a] >= r[f] / 2 ? "PASS" : "FAIL"), st, slow, \
				    r[a], r[f], 100 * r[a] / r[f]
			if (b in r) {
				split(saved[b], sv, "/"); split(ref[b], rq, "/")
				pct = rq[2] > 0 ? 100 * rq[1] / rq[2] : 0
				printf "    %s  %s: %d r/s after unlimited saves %d of %d (%d) with <= 5%% refusals (%d of %d, %.1f%%)\n", \
				    (sv[1] == n[b] && pct <= 5 ? "PASS" : "FAIL"), st, \
				    slow, n[b], n[b], sv[1], rq[1], rq[2], pct
			}
		}
	    }' "$work/scale.tsv"
}
