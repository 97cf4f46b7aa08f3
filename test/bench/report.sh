#!/bin/sh
# report.sh - writes docs/performance.md, the current benchmark recording, from the TSVs that
# `make bench` (and `make bench-gpu`) leave in test/bench/:
#   results.tsv          bench_conv: 3x3 layers vs oneDNN and OpenBLAS, activations warm
#   results_cold.tsv     bench_conv --cold: the same, activations as the other methods left them
#   results_scaling.tsv  bench_scaling: pdc's 2-thread speed-up, pinned, hot and flushed caches
#   results_e2e.tsv      bench_e2e: pruned ResNet-18 / VGG-16 vs ONNX Runtime, compile time
#   results_batch.tsv    bench_batch: fc and LSTM at batch 1, 8, 32 vs OpenBLAS
#   results_torchvision.tsv  bench_torchvision.py: torchvision models pruned in PyTorch, pdc vs ONNX Runtime
#   results_schedule.tsv bench_torchvision.py: GoogLeNet and ResNet-18, sequential vs the DAG schedule
#   results_group.tsv    bench_group: groups of models (shared work, DAG schedule) vs the models in turn
#   results_conv3d.tsv   bench_conv3d: r3d_18's 3x3x3 layers, dense and KGS-pruned, vs oneDNN direct
#   results_r3d18.tsv    bench_r3d18: a KGS-pruned r3d_18 end to end vs ONNX Runtime
#   results_video.tsv    bench_video.py: torchvision video models, dense and KGS-pruned in PyTorch, vs ONNX Runtime
#   results_gpu.tsv      gpu_bench: the gpu target vs cuDNN (only where make bench-gpu ran)
# A missing TSV gets a line saying it was not recorded. Columns are found by their header names,
# lines starting with '#' are notes (host, date, commit, ...) and are listed in the report.
# The output depends on the TSVs alone (no clock, no git, LC_ALL=C): same TSVs, same bytes.
# POSIX sh and awk only (a Debian minbase has mawk and no python).
#
# usage: sh test/bench/report.sh [OUT]   (default docs/performance.md; the TSVs are read from the
#        folder this script is in, or from $PDC_BENCH_DIR)
set -eu
LC_ALL=C
export LC_ALL

HERE=$(dirname "$0")
BENCH=${PDC_BENCH_DIR:-$HERE}
OUT=${1:-$(cd "$HERE/../.." && pwd)/docs/performance.md}
case $OUT in */*) mkdir -p "${OUT%/*}" ;; esac
T=$(mktemp -d "${TMPDIR:-/tmp}/pdc-perf-report-XXXXXX")
trap 'rm -rf "$T"' EXIT
trap 'exit 1' HUP INT TERM
: > "$T/headline"   # the headline's list (whole networks, compile, fc/LSTM)
: > "$T/hl_table"   # the headline's table rows (3x3 layers), one column per rate in COMPS
: > "$T/hl_notes"   # lines under that table
: > "$T/recording"
: > "$T/tables"
# the pruning rates of the 3x3 layers, as the headline table's columns (bench_conv, bench_scaling, gpu_bench)
COMPS="4.5 9 1"

# ------------------------------------------------------------------ awk helpers shared by every part
LIB='
function isnum(s) { return s ~ /^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$/ }
# a time: 3 significant digits, trailing zeros kept; "-" where the TSV has none (-, nan, inf)
function tm(x,   a) {
    if (!isnum(x)) return "-"
    x += 0; a = x < 0 ? -x : x
    if (a >= 100) return sprintf("%.0f", x)
    if (a >= 10) return sprintf("%.1f", x)
    if (a >= 1) return sprintf("%.2f", x)
    if (a >= 0.1) return sprintf("%.3f", x)
    return sprintf("%.4f", x)
}
function rx(x) { return isnum(x) ? sprintf("%.2f", x) : "-" }     # a ratio
function er(x) { return isnum(x) ? sprintf("%.1e", x) : "-" }     # a relative error
function comp(c) { if (!isnum(c)) return c == "" ? "-" : c; c += 0; return c == 1 ? "dense" : sprintf("%gx", c) }
function f(name) { return (name in col) ? $(col[name]) : "" }
# the ratio column NAME if the TSV has it, else num / den
function ratio(name, num, den) {
    if (isnum(f(name))) return f(name) + 0
    if (isnum(num) && isnum(den) && den + 0 != 0) return (num + 0) / (den + 0)
    return "-"
}
# MED, LO, HI, LOI, HII: median, lowest and highest of V[1..N] (LOI, HII: their indexes)
function stats(V, N,   i, j, t, U) {
    LOI = HII = 1
    for (i = 1; i <= N; i++) {
        if (V[i] < V[LOI]) LOI = i
        if (V[i] > V[HII]) HII = i
        U[i] = V[i]
    }
    for (i = 2; i <= N; i++) { t = U[i]; for (j = i - 1; j >= 1 && U[j] > t; j--) U[j + 1] = U[j]; U[j + 1] = t }
    MED = N % 2 ? U[(N + 1) / 2] : (U[N / 2] + U[N / 2 + 1]) / 2
    LO = V[LOI]; HI = V[HII]
}
# a headline cell: "3.38x (2.38-3.68x)", median (lowest-highest) of V[1..N]
function cell(V, N) {
    if (N < 1) return "-"
    stats(V, N)
    return N == 1 ? sprintf("%.2fx", MED) : sprintf("%.2fx (%.2f-%.2fx)", MED, LO, HI)
}
# "median 3.89x (2.17x batch 32, 2 threads - 8.26x batch 8, 2 threads)" over V[1..N] named W[1..N]
function summary(V, W, N) {
    if (N < 1) return "no rows"
    stats(V, N)
    if (N == 1) return sprintf("%.2fx (%s)", MED, W[1])
    return sprintf("median %.2fx, lowest %.2fx (%s), highest %.2fx (%s)", MED, LO, W[LOI], HI, W[HII])
}
function isa(k,   n, p) {      # the last item of a pdc kernel description: avx512, avx2, ...
    n = split(k, p, ", ")
    return n ? p[n] : ""
}
/^[ \t]*#/ { s = $0; sub(/^[ \t]*#[ \t]*/, "", s); if (s != "") note[++nnotes] = s; next }
/^[ \t]*$/ { next }
!hdr { for (i = 1; i <= NF; i++) col[$i] = i; hdr = 1; next }
'

# rec FILE BENCHMARK TEXT: one item of the "The recording" list
rec() { printf -- '- `test/bench/%s` (%s): %s\n' "$1" "$2" "$3" >> "$T/recording"; }

# A TSV that is not there: the section says so, and so does "The recording".
# not_recorded FILE BENCH TITLE [WHY]
not_recorded() {
    printf '\n## %s\n\n`test/bench/%s`: not recorded%s.\n' "$3" "$1" "${4:+ ($4)}" >> "$T/tables"
    rec "$1" "$2" "not recorded"
}

