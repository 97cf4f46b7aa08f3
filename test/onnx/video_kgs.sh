#!/bin/sh
# video_kgs.sh PDC DIR - checks that `pdc inspect` recognises the kernel groups make_video_models.py
# pruned into the torchvision video models: every conv it pruned shows "kernel groups 4x4" (not
# unstructured, not plain patterns), the dense exports and the convs it left dense show none.
# Expected counts: r3d_18 16 3x3x3 convs (the stem and the 1x1x1 downsampling convs stay dense),
# mc3_18 4 3x3x3 + 12 1x3x3, r2plus1d_18 16 1x3x3 + 16 3x1x1 ((2+1)-D pairs; its stem stays dense).
pdc=$1 dir=$2 fail=0
for spec in r3d_18:16 mc3_18:16 r2plus1d_18:32; do
    name=${spec%%:*} want=${spec#*:}
    for variant in "" -kgs; do
        out=$("$pdc" inspect "$dir/$name$variant.onnx") || { echo "$name$variant: pdc inspect failed"; fail=1; continue; }
        groups=$(printf '%s\n' "$out" | grep -c ' conv .*kernel groups 4x4')
        other=$(printf '%s\n' "$out" | grep ' conv ' | grep -v 'kernel groups 4x4' | grep -vc ' dense ')
        [ -n "$variant" ] || want=0
        if [ "$groups" -eq "$want" ] && [ "$other" -eq 0 ]; then
            echo "$name$variant: ok    $groups convs with 4x4 kernel groups, the other convs dense"
        else
            echo "$name$variant: FAIL  $groups convs with 4x4 kernel groups (want $want), $other convs with another sparsity"
            fail=1
        fi
        want=${spec#*:}
    done
done
exit $fail
