#!/bin/sh
# cli.sh BUILD - tests of the pdc command-line tool (and of train_digits' --plan phase), run by `make test-cli`.
# Every test checks the exit status and what the tool printed. BUILD holds pdc, make_demo_model and
# train_digits (default: build).
# Ends with "cli: N passed, M failed" and exits non-zero if any test failed.

BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PDC="$BUILD/pdc"
GEN="$BUILD/make_demo_model"
DIGITS="$ROOT/test/data/digits.bin"

T=$(mktemp -d "${TMPDIR:-/tmp}/pdc-cli.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM

PASS=0
FAIL=0
NAME=
BAD=

# run CMD [ARG]... : stdout to $T/out, stderr to $T/err, exit status in $rc.
run() {
    rc=0
    "$@" >"$T/out" 2>"$T/err" || rc=$?
}
begin() {
    NAME=$1
    BAD=
}
bad() {
    BAD="$BAD    - $*
"
}
expect_rc() { [ "$rc" = "$1" ] || bad "exit status $rc, expected $1"; }
expect_out() { grep -q -F -e "$1" "$T/out" || bad "stdout lacks '$1'"; }
expect_err() { grep -q -F -e "$1" "$T/err" || bad "stderr lacks '$1'"; }
expect_out_re() { grep -q -E -e "$1" "$T/out" || bad "stdout does not match /$1/"; }
expect_err_re() { grep -q -E -e "$1" "$T/err" || bad "stderr does not match /$1/"; }
expect_no_out() { [ ! -s "$T/out" ] || bad "stdout is not empty"; }
expect_no_err() { [ ! -s "$T/err" ] || bad "stderr is not empty"; }
expect_err_lines() {
    n=$(wc -l <"$T/err")
    [ "$n" -eq "$1" ] || bad "stderr has $n lines, expected $1"
}
expect_file_size() {
    if [ ! -f "$1" ]; then
        bad "$1 was not written"
    else
        n=$(wc -c <"$1")
        [ "$n" -eq "$2" ] || bad "$1 has $n bytes, expected $2"
    fi
}
expect_no_file() { [ ! -e "$1" ] || bad "$1 exists but should not"; }
expect_same() { cmp -s "$1" "$2" || bad "$1 and $2 differ"; }
end() {
    if [ -z "$BAD" ]; then
        PASS=$((PASS + 1))
        echo "ok   $NAME"
    else
        FAIL=$((FAIL + 1))
        echo "FAIL $NAME"
        printf '%s' "$BAD"
        echo "    exit status: $rc; stdout (first 5 lines):"
        head -n 5 "$T/out" | sed 's/^/      | /'
        echo "    stderr (first 5 lines):"
        head -n 5 "$T/err" | sed 's/^/      | /'
    fi
}

# The float32 values of a raw little-endian file, one per line.
floats() { od -An -v -tf4 --endian=little "$1" | tr -s ' \t' '\n' | sed '/^$/d'; }

# f32 FILE WORD... : writes float32 values given as 8-digit hex bit patterns (3f800000 = 1.0), little-endian.
f32() {
    f32_out=$1
    shift
    : >"$f32_out"
    for w in "$@"; do
        b0=${w#??????}
        b1=${w#????}
        b1=${b1%??}
        b2=${w#??}
        b2=${b2%????}
        b3=${w%??????}
        printf "\\$(printf %03o "0x$b0")\\$(printf %03o "0x$b1")\\$(printf %03o "0x$b2")\\$(printf %03o "0x$b3")" \
            >>"$f32_out"
    done
}

# expect_floats FILE V... : FILE holds exactly these float values (compared as %g).
expect_floats() {
    ef_file=$1
    shift
    if [ ! -f "$ef_file" ]; then
        bad "$ef_file was not written"
        return
    fi
    ef_got=$(floats "$ef_file" | awk '{ printf "%s%g", (NR > 1 ? " " : ""), $1 }')
    [ "$ef_got" = "$*" ] || bad "$ef_file holds '$ef_got', expected '$*'"
}

for f in "$PDC" "$GEN" "$DIGITS"; do
    if [ ! -e "$f" ]; then
        echo "cli.sh: $f is missing (build with 'make test-cli')" >&2
        echo "cli: 0 passed, 1 failed"
        exit 1
    fi
done

MODEL="$T/digits.pdc"
IN="$T/digit0.bin"

# ---------------------------------------------------------------- setup: the demo model

begin "make_demo_model builds the demo model and the demo input"
run "$GEN" "$MODEL" "$DIGITS" "$IN"
expect_rc 0
expect_out "wrote"
expect_out "random"
expect_file_size "$IN" 256
[ -s "$MODEL" ] || bad "$MODEL was not written"
end

begin "make_demo_model without arguments is a usage error"
run "$GEN"
expect_rc 2
expect_err "usage: make_demo_model"
end

# ---------------------------------------------------------------- help and version

begin "pdc --help exits 0 and lists the commands and the model formats, .onnx included"
run "$PDC" --help
expect_rc 0
expect_out "usage: pdc COMMAND"
expect_out "inspect"
expect_out "run"
expect_out "convert"
expect_out "binary .pdc, IR text .pdcir or ONNX .onnx"
expect_no_err
end

begin "pdc run --help shows every target pdc run accepts"
run "$PDC" run --help
expect_rc 0
expect_out "usage: pdc run MODEL [MODEL... --group] [--target ref|cpu|gpu]"
expect_out "ref (the reference interpreter, the default), cpu"
expect_out "gpu (NVIDIA, through the CUDA driver)"
run "$PDC" run "$MODEL" --input
expect_rc 2
expect_err "usage: pdc run MODEL [MODEL... --group] [--target ref|cpu|gpu]"
end

begin "pdc --version prints the header's version"
run "$PDC" --version
expect_rc 0
want=$(sed -n 's/^#define PDC_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$ROOT/include/pdc.h" | paste -sd.)
[ "$(cat "$T/out")" = "$want" ] || bad "printed '$(cat "$T/out")', expected '$want'"
end

for cmd in inspect run convert; do
    begin "pdc $cmd --help exits 0 with the command's usage"
    run "$PDC" "$cmd" --help
    expect_rc 0
    expect_out "usage: pdc $cmd"
    expect_no_err
    end
done

begin "pdc help run is the same as pdc run --help"
run "$PDC" help run
expect_rc 0
expect_out "usage: pdc run"
cp "$T/out" "$T/help1"
run "$PDC" run --help
expect_same "$T/help1" "$T/out"
end

# ---------------------------------------------------------------- usage errors: exit 2

begin "no command is a usage error"
run "$PDC"
expect_rc 2
expect_err "usage:"
expect_no_out
end

begin "unknown command exits 2 and names it"
run "$PDC" frobnicate "$MODEL"
expect_rc 2
expect_err "unknown command 'frobnicate'"
expect_err "usage:"
end

begin "inspect without MODEL exits 2"
run "$PDC" inspect
expect_rc 2
expect_err "missing MODEL"
expect_err "usage: pdc inspect"
end

begin "run without MODEL exits 2"
run "$PDC" run --input "$IN"
expect_rc 2
expect_err "missing MODEL"
end

begin "run without --input exits 2"
run "$PDC" run "$MODEL"
expect_rc 2
expect_err "missing --input"
end

begin "convert without -o exits 2"
run "$PDC" convert "$MODEL"
expect_rc 2
expect_err "missing -o"
end

begin "unknown option exits 2 and names it"
run "$PDC" inspect "$MODEL" --bogus
expect_rc 2
expect_err "unknown option '--bogus'"
end

begin "option without its value exits 2"
run "$PDC" run "$MODEL" --input
expect_rc 2
expect_err "'--input' needs a value"
end

begin "a flag given a value exits 2"
run "$PDC" run "$MODEL" --input "$IN" --print=yes
expect_rc 2
expect_err "takes no value"
end

begin "a second MODEL argument exits 2 (without --group; where groups do not apply, always)"
run "$PDC" inspect "$MODEL" "$MODEL"
expect_rc 2
expect_err "several models: add --group"
run "$PDC" prune "$MODEL" "$MODEL" -o "$T/x.pdc"
expect_rc 2
expect_err "unexpected argument"
end

for spec in image image= =1x1x8x8 image=1xax8x8 image=1x1x8x image=0x1x8x8 image=-1x1x8x8; do
    begin "malformed --shape '$spec' exits 2"
    run "$PDC" inspect "$MODEL" --shape "$spec"
    expect_rc 2
    expect_err "bad --shape"
    expect_no_out
    end
done

begin "convert to an unknown extension exits 2"
run "$PDC" convert "$MODEL" -o "$T/out.xyz"
expect_rc 2
expect_err ".pdc"
expect_no_file "$T/out.xyz"
end

begin "--elide-weights with binary output exits 2"
run "$PDC" convert "$MODEL" -o "$T/x.pdc" --elide-weights
expect_rc 2
expect_err "--elide-weights"
end

begin "bad --threads exits 2"
run "$PDC" run "$MODEL" --input "$IN" --threads many
expect_rc 2
expect_err "--threads"
end

# ---------------------------------------------------------------- model and input errors: exit 1

for cmd in inspect run convert; do
    begin "$cmd of a nonexistent file exits 1 with one line naming the file"
    case $cmd in
    inspect) run "$PDC" inspect "$T/no-such-model.pdc" ;;
    run) run "$PDC" run "$T/no-such-model.pdc" --input "$IN" ;;
    convert) run "$PDC" convert "$T/no-such-model.pdc" -o "$T/x.pdcir" ;;
    esac
    expect_rc 1
    expect_err "pdc: $T/no-such-model.pdc: "
    expect_err_lines 1
    expect_no_out
    end
done

printf 'this is not a model\x01\x02\x03 {{{ garbage\n' >"$T/garbage.pdc"
begin "a garbage file exits 1 with one line naming it"
run "$PDC" inspect "$T/garbage.pdc"
expect_rc 1
expect_err "pdc: $T/garbage.pdc: "
expect_err_lines 1
end

head -c 100 "$MODEL" >"$T/truncated.pdc"
begin "a truncated .pdc exits 1 with one line naming it"
run "$PDC" run "$T/truncated.pdc" --input "$IN"
expect_rc 1
expect_err "pdc: $T/truncated.pdc: "
expect_err_lines 1
end

head -c 200 "$IN" >"$T/short.bin"
begin "input file of the wrong size exits 1 with expected and got bytes"
run "$PDC" run "$MODEL" --input "$T/short.bin" --output "$T/never.bin"
expect_rc 1
expect_err "pdc: $T/short.bin: "
expect_err "expected 256 bytes"
expect_err "got 200 bytes"
expect_err "1x1x8x8"
expect_err_lines 1
expect_no_file "$T/never.bin"
end

begin "a missing input file exits 1 naming it"
run "$PDC" run "$MODEL" --input "$T/no-such-input.bin"
expect_rc 1
expect_err "pdc: $T/no-such-input.bin: "
expect_err_lines 1
end

begin "too many --input files exits 1 naming the model's inputs"
run "$PDC" run "$MODEL" --input "$IN" --input "$IN"
expect_rc 1
expect_err "pdc: $MODEL: "
expect_err "'image' 1x1x8x8"
expect_err "got 2 --input files"
end

begin "more --output files than outputs exits 1"
run "$PDC" run "$MODEL" --input "$IN" --output "$T/o1.bin" --output "$T/o2.bin"
expect_rc 1
expect_err "got 2 --output files"
expect_no_file "$T/o1.bin"
end

begin "unknown target exits 1 naming the target"
run "$PDC" run "$MODEL" --target no-such-target --input "$IN"
expect_rc 1
expect_err "pdc: $MODEL: "
expect_err "no-such-target"
expect_err_lines 1
end

begin "--shape of an unknown input exits 1"
run "$PDC" inspect "$MODEL" --shape nosuchinput=1x1x8x8
expect_rc 1
expect_err "pdc: $MODEL: "
expect_err "nosuchinput"
expect_err_lines 1
end

begin "convert into a missing directory exits 1 naming the output"
run "$PDC" convert "$MODEL" -o "$T/no/such/dir/x.pdc"
expect_rc 1
expect_err "pdc: $T/no/such/dir/x.pdc: "
expect_err_lines 1
end

begin "output into a missing directory exits 1 naming it"
run "$PDC" run "$MODEL" --input "$IN" --output "$T/no/such/dir/o.bin"
expect_rc 1
expect_err "pdc: $T/no/such/dir/o.bin: "
expect_err_lines 1
end

# ---------------------------------------------------------------- inspect

begin "inspect shows the layers, pattern and block sparsity, and the compression"
run "$PDC" inspect "$MODEL"
expect_rc 0
expect_no_err
expect_out "inputs:"
expect_out "image"
expect_out "1x1x8x8"
expect_out "outputs:"
expect_out "probs"
for col in name op input output sparsity weights kept MFLOPs; do expect_out "$col"; done
for layer in conv1 conv2 fc softmax; do expect_out "$layer"; done
grep -E '(^| )conv2 ' "$T/out" | grep -q pattern || bad "the conv2 row does not say 'pattern'"
grep -E '(^| )fc ' "$T/out" | grep -q block || bad "the fc row does not say 'block'"
expect_out "total"
expect_out_re "compression: [0-9]+\.[0-9]+x"
expect_out_re "FLOP reduction: [0-9]+\.[0-9]+x"
# demo model: weights 144+16 + 4608+32 + 20480+10 = 25290; kept 144+16 + 256*4+32 + 1024*4+10 = 5322
expect_out "(5322/25290 weights kept)"
end

begin "inspect with a matching --shape (both option forms) exits 0"
run "$PDC" inspect "$MODEL" --shape image=1x1x8x8
expect_rc 0
expect_out "1x1x8x8"
expect_out "compression:"
cp "$T/out" "$T/inspect1"
run "$PDC" inspect "$MODEL" --shape=image=1x1x8x8
expect_rc 0
expect_same "$T/inspect1" "$T/out"
end

# ---------------------------------------------------------------- run

begin "run on the demo model writes 40 bytes of softmax probabilities summing to 1"
run "$PDC" run "$MODEL" --target ref --input "$IN" --output "$T/probs.bin"
expect_rc 0
expect_no_err
expect_no_out
expect_file_size "$T/probs.bin" 40
if [ -f "$T/probs.bin" ]; then
    floats "$T/probs.bin" >"$T/probs.txt"
    [ "$(wc -l <"$T/probs.txt")" -eq 10 ] || bad "expected 10 floats, got $(wc -l <"$T/probs.txt")"
    awk '{ s += $1; if (!($1 >= 0 && $1 <= 1)) bad = 1 } END { exit !(bad == 0 && s > 0.9999 && s < 1.0001) }' \
        "$T/probs.txt" || bad "values are not probabilities summing to 1: $(tr '\n' ' ' <"$T/probs.txt")"
fi
end

begin "--opt=value forms and the default target give the same bytes"
run "$PDC" run "$MODEL" --input="$IN" --output="$T/probs2.bin"
expect_rc 0
expect_same "$T/probs.bin" "$T/probs2.bin"
run "$PDC" run "$MODEL" --target=ref -i "$IN" -o "$T/probs3.bin" --threads 1
expect_rc 0
expect_same "$T/probs.bin" "$T/probs3.bin"
end

begin "run without --output prints the 10 output values"
run "$PDC" run "$MODEL" --input "$IN"
expect_rc 0
expect_out "probs [1x10]:"
n=$(sed 's/^[^:]*://' "$T/out" | wc -w)
[ "$n" -eq 10 ] || bad "printed $n values, expected 10"
end

begin "--print prints the values and still writes the file"
run "$PDC" run "$MODEL" --input "$IN" --output "$T/probs4.bin" --print
expect_rc 0
expect_out "probs [1x10]:"
expect_same "$T/probs.bin" "$T/probs4.bin"
end

begin "printed values agree with the written file"
run "$PDC" run "$MODEL" --input "$IN"
expect_rc 0
sed 's/^[^:]*://' "$T/out" | tr -s ' ' '\n' | sed '/^$/d' >"$T/printed.txt"
if [ -f "$T/probs.bin" ] && [ "$(wc -l <"$T/printed.txt")" -eq 10 ]; then
    floats "$T/probs.bin" | paste - "$T/printed.txt" |
        awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5) exit 1 }' || bad "printed values differ from the file"
