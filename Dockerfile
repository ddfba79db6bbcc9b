# streamidx: static binaries on a distroless base, run as a non-root user.
# streamidx hands every command but a lookup of a current index to
# streamidx-engine beside it.
#   docker build -t streamidx .
#   docker run --rm streamidx --help
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# CGO off: a static binary (SQLite through the pure-Go driver).
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/streamidx ./cmd/streamidx \
	&& CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/streamidx-engine ./cmd/streamidx-engine \
	&& CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/streamidx-client ./cmd/streamidx-client \
	&& mkdir -p /out/var/lib/streamidx

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/streamidx /out/streamidx-engine /out/streamidx-client /usr/local/bin/
# The staging store and the default data directory, owned by the image's
# non-root user (nonroot, uid 65532).
COPY --from=build --chown=65532:65532 /out/var/lib/streamidx /var/lib/streamidx
USER 65532:65532
WORKDIR /var/lib/streamidx
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/streamidx"]
CMD ["run", "--config", "/etc/streamidx/streamidx.yaml"]
