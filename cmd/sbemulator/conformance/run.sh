#!/usr/bin/env bash
# Runs cmd/sbemulator against three independent AMQP stacks and exits non-zero when any
# step of any of them fails:
#   conformance.mjs  the JavaScript SDK (@azure/service-bus, pinned with package-lock.json);
#                    npm installs it into a temporary directory under a timeout, and the
#                    modules are kept in a cache keyed by the lock file's hash
#   conformance.py   the Python SDK as Debian ships it (python3-azure: azure-servicebus
#                    7.8.2 on uamqp), over AMQP with TLS, as an SDK without emulator support
#   probe.py         a generic AMQP 1.0 client, Apache Qpid Proton (python3-qpid-proton)
#   curl             the runtime REST API (HTTP data plane) on the plain-HTTP port: every
#                    call and status a shell script sees
# Each one skips with a message when what it needs is not installed, except under CI=true,
# where that fails. The Python ones run with Debian's python3 (SBKIT_PYTHON overrides it).
# With SERVICEBUS_CONNECTION_STRING set, the JavaScript steps test that running emulator
# instead of building one (conformance.mjs says which other variables it reads then;
# ../docker/run.sh uses this for the container image); the Python ones, which start their
# own emulator on the AMQP-over-TLS port, are skipped then, except conformance.py when
# SBEMULATOR_COMMAND says how to start one (conformance.py describes it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${SBKIT_PYTHON:-/usr/bin/python3}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
emulator=()
if [ -z "${SERVICEBUS_CONNECTION_STRING:-}" ]; then
  (cd "$here" && go build -o "$work/sbemulator" ..)
  emulator=("$work/sbemulator")
fi
failed=()

# missing WHAT: skips with a message, or fails under CI=true.
missing() {
  if [ "${CI:-}" = true ]; then echo "conformance: $1 is required under CI=true"; failed+=("$1"); return; fi
  echo "conformance: skipped ($1 not installed)"
}

javascript() {
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then missing "node and npm"; return; fi
  cp "$here/package.json" "$here/package-lock.json" "$here/conformance.mjs" "$here/admin.mjs" "$here/Config.json" "$work/"
  local cache
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/sbkit/conformance-$(sha256sum "$here/package-lock.json" | cut -c1-16)"
  if [ -d "$cache/node_modules" ]; then
    ln -s "$cache/node_modules" "$work/node_modules"
  else
    for attempt in 1 2; do
      if (cd "$work" && timeout 180 npm ci --no-audit --no-fund --prefer-offline --loglevel=error); then
        break
      fi
      if [ "$attempt" = 2 ]; then echo "conformance: npm ci failed twice"; failed+=(npm); return; fi
      rm -rf "$work/node_modules"
    done
    mkdir -p "$cache"
    local tmp="$cache/node_modules.$$"
    cp -r "$work/node_modules" "$tmp" && mv -T "$tmp" "$cache/node_modules" 2>/dev/null || rm -rf "$tmp"
  fi
  echo "== JavaScript: @azure/service-bus"
  timeout 420 node "$work/conformance.mjs" "${emulator[@]}" || failed+=(conformance.mjs)
}