else
    bad "no probs.bin or not 10 printed values"
fi
end

# ---------------------------------------------------------------- convert

begin "convert .pdc -> .pdcir -> .pdc; all three run to identical bytes"
run "$PDC" convert "$MODEL" -o "$T/m.pdcir"
expect_rc 0
expect_no_err
run "$PDC" convert "$T/m.pdcir" -o "$T/m2.pdc"
expect_rc 0
run "$PDC" run "$T/m.pdcir" --input "$IN" --output "$T/probs-text.bin"
expect_rc 0
run "$PDC" run "$T/m2.pdc" --input "$IN" --output "$T/probs-back.bin"
expect_rc 0
expect_same "$T/probs.bin" "$T/probs-text.bin"
expect_same "$T/probs.bin" "$T/probs-back.bin"
end

begin "the text form survives a second round trip unchanged"
run "$PDC" convert "$T/m2.pdc" -o "$T/m3.pdcir"
expect_rc 0
expect_same "$T/m.pdcir" "$T/m3.pdcir"
end

begin "inspect agrees on the .pdc and the .pdcir"
run "$PDC" inspect "$MODEL"
sed 1d "$T/out" >"$T/insp-bin"
run "$PDC" inspect "$T/m.pdcir"
expect_rc 0
expect_out "conv2"
sed 1d "$T/out" >"$T/insp-text"
expect_same "$T/insp-bin" "$T/insp-text"
end

