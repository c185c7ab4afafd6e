# Images for collapser: one final target per binary, each FROM scratch.
#
#   version=$(sed -n 's/^appVersion: "\(.*\)"$/\1/p' charts/collapser/Chart.yaml)
#   docker build --target collapser --build-arg VERSION=$version -t collapser/collapser:$version .
#
# (hello-backend, democlient and collapser-injector alike). scripts/images.sh builds all
# four, tagged and labelled with the chart's appVersion, the one place the version is
# written.
#
# The binaries come from one of two stages, chosen with BIN_SOURCE:
#   gobuild  (default) compiles them in ${GO_IMAGE}, the public Go image.
#   prebuilt takes binaries compiled on the host into bin/image/ (for machines that
#            cannot pull ${GO_IMAGE}); scripts/images.sh does this. Both stages put
#            the same static binaries (same flags) at the same paths, so the final
#            stages below, and the images they make, are the same.
# BuildKit builds only the stages a target needs. Docker's legacy builder builds every
# stage before the target; scripts/images.sh works with both, as it leaves the stage
# BIN_SOURCE does not select out of the Dockerfile it hands to docker.
ARG GO_IMAGE=golang:1.26-bookworm
ARG BIN_SOURCE=gobuild

FROM ${GO_IMAGE} AS gobuild
WORKDIR /workspace
# Modules first: editing sources does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY src/ src/
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" -o /out/ \
        ./src/cmd/collapser ./src/cmd/hello-backend ./src/cmd/democlient ./src/cmd/collapser-injector

FROM scratch AS prebuilt
COPY bin/image/collapser bin/image/hello-backend bin/image/democlient bin/image/collapser-injector /out/

# bin is whichever stage BIN_SOURCE names; the final stages copy only from it.
FROM ${BIN_SOURCE} AS bin

FROM scratch AS collapser
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="collapser" \
      org.opencontainers.image.description="gRPC sidecar that collapses identical concurrent calls (unary calls and replayed server streams) into one backend call" \
      org.opencontainers.image.source="https://github.com/collapser/collapser" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=bin /out/collapser /collapser
USER 65532:65532
# 50052: gRPC (proxy and grpc.health.v1); 2112: Prometheus metrics.
EXPOSE 50052 2112
ENTRYPOINT ["/collapser"]

FROM scratch AS hello-backend
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="hello-backend" \
      org.opencontainers.image.description="Slow demo gRPC backend that counts every request it serves" \
      org.opencontainers.image.source="https://github.com/collapser/collapser" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=bin /out/hello-backend /hello-backend
USER 65532:65532
# 50051: gRPC (Greeter, Stats, reflection, health); 2113: Prometheus metrics.
EXPOSE 50051 2113
ENTRYPOINT ["/hello-backend"]

FROM scratch AS democlient
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="democlient" \
      org.opencontainers.image.description="Sends bursts of identical calls through collapser and reports the backend's own call count" \
      org.opencontainers.image.source="https://github.com/collapser/collapser" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=bin /out/democlient /democlient
USER 65532:65532
ENTRYPOINT ["/democlient"]

FROM scratch AS collapser-injector
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="collapser-injector" \
      org.opencontainers.image.description="Mutating admission webhook that puts the collapser sidecar in front of annotated gRPC workloads" \
      org.opencontainers.image.source="https://github.com/collapser/collapser" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=bin /out/collapser-injector /collapser-injector
USER 65532:65532
# 8443: the admission webhook (HTTPS); 8080: Prometheus metrics, /readyz and /livez.
EXPOSE 8443 8080
ENTRYPOINT ["/collapser-injector"]
