# Outpost: make run (embedded default config) · make test (installs what the tests need, then runs them)
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
BIN       := bin
DATA      ?= $(CURDIR)/run
CMDS      := outpostd outpostctl
CROSS     := linux/amd64 linux/arm64 linux/arm
# Packages whose tests need root (network namespaces, raw sockets) or SIPp run anyway
# when those are missing; they skip with a reason. CI runs as root with SIPp installed.
TESTFLAGS ?= -race -count=1 -timeout 20m

.PHONY: all build cross run test test-deps bench lint fuzz clean image bundle image-test test-images

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(CMDS))

cross:
	@set -e; for p in $(CROSS); do \
	  os=$${p%/*}; arch=$${p#*/}; out=$(BIN)/$$os-$$arch; mkdir -p $$out; \
	  echo "building $$p -> $$out"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch GOARM=7 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $$out/ $(addprefix ./cmd/,$(CMDS)); \
	done

# Runs outpostd on its embedded default (standalone, loopback listeners, demo users) with
# its data in ./run; talk to it with: bin/outpostctl --socket run/outpostd.sock status
run: build
	mkdir -p $(DATA)
	$(BIN)/outpostd --data $(DATA)

# Installs SIPp (Debian: sip-tester) and iproute2 when missing and root can, then runs every test.
test: test-deps
	$(GO) vet ./...
	$(GO) test $(TESTFLAGS) ./...

test-deps:
	@./scripts/test-deps.sh

bench: build test-deps
	$(GO) test -run '^$$' -bench . -benchmem ./...
	@echo "load benchmark against Kamailio: bench/reg_bench.sh (see bench/RESULTS.md)"

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Short fuzz runs of every fuzz target (seed corpora live in testdata/fuzz).
fuzz:
	./scripts/fuzz.sh 20s

clean:
	rm -rf $(BIN) $(DATA)

# Firmware images: image, bundle, image-test, test-images (run by test).
include images/image.mk
