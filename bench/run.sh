#!/usr/bin/env bash
# bench/run.sh: rfpipe side by side with its peers, in one run, against
# rfp-mockportal, and one Markdown table on stdout (and in bench/RESULTS.md
# after a full run).  `make bench` runs it.
#
# Scenarios (a fresh mock, new port and new log, per tool per scenario;
# the mock's scenarios are bench/scenarios/NAME.yaml):
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
#                takes about 16 minutes (--quick: about 3): the limiter
#                matrix of bench/scenarios/limiters/cells.  rfpipe, not told
#                the rate and told it in rfpipe.yaml, -j 32, against 34
#                cells: 29 of the mock's limiters (gcra nodelay and delaying,
#                fixed and sliding windows, a concurrency cap, a daily
#                quota, a limit that drops mid-run; 429 or 503, with or
#                without Retry-After; 1 to 100 r/s, bursts 0 to 60) on a
#                scaled clock (RFPIPE_TIME_SCALE); four portals at once,
#                each behind its own limiter, judged portal by portal, with
#                the naive and curl peers; three of a real nginx
#                limit_req (nodelay, delaying, reloaded to a lower rate
#                mid-run) started here, in real time, with the naive and
#                curl peers
#                beside rfpipe; and three pipelines sharing their state in a
#                throwaway PostgreSQL.  Its own table and checks, and its
#                own section at the end of bench/RESULTS.md, which the
#                default run keeps.
# Peers (bench/tools.tsv, the one list of tools and their names): naive
# xargs -P 32 + curl retrying at once, curl --parallel --retry 5 (and
# --retry-all-errors), GNU parallel --retries 5 + curl -f, and the
# mission's asyncio sketch (bench/peer_asyncio.py).  Concurrency 32 for all.
# Stampede also runs a reference, not a peer: one serial curl --rate 20/s,
# told the limit in advance.
#
# Target checks print PASS/FAIL under the table; a FAIL does not change the
# exit status (0 unless the bench itself could not run).
#
# Layout: this file is the runner (usage, options, main); the rest is read
# from files:
#   bench/lib/*.sh        the parts, functions only: common, servers (mock,
#                         nginx, PostgreSQL), fetch, stage, limiters, scale,
#                         report
#   bench/tools.tsv       every tool once: where it runs, its names
#   bench/scenarios/      what the tools run against: the mock's scenarios,
#                         rfpipe's configurations, and in limiters/ the
#                         matrix's cells with a template per limiter shape
#   bench/peer_*, naive_fetch.sh   the peers the bench writes itself
#   bench/report/         the fixed text of bench/RESULTS.md
# The parts are sourced whole before anything runs, and this file ends in
# one line that calls main and exits, so an edit to any file during a
# 10-minute run cannot shift what bash reads next.
# shellcheck source-path=SCRIPTDIR
set -eu

usage="usage: bench/run.sh [--quick] [--only PATTERN[,PATTERN...]] [--keep]
                    [--work DIR] [--results FILE] [--no-build] [--timeout S]
       bench/run.sh --limiters [--quick] [--cells PATTERN[,PATTERN...]] [...]
       bench/run.sh --scale [--quick] [--cells PATTERN[,PATTERN...]] [...]
       bench/run.sh ... --dry-run

  --quick        smaller N and fewer scenarios: about 2 minutes (with
                 --limiters: 10 of the 35 cells, about 4 minutes)
  --only P       run the scenarios matching the shell pattern(s) P:
                 stampede, stampede-ra, flaky, throughput, stage ('stampede*'),
                 limiters (run only when named)
  --limiters     the limiter matrix alone (as --only limiters): about 13
                 minutes; a full one writes its section of bench/RESULTS.md
  --cells P      with --limiters: only the cells whose id matches P
                 (gcra-*, nginx-*, pg-3, ...; see bench/scenarios/limiters/cells);
                 with --scale: only the runs whose name matches P
                 (pg-*, queue-*, stale-*, ...; see bench/lib/scale.sh)
  --scale        documents/s of 1, 2 and 3 pipelines against an unlimited
                 nginx: files state, PostgreSQL state, and the PostgreSQL
                 queue (--queue; for 3, also with each pipeline's state
                 apart); 10,000 documents (--quick: 3,000); then 1 and 3
                 against nginx limited to 500 r/s (burst 1), 2,000 documents
                 (--quick: 1,000), with the 429s counted; then one pipeline
                 with --state and 1 and 3 through the queue against the
                 mock answering every request in 100 ms, the endpoint's
                 ceiling 3 x -j, 6,000 documents (--quick: 3,000); then the
                 stale-pace sequences, one pipeline run at once after
                 another on the same state, the limit changed between them
                 (20 r/s, then unlimited; unlimited, then 20 r/s), files
                 and PostgreSQL state; one table on stdout, nothing
                 written to bench/RESULTS.md
  --keep         keep the work directory (logs, outputs) and say where
  --work DIR     work in DIR (default: a new directory under \${TMPDIR:-/tmp});
                 removed at the end unless --keep, or DIR was there before
  --results FILE write the report there (default: bench/RESULTS.md after a
                 full run, none after --quick, --only or --cells; a full
                 --limiters run writes only its own section of the file)
  --no-build     do not run make first
  --dry-run      check the tools, build and make the work directory (with
                 --scale, also start and stop PostgreSQL and nginx), then
                 stop: nothing is measured (a bench machine's set-up,
                 checked in seconds); it names the cells it would measure
  --timeout S    bound every tool run to S seconds (default: per scenario,
                 per limiter cell)
