#!/usr/bin/env bash
# bench/run.sh: rfpipe side by side with its peers, in one run, against
# rfp-mockportal, and one Markdown table on stdout (and in bench/RESULTS.md
# after a full run).  `make bench` runs it.
#
# Scenarios (a fresh mock, new port and new log, per tool per scenario):
#   stampede     N docs, server limit 20 req/s, no burst, 429 past it
#   stampede-ra  the same, the 429 carrying Retry-After: 1
#   flaky        N docs: 78% 200, 20% transient (429, 503, reset, hang),
#                1% poison (503 forever), 1% permanent (404); 2 s timeouts
#   throughput   N docs, no limit; each fast tool's row is the median of
#                5 runs (of 1 with --quick)
#   stage        synthetic fetched records through rfp-classify (the median
#                of 5 runs) and rfp-backoff | rfp-sink, against jq
#                (records/s, peak RSS)
#   limiters     only when asked for (--limiters or --only limiters), as it
#                takes about 13 minutes (--quick: about 3): the limiter
#                matrix.  rfpipe, not told the rate and told it in
#                rfpipe.yaml, -j 32, against 28 cells: the mock's limiters
#                (gcra nodelay and delaying, fixed and sliding windows, a
#                concurrency cap, a daily quota, a limit that drops
#                mid-run; 429 or 503, with or without Retry-After; 1 to 100
#                r/s, bursts 0 to 60) on a scaled clock (RFPIPE_TIME_SCALE);
#                a real nginx limit_req started here, in real time, with
#                the naive and curl peers beside rfpipe; and three
#                pipelines sharing their state in a throwaway PostgreSQL.
#                Its own table and checks, and its own section at the end
#                of bench/RESULTS.md, which the default run keeps.
# Peers: naive xargs -P 32 + curl retrying at once, curl --parallel --retry 5
# (and --retry-all-errors), GNU parallel --retries 5 + curl -f, and the
# mission's asyncio sketch (bench/peer_asyncio.py).  Concurrency 32 for all.
# Stampede also runs a reference, not a peer: one serial curl --rate 20/s,
# told the limit in advance.
#
# Target checks print PASS/FAIL under the table; a FAIL does not change the
# exit status (0 unless the bench itself could not run).
#
# The whole script is one brace group, read in full before it starts: bash
# reads a script as it goes, so an edit to this file during a 10-minute run
# would otherwise run the rest from the wrong offset.
{
set -u

usage="usage: bench/run.sh [--quick] [--only PATTERN[,PATTERN...]] [--keep]
                    [--work DIR] [--results FILE] [--no-build] [--timeout S]
       bench/run.sh --limiters [--quick] [--cells PATTERN[,PATTERN...]] [...]
       bench/run.sh --scale [--quick] [--no-build] [--keep] [--work DIR]

  --quick        smaller N and fewer scenarios: about 2 minutes (with
                 --limiters: 9 of the 28 cells, about 3 minutes)
  --only P       run the scenarios matching the shell pattern(s) P:
                 stampede, stampede-ra, flaky, throughput, stage ('stampede*'),
                 limiters (run only when named)
  --limiters     the limiter matrix alone (as --only limiters): about 13
                 minutes; a full one writes its section of bench/RESULTS.md
  --cells P      with --limiters: only the cells whose id matches P
                 (gcra-*, nginx-*, pg-3, ...; see lim_cells_full)
  --scale        documents/s of 1 and 3 pipelines against an unlimited
                 nginx: files state, PostgreSQL state, and the PostgreSQL
                 queue (--queue; for 3, also with each pipeline's state
                 apart); 10,000 documents (--quick: 3,000), one table on
                 stdout, nothing written to bench/RESULTS.md
  --keep         keep the work directory (logs, outputs) and say where
  --work DIR     work in DIR (default: a new directory under \${TMPDIR:-/tmp})
  --results FILE write the report there (default: bench/RESULTS.md after a
                 full run, none after --quick, --only or --cells; a full
                 --limiters run writes only its own section of the file)
  --no-build     do not run make first
  --timeout S    bound every tool run to S seconds (default: per scenario,
                 per limiter cell)
Environment: BENCH_KEEP=1 is --keep, BENCH_WORK=DIR is --work DIR (for make bench).
"

prog=bench
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cmdline="bench/run.sh${*:+ $*}"
[ -n "${MAKELEVEL:-}" ] && cmdline="make bench  (runs $cmdline)"

quick=
only=
keep=${BENCH_KEEP:-}
work=${BENCH_WORK:-}
results=
results_set=
build=1
tmo_all=
cells=
scale=
while [ $# -gt 0 ]; do
	case $1 in
	-h|--help) printf '%s' "$usage"; exit 0 ;;
	--quick) quick=1 ;;
	--only) [ $# -ge 2 ] || { printf '%s' "$usage" >&2; exit 2; }
		only=${only:+$only,}$2; shift ;;
	--only=*) only=${only:+$only,}${1#*=} ;;
	--keep) keep=1 ;;
	--work) [ $# -ge 2 ] || { printf '%s' "$usage" >&2; exit 2; }
		work=$2; shift ;;
	--work=*) work=${1#*=} ;;
	--results) [ $# -ge 2 ] || { printf '%s' "$usage" >&2; exit 2; }
		results=$2; results_set=1; shift ;;
	--results=*) results=${1#*=}; results_set=1 ;;
	--no-build) build= ;;
	--limiters) only=${only:+$only,}limiters ;;
	--scale) scale=1; only=scale ;;
	--cells) [ $# -ge 2 ] || { printf '%s' "$usage" >&2; exit 2; }
		cells=$2; shift ;;
	--cells=*) cells=${1#*=} ;;
	--timeout) [ $# -ge 2 ] || { printf '%s' "$usage" >&2; exit 2; }
		tmo_all=$2; shift ;;
	--timeout=*) tmo_all=${1#*=} ;;
	*) printf '%s: unknown argument "%s"\n%s' "$prog" "$1" "$usage" >&2
	   exit 2 ;;
	esac
	shift
done
# A full run writes bench/RESULTS.md: the default scenarios its main part,
# the limiter matrix (--limiters alone, all cells) its own section.
if [ -z "$results_set" ] && [ -z "$quick" ] && [ -z "$cells" ] &&
    [ -z "$scale" ] &&
    { [ -z "$only" ] || [ "$only" = limiters ]; }; then
	results=$here/RESULTS.md
fi

say() { printf '[%s] %s\n' "$prog" "$*" >&2; }
die() { printf '%s: %s\n' "$prog" "$*" >&2; exit 1; }

# Real seconds for everyone: no scaled clock in the bench.
unset RFPIPE_TIME_SCALE

# ---------------------------------------------------------------- sizes
if [ -n "$quick" ]; then
	# Fewer scenarios and no --retry-all-errors curl (the same as plain
	# curl in a stampede, and 31 s of backoff on each 404 in flaky).
	scenarios="stampede flaky throughput stage limiters"
	fetch_tools="rfpipe naive curl parallel asyncio"
	stamp_n=100 flaky_n=200 thru_n=500 thru_k=1 stage_ns="10000 100000"
	t_stamp=60 t_flaky=45 t_thru=60 t_stage=300
	lim_real=3 lim_rmax=100
else
	scenarios="stampede stampede-ra flaky throughput stage limiters"
	fetch_tools="rfpipe naive curl curl-all parallel asyncio"
	stamp_n=300 flaky_n=1000 thru_n=10000 thru_k=5
	stage_ns="100000 1000000"
	t_stamp=60 t_flaky=90 t_thru=200 t_stage=600
	lim_real=4 lim_rmax=50
fi
if [ -n "$tmo_all" ]; then
	t_stamp=$tmo_all t_flaky=$tmo_all t_thru=$tmo_all t_stage=$tmo_all
fi
jobs=32
rate=20

# The limiter matrix runs only when asked for by name.
selected() {
	local pat
	if [ -z "$only" ]; then
		[ "$1" != limiters ]
		return
	fi
	local IFS=,
	for pat in $only; do
		# shellcheck disable=SC2254  # the pattern is meant to glob
		case $1 in $pat) return 0 ;; esac
	done
	return 1
}

# ---------------------------------------------------------------- tools
# The peers and tools come from the one list, scripts/deps.sh.
"$root/scripts/deps.sh" bench || die "scripts/deps.sh bench failed"
for t in curl jq parallel timeout awk; do
	command -v "$t" >/dev/null 2>&1 || die "$t not found after scripts/deps.sh bench"
done
[ -x /usr/bin/time ] || die "/usr/bin/time not found after scripts/deps.sh bench"
py=
for p in /usr/bin/python3 python3; do
	if "$p" -c 'import aiohttp' >/dev/null 2>&1; then
		py=$p
		break
	fi
done
[ -n "$py" ] || [ -n "$scale" ] || die "python3 with aiohttp not found after scripts/deps.sh bench"
nginx=
if selected limiters || [ -n "$scale" ]; then
	for p in nginx /usr/sbin/nginx; do
		if command -v "$p" >/dev/null 2>&1; then
			nginx=$(command -v "$p")
			break
		fi
	done
	[ -n "$nginx" ] || die "nginx not found after scripts/deps.sh bench"
	command -v psql >/dev/null 2>&1 || die "psql not found after scripts/deps.sh bench"
fi

# Which rfpipe this measures: others may commit while the bench runs.
rev0="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$( [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ] && echo ' plus uncommitted changes')"
if [ -n "$build" ]; then
	make -s -C "$root" all >&2 || die "make all failed in $root"
fi
bin=$root/bin
mock_src=$bin/rfp-mockportal
rfpipe=$root/pipeline.sh
for b in "$mock_src" "$bin/rfp-fetch" "$bin/rfp-classify" "$bin/rfp-backoff" \
    "$bin/rfp-sink"; do
	[ -x "$b" ] || die "$b missing: run make in $root"
done

if [ -z "$work" ]; then
	work=$(mktemp -d "${TMPDIR:-/tmp}/rfpipe-bench.XXXXXX") ||
		die "mktemp failed"
else
	mkdir -p "$work" || die "mkdir $work failed"
	work=$(cd "$work" && pwd)
fi
# The mock runs as a copy under another name, so a concurrent clean-up by
# name (pkill rfp-mockportal, on a shared machine) cannot stop it mid-run.
mock=$work/bench-portal
cp "$mock_src" "$mock" || die "cp $mock_src $mock failed"
tsv=$work/results.tsv
checks=$work/checks.txt
notes=$work/notes.txt
printf 'scen\ttool\tn\tideal\tmakespan\trequests\tr429\tok\tfailed\tlost\tcpu\trss_kb\texit\tref\n' >"$tsv"
: >"$checks"
: >"$notes"
lim_tsv=$work/limiters.tsv
lim_desc_tsv=$work/limiters-cells.tsv
lim_notes=$work/limiters-notes.txt
printf 'cell\ttool\tn\tallowed\tideal\tmakespan\tscale\trequests\trefusals\tsaved\tdead\tdead_quota\tcpu\texit\ttimeout\tclock\trate\n' >"$lim_tsv"
: >"$lim_desc_tsv"
: >"$lim_notes"
lim_skipped=
lim_secs=0

mock_pid=
ng_pid=
pg_dir=
old_n=0
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
	if [ -n "$mock_pid" ]; then
		kill -TERM "$mock_pid" 2>/dev/null
		wait "$mock_pid" 2>/dev/null
	fi
	# Defined further down: an early die comes before them.
	if declare -F nginx_stop >/dev/null; then
		nginx_stop
		pg_stop
	fi
	if [ -n "$keep" ]; then
		say "work directory kept: $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bench_t0=$(date +%s.%N)
