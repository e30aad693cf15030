#!/bin/bash
# The demo EAGLE layer trained on a GPU in one fixed time budget (tools/train/README.md,
# "EAGLE on a GPU"). Run from the repository root on a machine with CUDA PyTorch, with
# tools/train/work/data/{train.bin,val.bin} present. Results go to $OUT (default ./out/gpu-eagle):
#   eagle/log.tsv, eagle/ckpt.pt (every minute), eagle/final.pt, eagle.gguf, run.log
# Stages: 1. the cached generator checked against full forwards; 2. teacher windows
# (gen_teacher_torch.py: prompts from the training split continued by the target, 3/4 greedy,
# 1/4 sampled at T=1); 3. the fused layer trained from models/demo-eagle.gguf on the fly
# (target features per step, 3/4 teacher windows) for TRAIN_MINUTES; 4. export.
# Environment: OUT, PYTHON, DEVICE (cuda; cpu for a dry run with tiny WINDOWS / BATCH_TOKENS),
# WINDOWS, TRAIN_MINUTES, BATCH_TOKENS, CALIBRATE (steps timed before the schedule is fixed),
# INIT (heads GGUF to start from), SEED, LR (peak).
set -euo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/out/gpu-eagle}
PY=${PYTHON:-python3}
WINDOWS=${WINDOWS:-65536}
TRAIN_MINUTES=${TRAIN_MINUTES:-5.5}
DEVICE=${DEVICE:-cuda}
BATCH_TOKENS=${BATCH_TOKENS:-32768}
CALIBRATE=${CALIBRATE:-30}
TARGET=$PWD/models/demo-target.gguf
INIT=${INIT:-$PWD/models/demo-eagle.gguf}
SEED=${SEED:-1234}
LR=${LR:-1.5e-3}
mkdir -p "$OUT/eagle"
exec > >(tee -a "$OUT/run.log") 2>&1
cd tools/train
nvidia-smi -L || true
t0=$(date +%s)
$PY gen_teacher_torch.py --target "$TARGET" --check --device "$DEVICE"
$PY gen_teacher_torch.py --target "$TARGET" --windows "$WINDOWS" --batch 8192 --device "$DEVICE" \
    --seed "$SEED" --out /tmp/teacher_torch.bin
echo "teacher windows: $(( $(date +%s) - t0 )) s"
set +e
$PY train_heads.py --kind eagle --features none --target "$TARGET" --fuse-layers 1,3 \
    --init "$INIT" --out "$OUT/eagle" --device "$DEVICE" \
    --extra-data /tmp/teacher_torch.bin --extra-frac 0.75 \
    --batch-tokens "$BATCH_TOKENS" --seed "$SEED" --lr "$LR" --warmup-steps 50 --unroll 3 --ce-target both \
    --ce-weight 0.3 --schedule-minutes "$TRAIN_MINUTES" --calibrate-steps "$CALIBRATE" \
    --max-steps 100000 --eval-every 500 --eval-windows 16 --log-every 50 --ckpt-minutes 1
rc=$?
set -e
echo "training: rc $rc, $(( $(date +%s) - t0 )) s"
heads=$OUT/eagle/final.pt
[ -f "$heads" ] || heads=$OUT/eagle/ckpt.pt
$PY export_heads.py --heads "$heads" --target-gguf "$TARGET" --out "$OUT/eagle.gguf"
rm -f "$OUT/eagle/train.lock"
echo "done: $(( $(date +%s) - t0 )) s"