begin "convert --elide-weights writes a smaller text form; -o - prints it"
run "$PDC" convert "$MODEL" -o "$T/elided.pdcir" --elide-weights
expect_rc 0
[ -f "$T/elided.pdcir" ] || bad "$T/elided.pdcir was not written"
if [ -f "$T/elided.pdcir" ] && [ -f "$T/m.pdcir" ]; then
    [ "$(wc -c <"$T/elided.pdcir")" -lt "$(wc -c <"$T/m.pdcir")" ] || bad "elided form is not smaller"
    grep -q elided "$T/elided.pdcir" || bad "elided form does not say 'elided'"
fi
run "$PDC" convert "$MODEL" -o - --elide-weights
expect_rc 0
expect_out "pdcir 1"
[ -f "$T/elided.pdcir" ] && { cmp -s "$T/out" "$T/elided.pdcir" || bad "'-o -' differs from the file"; }
end

# ---------------------------------------------------------------- several inputs and outputs

cat >"$T/two.pdcir" <<'END'
pdcir 1
model "two"
input a : f32[1,4]
input b : f32[1,4]
layer add = add(a, b) -> (s : f32[1,4])
layer relu = relu(a) -> (r : f32[1,4])
output s
output r
END
f32 "$T/a.bin" 3f800000 c0000000 40400000 c0800000 # 1 -2 3 -4
f32 "$T/b.bin" 3f800000 40000000 40400000 40800000 # 1 2 3 4

begin "two inputs, one --output writes the first output only"
run "$PDC" run "$T/two.pdcir" --input "$T/a.bin" --input "$T/b.bin" --output "$T/s.bin"
expect_rc 0
expect_no_out
expect_floats "$T/s.bin" 2 0 6 0
end

begin "two inputs, two outputs, --print prints both"
run "$PDC" run "$T/two.pdcir" --input "$T/a.bin" --input "$T/b.bin" --output "$T/s2.bin" --output "$T/r2.bin" --print
expect_rc 0
expect_floats "$T/s2.bin" 2 0 6 0
expect_floats "$T/r2.bin" 1 0 3 0
expect_out "s [1x4]: 2 0 6 0"
expect_out "r [1x4]: 1 0 3 0"
end

begin "inputs are taken in order"
run "$PDC" run "$T/two.pdcir" --input "$T/b.bin" --input "$T/a.bin" --output "$T/s3.bin" --output "$T/r3.bin"
expect_rc 0
expect_floats "$T/r3.bin" 1 2 3 4
end

begin "one --input for two inputs exits 1 listing them"
run "$PDC" run "$T/two.pdcir" --input "$T/a.bin"
expect_rc 1
expect_err "has 2 inputs ('a' 1x4, 'b' 1x4), got 1 --input file"
expect_err_lines 1
end

begin "inspect lists both inputs and outputs"
run "$PDC" inspect "$T/two.pdcir"
expect_rc 0
for io in "  a " "  b " "  s " "  r "; do expect_out "$io"; done
end

# ---------------------------------------------------------------- symbolic input dims and --shape

cat >"$T/sym.pdcir" <<'END'
pdcir 1
model "sym"
input x : f32[?,4]
const w : f32[2,4] = [1, 0, 0, 0, 0, 1, 0, 0]
layer fc = fc(x, w) -> (y)
output y
END
f32 "$T/x2.bin" 3f800000 40000000 40400000 40800000 40a00000 40c00000 40e00000 41000000 # 1..8

begin "inspect of a symbolic model shows '?' dims and says how to fix them"
run "$PDC" inspect "$T/sym.pdcir"
expect_rc 0
expect_out "?x4"
expect_out "--shape"
end

begin "inspect --shape fixes the symbolic dim"
run "$PDC" inspect "$T/sym.pdcir" --shape x=3x4
expect_rc 0
expect_out "3x4"
expect_out "3x2"
end

begin "run of a symbolic model without --shape exits 1"
run "$PDC" run "$T/sym.pdcir" --input "$T/x2.bin"
expect_rc 1
expect_err "pdc: $T/sym.pdcir: "
expect_err_lines 1
end

begin "run --shape x=2x4 runs a batch of two"
run "$PDC" run "$T/sym.pdcir" --shape x=2x4 --input "$T/x2.bin" --output "$T/y2.bin"
expect_rc 0
expect_floats "$T/y2.bin" 1 2 5 6
end

begin "run --shape x=1x4 with a 2x4 input file exits 1 with expected and got"
run "$PDC" run "$T/sym.pdcir" --shape x=1x4 --input "$T/x2.bin"
expect_rc 1
expect_err "expected 16 bytes"
expect_err "got 32 bytes"
end

begin "--shape that contradicts a fixed dim exits 1"
run "$PDC" run "$MODEL" --shape image=2x1x8x8 --input "$IN"
expect_rc 1
expect_err "pdc: $MODEL: "
expect_err "image"
end

# ---------------------------------------------------------------- prune (passes; added with issue 4)

# The demo model without its sparsity lines is the dense digits CNN.
"$PDC" convert "$MODEL" -o "$T/digits.pdcir" >/dev/null 2>&1
grep -v '^ *sparsity' "$T/digits.pdcir" >"$T/dense.pdcir"

begin "prune with defaults: pattern + connectivity pruning of conv2; the stem conv1 stays dense, and both are reported"
run "$PDC" prune "$T/dense.pdcir" -o "$T/pruned.pdc"
expect_rc 0
expect_out "wrote $T/pruned.pdc"
expect_out "pruned 1 layer:"
expect_out_re "^  conv2  pattern 8x4 \+ connectivity 50%  kept 1056/4640 \(22\.8%\)$"
expect_out "left alone by the defaults (1 layer):"
expect_out_re "^  conv1  stem: reads the graph input; --include-stem prunes it$"
expect_out_re "^weights: 21706 of 25290 kept \(compression [0-9.]+x\)"
expect_out "FLOPs:"
expect_no_err
run "$PDC" inspect "$T/pruned.pdc"
expect_out_re "conv1 .* dense "
expect_out_re "conv2 .*pattern 3x3: 8 patterns, 50% kernels kept"
end

begin "prune --include-stem prunes conv1 too; --layers conv1 names it, which overrides the default"
run "$PDC" prune "$T/dense.pdcir" -o "$T/stem.pdc" --include-stem
expect_rc 0
expect_out "pruned 2 layers:"
expect_out_re "^  conv1  pattern 8x4 \+ connectivity 50%  kept 48/160 \(30\.0%\)$"
grep -q "left alone" "$T/out" && bad "a layer was left alone"
run "$PDC" inspect "$T/stem.pdc"
expect_out_re "conv1 .*pattern 3x3: 8 patterns, 50% kernels kept"
run "$PDC" prune "$T/dense.pdcir" -o "$T/stem2.pdc" --layers conv1
expect_rc 0
expect_out "pruned 1 layer:"
expect_out_re "^  conv1  pattern 8x4 \+ connectivity 50%  kept 48/160"
grep -q "conv2" "$T/out" && bad "conv2 was mentioned"
end

