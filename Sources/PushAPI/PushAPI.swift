// The HTTP API (see openapi.yaml).
