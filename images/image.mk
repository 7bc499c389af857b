# Firmware images (issue 8): included by the Makefile. See images/README.md.
#
#   make image      ARCH=amd64|arm64 [HQ_CA=hq-ca.pem] [BOX_CERT=f BOX_KEY=f]
#                   → images/out/outpost-ARCH.img (raw GPT disk, flash with dd)
#   make bundle     ARCH=…  → images/out/outpost-VERSION-ARCH.bundle (signed A/B update)
#   make image-test ARCH=…  → boots the image in qemu and walks it through
#                   first boot, config push, power cut, refused/good/bad updates
#   make test-images        → what `make test` runs last: both architectures, the
#                   boot tests as a Go test, arm64 unit tests under qemu-user
ARCH              ?= amd64
# Every timestamp in images and bundles: SOURCE_DATE_EPOCH if given, else the
# last commit's time; outside a git checkout it must be given. Checked (whole
# seconds) when an image target runs (image-epoch), never silently defaulted.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
HQ_CA             ?=
BOX_CERT          ?=
BOX_KEY           ?=
IMAGE_OUT         := images/out
IMAGE_TOOL        := $(IMAGE_OUT)/outpost-image
IMAGE_FLAGS        = -arch $(ARCH) -version '$(VERSION)' -epoch $(SOURCE_DATE_EPOCH) \
                     -hq-ca '$(HQ_CA)' -box-cert '$(BOX_CERT)' -box-key '$(BOX_KEY)'
# Pure packages whose unit tests also run as arm64 binaries under qemu-user.
ARM64_UNIT_PKGS   := ./images/layout ./appliance/config ./gateway/digest ./gateway/dialplan

.PHONY: image bundle image-test image-tool image-deps image-epoch test-images

image-deps:
	@./scripts/image-deps.sh

# The build epoch, and the box certificate as a pair (or neither: the lab CA's,
# which outpost-image logs).
image-epoch:
	@case '$(SOURCE_DATE_EPOCH)' in \
	  '') echo "image: no SOURCE_DATE_EPOCH: not a git checkout (no last commit time); pass SOURCE_DATE_EPOCH=SECONDS" >&2; exit 2;; \
	  *[!0-9]*) echo "image: SOURCE_DATE_EPOCH='$(SOURCE_DATE_EPOCH)' is not a number of seconds" >&2; exit 2;; \
	esac
	@if [ -n '$(BOX_CERT)$(BOX_KEY)' ]; then \
	  [ -n '$(BOX_CERT)' ] && [ -n '$(BOX_KEY)' ] || { echo "image: BOX_CERT and BOX_KEY go together (got BOX_CERT='$(BOX_CERT)' BOX_KEY='$(BOX_KEY)')" >&2; exit 2; }; \
	  for f in '$(BOX_CERT)' '$(BOX_KEY)'; do [ -r "$$f" ] || { echo "image: cannot read $$f" >&2; exit 2; }; done; \
	fi
	@if [ -n '$(HQ_CA)' ] && [ ! -r '$(HQ_CA)' ]; then echo "image: cannot read HQ_CA $(HQ_CA)" >&2; exit 2; fi

image-tool:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(IMAGE_TOOL) ./images/cmd/outpost-image

image: image-epoch image-deps image-tool
	$(IMAGE_TOOL) image $(IMAGE_FLAGS)

bundle: image
	$(IMAGE_TOOL) bundle $(IMAGE_FLAGS)

# qemu with user networking inside a private network namespace: the guest
# reaches nothing but a loopback of its own (scripts/image-netns.sh).
image-test: image
	timeout 1500 ./scripts/image-netns.sh $(IMAGE_TOOL) test $(IMAGE_FLAGS)

# `make test` runs this last, after check and the race-enabled test suite:
# images are built outside the namespace (apt-get download needs the
# archive), then the boot tests run as a Go test inside it, one architecture
# after the other, each scenario retried once on failure.
test-images: image-deps
	@if [ "$$(id -u)" != 0 ]; then echo "test-images: SKIP: needs root (qemu in a network namespace, apt-get)"; exit 0; fi; \
	set -e; \
	GOARCH=arm64 CGO_ENABLED=0 $(GO) test -count=1 -exec qemu-aarch64-static $(ARM64_UNIT_PKGS); \
	$(MAKE) --no-print-directory image ARCH=amd64; \
	$(MAKE) --no-print-directory image ARCH=arm64; \
	$(GO) test -c -o $(IMAGE_OUT)/images.test ./images; \
	OUTPOST_IMAGE_BOOT=1 timeout 2400 ./scripts/image-netns.sh $(IMAGE_OUT)/images.test -test.run '^TestImageBoot$$' -test.v -test.timeout 38m

