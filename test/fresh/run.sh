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

REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${PDC_FRESH_DIR:-$REPO/build/fresh}
# The archive this machine's apt uses (a CI runner may have its own mirror), else Debian's.
host_mirror() {
    { sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null
      sed -n 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]*\)\{0,1\}\([^[:space:]]*\)[[:space:]]\{1,\}bookworm[[:space:]].*/\2/p' \
          /etc/apt/sources.list 2>/dev/null; } | grep -v security | head -n 1
}
MIRROR=${PDC_FRESH_MIRROR:-$(host_mirror)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
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

mounted() { grep -q " $ROOT/" /proc/mounts; }
unmount_all() {
    for m in dev/pts dev/shm sys proc; do
        if grep -q " $ROOT/$m " /proc/mounts; then umount "$ROOT/$m" 2>/dev/null || umount -l "$ROOT/$m"; fi
    done
}
trap unmount_all EXIT
trap 'exit 130' INT TERM

# A root left by an interrupted run is removed only once nothing is mounted in it.
unmount_all
! mounted || die "something is still mounted under $ROOT; unmount it first"
rm -rf "$ROOT"
mkdir -p "$WORK"
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
# The host's Debian sources and apt proxy settings, if any, so the root reaches what the host reaches.
if [ -f /etc/apt/sources.list.d/debian.sources ] && [ -z "${PDC_FRESH_MIRROR:-}" ]; then
    cp /etc/apt/sources.list.d/debian.sources "$ROOT/etc/apt/sources.list.d/debian.sources"
    : > "$ROOT/etc/apt/sources.list"
else
    echo "deb $MIRROR bookworm main" > "$ROOT/etc/apt/sources.list"
    echo "deb $MIRROR bookworm-updates main" >> "$ROOT/etc/apt/sources.list"
    echo "deb http://security.debian.org/debian-security bookworm-security main" >> "$ROOT/etc/apt/sources.list"
fi
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
        printf 'echo "fresh: \\$ %s"; _fresh_t=$(date +%%s)\n' "$(printf '%s' "$line" | sed 's/["\\$`]/\\&/g')"
        printf '%s\n' "$line"
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
