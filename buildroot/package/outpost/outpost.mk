################################################################################
#
# outpost
#
################################################################################

# Built from this repository (the BR2_EXTERNAL tree lives in its
# buildroot/ folder), offline: run `make vendor` in the repository first
# (fills buildroot/_vendor, see below). A release build can instead point
# OUTPOST_SITE at a tagged tarball; then Buildroot vendors the Go modules at
# download time.
OUTPOST_VERSION = $(call qstrip,$(BR2_PACKAGE_OUTPOST_VERSION_STRING))
OUTPOST_SITE = $(BR2_EXTERNAL_OUTPOST_PATH)/..
OUTPOST_SITE_METHOD = local
OUTPOST_LICENSE = Proprietary
OUTPOST_GOMOD = github.com/outpost/outpost
OUTPOST_BUILD_TARGETS = cmd/outpostd cmd/outpostctl
OUTPOST_LDFLAGS = -s -w -X main.version=$(OUTPOST_VERSION)
# Static binaries without cgo: SQLite is modernc.org/sqlite (pure Go).
OUTPOST_GO_ENV = CGO_ENABLED=0
OUTPOST_DEPENDENCIES = host-outpost

HOST_OUTPOST_BUILD_TARGETS = images/cmd/outpost-image
HOST_OUTPOST_GO_ENV = CGO_ENABLED=0

# A local site is rsynced, not downloaded, so Buildroot's download-time
# vendoring does not run, and its Go environment builds with -mod=vendor and
# GOPROXY=off. The modules come from the repository's buildroot/_vendor
# (`make vendor` there: go mod vendor -o buildroot/_vendor, the one step that
# needs the module proxy), copied to the build's vendor/ after the rsync. A
# vendor tree older than go.mod fails the build ("inconsistent vendoring"):
# run make vendor again.
define OUTPOST_GO_VENDOR
	$(Q)test -f $(@D)/buildroot/_vendor/modules.txt || { \
		echo "outpost: no Go modules in $(OUTPOST_SITE)/buildroot/_vendor: run 'make vendor' in the repository first"; \
		exit 1; }
	rm -rf $(@D)/vendor
	cp -a $(@D)/buildroot/_vendor $(@D)/vendor
endef
OUTPOST_POST_RSYNC_HOOKS += OUTPOST_GO_VENDOR
HOST_OUTPOST_POST_RSYNC_HOOKS += OUTPOST_GO_VENDOR

OUTPOST_HQ_CA = $(call qstrip,$(BR2_PACKAGE_OUTPOST_HQ_CA))
OUTPOST_BOX_CERT = $(call qstrip,$(BR2_PACKAGE_OUTPOST_BOX_CERT))
OUTPOST_BOX_KEY = $(call qstrip,$(BR2_PACKAGE_OUTPOST_BOX_KEY))
OUTPOST_BUNDLE_PUBKEY = $(call qstrip,$(BR2_PACKAGE_OUTPOST_BUNDLE_PUBKEY))

# The factory document (SIP on every interface, management over mutual TLS
# trusting the HQ CA) and the bundle key, made as the offline path makes
# them (images.MakeFactory).
define OUTPOST_INSTALL_FACTORY
	$(if $(OUTPOST_HQ_CA),,$(error BR2_PACKAGE_OUTPOST_HQ_CA is not set: a box must trust HQ's CA))
	$(if $(OUTPOST_BOX_CERT),,$(error BR2_PACKAGE_OUTPOST_BOX_CERT is not set))
	$(if $(OUTPOST_BOX_KEY),,$(error BR2_PACKAGE_OUTPOST_BOX_KEY is not set: the box certificate needs its key))
	$(if $(OUTPOST_BUNDLE_PUBKEY),,$(error BR2_PACKAGE_OUTPOST_BUNDLE_PUBKEY is not set))
	mkdir -p $(TARGET_DIR)/etc/outpost
	$(HOST_DIR)/bin/outpost-image factory -hq-ca $(OUTPOST_HQ_CA) \
		-box-cert $(OUTPOST_BOX_CERT) -box-key $(OUTPOST_BOX_KEY) \
		-out-file $(TARGET_DIR)/etc/outpost/factory.json
	$(INSTALL) -D -m 0644 $(OUTPOST_BUNDLE_PUBKEY) $(TARGET_DIR)/etc/outpost/bundle.pub
	printf 'VERSION=%s\nARCH=%s\n' '$(OUTPOST_VERSION)' '$(GO_GOARCH)' > $(TARGET_DIR)/etc/outpost/release
endef
OUTPOST_POST_INSTALL_TARGET_HOOKS += OUTPOST_INSTALL_FACTORY

$(eval $(golang-package))
$(eval $(host-golang-package))
