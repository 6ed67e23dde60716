#!/usr/bin/env bash
# Builds the sbemulator image (cmd/sbemulator/Dockerfile) from a binary built here with
# the local Go, so nothing is pulled; runs it as Microsoft's emulator is run (the
# conformance Config.json mounted at /ServiceBus_Emulator/ConfigFiles/Config.json, AMQP
# and the plain-HTTP port published); waits on GET /health; runs the JavaScript
# conformance (../conformance) against the container, and the Python SDK's conformance
# (../conformance/conformance.py) against containers of the image that conformance.py
# starts itself; stops the first container with SIGTERM; and prints the image size, the
# time to healthy and that container's memory. Not part of CI.
#
# Without a Docker daemon it skips with a message and exits 0. Variables:
#   AMQP_PORT, HTTP_PORT  host ports (default 5672 and 5300)
#   DOCKER_NETWORK=host   run on the host's network (for a daemon without a bridge, such
#                         as dockerd --bridge=none): the emulator listens on 127.0.0.1
#                         at those ports itself
#   IMAGE                 the tag to build (default sbemulator:local)
# conformance.py starts its emulator with the flags it needs (port 5671 of a loopback
# address it picks, -cert, -fault) through SBEMULATOR_COMMAND, a docker run of the image
# on the host's network whatever DOCKER_NETWORK says. The Proton probe
# (../conformance/probe.py) does not run here.
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
cleanup() {
  # The first container, and any that conformance.py left running (they carry the label).
  # shellcheck disable=SC2046
  docker rm -f "$name" $(docker ps -aq --filter "label=$name") >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== build: static binary with the local Go, then the image from it"
mkdir -p "$work/context" "$work/cert" "$work/tmp"
(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$work/context/sbemulator" ./cmd/sbemulator)
docker build -q -f "$here/../Dockerfile" --target prebuilt -t "$image" "$work/context" >/dev/null
size=$(docker image inspect -f '{{.Size}}' "$image")
echo "image $image: $((size / 1024)) KiB"

# The image runs as an unprivileged user: the certificates' directories must be writable.
chmod 0777 "$work/cert" "$work/tmp"
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

echo "== JavaScript conformance against the container, Python conformance against its own"
# conformance.py writes its certificate to TMPDIR and reads Config.json from its own
# directory: both are mounted at the same paths.
conf=$root/cmd/sbemulator/conformance
SERVICEBUS_CONNECTION_STRING="Endpoint=sb://127.0.0.1:$amqp_port;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true" \
  SBEMULATOR_HTTP_URL="http://127.0.0.1:$http_port" SBEMULATOR_ADMIN_CERT_FILE="$work/cert/admin.pem" \
  SBEMULATOR_COMMAND="docker run --rm --network host --label $name -v $(printf %q "$conf:$conf:ro") -v $(printf %q "$work/tmp:$work/tmp") $image" \
  TMPDIR="$work/tmp" bash "$conf/run.sh"

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