# python SCRIPT MODULES...: runs SCRIPT when Debian's python3 has every module.
python() {
  local script=$1; shift
  if [ ${#emulator[@]} -eq 0 ] && { [ "$script" != conformance.py ] || [ -z "${SBEMULATOR_COMMAND:-}" ]; }; then
    echo "conformance: $script skipped (it starts its own emulator)"; return
  fi
  if ! command -v "$py" >/dev/null || ! "$py" -c "import $(IFS=,; echo "$*")" 2>/dev/null; then
    missing "$py with $* (apt-get install python3-azure python3-uamqp python3-qpid-proton)"
    return
  fi
  echo "== Python: $script"
  PYTHONDONTWRITEBYTECODE=1 timeout 300 "$py" "$here/$script" "${emulator[@]}" || failed+=("$script")
}

# curl_data: the HTTP data plane with curl against an emulator of its own (one queue).
curl_data() {
  if [ ${#emulator[@]} -eq 0 ]; then echo "conformance: curl skipped (it starts its own emulator)"; return; fi
  if ! command -v curl >/dev/null; then missing curl; return; fi
  echo "== curl: the HTTP data plane"
  "${emulator[@]}" -addr 127.0.0.1:0 -queue jobs >/dev/null 2>"$work/curl.log" &
  local pid=$! base="" fails=0 i
  for i in $(seq 100); do
    base=$(sed -n 's/.*health check on \(http:[^ ]*\) .*/\1/p' "$work/curl.log")
    [ -n "$base" ] && break
    sleep 0.1
  done
  # check WANT METHOD URL [curl args...]: one call, its status compared with WANT.
  check() {
    local want=$1 method=$2 url=$3; shift 3
    local got
    got=$(curl -s -o "$work/body" -D "$work/headers" -w '%{http_code}' -X "$method" "$@" "$url")
    if [ "$got" = "$want" ]; then echo "ok   $method ${url#"$base"} $got"; else echo "FAIL $method ${url#"$base"}: $got, want $want"; fails=$((fails + 1)); fi
  }
  if [ -z "$base" ]; then echo "FAIL the emulator did not start: $(cat "$work/curl.log")"; fails=1; else
    check 201 POST "$base/jobs/messages" -H 'BrokerProperties: {"MessageId":"c-1","Label":"curl"}' -H 'Priority: "High"' --data-binary 'from curl'
    check 201 POST "$base/jobs/messages/head?timeout=5"
    local loc
    loc=$(tr -d '\r' <"$work/headers" | sed -n 's/^Location: //Ip')
    grep -qi '^BrokerProperties: .*"MessageId":"c-1"' "$work/headers" || { echo "FAIL BrokerProperties: $(cat "$work/headers")"; fails=$((fails + 1)); }
    grep -qi '^Priority: "High"' "$work/headers" || { echo "FAIL the custom property header: $(cat "$work/headers")"; fails=$((fails + 1)); }
    check 200 PUT "$loc"     # Unlock Message
    check 404 PUT "$loc"     # the lock is gone
    check 201 POST "$base/jobs/messages/head?timeout=5"
    grep -qi '"DeliveryCount":2' "$work/headers" || { echo "FAIL the delivery count after an unlock: $(cat "$work/headers")"; fails=$((fails + 1)); }
    loc=$(tr -d '\r' <"$work/headers" | sed -n 's/^Location: //Ip')
    check 200 POST "$loc"    # Renew-Lock
    check 200 DELETE "$loc"  # Delete Message (complete)
    check 404 DELETE "$loc"
    check 204 POST "$base/jobs/messages/head?timeout=0"
    check 201 POST "$base/jobs/messages" -H 'Content-Type: application/vnd.microsoft.servicebus.json' --data-binary '[{"Body":"one"},{"Body":"two","UserProperties":{"n":2}}]'
    check 200 DELETE "$base/jobs/messages/head?timeout=5"   # Receive and Delete
    [ "$(cat "$work/body")" = one ] || { echo "FAIL Receive and Delete's body: $(cat "$work/body")"; fails=$((fails + 1)); }
    check 200 DELETE "$base/jobs/messages/head?timeout=5"
    check 204 DELETE "$base/jobs/messages/head?timeout=0"
    check 410 POST "$base/no-such-queue/messages" --data-binary x
    check 400 POST "$base/jobs/messages" -H 'BrokerProperties: {' --data-binary x
  fi
  kill -TERM "$pid" && wait "$pid" || { echo "FAIL the emulator did not stop cleanly"; fails=$((fails + 1)); }
  if [ "$fails" -gt 0 ]; then failed+=(curl); fi
}

javascript
curl_data
python conformance.py azure.servicebus uamqp
python probe.py proton

if [ ${#failed[@]} -gt 0 ]; then
  echo "conformance: failed: ${failed[*]}"
  exit 1
fi