# A model with a 7x7 stem, a 5x5 conv and a 1x1 conv (zero weights: only which layers are pruned matters).
cat >"$T/kernels.pdcir" <<'EOF'
pdcir 1
model "kernels"
input x : f32[1,2,12,12]
const sw : f32[4,2,7,7] = dense<elided>
const bw : f32[4,4,5,5] = dense<elided>
const dw : f32[4,4,1,1] = dense<elided>
layer stem = conv(x, sw) -> (s : f32[1,4,12,12]) {pads=[3,3,3,3]}
layer big = conv(s, bw) -> (b : f32[1,4,12,12]) {pads=[2,2,2,2]}
layer down = conv(b, dw) -> (y : f32[1,4,12,12])
output y
EOF

begin "prune names each layer a default left alone, with the flag that prunes it"
run "$PDC" prune "$T/kernels.pdcir" -o "$T/k.pdc" --block 1x4 --patterns 4
expect_rc 0
expect_out "left alone by the defaults (3 layers):"
expect_out_re "^  stem  stem: reads the graph input; --include-stem prunes it$"
expect_out_re "^  big   5x5 kernels: --pattern-kernels 3x3,5x5 prunes them$"
expect_out_re "^  down  1x1 conv: --block-convs prunes it$"
grep -q "^pruned" "$T/out" && bad "something was pruned"
expect_no_err
end

begin "prune --include-stem --pattern-kernels 5x5,7x7 --block-convs prunes every layer"
run "$PDC" prune "$T/kernels.pdcir" -o "$T/k.pdc" --block 1x4 --patterns 4 --include-stem --pattern-kernels 5x5,7x7 --block-convs
expect_rc 0
expect_out "pruned 3 layers:"
expect_out_re "^  stem  pattern 4x4 \+ connectivity 50%  kept 16/392 \(4\.1%\)$"
expect_out_re "^  big   pattern 4x4 \+ connectivity 50%  kept 32/400 \(8\.0%\)$"
expect_out_re "^  down  block 1x4 50% +kept 8/16 \(50\.0%\)$"
grep -q "left alone" "$T/out" && bad "a layer was left alone"
run "$PDC" inspect "$T/k.pdc"
expect_out_re "big .*pattern 5x5: 4 patterns"
expect_out_re "down .*block 1x4"
run "$PDC" prune "$T/kernels.pdcir" -o "$T/k.pdc" --include-stem --pattern-kernels all
expect_rc 0
expect_out "pruned 2 layers:"
run "$PDC" prune "$T/kernels.pdcir" -o "$T/k.pdc" --include-stem --pattern-kernels 7x7
expect_rc 0
expect_out "pruned 1 layer:"
expect_out_re "^  big   5x5 kernels: --pattern-kernels 7x7,5x5 prunes them$"
end

begin "prune --block-convs without --block is a usage error saying what it modifies"
run "$PDC" prune "$T/kernels.pdcir" -o "$T/bad.pdc" --block-convs
expect_rc 2
expect_err "--block-convs lets --block take 1x1 convs: give --block RxC[:RATE] too"
expect_no_file "$T/bad.pdc"
end

begin "prune --pattern-kernels with a bad list is a usage error naming the option and the value"
run "$PDC" prune "$T/kernels.pdcir" -o "$T/bad.pdc" --pattern-kernels 3x4
expect_rc 2
expect_err "option pattern_kernels: 3x4 in \"3x4\" cannot be pattern-pruned (kernel sizes must be odd, at least 3x3"
expect_no_file "$T/bad.pdc"
run "$PDC" prune "$T/kernels.pdcir" -o "$T/bad.pdc" --pattern-kernels 3x3,five
expect_rc 2
expect_err "option pattern_kernels: \"five\" in \"3x3,five\" is not a kernel size"
run "$PDC" prune "$T/kernels.pdcir" -o "$T/bad.pdc" --pattern-kernels
expect_rc 2
expect_err "'--pattern-kernels' needs a value"
run "$PDC" prune "$T/kernels.pdcir" -o "$T/bad.pdc" --include-stem=1
expect_rc 2
expect_err "takes no value"
expect_no_file "$T/bad.pdc"
end

begin "prune of an ONNX ResNet: the stem and the 1x1 downsample convs are left alone and named"
run "$PDC" prune "$ROOT/test/data/onnx/resnet_small.onnx" -o "$T/r.pdc" --connectivity 0.5 --block 1x4:0.8
expect_rc 0
expect_out "pruned 7 layers:"
expect_out_re "^  /layers/layers.2/conv2/Conv +pattern 8x4 \+ connectivity 50% +kept 8192/36864 \(22\.2%\)$"
expect_out_re "^  /fc/Gemm +block 1x4 80% +kept 138/650 \(21\.2%\)$"
expect_out "left alone by the defaults (3 layers):"
expect_out_re "^  /stem/stem.0/Conv +stem: reads the graph input; --include-stem prunes it$"
expect_out_re "^  /layers/layers.1/down/down.0/Conv +1x1 conv: --block-convs prunes it$"
expect_out_re "^  /layers/layers.2/down/down.0/Conv +1x1 conv: --block-convs prunes it$"
expect_out "weights: 20858 of 78714 kept"
run "$PDC" prune "$ROOT/test/data/onnx/resnet_small.onnx" -o "$T/r2.pdc" --connectivity 0.5 --block 1x4:0.8 --block-convs
expect_rc 0
expect_out "pruned 9 layers:"
expect_out_re "^  /layers/layers.1/down/down.0/Conv +block 1x4 80% +kept 104/512 \(20\.3%\)$"
expect_out "left alone by the defaults (1 layer):"
end

begin "prune is deterministic: the same input and options give identical files"
run "$PDC" prune "$T/dense.pdcir" -o "$T/pruned2.pdc"
expect_rc 0
expect_same "$T/pruned.pdc" "$T/pruned2.pdc"
end

begin "prune --block 1x4:0.8 --skip conv1: block-prunes fc, leaves conv1 dense"
run "$PDC" prune "$T/dense.pdcir" -o "$T/blk.pdcir" --block 1x4:0.8 --patterns 4 --skip conv1
expect_rc 0
run "$PDC" inspect "$T/blk.pdcir"
expect_out_re "conv1 .* dense "
expect_out_re "conv2 .*pattern 3x3: 4 patterns"
expect_out_re "fc .*block 1x4: 20% blocks kept"
end

begin "prune --passes with canonicalize, reorder and plan; the result runs"
run "$PDC" prune "$T/dense.pdcir" -o "$T/full.pdc" --passes canonicalize,prune-pattern,prune-connectivity,reorder,plan
expect_rc 0
expect_out_re "^memory plan: activation arena [0-9]+ bytes \(activations [0-9]+ bytes unplanned\)"
run "$PDC" run "$T/full.pdc" --input "$IN" --output "$T/full.bin"
expect_rc 0
expect_file_size "$T/full.bin" 40
end

begin "prune --print-after all prints the IR after each pass on stderr"
run "$PDC" prune "$T/dense.pdcir" -o "$T/p.pdc" --print-after all
expect_rc 0
expect_err "# IR after pass 'prune-pattern'"
expect_err "# IR after pass 'prune-connectivity'"
expect_err "sparsity pattern 3x3"
end

begin "prune -o OUT.onnx writes ONNX that reads back and runs like the .pdc"
run "$PDC" prune "$T/dense.pdcir" -o "$T/pruned.onnx"
expect_rc 0
expect_out "wrote $T/pruned.onnx"
run "$PDC" run "$T/pruned.onnx" --input "$IN" --output "$T/y_onnx.bin"
expect_rc 0
run "$PDC" run "$T/pruned.pdc" --input "$IN" --output "$T/y_pdc.bin"
expect_rc 0
expect_same "$T/y_onnx.bin" "$T/y_pdc.bin"
run "$PDC" inspect "$T/pruned.onnx"
expect_out_re "conv2 .*pattern 3x3"
end

begin "prune --patterns 57 is a usage error naming the layer and the limit"
run "$PDC" prune "$T/dense.pdcir" -o "$T/bad.pdc" --patterns 57
expect_rc 2
expect_err "layer 'conv2': 57 patterns requested, but only 56 patterns"
expect_no_file "$T/bad.pdc"
end

