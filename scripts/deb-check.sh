#!/usr/bin/env bash
# The Debian package from end to end, on a machine where it may be installed (a fresh Debian 12
# root: as root, from the project root). Builds it (`make deb`), installs it with apt, checks what
# it put where, starts the server the way the systemd unit does (its ExecStart and Environment, as
# its user) on a small model written to /var/lib/trellis/models, queries it, then removes and
# purges the package and checks that nothing is left.
#   scripts/deb-check.sh        (a fresh root: ../shared/tools/fresh-check 'scripts/deb-check.sh')
set -euo pipefail

fail() {
  echo "deb-check: FAILED: $*" >&2
  exit 1
}

scripts/install-deps.sh deb  # make, the compiler, dpkg-dev: what `make deb` needs
command -v curl >/dev/null || apt-get install -y curl
make deb
deb=$(ls build-deb/trellis_*.deb | head -n 1)
echo "== installing $deb"
apt-get install -y "./$deb"

echo "== what the package put where"
trellis --version
for path in /usr/bin/trellis /lib/systemd/system/trellis.service /etc/trellis/serve.conf \
  /usr/share/bash-completion/completions/trellis /usr/share/doc/trellis/README.md; do
  [ -e "$path" ] || fail "$path is missing"
done
getent passwd trellis >/dev/null || fail "no trellis user"
[ "$(stat -c %U /var/lib/trellis/models)" = trellis ] || fail "/var/lib/trellis/models is not trellis's"
dpkg-query -W -f='${Conffiles}\n' trellis | grep -q /etc/trellis/serve.conf ||
  fail "serve.conf is not a conffile"

echo "== the service, started as its unit starts it"
unit=/lib/systemd/system/trellis.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
environment=$(sed -n 's/^Environment=//p' "$unit")
user=$(sed -n 's/^User=//p' "$unit")
as_user() { setpriv --reuid="$user" --regid="$user" --init-groups "$@"; }
as_user trellis model synth --preset tiny --type q8_0 -o /var/lib/trellis/models/tiny.gguf
cat >>/etc/trellis/serve.conf <<'CONF'
model = /var/lib/trellis/models/tiny.gguf
port = 18181
CONF
log=$(mktemp)
# shellcheck disable=SC2086 # the unit's words, split as systemd splits them
(cd /var/lib/trellis && exec setpriv --reuid="$user" --regid="$user" --init-groups \
  env $environment $exec_start >"$log" 2>&1) &
server=$!
for _ in $(seq 100); do
  curl -sf http://127.0.0.1:18181/health >/dev/null && break
  sleep 0.2
done
curl -sf http://127.0.0.1:18181/v1/models | grep -q '"id":"tiny"' || {
  cat "$log"
  fail "the service does not list its model"
}
reply=$(curl -sf http://127.0.0.1:18181/v1/completions -H 'Content-Type: application/json' \
  -d '{"model":"tiny","prompt":"hello","max_tokens":4,"temperature":0}')
echo "$reply" | grep -q '"completion_tokens":4' || fail "no completion: $reply"
kill "$server"
wait "$server" || true
cat "$log"

echo "== remove, then purge"
apt-get remove -y trellis
[ ! -e /usr/bin/trellis ] || fail "the binary is still there after remove"
[ -e /etc/trellis/serve.conf ] || fail "remove took the edited conffile"
apt-get purge -y trellis
[ ! -e /etc/trellis/serve.conf ] || fail "purge left /etc/trellis/serve.conf"
[ ! -e /var/lib/trellis ] || fail "purge left /var/lib/trellis"
! getent passwd trellis >/dev/null || fail "purge left the trellis user"
echo "deb-check: the package installs, serves as its unit would, and leaves nothing behind"