# ------------------------------------------------------------------ 3x3 layers (bench_conv)
conv() { # conv FILE MODE(warm|cold) TITLE
    f=$BENCH/$1
    if [ ! -f "$f" ]; then
        if [ "$2" = cold ]; then not_recorded "$1" "bench_conv --cold" "$3"; else not_recorded "$1" bench_conv "$3"; fi
        return 0
    fi
    awk -F '\t' -v file="$1" -v mode="$2" -v title="$3" -v comps="$COMPS" -v HT="$T/hl_table" -v HN="$T/hl_notes" \
        -v R="$T/recording" "$LIB"'
    {
        n++
        L = f("case"); th = f("threads"); c = f("compression")
        xd = ratio("x_direct", f("onednn_direct_ms"), f("pdc_ms"))
        xb = ratio("x_best", f("onednn_best_ms"), f("pdc_ms"))
        fi = ratio("frac_ideal", f("ideal_ms"), f("pdc_ms"))
        row[n] = sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", L, th, comp(c),
                         tm(f("pdc_ms")), tm(f("onednn_direct_ms")), tm(f("onednn_wino_ms")), tm(f("onednn_best_ms")),
                         tm(f("openblas_ms")), tm(f("ideal_ms")), rx(xd), rx(xb), rx(fi),
                         isnum(f("pdc_kept_gflops")) ? sprintf("%.0f", f("pdc_kept_gflops")) : "-")
        if (!(L in seenL)) { seenL[L] = 1; nl++ }
        if (!(th in seenT)) { seenT[th] = 1; tl[++nt] = th }
        q = c + 0
        if (isnum(xd)) { k = ++nd[th, q]; vd[th, q, k] = xd; wd[th, q, k] = L }
        if (isnum(xb)) { k = ++nb[th, q]; vb[th, q, k] = xb; wb[th, q, k] = L }
        if (f("onednn_wino_ms") != "" && !isnum(f("onednn_wino_ms"))) nowino[L] = 1
        s = isa(f("pdc_kernel")); if (s != "" && !(s in seenI)) { seenI[s] = 1; isas = isas (isas == "" ? "" : ", ") s }
    }
    # a row of the headline table: LABEL, then per rate of comps the median (range) of x direct (d) or x best (b)
    function hrow(label, th, which,   i, j, k, q, V, nq, Q, r) {
        r = "| " label
        nq = split(comps, Q, " ")
        for (i = 1; i <= nq; i++) {
            q = Q[i] + 0
            k = which == "d" ? nd[th, q] : nb[th, q]
            for (j = 1; j <= k; j++) V[j] = which == "d" ? vd[th, q, j] : vb[th, q, j]
            r = r " | " cell(V, k + 0)
        }
        print r " |" >> HT
    }
    # where the lowest and highest x direct at TH threads lie, per rate
    function extremes(th,   i, j, k, q, V, nq, Q, r) {
        r = ""
        nq = split(comps, Q, " ")
        for (i = 1; i <= nq; i++) {
            q = Q[i] + 0
            if (!(k = nd[th, q])) continue
            for (j = 1; j <= k; j++) V[j] = vd[th, q, j]
            stats(V, k)
            r = r (r == "" ? "" : "; ") (q == 1 ? "dense" : comp(q) " pruned") " from " sprintf("%.2fx", LO) " (" wd[th, q, LOI] ") to " \
                sprintf("%.2fx", HI) " (" wd[th, q, HII] ")"
        }
        return r
    }
    END {
        if (!n) {
            printf "\n## %s\n\n`test/bench/%s` has no rows.\n", title, file
            printf "- `test/bench/%s` (bench_conv%s): no rows\n", file, (mode == "cold" ? " --cold" : "") >> R
            exit
        }
        tdesc = ""
        for (i = 1; i <= nt; i++) tdesc = tdesc (i > 1 ? (i == nt ? " and " : ", ") : "") tl[i]
        printf "- `test/bench/%s` (bench_conv%s): %d rows, %d layers at %s thread%s%s\n", file, (mode == "cold" ? " --cold" : ""),
               n, nl, tdesc, (nt == 1 && tl[1] + 0 == 1 ? "" : "s"), (isas == "" ? "" : "; pdc kernels for " isas) >> R
        for (i = 1; i <= nnotes; i++) printf "  - %s\n", note[i] >> R

        # headline: the first two thread counts warm, the first cold
        for (i = 1; i <= nt && i <= 2; i++) {
            th = tl[i]; ths = th " thread" (th + 0 == 1 ? "" : "s")
            if (mode == "warm") {
                hrow("oneDNN direct / pdc, " ths, th, "d")
                hrow("oneDNN best / pdc, " ths, th, "b")
                if (i == 1) printf "- Lowest and highest oneDNN direct / pdc, %s, warm: %s\n", ths, extremes(th) >> HN
            } else if (i == 1) {
                hrow("oneDNN direct / pdc, " ths ", activations cold", th, "d")
            }
        }

        # the table
        printf "\n## %s\n\n", title
        if (mode == "warm")
            printf "`build/bench_conv`, written to `test/bench/%s`: activations read by the timed threads before each\nrepetition (as inside a network), weights evicted by the other methods.\n", file
        else
            printf "`build/bench_conv --cold`, written to `test/bench/%s`: activations left as the runs of the\nother methods left them (read from memory), otherwise as the warm table.\n", file
        printf "Times in ms (medians); x direct = oneDNN direct / pdc, x best = oneDNN best / pdc, of ideal =\nideal / pdc: above 1, pdc is faster. kept GFLOP/s counts only the multiply-adds of the kept weights.\n"
        k = 0; for (L in nowino) k++
        if (k) printf "oneDNN has no Winograd for %d of the layers (stride 2, or no AVX-512): \"-\", its best is direct.\n", k
        printf "\n| layer | threads | pdc | pdc ms | oneDNN direct ms | oneDNN Winograd ms | oneDNN best ms | OpenBLAS ms | ideal ms | x direct | x best | of ideal | kept GFLOP/s |\n"
        printf "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        for (i = 1; i <= n; i++) print row[i]
    }' "$f" >> "$T/tables"
}

