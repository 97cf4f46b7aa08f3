#!/bin/sh
# plan_bench.sh BUILD DIR - the planner against its budgets (make bench-predict, docs/predict.md):
# ResNet-18 (224x224, dense, saved by bench_predict --save DIR) timed with pdc bench on $THREADS
# threads (default 2), then pdc plan at 50% and 30% of that measured time, and the planned models
# timed the same way. REFINE=N passes --refine N to pdc plan (re-plan while the result measures over). With PDC_LAYER_CLOCK=thread-cpu (1 thread, a loaded machine) the times are the
# sums of the layers' CPU times (pdc predict --measure) instead of pdc bench's wall time.
# Prints a markdown table: budget, predicted, measured, measured against the budget.
BUILD=${1:-build}
DIR=${2:-build/bench-predict}
PDC="$BUILD/pdc"
M="$DIR/resnet18-dense.pdc"
[ -f "$M" ] || { echo "plan_bench: $M missing (bench_predict --save $DIR writes it)" >&2; exit 1; }
THREADS=${THREADS:-2}
if [ "$PDC_LAYER_CLOCK" = thread-cpu ]; then
    median() { "$PDC" predict "$1" --threads "$THREADS" --measure --repeat 21 --json 2>/dev/null | tail -n 1 |
               sed 's/.*"measured_total_ms": \([0-9.e-]*\).*/\1/'; }
else
    median() { "$PDC" bench "$1" --threads "$THREADS" --repeat 30 --warmup 5 --json | sed 's/.*"median_ms": \([0-9.]*\).*/\1/'; }
fi
dense=$(median "$M")
echo "ResNet-18 dense, $THREADS thread(s): $dense ms measured${PDC_LAYER_CLOCK:+ (CPU time of the layers)}"
echo
echo "refine: ${REFINE:-0}"
echo
echo "| budget | budget ms | plan predicted ms | measured ms | measured vs budget |"
echo "|---|---:|---:|---:|---:|"
for share in 0.5 0.3; do
    budget=$(awk -v d="$dense" -v s="$share" 'BEGIN { printf "%.3f", d * s }')
    out="$DIR/resnet18-plan-$share.pdc"
    "$PDC" plan "$M" --latency-ms "$budget" --threads "$THREADS" --repeat 21 --refine "${REFINE:-0}" -o "$out" >"$DIR/plan-$share.txt" 2>&1 ||
        { echo "| $share | $budget | (no plan: see $DIR/plan-$share.txt) | | |"; continue; }
    pred=$(sed -n -e 's/^predicted: \([0-9.]*\) ms.*/\1/p' -e 's/^refine [0-9]*: planned for [0-9.]* ms: predicted \([0-9.]*\) ms.*/\1/p' \
        "$DIR/plan-$share.txt" | tail -n 1)
    meas=$(median "$out")
    awk -v s="$share" -v b="$budget" -v p="$pred" -v m="$meas" \
        'BEGIN { printf "| %d%% of dense | %.3f | %.3f | %.3f | %+.1f%% |\n", s * 100, b, p, m, 100 * (m - b) / b }'
done
