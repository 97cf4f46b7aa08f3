#!/bin/sh
# test/fresh/run.sh - the README's quick start on a brand-new Debian 12, as a new user runs it.
#
# Builds a minimal Debian 12 root with debootstrap (--variant=minbase: no make, no compiler, no git),
# clones this repository's committed HEAD into it, and runs the README's first ```sh block (its quick
# start) line by line, as root, exactly as written - only the URL of `git clone` is replaced by the
# local copy. Any failing line fails the run. Needs root (chroot, mount) and the Debian archive.
# Uncommitted changes are not tested: the clone is of HEAD.
#
# Environment: PDC_FRESH_DIR (work folder, default build/fresh), PDC_FRESH_MIRROR (default
# http://deb.debian.org/debian), PDC_FRESH_TARBALL (a debootstrap --make-tarball file to unpack
# instead of downloading the base system; the packages the README installs are still downloaded
# and installed fresh by the README's own apt-get).
set -eu

# In a private mount namespace where one can be had: the root's mounts then end with this script,
# however it ends.
if [ -z "${PDC_FRESH_NS:-}" ] && command -v unshare >/dev/null 2>&1 && unshare -m --propagation private true 2>/dev/null
then
    PDC_FRESH_NS=1 exec unshare -m --propagation private sh "$0" "$@"
fi