# ------------------------------------------------------------------ 2-thread scaling (bench_scaling)
scaling() {
    f=$BENCH/results_scaling.tsv
    title='2 threads against 1, pinned (`bench_scaling`)'
    if [ ! -f "$f" ]; then
        not_recorded results_scaling.tsv bench_scaling "$title"
        return 0
    fi
    awk -F '\t' -v title="$title" -v comps="$COMPS" -v TARGET=1.8 -v HT="$T/hl_table" -v R="$T/recording" "$LIB"'
    {
        n++
        L = f("case"); c = f("compression"); st = f("state")
        x = f("speedup")
        if (!isnum(x) && isnum(f("t2_ms")) && isnum(f("t1_cpuA_ms")) && isnum(f("t1_cpuB_ms")))
            x = 2 / (f("t2_ms") * (1 / f("t1_cpuA_ms") + 1 / f("t1_cpuB_ms")))
        sx = rx(x)
        if (isnum(x) && x + 0 < TARGET) sx = "**" sx "**"
        row[n] = sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", L, comp(c), st, tm(f("t1_cpuA_ms")),
                         tm(f("t1_cpuB_ms")), tm(f("t2_ms")), rx(ratio("x_cpuA", f("t1_cpuA_ms"), f("t2_ms"))),
                         rx(ratio("x_cpuB", f("t1_cpuB_ms"), f("t2_ms"))), sx, (f("runs") == "" ? "-" : f("runs")))
        if (!(L in seenL)) { seenL[L] = 1; nl++ }
        if (!(st in seenS)) { seenS[st] = 1; sl[++ns] = st }
        q = c + 0
        if (isnum(x)) { k = ++cnt[st, q]; v[st, q, k] = x + 0; met[st, q] += x + 0 >= TARGET }
        if (f("cpuA") != "") cpus[f("cpuA") "," f("cpuB")] = 1
        if (f("pdc_kernel_1t") != "" && f("pdc_kernel_1t") != f("pdc_kernel_2t")) {
            kd++
            if (!((L, q) in seenK)) { seenK[L, q] = 1; kdn = kdn (kdn == "" ? "" : ", ") L " at " comp(c) }
        }
        s = isa(f("pdc_kernel_1t")); if (s != "" && !(s in seenI)) { seenI[s] = 1; isas = isas (isas == "" ? "" : ", ") s }
        if (isnum(f("runs"))) { if (rmin == "" || f("runs") + 0 < rmin) rmin = f("runs") + 0; if (f("runs") + 0 > rmax) rmax = f("runs") + 0 }
    }
    END {
        if (!n) {
            printf "\n## %s\n\n`test/bench/results_scaling.tsv` has no rows.\n", title
            print "- `test/bench/results_scaling.tsv` (bench_scaling): no rows" >> R
            exit
        }
        ncpu = 0; for (p in cpus) { ncpu++; cp = p }
        split(cp, cab, ",")
        printf "- `test/bench/results_scaling.tsv` (bench_scaling): %d rows, %d layers, states %s%s%s\n", n, nl,
               sl[1] (ns > 1 ? " and " sl[2] : ""), (ncpu == 1 ? sprintf("; CPU A = %s, CPU B = %s", cab[1], cab[2]) : ""),
               (isas == "" ? "" : "; pdc kernels for " isas) >> R
        for (i = 1; i <= nnotes; i++) printf "  - %s\n", note[i] >> R
        # headline: one row per state, each cell the median (range) and how many rows reach the target
        nq = split(comps, Q, " ")
        for (i = 1; i <= ns; i++) {
            st = sl[i]; r = "| pdc 2 threads / 1 thread (`bench_scaling`), " st
            for (j = 1; j <= nq; j++) {
                q = Q[j] + 0; k = cnt[st, q]
                for (m = 1; m <= k; m++) V[m] = v[st, q, m]
                r = r " | " cell(V, k + 0) (k ? sprintf(", %d of %d at %.1fx+", met[st, q], k, TARGET) : "")
            }
            print r " |" >> HT
        }
        printf "\n## %s\n\n", title
        printf "`build/bench_scaling`, written to `test/bench/results_scaling.tsv`: pdc alone. Times in ms, medians of\n"
        printf "the `runs` interleaved repetitions: 1 thread pinned to CPU A%s and, in a program of its own, to CPU B%s;\n",
               (ncpu == 1 ? " (" cab[1] ")" : ""), (ncpu == 1 ? " (" cab[2] ")" : "")
        printf "2 threads one on each. x CPU A = 1-thread time on CPU A / 2-thread time (likewise B); speed-up =\n"
        printf "2 / (t2 (1/t1A + 1/t1B)), the 2-thread rate over the mean 1-thread rate of the two CPUs (2.0: both\n"
        printf "CPUs busy at their own speed). **Bold**: below %.1fx, the 2-thread target `bench_scaling` counts rows against.\n", TARGET
        printf "\n| layer | pdc | state | 1 thread CPU A ms | 1 thread CPU B ms | 2 threads ms | x CPU A | x CPU B | speed-up | runs |\n"
        printf "|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n"
        for (i = 1; i <= n; i++) print row[i]
        if (rmin != "") printf "\nRuns per median: %d to %d.", rmin, rmax
        if (kd) printf " In %d row%s pdc chose another kernel at 2 threads than at 1 (the TSV has both): %s.", kd, (kd == 1 ? "" : "s"), kdn
        if (rmin != "" || kd) printf "\n"
    }' "$f" >> "$T/tables"
}

# ------------------------------------------------------------------ whole networks (bench_e2e)
e2e() {
    f=$BENCH/results_e2e.tsv
    title='Whole networks against ONNX Runtime, compile time (`bench_e2e`)'
    if [ ! -f "$f" ]; then
        not_recorded results_e2e.tsv bench_e2e "$title"
        return 0
    fi
    awk -F '\t' -v title="$title" -v H="$T/headline" -v R="$T/recording" "$LIB"'
    {
        L = f("case"); th = f("threads")
        if (isnum(th)) {
            n++
            x = ratio("speedup", f("ort_ms"), f("pdc_ms"))
            row[n] = sprintf("| %s | %s | %s | %s | %s | %s |", L, th, tm(f("pdc_ms")), tm(f("ort_ms")), rx(x), er(f("max_rel_err")))
            if (!(L in seenM)) { seenM[L] = 1; ml[++nm] = L }
            hx[L] = hx[L] (hx[L] == "" ? "" : ", ") (isnum(x) ? sprintf("%.2fx", x) : "not measured") " at " th " thread" (th + 0 == 1 ? "" : "s")
            if (!isnum(f("ort_ms"))) noort = 1
            next
        }
        # the other lines: compile times (case ends in " s"), the core-to-core round trip, anything else
        o++
        if (L ~ / s$/) {
            lab = L; sub(/ s$/, "", lab)
            other[o] = lab ": " tm(f("pdc_ms")) " s"
            # "resnet50-pruned compile cold s" -> "resnet50-pruned cold 1.18 s", then ", cached 0.135 s"
            if (lab ~ / compile /) {
                mdl = lab; sub(/ compile .*/, "", mdl); kind = lab; sub(/.* compile /, "", kind)
                comp_s = comp_s (comp_s == "" ? "" : mdl == lastm ? ", " : "; ") (mdl == lastm ? "" : mdl " ") kind " " tm(f("pdc_ms")) " s"
                lastm = mdl
            }
        } else if (L ~ /round trip/) {
            rt = (isnum(f("pdc_ms")) ? f("pdc_ms") " ns" : "not measured") " before, " (isnum(f("ort_ms")) ? f("ort_ms") " ns" : "not measured") " after"
            other[o] = "core-to-core round trip (`test/bench/host.c`): " rt
        } else {
            s = ""
            for (i = 2; i <= NF; i++) if ($i != "-" && $i != "") s = s (s == "" ? "" : " / ") $i
            other[o] = L ": " s
        }
    }
    END {
        printf "- `test/bench/results_e2e.tsv` (bench_e2e): %d model row%s%s%s\n", n, (n == 1 ? "" : "s"),
               (rt == "" ? "" : "; core-to-core round trip " rt), (noort ? "; ONNX Runtime not run (bench_e2e --no-ort)" : "") >> R
        for (i = 1; i <= nnotes; i++) printf "  - %s\n", note[i] >> R
        if (nm) {
            s = ""
            for (i = 1; i <= nm; i++) s = s (i > 1 ? "; " : "") ml[i] " " hx[ml[i]]
            printf "- Whole pruned networks (`results_e2e.tsv`), ONNX Runtime / pdc: %s\n", s >> H
        }
        if (comp_s != "") printf "- Compile for `cpu` (`results_e2e.tsv`): %s\n", comp_s >> H
        printf "\n## %s\n\n", title
        printf "`build/bench_e2e`, written to `test/bench/results_e2e.tsv`. Times in ms (medians); x ONNX Runtime =\n"
        printf "ONNX Runtime / pdc (above 1, pdc is faster); max rel err = max |pdc - ONNX Runtime| / max |ONNX Runtime| over\nthe 1000 outputs.\n"
        if (n) {
            printf "\n| model | threads | pdc ms | ONNX Runtime ms | x ONNX Runtime | max rel err |\n|---|---:|---:|---:|---:|---:|\n"
            for (i = 1; i <= n; i++) print row[i]
        } else printf "\nNo model rows.\n"
        if (o) printf "\n"
        for (i = 1; i <= o; i++) printf "- %s\n", other[i]
    }' "$f" >> "$T/tables"
}

