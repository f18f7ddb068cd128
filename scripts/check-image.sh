#!/usr/bin/env bash
# Checks the Dockerfile's runtime image without a Docker engine (none runs
# on the CI machines): builds the binary with the build stage's `go build`,
# makes the runtime stage's base system with debootstrap (debian:SUITE-slim
# -> a minimal SUITE), runs the runtime stage's RUN, COPY, ENV, WORKDIR and
# USER instructions in a chroot, starts ENTRYPOINT + CMD as the image's
# user, waits for the HEALTHCHECK command to pass, sends a span over
# OTLP/HTTP, checks that /v1/query is off (0.0.0.0 and no token), stops the
# server with STOPSIGNAL, checks that it exits 0 with the database in the
# volume, owned by the image's user, and reads the span back with
# `shredduck query --db` from inside the "container".
#   scripts/check-image.sh            (as root; needs debootstrap and curl)
# What it cannot check: Docker's own build and run (layers, the volume
# mount, port publishing).
set -euo pipefail
cd "$(dirname "$0")/.."
dockerfile=Dockerfile

if [ "$(id -u)" != 0 ]; then echo "check-image: needs root (debootstrap, chroot)" >&2; exit 2; fi
for tool in debootstrap curl; do
  command -v "$tool" >/dev/null || { echo "check-image: $tool not found" >&2; exit 2; }
done

work=$(mktemp -d)
root=$work/root
server=
cleanup() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then kill -KILL "$server" 2>/dev/null || true; fi
  for m in proc dev; do mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m"; done
  # --one-file-system: never into /dev or /proc should an unmount have failed.
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

# The Dockerfile's instructions, continuation lines joined, comments dropped.
instructions=$(sed -e 's/\r$//' "$dockerfile" | grep -v '^[[:space:]]*#' | sed -e ':a' -e '/\\$/N; s/\\\n[[:space:]]*/ /; ta')
runtime_from=$(grep '^FROM ' <<<"$instructions" | tail -1)
build_cmd=$(grep '^RUN go build ' <<<"$instructions" | head -1 | sed 's/^RUN //')
[[ $runtime_from =~ ^FROM\ debian:([a-z]+)-slim$ ]] || { echo "check-image: runtime stage is '$runtime_from', not debian:SUITE-slim" >&2; exit 1; }
suite=${BASH_REMATCH[1]}
[ -n "$build_cmd" ] || { echo "check-image: no 'RUN go build' in the build stage" >&2; exit 1; }
# Only the runtime stage is replayed: the instructions after the last FROM.
stage=$(awk '/^FROM /{buf=""; next} {buf=buf $0 "\n"} END{printf "%s", buf}' <<<"$instructions")

echo "== build stage: $build_cmd"
# The stage's output path, /shredduck, becomes a file of this check.
bin=$work/shredduck
eval "CGO_ENABLED=1 ${build_cmd/-o \/shredduck/-o $bin}"

echo "== runtime base: minimal Debian $suite (debootstrap)"
mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || { echo "check-image: no Debian mirror in this machine's apt sources" >&2; exit 2; }
debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { tail -20 "$work/debootstrap.log"; exit 1; }
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"

envs=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
workdir=/ user=0:0 healthcheck= entrypoint=() cmd=() stopsignal=TERM
# jsonarray '["a", "b"]' prints a and b, one per line (the exec form).
jsonarray() { sed -e 's/^[[:space:]]*\[[[:space:]]*"//' -e 's/"[[:space:]]*\][[:space:]]*$//' -e 's/"[[:space:]]*,[[:space:]]*"/\n/g' <<<"$1"; }
while IFS= read -r line; do
  [ -n "${line// /}" ] || continue
  op=${line%% *} arg=${line#* }
  case "$op" in
    RUN)
      echo "== RUN $arg"
      chroot "$root" /usr/bin/env -i "${envs[@]}" DEBIAN_FRONTEND=noninteractive /bin/sh -c "cd $workdir && $arg" >"$work/run.log" 2>&1 ||
        { tail -20 "$work/run.log"; exit 1; } ;;
    COPY)
      [[ $arg =~ ^--from=build\ /shredduck\ (/[^ ]+)$ ]] || { echo "check-image: cannot replay COPY $arg" >&2; exit 1; }
      install -D -m 0755 "$bin" "$root${BASH_REMATCH[1]}" ;;
    ENV) envs+=("$arg") ;;
    WORKDIR) workdir=$arg; mkdir -p "$root$workdir" ;;
    USER) user=$arg ;;
    HEALTHCHECK) healthcheck=${arg#*CMD } ;;
    ENTRYPOINT) mapfile -t entrypoint < <(jsonarray "$arg") ;;
    CMD) mapfile -t cmd < <(jsonarray "$arg") ;;
    STOPSIGNAL) stopsignal=${arg#SIG} ;;
    VOLUME | EXPOSE) ;;
    *) echo "check-image: cannot replay $op" >&2; exit 1 ;;
  esac