load0=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- helpers
now() { date +%s.%N; }
# a - b, with 3 decimals
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
# true when a <= b
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 <= b + 0) }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0) }'; }
fmt() { awk -v a="$1" -v f="$2" 'BEGIN { printf f, a }'; }
count_lines() { if [ -f "$1" ]; then grep -c '' "$1"; else echo 0; fi; }

# From a /usr/bin/time -v file: user+sys seconds, and max RSS in KiB.
time_cpu() {
	awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 }
	    END { printf "%.2f", u + s }' "$1" 2>/dev/null || echo 0
}
time_rss() {
	awk -F': ' '/Maximum resident set size/ { print $2 + 0 }' "$1" \
	    2>/dev/null || echo 0
}

# Start a fresh mock on scenario $1 with its log in directory $2.
start_mock() {
	local yaml=$1 d=$2 i=0
	rm -f "$d/port"
	"$mock" --scenario "$yaml" --log "$d/mock.ndjson" \
	    --port-file "$d/port" --seed 1 >"$d/mock.out" 2>"$d/mock.err" &
	mock_pid=$!
	while [ ! -s "$d/port" ]; do
		i=$((i + 1))
		if [ "$i" -gt 200 ] || ! kill -0 "$mock_pid" 2>/dev/null; then
			cat "$d/mock.err" >&2
			die "rfp-mockportal did not start for $d"
		fi
		sleep 0.05
	done
	port=$(cat "$d/port")
}

stop_mock() {
	kill -TERM "$mock_pid" 2>/dev/null
	wait "$mock_pid" 2>/dev/null
	mock_pid=
}

# run_timed DIR TIMEOUT STDIN CMD...: run CMD in DIR under /usr/bin/time
# and timeout; sets elapsed and rc.  Output: DIR/stdout, DIR/stderr.
run_timed() {
	local d=$1 tmo=$2 in=$3 t0 t1
	shift 3
	t0=$(now)
	(cd "$d" && /usr/bin/time -v -o "$d/time.txt" \
	    timeout -k 5 "$tmo" "$@" <"$in" >"$d/stdout" 2>"$d/stderr")
	rc=$?
	t1=$(now)
	elapsed=$(sub "$t1" "$t0")
}

# The exit of a run_timed command: its status, "timeout" when the bench's
# timeout stopped it, "killed" when something outside killed /usr/bin/time.
exit_word() {
	if [ -n "${2:-}" ] && ! grep -q 'Exit status' "$2" 2>/dev/null; then
		echo killed
		return
	fi
	case $1 in
	124|137) echo timeout ;;
	*) echo "$1" ;;
	esac
}

# One TSV row.
row() {
	local IFS=$'\t'
	printf '%s\n' "$*" >>"$tsv"
}

# get SCEN TOOL FIELD
get() {
	awk -F'\t' -v s="$1" -v t="$2" -v f="$3" '
	    NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
	    $1 == s && $2 == t { print $c[f]; exit }' "$tsv"
}
has() { [ -n "$(get "$1" "$2" tool)" ]; }
pf() { if "$@"; then echo PASS; else echo FAIL; fi; }

# ---------------------------------------------------------------- fetch runs
tool_name() {
	case $1 in
	rfpipe) echo "rfpipe" ;;
	rfpipe-rate) echo "rfpipe, rate 20/s configured" ;;
	curl-serial) echo "reference: serial curl --rate ${rate}/s (told the limit)" ;;
	naive) echo "naive: xargs -P 32 + curl, 5 tries at once" ;;
	curl) echo "curl --parallel --retry 5" ;;
	curl-all) echo "curl --parallel --retry 5 --retry-all-errors" ;;
	parallel) echo "GNU parallel --retries 5 + curl -f" ;;
	asyncio) echo "asyncio + aiohttp (mission sketch)" ;;
	*) echo "$1" ;;
	esac
}

# Write the scenario YAMLs.
write_scenarios() {
	cat >"$work/stampede.yaml" <<EOF
# Stampede: $rate requests/s, no burst, 429 past it (no Retry-After).
routes:
  - match: "/portal/*"
    endpoint: portal
    rate: {per_s: $rate, burst: 0}
EOF
	cat >"$work/stampede-ra.yaml" <<EOF
# Stampede with Retry-After: 1 on every 429.
routes:
  - match: "/portal/*"
    endpoint: portal
    rate: {per_s: $rate, burst: 0, retry_after: 1}
EOF
	# The last two digits of a document's number choose its script, so the
	# shares are exact and the bench knows every document's truth.  The
	# transient ones are spread out (never two in a row), as a flaky
	# portal's failures are, rather than in runs of consecutive documents.
	cat >"$work/flaky.yaml" <<'EOF'
# Flaky: 78% 200; 20% transient (5% each: 429, 503, reset, hang 3 s), each
# then 200; 1% poison (503 forever); 1% permanent (404).
routes:
  - match: "/flaky/doc-*00"        # poison
    endpoint: flaky
    script: [503]
    retry_after: 1
  - match: "/flaky/doc-*01"        # permanent
    endpoint: flaky
    script: [404]
  - match: "/flaky/doc-*[02468]3"  # 03 23 43 63 83
    endpoint: flaky
    script: [429, 200]
    retry_after: 1
  - match: "/flaky/doc-*[13579]3"  # 13 33 53 73 93
    endpoint: flaky
    script: [503, 200]
    retry_after: 1
  - match: "/flaky/doc-*[02468]7"  # 07 27 47 67 87
    endpoint: flaky
    script: [reset, 200]
  - match: "/flaky/doc-*[13579]7"  # 17 37 57 77 97: no reply for 3 s
    endpoint: flaky
    script: [hang, 200]
    hang_ms: 3000
  - match: "/flaky/*"
    endpoint: flaky
EOF
	cat >"$work/throughput.yaml" <<'EOF'
# Throughput: no limit; every document answers 200.
routes:
  - match: "/bulk/*"
    endpoint: bulk
EOF
}

# Inputs for one tool: manifest.ndjson, list.txt ("ID URL"), curl.cfg, all.ids.
# With shuffle, the documents come in one fixed pseudo-random order (the
# same for every tool: a Park-Miller generator, not awk's rand()).
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

# run_fetch SCEN TOOL N PREFIX ENDPOINT IDFMT TIMEOUT MAXTIME IDEAL [SHUFFLE]
# A run whose mock portal was killed from outside (a concurrent clean-up on
# a shared machine) is run once more; a second such run is kept, flagged.
run_fetch() {
	run_fetch_row "$@"
	cat "$work/$1/$2/row" >>"$tsv"
}

# run_fetch_row ARGS: run_fetch_once, once more if the mock was killed.
run_fetch_row() {
	mock_died=
	run_fetch_once "$@"
	if [ -n "$mock_died" ]; then
		say "$1 $(tool_name "$2"): the mock portal died during the run; once more"
		echo "$1, $2: the mock portal died during the first run (killed from outside the bench?); the row is from a second run" >>"$notes"
		mock_died=
		run_fetch_once "$@"
	fi
}

# run_fetch_median K TOOLS SCEN N ARGS...: run each tool K times, taking
# the tools in turn (a slow spell of the shared disk then hits them
# alike: single runs here vary from 0.8 to 5 s); keep each tool's row of
# median makespan.
run_fetch_median() {
	local k=$1 tools=$2 scen=$3 i t rows
	shift 3
	for t in $tools; do
		rm -f "$work/$scen/$t.rows"
	done
	for i in $(seq 1 "$k"); do
		for t in $tools; do
			run_fetch_row "$scen" "$t" "$@"
			cat "$work/$scen/$t/row" >>"$work/$scen/$t.rows"
		done
	done
	for t in $tools; do
		rows=$work/$scen/$t.rows
		sort -t "$(printf '\t')" -k5,5g "$rows" |
		    sed -n "$(((k + 1) / 2))p" >>"$tsv"
		[ "$k" -gt 1 ] && echo "$scen, $(tool_name "$t"): median of $k runs, taken in turn with the other tools; makespans $(cut -f5 "$rows" | sort -g | paste -sd' ') s" >>"$notes"
	done
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
		case $tool in
		naive)
			awk '$1 == "fail" { print $2 }' "$d/stdout" ;;
		curl|curl-all|curl-serial)
			awk '$1 != "0" { n = split($3, p, "/"); print p[n] }' \
			    "$d/stdout" ;;
		parallel)
			awk -F'\t' 'NR > 1 && $7 != "0" {
				n = split($9, w, " ")
				for (i = 1; i < n; i++)
					if (w[i] == "-o") {
						k = split(w[i + 1], p, "/")
						print p[k]
					}
			}' "$d/joblog" 2>/dev/null ;;
		asyncio)
			jq -r 'select(.ok | not) | .id' "$d/stdout" 2>/dev/null ;;
		esac | sort -u >"$d/failed.raw"
		;;
	esac
	comm -23 "$d/failed.raw" "$d/ok.ids" >"$d/failed.ids"
}

run_fetch_once() {
	local scen=$1 tool=$2 n=$3 prefix=$4 ep=$5 idfmt=$6 tmo=$7 maxtime=$8
	local ideal=$9 shuffle=${10:-0} d cfg mt=() requests r429 okn failn lost
	local cpu rss
	d=$work/$scen/$tool
	# A directory from an earlier run is moved aside, not removed, and
	# removed with the rest at the end.  ext4 without a journal (as here)
	# will not reuse an inode freed in the last minute or more, and skips
	# the freed ones one by one: with 10,000 files removed just before a
	# run, the next run's 10,000 creates cost 2.0-2.7 s of system time
	# instead of 0.3, and the throughput ranking said more about whose
	# files were removed last than about the tools.
	if [ -e "$d" ]; then
		old_n=$((old_n + 1))
		mkdir -p "$work/old"
		mv "$d" "$work/old/$old_n" || die "mv $d: failed"
	fi
	mkdir -p "$d/out"
	: >"$d/row"
	start_mock "$work/$scen.yaml" "$d"
	gen_inputs "$d" "$n" "$prefix" "$ep" "$idfmt" "$shuffle"
	[ -n "$maxtime" ] && mt=(-m "$maxtime")
	case $tool in
	rfpipe|rfpipe-rate)
		cfg=$d/rfpipe.yaml
		{
			echo "# bench: $scen"
			[ -n "$maxtime" ] && echo "timeout: $maxtime"
			if [ "$tool" = rfpipe-rate ]; then
				printf 'endpoints:\n  %s:\n    rate: %s\n    burst: 1\n' \
				    "$ep" "$rate"
			fi
		} >"$cfg"
		run_timed "$d" "$tmo" /dev/null "$rfpipe" -j "$jobs" --seed 1 \
		    --progress=none --config "$cfg" --run-dir "$d/run" \
		    "$d/manifest.ndjson"
		;;
	naive)
		run_timed "$d" "$tmo" "$d/list.txt" env NAIVE_OUT="$d/out" \
		    NAIVE_MAX_TIME="$maxtime" xargs -P "$jobs" -n 2 sh \
		    "$here/naive_fetch.sh"
		;;
	curl|curl-all)
		local all=()
		[ "$tool" = curl-all ] && all=(--retry-all-errors)
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
		local pt=()
		[ -n "$maxtime" ] && pt=(--timeout "$maxtime")
		run_timed "$d" "$tmo" /dev/null "$py" "$here/peer_asyncio.py" \
		    --out "$d/out" -j "$jobs" --seed 1 "${pt[@]}" "$d/list.txt"
		;;
	esac
	# A mock that is gone before we stop it makes the row worthless.
	local mock_alive=1 ew
	kill -0 "$mock_pid" 2>/dev/null || mock_alive=
	stop_mock
	ew=$(exit_word "$rc" "$d/time.txt")
	if [ -z "$mock_alive" ]; then
		ew="$ew; mock died"
		mock_died=1
	fi

	# What the server saw.
	requests=$(grep -c '"kind":"request"' "$d/mock.ndjson" 2>/dev/null)
	r429=$(grep -c '"status":429' "$d/mock.ndjson" 2>/dev/null)
	tool_ids "$tool" "$d"
	sort -u "$d/ok.ids" "$d/failed.ids" | comm -23 "$d/all.ids" - >"$d/lost.ids"
	okn=$(count_lines "$d/ok.ids")
	failn=$(count_lines "$d/failed.ids")
	lost=$(count_lines "$d/lost.ids")
	cpu=$(time_cpu "$d/time.txt")
	rss=$(time_rss "$d/time.txt")
	tsv=$d/row row "$scen" "$tool" "$n" "$ideal" "$elapsed" "$requests" \
	    "$r429" "$okn" "$failn" "$lost" "$cpu" "$rss" "$ew" rfpipe
	say "$scen $(tool_name "$tool"): ${elapsed}s, ok $okn/$n, failed $failn," \
	    "lost $lost, requests $requests, 429s $r429, exit $ew"
}

