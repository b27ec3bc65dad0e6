# syntax=docker/dockerfile:1
#
# Quotascale's kube-scheduler (upstream kube-scheduler plus the CapacityScheduling plugin).
# Build from the repository root (`make images` does):
#
#   docker build -f build/kube-scheduler.Dockerfile \
#     --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse --short HEAD) \
#     -t ghcr.io/quotascale/kube-scheduler:TAG .
#
# build/kube-scheduler.Dockerfile.dockerignore keeps the context small (BuildKit reads it
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
# --version is upstream's: the Kubernetes version go.mod pins, ours as build
# metadata.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    K8S_VERSION=$(go list -m -f '{{.Version}}' k8s.io/kubernetes) && \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/quotascale/quotascale/pkg/version.Version=${VERSION} -X github.com/quotascale/quotascale/pkg/version.Commit=${COMMIT} -X k8s.io/component-base/version.gitVersion=${K8S_VERSION}+quotascale.${VERSION} -X k8s.io/component-base/version.gitCommit=${COMMIT}" \
      -o /out/kube-scheduler ./scheduler

# distroless static: no shell, no package manager; runs as nonroot (65532).
FROM gcr.io/distroless/static:nonroot
ARG VERSION=dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="kube-scheduler" \
      org.opencontainers.image.source="https://github.com/quotascale/quotascale" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
COPY --from=build /out/kube-scheduler /usr/local/bin/kube-scheduler
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kube-scheduler"]
