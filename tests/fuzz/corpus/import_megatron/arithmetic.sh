NUM_LAYERS=32
PP=2
CHUNKS=2
PER_STAGE=$((${NUM_LAYERS} / ${PP} / ${CHUNKS}))
GPUS=$(( (4 + 4) * 2 % 100 ))
ARGS="--pipeline-model-parallel-size ${PP}"
if [[ ${CHUNKS} -gt 1 ]]; then
  ARGS="${ARGS} --num-layers-per-virtual-pipeline-stage ${PER_STAGE}"
fi
python pretrain_gpt.py --num-layers ${NUM_LAYERS} --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention --num-query-groups 8 --swiglu --vocab-size 128256 ${ARGS} --global-batch-size $((GPUS * 4)) --micro-batch-size $((-1 + 2))