scenario_stampede() {
	local scen=$1 t ideal
	ideal=$(awk -v n="$stamp_n" -v r="$rate" 'BEGIN { printf "%.3f", n / r }')
	for t in rfpipe rfpipe-rate curl-serial ${fetch_tools#rfpipe }; do
		run_fetch "$scen" "$t" "$stamp_n" /portal/ portal doc-%d \
		    "$t_stamp" "" "$ideal"
	done
}

# Flaky: what rfpipe filed, document by document, against the truth.
check_flaky() {
	local d=$work/flaky/rfpipe bad_ok bad_dead lost
	[ -d "$d" ] || return 0
	# Truth by the last two digits: 00 poison, 01 permanent, others succeed.
	awk '{ t = substr($1, length($1) - 1)
	    print $1, (t == "00" ? "poison" : t == "01" ? "permanent" : "ok") }' \
	    "$d/all.ids" >"$d/truth"
	jq -r '[.id, .dead_reason, .reason] | join(" ")' \
	    "$d/run/dead.ndjson" 2>/dev/null | sort >"$d/dead.reasons"
	# Every document that should succeed is in results.ndjson.
	bad_ok=$(awk '$2 == "ok" { print $1 }' "$d/truth" |
	    comm -23 - "$d/ok.ids" | grep -c '')
	# Every other one is in dead.ndjson with the right reason.
	bad_dead=$(awk 'NR == FNR { r[$1] = $2 " " $3; next }
	    $2 == "poison" && r[$1] != "exhausted http_503" { n++ }
	    $2 == "permanent" && r[$1] != "permanent http_404" { n++ }
	    END { print n + 0 }' "$d/dead.reasons" "$d/truth")
	lost=$(count_lines "$d/lost.ids")
	local want_ok want_dead
	want_ok=$(awk '$2 == "ok"' "$d/truth" | grep -c '')
	want_dead=$(awk '$2 != "ok"' "$d/truth" | grep -c '')
	if [ "$bad_ok" -eq 0 ]; then
		echo "PASS flaky: rfpipe succeeded all $want_ok non-poison, non-permanent documents" >>"$checks"
	else
		echo "FAIL flaky: rfpipe did not succeed $bad_ok of the $want_ok documents that can succeed" >>"$checks"
	fi
	if [ "$bad_dead" -eq 0 ]; then
		echo "PASS flaky: rfpipe reported all $want_dead poison/permanent documents dead with their reason (exhausted http_503 / permanent http_404)" >>"$checks"
	else
		echo "FAIL flaky: $bad_dead of $want_dead poison/permanent documents not in dead.ndjson with the expected reason" >>"$checks"
	fi
	if [ "$lost" -eq 0 ]; then
		echo "PASS flaky: rfpipe lost no document" >>"$checks"
	elif [ "$(get flaky rfpipe exit)" = killed ]; then
		echo "FAIL flaky: rfpipe had not filed $lost documents when something outside the bench killed it (exit 'killed': rerun)" >>"$checks"
	elif [ "$(get flaky rfpipe exit)" = timeout ]; then
		echo "FAIL flaky: rfpipe had not filed $lost documents when the bench's ${t_flaky} s timeout stopped it" >>"$checks"
	else
		echo "FAIL flaky: rfpipe lost $lost documents" >>"$checks"
	fi
}

# ---------------------------------------------------------------- stage runs
human() {
	awk -v n="$1" 'BEGIN {
		if (n % 1000000 == 0) printf "%dM", n / 1000000
		else if (n % 1000 == 0) printf "%dk", n / 1000
		else printf "%d", n }'
}

# Synthetic records as rfp-fetch emits them; the last two digits of the
# number choose the outcome: 78% 200, 5% each 429 and 503 (Retry-After: 1),
# 5% each timeout and reset, 1% 404, 1% 418; attempts 1..5 by hundreds.
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

# The classification table of DESIGN.md, in jq.
jq_classify='
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
  + {retry_after_s: (try (.retry_after | tonumber) catch null)} end'

