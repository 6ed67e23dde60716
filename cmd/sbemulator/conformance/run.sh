#!/usr/bin/env bash
# Runs conformance.mjs, the JavaScript Service Bus SDK (@azure/service-bus, pinned with
# package-lock.json) against cmd/sbemulator, and exits non-zero on any failed step.
# npm installs into a temporary directory under a timeout; the installed modules are kept
# in a cache keyed by the lock file's hash, so later runs do not touch the registry.
# Without node or npm it skips, except under CI=true, where it fails.
# With SERVICEBUS_CONNECTION_STRING set it tests that running emulator instead of building
# one (conformance.mjs says which other variables it reads then; ../docker/run.sh uses
# this for the container image).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  if [ "${CI:-}" = true ]; then echo "conformance: node and npm are required under CI=true"; exit 1; fi
  echo "conformance: skipped (node or npm not installed)"; exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
emulator=()
if [ -z "${SERVICEBUS_CONNECTION_STRING:-}" ]; then
  (cd "$here" && go build -o "$work/sbemulator" ..)
  emulator=("$work/sbemulator")
fi
cp "$here/package.json" "$here/package-lock.json" "$here/conformance.mjs" "$here/admin.mjs" "$here/Config.json" "$work/"

cache="${XDG_CACHE_HOME:-$HOME/.cache}/sbkit/conformance-$(sha256sum "$here/package-lock.json" | cut -c1-16)"
if [ -d "$cache/node_modules" ]; then
  ln -s "$cache/node_modules" "$work/node_modules"
else
  for attempt in 1 2; do
    if (cd "$work" && timeout 180 npm ci --no-audit --no-fund --prefer-offline --loglevel=error); then
      break
    fi
    if [ "$attempt" = 2 ]; then echo "conformance: npm ci failed twice"; exit 1; fi
    rm -rf "$work/node_modules"
  done
  mkdir -p "$cache"
  tmp="$cache/node_modules.$$"
  cp -r "$work/node_modules" "$tmp" && mv -T "$tmp" "$cache/node_modules" 2>/dev/null || rm -rf "$tmp"
fi

timeout 420 node "$work/conformance.mjs" "${emulator[@]}"
