# Shared helpers for scripts/*. Source it; it does nothing by itself.

log() { printf '==> %s\n' "$*" >&2; }

# Installs the Debian packages that are missing (apt-get update once, only if needed).
ensure_packages() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}


# Puts Swift on PATH (installed at /opt/swift on our machines).
ensure_swift() {
    if ! command -v swift >/dev/null 2>&1; then
        [ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
    fi
    command -v swift >/dev/null 2>&1 || { echo "swift not found (expected /opt/swift/usr/bin)" >&2; exit 1; }
}

# How release programs are built, here and for the image (scripts/build-release):
# - the Swift runtime and Foundation linked in: the binary starts in 7 ms instead of 12 and calls
#   the runtime directly, not through the PLT (worker CPU -0.07 us per notification);
# - whole-program LTO across our modules: inlining between the Redis, HTTP/2 and domain modules
#   (worker CPU -0.09 us per notification, in what were then the fetch and completion threads;
#   6 interleaved pairs).
RELEASE_FLAGS=(-c release --static-swift-stdlib --experimental-lto-mode=full)

build_release() {
    swift build "${RELEASE_FLAGS[@]}" "$@" 2>&1 | grep -E 'error|complete' || true
}

# A free TCP port on 127.0.0.1.
free_port() {
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Starts redis-server on a free port in $1 (a directory); prints the port.
start_redis() {
    local dir="$1" port
    port=$(free_port)
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
        --logfile "$dir/redis.log" --daemonize yes --pidfile "$dir/redis.pid" >/dev/null
    for _ in $(seq 1 100); do
        redis-cli -p "$port" PING >/dev/null 2>&1 && { echo "$port"; return 0; }
        sleep 0.05
    done
    echo "redis-server did not start; see $dir/redis.log" >&2
    return 1
}

# Stops the process in pidfile $1 and waits (up to 10 s) for it to exit: redis-server writes its
# log as it shuts down, and a directory removed meanwhile was found not empty.
stop_pidfile() {
    [ -f "$1" ] || return 0
    local pid
    pid=$(cat "$1")
    kill "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.05; done
}

# Waits until file $1 exists and is non-empty (up to 10 s).
wait_for_file() {
    for _ in $(seq 1 200); do [ -s "$1" ] && return 0; sleep 0.05; done
    echo "timed out waiting for $1" >&2
    return 1
}