begin "prune: a rate outside [0, 1), an absent layer, an unknown pass are usage errors"
run "$PDC" prune "$T/dense.pdcir" -o "$T/bad.pdc" --connectivity 1.5
expect_rc 2
expect_err "rate 1.5 is outside [0, 1)"
run "$PDC" prune "$T/dense.pdcir" -o "$T/bad.pdc" --layers conv9
expect_rc 2
expect_err "has no layer 'conv9'"
run "$PDC" prune "$T/dense.pdcir" -o "$T/bad.pdc" --passes prune-paterns
expect_rc 2
expect_err "unknown pass 'prune-paterns'"
run "$PDC" prune "$T/dense.pdcir" -o "$T/bad.pdc" --pattern-size 10
expect_rc 2
expect_err "pattern size 10 is outside 1..9"
run "$PDC" prune "$T/dense.pdcir" -o "$T/bad.txt"
expect_rc 2
expect_err "OUT must end in .pdc (binary), .pdcir (text) or .onnx"
expect_no_file "$T/bad.pdc"
end

begin "inspect prints each pattern set as bitmasks and as drawn 3x3 windows"
run "$PDC" inspect "$MODEL"
expect_rc 0
expect_out "pattern sets (bit p = row*kw + col):"
expect_out_re "conv2: 3x3( 0x[0-9a-f]+){8}$"
# every drawn pattern keeps the centre: the middle row of the drawing has '#' in each middle column
mid=$(grep -A2 'conv2: 3x3' "$T/out" | sed -n 3p)
[ "$(printf '%s\n' "$mid" | grep -o '.#.' | wc -l)" -ge 8 ] || bad "drawn patterns lack their centre: '$mid'"
end

begin "convert to .onnx and back runs identically and keeps the sparsity"
run "$PDC" convert "$MODEL" -o "$T/rt.onnx"
expect_rc 0
run "$PDC" run "$T/rt.onnx" --input "$IN" --output "$T/rt_onnx.bin"
expect_rc 0
run "$PDC" run "$MODEL" --input "$IN" --output "$T/rt_pdc.bin"
expect_rc 0
expect_same "$T/rt_onnx.bin" "$T/rt_pdc.bin"
run "$PDC" inspect "$T/rt.onnx"
expect_rc 0
expect_out "(5322/25290 weights kept)"
run "$PDC" convert "$MODEL" -o "$T/rt.onnx" --elide-weights
expect_rc 2
expect_err "--elide-weights applies only to text output"
end

# ---------------------------------------------------------------- latency model: predict, calibrate, plan (issue 39)

begin "predict prints per-layer and total ms on 1 and N threads; without a profile it says defaults"
run env XDG_CACHE_HOME="$T/cache" "$PDC" predict "$T/dense.pdcir" --threads 2
expect_rc 0
expect_out "target: cpu, threads: 2, profile: built-in defaults"
expect_out_re "^ +0  conv1 +conv +"
expect_out "1-thread ms"
expect_out_re "^ +total +[0-9.]+ +[0-9.]+$"
expect_err "pdc predict: no latency profile for this host"
expect_err "pdc calibrate writes $T/cache/pdc/profiles/latency-"
end

begin "predict --json: one object on the last line with total_ms and layers (name, predicted_ms)"
run env XDG_CACHE_HOME="$T/cache" "$PDC" predict "$T/dense.pdcir" --threads 2 --json
expect_rc 0
tail -n 1 "$T/out" | grep -q '^{"model": .*"total_ms": [0-9.e-]*, .*"layers": \[{"name": "conv1", "op": "conv", "predicted_ms": [0-9.e-]*' ||
    bad "last line is not the JSON object"
expect_out '"profile": "defaults"'
n=$(tail -n 1 "$T/out" | grep -o '"predicted_ms"' | wc -l)
[ "$n" -eq 7 ] || bad "$n layers in the JSON, expected 7"
end

begin "predict --measure times the model layer by layer and prints the error"
run env XDG_CACHE_HOME="$T/cache" "$PDC" predict "$T/dense.pdcir" --threads 1 --measure --repeat 3
expect_rc 0
expect_out "measured ms"
expect_out_re "^ +total( +[0-9.]+){3} +[-+][0-9.]+%$"
run env XDG_CACHE_HOME="$T/cache" "$PDC" predict "$T/dense.pdcir" --measure --repeat 3 --json
expect_out '"measured_total_ms": '
expect_out '"measured_ms": '
end

begin "predict: a damaged or foreign profile is refused with a message and the defaults are used"
printf 'pdc-latency-profile 1\nkey x\n' >"$T/bad-profile.txt"
run env XDG_CACHE_HOME="$T/cache" "$PDC" predict "$T/dense.pdcir" --profile "$T/bad-profile.txt" --json
expect_rc 0
expect_err "$T/bad-profile.txt: latency profile: no crc32 line (truncated?): profile refused, default constants"
expect_out '"profile": "defaults"'
run env XDG_CACHE_HOME="$T/cache" "$PDC" predict "$T/dense.pdcir" --target ref
expect_rc 2
expect_err "only cpu (calibrated) and gpu (roofline) have a latency model, got 'ref'"
run "$PDC" predict "$T/dense.pdcir" --threads -1
expect_rc 2
run "$PDC" predict "$T/dense.pdcir" --batch 0
expect_rc 2
end

begin "predict --target gpu: the roofline of the (emulated) device; without a device the driver's message"
run env PDC_GPU_EMULATE=1 PDC_GPU_EMULATE_PROPS=sms=10,clock_mhz=1000 "$PDC" predict "$T/dense.pdcir" --target gpu --json
expect_rc 0
expect_out '"target": "gpu"'
expect_out '"profile": "roofline"'
run env PDC_CUDA_LIBRARY=/nonexistent/libcuda.so.1 "$PDC" predict "$T/dense.pdcir" --target gpu
expect_rc 1
expect_err "cannot load the CUDA driver library '/nonexistent/libcuda.so.1'"
run env PDC_GPU_EMULATE=1 "$PDC" predict "$T/dense.pdcir" --target gpu --measure
expect_rc 2
expect_err "--measure times layers on the cpu target only"
run env PDC_GPU_EMULATE=1 XDG_CACHE_HOME="$T/cache" "$PDC" inspect "$T/dense.pdcir" --target auto
expect_rc 0
expect_out "gpu predicted "
expect_out "on 'emulated device (PDC_GPU_EMULATE=1)' (roofline: 108 SMs sm_80 at 1410 MHz"
end

begin "predict --batch fixes a symbolic batch dim first (the FLOPs grow with it); a fixed batch is an error"
sed -e 's/f32\[1,1,8,8\]/f32[?,1,8,8]/' -e 's/ -> (\([^ :]*\) : f32\[[0-9,]*\])/ -> (\1)/' "$T/dense.pdcir" >"$T/symbolic.pdcir"
run env XDG_CACHE_HOME="$T/cache" "$PDC" predict "$T/symbolic.pdcir" --batch 4 --json
expect_rc 0
tail -n 1 "$T/out" | grep -q '"name": "conv1", "op": "conv", [^}]*"mflops": 0.073728' || bad "conv1 at batch 4 is not 0.073728 MFLOPs"
run env XDG_CACHE_HOME="$T/cache" "$PDC" predict "$T/dense.pdcir" --batch 4
expect_rc 1
expect_err "--batch: input 'image': shape 4x1x8x8 does not match declared 1x1x8x8"
end

begin "calibrate writes a profile (exit 0) that predict then uses without a note; bad options are usage errors"
run env XDG_CACHE_HOME="$T/cache" "$PDC" calibrate --threads 1 --budget 2 -o "$T/profile.txt"
expect_rc 0
expect_out "wrote $T/profile.txt"
head -n 1 "$T/profile.txt" | grep -q '^pdc-latency-profile 3$' || bad "profile lacks its header"
grep -q '^family conv_sparse ' "$T/profile.txt" || bad "profile lacks family conv_sparse"
run env XDG_CACHE_HOME="$T/cache" "$PDC" predict "$T/dense.pdcir" --profile "$T/profile.txt" --json
expect_rc 0
expect_no_err
expect_out '"profile": "calibrated"'
run "$PDC" calibrate --threads x
expect_rc 2
run "$PDC" calibrate --target gpu
expect_rc 2
expect_err "only cpu can be calibrated"
run env XDG_CACHE_HOME="$T/cache" "$PDC" calibrate --threads 1 --budget 1 -o "$T/profile.txt/p.txt"
expect_rc 1
end

