# syntax=docker/dockerfile:1
# The lab's environment as an image, installed from exactly the locked packages.
#
# Built by `envtool build`, which assembles the context: this file, envtool_node/ (the node
# package), wheels/, channels/ and the lockfile as conda-lock.yml. The builder installs
# envtool, then `envtool install` installs the lock's linux-64 entries into
# /opt/conda/envs/$ENV_NAME with py-rattler, every archive's hash checked; the runtime stage
# copies only that prefix and the node package onto a slim base. `docker run IMAGE` prints
# the node's facts (python -m envtool_node.facts).
ARG BUILDER_IMAGE=python:3.11-slim-bookworm
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BUILDER_IMAGE} AS builder
ARG ENV_NAME=ddp
ARG PLATFORM=linux-64
# `envtool build --allow-insecure-url` passes it on (a channel served over http on the host)
ARG INSTALL_ARGS=
# wheels/: envtool and the three packages `envtool install` needs (click, PyYAML, py-rattler),
# fetched by `envtool build` on the host (pinned with their sha256 in requirements/), so this
# step needs no package index; wheels/requirements.txt gives each wheel's sha256 again.
COPY wheels /src/wheels
RUN python3 -m venv /opt/envtool \
 && /opt/envtool/bin/pip install --no-cache-dir --disable-pip-version-check --quiet \
      --no-index --no-deps --require-hashes -r /src/wheels/requirements.txt
# channels/: the archives of a channel behind credentials, fetched by `envtool build` on the
# host (no secret enters this build); bases.json: each copy's base -> the channel's ${VAR}
# template, written back into the conda-meta records after the install.
COPY channels /src/channels
COPY conda-lock.yml /src/conda-lock.yml
RUN /opt/envtool/bin/envtool install --lockfile /src/conda-lock.yml \
      --prefix /opt/conda/envs/${ENV_NAME} --platform ${PLATFORM} \
      --cache-dir /tmp/envtool-cache ${INSTALL_ARGS} \
 && /opt/envtool/bin/python -c 'import json, sys; from pathlib import Path; \
      from envtool.lock.secrets import scrub_records as s; \
      s(Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text()))' \
      /opt/conda/envs/${ENV_NAME} /src/channels/bases.json \
 && rm -rf /tmp/envtool-cache /opt/conda/envs/${ENV_NAME}/CACHEDIR.TAG \
 && chmod -R a+rX /opt/conda  # rattler writes conda-meta/*.json 0600; the user must read it

FROM ${BASE_IMAGE}
ARG ENV_NAME=ddp
ARG USER_UID=1000
COPY --from=builder /opt/conda/envs/${ENV_NAME} /opt/conda/envs/${ENV_NAME}
COPY envtool_node /opt/envtool/envtool_node
RUN useradd --create-home --uid ${USER_UID} envtool 2>/dev/null \
    || echo "envtool:x:${USER_UID}:${USER_UID}::/tmp:/bin/sh" >> /etc/passwd
ENV CONDA_PREFIX=/opt/conda/envs/${ENV_NAME} \
    PATH=/opt/conda/envs/${ENV_NAME}/bin:/usr/local/bin:/usr/bin:/bin
USER ${USER_UID}
WORKDIR /opt/envtool
CMD ["python", "-B", "-m", "envtool_node.facts"]
