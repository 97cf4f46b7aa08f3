#!/bin/sh
# test/layering.sh - the layers of pdc point one way: a file includes only from its own layer and
# the layers below it (docs/architecture.md). Run by `make test` (test-layering).
#
# The rules, bottom to top. A file belongs to the longest folder below that holds it; an include
# "X/..." belongs to the longest folder that prefixes X. Includes without a folder (pdc.h, a file
# beside the includer, generated headers such as onnx.pb-c.h) are not checked. test/ may include
# anything.
RULES='
lib/core    lib/core
ir          lib/core ir
passes      lib/core ir passes
backends    lib/core ir backends
lib         lib/core ir passes backends lib lib/tune
lib/mpi     lib/mpi
lib/tune    lib/core ir backends lib/tune
examples    examples
'
cd "$(dirname "$0")/.." || exit 1

# "folder allowed..." lines -> the folder of a path (longest match), or "" if none
folder_of() {
    printf '%s\n' "$RULES" | awk -v p="$1" 'NF { if (index(p, $1 "/") == 1 && length($1) > length(best)) best = $1 }
                                             END { print best }'
}
allowed() { # $1 = includer's folder, $2 = included folder
    printf '%s\n' "$RULES" | awk -v f="$1" -v g="$2" 'NF && $1 == f { for (i = 2; i <= NF; i++) if ($i == g) ok = 1 }
                                                       END { exit !ok }'
}

bad=0 files=0 checked=0
for f in $(git ls-files 'lib/*.[ch]' 'ir/*.[ch]' 'ir/*.def' 'passes/*.[ch]' 'backends/*.[ch]' 'examples/*.[ch]'); do
    from=$(folder_of "$f")
    [ -n "$from" ] || continue
    files=$((files + 1))
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\/[^"]*\)".*/\1/p' "$f"); do
        to=$(folder_of "$inc")
        [ -n "$to" ] || continue
        checked=$((checked + 1))
        if ! allowed "$from" "$to"; then
            echo "layering: $f ($from) includes \"$inc\" ($to): $to is above $from"
            bad=$((bad + 1))
        fi
    done
done
if [ "$bad" -ne 0 ]; then
    echo "layering: $bad upward includes in $files files (rules: test/layering.sh, docs/architecture.md)"
    exit 1
fi
echo "layering: $checked includes in $files files, 0 upward"
