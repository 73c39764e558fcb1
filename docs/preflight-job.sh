#!/bin/bash
# A training job that checks its own allocation first: `envtool preflight` probes every
# allocated node (one srun step), compares it with the lock and with the other nodes, runs a
# cross-node all-reduce exactly as torchrun will, and stops the job with a clear message
# before torchrun starts if anything is wrong. Submit with: sbatch docs/preflight-job.sh
#SBATCH --job-name=ddp-train
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --time=01:00:00
set -euo pipefail

ENVTOOL=${ENVTOOL:-envtool}
LOCK=${LOCK:-conda-lock.yml}
PREFIX=${PREFIX:-$HOME/miniforge3/envs/ddp}        # may contain {node}: per-node prefixes
FIRST=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)

# shellcheck disable=SC2086  # PREFLIGHT_ARGS is a list of options on purpose
"$ENVTOOL" preflight --lockfile "$LOCK" --prefix "$PREFIX" \
    --allreduce-args "${ALLREDUCE_ARGS:--b 8 -e 1G -f 4 -n 10 -w 2}" \
    --junit "preflight-$SLURM_JOB_ID.xml" ${PREFLIGHT_ARGS:-}

# Reached only when every node matches the lock and the all-reduce passed.
if [ -n "${TRAIN_CMD:-}" ]; then
    eval "$TRAIN_CMD"
else
    srun torchrun --nnodes="$SLURM_JOB_NUM_NODES" --nproc-per-node=gpu \
        --rdzv-backend=c10d --rdzv-endpoint="$FIRST:29500" --rdzv-id="$SLURM_JOB_ID" train.py
fi