# ------------------------------------------------------------------ fc and LSTM batches (bench_batch)
batch() {
    f=$BENCH/results_batch.tsv
    title='fc and LSTM at batch 1, 8 and 32 (`bench_batch`)'
    if [ ! -f "$f" ]; then
        not_recorded results_batch.tsv bench_batch "$title"
        return 0
    fi
    awk -F '\t' -v title="$title" -v H="$T/headline" -v R="$T/recording" "$LIB"'
    {
        n++
        L = f("case"); c = f("compression")
        xo = ratio("", f("openblas_ms"), f("pdc_ms"))
        fi = ratio("", f("ideal_ms"), f("pdc_ms"))
        row[n] = sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |", L, f("batch"), f("threads"), comp(c), tm(f("pdc_ms")),
                         tm(f("openblas_ms")), tm(f("ideal_ms")), rx(xo), (isnum(c) && c + 0 > 1 ? rx(fi) : "-"))
        if (isnum(c) && c + 0 > 1) {
            if (!(L in seenB)) { seenB[L] = 1; bl[++nb] = L; bc[L] = c }
            nm = "batch " f("batch") ", " f("threads") " thread" (f("threads") + 0 == 1 ? "" : "s")
            if (isnum(xo)) { k = ++no[L]; vo[L, k] = xo; wo[L, k] = nm }
            if (isnum(fi)) { k = ++ni[L]; vi[L, k] = fi; wi[L, k] = nm }
        }
    }
    END {
        if (!n) {
            printf "\n## %s\n\n`test/bench/results_batch.tsv` has no rows.\n", title
            print "- `test/bench/results_batch.tsv` (bench_batch): no rows" >> R
            exit
        }
        printf "- `test/bench/results_batch.tsv` (bench_batch): %d row%s\n", n, (n == 1 ? "" : "s") >> R
        for (i = 1; i <= nnotes; i++) printf "  - %s\n", note[i] >> R
        for (i = 1; i <= nb; i++) {
            L = bl[i]; s = ""
            if (no[L]) { for (j = 1; j <= no[L]; j++) { V[j] = vo[L, j]; W[j] = wo[L, j] } s = "OpenBLAS on the dense product / pdc: " summary(V, W, no[L]) }
            if (ni[L]) { for (j = 1; j <= ni[L]; j++) { V[j] = vi[L, j]; W[j] = wi[L, j] } s = s (s == "" ? "" : "; ") "ideal / pdc: " summary(V, W, ni[L]) }
            printf "- %s (`results_batch.tsv`, %s fewer multiply-adds): %s\n", L, comp(bc[L]), s >> H
        }
        printf "\n## %s\n\n", title
        printf "`build/bench_batch`, written to `test/bench/results_batch.tsv`. Times in ms (medians); x OpenBLAS =\n"
        printf "OpenBLAS on the dense product / pdc, of ideal = ideal / pdc (pruned rows): above 1, pdc is faster. OpenBLAS has\nno LSTM: \"-\".\n"
        printf "\n| case | batch | threads | pdc | pdc ms | OpenBLAS ms | ideal ms | x OpenBLAS | of ideal |\n"
        printf "|---|---:|---:|---|---:|---:|---:|---:|---:|\n"
        for (i = 1; i <= n; i++) print row[i]
    }' "$f" >> "$T/tables"
}

# ------------------------------------------------------------------ LSTM/GRU, BCR (bench_rnn)
rnn() {
    f=$BENCH/results_rnn.tsv
    title='LSTM and GRU, block column-row pruned, against ONNX Runtime (`bench_rnn`)'
    if [ ! -f "$f" ]; then
        not_recorded results_rnn.tsv bench_rnn "$title"
        return 0
    fi
    awk -F '\t' -v title="$title" -v H="$T/headline" -v R="$T/recording" "$LIB"'
    {
        n++
        L = f("case"); c = f("compression")
        row[n] = sprintf("| %s | %s | %s | %s | %s | %s | %s | %s |", L, f("batch"), comp(c), tm(f("pdc_ms")), tm(f("ort_ms")),
                         rx(f("vs_ort")), rx(f("vs_dense")), er(f("max_rel_err")))
        if (isnum(c) && c + 0 > 1 && isnum(f("vs_ort")))
            hl[++nh] = sprintf("%s %s batch %s %s", L, comp(c), f("batch"), rx(f("vs_ort")))
    }
    END {
        if (!n) {
            printf "\n## %s\n\n`test/bench/results_rnn.tsv` has no rows.\n", title
            print "- `test/bench/results_rnn.tsv` (bench_rnn): no rows" >> R
            exit
        }
        printf "- `test/bench/results_rnn.tsv` (bench_rnn): %d row%s\n", n, (n == 1 ? "" : "s") >> R
        for (i = 1; i <= nnotes; i++) printf "  - %s\n", note[i] >> R
        s = ""
        for (i = 1; i <= nh; i++) s = s (i > 1 ? "; " : "") hl[i]
        if (nh) printf "- LSTM/GRU BCR (`results_rnn.tsv`, 1 thread), ONNX Runtime on the dense model / pdc: %s\n", s >> H
        printf "\n## %s\n\n", title
        printf "`build/bench_rnn`, written to `test/bench/results_rnn.tsv`. Times in ms (medians, 1 thread); x ONNX Runtime =\n"
        printf "ONNX Runtime on the dense model / pdc, x dense = dense pdc / pdc: above 1, pdc is faster.\n"
        printf "\n| case | batch | pdc | pdc ms | ONNX Runtime ms | x ONNX Runtime | x dense | max rel err |\n"
        printf "|---|---:|---|---:|---:|---:|---:|---:|\n"
        for (i = 1; i <= n; i++) print row[i]
    }' "$f" >> "$T/tables"
}

