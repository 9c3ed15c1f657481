# bench/lib/scale.sh: bench/run.sh --scale: documents/s of 1, 2 and 3
# pipelines, files state, PostgreSQL state and the PostgreSQL queue, on one
# PostgreSQL cluster, against an unlimited nginx (limit_req at 10^6 r/s,
# burst 10^6: never refuses), then against a limited one (limit_req at
# scale_rate r/s, burst 1 nodelay, 429s counted); one table on stdout.
# Its globals are set by bench/run.sh (checked whole with it).
# shellcheck shell=bash disable=SC2034,SC2154

# The runs: name, pipelines, mode (see scale_run).
scale_runs='files-1:1:files files-2:2:files files-3:3:files
pg-1:1:pg pg-2:2:pg pg-3:3:pg
queue-1:1:queue queue-2:2:queue queue-3:3:queue queue-3-apart:3:apart'
# Against the limited portal: enough to see whether the limit holds.
scale_lim_runs='lim-files-1:1:files lim-pg-1:1:pg lim-pg-3:3:pg
lim-queue-1:1:queue lim-queue-3:3:queue'
scale_rate=500

scale_scenario() {
	local spec name h m
	scale_n=10000 scale_lim_n=2000 scale_tmo=600
	[ -z "$quick" ] || { scale_n=3000; scale_lim_n=1000; }
	pg_start || die "scale: $(cat "$lim_notes")"
	: >"$work/scale.tsv"
	scale_ng=$work/scale/nginx
	nginx_start "$work/scale" 1000000 1000000 1 429
	for spec in $scale_runs; do
		IFS=: read -r name h m <<<"$spec"
		scale_run "$name" "$h" "$m" "$scale_n" unlimited
	done
	nginx_stop
	scale_ng=$work/scale-lim/nginx
	nginx_start "$work/scale-lim" "$scale_rate" 1 1 429
	for spec in $scale_lim_runs; do
		IFS=: read -r name h m <<<"$spec"
		scale_run "$name" "$h" "$m" "$scale_lim_n" "$scale_rate/s"
	done
	nginx_stop
	scale_table
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
	local db=${1//-/_} h url='' ew='' rcs ok uniq t0 r0
	mkdir -p "$d"
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
	t0=$(now)
	case $mode in queue|apart)
		"$bin/rfp-queue" --state "$url" load <"$d/manifest.ndjson" \
		    >/dev/null || ew="load failed; " ;;
	esac
	rcs=$(scale_pipelines "$d" "$hosts" "$mode" "$url" "$db")
	elapsed=$(sub "$(now)" "$t0")
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
	    "$ok/$uniq" "$(($(scale_refused) - r0))" "$ew$rcs"
	say "scale $name: $ok saved ($uniq distinct) of $n in ${elapsed}s, exit $ew$rcs"
}

# scale_pipelines DIR HOSTS MODE URL DB: HOSTS pipelines at once, as
# scale_run says; prints their exits.
scale_pipelines() {
	local d=$1 hosts=$2 mode=$3 url=$4 db=$5 h p s pids='' rcs=''
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
	echo "| run | pipelines | state | portal | documents | wall s | documents/s | saved/distinct | 429s | exit |"
	echo "| --- | --: | --- | --- | --: | --: | --: | --: | --: | --- |"
	awk -F'\t' -v OFS=' | ' '{ print "| " $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 " |" }' \
	    "$work/scale.tsv"
	awk -F'\t' -v lim="$scale_rate" '
	    { r[$1] = $7 }
	    END { p = r["pg-1"]; q1 = r["queue-1"]; q3 = r["queue-3"]
		printf "\n    %s  one pipeline through the queue >= 50%% of one with --state (%.0f%%)\n", \
		(q1 >= p / 2 ? "PASS" : "FAIL"), 100 * q1 / p
		printf "    %s  three pipelines on one queue >= 1.5 x one (%.2f x)\n", \
		(q3 >= 1.5 * q1 ? "PASS" : "FAIL"), q3 / q1
		printf "\n    two and three against one: files %.2f x, %.2f x; --state %.2f x, %.2f x; the queue %.2f x, %.2f x (each state apart: %.2f x)\n", \
		r["files-2"] / r["files-1"], r["files-3"] / r["files-1"], \
		r["pg-2"] / p, r["pg-3"] / p, r["queue-2"] / q1, q3 / q1, \
		r["queue-3-apart"] / q1
		printf "    against %d r/s: one pipeline with --state %d/s, three %d/s; one through the queue %d/s, three %d/s\n", \
		lim, r["lim-pg-1"], r["lim-pg-3"], r["lim-queue-1"], r["lim-queue-3"] }' "$work/scale.tsv"
	echo
	echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); rfpipe $rev0"
}