# Fates (no jitter: jq has no random numbers; no shared budget).
# shellcheck disable=SC2016  # jq variables, not shell ones
jq_fate='
if .fate != null then . else
  (.attempt // 1) as $a |
  if .class == "ok" then .fate = "done"
  elif .class == "transient" and $a < 5 then
    .delay_s = ([30, 0.5 * pow(2; $a - 1)] | min) / 2
    | .delay_s = ([.delay_s, (.retry_after_s // 0)] | max)
    | .not_before = now + .delay_s | .fate = "retry"
  elif .class == "transient" then
    .fate = "dead" | .dead_reason = "exhausted"
  else .fate = "dead" | .dead_reason = "permanent" end end'

# shellcheck disable=SC2016  # awk fields, not shell ones
file_awk='{
	if (index($0, "\"fate\":\"done\"")) print > r
	else if (index($0, "\"fate\":\"retry\"")) print > t
	else print > d
}'

# A record's id, class and reason, for comparing two classifiers.
cr_sed='s/^\{"id":"([^"]*)".*"class":"([a-z]*)".*"reason":"([^"]*)".*/\1 \2 \3/'

run_stage() {
	local n=$1 scen d in cls okn lines cpu rss t0 t1 rcb rcs
	scen="stage $(human "$n")"
	d=$work/stage/$n
	rm -rf "$d"
	mkdir -p "$d"
	in=$work/stage/in-$n.ndjson
	cls=$d/classified.ndjson
	[ -s "$in" ] || gen_stage "$n" >"$in"

	# rfp-classify: the median of five runs.  On this shared machine a run
	# of a second or two varies by a third from one run to the next (1.39,
	# 2.03 and 2.30 s in one bench; 427,000 and 645,000 records/s in two
	# benches of the same code), while jq's run of twenty seconds averages
	# such spells out.
	local k runs=
	for k in 1 2 3 4 5; do
		mkdir -p "$d/classify$k"
		run_timed "$d/classify$k" "$t_stage" "$in" "$bin/rfp-classify"
		runs="$runs$elapsed $k $rc
"
		[ "$k" -lt 5 ] && rm -f "$d/classify$k/stdout"
	done
	read -r elapsed k rc <<<"$(printf '%s' "$runs" | sort -g | sed -n 3p)"
	echo "$scen, rfp-classify: median of 5 runs; makespans $(printf '%s' "$runs" | cut -d' ' -f1 | sort -g | paste -sd' ') s" >>"$notes"
	mv "$d/classify5/stdout" "$cls"
	lines=$(count_lines "$cls")
	okn=$(grep -c '"class":"ok"' "$cls")
	row "$scen" rfp-classify "$n" - "$elapsed" - - "$okn" - \
	    "$((n - lines))" "$(time_cpu "$d/classify$k/time.txt")" \
	    "$(time_rss "$d/classify$k/time.txt")" "$(exit_word "$rc")" rfp-classify
	say "$scen rfp-classify: ${elapsed}s (median of 5), $lines records out, exit $rc"

	# rfp-backoff | rfp-sink, each stage timed on its own.
	local b=$d/backoff
	mkdir -p "$b"
	t0=$(now)
	timeout -k 5 "$t_stage" /usr/bin/time -v -o "$b/time-backoff.txt" \
	    "$bin/rfp-backoff" --run-dir "$b/run" --admitted "$n" --seed 1 \
	    <"$cls" 2>"$b/stderr-backoff" |
	    timeout -k 5 "$t_stage" /usr/bin/time -v -o "$b/time-sink.txt" \
	    "$bin/rfp-sink" --run-dir "$b/run" -q >"$b/retry.ndjson" \
	    2>"$b/stderr-sink"
	rcs=$?
	rcb=$(awk -F': ' '/Exit status/ { print $2 }' "$b/time-backoff.txt")
	t1=$(now)
	elapsed=$(sub "$t1" "$t0")
	local ndone ndead nretry
	ndone=$(count_lines "$b/run/results.ndjson")
	ndead=$(count_lines "$b/run/dead.ndjson")
	nretry=$(count_lines "$b/retry.ndjson")
	row "$scen" rfp-backoff "$n" - "$elapsed" - - - - - \
	    "$(time_cpu "$b/time-backoff.txt")" \
	    "$(time_rss "$b/time-backoff.txt")" "$(exit_word "${rcb:-?}")" rfp-backoff
	row "$scen" rfp-sink "$n" - "$elapsed" - - "$ndone" "$ndead" \
	    "$((n - ndone - ndead - nretry))" "$(time_cpu "$b/time-sink.txt")" \
	    "$(time_rss "$b/time-sink.txt")" "$(exit_word "$rcs")" rfp-backoff
	say "$scen rfp-backoff | rfp-sink: ${elapsed}s, done $ndone, dead $ndead," \
	    "retry $nretry"
	echo "stage $(human "$n"): rfp-backoff | rfp-sink filed $ndone done, $ndead dead, $nretry retry (to stdout, no FIFO)" >>"$notes"

	# jq classify
	mkdir -p "$d/jq"
	run_timed "$d/jq" "$t_stage" "$in" jq -c "$jq_classify"
	lines=$(count_lines "$d/jq/stdout")
	okn=$(grep -c '"class":"ok"' "$d/jq/stdout")
	row "$scen" jq-classify "$n" - "$elapsed" - - "$okn" - \
	    "$((n - lines))" "$(time_cpu "$d/jq/time.txt")" \
	    "$(time_rss "$d/jq/time.txt")" "$(exit_word "$rc")" rfp-classify
	say "$scen jq classify: ${elapsed}s, $lines records out, exit $rc"
	if ! cmp -s <(sed -E "$cr_sed" "$cls") <(sed -E "$cr_sed" "$d/jq/stdout")
	then
		echo "stage $(human "$n"): jq and rfp-classify DISAGREE on some class/reason" >>"$notes"
	else
		echo "stage $(human "$n"): jq and rfp-classify agree on every record's class and reason" >>"$notes"
	fi
	rm -f "$d/jq/stdout"

	# jq fates | awk filing into results, dead and retry files.
	mkdir -p "$d/jqfile"
	# shellcheck disable=SC2016  # expanded by that sh
	run_timed "$d/jqfile" "$t_stage" "$cls" sh -c \
	    'jq -c "$1" | awk -v r=results.ndjson -v d=dead.ndjson -v t=retry.ndjson "$2"' \
	    sh "$jq_fate" "$file_awk"
	ndone=$(count_lines "$d/jqfile/results.ndjson")
	ndead=$(count_lines "$d/jqfile/dead.ndjson")
	nretry=$(count_lines "$d/jqfile/retry.ndjson")
	row "$scen" jq-file "$n" - "$elapsed" - - "$ndone" "$ndead" \
	    "$((n - ndone - ndead - nretry))" "$(time_cpu "$d/jqfile/time.txt")" \
	    "$(time_rss "$d/jqfile/time.txt")" "$(exit_word "$rc")" rfp-backoff
	say "$scen jq fate | awk file: ${elapsed}s, done $ndone, dead $ndead, retry $nretry"
	rm -rf "$d/jqfile"/*.ndjson "$b/run" "$b/retry.ndjson" "$cls"
}

# ---------------------------------------------------------------- limiters
# The limiter matrix (--limiters, or --only limiters; not in the default
# run): rfpipe, not told the rate and told it (rfpipe.yaml `endpoints:
# {lim: {rate: R, burst: B}}`), against one limiter shape per cell, -j 32.
#
# Cells: one line each, whitespace-separated:
#   id      what --cells matches
#   clock   scaled: the mock under RFPIPE_TIME_SCALE, the scale chosen so
#           the ideal makespan takes about lim_real real seconds, at most
#           lim_rmax requests a real second; real: the
#           mock in real time; nginx: a real nginx limit_req, real time;
#           pg: three pipelines on three run directories sharing their
#           state in PostgreSQL (--state), against the mock in real time
#   shape   gcra (nodelay), gcra-delay, fixed-x (fixed window, X-RateLimit
#           headers), fixed-ietf (fixed window, IETF RateLimit headers),
#           sliding (sliding window), conc (concurrency cap), quota (a
#           daily quota over a gcra), drop (a gcra whose rate drops
#           mid-run), nginx
#   rate    requests/s the limiter allows in the long run (a window's
#           limit / window_s; a concurrency cap's max / answer time)
#   burst   gcra and nginx burst; - for the others
#   status  the refusal's status, 429 or 503
#   ra      Retry-After on a refusal, seconds; - for none
#   extra   comma-separated: n= documents (default max(60, 15 x rate +
#           burst), at most 1500; a window's: k x limit + 1, the least k
#           that gives as many); limit= window= (windows); max= delay_ms= (cap);
#           quota=; to= at= (drop: the rate from at= s on); nodelay= (nginx)
#   quick   q: also in --quick
#
# The choice: every shape, each of the rates 1, 3, 10, 20, 50 and 100 r/s
# at least twice, gcra bursts 0, 10 and 60 at low and high rates, 429 and
# 503 and with and without Retry-After spread over the shapes so that each
# shape gets both statuses; not the full cross product (that is thousands
# of cells), 28 cells.
lim_cells_full='
gcra-1            scaled gcra       1   0  429 -     -                    -
gcra-3-503-ra     scaled gcra       3   0  503 1     -                    -
gcra-10-ra        scaled gcra       10  0  429 1     -                    q
gcra-20           scaled gcra       20  0  429 -     -                    -
gcra-50-503       scaled gcra       50  0  503 -     -                    -
gcra-100-ra       scaled gcra       100 0  429 1     -                    -
gcra-3-b10        scaled gcra       3   10 429 -     -                    -
gcra-20-b10-503-ra scaled gcra      20  10 503 1     -                    q
gcra-100-b10      scaled gcra       100 10 429 -     -                    -
gcra-10-b60-ra    scaled gcra       10  60 429 1     -                    -
gcra-50-b60-503   scaled gcra       50  60 503 -     -                    -
delay-20-b10      scaled gcra-delay 20  10 429 -     -                    q
delay-3-b10-503-ra scaled gcra-delay 3  10 503 1     -                    -
fixed-x-10-ra     scaled fixed-x    10  -  429 1     limit=10,window=1    q
fixed-x-1-503     scaled fixed-x    1   -  503 -     limit=10,window=10   -
fixed-ietf-50     scaled fixed-ietf 50  -  429 -     limit=100,window=2   -
fixed-ietf-3-503-ra scaled fixed-ietf 3 -  503 1     limit=30,window=10   -
sliding-20        scaled sliding    20  -  429 -     limit=20,window=1    -
sliding-3-503-ra  scaled sliding    3   -  503 1     limit=9,window=3     -
conc-5            scaled conc       20  -  429 -     max=5,delay_ms=250   q
conc-25-503-ra    scaled conc       100 -  503 1     max=25,delay_ms=250  -
quota-10          scaled quota      10  0  429 86400 quota=150,n=300      q
quota-20-503      scaled quota      20  0  503 86400 quota=300,n=600      -
drop-50-10-ra     scaled drop       50  0  429 1     to=10,at=5,n=350     -
drop-20-3-503     scaled drop       20  0  503 -     to=3,at=5,n=130      q
nginx-nodelay     nginx  nginx      20  10 429 -     nodelay=1,n=300      q
nginx-delay       nginx  nginx      20  10 503 -     nodelay=0,n=300      -
pg-3              pg     gcra       20  0  429 -     n=300                q
'

# kv KEY DEFAULT: KEY's value in the cell's extra field.
kv() {
	local p IFS=,
	for p in $extra; do
		case $p in "$1"=*) echo "${p#*=}"; return ;; esac
	done
	echo "$2"
}

# The cell's limiter as the mock's scenario.  With a mock that has the
# endpoint-level `limits:` list; else the older `rate:` key (a gcra that
# answers 429), the only shape it has.
lim_yaml() {
	local common="status: $st" rr
	[ "$ra" != - ] && common="$common, retry_after: $ra"
	echo "# bench/run.sh limiter matrix, cell $id"
	echo "routes:"
	echo '  - match: "/lim/*"'
	echo "    endpoint: lim"
	if [ -z "$lim_zoo" ]; then
		echo "    rate: {per_s: $r, burst: $b$( [ "$ra" != - ] && echo ", retry_after: $ra")}"
		return
	fi
	[ "$shape" = conc ] && echo "    delay_ms: $(kv delay_ms 250)"
	echo "    limits:"
	case $shape in
	gcra)
		echo "      - {kind: gcra, per_s: $r, burst: $b, $common}" ;;
	gcra-delay)
		echo "      - {kind: gcra, per_s: $r, burst: $b, nodelay: false, $common}" ;;
	fixed-x|fixed-ietf)
		echo "      - {kind: fixed_window, limit: $(kv limit 1), window_s: $(kv window 1), headers: $( [ "$shape" = fixed-x ] && echo x || echo ietf), $common}" ;;
	sliding)
		echo "      - {kind: sliding_window, limit: $(kv limit 1), window_s: $(kv window 1), $common}" ;;
	conc)
		echo "      - {kind: concurrency, max: $(kv max 1), $common}" ;;
	quota)
		echo "      - {kind: gcra, per_s: $r, burst: $b, status: $st}"
		echo "      - {kind: quota, limit: $(kv quota 1), $common}" ;;
	drop)
		rr=$(kv to 1)
		echo "      - {kind: gcra, per_s: $r, burst: $b, until_s: $(kv at 5), $common}"
		echo "      - {kind: gcra, per_s: $rr, burst: $b, from_s: $(kv at 5), $common}" ;;
	esac
}

# The cell in words: shape · rate · burst · status · Retry-After.
lim_desc() {
	local s
	case $shape in
	gcra) s="gcra nodelay · $r r/s · burst $b" ;;
	gcra-delay) s="gcra delaying · $r r/s · burst $b" ;;
	fixed-x) s="fixed window $(kv limit 1)/$(kv window 1) s, X-RateLimit headers · $r r/s · —" ;;
	fixed-ietf) s="fixed window $(kv limit 1)/$(kv window 1) s, IETF RateLimit headers · $r r/s · —" ;;
	sliding) s="sliding window $(kv limit 1)/$(kv window 1) s · $r r/s · —" ;;
	conc) s="concurrency cap $(kv max 1), answers in $(kv delay_ms 250) ms · $r r/s · —" ;;
	quota) s="daily quota $(kv quota 1) over gcra · $r r/s · burst $b" ;;
	drop) s="gcra dropping to $(kv to 1) r/s at $(kv at 5) s · $r r/s · burst $b" ;;
	nginx) s="nginx limit_req$( [ "$(kv nodelay 1)" = 1 ] && echo ' nodelay' || echo ', delaying') · $r r/s · burst $b" ;;
	esac
	[ "$clock" = pg ] && s="$s; 3 pipelines sharing PostgreSQL state"
	printf '%s · %s · Retry-After %s' "$s" "$st" \
	    "$( [ "$ra" = - ] && echo no || echo "yes ($ra s)")"
}

# Sets ideal (logical seconds) and allowed for the cell's N documents:
# the mock's own --ideal where it has one, else a gcra's: burst + 1 at
# once, then one every 1/rate.
lim_ideal() {
	local out
	allowed=$n
	case $clock in
	nginx)
		# limit_req keeps excess in milli-requests: burst + 1 pass at
		# once with nodelay, then one each 1/rate; without nodelay the
		# excess waits, so the last answer comes (N - 1)/rate in.
		if [ "$(kv nodelay 1)" = 1 ]; then
			ideal=$(awk -v n="$n" -v r="$r" -v b="$b" 'BEGIN { x = (n - 1 - b) / r; printf "%.3f", x < 0 ? 0 : x }')
		else
			ideal=$(awk -v n="$n" -v r="$r" 'BEGIN { printf "%.3f", (n - 1) / r }')
		fi
		return
		;;
	esac
	if [ -n "$lim_zoo" ]; then
		out=$("$mock" --ideal "$n" --scenario "$yaml" --endpoint lim \
		    --allowed 2>&1) || {
			echo "$id: rfp-mockportal --ideal failed: $out" >>"$lim_notes"
			ideal=
			return
		}
		ideal=$(printf '%s\n' "$out" | awk 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { printf "%.3f", $i; exit } }')
		allowed=$(printf '%s\n' "$out" | awk '$1 == "allowed" { print $2 }')
		[ -n "$allowed" ] || allowed=$n
		return
	fi
	ideal=$(awk -v n="$n" -v r="$r" -v b="$b" 'BEGIN { x = (n - 1 - b) / r; printf "%.3f", x < 0 ? 0 : x }')
}

# One row of the matrix.
lim_row() {
	local IFS=$'\t'
	printf '%s\n' "$*" >>"$lim_tsv"
}

# nginx_start DIR: a fresh nginx with the cell's limit_req on a free port
# (fresh limiter state, fresh access log); sets port and ng_pid.
nginx_start() {
	local ng=$1/nginx i p user=
	mkdir -p "$ng/logs" "$ng/tmp" "$ng/www"
	printf '{"ok":true}\n' >"$ng/www/doc.json"
	# As root, the workers would run as nobody, who cannot read the work
	# directory: run them as the current user too.
	[ "$(id -u)" -eq 0 ] && user="user $(id -un) $(id -gn);"
	for i in $(seq 1 20); do
		p=$((20000 + RANDOM % 40000))
		# `return` would answer before limit_req runs (the rewrite
		# phase comes before preaccess): serve a static file instead.
		cat >"$ng/nginx.conf" <<EOF
# bench/run.sh limiter matrix, cell $id
$user
worker_processes 1;
events { worker_connections 1024; }
http {
	access_log off;
	types { }
	default_type application/json;
	log_format lim '\$msec \$status \$request_uri';
	limit_req_zone \$server_port zone=z:1m rate=${r}r/s;
	limit_req_log_level info;
	client_body_temp_path tmp/body;
	proxy_temp_path tmp/proxy;
	fastcgi_temp_path tmp/fastcgi;
	uwsgi_temp_path tmp/uwsgi;
	scgi_temp_path tmp/scgi;
	server {
		listen 127.0.0.1:$p;
		root $ng/www;
		location = /_health { return 200 "ok\n"; }
		location / {
			access_log logs/access.log lim;
			limit_req zone=z burst=$b$( [ "$(kv nodelay 1)" = 1 ] && echo ' nodelay');
			$( [ "$st" != 503 ] && echo "limit_req_status $st;")
			try_files /doc.json =404;
		}
	}
}
EOF
		rm -f "$ng/logs/access.log" "$ng/nginx.pid"
		"$nginx" -e "$ng/error.log" -p "$ng" -c nginx.conf \
		    -g "daemon off; pid $ng/nginx.pid; error_log $ng/error.log;" \
		    >"$ng/out" 2>&1 &
		ng_pid=$!
		while kill -0 "$ng_pid" 2>/dev/null; do
			if curl -fsS -o /dev/null "http://127.0.0.1:$p/_health" 2>/dev/null; then
				port=$p
				return 0
			fi
			sleep 0.05
		done
		wait "$ng_pid" 2>/dev/null
		ng_pid=
		grep -q 'Address already in use' "$ng/error.log" 2>/dev/null ||
			break
	done
	cat "$ng/error.log" >&2
	die "nginx did not start for $id"
}

nginx_stop() {
	[ -n "$ng_pid" ] || return 0
	kill -TERM "$ng_pid" 2>/dev/null
	wait "$ng_pid" 2>/dev/null
	ng_pid=
}

# A throwaway PostgreSQL cluster on a Unix socket (as bench/pg/run.sh and
# tests/pg.bats start one): initdb in a temporary directory, as nobody
# when run as root.  Sets pg_dir; pg_url DB gives a database's URL.
pg_start() {
	local bin
	bin=$(find /usr/lib/postgresql -path '*/bin/initdb' 2>/dev/null | sort -V | tail -n 1)
	[ -n "$bin" ] || { echo "pg-3: skipped: initdb not found (the Debian package postgresql)" >>"$lim_notes"; return 1; }
	pg_bin=${bin%/initdb}
	pg_u=()
	pg_dir=$(mktemp -d "${TMPDIR:-/tmp}/rfpipe-bench-pg.XXXXXX") || return 1
	if [ "$(id -u)" -eq 0 ]; then
		chown nobody "$pg_dir"
		pg_u=(runuser -u nobody --)
	fi
	if ! "${pg_u[@]}" "$pg_bin/initdb" -D "$pg_dir/data" -A trust -U rfp \
	    -E UTF8 --no-sync >"$pg_dir/initdb.log" 2>&1 ||
	    ! "${pg_u[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" \
	    -w -o "-k $pg_dir -c listen_addresses= -c max_connections=200" \
	    start >/dev/null 2>&1; then
		echo "pg-3: skipped: the PostgreSQL cluster did not start: $(tail -n 3 "$pg_dir/initdb.log" "$pg_dir/log" 2>/dev/null | tr '\n' ' ')" >>"$lim_notes"
		pg_stop
		return 1
	fi
}
pg_url() { echo "postgresql:///$1?host=$pg_dir&user=rfp"; }
pg_stop() {
	[ -n "${pg_dir:-}" ] || return 0
	"${pg_u[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -m immediate stop \
	    >/dev/null 2>&1
	rm -rf "$pg_dir"
	pg_dir=
}

# lim_run TOOL: one tool in the current cell (the variables of lim_cell).
lim_run() {
	local t=$1 d=$cdir/$1 cfg requests refusals saved dq dead cpu ew h
	local ms hosts=1 pids rcs p t0
	mkdir -p "$d/out"
	case $clock in
	nginx) nginx_start "$d" ;;
	*) RFPIPE_TIME_SCALE=$sc start_mock "$yaml" "$d" ;;
	esac
	gen_inputs "$d" "$n" /lim/ lim doc-%d
	cfg=$d/rfpipe.yaml
	{
		echo "# bench/run.sh limiter matrix, cell $id, $t"
		if [ "$t" = rfpipe-told ]; then
			echo "endpoints:"
			echo "  lim:"
			case $shape in
			conc)
				echo "    concurrency: $(kv max 1)" ;;
			fixed-*|sliding)
				echo "    rate: $r"
				echo "    burst: 0" ;;
			*)
				echo "    rate: $r"
				echo "    burst: $b" ;;
			esac
		fi
	} >"$cfg"
	case $t in
	rfpipe|rfpipe-told)
		if [ "$clock" = pg ]; then
			# Three hosts, each a third of the documents, one database.
			hosts=3
			psql -q "$(pg_url postgres)" -c "CREATE DATABASE \"${t//-/_}\"" \
			    >/dev/null 2>&1
			pids=
			t0=$(now)
			for h in 1 2 3; do
				awk -v h="$h" 'NR % 3 == h % 3' "$d/manifest.ndjson" >"$d/m$h.ndjson"
				(cd "$d" && /usr/bin/time -v -o "$d/time$h.txt" \
				    timeout -k 5 "$tmo" env RFPIPE_TIME_SCALE="$sc" \
				    "$rfpipe" -j "$jobs" --seed "$h" --progress=none \
				    --config "$cfg" --run-dir "$d/run$h" \
				    --state "$(pg_url "${t//-/_}")" "$d/m$h.ndjson" \
				    >"$d/stdout$h" 2>"$d/stderr$h") &
				pids="$pids $!"
			done
			rcs=
			for p in $pids; do
				wait "$p"
				rcs="$rcs $?"
			done
			elapsed=$(sub "$(now)" "$t0")
			ew=
			h=0
			for p in $rcs; do
				h=$((h + 1))
				ew="$ew${ew:+ }$(exit_word "$p" "$d/time$h.txt")"
			done
			cpu=$(for h in 1 2 3; do time_cpu "$d/time$h.txt"; echo; done |
			    awk '{ s += $1 } END { printf "%.2f", s }')
		else
			run_timed "$d" "$tmo" /dev/null env RFPIPE_TIME_SCALE="$sc" \
			    "$rfpipe" -j "$jobs" --seed 1 --progress=none \
			    --config "$cfg" --run-dir "$d/run" "$d/manifest.ndjson"
		fi
		;;
	naive)
		run_timed "$d" "$tmo" "$d/list.txt" env NAIVE_OUT="$d/out" \
		    NAIVE_MAX_TIME= xargs -P "$jobs" -n 2 sh "$here/naive_fetch.sh"
		;;
	curl)
		run_timed "$d" "$tmo" /dev/null curl --parallel \
		    --parallel-max "$jobs" --retry 5 -fsS --no-progress-meter \
		    -K "$d/curl.cfg" -w '%{exitcode} %{http_code} %{url}\n'
		;;
	esac
	if [ "$hosts" -eq 1 ]; then
		ew=$(exit_word "$rc" "$d/time.txt")
		cpu=$(time_cpu "$d/time.txt")
	fi
	# What the server saw.
	case $clock in
	nginx)
		nginx_stop
		requests=$(count_lines "$d/nginx/logs/access.log")
		refusals=$(awk -v s="$st" '$2 == s' "$d/nginx/logs/access.log" 2>/dev/null | grep -c '')
		;;
	*)
		kill -0 "$mock_pid" 2>/dev/null || ew="$ew; mock died"
		stop_mock
		requests=$(grep -c '"kind":"request"' "$d/mock.ndjson" 2>/dev/null)
		refusals=$(grep -c '"action":"rate_limited"' "$d/mock.ndjson" 2>/dev/null)
		;;
	esac
	tool_ids "$t" "$d"
	saved=$(count_lines "$d/ok.ids")
	dead=- dq=-
	case $t in
	rfpipe*)
		cat "$d"/run*/dead.ndjson 2>/dev/null >"$d/dead.all"
		dead=$(count_lines "$d/dead.all")
		dq=$(grep -c '"dead_reason":"quota"' "$d/dead.all")
		if [ "$dead" -gt 0 ]; then
			echo "$id, $(lim_tool_name "$t"): dead $dead ($(jq -r .dead_reason "$d/dead.all" | sort | uniq -c | awk '{ printf "%s%s %d", (NR > 1 ? ", " : ""), $2, $1 }'))" >>"$lim_notes"
		fi
		[ "$t" = rfpipe ] && for p in "$d"/run*/state/rate/*.json; do
			[ -f "$p" ] || continue
			echo "$id, $(lim_tool_name "$t"): the adaptive pace ended at $(jq -r --argjson s "$sc" '.rate * $s * 100 | round / 100' "$p") req/s (logical) after $(jq -r .slows "$p") slow-down signals" >>"$lim_notes"
		done
		for p in "$d"/run*/state/breaker/*.json; do
			[ -f "$p" ] || continue
			[ "$(jq -r '.openings // 0' "$p")" -gt 0 ] || continue
			echo "$id, $(lim_tool_name "$t"): the circuit breaker opened $(jq -r .openings "$p") times (cooldown $(jq -r .cooldown "$p") s logical)" >>"$lim_notes"
		done
		;;
	esac
	ms=$(awk -v e="$elapsed" -v s="$sc" 'BEGIN { printf "%.3f", e / s }')
	lim_row "$id" "$t" "$n" "$allowed" "$ideal" "$ms" "$sc" "$requests" \
	    "$refusals" "$saved" "$dead" "$dq" "$cpu" "$ew" "$tmo" "$clock" "$r"
	say "limiters $id $(lim_tool_name "$t"): saved $saved/$n (allowed $allowed), refusals $refusals/$requests, makespan ${ms}s (ideal ${ideal}s, clock x$sc), exit $ew"
}

lim_tool_name() {
	case $1 in
	rfpipe) echo "rfpipe (rate not told)" ;;
	rfpipe-told) echo "rfpipe, rate told" ;;
	naive) echo "naive xargs -P 32 + curl" ;;
	curl) echo "curl --parallel --retry 5" ;;
	*) echo "$1" ;;
	esac
}

# lim_cell FIELDS...: one cell, every tool that makes sense in it.
lim_cell() {
	local id=$1 clock=$2 shape=$3 r=$4 b=$5 st=$6 ra=$7 extra=$8
	local n allowed ideal sc tmo cdir yaml tools t
	if [ "$clock" != nginx ] && [ -z "$lim_zoo" ] &&
	    { [ "$shape" != gcra ] || [ "$st" != 429 ]; }; then
		echo "$id: skipped: this mock portal has only the gcra that answers 429 (rate:); the cell needs its limits: list" >>"$lim_notes"
		lim_skipped="$lim_skipped $id"
		return
	fi
	cdir=$work/lim/$id
	mkdir -p "$cdir"
	yaml=$cdir/scenario.yaml
	n=$(kv n "")
	# A window's N is k windows' worth plus one: a client told the rate
	# (limit / window_s, burst 0) and pacing evenly can then meet the
	# ideal, floor((N - 1) / limit) windows.
	case $shape in
	fixed-*|sliding)
		[ -n "$n" ] || n=$(awk -v r="$r" -v l="$(kv limit 1)" 'BEGIN { k = int((15 * r + l - 1) / l); m = int((59 + l - 1) / l); if (m > k) k = m; n = k * l + 1; if (n > 1500) n = 1500; printf "%d", n }') ;;
	esac
	[ -n "$n" ] || n=$(awk -v r="$r" -v b="$b" 'BEGIN { n = 15 * r + (b == "-" ? 0 : b); if (n < 60) n = 60; if (n > 1500) n = 1500; printf "%d", n }')
	[ "$clock" = nginx ] || lim_yaml >"$yaml"
	lim_ideal
	if [ -z "$ideal" ]; then
		lim_skipped="$lim_skipped $id"
		return
	fi
	# Scaled: the ideal in about lim_real real seconds, but never more
	# than lim_rmax requests a real second: compressing time multiplies
	# whatever fixed real cost a request has.  A run is stopped at 3 x
	# the ideal plus 6 s (real cells: 2 x plus 8 s, room for curl's 31 s
	# of retry waits against a 14.5 s ideal).
	case $clock in
	scaled)
		sc=$(awk -v i="$ideal" -v t="$lim_real" -v r="$r" -v m="$lim_rmax" 'BEGIN { s = i > 0 ? t / i : 1; if (s < r / m) s = r / m; if (s > 1) s = 1; if (s < 0.005) s = 0.005; printf "%.3g", s }')
		tmo=$(awk -v i="$ideal" -v s="$sc" 'BEGIN { printf "%d", 3 * i * s + 6.5 }')
		;;
	*)
		sc=1
		tmo=$(awk -v i="$ideal" 'BEGIN { printf "%d", 2 * i + 8.5 }')
		;;
	esac
	[ -n "$tmo_all" ] && tmo=$tmo_all
	printf '%s\t%s\n' "$id" "$(lim_desc)" >>"$lim_desc_tsv"
	tools="rfpipe rfpipe-told"
	case $shape in
	quota|drop) tools=rfpipe ;;
	esac
	case $clock in
	nginx|real) tools="$tools naive curl" ;;
	pg)
		[ -n "$quick" ] && tools=rfpipe
		if [ -z "${pg_dir:-}" ] && ! pg_start; then
			lim_skipped="$lim_skipped $id"
			return
		fi
		;;
	esac
	for t in $tools; do
		lim_run "$t"
	done
	[ "$clock" = pg ] && pg_stop
}

# lim_selected ID: true when --cells is not given or one of its patterns
# matches ID.
lim_selected() {
	local pat
	[ -z "$cells" ] && return 0
	local IFS=,
	for pat in $cells; do
		# shellcheck disable=SC2254  # the pattern is meant to glob
		case $1 in $pat) return 0 ;; esac
	done
	return 1
}

run_limiters() {
	local id clock shape r b st ra extra q t0
	t0=$(now)
	mkdir -p "$work/lim"
	# The mock has the limits: list (and --ideal) once branch zoo is in.
	printf 'routes:\n  - match: "/*"\n    limits:\n      - {kind: gcra, per_s: 1}\n' \
	    >"$work/lim/probe.yaml"
	lim_zoo=
	"$mock" --ideal 1 --scenario "$work/lim/probe.yaml" --allowed \
	    >/dev/null 2>&1 && lim_zoo=1
	[ -n "$lim_zoo" ] || echo "This mock portal has no limits: list (tests/mockportal on branch zoo adds it): the cells it cannot play are skipped, and the ideal is computed here for a gcra." >>"$lim_notes"
	while read -r id clock shape r b st ra extra q; do
		case $id in ''|'#'*) continue ;; esac
		[ -n "$quick" ] && [ "$q" != q ] && continue
		lim_selected "$id" || continue
		lim_cell "$id" "$clock" "$shape" "$r" "$b" "$st" "$ra" "$extra"
	done <<<"$lim_cells_full"
	lim_secs=$(sub "$(now)" "$t0")
}

# The matrix as one Markdown table.
lim_table() {
	awk -F'\t' '
	function name(t) {
		if (t == "rfpipe") return "rfpipe (rate not told)"
		if (t == "rfpipe-told") return "rfpipe, rate told"
		if (t == "naive") return "naive xargs -P 32 + curl"
		if (t == "curl") return "curl --parallel --retry 5"
		return t
	}
	NR == FNR { desc[$1] = $2; next }
	FNR == 1 { next }
	{
		id = $1; t = $2; n = $3; al = $4; ideal = $5; ms = $6; sc = $7
		rq = $8; rf = $9; sv = $10; dq = $12; cpu = $13; ex = $14
		clk = $16; rate = $17
		if (clk == "pg") t3 = "3 × " name(t) ", one state"
		else t3 = name(t)
		cell = (id != last) ? desc[id] " `" id "`" : ""
		last = id
		clock = (sc + 0 >= 1) ? (clk == "nginx" ? "real, nginx" : "real") : sprintf("×%s (%.3g r/s real)", sc, rate / sc)
		saved = sv "/" n
		if (al + 0 < n + 0)
			saved = saved " (" al " allowed" (dq == "-" ? "" : "; " dq " dead quota") ")"
		ref = rf "/" rq (rq + 0 > 0 ? sprintf(" (%.1f %%)", 100 * rf / rq) : "")
		mk = (ideal + 0 > 0) ? sprintf("%.2f (%.1f / %.1f s)", ms / ideal, ms, ideal) : sprintf("— (%.1f / 0 s)", ms)
		printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", cell, clock, t3, saved, ref, mk, cpu, ex
	}
	BEGIN {
		print "| cell (shape · rate · burst · status · Retry-After) | clock | tool | saved/N | refusals ÷ requests | makespan ÷ ideal (logical s) | CPU s | exit |"
		print "|---|---|---|--:|--:|--:|--:|---|"
	}' "$lim_desc_tsv" "$lim_tsv"
}

# The targets, for every rfpipe row: not told, every document the limiter
# allows saved (a quota's rest dead with reason quota), refusals <= 5 % of
# requests, makespan <= 1.2 x ideal; told, no refusal and <= 1.05 x ideal.
# A makespan counts only with every allowed document saved.
lim_checks() {
	awk -F'\t' '
	function pf(c) { return c ? "PASS" : "FAIL" }
	FNR == 1 { next }
	$2 == "rfpipe" || $2 == "rfpipe-told" {
		id = $1; t = $2; n = $3; al = $4; ideal = $5; ms = $6
		rq = $8; rf = $9; sv = $10; dq = $12; ex = $14; tmo = $15
		told = (t == "rfpipe-told")
		ratio = (ideal + 0 > 0) ? ms / ideal : (ms + 0 > 0 ? 1e9 : 1)
		pct = (rq + 0 > 0) ? 100 * rf / rq : 0
		sa = (sv + 0 >= al + 0)
		qd = (al + 0 >= n + 0) || (dq + 0 == n - al)
		all = sa && qd
		if (!told) {
			c1 = all; c2 = (rf <= 0.05 * rq); c3 = all && ratio <= 1.2
			lim = 1.2
		} else {
			c1 = all; c2 = (rf + 0 == 0); c3 = all && ratio <= 1.05
			lim = 1.05
		}
		ok = c1 && c2 && c3
		s = sprintf("%s %s, %s: saved %d of %d allowed %s", pf(ok), id,
		    told ? "rfpipe, rate told" : "rfpipe (rate not told)", sv, al, pf(sa))
		if (al + 0 < n + 0)
			s = s sprintf(" · the other %d dead with reason quota: %s %s", n - al, dq, pf(qd))
		if (told)
			s = s sprintf(" · refusals %d, none allowed %s", rf, pf(c2))
		else
			s = s sprintf(" · refusals %d/%d = %.1f %% <= 5 %% %s", rf, rq, pct, pf(c2))
		# Enough digits that a FAIL never shows the limit itself.
		rs = sprintf("%.3f", ratio)
		if (ratio > lim && rs + 0 <= lim)
			rs = sprintf("%.5f", ratio)
		s = s sprintf(" · makespan %s x ideal <= %s %s", rs, lim, pf(c3))
		if (ex ~ /timeout/)
			s = s sprintf(" · STOPPED by the bench'"'"'s timeout after %d s (real)", tmo)
		else if (ex ~ /killed|died/)
			s = s " · exit " ex
		print s
		cells[t]++
		if (ok) pass[t]++
	}
	END {
		if (cells["rfpipe"])
			printf "rfpipe (rate not told): %d of %d cells meet every target\n", pass["rfpipe"], cells["rfpipe"]
		if (cells["rfpipe-told"])
			printf "rfpipe, rate told: %d of %d cells meet every target\n", pass["rfpipe-told"], cells["rfpipe-told"]
	}' "$lim_tsv"
}

# ---------------------------------------------------------------- scale
# bench/run.sh --scale: documents/s against an unlimited nginx (limit_req
# at 10^6 r/s, burst 10^6: never refuses) on one PostgreSQL cluster.
# scale_run NAME HOSTS MODE: HOSTS pipelines, -j 32 each, with MODE files
# (a run directory each), pg (--state, shared), queue (--queue, the state
# shared there too) or apart (--queue, each pipeline's state in a database
# of its own: the queue alone shared).  Without the queue each pipeline
# gets its share of the manifest; with it the manifest is loaded once,
# inside the timing, and every pipeline pulls.
scale_run() {
	local name=$1 hosts=$2 mode=$3 d=$work/scale/$1 h p t0 url='' ew='' rcs=''
	local pids='' ok uniq
	mkdir -p "$d"
	gen_inputs "$d" "$scale_n" /doc/ scale doc-%d
	if [ "$mode" != files ]; then
		psql -q "$(pg_url postgres)" -c "CREATE DATABASE ${name//-/_}" \
		    >/dev/null || die "scale: CREATE DATABASE failed"
		url=$(pg_url "${name//-/_}")
	fi
	for h in $(seq 1 "$hosts"); do
		[ "$mode" = apart ] || break
		psql -q "$(pg_url postgres)" -c "CREATE DATABASE ${name//-/_}_$h" \
		    >/dev/null || die "scale: CREATE DATABASE failed"
	done
	t0=$(now)
	case $mode in queue|apart) ! "$bin/rfp-queue" --state "$url" load \
	    <"$d/manifest.ndjson" >/dev/null && ew="load failed; " ;; esac
	for h in $(seq 1 "$hosts"); do
		case $mode in
		queue) set -- --queue "$url" ;;
		apart) set -- --queue "$url" --state "$(pg_url "${name//-/_}_$h")" ;;
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
		wait "$p"
		rcs="$rcs${rcs:+ }$(exit_word "$?")"
	done
	elapsed=$(sub "$(now)" "$t0")
	cat "$d"/run*/results.ndjson 2>/dev/null | jq -r .id >"$d/ok.ids"
	ok=$(count_lines "$d/ok.ids")
	uniq=$(sort -u "$d/ok.ids" | grep -c '')
	case $mode in queue|apart) ! "$bin/rfp-queue" --state "$url" summary |
	    jq -e .reconciled >/dev/null && ew="${ew}not reconciled; " ;; esac
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$hosts" "$mode" \
	    "$scale_n" "$elapsed" "$(awk -v n="$scale_n" -v e="$elapsed" 'BEGIN { printf "%.0f", n / e }')" \
	    "$ok/$uniq" "$ew$rcs" >>"$work/scale.tsv"
	say "scale $name: $ok saved ($uniq distinct) of $scale_n in ${elapsed}s, exit $ew$rcs"
}