begin "inspect --target auto says which target it chose and why; run --target auto runs it"
run env XDG_CACHE_HOME="$T/cache" "$PDC" inspect "$MODEL" --target auto
expect_rc 0
expect_out "target auto chose cpu: predicted "
expect_out "kernels (target auto):"
run env XDG_CACHE_HOME="$T/cache" "$PDC" run "$MODEL" --target auto --input "$IN" --output "$T/auto.bin"
expect_rc 0
expect_file_size "$T/auto.bin" 40
end

begin "plan: bad budgets and missing -o are usage errors"
run "$PDC" plan "$T/dense.pdcir" --latency-ms 0 -o "$T/plan.pdc"
expect_rc 2
expect_err "--latency-ms expects a budget > 0 ms, got '0'"
run "$PDC" plan "$T/dense.pdcir" --latency-ms -3 -o "$T/plan.pdc"
expect_rc 2
run "$PDC" plan "$T/dense.pdcir" --latency-ms 1
expect_rc 2
expect_err "missing -o OUT"
run "$PDC" plan "$T/dense.pdcir" --latency-ms 1 --refine 11 -o "$T/plan.pdc"
expect_rc 2
expect_err "--refine expects 0..10, got '11'"
expect_no_file "$T/plan.pdc"
end

begin "plan: an infeasible budget prints the fastest plan, writes nothing and exits 1"
run env XDG_CACHE_HOME="$T/cache" "$PDC" plan "$T/dense.pdcir" --latency-ms 0.000001 --threads 1 -o "$T/plan.pdc"
expect_rc 1
expect_out "plan (the fastest the choices allow): prune-pattern,prune-connectivity,prune-block layers=conv2,fc"
expect_err_re "no plan meets 0.000 ms: the fastest plan the choices allow is predicted at [0-9.]+ ms"
expect_no_file "$T/plan.pdc"
end

begin "plan meets a budget between the fastest plan and dense, prints the pdc prune line, and bench times it"
fast=$(sed -n 's/.*predicted at \([0-9.]*\) ms.*/\1/p' "$T/err")
run env XDG_CACHE_HOME="$T/cache" "$PDC" predict "$T/dense.pdcir" --threads 1 --json
dense=$(tail -n 1 "$T/out" | sed 's/.*"total_ms": \([0-9.e-]*\),.*/\1/')
mid=$(awk -v a="$fast" -v b="$dense" 'BEGIN { printf "%.6f", (a + b) / 2 }')
run env XDG_CACHE_HOME="$T/cache" "$PDC" plan "$T/dense.pdcir" --latency-ms "$mid" --threads 1 --repeat 3 -o "$T/plan.pdc"
expect_rc 0
expect_out_re "^plan: prune-"
expect_out "the same with pdc prune:"
expect_out_re "^measured: [0-9.]+ ms \(median of 3 runs"
expect_out "wrote $T/plan.pdc"
pred=$(sed -n 's/^predicted: \([0-9.]*\) ms.*/\1/p' "$T/out")
awk -v p="$pred" -v b="$mid" 'BEGIN { exit !(p <= b + 0.0005) }' || bad "predicted $pred ms is over the budget $mid ms"
cmd=$(sed -n '/the same with pdc prune:/{n;p}' "$T/out" | sed -e "s|$T/plan.pdc|$T/plan2.pdc|" -e "s|^ *pdc prune|'$PDC' prune|")
eval "$cmd" >/dev/null 2>&1 || bad "the printed pdc prune line failed: $cmd"
expect_same "$T/plan.pdc" "$T/plan2.pdc"
run env XDG_CACHE_HOME="$T/cache" "$PDC" bench "$T/plan.pdc" --repeat 2 --warmup 0
expect_rc 0
end

begin "plan --calib/--labels weighs each choice on a calibration set; the two go together; sizes are checked"
label=$(od -An -tu1 -j $((115028 + 1347)) -N1 "$DIGITS" | tr -d ' ')
set -- 00000000 3f800000 40000000 40400000 40800000 40a00000 40c00000 40e00000 41000000 41100000
shift "$label"
f32 "$T/calib-labels.bin" "$1"
run env XDG_CACHE_HOME="$T/cache" "$PDC" plan "$T/dense.pdcir" --latency-ms "$mid" --threads 1 --no-measure \
    --calib "$IN" --labels "$T/calib-labels.bin" -o "$T/plan-calib.pdc"
expect_rc 0
expect_out_re "^plan: prune-"
expect_out "wrote $T/plan-calib.pdc"
run "$PDC" plan "$T/dense.pdcir" --latency-ms 1 --calib "$IN" -o "$T/plan-calib.pdc"
expect_rc 2
expect_err "--calib and --labels go together"
f32 "$T/calib-labels2.bin" 00000000 3f800000
run env XDG_CACHE_HOME="$T/cache" "$PDC" plan "$T/dense.pdcir" --latency-ms 1 --calib "$IN" --labels "$T/calib-labels2.bin" \
    -o "$T/plan-calib2.pdc"
expect_rc 1
expect_err "wrong size: expected 512 bytes (2 samples of 64 floats), got 256 bytes"
expect_no_file "$T/plan-calib2.pdc"
end

begin "train_digits --plan 0.4: planned to 40% of the dense latency (the profile calibrated above) with a calibration set, retrained"
# The plan depends on this host's latency profile: with the built-in constants 40% is out of reach and
# the fastest plan (14.6x fewer weights) retrains to about 0.956; with a calibrated one the fc alone is
# pruned and the accuracy stays within 0.01 of dense (docs/predict.md). The bound here holds for both.
mkdir -p "$T/plan-demo"
run "$BUILD/train_digits" --data "$DIGITS" --out "$T/plan-demo" --no-fc --plan 0.4 --profile "$T/profile.txt" --quiet
expect_rc 0
expect_out_re "^phase=planned test_accuracy=0\.9[0-9]+ params="
dense=$(sed -n 's/^phase=dense test_accuracy=\([0-9.]*\).*/\1/p' "$T/out")
planned=$(sed -n 's/^phase=planned test_accuracy=\([0-9.]*\).*/\1/p' "$T/out")
awk -v d="$dense" -v p="$planned" 'BEGIN { exit !(p != "" && p >= d - 0.03) }' ||
    bad "planned accuracy $planned is more than 0.03 below dense $dense"
expect_out_re "budget [0-9.]+ ms \(40% of dense [0-9.]+ ms\), predicted [0-9.]+ ms( \(no plan meets it: the fastest\))?: prune-"
end

# ---------------------------------------------------------------- the cpu target: kernels, bench

begin "inspect --target cpu lists each layer's kernel"
run env XDG_CACHE_HOME="$T/cache" "$PDC" inspect "$MODEL" --target cpu
expect_rc 0
expect_out "kernels (target cpu):"
expect_out_re "conv2 +jit pattern-sparse conv 3x3, 8 patterns"
expect_out_re "fc +jit block-sparse fc, blocks 1x4"
expect_out_re "softmax +jit softmax, 1 row of 10, "
end

begin "run --target cpu gives the reference's outputs"
run env XDG_CACHE_HOME="$T/cache" "$PDC" run "$MODEL" --target cpu --input "$IN" --output "$T/cpu.bin"
expect_rc 0
run "$PDC" run "$MODEL" --input "$IN" --output "$T/ref.bin"
expect_rc 0
c=$(floats "$T/cpu.bin" | tr '\n' ' ')
r=$(floats "$T/ref.bin" | tr '\n' ' ')
awk -v c="$c" -v r="$r" 'BEGIN { n = split(c, a, " "); split(r, b, " "); m = 0; s = 0
    for (i = 1; i <= n; i++) { d = a[i] - b[i]; if (d < 0) d = -d; if (d > m) m = d; v = b[i] < 0 ? -b[i] : b[i]; if (v > s) s = v }
    exit !(n == 10 && m <= 1e-5 * s) }' || bad "cpu and ref outputs differ: $c / $r"
end

