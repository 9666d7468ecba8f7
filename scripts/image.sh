#!/usr/bin/env bash
# Builds csg's container image (issue 32) with podman, from Debian packages only.
#
#   scripts/image.sh            builds localhost/csg:VERSION; its last line of output is that
#                               reference, so other scripts can take it with `tail -n 1`
#   scripts/image.sh install    only installs podman, runc and debootstrap if missing
#   scripts/image.sh base       only makes (or keeps) the base image localhost/debian:bookworm
#
# No registry for base images is reachable from the machines this runs on, so the base is
# made here: `debootstrap --variant=minbase bookworm` from Debian's package archive, trimmed
# (apt lists and caches, documentation, locales), kept as a tarball in target/image/ (a warm
# run skips debootstrap) and imported as localhost/debian:bookworm. Then deploy/Containerfile
# is built on it with the release binary (built first when missing or older than the
# sources) in a build context of its own, target/image/context.
#
# Every step is idempotent. podman reads deploy/container/containers.conf (runc, cgroupfs, no
# default ulimits: what these hosts need) through CONTAINERS_CONF; /etc is left alone.
# Environment: CSG_IMAGE_NAME (default localhost/csg), CSG_IMAGE_REBUILD_BASE=1 to debootstrap
# again, CSG_IMAGE_PROFILE=dev to put target/debug/csg in the image instead of the release
# binary (tagged VERSION-dev): what the test suite does, since a cold release build would take
# most of CI's time budget; what the dev image proves (packaging, user, volumes, signals,
# plugins) does not depend on the optimisation level.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

die() {
  echo "image.sh: $*" >&2
  exit 1
}

say() {
  echo "image.sh: $*" >&2
}

is_root() {
  [ "$(id -u)" -eq 0 ]
}

export CONTAINERS_CONF="$root/deploy/container/containers.conf"
work="$root/target/image"
base_tar="$work/debian-bookworm-minbase.tar"
base_ref=localhost/debian:bookworm
image_name=${CSG_IMAGE_NAME:-localhost/csg}

install() {
  local missing=()
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  command -v runc >/dev/null 2>&1 || missing+=(runc)
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  # strip (binutils) trims the binary's debug information out of the image.
  command -v strip >/dev/null 2>&1 || missing+=(binutils)
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  say "installing Debian's ${missing[*]}"
  local sudo=""
  is_root || sudo="sudo"
  $sudo apt-get update -qq
  # No recommends: podman's would bring crun, which fails on these hosts anyway.
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    podman runc debootstrap binutils >/dev/null
  command -v podman >/dev/null 2>&1 || die "podman is installed but not on PATH"
}

# The trimmed minbase tarball, made once.
base_tarball() {
  if [ -s "$base_tar" ] && [ "${CSG_IMAGE_REBUILD_BASE:-0}" != 1 ]; then
    return 0
  fi
  is_root || die "debootstrap needs root (it creates device nodes and chroots)"
  mkdir -p "$work"
  local dir
  dir=$(mktemp -d "$work/debootstrap.XXXXXX")
  # shellcheck disable=SC2064 # the directory is known now
  trap "rm -rf '$dir'" EXIT
  say "debootstrap --variant=minbase bookworm (a few minutes; cached in $base_tar)"
  local log="$work/debootstrap.log"
  if ! debootstrap --variant=minbase bookworm "$dir" http://deb.debian.org/debian >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    die "debootstrap failed (its log: $log)"
  fi
  # What an image never needs, as Debian's -slim images leave out: the package lists and
  # caches (the Containerfile runs apt-get update itself), documentation, manuals, locales.
  rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/* "$dir"/var/cache/debconf/*-old \
    "$dir"/var/log/* "$dir"/usr/share/man/* "$dir"/usr/share/info/* \
    "$dir"/usr/share/locale/* "$dir"/usr/share/lintian/* "$dir"/tmp/*
  find "$dir/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$dir/usr/share/doc" -mindepth 1 -type d -empty -delete
  # Security updates too, as the public image has them.
  printf '%s\n' 'deb http://deb.debian.org/debian bookworm main' \
    'deb http://deb.debian.org/debian bookworm-updates main' \
    'deb http://deb.debian.org/debian-security bookworm-security main' >"$dir/etc/apt/sources.list"
  # Numeric owners: the tarball must not depend on this host's user names.
  tar --numeric-owner -C "$dir" -cf "$base_tar.tmp" .
  mv "$base_tar.tmp" "$base_tar"
  rm -rf "$dir"
  trap - EXIT
  # A new tarball replaces the imported base.
  podman image rm -f "$base_ref" >/dev/null 2>&1 || true
}

base_image() {
  if podman image exists "$base_ref" && [ "${CSG_IMAGE_REBUILD_BASE:-0}" != 1 ]; then
    return 0
  fi
  base_tarball
  say "importing $base_ref"
  podman import --quiet --change 'CMD ["/bin/bash"]' "$base_tar" "$base_ref" >/dev/null
}

profile=${CSG_IMAGE_PROFILE:-release}
case "$profile" in
  release) bin="$root/target/release/csg" suffix="" cargo_profile=(--release) ;;
  dev) bin="$root/target/debug/csg" suffix="-dev" cargo_profile=() ;;
  *) die "CSG_IMAGE_PROFILE must be release or dev, not '$profile'" ;;
esac

# The binary of the profile, built when missing or older than any source it is built from.
build_binary() {
  if [ -x "$bin" ] && [ -z "$(find crates Cargo.toml Cargo.lock rust-toolchain.toml \
    -newer "$bin" -type f -print -quit)" ]; then
    return 0
  fi
  say "cargo build ${cargo_profile[*]} -p csg (the binary is missing or older than the sources)"
  cargo build "${cargo_profile[@]}" --locked -p csg >&2
}

main() {
  install
  base_image
  build_binary

  local version revision context="$work/context"
  version=$("$bin" --version | awk '{print $2}')
  [ -n "$version" ] || die "$bin --version printed no version"
  revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
  if [ "$revision" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    revision="$revision-dirty"
  fi

  # A build context of its own: the repository's would send target/ (gigabytes) to podman.
  rm -rf "$context"
  mkdir -p "$context"
  # Without the line tables (about 200 MB of the binary's 207 MB); symbols stay for backtraces.
  strip --strip-debug -o "$context/csg" "$bin"
  cp deploy/container/entrypoint.sh "$context/entrypoint.sh"

  local ref="$image_name:$version$suffix"
  say "building $ref (revision $revision)"
  # --isolation chroot: the RUN steps need no OCI runtime; --format docker keeps HEALTHCHECK
  # (the OCI format has none).
  podman build --isolation chroot --format docker --layers \
    -f deploy/Containerfile \
    --build-arg BASE="$base_ref" \
    --build-arg VERSION="$version" \
    --build-arg REVISION="$revision" \
    -t "$ref" "$context" >&2
  # The layers of earlier builds that this one replaced (an older binary: 55 MB each) are
  # dangling now; the disk is shared. The cache of this build stays (its layers are in use).
  podman image prune -f >/dev/null 2>&1 || true
  local size
  size=$(podman image inspect --format '{{.Size}}' "$ref")
  say "$ref: $((size / 1000000)) MB uncompressed"
  echo "$ref"
}

case "${1:-}" in
  install) install ;;
  base)
    install
    base_image
    ;;
  "") main ;;
  *) die "usage: $0 [install | base]" ;;
esac
