#!/usr/bin/env bash
# Builds the sbemulator image (cmd/sbemulator/Dockerfile) from a binary built here with
# the local Go, so nothing is pulled; runs it as Microsoft's emulator is run (the
# conformance Config.json mounted at /ServiceBus_Emulator/ConfigFiles/Config.json, AMQP
# and the plain-HTTP port published); waits on GET /health; runs the JavaScript
# conformance (../conformance) against the container; stops it with SIGTERM; and prints
# the image size, the time to healthy and the container's memory. Not part of CI.
#
# Without a Docker daemon it skips with a message and exits 0. Variables:
#   AMQP_PORT, HTTP_PORT  host ports (default 5672 and 5300)
#   DOCKER_NETWORK=host   run on the host's network (for a daemon without a bridge, such
#                         as dockerd --bridge=none): the emulator listens on 127.0.0.1
#                         at those ports itself
#   IMAGE                 the tag to build (default sbemulator:local)
# Only the JavaScript conformance runs against the container: the Python ones
# (../conformance/conformance.py and probe.py) start an emulator binary of their own (on
# port 5671 for the Python SDK, with -fault flags), and ../conformance/run.sh skips them
# when SERVICEBUS_CONNECTION_STRING names a running emulator.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
amqp_port=${AMQP_PORT:-5672}
http_port=${HTTP_PORT:-5300}
image=${IMAGE:-sbemulator:local}
name=sbemulator-run-$$

if ! command -v docker >/dev/null || ! docker info >/dev/null 2>&1; then
  echo "docker/run.sh: skipped (no docker command or no Docker daemon reachable)"; exit 0
fi

work=$(mktemp -d)
cleanup() { docker rm -f "$name" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT

echo "== build: static binary with the local Go, then the image from it"
mkdir -p "$work/context" "$work/cert"
(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$work/context/sbemulator" ./cmd/sbemulator)
docker build -q -f "$here/../Dockerfile" --target prebuilt -t "$image" "$work/context" >/dev/null
size=$(docker image inspect -f '{{.Size}}' "$image")
echo "image $image: $((size / 1024)) KiB"

# The image runs as an unprivileged user: the certificate's directory must be writable.
chmod 0777 "$work/cert"
net=(-p "127.0.0.1:$amqp_port:5672" -p "127.0.0.1:$http_port:5300")
if [ "${DOCKER_NETWORK:-}" = host ]; then
  net=(--network host -e "SBEMULATOR_ADDR=127.0.0.1:$amqp_port" -e "SBEMULATOR_HTTP_ADDR=127.0.0.1:$http_port")
fi

echo "== run"
start=$(date +%s%N)
docker run -d --name "$name" "${net[@]}" \
  -v "$root/cmd/sbemulator/conformance/Config.json:/ServiceBus_Emulator/ConfigFiles/Config.json:ro" \
  -v "$work/cert:/cert" -e SBEMULATOR_ADMIN_CERT=/cert/admin.pem \
  -e ACCEPT_EULA=Y -e SQL_SERVER=sqledge -e MSSQL_SA_PASSWORD=ignored \
  "$image" >/dev/null
healthy=""
for _ in $(seq 1 300); do
  if curl -fsS "http://127.0.0.1:$http_port/health" >/dev/null 2>&1; then healthy=$(date +%s%N); break; fi
  sleep 0.05
done
if [ -z "$healthy" ]; then
  echo "docker/run.sh: not healthy after 15 s"; docker logs "$name"; exit 1
fi
echo "healthy $(((healthy - start) / 1000000)) ms after docker run (container creation included)"
docker logs "$name" 2>&1 | sed 's/^/  | /'

echo "== JavaScript conformance against the container"
SERVICEBUS_CONNECTION_STRING="Endpoint=sb://127.0.0.1:$amqp_port;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true" \
  SBEMULATOR_HTTP_URL="http://127.0.0.1:$http_port" SBEMULATOR_ADMIN_CERT_FILE="$work/cert/admin.pem" \
  bash "$root/cmd/sbemulator/conformance/run.sh"

echo "== measured"
docker stats --no-stream --format 'memory after the conformance run (docker stats): {{.MemUsage}}' "$name"
pid=$(docker inspect -f '{{.State.Pid}}' "$name")
if [ -r "/proc/$pid/status" ]; then
  echo "resident (VmRSS) and peak (VmHWM) of the emulator process: $(grep -E '^Vm(RSS|HWM)' "/proc/$pid/status" | tr -s ' \t' ' ' | tr '\n' ' ')"
fi
echo "image size: $((size / 1024)) KiB"
docker stop -t 10 "$name" >/dev/null
code=$(docker inspect -f '{{.State.ExitCode}}' "$name")
echo "exit code after docker stop (SIGTERM): $code"
[ "$code" = 0 ]
