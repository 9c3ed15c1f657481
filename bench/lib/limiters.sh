# bench/lib/limiters.sh: the limiter matrix (--limiters, or --only
# limiters; not in the default run): rfpipe, not told the rate and told it,
# -j 32, against one limiter shape per cell of bench/scenarios/limiters/cells
# (the mock's limiters, a real nginx, three pipelines sharing PostgreSQL),
# one row of $lim_tsv per tool per cell, its own table and checks.
#
# lim_cell sets the cell's fields as locals (id clock shape r b st ra
# extra, and n allowed ideal sc tmo cdir yaml); the functions it calls read
# them.
# Its globals are set by bench/run.sh (checked whole with it).
# shellcheck shell=bash disable=SC2034,SC2154

# lim_scenario: every selected cell of the matrix.
lim_scenario() {
	local id clock shape r b st ra extra q t0
	t0=$(now)
	mkdir -p "$work/lim"
	while read -r id clock shape r b st ra extra q; do
		case $id in ''|'#'*) continue ;; esac
		[ -z "$quick" ] || [ "$q" = q ] || continue
		lim_selected "$id" || continue
		lim_cell "$id" "$clock" "$shape" "$r" "$b" "$st" "$ra" "$extra"
	done <"$here/scenarios/limiters/cells"
	lim_secs=$(sub "$(now)" "$t0")
}

# lim_selected ID: true when --cells is not given or one of its patterns
# (one a line, cells_check) matches ID; never in a --dry-run.  Read a
# line at a time, not split by the shell: a pattern split was globbed
# against the files where the bench ran, and kept the spaces around it.
lim_selected() {
	local pat
	[ -z "$dry" ] || return 1
	[ -n "$cells" ] || return 0
	while read -r pat; do
		# shellcheck disable=SC2254  # the pattern is meant to glob
		case $1 in $pat) return 0 ;; esac
	done <<<"$cells"
	return 1
}

# lim_cell FIELDS...: one cell, every tool that makes sense in it.
lim_cell() {
	local id=$1 clock=$2 shape=$3 r=$4 b=$5 st=$6 ra=$7 extra=$8
	local n allowed ideal sc tmo cdir=$work/lim/$1 yaml=$work/lim/$1/scenario.yaml t
	mkdir -p "$cdir"
	n=$(lim_n)
	[ "$clock" = nginx ] || lim_yaml >"$yaml"
	lim_ideal
	if [ -z "$ideal" ]; then
		lim_skipped="$lim_skipped $id"
		return 0
	fi
	lim_clock
	printf '%s\t%s\n' "$id" "$(lim_desc)" >>"$lim_desc_tsv"
	if [ "$clock" = pg ] && [ -z "$pg_dir" ] && ! pg_start; then
		lim_skipped="$lim_skipped $id"
		return 0
	fi
	for t in $(lim_tools); do
		lim_run "$t"
	done
	[ "$clock" != pg ] || pg_stop
}

# kv KEY DEFAULT: KEY's value in the cell's extra field.
kv() {
	local p IFS=,
	for p in $extra; do
		case $p in "$1"=*) echo "${p#*=}"; return ;; esac
	done
	echo "$2"
}

# lim_n: the cell's number of documents: n= in extra, else enough for an
# ideal of 10 logical seconds or more.  A window's N is k windows' worth
# plus one: a client told the rate (limit / window_s, burst 0) and pacing
# evenly can then meet the ideal, floor((N - 1) / limit) windows.
lim_n() {
	local n
	n=$(kv n "")
	[ "$shape" != mix ] || n=$(mix_eps | awk '{ s += $2 } END { print s }')
	if [ -n "$n" ]; then
		echo "$n"
		return
	fi
	case $shape in
	fixed-*|sliding)
		awk -v r="$r" -v l="$(kv limit 1)" 'BEGIN { k = int((15 * r + l - 1) / l); m = int((59 + l - 1) / l); if (m > k) k = m; n = k * l + 1; if (n > 1500) n = 1500; printf "%d\n", n }' ;;
	*)
		awk -v r="$r" -v b="$b" 'BEGIN { n = 15 * r + (b == "-" ? 0 : b); if (n < 60) n = 60; if (n > 1500) n = 1500; printf "%d\n", n }' ;;
	esac
}

