#!/bin/sh
# demo.sh BUILD - pdc's demo, run by `make demo`: builds the pruned digits CNN with the builder API,
# inspects it, runs it on a test digit with the reference target and converts it to IR text.
# BUILD is the build folder holding pdc and make_demo_model (default: build).
set -e

BUILD=${1:-build}
PDC="$BUILD/pdc"
OUT="$BUILD/demo"
DATA=test/data/digits.bin

for f in "$PDC" "$BUILD/make_demo_model" "$DATA"; do
    if [ ! -e "$f" ]; then
        echo "demo.sh: $f is missing (run 'make demo' from the repository root)" >&2
        exit 1
    fi
done
mkdir -p "$OUT"

heading() {
    printf '\n==== %s\n' "$*"
}

heading "1. Build the demo model with the C builder API ($BUILD/make_demo_model)"
"$BUILD/make_demo_model" "$OUT/digits.pdc" "$DATA" "$OUT/digit0.bin"

heading "2. Inspect it: shapes, sparsity, weights, FLOPs (pdc inspect)"
echo "\$ $PDC inspect $OUT/digits.pdc"
"$PDC" inspect "$OUT/digits.pdc"

heading "3. Run it on the test digit with the reference target (pdc run)"
echo "\$ $PDC run $OUT/digits.pdc --target ref --input $OUT/digit0.bin --output $OUT/probs.bin --print"
"$PDC" run "$OUT/digits.pdc" --target ref --input "$OUT/digit0.bin" --output "$OUT/probs.bin" --print
echo "(wrote $OUT/probs.bin, $(wc -c < "$OUT/probs.bin") bytes: 10 class probabilities as float32;"
echo " the weights are random until the training example exists, so the prediction means nothing yet)"

heading "4. Convert it to the IR text form (pdc convert)"
echo "\$ $PDC convert $OUT/digits.pdc -o $OUT/digits.pdcir"
"$PDC" convert "$OUT/digits.pdc" -o "$OUT/digits.pdcir"
echo "\$ $PDC convert $OUT/digits.pdc -o $OUT/digits-elided.pdcir --elide-weights"
"$PDC" convert "$OUT/digits.pdc" -o "$OUT/digits-elided.pdcir" --elide-weights
echo "First 15 lines of $OUT/digits-elided.pdcir (weights elided; $OUT/digits.pdcir has them in full,"
echo "$(wc -c < "$OUT/digits.pdcir") bytes):"
head -n 15 "$OUT/digits-elided.pdcir" | awk '{ if (length($0) > 150) print substr($0, 1, 150) " ..."; else print }'

heading "5. The text form runs the same (pdc run on the .pdcir)"
"$PDC" run "$OUT/digits.pdcir" --input "$OUT/digit0.bin" --output "$OUT/probs-text.bin"
if cmp -s "$OUT/probs.bin" "$OUT/probs-text.bin"; then
    echo "identical outputs from digits.pdc and digits.pdcir"
else
    echo "demo.sh: outputs of digits.pdc and digits.pdcir differ" >&2
    exit 1
fi

heading "Done: files in $OUT/"
ls -l "$OUT"
