# bench/lib/servers.sh: the servers the tools run against: the mock portal,
# a real nginx limit_req and a throwaway PostgreSQL cluster.  Each start
# sets the pid (and port) its stop and bench/run.sh's clean-up read.
# Its globals are set by bench/run.sh (checked whole with it).
# shellcheck shell=bash disable=SC2034,SC2154

# start_mock YAML DIR: a fresh mock on scenario YAML, its log, port file and
# output in DIR; sets port and mock_pid.
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

# stop_mock: true when the mock was still running (a mock gone before the
# bench stops it was killed from outside, and the run is worthless).
stop_mock() {
	local alive=0
	kill -0 "$mock_pid" 2>/dev/null || alive=1
	kill -TERM "$mock_pid" 2>/dev/null || true
	wait "$mock_pid" 2>/dev/null || true
	mock_pid=
	return "$alive"
}

# nginx_start DIR RATE BURST NODELAY STATUS: a fresh nginx in DIR/nginx,
# its limit_req at RATE r/s with BURST (NODELAY 1: nodelay) refusing with
# STATUS, on a free port: fresh limiter state, fresh access log.  BURST 0
# is no burst= at all (nginx refuses burst=0).  Sets port and ng_pid, and
# ng_conf and ng_dir for nginx_rate.
nginx_start() {
	local ng=$1/nginx r=$2 b='' nd='' st=$5 i p user=''
	[ "$3" -gt 0 ] && b=" burst=$3"
	[ "$4" = 1 ] && nd=' nodelay'
	mkdir -p "$ng/logs" "$ng/tmp" "$ng/www"
	printf '{"ok":true}\n' >"$ng/www/doc.json"
	[ "$(id -u)" -ne 0 ] || user="user $(id -un) $(id -gn);"
	for i in $(seq 1 20); do
		p=$((20000 + RANDOM % 40000))
		ng_conf=(USER="$user" BURST="$b" NODELAY="$nd" STATUS="$st"
		    PORT="$p" ROOT="$ng/www")
		ng_dir=$ng
		render "$here/scenarios/limiters/nginx.conf" "${ng_conf[@]}" \
		    RATE="$r" >"$ng/nginx.conf"
		rm -f "$ng/logs/access.log" "$ng/nginx.pid"
		"$nginx" -e "$ng/error.log" -p "$ng" -c nginx.conf \
		    -g "daemon off; pid $ng/nginx.pid; error_log $ng/error.log;" \
		    >"$ng/out" 2>&1 &
		ng_pid=$!
		while kill -0 "$ng_pid" 2>/dev/null; do
			if curl -fsS -o /dev/null "http://127.0.0.1:$p/_health" \
			    2>/dev/null; then
				port=$p
				return 0
			fi
			sleep 0.05
		done
		wait "$ng_pid" 2>/dev/null || true
		ng_pid=
		grep -q 'Address already in use' "$ng/error.log" 2>/dev/null ||
			break
	done
	cat "$ng/error.log" >&2
	die "nginx did not start in $1"
}

# nginx_rate RATE: the running nginx's limit_req to RATE r/s, by a reload
# (SIGHUP: the master reads its configuration again; the zone keeps its
# state, as a portal tightening its limit at 02:00 would).
nginx_rate() {
	[ -n "$ng_pid" ] || return 0
	render "$here/scenarios/limiters/nginx.conf" "${ng_conf[@]}" \
	    RATE="$1" >"$ng_dir/nginx.conf.new" &&
		mv "$ng_dir/nginx.conf.new" "$ng_dir/nginx.conf" &&
		kill -HUP "$ng_pid"
}

nginx_stop() {
	[ -n "$ng_pid" ] || return 0
	kill -TERM "$ng_pid" 2>/dev/null || true
	wait "$ng_pid" 2>/dev/null || true
	ng_pid=
}

# A throwaway PostgreSQL cluster on a Unix socket (as bench/pg/run.sh and
# tests/pg.bash starts one): initdb in a temporary directory, as nobody
# when run as root.  Sets pg_dir; pg_url DB gives a database's URL.  On
# failure, says why in the limiter notes and returns 1.
pg_start() {
	local initdb
	initdb=$(find /usr/lib/postgresql -path '*/bin/initdb' 2>/dev/null |
	    sort -V | tail -n 1)
	if [ -z "$initdb" ]; then
		echo "pg-3: skipped: initdb not found (the Debian package postgresql)" >>"$lim_notes"
		return 1
	fi
	pg_bin=${initdb%/initdb}
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

# pg_createdb NAME: a database in the cluster.
pg_createdb() {
	psql -q "$(pg_url postgres)" -c "CREATE DATABASE \"$1\"" >/dev/null
}

pg_stop() {
	[ -n "$pg_dir" ] || return 0
	"${pg_u[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -m immediate stop \
	    >/dev/null 2>&1 || true
	rm -rf "$pg_dir"
	pg_dir=
}