begin "bench prints the median, min and max run time; --json one object"
run env XDG_CACHE_HOME="$T/cache" "$PDC" bench "$MODEL" --repeat 5 --threads 1
expect_rc 0
expect_out "target: cpu, threads: 1"
expect_out_re "^run: median [0-9.]+ ms, min [0-9.]+ ms, max [0-9.]+ ms \(5 runs after 3 warm-up\)$"
run env XDG_CACHE_HOME="$T/cache" "$PDC" bench "$MODEL" --json -n 3 --target ref
expect_rc 0
expect_out_re '^\{"model": ".*", "target": "ref", "threads": 1, "runs": 3, "compile_ms": [0-9.]+, "median_ms": [0-9.]+, "min_ms": [0-9.]+, "max_ms": [0-9.]+\}$'
run "$PDC" bench "$MODEL" --repeat many
expect_rc 2
expect_err "--repeat expects a count"
run "$PDC" bench "$MODEL" --target nosuch
expect_rc 1
expect_err "unknown target 'nosuch'"
end

begin "bench prints the number of threads the runs used: --threads 0 (all cores) resolved, ref 1"
run env XDG_CACHE_HOME="$T/cache" "$PDC" bench "$MODEL" --repeat 1 --warmup 0 --threads 0
expect_rc 0
expect_out "target: cpu, threads: $(nproc) (all cores)"
run env XDG_CACHE_HOME="$T/cache" "$PDC" bench "$MODEL" --repeat 1 --warmup 0 --threads 3 --json
expect_rc 0
expect_out '"target": "cpu", "threads": 3, '
run "$PDC" bench "$MODEL" --repeat 1 --warmup 0 --target ref
expect_rc 0
expect_out "target: ref, threads: 1"
grep -q "threads: 0" "$T/out" && bad "threads: 0 printed"
end

begin "groups: run, bench and inspect several models as one with --group"
run "$PDC" run "$MODEL" "$MODEL" -i "$IN"
expect_rc 2
expect_err "several models: add --group"
run env XDG_CACHE_HOME="$T/cache" "$PDC" run "$MODEL" --target cpu -i "$IN" -o "$T/alone.bin"
expect_rc 0
run env XDG_CACHE_HOME="$T/cache" "$PDC" run "$MODEL" "$MODEL" --group --target cpu -i "$IN" -o "$T/g0.bin" -o "$T/g1.bin"
expect_rc 0
expect_same "$T/g0.bin" "$T/alone.bin"
expect_same "$T/g1.bin" "$T/alone.bin"
# the same model twice: everything but the layer writing each model's output computed once
run "$PDC" inspect "$MODEL" "$MODEL" --group
expect_rc 0
expect_out_re "^group of 2 models: 8 layers \(14 apart; 6 computed once for all\)"
expect_out "0/probs"
expect_out "1/probs"
run env XDG_CACHE_HOME="$T/cache" "$PDC" bench "$MODEL" "$MODEL" --group -n 2 --warmup 0 --json
expect_rc 0
expect_out '"median_ms": '
run "$PDC" bench "$MODEL" "$MODEL" --group --shape nosuch=1x1x8x8
expect_rc 1
expect_err "--shape nosuch: no model of the group has an input of that name"
run "$PDC" convert "$MODEL" "$MODEL" -o "$T/x.pdc"
expect_rc 2
expect_err "unexpected argument"
end

begin "inspect --target cpu says how many of the layer's patterns a kernel uses"
# 90% of conv1's 16 kernels removed: at most 2 of its 56 patterns can be used
run "$PDC" prune "$T/dense.pdcir" -o "$T/few.pdc" --include-stem --patterns 56 --connectivity 0.9
expect_rc 0
run env XDG_CACHE_HOME="$T/cache" "$PDC" inspect "$T/few.pdc" --target cpu
expect_rc 0
expect_out_re "conv1 +jit pattern-sparse conv 3x3, [12] of 56 patterns used, 12% kernels kept"
expect_out_re "conv1: 3x3( 0x[0-9a-f]+){56}$"
run env XDG_CACHE_HOME="$T/cache" "$PDC" inspect "$MODEL" --target cpu
expect_out_re "conv2 +jit pattern-sparse conv 3x3, 8 patterns, "
end

begin "run checks the input file's size before compiling"
head -c 100 "$IN" >"$T/short.bin"
export PDC_CUDA_LIBRARY=/nonexistent/libcuda.so.1
run "$PDC" run "$MODEL" --target gpu --input "$T/short.bin" --output "$T/o.bin"
unset PDC_CUDA_LIBRARY
expect_rc 1
expect_err "pdc: $T/short.bin: wrong size: expected 256 bytes (input 'image' 1x1x8x8 f32), got 100 bytes"
grep -q "libcuda" "$T/err" && bad "compiled before checking the input"
expect_err_lines 1
expect_no_file "$T/o.bin"
run "$PDC" run "$MODEL" --target gpu --input "$IN" --input "$IN"
expect_rc 1
expect_err "the model has 1 input ('image' 1x1x8x8), got 2 --input files"
run "$PDC" run "$MODEL" --input "$T/nonexistent.bin"
expect_rc 1
expect_err "pdc: $T/nonexistent.bin: cannot open: No such file or directory"
end

begin "long steps show a counter on stderr only when it is a terminal"
if command -v script >/dev/null 2>&1; then
    script -qec "env XDG_CACHE_HOME='$T/cache' '$PDC' run '$MODEL' --target cpu --input '$IN' --output '$T/tty.bin'" /dev/null \
        >"$T/tty.txt" 2>&1 </dev/null || bad "pdc run on a terminal failed"
    grep -q "compiling layer 1/7" "$T/tty.txt" || bad "no compile counter on the terminal"
    script -qec "'$PDC' prune '$T/dense.pdcir' -o '$T/tty.pdc'" /dev/null >"$T/tty.txt" 2>&1 </dev/null ||
        bad "pdc prune on a terminal failed"
    grep -q "prune-connectivity: layer 7/7" "$T/tty.txt" || bad "no prune counter on the terminal"
    grep -q "pruned 1 layer:" "$T/tty.txt" || bad "no report after the counter"
else
    echo "    (script(1) not installed: the terminal case is not checked)"
fi
run env XDG_CACHE_HOME="$T/cache" "$PDC" run "$MODEL" --target cpu --input "$IN" --output "$T/notty.bin"
expect_rc 0
expect_no_err
end

begin "compile --target aarch64-linux-gnu writes NAME.h and libNAME.a; a bad cpu fails with the list"
run "$PDC" compile "$MODEL" --target aarch64-linux-gnu --cpu cortex-a55 --name net -o "$T/a64"
expect_rc 0
expect_out "$T/a64/net.h"
expect_out "$T/a64/libnet.a"
grep -q "int net_run(const float \*input, float \*output);" "$T/a64/net.h" || bad "net.h lacks net_run"
head -c 8 "$T/a64/libnet.a" | grep -q '^!<arch>$' || bad "libnet.a is not an ar archive"
run "$PDC" compile "$MODEL" --target aarch64-linux-gnu --cpu cortex-a99 -o "$T/a64bad"
expect_rc 1
expect_err "unknown cpu 'cortex-a99'"
expect_err "cortex-a76"
expect_no_file "$T/a64bad"
end

begin "compile --target nvptx writes NAME.ptx for the arch and the launch list; a bad arch fails with the list"
run "$PDC" compile "$MODEL" --target nvptx --arch sm_90 --name net -o "$T/ptx"
expect_rc 0
expect_out "$T/ptx/net.ptx"
expect_out "$T/ptx/net.launch.txt"
grep -q "^\.target sm_90" "$T/ptx/net.ptx" || bad "net.ptx lacks .target sm_90"
grep -q "\.visible \.entry" "$T/ptx/net.ptx" || bad "net.ptx has no kernel entry"
grep -q "^launch " "$T/ptx/net.launch.txt" || bad "net.launch.txt lists no launch"
run "$PDC" compile "$MODEL" --target nvptx --arch sm_95 -o "$T/ptxbad"
expect_rc 1
expect_err "sm_95"
expect_err "sm_90"
expect_no_file "$T/ptxbad"
end

begin "run --target gpu without a driver library fails with PDC_ERR_NO_DEVICE and names the library"
export PDC_CUDA_LIBRARY=/nonexistent/libcuda.so.1
run "$PDC" run "$MODEL" --target gpu --input "$IN" --output "$T/gpu.bin"
unset PDC_CUDA_LIBRARY
expect_rc 1
expect_err "/nonexistent/libcuda.so.1"
expect_no_file "$T/gpu.bin"
end

