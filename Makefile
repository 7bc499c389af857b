# Outpost: make run (embedded default config) · make test (installs what the tests need, then runs them)
#         · make check (gofmt, vet, staticcheck, shellcheck, go test -short: a few minutes)
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
BIN       := bin
DATA      ?= $(CURDIR)/run
CMDS      := outpostd outpostctl
CROSS     := linux/amd64 linux/arm64 linux/arm
# Packages whose tests need root (network namespaces, raw sockets) or SIPp run anyway
# when those are missing; they skip with a reason. CI runs as root with SIPp installed,
# and .ci/run sets CI=true: there a test missing root or a tool test-deps installs fails
# (internal/testenv).
TESTFLAGS ?= -race -count=1 -timeout 20m
# make check's tests: -short skips every test that needs root, network namespaces, SIPp or
# qemu (each says so); no -race, to stay within a few minutes on two cores; -count=1:
# the tests run every time (about 20 s), not from the test cache.
CHECK_TESTFLAGS ?= -short -count=1 -timeout 10m
# make bench: every Go benchmark of the repository (the relay's per-packet ones included),
# each for about a second; allocs/op are exact, ns/op depend on the box.
BENCHFLAGS ?= -benchtime=1s -timeout 30m
# Build tags whose files vet and staticcheck also cover (bench/relayd is built with relaybench).
LINT_TAGS := relaybench
# staticcheck, installed into bin/tools/VERSION when missing (a version supporting Go 1.26).
STATICCHECK_VERSION := v0.8.2
STATICCHECK         := $(BIN)/tools/$(STATICCHECK_VERSION)/staticcheck
# Every shell script of the repository (shellcheck); run from the repo root.
SHELL_SCRIPTS := $(wildcard scripts/*.sh bench/*.sh bench/peers/*.sh bench/peers/*/*.sh) .ci/run \
                 images/initrd/init $(wildcard buildroot/board/outpost/*.sh) \
                 buildroot/board/outpost/rootfs-overlay/sbin/init \
                 buildroot/board/outpost/rootfs-overlay/etc/outpost/udhcpc.script

.PHONY: all build cross run test test-deps check lint vet fmt-check staticcheck shellcheck vendor \
        bench fuzz clean image bundle image-test test-images

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

# Installs SIPp (Debian: sip-tester) and iproute2 when missing and root can, runs make check
# (a unit test failure shows in minutes), then every test with -race, then, last, the firmware
# images and their qemu boot tests (test-images; as root).
test: test-deps check
	$(GO) test $(TESTFLAGS) ./...
	@$(MAKE) --no-print-directory test-images

test-deps:
	@./scripts/test-deps.sh

bench: build test-deps
	$(GO) test -run '^$$' -bench . -benchmem $(BENCHFLAGS) ./...
	@echo "load benchmark against Kamailio: bench/reg_bench.sh (see bench/RESULTS.md)"

# Quick checks, under 3 minutes on two cores with a warm build cache: gofmt, go vet,
# staticcheck, shellcheck, then every test that needs neither root nor SIPp (go test -short).
check: lint
	$(GO) test $(CHECK_TESTFLAGS) ./...

# The static part of check.
lint: fmt-check vet staticcheck shellcheck

fmt-check:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet -tags $(LINT_TAGS) ./...

staticcheck: $(STATICCHECK)
	$(STATICCHECK) -tags $(LINT_TAGS) ./...

$(STATICCHECK):
	GOBIN=$(CURDIR)/$(dir $@) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# Installs shellcheck (Debian package) when missing and root can.
shellcheck:
	./scripts/shellcheck.sh $(SHELL_SCRIPTS)

# Fills buildroot/_vendor with every module the build needs (go mod vendor -o; needs the
# module proxy once); the Buildroot package copies it to its build's vendor/ and builds
# offline (buildroot/README.md). Not in git, and not ./vendor: host builds keep using the
# module cache (a stale vendor/ would break them after every go.mod change).
VENDOR_DIR := buildroot/_vendor
vendor:
	$(GO) mod vendor -o $(VENDOR_DIR)

# Short fuzz runs of every fuzz target (seed corpora live in testdata/fuzz).
fuzz:
	./scripts/fuzz.sh 20s

# Keeps bin/tools (staticcheck): reinstalling it needs the module proxy.
clean:
	rm -rf $(DATA) $(addprefix $(BIN)/,$(CMDS)) $(BIN)/linux-*

# Firmware images: image, bundle, image-test, test-images (run by test, last).
include images/image.mk
