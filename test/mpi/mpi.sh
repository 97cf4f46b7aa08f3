#!/bin/sh
# test/mpi/mpi.sh BUILD - data-parallel training over MPI on 1, 2 and 3 processes (make test-mpi; $MPI_RUN
# from the Makefile: mpirun allowed as root, oversubscribed, shared memory only).
#  - deterministic reduction: the weights after 6 epochs (batchnorm, pruning decided on process 0, processes
#    without samples in the last batch) are bit-identical on 1, 2 and 3 processes, and so are they after ADMM;
#  - reduction sum with overlap: the gradients of the weights are summed in buckets during the backward pass,
#    to the same bits as one sum after it;
#  - synchronised batchnorm: 2 and 3 processes train as one process on the global batch (within rounding);
#  - a checkpoint written on 2 processes resumes on 1 and on 3 to the same bits as the uninterrupted run;
#  - another option or other weights on one process are refused at the first step, naming which; a process
#    that stops stepping makes the others fail after the timeout with a message;
#  - the digits demo (train_digits_mpi, default sum reduction) on 2 and 3 processes reaches train_digits's
#    test accuracy within 0.005 in every phase and sends only the kept gradients; with the deterministic
#    reduction its pruned model is byte-identical on 1, 2 and 3 processes.
set -u
B=${1:-build}
RUN=${MPI_RUN:-mpirun --oversubscribe}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "mpi: FAIL: $*"; fail=$((fail + 1)); }
check() { $RUN -np "$1" "$B/test/mpi/mpi_check" $2 > "$T/out" 2>&1 || { cat "$T/out"; return 1; }; }

# bit-identity across process counts
for np in 1 2 3; do check $np "6 $T/w$np.bin" || bad "mpi_check on $np processes failed"; done
cmp -s "$T/w1.bin" "$T/w2.bin" && ok || bad "deterministic: 1 and 2 processes differ"
cmp -s "$T/w1.bin" "$T/w3.bin" && ok || bad "deterministic: 1 and 3 processes differ"

# ADMM decided on process 0's weights (Z-steps and the final hard pruning): the same bits on 1, 2 and 3
for np in 1 2 3; do check $np "5 $T/a$np.bin --admm" || bad "ADMM on $np processes failed"; done
cmp -s "$T/a1.bin" "$T/a2.bin" && cmp -s "$T/a1.bin" "$T/a3.bin" && ok || bad "ADMM: 1, 2 and 3 processes differ"
cmp -s "$T/a1.bin" "$T/w1.bin" && bad "ADMM: the same weights as pruning at once" || ok

# checkpoint written on 2 processes after epoch 3, resumed on 1 and on 3
check 2 "6 $T/c2.bin --save-after 3 $T/c.ckpt" || bad "saving on 2 processes failed"
cmp -s "$T/c2.bin" "$T/w1.bin" && ok || bad "the run that saved differs from the others"
for np in 1 3; do
    check $np "6 $T/r$np.bin --load $T/c.ckpt" || bad "resuming on $np processes failed"
    cmp -s "$T/r$np.bin" "$T/w1.bin" && ok || bad "resumed on $np processes: weights differ from the uninterrupted run"
done

# overlap (reduction sum, one part per step): each weight's sum starts during the backward pass, and the
# weights are the bits of one reduction after it (2 processes: a sum of two is exact in any order)
check 2 "4 $T/o1.bin --reduction sum --micro 0 --overlap 1" && o1=$(cat "$T/out") || bad "overlap 1 failed"
check 2 "4 $T/o0.bin --reduction sum --micro 0 --overlap 0" && o0=$(cat "$T/out") || bad "overlap 0 failed"
cmp -s "$T/o1.bin" "$T/o0.bin" && ok || bad "overlap 1 and 0 give other weights"
# the first step reduces after its agreement check: every later one in buckets
case "$o1" in *" reductions=20 floats="*" bucket_floats=0") bad "overlap 1: no bucket: $o1";; *) ok;; esac
case "$o0" in *" bucket_floats=0") ok;; *) bad "overlap 0: buckets: $o0";; esac