done <<<"$stage"
[ "$user" != 0:0 ] || { echo "check-image: the image runs as root" >&2; exit 1; }
[ -n "$healthcheck" ] && [ ${#entrypoint[@]} -gt 0 ] || { echo "check-image: no HEALTHCHECK or ENTRYPOINT" >&2; exit 1; }

# incontainer runs a command as the image's user, in its WORKDIR, with its ENV only.
incontainer() { chroot --userspec="$user" "$root" /usr/bin/env -i "${envs[@]}" /bin/sh -c "cd $workdir && exec \"\$@\"" sh "$@"; }

for port in 4317 4318; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "check-image: port $port is taken; the check would talk to that instead" >&2; exit 1
  fi
done
echo "== start: ${entrypoint[*]} ${cmd[*]} (as $user)"
# Not through the function: $! must be the process that becomes the server
# (chroot, env and sh exec it), so that STOPSIGNAL reaches it.
chroot --userspec="$user" "$root" /usr/bin/env -i "${envs[@]}" /bin/sh -c "cd $workdir && exec \"\$@\"" sh \
  "${entrypoint[@]}" "${cmd[@]}" >"$work/server.log" 2>&1 &
server=$!
healthy=
for _ in $(seq 100); do
  if incontainer /bin/sh -c "$healthcheck" >/dev/null 2>&1; then healthy=1; break; fi
  kill -0 "$server" 2>/dev/null || break
  sleep 0.2
done
[ -n "$healthy" ] || { echo "check-image: the HEALTHCHECK never passed"; cat "$work/server.log"; exit 1; }
echo "== HEALTHCHECK passes"

span='{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"image-check"}}]},"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"check","kind":2,"startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000000001000000"}]}]}]}'
code=$(curl -s -o "$work/resp" -w '%{http_code}' -H 'Content-Type: application/json' --data "$span" http://127.0.0.1:4318/v1/traces)
[ "$code" = 200 ] || { echo "check-image: POST /v1/traces answered $code: $(cat "$work/resp")"; exit 1; }
echo "== a span in"
# The image listens on 0.0.0.0 without a token: the query endpoint, which
# reads every record, must be off and say how to turn it on.
code=$(curl -s -o "$work/resp" -w '%{http_code}' --data 'SELECT 1' http://127.0.0.1:4318/v1/query)
{ [ "$code" = 403 ] && grep -q -- --allow-unauthenticated-query "$work/resp"; } || { echo "check-image: /v1/query without a token answered $code: $(cat "$work/resp")"; exit 1; }
echo "== /v1/query is off without a token"

kill -s "$stopsignal" "$server"
status=0
wait "$server" || status=$?
server=
[ "$status" = 0 ] || { echo "check-image: exit status $status after SIG$stopsignal"; cat "$work/server.log"; exit 1; }
db=$(sed -n 's/.*"--db", *"\([^"]*\)".*/\1/p' <<<"$(grep '^CMD ' <<<"$stage")")
owner=$(stat -c %u:%g "$root$db")
[ "$owner" = "$user" ] || { echo "check-image: $db is owned by $owner, not $user"; exit 1; }
answer=$(incontainer shredduck query --db "$db" --csv "SELECT service_name, name FROM otel_traces")
[ "$answer" = "$(printf 'service_name,name\nimage-check,check')" ] || { echo "check-image: query answered: $answer"; exit 1; }
echo "== the span read back with shredduck query --db"
echo "== SIG$stopsignal: exit 0, $db owned by $owner"
echo "check-image: ok"
