#!/bin/sh
# report.sh - sizes and instruction counts of emitted AArch64 libraries, dense vs pruned (make arm-report).
#
# For each test model: `pdc prune` (pattern + connectivity pruning, reorder, plan for the CNNs; 4x4
# blocks for the LSTM), `pdc compile --target aarch64-linux-gnu`, then the same for two larger
# models written here as .pdcir with uniform random weights (fixed seed): fc_big, an fc 512 -> 256
# at batch 1 with 10% of its 4x4 blocks kept, mm_big, a linear layer as ONNX carries one on a
# sequence (matmul of x [1, 8, 512] by a constant [512, 256]) with 10% of its 4x4 blocks kept, and lstm_big, an LSTM with input and hidden 128 over 16
# steps with 25% of the 4x4 blocks of both gate matrices kept; then
#   code   bytes of .text of libNAME.a (aarch64-linux-gnu-size -A)
#   consts bytes of .rodata (packed weights, index arrays; .data is empty)
#   fmla   fmla instructions on vector registers (v.4s / v.s[]) in the disassembly
#   insns  AArch64 instructions executed by one inference under qemu-aarch64: qemu 7.2 here has no
#          TCG plugins (no libinsn.so), so `-d in_asm,exec,nochain` logs every translated block and
#          every block executed; the instructions of each executed block are summed. Run with 2
#          inferences and with 1, the difference is one inference (start-up and I/O cancel out).
# Usage: test/arm/report.sh [BUILD_DIR]   (default build; needs BUILD_DIR/pdc, the cross gcc and qemu)
set -eu
BUILD=${1:-build}
PDC=$BUILD/pdc
DATA=${PDC_TEST_DATA:-test/data}/onnx
CPU=${ARM_REPORT_CPU:-cortex-a76}
for tool in aarch64-linux-gnu-gcc aarch64-linux-gnu-size aarch64-linux-gnu-objdump qemu-aarch64; do
    command -v $tool >/dev/null 2>&1 || { echo "report.sh: $tool not found (install gcc-aarch64-linux-gnu, qemu-user)"; exit 1; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/pdc-arm-report-XXXXXX")
trap 'rm -rf "$T"' EXIT

# instructions executed by DRIVER with N inferences (ARGS: the driver's file arguments)
insns() {
    qemu-aarch64 -L /usr/aarch64-linux-gnu -d in_asm,exec,nochain -D "$T/log" "$1" -n"$2" $ARGS 2>/dev/null
    awk '
        /^IN:/ { inblk = 1; first = 1; next }
        inblk && /^0x[0-9a-f]+:/ { pc = $1; sub(":", "", pc); if (first) { cur = pc; first = 0 } n[cur]++; next }
        inblk && /^$/ { inblk = 0; next }
        /^Trace / { s = $0; sub(/^[^[]*\[[0-9a-f]+\//, "", s); sub(/\/.*/, "", s); sub(/^0+/, "", s); total += n["0x" s] + 0 }
        END { printf "%d\n", total }' "$T/log" | tr -d ' '
}

# gen NAME: writes $T/NAME.pdcir (dense weights, uniform in [-0.5, 0.5), awk's fixed seed)
gen() {
    case $1 in
        fc_big) awk 'BEGIN { srand(7); printf "pdcir 1\nmodel \"fc_big\"\ninput x : f32[1,512]\nconst w : f32[256,512] = [";
                   for (i = 0; i < 256 * 512; i++) printf "%s%.4f", i ? ", " : "", rand() - 0.5;
                   printf "]\nlayer fc = fc(x, w) -> (y)\noutput y\n" }' > "$T/$1.pdcir" ;;
        mm_big) awk 'BEGIN { srand(9); printf "pdcir 1\nmodel \"mm_big\"\ninput x : f32[1,8,512]\nconst w : f32[512,256] = [";
                   for (i = 0; i < 512 * 256; i++) printf "%s%.4f", i ? ", " : "", rand() - 0.5;
                   printf "]\nlayer mm = matmul(x, w) -> (y)\noutput y\n" }' > "$T/$1.pdcir" ;;
        lstm_big) awk 'BEGIN { srand(8); printf "pdcir 1\nmodel \"lstm_big\"\ninput x : f32[16,1,128]\n";
                     for (m = 0; m < 2; m++) { printf "const %s : f32[1,512,128] = [", m ? "r" : "w";
                         for (i = 0; i < 512 * 128; i++) printf "%s%.4f", i ? ", " : "", (rand() - 0.5) / 4; printf "]\n" }
                     printf "layer lstm = lstm(x, w, r) -> (y) {hidden_size=128}\noutput y\n" }' > "$T/$1.pdcir" ;;
    esac
}

printf '%-18s %-7s %10s %10s %6s %14s\n' model variant code_B consts_B fmla insns/inference
for model in resnet_small mobilenetv2_small lstm pattern_cnn fc_big mm_big lstm_big; do
    case $model in
        *_big) gen $model; orig="$T/$model.pdcir" ;;
        *) orig="$DATA/$model.onnx"; [ -f "$orig" ] || { echo "report.sh: $orig missing"; exit 1; } ;;
    esac
    case $model in
        lstm|lstm_big) passes="prune-block" ; popt="--block 4x4:0.75" ;;
        fc_big|mm_big) passes="prune-block" ; popt="--block 4x4:0.9" ;;
        *) passes="canonicalize,prune-pattern,prune-connectivity,reorder,plan"; popt="" ;;
    esac
    $PDC prune "$orig" -o "$T/${model}_p.pdc" --passes "$passes" $popt >/dev/null
    for variant in dense pruned; do
        name=${model}_$variant
        src="$orig"; [ $variant = pruned ] && src="$T/${model}_p.pdc"
        $PDC compile "$src" --target aarch64-linux-gnu --cpu "$CPU" --name "$name" -o "$T/$name" >/dev/null
        lib="$T/$name/lib$name.a"
        code=$(aarch64-linux-gnu-size -A "$lib" | awk '$1 == ".text" { s += $2 } END { print s + 0 }')
        consts=$(aarch64-linux-gnu-size -A "$lib" | awk '$1 ~ /^\.rodata/ || $1 == ".data" { s += $2 } END { print s + 0 }')
        fmla=$(aarch64-linux-gnu-objdump -d "$lib" | grep -cE 'fmla[[:space:]]+v[0-9]+\.(4s|2s)' || true)
        aarch64-linux-gnu-gcc -O2 -I "$T/$name" -DPDC_MODEL="$name" "-DPDC_HEADER=\"$name.h\"" test/arm/driver.c "$lib" -lm -o "$T/run"
        h="$T/$name/$name.h"
        ARGS=""
        for i in $(seq 0 $(($(sed -n "s/^#define ${name}_NUM_INPUTS //p" "$h") - 1))); do
            head -c $(($(sed -n "s/^#define ${name}_INPUT${i}_SIZE //p" "$h") * 4)) /dev/urandom > "$T/in$i.bin"
            ARGS="$ARGS $T/in$i.bin"
        done
        ARGS="$ARGS --"
        for i in $(seq 0 $(($(sed -n "s/^#define ${name}_NUM_OUTPUTS //p" "$h") - 1))); do
            ARGS="$ARGS $T/out$i.bin:$(sed -n "s/^#define ${name}_OUTPUT${i}_SIZE //p" "$h")"
        done
        one=$(insns "$T/run" 1)
        two=$(insns "$T/run" 2)
        printf '%-18s %-7s %10s %10s %6s %14s\n' "$model" $variant "$code" "$consts" "$fmla" $((two - one))
    done
done