# synchronised batchnorm (reduction sum, one forward pass per step): 2 and 3 processes normalise with the
# global batch's statistics, so one epoch ends within float rounding of one process on the whole batch
# (without it, per-process statistics make a visible difference); a process without samples joins with zeros
maxdiff() { python3 -c 'import struct, sys
r = lambda f: struct.unpack("%df" % (len(open(f, "rb").read()) // 4), open(f, "rb").read())
a, b = r(sys.argv[1]), r(sys.argv[2])
print(max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else 1e9)' "$1" "$2"; }
check 1 "1 $T/n1.bin --reduction sum --micro 0" || bad "1 process, micro 0 failed"
for np in 2 3; do
    check $np "1 $T/s$np.bin --reduction sum --micro 0 --sync-bn 1" || bad "sync_batchnorm on $np processes failed"
    check $np "1 $T/u$np.bin --reduction sum --micro 0 --sync-bn 0" || bad "$np processes, micro 0 failed"
    ds=$(maxdiff "$T/n1.bin" "$T/s$np.bin") du=$(maxdiff "$T/n1.bin" "$T/u$np.bin")
    awk -v s="$ds" -v u="$du" 'BEGIN { exit !(s < 1e-6 && u > 1e-3) }' && ok ||
        bad "$np processes: sync_batchnorm max difference $ds (want < 1e-6), per-process statistics $du (want > 1e-3)"
done

# refusals and timeouts: the job fails, with the message
expect_fail() { # np args message
    if $RUN -np "$1" "$B/test/mpi/mpi_check" $2 > "$T/out" 2>&1; then bad "$2: the job succeeded"; return; fi
    grep -qF "$3" "$T/out" && ok || { bad "$2: no '$3' in:"; cat "$T/out"; }
}
expect_fail 2 "3 $T/f.bin --fault lr" "step: trainer option lr differs between process 0 and process 1"
expect_fail 2 "3 $T/f.bin --fault weights" "weight 'fb' differs between process 0 and process 1"
t0=$(date +%s)
expect_fail 2 "4 $T/f.bin --fault stall --timeout 1" \
    "no answer from the other processes within 1 s (option timeout): a process died or stopped stepping"
# the stalled process sleeps 6 s then leaves: the others ended the job by themselves, well before a hang would
# show (generous bound: mpirun's start on a loaded 2-core machine)
[ $(($(date +%s) - t0)) -lt 20 ] && ok || bad "the stalled job took $(($(date +%s) - t0)) s (timeout 1 s)"

# the demo: 1 process (train_digits) against 2 and 3 (train_digits_mpi, default reduction)
fields() { grep -o '^phase=[a-z_]* test_accuracy=[0-9.]*' "$1"; }
mkdir -p "$T/d0" "$T/d2" "$T/d3"
"$B/train_digits" --quiet --threads 1 --out "$T/d0" > "$T/d0.out" 2>&1 || { cat "$T/d0.out"; bad "train_digits failed"; }
for np in 2 3; do
    $RUN -np $np "$B/train_digits_mpi" --quiet --threads 1 --out "$T/d$np" > "$T/d$np.out" 2>&1 ||
        { cat "$T/d$np.out"; bad "train_digits_mpi on $np processes failed"; continue; }
    [ "$(grep -c '^phase=' "$T/d$np.out")" = 3 ] && ok || bad "$np processes: not one line per phase"
    fields "$T/d0.out" > "$T/a0"
    fields "$T/d$np.out" > "$T/a$np"
    if paste -d' ' "$T/a0" "$T/a$np" | awk '{ split($2, a, "="); split($4, b, "="); d = a[2] - b[2];
            if ($1 != $3 || d > 0.005 || d < -0.005) { print "mpi: " $0; bad = 1 } } END { exit bad }' &&
       [ -s "$T/a0" ] && [ "$(wc -l < "$T/a0")" = "$(wc -l < "$T/a$np")" ]; then ok
    else bad "$np processes: a phase's test accuracy is not within 0.005 of one process's"; fi
    grep -q '^phase=pattern_conn_fc .* sent_floats_per_step=5210 dense_floats_per_step=25290$' "$T/d$np.out" && ok ||
        bad "$np processes: pattern_conn_fc does not send the 5210 kept gradients only"
done
for np in 1 2 3; do
    mkdir -p "$T/x$np"
    $RUN -np $np "$B/train_digits_mpi" --quiet --threads 1 --reduction deterministic --micro 16 --out "$T/x$np" \
        > "$T/x$np.out" 2>&1 || { cat "$T/x$np.out"; bad "deterministic demo on $np processes failed"; }
done
cmp -s "$T/x1/digits.pdc" "$T/x2/digits.pdc" && cmp -s "$T/x1/digits.pdc" "$T/x3/digits.pdc" && ok ||
    bad "deterministic demo: the pruned models of 1, 2 and 3 processes differ"

echo "mpi: $pass passed, $fail failed"
[ $fail = 0 ]