# lim_yaml: the cell's limiter as the mock's scenario, from the template of
# its shape.
lim_yaml() {
	local refusal="status: $st"
	[ "$ra" = - ] || refusal="$refusal, retry_after: $ra"
	render "$here/scenarios/limiters/$shape.yaml" RATE="$r" BURST="$b" \
	    STATUS="$st" REFUSAL="$refusal" LIMIT="$(kv limit 1)" \
	    WINDOW="$(kv window 1)" MAX="$(kv max 1)" \
	    DELAY_MS="$(kv delay_ms "$([ "$shape" = conc ] && echo 250 ||
	    echo 0)")" QUOTA="$(kv quota 1)" \
	    TO="$(kv to 1)" AT="$(kv at 5)"
}

# lim_slow: ", answers in N ms" for a cell whose delay_ms= is set, else
# nothing.
lim_slow() {
	[ "$(kv delay_ms 0)" = 0 ] || echo ", answers in $(kv delay_ms 0) ms"
}

# lim_desc: the cell in words: shape · rate · burst · status · Retry-After.
lim_desc() {
	local s
	case $shape in
	gcra) s="gcra nodelay$(lim_slow) · $r r/s · burst $b" ;;
	gcra-delay) s="gcra delaying · $r r/s · burst $b" ;;
	fixed-x) s="fixed window $(kv limit 1)/$(kv window 1) s, X-RateLimit headers · $r r/s · —" ;;
	fixed-ietf) s="fixed window $(kv limit 1)/$(kv window 1) s, IETF RateLimit headers · $r r/s · —" ;;
	sliding) s="sliding window $(kv limit 1)/$(kv window 1) s · $r r/s · —" ;;
	conc) s="concurrency cap $(kv max 1), answers in $(kv delay_ms 250) ms · $r r/s · —" ;;
	quota) s="daily quota $(kv quota 1) over gcra · $r r/s · burst $b" ;;
	drop) s="gcra dropping to $(kv to 1) r/s at $(kv at 5) s$(lim_slow) · $r r/s · burst $b" ;;
	mix) s="four portals at once: gcra 20 r/s 429 Retry-After 1 s; sliding window 9/3 s 503; concurrency cap 5, answers in 250 ms, 429; gcra 3 r/s burst 10 429 · $(mix_eps | awk '{ printf "%s%s %d", (NR > 1 ? ", " : ""), $1, $2 }') documents"
	   printf '%s' "$s"
	   return ;;
	nginx) s="nginx limit_req$( [ "$(kv nodelay 1)" = 1 ] && echo ' nodelay' || echo ', delaying')$( [ -z "$(kv to '')" ] || echo ", reloaded at $(kv at 5) s to $(kv to '') r/s") · $r r/s · burst $b" ;;
	esac
	[ "$clock" != pg ] || s="$s; 3 pipelines sharing PostgreSQL state"
	printf '%s · %s · Retry-After %s' "$s" "$st" \
	    "$( [ "$ra" = - ] && echo no || echo "yes ($ra s)")"
}

