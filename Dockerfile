# Multi-stage build of every Telos binary. Images are built locally
# (`docker compose build`); nothing is pulled from a private registry.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --workspace --bins \
 && cp target/release/telos-world target/release/telos-gate target/release/telosctl /usr/local/bin/

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 telos \
 && apt-get update && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/local/bin/telos-world /usr/local/bin/telos-gate /usr/local/bin/telosctl /usr/local/bin/
COPY config/world /etc/telos/world
USER telos
ENV TELOS_WORLD=/etc/telos/world
# SIGTERM drains a world shard; compose gives it longer than the drain deadline.
STOPSIGNAL SIGTERM