REPO=$(cd -P "$(dirname "$0")/../.." && pwd -P)
WORK=${PDC_FRESH_DIR:-$REPO/build/fresh}
mkdir -p "$WORK" && WORK=$(cd -P "$WORK" && pwd -P) || exit 1
# The archives this machine's apt uses (a CI runner may have its own mirror), else Debian's; only
# plain http(s) URIs (not mirror+file: lists, which the root would not have).
host_uris() {
    { sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null
      sed -n 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]*\)\{0,1\}\([^[:space:]]*\)[[:space:]].*/\2/p' \
          /etc/apt/sources.list 2>/dev/null; } | grep -E '^https?://[^ ]*debian' || true
}
MIRROR=${PDC_FRESH_MIRROR:-$(host_uris | grep -v security | head -n 1)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=$(host_uris | grep security | head -n 1)
SECURITY=${SECURITY:-http://security.debian.org/debian-security}
# apt's proxy, for debootstrap too (it reads http_proxy, not apt's configuration)
if [ -z "${http_proxy:-}" ]; then
    http_proxy=$(cat /etc/apt/apt.conf /etc/apt/apt.conf.d/* 2>/dev/null |
        sed -n 's/^[[:space:]]*Acquire::http::Proxy[[:space:]]*"\([^"]*\)".*/\1/p' | head -n 1)
    [ -z "$http_proxy" ] || export http_proxy
fi
ROOT=$WORK/root
LOG=$WORK/log

say() { printf 'fresh: %s\n' "$*"; }
die() { printf 'fresh: %s\n' "$*" >&2; exit 1; }
now() { date +%s; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mount)"
command -v debootstrap >/dev/null || {
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null || die "cannot install debootstrap"
}

unmount_all() {
    for m in dev/pts dev/shm sys proc; do
        if mountpoint -q "$ROOT/$m" 2>/dev/null; then umount "$ROOT/$m" 2>/dev/null || umount -l "$ROOT/$m"; fi
    done
}
mounted() {
    for m in dev/pts dev/shm sys proc; do mountpoint -q "$ROOT/$m" 2>/dev/null && return 0; done
    return 1
}
trap unmount_all EXIT
trap 'exit 130' INT TERM

# A root left by an interrupted run is removed only once nothing is mounted in it, and only if this
# script made it (the marker beside it): PDC_FRESH_DIR=/ must never cost the host its /root.
MARK=$WORK/root.pdc-fresh
unmount_all
! mounted || die "something is still mounted under $ROOT; unmount it first"
if [ -e "$ROOT" ]; then
    [ -e "$MARK" ] || die "$ROOT exists and was not made by this script; remove it or choose PDC_FRESH_DIR"
    rm -rf --one-file-system "$ROOT"
fi
: > "$MARK"
: > "$LOG"

t0=$(now)
if [ -n "${PDC_FRESH_TARBALL:-}" ]; then
    say "debootstrap bookworm (base from $PDC_FRESH_TARBALL)"
    debootstrap --variant=minbase --unpack-tarball="$PDC_FRESH_TARBALL" bookworm "$ROOT" "$MIRROR" >>"$LOG" 2>&1 ||
        die "debootstrap failed (log: $LOG)"
else
    say "debootstrap bookworm from $MIRROR (minbase)"
    debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" >>"$LOG" 2>&1 || die "debootstrap failed (log: $LOG)"
fi
t1=$(now)
say "root ready in $((t1 - t0)) s"

# What any Debian machine has and a chroot lacks: the kernel's views, a resolver, a source list.
mount -t proc proc "$ROOT/proc"
mount -t sysfs -o ro sysfs "$ROOT/sys"
mkdir -p "$ROOT/dev/pts" "$ROOT/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$ROOT/dev/pts"
mount -t tmpfs -o mode=1777 tmpfs "$ROOT/dev/shm"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# The host's archives (bookworm's suites, whatever the host runs) and apt proxy settings.
{
    echo "deb $MIRROR bookworm main"
    echo "deb $MIRROR bookworm-updates main"
    echo "deb $SECURITY bookworm-security main"
} > "$ROOT/etc/apt/sources.list"
for f in /etc/apt/apt.conf.d/*; do
    grep -qi 'proxy' "$f" 2>/dev/null && cp "$f" "$ROOT/etc/apt/apt.conf.d/"
done

# The repository, as a bare clone of HEAD: the README's `git clone` clones it from /src/pdc.git.
git clone -q --bare --no-local "$REPO" "$ROOT/src/pdc.git"
say "cloned $(git -C "$REPO" rev-parse --short HEAD) into the root"

# The quick start: README's first ```sh block.
git -C "$REPO" show HEAD:README.md | awk '/^```sh$/ { on = 1; next } on && /^```/ { exit } on' > "$WORK/quickstart.sh"
[ -s "$WORK/quickstart.sh" ] || die "README.md has no \`\`\`sh block"
sed -e 's|^\(git clone\) [^ ]*|\1 /src/pdc.git|' "$WORK/quickstart.sh" > "$ROOT/root/quickstart.sh"
say "the README's quick start:"
sed 's/^/    /' "$WORK/quickstart.sh"

# Each line runs in one shell, as a user types them; `cd` carries over.
tq=$(now)
status=0
{
    echo 'set -e'
    n=0
    while IFS= read -r line; do
        n=$((n + 1))
        case "$line" in '' | '#'*) continue ;; esac
        printf 'printf "%%s\\n" "fresh: \\$ %s"; _fresh_t=$(date +%%s)\n' "$(printf '%s' "$line" | sed 's/["\\$`]/\\&/g')"
        # braces: `cd` still carries over; a failure anywhere in an && list still fails the line
        printf '{ %s\n} || { _rc=$?; echo "fresh: line %d failed (exit $_rc)"; exit $_rc; }\n' "$line" "$n"
        printf 'echo "fresh: line %d took $(($(date +%%s) - _fresh_t)) s"\n' "$n"
    done < "$ROOT/root/quickstart.sh"
} > "$ROOT/root/quickstart-run.sh"

rm -f "$ROOT/root/quickstart.status"
chroot "$ROOT" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    TERM=dumb DEBIAN_FRONTEND=noninteractive \
    sh -c 'cd /root && sh /root/quickstart-run.sh; echo $? > /root/quickstart.status' 2>&1 | tee -a "$LOG"
[ "$(cat "$ROOT/root/quickstart.status" 2>/dev/null)" = 0 ] || status=1
t2=$(now)

if [ $status -ne 0 ]; then
    die "FAILED after $((t2 - t0)) s (log: $LOG)"
fi
say "passed: the README's quick start ran on a fresh Debian 12 root in $((t2 - tq)) s (debootstrap $((t1 - t0)) s, total $((t2 - t0)) s)"