run_scale() {
	local id=scale r=1000000 b=1000000 st=429 extra=nodelay=1 rate1 n
	scale_n=10000 scale_tmo=600
	[ -n "$quick" ] && scale_n=3000
	pg_start || die "scale: $(cat "$lim_notes")"
	nginx_start "$work/scale"
	: >"$work/scale.tsv"
	for n in files-1:1:files files-3:3:files pg-1:1:pg pg-3:3:pg \
	    queue-1:1:queue queue-3:3:queue queue-3-apart:3:apart; do
		IFS=: read -r id h m <<<"$n"
		scale_run "$id" "$h" "$m"
	done
	nginx_stop
	echo "| run | pipelines | state | documents | wall s | documents/s | saved/distinct | exit |"
	echo "| --- | --: | --- | --: | --: | --: | --: | --- |"
	awk -F'\t' -v OFS=' | ' '{ print "| " $1, $2, $3, $4, $5, $6, $7, $8 " |" }' \
	    "$work/scale.tsv"
	rate1=$(awk -F'\t' '$1 == "pg-1" { print $6 }' "$work/scale.tsv")
	awk -F'\t' -v p="$rate1" '
	    { r[$1] = $6 }
	    END { q1 = r["queue-1"]; q3 = r["queue-3"]
		printf "\n    %s  one pipeline through the queue >= 50%% of one with --state (%.0f%%)\n", \
		(q1 >= p / 2 ? "PASS" : "FAIL"), 100 * q1 / p
		printf "    %s  three pipelines on one queue >= 1.5 x one (%.2f x)\n", \
		(q3 >= 1.5 * q1 ? "PASS" : "FAIL"), q3 / q1
		printf "\n    three against one: files %.2f x, --state %.2f x, the queue with each state apart %.2f x\n", \
		r["files-3"] / r["files-1"], r["pg-3"] / r["pg-1"], r["queue-3-apart"] / q1 }' "$work/scale.tsv"
	echo
	echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); rfpipe $rev0"
}