# lim_ideal: sets ideal (logical seconds) and allowed for the cell's N
# documents: the mock's own --ideal; for nginx, limit_req's: it keeps
# excess in milli-requests, so burst + 1 pass at once with nodelay, then one
# each 1/rate; without nodelay the excess waits, and the last answer comes
# (N - 1)/rate in.
lim_ideal() {
	local out
	allowed=$n
	if [ "$clock" = nginx ]; then
		ideal=$(awk -v n="$n" -v r="$r" -v b="$b" -v nd="$(kv nodelay 1)" \
		    -v to="$(kv to 0)" -v at="$(kv at 5)" '
		    BEGIN { x = (nd == 1 ? n - 1 - b : n - 1) / r
			# Reloaded at at s to to r/s (burst 0 only): what went
			# by then, one each 1/to after.
			pre = 1 + int(at * r + 1e-9)
			if (to > 0 && n > pre)
				x = at + (n - pre) / to
			printf "%.3f", x < 0 ? 0 : x }')
		return
	fi
	if [ "$shape" = mix ]; then
		mix_ideal
		return
	fi
	if ! out=$("$mock" --ideal "$n" --scenario "$yaml" --endpoint lim \
	    --allowed 2>&1); then
		echo "$id: rfp-mockportal --ideal failed: $out" >>"$lim_notes"
		ideal=
		return
	fi
	ideal=$(printf '%s\n' "$out" | awk 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { printf "%.3f", $i; exit } }')
	allowed=$(printf '%s\n' "$out" | awk '$1 == "allowed" { print $2 }')
	[ -n "$allowed" ] || allowed=$n
}

# lim_clock: sets the cell's clock scale sc and timeout tmo.  Scaled: the
# ideal in about lim_real real seconds, but never more than lim_rmax
# requests a real second: compressing time multiplies whatever fixed real
# cost a request has.  A run is stopped at 3 x the ideal plus 6 s (real
# cells: 2 x plus 8 s, room for curl's 31 s of retry waits against a
# 14.5 s ideal).
lim_clock() {
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
	[ -z "$tmo_all" ] || tmo=$tmo_all
}

# lim_tools: the tools of the cell: rfpipe, told the rate where one rate
# says the limiter (not a quota or a drop), and the peers in real time.
lim_tools() {
	case $shape:$clock in
	quota:*|drop:*) echo rfpipe ;;
	mix:*) tools_with lim lim-real ;;
	*:nginx|*:real)	# an nginx reloaded mid-run (to=) is a drop
		if [ -n "$(kv to '')" ]; then echo rfpipe; else
			tools_with lim lim-real; fi ;;
	*:pg) if [ -n "$quick" ]; then echo rfpipe; else tools_with lim; fi ;;
	*) tools_with lim ;;
	esac
}

# lim_config TOOL: rfpipe's configuration for the cell.
lim_config() {
	local told=$here/scenarios/limiters/told.yaml bt=$b
	echo "# bench/run.sh limiter matrix, cell $id, $1"
	[ "$1" = rfpipe-told ] || return 0
	case $shape in
	conc) told=$here/scenarios/limiters/told-conc.yaml ;;
	mix) told=$here/scenarios/limiters/told-mix.yaml ;;
	fixed-*|sliding) bt=0 ;;
	esac
	render "$told" RATE="$r" BURST="$bt" MAX="$(kv max 1)" | sed '/^#/d'
}

