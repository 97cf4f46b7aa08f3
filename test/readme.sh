#!/bin/sh
# readme.sh BUILD - runs the README's examples, so that the README cannot drift from the code
# (`make test-readme`, part of `make test`). BUILD holds pdc and libpdc.so.0 (default: build).
#
# The README's fenced blocks, in order:
#   ```sh       commands. Each block runs as one script with `set -e`, from the repository root, in the
#               repository itself (no scratch copy): commands may write only under build/ (build/readme/,
#               or the demo's build/demo/). `make demo` runs as written; PDC_SKIP_DEPS comes from the
#               environment.
#   ```c        a whole program: compiled against include/ and BUILD/libpdc.so.0 (warnings are errors),
#               then run from the repository root; it must exit with 0.
#   other       (```console, ```text, no language) output examples: not run.
# The quick start's setup lines - `apt-get ...`, `git clone ...`, `cd pdc`, `make test` - are the only
# lines skipped (test/fresh/run.sh runs them, exactly as written, on a fresh Debian 12 root).
# With BUILD other than build, `build/` in the blocks becomes BUILD/ and `make demo` gets BUILD=BUILD.
#
# Then every relative link of README.md and docs/**/*.md must point to a file that exists, and a
# #fragment to a heading of that file (GitHub's anchors).
#
# Prints one line per block it runs ("readme: block 3 (line 120): ok"), then "readme: N passed, M failed"
# and the link check's line. A failing block is printed with its output. Exit status 1 on any failure.

BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
README=README.md
WORK="$BUILD/readme/blocks"

if [ ! -e "$BUILD/libpdc.so.0" ] || [ ! -e "$BUILD/pdc" ]; then
    echo "readme: $BUILD/libpdc.so.0 or $BUILD/pdc is missing (run make first)" >&2
    exit 1
fi
rm -rf "$WORK"
mkdir -p "$WORK" || exit 1

# Split the README into blocks: $WORK/N.LANG holds block N's body, $WORK/N.line its opening line number.
awk -v dir="$WORK" '
    !inb && /^```/ {
        inb = 1; n++
        lang = substr($0, 4); sub(/[ \t].*$/, "", lang)
        if (lang == "") lang = "none"
        file = dir "/" n "." lang
        printf "" > file
        print NR > (dir "/" n ".line")
        close(dir "/" n ".line")
        next
    }
    inb && /^```[ \t]*$/ { inb = 0; close(file); next }
    inb { print > file }
    END { if (inb) { print "readme: block " n " (line " NR "): no closing fence" > "/dev/stderr"; exit 1 } }
' "$README" || exit 1

# BUILD other than build: the blocks' build/ paths and `make demo` follow it.
retarget() {
    if [ "$BUILD" = build ]; then
        cat "$1"
    else
        sed -e "s#\\(^\\|[^A-Za-z0-9_./-]\\)build/#\\1$BUILD/#g" \
            -e "s#^\\([ \\t]*\\)make demo\\([ \\t]\\|\$\\)#\\1make demo BUILD=$BUILD\\2#" "$1"
    fi
}

# A quick-start line that test/fresh/run.sh runs instead.
is_setup_line() {
    case "$1" in
        "apt-get "* | "git clone "* | "cd pdc" | "cd pdc "* | "make test" | "make test "* | "make test	"*) return 0 ;;
    esac
    return 1
}

