#!/bin/sh
# Slurm Prolog (or HealthCheckProgram): drain this node when envtool finds an error on it.
#
#   slurm.conf:  Prolog=/etc/slurm/envtool-prolog.sh
#                (or HealthCheckProgram=/etc/slurm/envtool-prolog.sh, HealthCheckInterval=300)
#
# Set ENVTOOL, LOCK and PREFIX below (or in the environment slurmd gives the prolog). The
# check runs on this node alone, without torch and without an all-reduce (about half a second
# with a warm lock cache); it never needs SLURM_JOB_ID. Exit 0 lets the job start; a Prolog
# that exits non-zero makes Slurm drain the node and requeue the job, so the drain reason is
# set first, in envtool's words.
ENVTOOL=${ENVTOOL:-/opt/envtool/bin/envtool}
LOCK=${LOCK:-/shared/lab/conda-lock.yml}
PREFIX=${PREFIX:-/shared/envs/ddp}
NODE=${SLURMD_NODENAME:-$(hostname -s)}

reason=$("$ENVTOOL" preflight --quick --lockfile "$LOCK" --prefix "$PREFIX" --drain-reason 2>/dev/null)
code=$?
[ "$code" -eq 0 ] && exit 0
# 1: findings (the reason says the first); 2/3: envtool itself could not run
[ -n "$reason" ] || reason="envtool preflight --quick exited $code"
scontrol update nodename="$NODE" state=drain reason="$reason"
exit 1