# ------------------------------------------------------------------ the gpu target (gpu_bench)
gpu() {
    f=$BENCH/results_gpu.tsv
    title='The gpu target against cuDNN (`gpu_bench`, `make bench-gpu`)'
    if [ ! -f "$f" ]; then
        not_recorded results_gpu.tsv gpu_bench "$title" '`make bench-gpu` needs a GPU and cuDNN'
        return 0
    fi
    awk -F '\t' -v title="$title" -v comps="$COMPS" -v HT="$T/hl_table" -v R="$T/recording" "$LIB"'
    {
        L = f("case"); c = f("compression")
        if (f("kind") == "model") {
            m++
            xc = ratio("", f("cpu_run_ms"), f("pdc_run_ms"))
            mrow[m] = sprintf("| %s | %s | %s | %s | %s | %s | %s |", L, tm(f("pdc_run_ms")), tm(f("pdc_kern_ms")),
                              tm(f("cpu_run_ms")), rx(xc), er(f("max_rel_err")), tm(f("compile_s")))
            next
        }
        n++
        xk = ratio("x_cudnn_kern", f("cudnn_ms"), f("pdc_kern_ms"))
        xr = ratio("x_cudnn_run", f("cudnn_ms"), f("pdc_run_ms"))
        row[n] = sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", L, comp(c), tm(f("pdc_run_ms")), tm(f("pdc_kern_ms")),
                         tm(f("cudnn_ms")), (f("cudnn_algo") == "" ? "-" : f("cudnn_algo")), rx(xk), rx(xr),
                         (isnum(f("pdc_kept_gflops")) ? sprintf("%.0f", f("pdc_kept_gflops")) : "-"), er(f("max_rel_err")))
        q = c + 0
        if (isnum(xk)) { k = ++nk[q]; vk[q, k] = xk }
    }
    END {
        printf "- `test/bench/results_gpu.tsv` (gpu_bench): %d layer row%s, %d model row%s\n", n, (n == 1 ? "" : "s"), m, (m == 1 ? "" : "s") >> R
        for (i = 1; i <= nnotes; i++) printf "  - %s\n", note[i] >> R
        if (n) {
            r = "| cuDNN / pdc device time, gpu target"
            nq = split(comps, Q, " ")
            for (i = 1; i <= nq; i++) {
                q = Q[i] + 0; k = nk[q]
                for (j = 1; j <= k; j++) V[j] = vk[q, j]
                r = r " | " cell(V, k + 0)
            }
            print r " |" >> HT
        }
        printf "\n## %s\n\n", title
        printf "`build/gpu_bench`, written to `test/bench/results_gpu.tsv`. Times in ms (medians); run = pdc_program_run\n"
        printf "with the copies, kern = device execution only; x cuDNN (kern) = cuDNN / pdc kern, x cuDNN (run) = cuDNN /\n"
        printf "pdc run: above 1, pdc is faster. \"-\": not measured (no cuDNN, or an empty column).\n"
        if (n) {
            printf "\n| layer | pdc | pdc run ms | pdc kern ms | cuDNN ms | cuDNN algorithm | x cuDNN (kern) | x cuDNN (run) | kept GFLOP/s | max rel err |\n"
            printf "|---|---|---:|---:|---:|---|---:|---:|---:|---:|\n"
            for (i = 1; i <= n; i++) print row[i]
        }
        if (m) {
            printf "\nWhole models (x cpu = `cpu` run / `gpu` run: above 1, the gpu target is faster; max rel err of gpu\n"
            printf "against cpu; compile s: compiling the gpu program):\n"
            printf "\n| model | gpu run ms | gpu kern ms | cpu run ms | x cpu | max rel err | compile s |\n"
            printf "|---|---:|---:|---:|---:|---:|---:|\n"
            for (i = 1; i <= m; i++) print mrow[i]
        }
    }' "$f" >> "$T/tables"
}

# ------------------------------------------------------------------ torchvision models (bench_torchvision.py)
torchvision() {
    f=$BENCH/results_torchvision.tsv
    title='torchvision models as users export them (`bench_torchvision.py`)'
    if [ ! -f "$f" ]; then
        not_recorded results_torchvision.tsv bench_torchvision.py "$title" '`make bench-torchvision` needs python3-torch'
        return 0
    fi
    awk -F '\t' -v title="$title" -v H="$T/headline" -v R="$T/recording" "$LIB"'
    {
        n++
        L = f("model") " " f("variant")
        b = f("batch") == "" ? 1 : f("batch") + 0 # recordings before the batch column ran batch 1
        row[n] = sprintf("| %s | %s | %s | %d | %s | %s (%s-%s) | %s (%s-%s) | %s | %s |", f("model"), f("variant"),
                         comp(f("compression")), b, f("threads"), tm(f("pdc_ms")), tm(f("pdc_min")), tm(f("pdc_max")),
                         tm(f("ort_ms")), tm(f("ort_min")), tm(f("ort_max")), rx(f("speedup")), er(f("max_rel_diff")))
        if (!(L in seen)) { seen[L] = 1; ml[++nm] = L }
        hs[L] = hs[L] (hs[L] == "" ? "" : ", ") rx(f("speedup")) " at " (b == 1 ? "" : "batch " b ", ") f("threads") \
                " thread" (f("threads") + 0 == 1 ? "" : "s")
    }
    END {
        printf "- `test/bench/results_torchvision.tsv` (bench_torchvision.py): %d row%s\n", n, (n == 1 ? "" : "s") >> R
        for (i = 1; i <= nnotes; i++) printf "  - %s\n", note[i] >> R
        if (!n) exit
        for (i = 1; i <= nm; i++) printf "- torchvision %s exported to ONNX (`results_torchvision.tsv`): ONNX Runtime / pdc %s\n", ml[i], hs[ml[i]] >> H
        printf "\n## %s\n\n", title
        printf "`test/bench/torchvision/bench_torchvision.py`, written to `test/bench/results_torchvision.tsv`: torchvision\n"
        printf "models with random weights, exported to ONNX dense and pruned in PyTorch (3x3 convs: 8 patterns of 4 and\n"
        printf "50%% of kernels removed; fc, and ResNet-50'"'"'s 1x1 convs, in 1x4 blocks), each timed with `pdc bench` and in\n"
        printf "ONNX Runtime on the same file, alternating, at each batch size (a free batch dimension; ms are per run of\n"
        printf "the whole batch); medians over the rounds (their range in brackets).\n"
        printf "x ORT = ONNX Runtime / pdc: above 1, pdc is faster. Compile times of the last pruned model are in the notes.\n"
        printf "\n| model | weights | fewer weights | batch | threads | pdc ms | ONNX Runtime ms | x ORT | max rel diff |\n"
        printf "|---|---|---:|---:|---:|---:|---:|---:|---:|\n"
        for (i = 1; i <= n; i++) print row[i]
    }' "$f" >> "$T/tables"
}

# ------------------------------------------------------------------ the DAG schedule (bench_torchvision.py)
schedule() {
    f=$BENCH/results_schedule.tsv
    title='The DAG schedule: sequential against dag (`bench_torchvision.py --schedule-out`)'
    if [ ! -f "$f" ]; then
        not_recorded results_schedule.tsv bench_torchvision.py "$title" '`make bench-torchvision` needs python3-torch'
        return 0
    fi
    awk -F '\t' -v title="$title" -v H="$T/headline" -v R="$T/recording" "$LIB"'
    {
        n++
        row[n] = sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |", f("model"), f("threads"), tm(f("sequential_ms")),
                         tm(f("dag_ms")), rx(f("speedup")), f("forced_ms") == "" ? "" : tm(f("forced_ms")),
                         f("never_ms") == "" ? "" : tm(f("never_ms")), f("layers_in_lanes"), f("load"))
        hs = hs (hs == "" ? "" : ", ") f("model") " " rx(f("speedup"))
    }
    END {
        printf "- `test/bench/results_schedule.tsv` (bench_torchvision.py): %d row%s\n", n, (n == 1 ? "" : "s") >> R
        if (!n) exit
        printf "- the DAG schedule at 2 threads, sequential / dag (`results_schedule.tsv`): %s\n", hs >> H
        printf "\n## %s\n\n", title
        printf "torchvision models exported to ONNX (random weights), converted by `pdc prune --passes` once with\n"
        printf "canonicalize,plan (sequential) and once with canonicalize,schedule,plan (dag), each timed with `pdc bench`\n"
        printf "at 2 threads, alternating; medians. x = sequential / dag: above 1, the schedule is faster. dag runs the\n"
        printf "chains of a step side by side where the latency model predicts it faster; forced (PDC_CPU_LANES=1) always,\n"
        printf "never (=0) not at all. load: the 1-minute load average before and after.\n"
        printf "\n| model | threads | sequential ms | dag ms | x | forced ms | never ms | layers in steps of 2+ chains | load |\n"
        printf "|---|---:|---:|---:|---:|---:|---:|---:|---|\n"
        for (i = 1; i <= n; i++) print row[i]
    }' "$f" >> "$T/tables"
}

