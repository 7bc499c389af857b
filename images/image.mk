# Firmware images (issue 8): included by the Makefile. See images/README.md.
#
#   make image      ARCH=amd64|arm64 [HQ_CA=hq-ca.pem] [BOX_CERT=f BOX_KEY=f]
#                   → images/out/outpost-ARCH.img (raw GPT disk, flash with dd)
#   make bundle     ARCH=…  → images/out/outpost-VERSION-ARCH.bundle (signed A/B update)
#   make image-test ARCH=…  → boots the image in qemu and walks it through
#                   first boot, config push, power cut, refused/good/bad updates
#   make test-images        → what `make test` runs: both architectures, the
#                   boot tests as a Go test, arm64 unit tests under qemu-user
ARCH              ?= amd64
# Every timestamp in images and bundles; the last commit's time by default.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 1767225600)
HQ_CA             ?=
BOX_CERT          ?=
BOX_KEY           ?=
IMAGE_OUT         := images/out
IMAGE_TOOL        := $(IMAGE_OUT)/outpost-image
IMAGE_FLAGS        = -arch $(ARCH) -version '$(VERSION)' -epoch $(SOURCE_DATE_EPOCH) \
                     -hq-ca '$(HQ_CA)' -box-cert '$(BOX_CERT)' -box-key '$(BOX_KEY)'
# Pure packages whose unit tests also run as arm64 binaries under qemu-user.
ARM64_UNIT_PKGS   := ./images/layout ./appliance/config ./gateway/digest ./gateway/dialplan

.PHONY: image bundle image-test image-tool image-deps test-images

image-deps:
	@./scripts/image-deps.sh

image-tool:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(IMAGE_TOOL) ./images/cmd/outpost-image

image: image-deps image-tool
	$(IMAGE_TOOL) image $(IMAGE_FLAGS)

bundle: image
	$(IMAGE_TOOL) bundle $(IMAGE_FLAGS)

# qemu with user networking inside a private network namespace: the guest
# reaches nothing but a loopback of its own (scripts/image-netns.sh).
image-test: image
	timeout 1500 ./scripts/image-netns.sh $(IMAGE_TOOL) test $(IMAGE_FLAGS)

# `make test` runs this first (the line below adds it to test's
# prerequisites): images are built outside the namespace (apt-get download
# needs the archive), then the boot tests run as a Go test inside it, one
# architecture after the other, each scenario retried once on failure.
test-images: image-deps
	@if [ "$$(id -u)" != 0 ]; then echo "test-images: SKIP: needs root (qemu in a network namespace, apt-get)"; exit 0; fi; \
	set -e; \
	GOARCH=arm64 CGO_ENABLED=0 $(GO) test -count=1 -exec qemu-aarch64-static $(ARM64_UNIT_PKGS); \
	$(MAKE) --no-print-directory image ARCH=amd64; \
	$(MAKE) --no-print-directory image ARCH=arm64; \
	$(GO) test -c -o $(IMAGE_OUT)/images.test ./images; \
	OUTPOST_IMAGE_BOOT=1 timeout 2400 ./scripts/image-netns.sh $(IMAGE_OUT)/images.test -test.run '^TestImageBoot$$' -test.v -test.timeout 38m

test: test-images