Environment: BENCH_KEEP=1 is --keep, BENCH_WORK=DIR is --work DIR (for make bench).
"

prog=bench
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=lib/common.sh
. "$here/lib/common.sh"
# shellcheck source=lib/servers.sh
. "$here/lib/servers.sh"
# shellcheck source=lib/fetch.sh
. "$here/lib/fetch.sh"
# shellcheck source=lib/stage.sh
. "$here/lib/stage.sh"
# shellcheck source=lib/limiters.sh
. "$here/lib/limiters.sh"
# shellcheck source=lib/scale.sh
. "$here/lib/scale.sh"
# shellcheck source=lib/report.sh
. "$here/lib/report.sh"

# The options: quick only keep work results results_set build tmo_all
# cells scale.
options() {
	quick='' only='' keep=${BENCH_KEEP:-} work=${BENCH_WORK:-} results=''
	results_set='' build=1 tmo_all='' cells='' cells_set='' scale='' dry=''
	while [ $# -gt 0 ]; do
		case $1 in
		-h|--help) printf '%s' "$usage"; exit 0 ;;
		--quick) quick=1 ;;
		--only|--work|--results|--cells|--timeout)
			[ $# -ge 2 ] || { printf '%s' "$usage" >&2; exit 2; }
			option "$1" "$2"
			shift ;;
		--only=*|--work=*|--results=*|--cells=*|--timeout=*)
			option "${1%%=*}" "${1#*=}" ;;
		--keep) keep=1 ;;
		--no-build) build='' ;;
		--dry-run) dry=1 ;;
		--limiters) only=${only:+$only,}limiters ;;
		--scale) scale=1; only=scale ;;
		*) printf '%s: unknown argument "%s"\n%s' "$prog" "$1" "$usage" >&2
		   exit 2 ;;
		esac
		shift
	done
	# A full run writes bench/RESULTS.md: the default scenarios its main
	# part, the limiter matrix (--limiters alone, all cells) its own section.
	if [ -z "$results_set" ] && [ -z "$quick" ] && [ -z "$cells" ] &&
	    [ -z "$dry" ] &&
	    [ -z "$scale" ] && { [ -z "$only" ] || [ "$only" = limiters ]; }; then
		results=$here/RESULTS.md
	fi
}

# option NAME VALUE: an option that takes a value.
option() {
	case $1 in
	--only) only=${only:+$only,}$2 ;;
	--work) work=$2 ;;
	--results) results=$2; results_set=1 ;;
	--cells) cells=$2; cells_set=1 ;;
	--timeout) tmo_all=$2 ;;
	esac
}

