# Builds modelgate (the ext_proc server), mockprovider and healthcheck, the
# probe compose runs in place of curl, which the distroless image lacks.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The gateway's module alone: go.work adds deploy/'s, which only tests use.
ENV GOWORK=off
RUN CGO_ENABLED=0 go build -trimpath -o /out/modelgate ./cmd/modelgate && \
    CGO_ENABLED=0 go build -trimpath -o /out/mockprovider ./cmd/mockprovider && \
    CGO_ENABLED=0 go build -trimpath -o /out/healthcheck ./cmd/healthcheck && \
    install -d -m 0700 /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/modelgate /out/mockprovider /out/healthcheck /usr/local/bin/
# /data holds the SQLite database. It belongs to the user below, and so does
# a new, empty named volume mounted on it: Docker copies the owner and mode of
# the image's directory into such a volume (not into a bind mount, nor into a
# volume that already exists).
COPY --from=build --chown=65532:65532 /out/data /data
# distroless's nonroot user, by number: Kubernetes can verify runAsNonRoot
# only for a numeric USER. deploy/compose's tests read both ids from here.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/modelgate"]