# ---------------------------------------------------------------- run
if [ -n "$scale" ]; then
	run_scale
	exit 0
fi
write_scenarios
for scen in $scenarios; do
	selected "$scen" || continue
	case $scen in
	stampede|stampede-ra)
		scenario_stampede "$scen" ;;
	flaky)
		for t in $fetch_tools; do
			run_fetch flaky "$t" "$flaky_n" /flaky/ flaky doc-%04d \
			    "$t_flaky" 2 - 1
		done
		;;
	throughput)
		# The slow peers once; the others the median of thru_k runs.
		fast='' slow=''
		for t in $fetch_tools; do
			case $t in
			naive|parallel) slow="$slow $t" ;;
			*) fast="$fast $t" ;;
			esac
		done
		run_fetch_median "$thru_k" "$fast" throughput "$thru_n" /bulk/ \
		    bulk doc-%d "$t_thru" "" -
		run_fetch_median 1 "$slow" throughput "$thru_n" /bulk/ bulk \
		    doc-%d "$t_thru" "" -
		;;
	stage)
		mkdir -p "$work/stage"
		for n in $stage_ns; do
			run_stage "$n"
		done
		rm -f "$work"/stage/in-*.ndjson
		;;
	limiters)
		run_limiters ;;
	esac
done
bench_secs=$(sub "$(now)" "$bench_t0")