# cell_ids: the cells this run has, one a line, in ids, and what they are
# in what.
cell_ids() {
	what=limiter
	if [ -n "$scale" ]; then
		ids=$(scale_ids) what=--scale
	else
		ids=$(awk -v q="$quick" '$1 !~ /^#/ && NF &&
		    (q == "" || $9 == "q") { print $1 }' \
		    "$here/scenarios/limiters/cells")
		[ -z "$quick" ] || what="--quick limiter"
	fi
}

# dry_cells: the cells a run without --dry-run would measure, on a line.
dry_cells() {
	local ids what id dry=''
	cell_ids
	while read -r id; do
		lim_selected "$id" && printf '%s ' "$id"
	done <<<"$ids"
}

# cells_check: every --cells pattern matches a cell this run has (a
# limiter cell, of --quick's when --quick; a --scale run): a typo ran
# nothing and said nothing.
cells_check() {
	local pat ids what
	[ -n "$cells_set" ] || return 0
	# One pattern a line, the spaces around each trimmed: what
	# lim_selected matches against.
	if awk -F, '{ for (i = 1; i <= NF; i++) if ($i !~ /[^[:space:]]/)
	    exit 0; exit NF == 0 ? 0 : 1 }' <<<"$cells"; then
		printf '%s: --cells: an empty pattern in "%s"\n' "$prog" \
		    "$cells" >&2
		exit 2
	fi
	cells=$(tr , '\n' <<<"$cells" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
	cell_ids
	while read -r pat; do
		[ -n "$pat" ] || continue
		# shellcheck disable=SC2254  # the pattern is meant to glob
		printf '%s\n' "$ids" | while read -r id; do
			case $id in $pat) exit 1 ;; esac
		done && {
			printf '%s: --cells: "%s" matches no %s cell: %s\n' \
			    "$prog" "$pat" "$what" "$(tr "\n" " " <<<"$ids")" >&2
			exit 2
		}
	done <<<"$cells"
	return 0
}

# sizes: N, the timeouts and the scenarios of a quick or a full run.
sizes() {
	if [ -n "$quick" ]; then
		# Fewer scenarios and no --retry-all-errors curl (the same as
		# plain curl in a stampede, and 31 s of backoff on each 404 in
		# flaky).
		scenarios="stampede flaky throughput stage limiters"
		stamp_n=100 flaky_n=200 thru_n=500 thru_k=1
		stage_ns="10000 100000"
		t_stamp=60 t_flaky=45 t_thru=60 t_stage=300
		lim_real=3 lim_rmax=100
	else
		scenarios="stampede stampede-ra flaky throughput stage limiters"
		stamp_n=300 flaky_n=1000 thru_n=10000 thru_k=5
		stage_ns="100000 1000000"
		t_stamp=60 t_flaky=90 t_thru=200 t_stage=600
		lim_real=4 lim_rmax=50
	fi
	if [ -n "$tmo_all" ]; then
		t_stamp=$tmo_all t_flaky=$tmo_all t_thru=$tmo_all t_stage=$tmo_all
	fi
	jobs=32
	rate=$(sed -n 's/.*per_s: *\([0-9][0-9]*\).*/\1/p' \
	    "$here/scenarios/stampede.yaml")
}

# need_tools: the peers and servers, installed by scripts/deps.sh (the one
# list); sets py and nginx.
need_tools() {
	local t p
	"$root/scripts/deps.sh" bench || die "scripts/deps.sh bench failed"
	for t in curl jq parallel timeout awk; do
		command -v "$t" >/dev/null 2>&1 ||
			die "$t not found after scripts/deps.sh bench"
	done
	[ -x /usr/bin/time ] || die "/usr/bin/time not found after scripts/deps.sh bench"
	py=''
	for p in /usr/bin/python3 python3; do
		if "$p" -c 'import aiohttp' >/dev/null 2>&1; then
			py=$p
			break
		fi
	done
	[ -n "$py" ] || [ -n "$scale" ] ||
		die "python3 with aiohttp not found after scripts/deps.sh bench"
	nginx=''
	if selected limiters || [ -n "$scale" ]; then
		nginx=$(command -v nginx || command -v /usr/sbin/nginx) ||
			die "nginx not found after scripts/deps.sh bench"
		command -v psql >/dev/null 2>&1 ||
			die "psql not found after scripts/deps.sh bench"
	fi
}

