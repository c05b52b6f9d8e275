# bench/peers.sh — how every WSGI server of the benchmark is started (issue
# 29): sourced by bench/run.sh, bench/mixed.sh and bench/wsgi_table.sh after
# bench/common.sh (resolve_paths has set BENCH_VENV, BENCH_PY, M0SERVE).
# shellcheck shell=bash
#
#   peer_cmd NAME MODULE:APP PORT [THREADS]
#       sets SCMD (the command, an array), STOPSIG, and returns 0; or
#       returns 1 with why in PEER_WHY (not installed). THREADS: handler
#       threads for the servers that have them (the mixed row); without it
#       each runs as its default or its documented single-worker setup.
#
# One process (one worker) each, bound to 127.0.0.1:PORT, the application
# imported from bench/. nginx (hello only: no Python, the ceiling) answers
# `return 200 "Hello, World!"` from a config written to $TMP/nginx. m0serve: its defaults (the elastic pool), or
# m0serve-inline (--blocking-threads 0). uWSGI is Debian's, with the bench
# venv as its home (the frameworks). gunicorn: sync (gthread with
# THREADS). uvicorn: --interface wsgi (its WSGI adapter runs the app on a
# thread pool). Granian: --interface wsgi (--blocking-threads THREADS).
# bjoern, fastwsgi, socketify, pyruvate: bench/peers.py.
PEER_NAMES="nginx m0serve m0serve-inline uwsgi gunicorn uvicorn granian bjoern fastwsgi socketify pyruvate"

peer_cmd() {
    local name=$1 app=$2 port=$3 threads=${4:-} venv_bin=$BENCH_VENV/bin
    PEER_WHY=""
    STOPSIG=TERM
    case $name in
        nginx)
            command -v "${NGINX:-/usr/sbin/nginx}" >/dev/null 2>&1 || { PEER_WHY="nginx not found (apt-get install nginx-light)"; return 1; }
            [[ $app == hello:application ]] || { PEER_WHY="no Python in nginx: hello only"; return 1; }
            mkdir -p "$TMP/nginx"
            printf '%s\n' "daemon off; master_process off; worker_processes 1; pid $TMP/nginx/nginx.pid;" \
                "error_log $TMP/nginx/error.log warn; events { worker_connections 1024; }" \
                "http { access_log off; client_body_temp_path $TMP/nginx/body; proxy_temp_path $TMP/nginx/proxy;" \
                "  fastcgi_temp_path $TMP/nginx/fastcgi; uwsgi_temp_path $TMP/nginx/uwsgi; scgi_temp_path $TMP/nginx/scgi;" \
                "  server { listen 127.0.0.1:$port; default_type text/plain; location / { return 200 \"Hello, World!\"; } } }" \
                >"$TMP/nginx/nginx.conf"
            SCMD=("${NGINX:-/usr/sbin/nginx}" -p "$TMP/nginx" -e "$TMP/nginx/error.log" -c "$TMP/nginx/nginx.conf") ;;
        m0serve|m0serve-inline)
            [[ -x $M0SERVE ]] || { PEER_WHY="$M0SERVE not built (make)"; return 1; }
            SCMD=(env VIRTUAL_ENV="$BENCH_VENV" "$M0SERVE" "$app" --app-dir bench --bind "127.0.0.1:$port" --workers 1)
            if [[ $name == m0serve-inline ]]; then SCMD+=(--blocking-threads 0)
            elif [[ -n $threads ]]; then SCMD+=(--blocking-threads "$threads"); fi ;;
        uwsgi)
            command -v "${UWSGI:-uwsgi}" >/dev/null 2>&1 || { PEER_WHY="uwsgi not found (apt-get install uwsgi-core uwsgi-plugin-python3)"; return 1; }
            SCMD=("${UWSGI:-uwsgi}" --plugin python3 --http-socket "127.0.0.1:$port" --master --processes 1
                  --home "$BENCH_VENV" --pythonpath bench --module "$app" --need-app --disable-logging --die-on-term)
            [[ -z $threads ]] || SCMD+=(--threads "$threads")
            STOPSIG=INT ;;
        gunicorn)
            [[ -x $venv_bin/gunicorn ]] || { PEER_WHY="$venv_bin/gunicorn not found (make bench-venv)"; return 1; }
            SCMD=("$venv_bin/gunicorn" --workers 1 --bind "127.0.0.1:$port" --chdir bench --log-level warning)
            if [[ -n $threads ]]; then SCMD+=(--worker-class gthread --threads "$threads"); else SCMD+=(--worker-class sync); fi
            SCMD+=("$app")
            STOPSIG=INT ;;
        uvicorn)
            [[ -x $venv_bin/uvicorn ]] || { PEER_WHY="$venv_bin/uvicorn not found (make bench-venv)"; return 1; }
            SCMD=("$venv_bin/uvicorn" --interface wsgi --app-dir bench --host 127.0.0.1 --port "$port" --workers 1
                  --log-level warning --no-access-log "$app") ;;
        granian)
            [[ -x $venv_bin/granian ]] || { PEER_WHY="$venv_bin/granian not found (make bench-venv)"; return 1; }
            SCMD=("$venv_bin/granian" --interface wsgi --host 127.0.0.1 --port "$port" --workers 1
                  --working-dir bench --log-level warning --no-access-log)
            [[ -z $threads ]] || SCMD+=(--blocking-threads "$threads")
            SCMD+=("$app") ;;
        bjoern|fastwsgi|socketify|pyruvate)
            [[ -x $BENCH_PY ]] || { PEER_WHY="$BENCH_PY not found (make bench-venv)"; return 1; }
            "$BENCH_PY" -c "import $name" 2>/dev/null || { PEER_WHY="$name does not import in $BENCH_VENV (make bench-venv)"; return 1; }
            SCMD=("$BENCH_PY" bench/peers.py "$name" "$app" "$port")
            [[ -z $threads ]] || SCMD+=("$threads") ;;
        *)
            PEER_WHY="unknown server $name"; return 1 ;;
    esac
}

# peer_version NAME -> one line (the package's version, or the binary's)
peer_version() {
    case $1 in
        m0serve|m0serve-inline) m0serve_version git ;;
        uwsgi) printf 'uWSGI %s\n' "$(ver "${UWSGI:-uwsgi}" --version)" ;;
        nginx) ver "${NGINX:-/usr/sbin/nginx}" -v ;;
        *) "$BENCH_PY" -c 'import importlib.metadata as m, sys; print(sys.argv[1], m.version(sys.argv[1]))' "$1" 2>/dev/null ||
               printf '%s -\n' "$1" ;;
    esac
}