# ---------------------------------------------------------------- table
# Rows of the TSV with ratios against the reference row of the scenario.
table() {
	awk -F'\t' '
	function f(x, p) { return (x == "-" || x == "") ? "—" : sprintf(p, x) }
	function name(t) {
		if (t == "rfpipe") return "rfpipe"
		if (t == "rfpipe-rate") return "rfpipe, rate 20/s configured"
		if (t == "curl-serial") return "reference: serial curl --rate 20/s (told the limit)"
		if (t == "naive") return "naive xargs -P 32 + curl (5 tries at once)"
		if (t == "curl") return "curl --parallel --retry 5"
		if (t == "curl-all") return "curl --parallel --retry 5 --retry-all-errors"
		if (t == "parallel") return "GNU parallel --retries 5 + curl -f"
		if (t == "asyncio") return "asyncio + aiohttp (mission sketch)"
		if (t == "rfp-classify") return "rfp-classify"
		if (t == "rfp-backoff") return "rfp-backoff (\\| rfp-sink)"
		if (t == "rfp-sink") return "rfp-sink (rfp-backoff \\|)"
		if (t == "jq-classify") return "jq -c classify"
		if (t == "jq-file") return "jq -c fates \\| awk filing"
		return t
	}
	function ratio(a, b) {
		if (a == "-" || b == "-" || a == "" || b == "") return "—"
		if (b + 0 == 0) return (a + 0 == 0) ? "—" : "∞"
		return sprintf("%.2f", a / b)
	}
	NR == 1 { next }
	{
		n++; s[n] = $1; t[n] = $2; N[n] = $3; id[n] = $4; ms[n] = $5
		rq[n] = $6; r4[n] = $7; ok[n] = $8; fl[n] = $9; lo[n] = $10
		cpu[n] = $11; rss[n] = $12; ex[n] = $13; ref[n] = $14
		key[$1 SUBSEP $2] = n
	}
	END {
		print "| scenario | tool | N | makespan s | ÷ ideal | requests | 429s | ok | failed (reported) | lost | docs/s | CPU s | peak RSS MiB | makespan ÷ rfpipe | 429s ÷ rfpipe | exit |"
		print "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
		for (i = 1; i <= n; i++) {
			r = key[s[i] SUBSEP ref[i]]
			stage = (s[i] ~ /^stage/)
			rate = stage ? N[i] / ms[i] : (ok[i] == "-" ? "-" : ok[i] / ms[i])
			printf "| %s | %s | %d | %.2f | %s | %s | %s | %s | %s | %s | %s | %.2f | %.1f | %s | %s | %s |\n",
			    s[i], name(t[i]), N[i], ms[i],
			    (id[i] == "-" ? "—" : sprintf("%.2f", ms[i] / id[i])),
			    f(rq[i], "%d"), f(r4[i], "%d"), f(ok[i], "%d"),
			    f(fl[i], "%d"), f(lo[i], "%d"), f(rate, "%.0f"),
			    cpu[i], rss[i] / 1024,
			    (r ? ratio(ms[i], ms[r]) : "—"),
			    (r && !stage ? ratio(r4[i], r4[r]) : "—"), ex[i]
		}
	}' "$tsv"
}


