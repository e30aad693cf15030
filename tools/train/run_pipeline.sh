#!/bin/sh
# Builds the whole demo pair, resumably: corpus -> tokenizer -> target -> draft -> GGUF exports.
# Each stage skips what is done and train.py resumes from its checkpoint, so a later session
# continues with the same command (run from the repository root):
#   nohup nice -n 19 tools/train/run_pipeline.sh >>tools/train/work/pipeline.out 2>&1 &
# SPECDEC_TARGET_STEPS / SPECDEC_DRAFT_STEPS override train.py's --max-steps (1600 / 1200).
set -e
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
T=tools/train
W=${SPECDEC_TRAIN_WORK:-$T/work}
mkdir -p "$W"
[ -f $W/corpus/manifest.json ] || $PY $T/prepare_corpus.py
[ -f $W/data/val_index.json ] || $PY $T/train_tokenizer.py
$PY $T/train.py --mode target ${SPECDEC_TARGET_STEPS:+--max-steps $SPECDEC_TARGET_STEPS}
$PY $T/train.py --mode distill ${SPECDEC_DRAFT_STEPS:+--max-steps $SPECDEC_DRAFT_STEPS}
mkdir -p $W/export
for type in f16 q8_0; do
  $PY $T/export_gguf.py --ckpt $W/target/final.pt --out $W/export/target-$type.gguf --type $type --name specdec-demo-target
  $PY $T/export_gguf.py --ckpt $W/draft/final.pt --out $W/export/draft-$type.gguf --type $type --name specdec-demo-draft
done
$PY $T/check_export.py --ckpt $W/target/final.pt --gguf $W/export/target-f16.gguf
$PY $T/check_export.py --ckpt $W/draft/final.pt --gguf $W/export/draft-f16.gguf
$PY $T/evaluate.py --model $W/target/final.pt --draft $W/draft/final.pt --spec-prompts 8 --samples 2 \
  | tee $W/export/evaluation.txt
echo "pipeline done: $W/export"
# Self-speculation heads (issue 12, docs/HEADS.md): features of the final target, Medusa and
# EAGLE trained on them, GGUFs checked against PyTorch, evaluation (tools/train/README.md).
H=$W/heads
TG=$W/export/target-f16.gguf
$PY $T/collect_features.py --target $W/target/final.pt --out $H/features
$PY $T/train_heads.py --kind medusa --features $H/features --out $H/medusa
$PY $T/train_heads.py --kind eagle --features $H/features --out $H/eagle
for kind in medusa eagle; do
  [ -f $H/$kind.gguf ] || $PY $T/export_heads.py --heads $H/$kind/final.pt --target-gguf $TG --out $H/$kind.gguf
done
if [ ! -f $H/evaluation.txt ]; then
  $PY $T/check_heads.py --target $W/target/final.pt --target-gguf $TG --medusa $H/medusa/final.pt \
    --medusa-gguf $H/medusa.gguf --eagle $H/eagle/final.pt --eagle-gguf $H/eagle.gguf
  $PY $T/eval_heads.py --target $W/target/final.pt --medusa $H/medusa/final.pt \
    --eagle $H/eagle/final.pt >$H/evaluation.tmp
  mv $H/evaluation.tmp $H/evaluation.txt
fi
echo "heads done: $H"