# ------------------------------------------------------------------ groups of models (bench_group)
group() {
    f=$BENCH/results_group.tsv
    title='Groups of models (`bench_group`)'
    if [ ! -f "$f" ]; then
        not_recorded results_group.tsv bench_group "$title"
        return 0
    fi
    awk -F '\t' -v title="$title" -v H="$T/headline" -v R="$T/recording" "$LIB"'
    {
        n++
        row[n] = sprintf("| %s | %s | %s | %s / %s | %s | %s | %s | %s MB | %s MB | %s |", f("case"), f("models"), f("threads"),
                         f("layers_group"), f("layers_apart"), tm(f("group_ms")), tm(f("apart_ms")), rx(f("throughput_x")),
                         f("group_mb"), f("apart_mb"), rx(f("memory_x")))
        if (f("case") == "variants") hv = hv (hv == "" ? "" : ", ") rx(f("throughput_x")) " at " f("threads") " thread" (f("threads") + 0 == 1 ? "" : "s")
        if (f("case") == "twins") ht = ht (ht == "" ? "" : ", ") rx(f("throughput_x")) " at " f("threads") " thread" (f("threads") + 0 == 1 ? "" : "s")
        if (f("case") == "mobile") hm = hm (hm == "" ? "" : ", ") rx(f("throughput_x")) " at " f("threads") " thread" (f("threads") + 0 == 1 ? "" : "s")
        if (f("case") == "unrelated") hu = hu (hu == "" ? "" : ", ") rx(f("throughput_x")) " at " f("threads") " thread" (f("threads") + 0 == 1 ? "" : "s")
    }
    END {
        printf "- `test/bench/results_group.tsv` (bench_group): %d row%s\n", n, (n == 1 ? "" : "s") >> R
        if (!n) exit
        if (hv != "") printf "- two fine-tuned variants of one pruned ResNet-18 as a group (`results_group.tsv`): throughput %s of the two programs in turn\n", hv >> H
        if (ht != "") printf "- two pruned ResNet-18 with different weights as a group, scheduled (`results_group.tsv`): throughput %s\n", ht >> H
        if (hm != "") printf "- pruned ResNet-18 + MobileNetV2 as a group, scheduled (`results_group.tsv`): throughput %s\n", hm >> H
        if (hu != "") printf "- pruned ResNet-18 + VGG-16 as a group, scheduled (`results_group.tsv`): throughput %s\n", hu >> H
        printf "\n## %s\n\n", title
        printf "`build/bench_group`, written to `test/bench/results_group.tsv`: `pdc_compile_group` (share, schedule, plan)\n"
        printf "against the same models compiled apart and run one after the other, 224x224, batch 1, target cpu. Times:\n"
        printf "medians of one run of every model, the two ways alternating; throughput x = apart / group. Memory: what\n"
        printf "malloc holds after compiling and one run, less the models (program model copies, packed weights, arenas).\n"
        printf "\n| case | models | threads | layers group / apart | group ms | apart ms | throughput x | group memory | apart memory | memory x |\n"
        printf "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        for (i = 1; i <= n; i++) print row[i]
    }' "$f" >> "$T/tables"
}

# ------------------------------------------------------------------ 3-D convs (bench_conv3d)
conv3d() {
    f=$BENCH/results_conv3d.tsv
    title='3x3x3 layers of r3d_18 (`bench_conv3d`)'
    if [ ! -f "$f" ]; then
        not_recorded results_conv3d.tsv bench_conv3d "$title"
        return 0
    fi
    awk -F '\t' -v title="$title" -v H="$T/headline" -v R="$T/recording" "$LIB"'
    {
        n++
        th = f("threads") == "" ? 1 : f("threads") + 0
        row[n] = sprintf("| %s | %s | %s | %s | %s | %s | %s | %s |", f("layer"), th, f("method"), f("kept_weights"),
                         f("compression"), tm(f("median_ms")), rx(f("speedup_vs_onednn")), f("max_rel_err"))
        m = f("method")
        if (m != "oneDNN direct") list[th, m] = list[th, m] (list[th, m] == "" ? "" : ", ") rx(f("speedup_vs_onednn"))
        seen[th] = 1
    }
    END {
        printf "- `test/bench/results_conv3d.tsv` (bench_conv3d): %d row%s\n", n, (n == 1 ? "" : "s") >> R
        if (!n) exit
        for (th = 1; th <= 2; th++)
            if (seen[th])
                printf "- r3d_18 3x3x3 layers (`results_conv3d.tsv`), oneDNN direct / pdc at %d thread%s, layer by layer: dense %s; KGS 7/27 %s; KGS 3/27 %s\n",
                       th, (th == 1 ? "" : "s"), list[th, "pdc dense"], list[th, "pdc kgs 7/27"], list[th, "pdc kgs 3/27"] >> H
        printf "\n## %s\n\n", title
        printf "`build/bench_conv3d`, written to `test/bench/results_conv3d.tsv`: the 3x3x3 pad-1 convs of torchvision r3d_18 at a\n"
        printf "1x3x8x112x112 clip, batch 1, at 1 and 2 threads (both pdc and oneDNN); pdc dense, pdc pruned by `prune-kgs` (4x4\n"
        printf "groups, 7 or 3 of 27 positions, `kgs_masks` 8) and oneDNN direct 3-D conv on the dense weights (its preferred\n"
        printf "layouts, reorders outside the timing), interleaved in a shuffled order, median of the repetitions; 1-thread rows\n"
        printf "in CPU time of the calling thread (`--clock thread-cpu`: on a shared host, what other processes take stays out),\n"
        printf "2-thread rows in wall time; vs oneDNN = oneDNN time / method time; rel. err of pdc against oneDNN on the same weights.\n"
        printf "\n| layer | threads | method | kept weights | compression | median ms | vs oneDNN | max rel err |\n"
        printf "|---|---:|---|---:|---:|---:|---:|---:|\n"
        for (i = 1; i <= n; i++) print row[i]
    }' "$f" >> "$T/tables"
}