stampede_checks() {
	local scen=$1 n ideal r p rms rok r429 pms pok p429 lim bad
	has "$scen" rfpipe || return 0
	n=$(get "$scen" rfpipe n)
	ideal=$(get "$scen" rfpipe ideal)
	for r in rfpipe rfpipe-rate; do
		has "$scen" "$r" || continue
		rms=$(get "$scen" "$r" makespan)
		rok=$(get "$scen" "$r" ok)
		r429=$(get "$scen" "$r" r429)
		# Ahead on makespan: more documents succeeded, or as many sooner.
		bad=
		for p in ${fetch_tools#rfpipe }; do
			has "$scen" "$p" || continue
			pms=$(get "$scen" "$p" makespan)
			pok=$(get "$scen" "$p" ok)
			if ! { [ "$rok" -gt "$pok" ] ||
			    { [ "$rok" -eq "$pok" ] && lt "$rms" "$pms"; }; }; then
				bad="$bad $p (${pms}s, ok $pok)"
			fi
		done
		if [ -z "$bad" ]; then
			echo "PASS $scen: $r (${rms}s, ok $rok/$n) ahead of every peer on makespan" >>"$checks"
		else
			echo "FAIL $scen: $r (${rms}s, ok $rok/$n) not ahead on makespan of:$bad" >>"$checks"
		fi
		bad=
		for p in ${fetch_tools#rfpipe }; do
			has "$scen" "$p" || continue
			p429=$(get "$scen" "$p" r429)
			if ! { [ "$r429" -lt "$p429" ] ||
			    { [ "$r429" -eq 0 ] && [ "$p429" -eq 0 ]; }; }; then
				bad="$bad $p ($p429)"
			fi
		done
		if [ -z "$bad" ]; then
			echo "PASS $scen: $r ($r429 429s) ahead of every peer on 429s" >>"$checks"
		else
			echo "FAIL $scen: $r ($r429 429s) not ahead on 429s of:$bad" >>"$checks"
		fi
		if [ "$r" = rfpipe ]; then
			lim=$(fmt "$ideal" '%.3f' | awk '{ printf "%.2f", $1 * 1.3 }')
		else
			lim=$(fmt "$ideal" '%.3f' | awk '{ printf "%.2f", $1 * 1.1 }')
		fi
		if le "$rms" "$lim" && [ "$rok" -eq "$n" ]; then
			echo "PASS $scen: $r makespan ${rms}s <= $lim s ($( [ "$r" = rfpipe ] && echo 1.3 || echo 1.1 ) x ideal $(fmt "$ideal" '%.1f') s) with all $n documents succeeded" >>"$checks"
		else
			echo "FAIL $scen: $r makespan ${rms}s vs limit $lim s ($( [ "$r" = rfpipe ] && echo 1.3 || echo 1.1 ) x ideal $(fmt "$ideal" '%.1f') s), ok $rok/$n (the target needs both)" >>"$checks"
		fi
		if has "$scen" curl-serial; then
			pms=$(get "$scen" curl-serial makespan)
			echo "$scen: $r took ${rms}s, $(awk -v a="$rms" -v b="$pms" 'BEGIN { printf "%.2f", a / b }') x the serial reference (curl --rate $rate/s, told the limit: ${pms}s, ok $(get "$scen" curl-serial ok)/$n, $(get "$scen" curl-serial r429) 429s)" >>"$notes"
		fi
	done
}

throughput_checks() {
	local rr cr rms cms rok cok
	has throughput rfpipe && has throughput curl || return 0
	rms=$(get throughput rfpipe makespan)
	cms=$(get throughput curl makespan)
	rok=$(get throughput rfpipe ok)
	cok=$(get throughput curl ok)
	rr=$(awk -v o="$rok" -v m="$rms" 'BEGIN { printf "%.0f", o / m }')
	cr=$(awk -v o="$cok" -v m="$cms" 'BEGIN { printf "%.0f", o / m }')
	echo "$(pf le "$cr" "$rr") throughput: rfpipe $rr docs/s >= curl --parallel $cr docs/s" >>"$checks"
}

stage_checks() {
	local small big cs js rs st ok
	# shellcheck disable=SC2086
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
		ok=1
		awk -v a="$rs" -v b="$rb" 'BEGIN { exit !(b <= a * 1.10 + 512) }' || ok=
		[ "$rb" -le 16384 ] && [ "$rs" -le 16384 ] || ok=
		echo "$( [ -n "$ok" ] && echo PASS || echo FAIL) stage: $st peak RSS $(fmt "$rs" '%d' | awk '{ printf "%.1f", $1 / 1024 }') MiB at $(human "$small"), $(awk -v b="$rb" 'BEGIN { printf "%.1f", b / 1024 }') MiB at $(human "$big") (same within 10% + 0.5 MiB, <= 16 MiB)" >>"$checks"
	done
}

for s in stampede stampede-ra; do stampede_checks "$s"; done
check_flaky
throughput_checks
stage_checks

# Data-driven notes: what rfpipe's own summary says about its dead letters.
for s in stampede stampede-ra flaky throughput; do
	for r in rfpipe rfpipe-rate; do
		f=$work/$s/$r/run/summary.json
		[ -f "$f" ] || continue
		echo "$s, $r: $(jq -r '"succeeded \(.totals.succeeded), dead \(.totals.dead) (" + ([.totals.dead_by_reason | to_entries[] | select(.value > 0) | "\(.key) \(.value)"] | join(", ")) + "), attempts \(.run.attempts), budget left \(.budget.left // "n/a") of \(.budget.total // "n/a")"' "$f")" >>"$notes"
	done
done
for s in stampede stampede-ra flaky throughput; do
	for r in rfpipe rfpipe-rate; do
		for f in "$work/$s/$r"/run/state/rate/*.json; do
			[ -f "$f" ] || continue
			echo "$s, $r: adaptive pace of endpoint $(jq -r '.endpoint' "$f") ended at $(jq -r '.rate * 100 | round / 100' "$f") req/s after $(jq -r '.slows' "$f") slow-down signals (429 / 503 with Retry-After)"
		done
		for f in "$work/$s/$r"/run/state/breaker/*.json; do
			[ -f "$f" ] || continue
			echo "$s, $r: circuit breaker of endpoint $(jq -r '.endpoint' "$f") opened $(jq -r '.openings' "$f") times, last cooldown $(jq -r '.cooldown' "$f") s, state at the end: $(jq -r '.state' "$f")"
		done
	done
done >>"$notes"
for s in stampede stampede-ra flaky throughput; do
	for t in rfpipe-rate curl-serial $fetch_tools; do
		f=$work/$s/$t/mock.ndjson
		[ -f "$f" ] || continue
		echo "$s, $t: the server saw at most $(jq -s 'map(.inflight_total) | max' "$f") requests in flight (a hung request the client gave up on counts until the mock closes it)"
	done
done >>"$notes"

main_rows=$(($(count_lines "$tsv") - 1))
lim_rows=$(($(count_lines "$lim_tsv") - 1))
if [ "$main_rows" -gt 0 ]; then
	tbl=$(table)
	printf '%s\n\n' "$tbl"
	cat "$checks"
fi
if selected limiters; then
	ltbl=$(lim_table)
	lchk=$(lim_checks)
	[ "$main_rows" -gt 0 ] && echo
	printf '%s\n\n%s\n' "$ltbl" "$lchk"
	[ -n "$lim_skipped" ] && echo "skipped cells:$lim_skipped (see the notes)"
fi
say "done in ${bench_secs}s"

if [ -n "$results" ] && [ "$main_rows" -gt 0 ]; then
	{
		echo "# rfpipe benchmark results"
		echo
		echo "Generated by \`bench/run.sh\`; regenerate with \`make bench\` (full) or"
		echo "\`bench/run.sh --quick\`.  Do not edit by hand: the next run overwrites it."
		echo
		echo "## Command"
		echo
		echo "    $cmdline"
		echo
		echo "Wall time of the whole bench: $(fmt "$bench_secs" '%.0f') s."
		echo "RFPIPE_TIME_SCALE unset (real seconds for every tool)."
		echo
		echo "## Machine"
		echo
		echo "- nproc: $(nproc)"
		echo "- CPU: $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
		echo "- memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
		echo "- kernel: $(uname -srm)"
		echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
		echo "- load average at the start: $load0; at the end: $(cut -d' ' -f1-3 /proc/loadavg) (anything else running on the 2 cores skews the CPU-bound rows)"
		rev1="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
		echo "- rfpipe: built by make from the work tree at the start: $rev0$( [ "${rev0%% *}" != "$rev1" ] && echo "; HEAD was $rev1 by the end")"
		echo "- peers: $(curl --version | head -n 1 | cut -d' ' -f1,2), $(parallel --version | head -n 1), $(jq --version), $("$py" -c 'import sys, aiohttp; print("Python %d.%d.%d" % sys.version_info[:3], "aiohttp", aiohttp.__version__)')"
		echo
		echo "## Results"
		echo
		echo "$tbl"
		echo
		echo "## Target checks"
		echo
		sed 's/^/    /' "$checks"
		echo
		echo "## Notes"
		echo
		echo "How to read the table:"
		echo
		echo "- makespan: wall seconds from the tool's start to its exit (for the stage"
		echo "  rows, the whole pipe); ÷ ideal is makespan / (N / 20 req/s) where the"
		echo "  server's rate applies; docs/s is ok / makespan (stage: records in / wall)."
		echo "- requests and 429s come from the mock's request log (a fresh mock, port"
		echo "  and log per tool per scenario); ok, failed and lost from each tool's own"
		echo "  output: rfpipe's results.ndjson / dead.ndjson; the peers' non-empty body"
		echo "  files, and the failures they report (curl -w exit codes, parallel's"
		echo "  --joblog, the naive loop's and the asyncio peer's per-document lines)."
		echo "  lost = neither succeeded nor reported failed."
		echo "- CPU s is user+sys of the tool and every process it waited for"
		echo "  (/usr/bin/time -v); peak RSS is the largest single process of the tool"
		echo "  (for rfpipe the largest stage; for xargs/parallel one curl), not a sum."
		echo "- Ratios are against rfpipe (no rate configured) in the same scenario; for"
		echo "  the stage rows jq is against rfp-classify, and jq filing against"
		echo "  rfp-backoff | rfp-sink."
		echo "- stampede: the serial reference (one curl, \`--rate 20/s\`, told the limit"
		echo "  in advance) is not a peer and enters no check; the notes give rfpipe's"
		echo "  makespan against it."
		echo "- 'ahead on makespan' counts a tool that finished sooner by giving up on"
		echo "  documents as behind: ahead = more documents succeeded, or as many sooner."
		echo "- flaky: the last two digits of a document's number choose its script"
		echo "  (00 poison: 503 with Retry-After: 1 forever; 01: 404; 03 23 43 63 83:"
		echo "  429; 13 33 ... 93: 503 (both with Retry-After: 1); 07 27 ... 87: reset;"
		echo "  17 37 ... 97: hang 3 s; each of those then 200; the rest 200), so the"
		echo "  shares are exact and the bench knows each document's truth; every tool"
		echo "  gets the documents in the same fixed shuffled order, and a 2 s total"
		echo "  timeout per request (rfpipe: config \`timeout: 2\`)."
		echo "- Every run writes into a directory of its own; a repeated run's earlier"
		echo "  directory is moved aside, and all are removed only at the end: ext4"
		echo "  without a journal skips inodes freed in the last minutes one by one, and"
		echo "  10,000 files removed just before a run cost its creates seconds of"
		echo "  system time.  For the same reason, a bench started within about six"
		echo "  minutes of removing many files (another bench, make check) measures the"
		echo "  file system's clean-up, not the tools."
		echo "- stage: synthetic fetched records (78% 200, 5% each 429 and 503 with"
		echo "  Retry-After, 5% each timeout and reset, 1% 404, 1% 418; attempts 1-5)."
		echo "  The jq filing peer has no jitter and no shared budget (jq has neither)."
		echo
		echo "Measured facts from this run:"
		echo
		sed 's/^/- /' "$notes"
		# The limiter matrix of an earlier run stays, under its heading.
		if [ -f "$results" ] && grep -q '^# Limiter matrix' "$results"; then
			echo
			sed -n '/^# Limiter matrix/,$p' "$results"
		fi
	} >"$results.tmp" && mv "$results.tmp" "$results"
	say "wrote $results"
fi
if [ -n "$results" ] && selected limiters && [ "$lim_rows" -gt 0 ]; then
	{
		# Whatever the file held before its limiter matrix, then this one.
		if [ -f "$results" ]; then
			sed '/^# Limiter matrix/,$d' "$results" |
			    awk 'NF { while (b > 0) { print ""; b-- } print; next } { b++ }'
			echo
		fi
		echo "# Limiter matrix"
		echo
		echo "Generated by \`bench/run.sh --limiters\` (not part of \`make bench\`, which"
		echo "keeps this section as it is); \`bench/run.sh --limiters --quick\` runs a"
		echo "subset.  Do not edit by hand: the next full --limiters run replaces it."
		echo
		echo "## Command"
		echo
		echo "    $cmdline"
		echo
		echo "Wall time of the matrix: $(fmt "$lim_secs" '%.0f') s.  Machine: $(nproc) cores,"
		echo "$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), $(uname -srm); $(date -u '+%Y-%m-%d %H:%M UTC');"
		echo "load average at the start $load0, at the end $(cut -d' ' -f1-3 /proc/loadavg)."
		rev1="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
		echo "rfpipe: built by make from the work tree at the start: $rev0$( [ "${rev0%% *}" != "$rev1" ] && echo "; HEAD was $rev1 by the end")."
		echo "Limiters: rfp-mockportal from the same tree$( [ -n "$lim_zoo" ] && echo " (its \`limits:\` list)" || echo " (its \`rate:\` gcra only: no \`limits:\` list)"), $("$nginx" -v 2>&1 | sed 's/^nginx version: //'), PostgreSQL $(psql --version | awk '{ print $3 }'); peers: $(curl --version | head -n 1 | cut -d' ' -f1,2)."
		echo
		echo "## Results"
		echo
		echo "$ltbl"
		echo
		echo "## Target checks"
		echo
		printf '%s\n' "$lchk" | sed 's/^/    /'
		[ -n "$lim_skipped" ] && printf '\n    skipped cells:%s\n' "$lim_skipped"
		echo
		echo "## How to read it"
		echo
		echo "- A cell is one limiter: its shape, the rate it allows in the long run,"
		echo "  its burst, the status of a refusal and whether the refusal carries"
		echo "  Retry-After.  28 cells, not the full cross product: every shape, each of"
		echo "  1, 3, 10, 20, 50 and 100 r/s at least twice, gcra bursts 0, 10 and 60 at"
		echo "  low and high rates, and 429/503 with and without Retry-After spread so"
		echo "  that every shape gets both statuses.  The list, with its parameters, is"
		echo "  \`lim_cells_full\` in bench/run.sh."
		echo "- N = max(60, 15 x rate + burst), at most 1500, so that the ideal"
		echo "  makespan is 10 logical seconds or more (the quota and drop cells set"
		echo "  their own N).  A window's N is k x limit + 1 for the least k that gives"
		echo "  as many: then a client told limit / window_s that paces evenly"
		echo "  finishes on the ideal, floor((N - 1) / limit) windows."
		echo "  The ideal is the mock's own \`--ideal\` for N documents at -j 32 (a"
		echo "  gcra's (N - 1 - burst) / rate when the mock has none), and for nginx"
		echo "  (N - 1 - burst) / rate with nodelay, (N - 1) / rate without."
		echo "- clock x S: the mock and rfpipe ran under RFPIPE_TIME_SCALE=S, chosen so"
		echo "  that the ideal takes about $lim_real real seconds but the real request rate"
		echo "  stays at most $lim_rmax/s (compressing time multiplies any fixed real cost"
		echo "  of a request: the column gives the real rate); makespans are in logical"
		echo "  seconds (real / S), CPU in real seconds.  The peers do not honour the"
		echo "  scale (curl's retry waits and Retry-After are real seconds), so they run"
		echo "  only in the nginx cells, which are in real time."
		echo "- saved/N: documents in rfpipe's results.ndjson (the peers: non-empty"
		echo "  bodies).  A quota cell allows fewer than N: 'allowed' is what the quota"
		echo "  lets through, and the rest should be dead with reason \`quota\`, unsent."
		echo "- refusals ÷ requests: as the server saw them (the mock's log, action"
		echo "  \`rate_limited\`; nginx's access log, status 429 or 503)."
		echo "- rate told: rfpipe.yaml \`endpoints: {lim: {rate: R, burst: B}}\` with the"
		echo "  limiter's own numbers (windows: the window's rate with burst 0; the"
		echo "  concurrency cap: \`concurrency: max\` instead of a rate).  The quota and"
		echo "  drop cells have no told row: no single rate and burst says them."
		echo "- pg: three pipelines, each a third of the documents in a run directory"
		echo "  of its own, sharing their state (pace, budget, breaker) through"
		echo "  \`--state postgresql://...\` on a throwaway cluster; one row for the"
		echo "  three, makespan until the last exits, CPU summed."
		echo "- Every run is bounded: 3 x its ideal + 6 s of real time in scaled cells,"
		echo "  2 x + 8 s in real ones; one stopped says 'timeout' in exit and"
		echo "  STOPPED in its check, with what it had saved by then."
		echo
		echo "## Measured facts from this run"
		echo
		sed 's/^/- /' "$lim_notes"
	} >"$results.tmp" && mv "$results.tmp" "$results"
	say "wrote the limiter matrix into $results"
fi
exit 0
}
