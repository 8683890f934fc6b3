# syntax=docker/dockerfile:1
# foxhunt-worker: one process per GPU. The native trainer is built in a CUDA devel stage; the image
# runs on the CUDA runtime base (cudart + cuBLAS) with Node 20 copied from the official image.
#
#   docker build -f docker/worker.Dockerfile -t foxhunt/worker:0.1.0 .
#   docker build -f docker/worker.Dockerfile --build-arg CUDA_ARCHITECTURES="80;86;89;90" .   # A100..H200
#
# CUDA_ARCHITECTURES is CMake's list: 90 = sm_90 (H100, H200), 80 = A100, 86 = A10/RTX 30xx, 89 = L4/L40.
# CUDA_VERSION must be one the hosts' driver supports (CUDA 13 needs driver >= 580; e.g. 12.8.1 for 570).
ARG CUDA_VERSION=13.0.1
ARG UBUNTU=ubuntu24.04
ARG NODE_IMAGE=node:20.19.5-bookworm-slim

FROM ${NODE_IMAGE} AS node

# --- the native library (libfoxhunt_cuda.so and libfoxhunt_cpu.so) ---
FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS native
ARG CUDA_ARCHITECTURES=90
ARG BUILD_JOBS=4
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends cmake g++ make \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY native/ native/
COPY kernels/ kernels/
RUN cmake -S native -B native/build -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}" \
 && cmake --build native/build -j "${BUILD_JOBS}" \
 && test -f native/build/libfoxhunt_cuda.so && test -f native/build/libfoxhunt_cpu.so

# --- production node_modules (install scripts off: the native library comes from the stage above) ---
FROM node AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# --- the worker image ---
FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tini ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 10001 --user-group --create-home --shell /usr/sbin/nologin foxhunt \
 && mkdir -p /data /cache && chown foxhunt:foxhunt /data /cache
COPY --from=node /usr/local/bin/node /usr/local/bin/node
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json tsconfig.json ./
COPY bin/ bin/
COPY src/ src/
COPY worker/ worker/
COPY config/ config/
COPY docker/healthcheck.mjs docker/healthcheck.mjs
COPY --from=native /src/native/build/libfoxhunt_cuda.so /src/native/build/libfoxhunt_cpu.so native/build/
ENV NODE_ENV=production \
    FOXHUNT_DATA_ROOT=/data \
    FOXHUNT_CACHE_DIR=/cache \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
USER 10001:10001
EXPOSE 9464
# /healthz: the process is alive. (/readyz also needs Redis and an unquarantined GPU: that is the
# orchestrator's readiness signal, not a reason to restart the container.)
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "/app/docker/healthcheck.mjs", "http://127.0.0.1:9464/healthz"]
# tini reaps the sandboxed trainer child and forwards SIGTERM to the worker alone (no -g: the worker
# decides when its trainer stops, after the current epoch is committed).
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/bin/foxhunt-worker.js"]
CMD ["--gpu", "0", "--health-port", "9464"]