# ------------------------------------------------------------------ r3d_18 end to end (bench_r3d18)
r3d18() {
    f=$BENCH/results_r3d18.tsv
    title='A pruned r3d_18 end to end (`bench_r3d18`)'
    if [ ! -f "$f" ]; then
        not_recorded results_r3d18.tsv bench_r3d18 "$title"
        return 0
    fi
    awk -F '\t' -v title="$title" -v H="$T/headline" -v R="$T/recording" "$LIB"'
    {
        n++
        row[n] = sprintf("| %s | %s | %s | %s | %s | %s | %s | %s |", f("model"), f("threads"), f("kept") " of " f("weights"),
                         tm(f("pdc_dense_ms")), tm(f("pdc_ms")), tm(f("ort_ms")), rx(f("speedup_vs_ort")), f("max_rel_err"))
        hl = hl (hl == "" ? "" : ", ") rx(f("speedup_vs_ort")) " at " f("threads") " thread" (f("threads") + 0 == 1 ? "" : "s")
    }
    END {
        printf "- `test/bench/results_r3d18.tsv` (bench_r3d18): %d row%s\n", n, (n == 1 ? "" : "s") >> R
        if (!n) exit
        printf "- KGS-pruned r3d_18 at 1x3x8x112x112 (`results_r3d18.tsv`), ONNX Runtime / pdc: %s\n", hl >> H
        printf "\n## %s\n\n", title
        printf "`build/bench_r3d18`, written to `test/bench/results_r3d18.tsv`: torchvision r3d_18 built layer for layer\n"
        printf "with random weights, batchnorms folded (canonicalize), every 3x3x3 conv but the stem pruned by `prune-kgs`\n"
        printf "(4x4 groups, 7 of 27 positions, `kgs_masks` 8); pdc on `cpu` against ONNX Runtime on the same pruned model\n"
        printf "saved as ONNX (zeros included); medians; pdc dense for reference.\n"
        printf "\n| model | threads | kept weights | pdc dense ms | pdc ms | ORT ms | ORT / pdc | max rel err |\n"
        printf "|---|---:|---:|---:|---:|---:|---:|---:|\n"
        for (i = 1; i <= n; i++) print row[i]
    }' "$f" >> "$T/tables"
}

# ------------------------------------------------------------------ torchvision video models (bench_video.py)
video() {
    f=$BENCH/results_video.tsv
    title='torchvision video models exported to ONNX (`bench_video.py`)'
    if [ ! -f "$f" ]; then
        not_recorded results_video.tsv bench_video.py "$title" '`make bench-torchvision` needs python3-torch'
        return 0
    fi
    awk -F '\t' -v title="$title" -v H="$T/headline" -v R="$T/recording" "$LIB"'
    {
        n++
        row[n] = sprintf("| %s | %s | %s | %s | %s | %s | %s | %s |", f("model"), f("variant"), f("threads"), tm(f("pdc_ms")),
                         tm(f("ort_ms")), rx(f("speedup")), f("pdc_vs_torch"), f("ort_vs_torch"))
        hl = hl (hl == "" ? "" : ", ") f("model") " " f("variant") " " rx(f("speedup"))
    }
    END {
        printf "- `test/bench/results_video.tsv` (bench_video.py): %d row%s\n", n, (n == 1 ? "" : "s") >> R
        if (!n) exit
        printf "- torchvision video models at 1x3x8x112x112 exported to ONNX (`results_video.tsv`), ONNX Runtime / pdc: %s\n", hl >> H
        printf "\n## %s\n\n", title
        printf "`test/bench/torchvision/bench_video.py`, written to `test/bench/results_video.tsv`: the torchvision video models\n"
        printf "(random weights, BatchNorm3d with non-trivial statistics) exported to ONNX by PyTorch at 1x3x8x112x112, dense and\n"
        printf "KGS-pruned in PyTorch (test/onnx/make_video_models.py: 4x4 kernel groups, 7 of 27 positions in 3x3x3 windows,\n"
        printf "4 of 9 in 1x3x3, 2 of 3 in 3x1x1, 8 masks per layer, stem and 1x1x1 convs dense: 3.7x, 2.2x and 2.0x fewer\n"
        printf "parameters in all); pdc on `cpu` (kernel groups recognised at import) against\n"
        printf "ONNX Runtime on the same file, alternating, median over rounds of medians; both outputs against the output of PyTorch\n"
        printf "(max abs difference / max|PyTorch|).\n"
        printf "\n| model | variant | threads | pdc ms | ORT ms | ORT / pdc | pdc vs PyTorch | ORT vs PyTorch |\n"
        printf "|---|---|---:|---:|---:|---:|---:|---:|\n"
        for (i = 1; i <= n; i++) print row[i]
    }' "$f" >> "$T/tables"
}

conv results.tsv warm '3x3 layers, activations warm (`bench_conv`)'
conv results_cold.tsv cold '3x3 layers, activations cold (`bench_conv --cold`)'
scaling
e2e
torchvision
batch
rnn
group
schedule
gpu
conv3d
r3d18
video

