#!/usr/bin/env bash
# A PostgreSQL server for tests and local cluster mode (issue 31), on a loopback port.
#
#   scripts/postgres.sh install         installs Debian's postgresql if its server binaries are missing
#   scripts/postgres.sh start DIR PORT [--tls]
#                                       starts (creating on first use) a cluster in DIR on 127.0.0.1:PORT
#                                       with a user `csg` (random password) owning a database `csg`;
#                                       the last line printed is its URL. With --tls the server takes
#                                       TCP logins over TLS only, with a certificate for 127.0.0.1 and
#                                       localhost signed by a throwaway CA (DIR/tls/ca.crt, made once with
#                                       openssl), and the URL asks for sslmode=verify-full with that CA
#   scripts/postgres.sh stop DIR        stops that cluster (its data stays in DIR)
#
# Every command is idempotent. PostgreSQL refuses to run as root: as root, the server binaries
# run as the `postgres` user that Debian's package creates, and DIR is handed to that user.
# For tests: no fsync (a machine crash may lose data; a server crash loses no commit).
set -euo pipefail

die() {
  echo "postgres.sh: $*" >&2
  exit 1
}

usage() {
  die "usage: $0 install | start DIR PORT [--tls] | stop DIR"
}

# The directory of Debian's newest server binaries, else of those on PATH; empty if none.
bin_dir() {
  local dir best="" best_version=-1 version
  for dir in /usr/lib/postgresql/*/bin; do
    if [ ! -x "$dir/initdb" ] || [ ! -x "$dir/pg_ctl" ]; then
      continue
    fi
    version=$(basename "$(dirname "$dir")")
    [[ $version =~ ^[0-9]+$ ]] || continue
    if [ "$version" -gt "$best_version" ]; then
      best=$dir
      best_version=$version
    fi
  done
  if [ -z "$best" ] && command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    best=$(dirname "$(command -v initdb)")
  fi
  echo "$best"
}

is_root() {
  [ "$(id -u)" -eq 0 ]
}

# Runs a server binary as the user that owns the cluster, from a directory that user can enter.
as_owner() {
  if is_root; then
    (cd / && runuser -u postgres -- "$@")
  else
    "$@"
  fi
}

install() {
  if [ -n "$(bin_dir)" ]; then
    return 0
  fi
  echo "postgres.sh: installing Debian's postgresql" >&2
  local sudo=""
  is_root || sudo="sudo"
  $sudo apt-get update -qq
  # The package would create and start a system-wide cluster on port 5432, which the tests
  # never use: tell postgresql-common not to, before the server package is installed.
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql-common >/dev/null
  local conf=/etc/postgresql-common/createcluster.conf
  if [ -f "$conf" ] && ! grep -q '^create_main_cluster *= *false' "$conf"; then
    echo "create_main_cluster = false" | $sudo tee -a "$conf" >/dev/null
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
  [ -n "$(bin_dir)" ] || die "postgresql is installed but initdb and pg_ctl were not found"
}

# 0 when the cluster in $1 runs (pg_ctl status exits 3 when it does not).
running() {
  local bin=$1 dir=$2
  [ -f "$dir/data/PG_VERSION" ] && as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1
}

# A throwaway CA and a server certificate it signs, for 127.0.0.1 and localhost, in $1/tls
# (made once; the server's key readable by the server's user only).
make_certificates() {
  local tls=$1/tls
  [ -f "$tls/server.crt" ] && [ -f "$tls/server.key" ] && [ -f "$tls/ca.crt" ] && return 0
  command -v openssl >/dev/null 2>&1 || die "--tls needs openssl; run: apt-get install openssl"
  mkdir -p "$tls"
  cat >"$tls/openssl.cnf" <<'EOF'
[req]
distinguished_name = dn
[dn]
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost,IP:127.0.0.1
EOF
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -config "$tls/openssl.cnf")
  openssl req -x509 -days 3650 -subj "/CN=csg throwaway CA" "${ec[@]}" -extensions ca \
    -keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null || die "openssl could not make the CA"
  openssl req -new -subj /CN=localhost "${ec[@]}" -keyout "$tls/server.key" \
    -out "$tls/server.csr" 2>/dev/null || die "openssl could not make the server's key"
  openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -days 3650 \
    -extfile "$tls/openssl.cnf" -extensions server -out "$tls/server.crt" 2>/dev/null ||
    die "openssl could not sign the server's certificate"
  chmod 600 "$tls/server.key" "$tls/ca.key"
  chmod 644 "$tls/ca.crt" "$tls/server.crt"
  chmod 755 "$tls"
  if is_root; then
    chown -R postgres:postgres "$tls"
  fi
}

start() {
  local dir=$1 port=$2 tls=${3:-}
  if ! [[ $port =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
    die "PORT must be a number from 1 to 65535, not '$port'"
  fi
  local bin
  bin=$(bin_dir)
  [ -n "$bin" ] || die "PostgreSQL server binaries not found; run: $0 install"
  mkdir -p "$dir"
  # The superuser logs in over the socket in DIR without a password: DIR is its owner's only.
  chmod 700 "$dir"
  dir=$(cd "$dir" && pwd -P)
  [[ $dir != *"'"* ]] || die "DIR must not contain a quote: $dir"
  if is_root; then
    id postgres >/dev/null 2>&1 || die "there is no postgres user to run the server as; run: $0 install"
    chown postgres:postgres "$dir"
    runuser -u postgres -- test -w "$dir" ||
      die "the postgres user cannot reach $dir: a parent directory is closed to it (each needs o+x); use one it can reach, e.g. under /tmp"
  fi

  if [ ! -f "$dir/data/PG_VERSION" ]; then
    # The password: 32 hex digits, so the URL needs no escaping.
    od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$dir/password"
    chmod 600 "$dir/password"
    is_root && chown postgres:postgres "$dir/password"
    # The superuser `postgres` logs in over the socket in DIR only (a directory closed to
    # everyone else); `csg` logs in with its password over TCP, as in production.
    as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth-local=trust \
      --auth-host=scram-sha-256 -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 ||
      die "initdb failed; see $dir/initdb.log"
    echo "include_if_exists = 'csg.conf'" >>"$dir/data/postgresql.conf"
  fi
  [ -f "$dir/password" ] || die "$dir/password is missing; remove $dir and start again"

  if [ "$tls" = --tls ]; then
    make_certificates "$dir"
  fi

  if running "$bin" "$dir"; then
    local current current_tls=""
    current=$(sed -n 's/^port = \([0-9]*\)$/\1/p' "$dir/data/csg.conf" 2>/dev/null || true)
    if grep -q '^ssl = on' "$dir/data/csg.conf" 2>/dev/null; then
      current_tls=--tls
    fi
    [ "$current" = "$port" ] && [ "$current_tls" = "$tls" ] ||
      die "the cluster in $dir already runs on port ${current:-unknown}${current_tls:+ with TLS}; stop it first: $0 stop $dir"
  else
    cat >"$dir/data/csg.conf" <<EOF
# Written by scripts/postgres.sh on every start.
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
fsync = off
EOF
    if [ "$tls" = --tls ]; then
      # TCP logins over TLS only: a plain connection finds no pg_hba entry and is refused.
      cat >"$dir/tls/pg_hba.conf" <<EOF
local all all trust
hostssl all all 127.0.0.1/32 scram-sha-256
EOF
      cat >>"$dir/data/csg.conf" <<EOF
ssl = on
ssl_cert_file = '$dir/tls/server.crt'
ssl_key_file = '$dir/tls/server.key'
hba_file = '$dir/tls/pg_hba.conf'
EOF
      if is_root; then
        chown postgres:postgres "$dir/tls/pg_hba.conf"
      fi
    fi
    is_root && chown postgres:postgres "$dir/data/csg.conf"
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null ||
      die "the server did not start; see $dir/server.log"
  fi

  local password
  password=$(cat "$dir/password")
  local psql=(as_owner "$bin/psql" -X -q -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1)
  if [ -z "$("${psql[@]}" -tAc "SELECT 1 FROM pg_roles WHERE rolname = 'csg'")" ]; then
    "${psql[@]}" -c "CREATE ROLE csg LOGIN PASSWORD '$password'"
  fi
  if [ -z "$("${psql[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname = 'csg'")" ]; then
    "${psql[@]}" -c "CREATE DATABASE csg OWNER csg"
  fi
  if [ "$tls" = --tls ]; then
    echo "postgres.sh: TLS only; the server's CA certificate is $dir/tls/ca.crt" >&2
    echo "postgres://csg:$password@127.0.0.1:$port/csg?sslmode=verify-full&sslrootcert=$dir/tls/ca.crt"
  else
    echo "postgres://csg:$password@127.0.0.1:$port/csg"
  fi
}

stop() {
  local dir=$1
  local bin
  bin=$(bin_dir)
  [ -n "$bin" ] || die "PostgreSQL server binaries not found; run: $0 install"
  [ -d "$dir" ] || return 0
  dir=$(cd "$dir" && pwd -P)
  if running "$bin" "$dir"; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
  fi
}

case "${1:-}" in
  install)
    [ $# -eq 1 ] || usage
    install
    ;;
  start)
    [ $# -eq 3 ] || { [ $# -eq 4 ] && [ "$4" = --tls ]; } || usage
    start "$2" "$3" "${4:-}"
    ;;
  stop)
    [ $# -eq 2 ] || usage
    stop "$2"
    ;;
  *) usage ;;
esac
