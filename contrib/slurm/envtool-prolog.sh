#!/bin/sh
# Slurm Prolog (or HealthCheckProgram): drain this node when envtool finds an error on it.
#
#   slurm.conf:  Prolog=/etc/slurm/envtool-prolog.sh
#                (or HealthCheckProgram=/etc/slurm/envtool-prolog.sh, HealthCheckInterval=300)
#
# Set ENVTOOL, LOCK and PREFIX below (or in the environment slurmd gives the prolog). The
# check runs on this node alone, without torch and without an all-reduce (about half a second
# with a warm lock cache). Exit 0 lets the job start; a Prolog that exits non-zero makes Slurm
# drain the node and requeue the job (held), so the drain reason is set first, in envtool's
# words.
#
# What is judged depends on who runs it, as the node may be shared:
#   a Prolog (SLURM_JOB_ID set): the job's GPUs only (SLURM_JOB_GPUS, else CUDA_VISIBLE_DEVICES:
#     slurmd gives a prolog both for a job with gres GPUs), the processes on them and their
#     Xid records: another job's process on another GPU is no reason to refuse this job;
#   a HealthCheckProgram (no SLURM_JOB_ID), or a job given no GPU: health, never occupancy
#     (--health): the node's own jobs hold its GPUs.
# EXCLUSIVE=1 (jobs take whole nodes, without gres GPUs): a job given no GPU is judged on
# every GPU, the processes holding them included.
ENVTOOL=${ENVTOOL:-/opt/envtool/bin/envtool}
LOCK=${LOCK:-/shared/lab/conda-lock.yml}
PREFIX=${PREFIX:-/shared/envs/ddp}
EXCLUSIVE=${EXCLUSIVE:-0}
NODE=${SLURMD_NODENAME:-$(hostname -s)}
# slurmd gives a prolog no PATH (scontrol, nvidia-smi)
export PATH="${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}"

JOB_GPUS=${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}
if [ -z "${SLURM_JOB_ID:-}" ]; then
    set -- --health
elif [ -n "$JOB_GPUS" ]; then
    set -- --job-gpus "$JOB_GPUS"
elif [ "$EXCLUSIVE" = 1 ]; then
    set --
else
    set -- --health
fi
reason=$("$ENVTOOL" preflight --quick --lockfile "$LOCK" --prefix "$PREFIX" "$@" --drain-reason 2>/dev/null)
code=$?
[ "$code" -eq 0 ] && exit 0
# 1: findings (the reason says the first); 2/3: envtool itself could not run
[ -n "$reason" ] || reason="envtool preflight --quick exited $code"
scontrol update nodename="$NODE" state=drain reason="$reason"
exit 1