# lim_run TOOL: one tool in the cell, its row in $lim_tsv.
lim_run() {
	local t=$1 d=$cdir/$1 requests refusals saved dq=- dead=- cpu ew ms span
	local dropper=''
	fresh_dir "$d"
	case $clock in
	nginx) nginx_start "$d" "$r" "$b" "$(kv nodelay 1)" "$st" ;;
	*) RFPIPE_TIME_SCALE=$sc start_mock "$yaml" "$d" ;;
	esac
	# A drop: at s after the first request reached nginx, its new rate.
	if [ "$clock" = nginx ] && [ -n "$(kv to '')" ]; then
		( while [ ! -s "$d/nginx/logs/access.log" ]; do sleep 0.01; done
		  sleep "$(kv at 5)"
		  nginx_rate "$(kv to '')" ) &
		dropper=$!
	fi
	if [ "$shape" = mix ]; then
		gen_mix "$d"
	else
		gen_inputs "$d" "$n" /lim/ lim doc-%d
	fi
	lim_config "$t" >"$d/rfpipe.yaml"
	if [ "$clock" = pg ]; then
		lim_run_pg "$t" "$d"
	else
		run_tool "$t" "$d" "$tmo" "" "$sc"
		ew=$(exit_word "$rc" "$d/time.txt")
		cpu=$(time_cpu "$d/time.txt")
	fi
	# What the server saw.
	if [ "$clock" = nginx ]; then
		if [ -n "$dropper" ]; then
			kill "$dropper" 2>/dev/null || true
			wait "$dropper" 2>/dev/null || true
		fi
		nginx_stop
		requests=$(count_lines "$d/nginx/logs/access.log")
		refusals=$({ awk -v s="$st" '$2 == s' "$d/nginx/logs/access.log" \
		    2>/dev/null || true; } | nlines)
	else
		stop_mock || ew="$ew; mock died"
		requests=$(count_matches '"kind":"request"' "$d/mock.ndjson")
		refusals=$(count_matches '"action":"rate_limited"' "$d/mock.ndjson")
	fi
	tool_ids "$t" "$d"
	saved=$(count_lines "$d/ok.ids")
	case $t in
	rfpipe*)
		cat "$d"/run*/dead.ndjson >"$d/dead.all" 2>/dev/null || true
		dead=$(count_lines "$d/dead.all")
		dq=$(count_matches '"dead_reason":"quota"' "$d/dead.all")
		lim_rfpipe_notes "$t" "$d" "$dead"
		;;
	esac
	[ "$shape" != mix ] || [ "$clock" = nginx ] || mix_notes "$t" "$d"
	ms=$(awk -v e="$elapsed" -v s="$sc" 'BEGIN { printf "%.3f", e / s }')
	span=$(lim_span "$d")
	tsv_row "$lim_tsv" "$id" "$t" "$n" "$allowed" "$ideal" "$ms" "$sc" \
	    "$requests" "$refusals" "$saved" "$dead" "$dq" "$cpu" "$ew" "$tmo" \
	    "$clock" "$r" "$span"
	say "limiters $id $(tool_name "$t" lim): saved $saved/$n (allowed $allowed), refusals $refusals/$requests, makespan ${ms}s (ideal ${ideal}s, clock x$sc), exit $ew"
}