begin "run --target gpu on the emulated device (PDC_GPU_EMULATE=1) matches ref"
run "$PDC" run "$MODEL" --target ref --input "$IN" --output "$T/ref.bin"
export PDC_GPU_EMULATE=1
run "$PDC" run "$MODEL" --target gpu --input "$IN" --output "$T/gpu.bin"
unset PDC_GPU_EMULATE
expect_rc 0
expect_file_size "$T/gpu.bin" 40
[ "$(floats "$T/gpu.bin" | awk '{ printf "%.3f ", $1 }')" = "$(floats "$T/ref.bin" | awk '{ printf "%.3f ", $1 }')" ] ||
    bad "gpu and ref probabilities differ"
end

# ---------------------------------------------------------------- hardening (issue #41)

begin "a write error on stdout fails the command (convert -o - > /dev/full)"
if [ -w /dev/full ]; then
    rc=0
    "$PDC" convert "$MODEL" -o - >/dev/full 2>"$T/err" || rc=$?
    expect_rc 1
    expect_err "pdc: <stdout>: write error: No space left on device"
fi
end

begin "saving over a FIFO, a device or a symbolic link is refused and leaves it in place"
mkfifo "$T/fifo.pdc"
run "$PDC" convert "$MODEL" -o "$T/fifo.pdc" # would block forever if it opened the FIFO
expect_rc 1
expect_err "cannot write '$T/fifo.pdc': it is a FIFO; only a regular file is replaced"
[ -p "$T/fifo.pdc" ] || bad "the FIFO was replaced"
ln -s /dev/null "$T/null.pdc"
run "$PDC" convert "$MODEL" -o "$T/null.pdc"
expect_rc 1
expect_err "it is a symbolic link; only a regular file is replaced"
[ -L "$T/null.pdc" ] || bad "the link was replaced"
run "$PDC" run "$MODEL" --input "$IN" --output "$T/fifo.pdc"
expect_rc 1
expect_err "$T/fifo.pdc: cannot write: not a regular file"
end

begin "run -o writes atomically: a failed run leaves the old output file and no temp file"
printf 'old' >"$T/keep.bin"
run "$PDC" run "$MODEL" --input "$IN" --output "$T/keep.bin"
expect_rc 0
expect_file_size "$T/keep.bin" 40
printf 'old' >"$T/keep.bin"
run "$PDC" run "$MODEL" --input "$T/keep.bin" --output "$T/keep.bin"
expect_rc 1
[ "$(cat "$T/keep.bin")" = old ] || bad "the output was touched by a failed run"
ls "$T" | grep -q 'keep.bin.tmp' && bad "a temp file was left"
end

begin "inputs that are not regular files are refused without blocking or reading (/dev/zero, a FIFO)"
run timeout 10 "$PDC" inspect /dev/zero
expect_rc 1
expect_err "cannot read '/dev/zero': a character device, not a regular file"
mkfifo "$T/in.fifo"
run timeout 10 "$PDC" inspect "$T/in.fifo"
expect_rc 1
expect_err "a FIFO, not a regular file"
run timeout 10 "$PDC" run "$MODEL" --input "$T/in.fifo"
expect_rc 1
expect_err "not a regular file"
end

begin "--max-memory / PDC_MAX_MEMORY bound every allocation; the default refuses a 16 GB arena at once"
cat >"$T/pads.pdcir" <<'EOF2'
pdcir 1
model "pads"
input x : f32[1, 1, 1, 1]
const w : f32[1, 1, 1, 1] = [1.0]
layer c = conv(x, w) -> (y) {pads=[32000, 32000, 32000, 32000]}
output y
EOF2
head -c 4 /dev/zero >"$T/in4.bin"
for target in ref cpu; do
    run env XDG_CACHE_HOME="$T/cache" "$PDC" run "$T/pads.pdcir" --target $target --input "$T/in4.bin"
    expect_rc 1
    expect_err "$target: activation memory of 16384512064 bytes exceeds max_memory (4294967296 bytes)"
done
run env PDC_MAX_MEMORY=1K "$PDC" run "$MODEL" --input "$IN"
expect_rc 1
expect_err "exceeds max_memory (1024 bytes)"
run env PDC_MAX_MEMORY=1K "$PDC" run "$MODEL" --input "$IN" --max-memory 0
expect_rc 0
run env PDC_MAX_MEMORY=lots "$PDC" inspect "$MODEL"
expect_rc 1
expect_err "bad PDC_MAX_MEMORY 'lots'"
run "$PDC" inspect "$MODEL" --max-memory 12Q
expect_rc 2
expect_err "bad --max-memory '12Q'"
end

begin "run checks every input file before allocating: a 16-byte file for a 16 GB input fails at once"
cat >"$T/sym.pdcir" <<'EOF2'
pdcir 1
model "sym"
input x : f32[?, 4]
layer r = relu(x) -> (y)
output y
EOF2
head -c 16 /dev/zero >"$T/in16.bin"
run "$PDC" run "$T/sym.pdcir" --shape x=1073741824x4 --input "$T/in16.bin" --max-memory 0
expect_rc 1
expect_err "wrong size: expected 17179869184 bytes (input 'x' 1073741824x4 f32), got 16 bytes"
end

begin "run --check-finite names the first layer that produced a NaN; NaN constants are refused at load"
cat >"$T/ovf.pdcir" <<'EOF2'
pdcir 1
model "ovf"
input x : f32[1, 2]
const c : f32[2] = [1e30, 1e30]
layer r = relu(x) -> (h)
layer m = mul(h, c) -> (y)
output y
EOF2
f32 "$T/ovf.bin" 3f800000 7f7fffff
for target in ref cpu; do
    run env XDG_CACHE_HOME="$T/cache" "$PDC" run "$T/ovf.pdcir" --target $target --input "$T/ovf.bin" --check-finite
    expect_rc 1
    expect_err "check_finite: layer 'm' (mul) produced inf at element 1 of its output 'y' (1x2)"
done
run "$PDC" run "$T/ovf.pdcir" --input "$T/ovf.bin"
expect_rc 0
expect_out "1e+30 inf"
sed 's/1e30, 1e30/1e30, nan/' "$T/ovf.pdcir" >"$T/nan.pdcir"
run "$PDC" inspect "$T/nan.pdcir"
expect_rc 1
expect_err "constant 'c' holds NaN at element 1 of 2"
end

# ---------------------------------------------------------------- kernel tuning: pdc tune (issue 45)

begin "tune tunes each conv layer once (exit 0); a second run finds the database; bench uses it"
run env XDG_CACHE_HOME="$T/tcache" "$PDC" tune "$T/dense.pdcir" --threads 1 --budget-s 2
expect_rc 0
expect_out_re "^conv1 +[a-z].*: [0-9.]+ ms \(heuristics [0-9.]+ ms\)$"
expect_out_re "^conv2 +"
expect_out_re "^tuned 2 layers in [0-9.]+ s"
n=$(ls "$T/tcache/pdc/tune" | grep -c '\.txt$')
[ "$n" -eq 2 ] || bad "$n database entries, expected 2"
run env XDG_CACHE_HOME="$T/tcache" "$PDC" tune "$T/dense.pdcir" --threads 1
expect_rc 0
expect_out "tuned 0 layers in"
expect_out "(the tuning database had every layer)"
run env XDG_CACHE_HOME="$T/tcache" "$PDC" bench "$T/dense.pdcir" --threads 1 --repeat 3
expect_rc 0
expect_no_err
end

begin "tune: a damaged database entry is ignored with a warning; bad options are usage errors"
for f in "$T/tcache/pdc/tune/"*.txt; do printf 'pdc-tune 2\nkey x\n' >"$f"; break; done
run env XDG_CACHE_HOME="$T/tcache" "$PDC" bench "$T/dense.pdcir" --threads 1 --repeat 3
expect_rc 0
expect_err "tune: ignored tuning entry $T/tcache/pdc/tune/"
expect_err "malformed entry"
run "$PDC" tune "$T/dense.pdcir" --target ref
expect_rc 2
expect_err "only cpu has kernels to tune"
run "$PDC" tune "$T/dense.pdcir" --budget-s 0
expect_rc 2
expect_err "--budget-s expects 1..3600 seconds"
run "$PDC" tune
expect_rc 2
expect_err "missing MODEL"
end

# ---------------------------------------------------------------- summary

echo "cli: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
