# Builds both binaries: modelgate (the ext_proc server) and mockprovider.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/modelgate ./cmd/modelgate && \
    CGO_ENABLED=0 go build -trimpath -o /out/mockprovider ./cmd/mockprovider

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/modelgate /out/mockprovider /usr/local/bin/
USER nonroot
ENTRYPOINT ["/usr/local/bin/modelgate"]