PASS=0
FAIL=0
CC=${CC:-cc}
SAN=${SANITIZE:+-fsanitize=$SANITIZE}
case "$BUILD" in /*) LIBDIR=$BUILD ;; *) LIBDIR=$ROOT/$BUILD ;; esac

fail_block() { # N LINE FILE LOG WHAT
    FAIL=$((FAIL + 1))
    echo "readme: block $1 (line $2): FAILED ($5)"
    echo "---- block $1 (README.md line $2):"
    sed 's/^/    | /' "$3"
    echo "---- its output:"
    sed 's/^/    | /' "$4"
    echo "----"
}

n=0
while :; do
    n=$((n + 1))
    [ -e "$WORK/$n.line" ] || break
    f=
    for g in "$WORK/$n".*; do
        case "$g" in *.line) ;; *) f=$g ;; esac
    done
    line=$(cat "$WORK/$n.line")
    lang=${f##*.}
    log="$WORK/$n.log"
    case "$lang" in
        sh)
            if [ -n "$SAN" ] && grep -q 'python3' "$f"; then
                echo "readme: block $n (line $line): SKIPPED under SANITIZE=$SANITIZE (an instrumented library cannot load into python3)"
                continue
            fi
            script="$WORK/$n.run.sh"
            echo 'set -e' > "$script"
            : > "$WORK/$n.skipped"
            retarget "$f" | while IFS= read -r l; do
                t=$(printf '%s' "$l" | sed 's/^[ \t]*//')
                if is_setup_line "$t"; then
                    printf 'readme: skipped (test/fresh/run.sh runs it): %s\n' "$t" >> "$WORK/$n.skipped"
                else
                    printf '%s\n' "$l" >> "$script"
                fi
            done
            cat "$WORK/$n.skipped"
            if sh "$script" > "$log" 2>&1; then
                PASS=$((PASS + 1))
                echo "readme: block $n (line $line): ok"
            else
                fail_block "$n" "$line" "$f" "$log" "exit status $?"
            fi
            ;;
        c)
            src="$WORK/$n.prog.c"
            exe="$WORK/$n.prog"
            retarget "$f" > "$src"
            # shellcheck disable=SC2086
            if ! $CC -std=c11 -Wall -Wextra -Werror $SAN -Iinclude -o "$exe" "$src" -L"$BUILD" -l:libpdc.so.0 \
                "-Wl,-rpath,$LIBDIR" > "$log" 2>&1; then
                fail_block "$n" "$line" "$f" "$log" "does not compile"
            elif "$exe" >> "$log" 2>&1; then
                PASS=$((PASS + 1))
                echo "readme: block $n (line $line): ok"
            else
                fail_block "$n" "$line" "$f" "$log" "exit status $?"
            fi
            ;;
        *) ;;
    esac
done
echo "readme: $PASS passed, $FAIL failed"

# Links: [text](target) outside fenced blocks; relative targets must exist, fragments must be headings.
anchors() { # FILE: GitHub's heading anchors, one per line
    awk '
        /^```/ { inb = !inb; next }
        inb || !/^#+ / { next }
        {
            h = $0; sub(/^#+ +/, "", h); h = tolower(h)
            out = ""
            for (i = 1; i <= length(h); i++) {
                c = substr(h, i, 1)
                if (c ~ /[a-z0-9_-]/) out = out c
                else if (c == " ") out = out "-"
            }
            if (seen[out]++) out = out "-" (seen[out] - 1)
            print out
        }' "$1"
}
links=0
broken=0
for doc in "$README" $(find docs -name '*.md' 2>/dev/null | sort); do
    dir=$(dirname "$doc")
    awk '/^```/ { inb = !inb; next } !inb' "$doc" | grep -o '\]([^)]*)' | sed 's/^](//; s/)$//' > "$WORK/links" || true
    while IFS= read -r target; do
        case "$target" in http://* | https://* | mailto:* | "") continue ;; esac
        links=$((links + 1))
        path=${target%%#*}
        frag=
        case "$target" in *'#'*) frag=${target#*#} ;; esac
        if [ -z "$path" ]; then file=$doc; else file="$dir/$path"; fi
        if [ ! -e "$file" ]; then
            echo "readme: $doc: link to $target: $file does not exist"
            broken=$((broken + 1))
        elif [ -n "$frag" ] && [ -f "$file" ] && ! anchors "$file" | grep -qxF -e "$frag"; then
            echo "readme: $doc: link to $target: no heading '#$frag' in $file"
            broken=$((broken + 1))
        fi
    done < "$WORK/links"
done
echo "readme: links: $links checked, $broken broken"

[ "$FAIL" -eq 0 ] && [ "$broken" -eq 0 ]
