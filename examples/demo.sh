#!/bin/sh
# demo.sh BUILD - pdc's demo, run by `make demo`: trains the digits CNN from a C host program, prunes it
# (pattern + connectivity on the convs, 1x4 blocks on the fc) and retrains it (examples/train_digits.c),
# then inspects the trained, pruned model, runs it on a test digit with the reference target and
# converts it to IR text; then trains an LSTM on the digits as sequences, prunes it with block column-row
# pruning and retrains it (examples/train_seq.c). BUILD is the build folder holding pdc, train_digits and
# train_seq (default: build).
set -e

BUILD=${1:-build}
PDC="$BUILD/pdc"
OUT="$BUILD/demo"
DATA=test/data/digits.bin

for f in "$PDC" "$BUILD/train_digits" "$BUILD/train_seq" "$DATA"; do
    if [ ! -e "$f" ]; then
        echo "demo.sh: $f is missing (run 'make demo' from the repository root)" >&2
        exit 1
    fi
done
mkdir -p "$OUT"

heading() {
    printf '\n==== %s\n' "$*"
}

heading "1. Train, prune and retrain the digits CNN from C ($BUILD/train_digits, examples/train_digits.c)"
echo "\$ $BUILD/train_digits --data $DATA --out $OUT"
"$BUILD/train_digits" --data "$DATA" --out "$OUT"

heading "2. Inspect it: shapes, sparsity, weights, FLOPs (pdc inspect)"
echo "\$ $PDC inspect $OUT/digits.pdc"
"$PDC" inspect "$OUT/digits.pdc"

heading "3. Run it on the test digit with the reference target (pdc run)"
echo "\$ $PDC run $OUT/digits.pdc --target ref --input $OUT/digit0.bin --output $OUT/probs.bin --print"
"$PDC" run "$OUT/digits.pdc" --target ref --input "$OUT/digit0.bin" --output "$OUT/probs.bin" --print
echo "(wrote $OUT/probs.bin, $(wc -c < "$OUT/probs.bin") bytes: 10 class probabilities as float32;"
echo " the trained, pruned model of step 1 - digits-dense.pdc is its dense predecessor)"

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

heading "6. A recurrent model: an LSTM on the digits as 8-step sequences, BCR-pruned and retrained ($BUILD/train_seq)"
echo "\$ $BUILD/train_seq --data $DATA --out $OUT --quiet"
"$BUILD/train_seq" --data "$DATA" --out "$OUT" --quiet
echo "\$ $PDC inspect $OUT/seq.pdc"
"$PDC" inspect "$OUT/seq.pdc"

heading "Done: files in $OUT/"
ls -l "$OUT"
