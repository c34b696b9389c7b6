A=(--num-layers 2 --hidden-size 64)
if [[ "$X" == "" ]]; then A+=(--seq-length 128); fi
torchrun --nnodes ${N:-1} --nproc_per_node=8 pretrain_gpt.py ${A[@]} --num-attention-heads 4 --vocab-size 1000 \
 --tensor-model-parallel-size=2 "$@"