# ------------------------------------------------------------------ the document
# "# host: ...", "# date: ...", "# commit: ..." lines of the TSVs (any of them, each line once)
META=$(for t in results.tsv results_cold.tsv results_scaling.tsv results_e2e.tsv results_batch.tsv results_rnn.tsv results_torchvision.tsv results_group.tsv results_schedule.tsv results_gpu.tsv; do
           [ -f "$BENCH/$t" ] && sed -n 's/^[[:space:]]*#[[:space:]]*//p' "$BENCH/$t"
       done | grep -iE '^(host|cpu|machine|date|time|commit|build|recorded)[[:space:]]*[:=]' | awk '!seen[$0]++' |
       awk 'BEGIN { ORS = "" } { print (NR > 1 ? "; " : "") $0 }')
{
    cat <<'EOF'
# Performance

<!-- Generated by test/bench/report.sh from test/bench/results*.tsv. Do not edit: regenerate. -->

*Generated from the benchmark TSVs in `test/bench/` by `test/bench/report.sh`; do not edit by hand.
`make bench` re-records the TSVs and regenerates this file; `sh test/bench/report.sh` regenerates it
from the TSVs as they are. It holds the current recording only: earlier ones are in the git history
of the TSVs (`git log -p -- test/bench/`) and, with their context, in
[notes/cpu-history.md](notes/cpu-history.md); how the `cpu` target works is in
[backends.md](backends.md).*

EOF
    if [ -n "$META" ]; then
        printf 'Recording: %s.\n\n' "$META"
    else
        printf 'Recording: the TSVs do not say on which host, on which date or at which commit they were\nrecorded (see "The recording" below).\n\n'
    fi
    cat <<'EOF'
## Headline

Ratios are the other engine's time over pdc's: above 1, pdc is faster. The two `bench_scaling` rows
are pdc's own speed-up from 1 to 2 threads (2.0 at best). Batch 1, fp32. Each cell of the table: the
median over the 3x3 layers, (lowest-highest) after it. Every row is in the tables further down.

EOF
    if [ -s "$T/hl_table" ]; then
        printf '| 3x3 layers'
        for c in $COMPS; do if [ "$c" = 1 ]; then printf ' | dense'; else printf ' | %sx pruned' "$c"; fi; done
        printf ' |\n|---'
        for c in $COMPS; do printf '|---:'; done
        printf '|\n'
        cat "$T/hl_table"
        echo
    fi
    cat "$T/hl_notes" "$T/headline"
    [ -s "$T/hl_table" ] || [ -s "$T/hl_notes" ] || [ -s "$T/headline" ] || echo "No benchmark recorded."
    cat <<'EOF'

## The recording

What each TSV holds, as read from it. The TSVs record the host's state only where a benchmark writes
it (the core-to-core round trip in `results_e2e.tsv`; lines starting with `#`, listed under their
file). Where no date, commit or host is listed here, the TSVs do not carry them: `git log` on a
committed TSV dates it. Each TSV is rewritten by its own step of `make bench`, so one re-recorded
alone may come from another run, build or host than the others.

EOF
    cat "$T/recording"
    cat <<'EOF'

## How it is measured

Common to every benchmark: batch 1, fp32, weights random with a fixed seed; each time is the median
of many repetitions after warm-up (as many as a minimum time per method and a minimum count ask
for). pdc runs a compiled program through `pdc_program_run`, from the model's input to its output
in their own layouts (NCHW for the convolutions), so whatever packing pdc does is inside the time.
Threads: 1 and 2 (the project's host has 2 cores), the same count for pdc and its peer in a row;
`bench_conv` and `bench_scaling` set `PDC_OMP_STATIC=1` so that a 2-thread pdc run keeps a team of
2 even while another process is runnable. Outputs are checked: pdc against oneDNN before the layer
timings, the 2-thread programs against the 1-thread one in `bench_scaling`, pdc against ONNX
Runtime in `bench_e2e` (its max rel err column).

Pruning. "4.5x" and "9x" are pattern-pruned 3x3 layers: every kernel projected onto one of 8
four-entry patterns (centre kept), then 50% or 75% of the kernels removed, leaving 4/9 x 1/2 or
4/9 x 1/4 of the weights (4.5x or 9x fewer multiply-adds). "dense" is the same layer unpruned. The
peers run the pruned weights as a dense layer (zeros included): a dense engine gains nothing from
them, which is the point of comparison.

Peers.
- oneDNN (Debian's `libdnnl`), convolution algorithm direct and Winograd, each in the blocked
  layouts it prefers, with the reorders done once outside the timing (its best case). "oneDNN
  best" is the faster of the two; oneDNN has no Winograd for stride 2 or on hosts without AVX-512,
  where its best is direct.
- OpenBLAS: for the 3x3 layers im2col + `sgemm` (im2col inside the timing) with OpenBLAS's own
  threads, timed after the interleaved methods and followed by a pause (its spinning thread pool
  slows everything else); `make bench` forces its SkylakeX kernels on AVX-512 hosts (its
  DYNAMIC_ARCH picks Haswell ones on AMD). For fc, `sgemv` (batch 1) or `sgemm` on the dense
  product alone, bias and relu left out.
- ONNX Runtime: the npm package `onnxruntime-node` (the version `make deps-bench` installs), driven
  by `test/bench/ort_bench.js` on the same model saved as ONNX by `pdc_model_save_onnx` (zeros
  included): intra-op threads = the thread count, one inter-op thread, sequential, all graph
  optimisations; 3 warm-up runs, then at least 7 runs and 1 s.
- The ideal: the best dense time divided by the compression (oneDNN best / 4.5 or / 9 for the 3x3
  layers, OpenBLAS / 4 for the fc, pdc dense / 4 for the LSTM): a dense engine's speed on only the
  kept weights. "of ideal" = ideal / pdc; 1.0 means pruning paid off in full.

The benchmarks.
- 3x3 layers (`build/bench_conv`, `results.tsv` and `results_cold.tsv`): the 3x3 pad-1 layers of
  VGG-16 (conv1_2 to conv5_2; "+" joins layers of one shape), ResNet-50 (channels@size) and the
  three stride-2 3x3 layers of ResNet-18 (in>out/2). pdc at 4.5x, 9x and dense, oneDNN direct and
  Winograd run interleaved, each repetition in a fresh shuffled order (so none always follows the
  same other one), until each has 0.4 s of samples (at least 7, at most 400). Hot vs cold cache:
  in `results.tsv` each repetition first reads the method's input and output with its threads
  (untimed), as a layer inside a network finds activations just written, while its weights come
  cold (the other methods' runs evict them); in `results_cold.tsv` (`--cold`) the activations are
  left as the other methods' runs left them, so they come from memory too.
- 2-thread scaling (`build/bench_scaling`, `results_scaling.tsv`): pdc alone on the same layers and
  rates. The 1-thread program runs pinned to CPU A, a second copy pinned to CPU B, and the 2-thread
  program with one thread on each; the nine runs of a layer are shuffled repetition by repetition
  (31 to 200 each, `runs`) so that all see the host in the same minutes. speed-up =
  2 / (t2 (1/t1A + 1/t1B)), the 2-thread rate over the mean of the two CPUs' 1-thread rates: 2.0
  means both CPUs busy at their own speed throughout, whatever their speeds. Two cache states:
  flushed (each CPU reads half of a 96 MiB buffer, then the run's threads read its input and
  output: weights, code and pdc's buffers come from memory) and hot (the same run once more just
  before, untimed).
- Whole networks (`build/bench_e2e`, `results_e2e.tsv`): ResNet-18 and VGG-16 at 224x224 built in
  `test/bench/models.c`, every 3x3 conv with more than 3 input channels pattern-pruned at 50%
  connectivity (as the 4.5x layers), VGG-16's fc layers pruned to 1x4 blocks at 10% density, the
  other layers dense. pdc: 3 warm-up runs, then at least 7 runs and 1 s; ONNX Runtime as above on
  the same file; outputs compared (max rel err). Also the compile of a pruned ResNet-50 for `cpu`,
  cold (empty kernel cache) and from the kernel cache (a fresh context), in seconds, and the
  core-to-core round trip (`test/bench/host.c`) before and after: on the project's VM it flips
  between about 50 and 400 ns, and 2-thread figures drop in the slow state.
- fc and LSTM (`build/bench_batch`, `results_batch.tsv`): fc 512 -> 2048 + relu and an LSTM with
  hidden size 512 over 32 steps at batch 1, 8 and 32, dense and block-pruned (`prune-block`, 4x16
  blocks, 75% removed: 4x fewer multiply-adds); at least 11 runs and 0.5 s each.
- LSTM and GRU (`build/bench_rnn`, `results_rnn.tsv`): input and hidden 512, 32 steps, bias, one
  direction, batch 1 and 8, 1 thread; dense and `prune-bcr` in 16x16 blocks keeping 4 (4x) or 2 (8x) of
  each block's 16 columns; ONNX Runtime (onnxruntime-node, `ort_bench.js`, 1 intra-op thread) on the dense
  model, and on each pruned model's own export to check its outputs (max rel err). At least 11 runs
  and 0.5 s each.
- gpu target (`build/gpu_bench`, `make bench-gpu`, `results_gpu.tsv`, only where a GPU and cuDNN
  are present): the same 3x3 layers on pdc's `gpu` target, "run" (`pdc_program_run` with the
  copies) and "kern" (device execution only), against cuDNN's fastest algorithm (true fp32, no TF32)
  plus the bias, data on the device (compare with kern); then whole models on `gpu` and `cpu`.

Reading the numbers. The project's host is a shared 2-vCPU VM: absolute times drift 5-30% between
runs and a single row can be an outlier, so compare the ratios within one recording rather than
times across recordings; rows near a target can land on either side of it from run to run.
EOF
    cat "$T/tables"
} > "$T/out.md"
mv "$T/out.md" "$OUT"
echo "report.sh: wrote $OUT"