# build: make, and the programs the bench runs; sets rev0, bin, rfpipe.
build() {
	local b
	# Which rfpipe this measures: others may commit while the bench runs.
	rev0=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
	[ -z "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ] ||
		rev0="$rev0 plus uncommitted changes"
	if [ -n "$build" ]; then
		make -s -C "$root" all >&2 || die "make all failed in $root"
	fi
	bin=$root/bin
	rfpipe=$root/pipeline.sh
	for b in "$bin/rfp-mockportal" "$bin/rfp-fetch" "$bin/rfp-classify" \
	    "$bin/rfp-backoff" "$bin/rfp-sink"; do
		[ -x "$b" ] || die "$b missing: run make in $root"
	done
}

# workdir: the work directory and the files every part writes into.
workdir() {
	# A directory given that was there before is not the bench's to remove.
	work_made=1
	if [ -z "$work" ]; then
		work=$(mktemp -d "${TMPDIR:-/tmp}/rfpipe-bench.XXXXXX") ||
			die "mktemp failed"
	else
		[ ! -e "$work" ] || work_made=''
		mkdir -p "$work" || die "mkdir $work failed"
		work=$(cd "$work" && pwd)
	fi
	# The mock runs as a copy under another name, so a concurrent clean-up
	# by name (pkill rfp-mockportal, on a shared machine) cannot stop it
	# mid-run.
	mock=$work/bench-portal
	cp "$bin/rfp-mockportal" "$mock" || die "cp $bin/rfp-mockportal $mock failed"
	tsv=$work/results.tsv checks=$work/checks.txt notes=$work/notes.txt
	lim_tsv=$work/limiters.tsv lim_desc_tsv=$work/limiters-cells.tsv
	lim_notes=$work/limiters-notes.txt lim_ep_tsv=$work/limiters-eps.tsv
	printf 'scen\ttool\tn\tideal\tmakespan\trequests\tr429\tok\tfailed\tlost\tcpu\trss_kb\texit\tref\n' >"$tsv"
	printf 'cell\ttool\tn\tallowed\tideal\tmakespan\tscale\trequests\trefusals\tsaved\tdead\tdead_quota\tcpu\texit\ttimeout\tclock\trate\tspan\n' >"$lim_tsv"
	: >"$checks"
	: >"$notes"
	: >"$lim_desc_tsv"
	: >"$lim_notes"
	printf 'cell\ttool\tendpoint\tideal\trequests\trefusals\tok\tmaxin\tspan\n' >"$lim_ep_tsv"
}

# cleanup: stop what still runs, remove the work directory unless kept
# (--keep, or a --work directory that was there before).
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
	stop_runs
	[ -z "$mock_pid" ] || stop_mock || true
	nginx_stop
	pg_stop
	if [ -n "$keep" ] || [ -z "${work_made:-}" ]; then
		[ -z "$work" ] || say "work directory kept: $work"
	else
		rm -rf "$work"
	fi
}

# checks_and_notes: the target checks and measured notes of the default
# scenarios.
checks_and_notes() {
	local s
	for s in stampede stampede-ra; do
		stampede_checks "$s"
	done
	flaky_checks
	throughput_checks
	stage_checks
	fetch_notes >>"$notes"
}

main() {
	local scen
	# Real seconds for everyone: no scaled clock in the bench.
	unset RFPIPE_TIME_SCALE
	cmdline="bench/run.sh${*:+ $*}"
	[ -z "${MAKELEVEL:-}" ] || cmdline="make bench  (runs $cmdline)"
	options "$@"
	sizes
	cells_check
	need_tools
	build
	mock_pid='' ng_pid='' pg_dir='' old_n=0 lim_skipped='' lim_secs=0
	workdir
	trap cleanup EXIT
	traps
	bench_t0=$(now)
	load0=$(cut -d' ' -f1-3 /proc/loadavg)
	case $dry,$scale,$only in
	1,1,*|1,,*limiters*) say "dry run: the cells it would measure: $(dry_cells)" ;;
	esac
	if [ -n "$scale" ]; then
		scale_scenario
		return 0
	fi
	[ -z "$dry" ] || { say "dry run: nothing measured"; return 0; }
	for scen in $scenarios; do
		selected "$scen" || continue
		case $scen in
		stage) stage_scenario ;;
		limiters) lim_scenario ;;
		*) fetch_scenario "$scen" ;;
		esac
	done
	bench_secs=$(sub "$(now)" "$bench_t0")
	checks_and_notes
	report
}

main "$@"; exit
