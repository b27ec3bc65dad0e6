# syntax=docker/dockerfile:1
#
# Quotascale's cluster autoscaler.
# Build from the repository root (`make images` does):
#
#   docker build -f build/cluster-autoscaler.Dockerfile \
#     --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse --short HEAD) \
#     -t ghcr.io/quotascale/cluster-autoscaler:TAG .
#
# build/cluster-autoscaler.Dockerfile.dockerignore keeps the context small (BuildKit reads it
# instead of a root .dockerignore).

ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
# Set by BuildKit and buildah from --platform; empty means the build machine's.
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
ARG COMMIT=unknown
WORKDIR /src
# Modules first, so that a source change reuses the download layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# A static binary (no cgo), version-stamped, with no build paths or VCS data in it.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/quotascale/quotascale/pkg/version.Version=${VERSION} -X github.com/quotascale/quotascale/pkg/version.Commit=${COMMIT}" \
      -o /out/cluster-autoscaler ./cluster-autoscaler

# distroless static: no shell, no package manager; runs as nonroot (65532).
# The layout is upstream's image's: the binary at /cluster-autoscaler and the
# working directory /, so that upstream's Helm chart, whose command is
# ./cluster-autoscaler, runs this image unchanged.
FROM gcr.io/distroless/static:nonroot
ARG VERSION=dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="cluster-autoscaler" \
      org.opencontainers.image.source="https://github.com/quotascale/quotascale" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
COPY --from=build /out/cluster-autoscaler /cluster-autoscaler
WORKDIR /
USER 65532:65532
# CMD, not ENTRYPOINT, as upstream: a pod's command replaces it.
CMD ["/cluster-autoscaler"]