# lim_span DIR: what the server saw, in logical seconds: from the first
# request's arrival to the last success's answer (the mock's delay_ms
# added: it decides, logs, then waits), the span the ideal measures; the
# makespan adds the client's own start and end, which a scaled clock
# magnifies by 1 / sc (0.1 s real is 1.5 logical s at x0.0667).
lim_span() {
	if [ "$clock" = nginx ]; then
		awk -v s="$sc" 'index($3, "/lim/") == 1 {
			if (a == "" || $1 < a) a = $1
			if ($2 ~ /^2/ && $1 > b) b = $1
		} END { printf "%.3f", a == "" ? 0 : (b - a) / s }' \
		    "$1/nginx/logs/access.log"
	else
		jq -rs --argjson s "$sc" --argjson dl "$(lim_delays)" '
		    [.[] | select(.kind == "request")] as $r |
		    if ($r | length) == 0 then 0 else
		    ($r | map(.t) | min) as $a |
		    ([$r[] | select(.status >= 200 and .status < 300) |
		    (.t_answer - $a) / $s + ($dl[.endpoint] // 0) / 1000] |
		    max // 0) * 1000 | round / 1000 end' \
		    "$1/mock.ndjson"
	fi
}

# lim_run_pg TOOL DIR: three pipelines, each a third of the documents,
# sharing their state in one database; sets elapsed, ew and cpu (summed).
lim_run_pg() {
	local t=$1 d=$2 db=${1//-/_} h p pids='' rcs='' s t0
	pg_createdb "$db" >/dev/null 2>&1 || true
	t0=$(now)
	for h in 1 2 3; do
		awk -v h="$h" 'NR % 3 == h % 3' "$d/manifest.ndjson" >"$d/m$h.ndjson"
		(cd "$d" && /usr/bin/time -v -o "$d/time$h.txt" \
		    timeout -k 5 "$tmo" env RFPIPE_TIME_SCALE="$sc" \
		    "$rfpipe" -j "$jobs" --seed "$h" --progress=none \
		    --config "$d/rfpipe.yaml" --run-dir "$d/run$h" \
		    --state "$(pg_url "$db")" "$d/m$h.ndjson" \
		    >"$d/stdout$h" 2>"$d/stderr$h") &
		pids="$pids $!"
	done
	for p in $pids; do
		s=0
		wait "$p" || s=$?
		rcs="$rcs $s"
	done
	elapsed=$(sub "$(now)" "$t0")
	ew=
	h=0
	for s in $rcs; do
		h=$((h + 1))
		ew="$ew${ew:+ }$(exit_word "$s" "$d/time$h.txt")"
	done
	cpu=$(for h in 1 2 3; do time_cpu "$d/time$h.txt"; echo; done |
	    awk '{ s += $1 } END { printf "%.2f", s }')
}

# lim_rfpipe_notes TOOL DIR DEAD: rfpipe's dead letters by reason, where its
# adaptive pace ended and how often its breaker opened.
lim_rfpipe_notes() {
	local t=$1 d=$2 name p
	name=$(tool_name "$t" lim)
	[ "$3" -eq 0 ] || echo "$id, $name: dead $3 ($(jq -r .dead_reason "$d/dead.all" | sort | uniq -c | awk '{ printf "%s%s %d", (NR > 1 ? ", " : ""), $2, $1 }'))" >>"$lim_notes"
	if [ "$t" = rfpipe ]; then
		for p in "$d"/run*/state/rate/*.json; do
			[ -f "$p" ] || continue
			echo "$id, $name: the adaptive pace $(jq -r --argjson s "$sc" 'if .paced == 1 then "ended at \(.rate * $s * 100 | round / 100) req/s (logical), \(.cuts) cuts since it last started" else "ended unpaced (never pushed back, or let go as noise)" end' "$p")" >>"$lim_notes"
		done
	fi
	for p in "$d"/run*/state/breaker/*.json; do
		[ -f "$p" ] || continue
		[ "$(jq -r '.openings // 0' "$p")" -gt 0 ] || continue
		echo "$id, $name: the circuit breaker opened $(jq -r .openings "$p") times (cooldown $(jq -r .cooldown "$p") s logical)" >>"$lim_notes"
	done
}

# lim_table: the matrix as one Markdown table.
lim_table() {
	awk -F'\t' '
	BEGIN {
		print "| cell (shape · rate · burst · status · Retry-After) | clock | tool | saved/N | refusals ÷ requests | portal span ÷ ideal (logical s) | makespan ÷ ideal (logical s) | CPU s | exit |"
		print "|---|---|---|--:|--:|--:|--:|--:|---|"
	}
	function name(t) { return (t in nm) ? nm[t] : t }
	FILENAME == ARGV[1] { nm[$1] = $2; next }
	FILENAME == ARGV[2] { desc[$1] = $2; next }
	FNR == 1 { next }
	{
		id = $1; t = $2; n = $3; al = $4; ideal = $5; ms = $6; sc = $7
		rq = $8; rf = $9; sv = $10; dq = $12; cpu = $13; ex = $14
		clk = $16; rate = $17; sp = $18
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
		pk = (ideal + 0 > 0) ? sprintf("%.2f (%.1f s)", sp / ideal, sp) : sprintf("— (%.1f s)", sp)
		printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", cell, clock, t3, saved, ref, pk, mk, cpu, ex
	}' <(tool_names lim) "$lim_desc_tsv" "$lim_tsv"
}

# lim_checks: the targets, for every rfpipe row: not told, every document
# the limiter allows saved (a quota's rest dead with reason quota),
# refusals <= 5 % of requests, portal span <= 1.2 x ideal; told, no
# refusal and <= 1.05 x ideal.  The span (lim_span) is judged, as it is
# what the ideal measures; the makespan is shown beside it.  A span counts
# only with every allowed document saved.  A cell of several portals
# (mix) is judged portal by portal, each on its own ideal
# ($lim_ep_tsv): each portal's operator sees only their own refusals.
lim_checks() {
	awk -F'\t' '
	function pf(c) { return c ? "PASS" : "FAIL" }
	FNR == 1 { next }
	FILENAME == ARGV[1] {
		k = $1 SUBSEP $2; told = ($2 == "rfpipe-told")
		lim = told ? 1.05 : 1.2
		r = ($4 + 0 > 0) ? $9 / $4 : 1e9
		okr = told ? ($6 + 0 == 0) : ($6 <= 0.05 * $5)
		eps[k]++
		if (!okr) epref[k]++
		if (r > lim) epspan[k]++
		epline[k] = epline[k] sprintf("%s%s %d/%d refused (%.1f %%), %.3f x %s", \
		    eps[k] > 1 ? "; " : "", $3, $6, $5, $5 > 0 ? 100 * $6 / $5 : 0, \
		    r, pf(okr && r <= lim))
		next
	}
	$2 == "rfpipe" || $2 == "rfpipe-told" {
		id = $1; t = $2; n = $3; al = $4; ideal = $5; ms = $6
		rq = $8; rf = $9; sv = $10; dq = $12; ex = $14; tmo = $15
		sp = $18
		told = (t == "rfpipe-told")
		ratio = (ideal + 0 > 0) ? sp / ideal : (sp + 0 > 0 ? 1e9 : 1)
		wall = (ideal + 0 > 0) ? ms / ideal : 0
		pct = (rq + 0 > 0) ? 100 * rf / rq : 0
		sa = (sv + 0 >= al + 0)
		qd = (al + 0 >= n + 0) || (dq + 0 == n - al)
		all = sa && qd
		lim = told ? 1.05 : 1.2
		c2 = told ? (rf + 0 == 0) : (rf <= 0.05 * rq)
		c3 = all && ratio <= lim
		k = id SUBSEP t
		if (k in eps) {
			c2 = !epref[k]
			c3 = all && !epspan[k]
		}
		ok = all && c2 && c3
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
		s = s sprintf(" · portal span %s x ideal <= %s %s (makespan %.3f x)", rs, lim, pf(c3), wall)
		if (k in eps)
			s = s " · by portal, each on its own ideal: " epline[k]
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
	}' "$lim_ep_tsv" "$lim_tsv"
}

# mix_eps: the mix cell's endpoints and their documents, "EP N" a line,
# from eps= in its extra field (EP:N joined by /).
mix_eps() {
	kv eps "" | tr / '\n' | awk -F: 'NF == 2 && $2 > 0 { print $1, $2 }'
}

# lim_delays: the mock's answer delay by endpoint, in ms, as a JSON
# object: delay_ms= of the cell (its one endpoint, lim), or the mix's
# delays= (EP:MS joined by /).
lim_delays() {
	if [ "$shape" = mix ]; then
		kv delays "" | tr / '\n' | jq -Rn '[inputs | split(":") |
		    select(length == 2) | {(.[0]): (.[1] | tonumber)}] | add // {}'
	else
		jq -n --argjson d "$(kv delay_ms 0)" '{lim: $d}'
	fi
}

# mix_ideal: the mix cell's ideal and allowed: its endpoints' limiters are
# apart, and -j 32 holds what each needs at once (the cap's 5 and one
# each for the others), so the ideal is the slowest endpoint's own.
mix_ideal() {
	local ep k out i
	ideal=0 allowed=0
	while read -r ep k; do
		if ! out=$("$mock" --ideal "$k" --scenario "$yaml" \
		    --endpoint "$ep" --allowed 2>&1); then
			echo "$id: rfp-mockportal --ideal failed for $ep: $out" >>"$lim_notes"
			ideal=
			return
		fi
		i=$(printf '%s\n' "$out" | awk 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { print $i; exit } }')
		ideal=$(awk -v a="$ideal" -v b="$i" 'BEGIN { printf "%.3f", (b > a ? b : a) }')
		k=$(printf '%s\n' "$out" | awk -v k="$k" '$1 == "allowed" { k = $2 } END { print k }')
		allowed=$((allowed + k))
	done < <(mix_eps)
}

# gen_mix DIR: the mix cell's inputs, as gen_inputs writes them: each
# endpoint's documents (EP-I at /EP/doc-I; as many as a cell of its
# limiter alone has), interleaved in proportion, so that every portal has
# work from the first line to the last.
gen_mix() {
	local d=$1
	mix_eps | awk -v port="$port" -v d="$d" '
	{ ep[NR] = $1; n[NR] = $2; tot += $2; m = NR }
	END {
		for (k = 1; k <= tot; k++) {
			b = 0
			for (e = 1; e <= m; e++)
				if (c[e] < n[e] && (b == 0 ||
				    (c[e] + 0.5) / n[e] < (c[b] + 0.5) / n[b]))
					b = e
			c[b]++
			id = ep[b] "-" c[b]
			url = "http://127.0.0.1:" port "/" ep[b] "/doc-" c[b]
			printf "{\"id\":\"%s\",\"url\":\"%s\",\"endpoint\":\"%s\"}\n", \
			    id, url, ep[b] > (d "/manifest.ndjson")
			print id, url > (d "/list.txt")
			printf "url = \"%s\"\noutput = \"out/%s\"\n", url, id > (d "/curl.cfg")
			print id > (d "/all.ids")
		}
	}'
	sort -o "$d/all.ids" "$d/all.ids"
}

# mix_notes TOOL DIR: the mix cell endpoint by endpoint, as the mock saw
# it: a row of $lim_ep_tsv (requests, refusals, its span and its own
# ideal, for lim_checks) and a line of the notes.
mix_notes() {
	local t=$1 d=$2 ep k i out row
	while read -r ep k; do
		out=$("$mock" --ideal "$k" --scenario "$yaml" --endpoint "$ep" 2>/dev/null) || continue
		i=$(printf '%s\n' "$out" | awk 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { print $i; exit } }')
		row=$(jq -rs --arg ep "$ep" --argjson s "$sc" \
		    --argjson dl "$(lim_delays)" '
		    [.[] | select(.kind == "request")] as $all |
		    ($all | map(.t) | min) as $a |
		    [$all[] | select(.endpoint == $ep)] as $r |
		    [$r[] | select(.status >= 200 and .status < 300)] as $ok |
		    [($r | length), ([$r[] | select(.action == "rate_limited")] |
		    length), ($ok | length), ([$r[].inflight] | max // 0),
		    (([$ok[] | (.t_answer - $a) / $s + ($dl[$ep] // 0) / 1000] |
		    max // 0) * 1000 | round / 1000)] | @tsv' "$d/mock.ndjson")
		printf '%s\t%s\t%s\t%s\t%s\n' "$id" "$t" "$ep" "$i" "$row" >>"$lim_ep_tsv"
		printf '%s\n' "$row" | awk -v id="$id" -v name="$(tool_name "$t" lim)" \
		    -v ep="$ep" -v i="$i" '{
			printf "%s, %s, endpoint %s: %d of %d requests through, %d refused (%.1f %%), at most %d in flight; span %.2f s = %.3f x its own ideal %s s\n", id, name, ep, $3, $1, $2, ($1 > 0 ? 100 * $2 / $1 : 0), $4, $5, (i > 0 ? $5 / i : 0), i
		}' >>"$lim_notes"
	done < <(mix_eps)
}
