#!/bin/sh
# The shared library exports exactly the functions the public header declares: every PDC_API
# function is defined and exported, and nothing else (no internal pdc_* helpers, no LLVM symbols).
set -eu
so="$1"
hdr=include/pdc.h
want=$(tr '\n' ' ' < "$hdr" | grep -o 'PDC_API [^;(]*(' | grep -o 'pdc_[a-z0-9_]*($' | tr -d '(' | sort -u)
got=$(nm -D --defined-only "$so" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' | sort -u)
fail=0
missing=$(printf '%s\n' "$want" | grep -vxF "$(printf '%s\n' "$got")" || true)
extra=$(printf '%s\n' "$got" | grep -vxF "$(printf '%s\n' "$want")" || true)
[ -z "$missing" ] || { echo "exports: declared in $hdr but not exported:"; echo "$missing"; fail=1; }
[ -z "$extra" ] || { echo "exports: exported but not declared in $hdr:"; echo "$extra"; fail=1; }
soname=$(objdump -p "$so" | awk '/SONAME/ { print $2 }')
[ "$soname" = "libpdc.so.0" ] || { echo "exports: SONAME is '$soname', expected libpdc.so.0"; fail=1; }
n=$(printf '%s\n' "$want" | wc -l)
if [ $fail = 0 ]; then echo "exports: 1 passed, 0 failed ($n functions, SONAME $soname)"; else echo "exports: 0 passed, 1 failed"; exit 1; fi
