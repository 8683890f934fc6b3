# syntax=docker/dockerfile:1
# The producer CLI (`foxhunt`) and the dashboard (`foxhunt dashboard`) on a slim Node 20 image.
# It carries the CPU backend of the native trainer too, so `foxhunt train` works in it on a CPU.
#
#   docker build -f docker/node.Dockerfile -t foxhunt/node:0.1.0 .
#   docker run --rm -p 127.0.0.1:8080:8080 -e REDIS_URL -e FOXHUNT_DASHBOARD_TOKEN -e FOXHUNT_DASHBOARD_READONLY_TOKEN \
#     foxhunt/node:0.1.0 dashboard --host 0.0.0.0 --port 8080
ARG NODE_VERSION=20.19.5

# --- the CPU backend (libfoxhunt_cpu.so), built by the project's own script ---
FROM node:${NODE_VERSION}-bookworm AS native
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends cmake g++ make \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY scripts/build-native.mjs scripts/build-native.mjs
COPY native/ native/
COPY kernels/ kernels/
RUN node scripts/build-native.mjs && test -f native/build/libfoxhunt_cpu.so

# --- production node_modules ---
FROM node:${NODE_VERSION}-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# --- the producer + dashboard image ---
FROM node:${NODE_VERSION}-bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tini ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 10001 --user-group --create-home --shell /usr/sbin/nologin foxhunt \
 && mkdir -p /data /cache && chown foxhunt:foxhunt /data /cache
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json tsconfig.json ./
COPY bin/ bin/
COPY src/ src/
COPY producer/ producer/
COPY worker/ worker/
COPY config/ config/
COPY docker/healthcheck.mjs docker/healthcheck.mjs
COPY --from=native /src/native/build/libfoxhunt_cpu.so native/build/
ENV NODE_ENV=production \
    FOXHUNT_DATA_ROOT=/data \
    FOXHUNT_CACHE_DIR=/cache
USER 10001:10001
EXPOSE 8080
# The dashboard's public /healthz (no token); a one-off producer run ends long before the first check.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "/app/docker/healthcheck.mjs", "http://127.0.0.1:8080/healthz"]
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/bin/foxhunt.js"]
CMD ["--help"]
