package layout

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"io"
)

// A bundle is, in this order:
//
//	"outpost-bundle 1\n"           magic and format version
//	uint32 big-endian              length of the manifest (at most MaxManifest)
//	manifest                       JSON (Manifest)
//	64 bytes                       ed25519 signature over magic + manifest
//	payload                        the slot image, Manifest.Payload.Size bytes
//
// The signature covers the manifest and the manifest covers the payload
// (size and SHA-256), so the box refuses a forged bundle before it reads a
// byte of the payload, and a truncated or altered payload when the stream
// ends. The payload is the slot's squashfs as it is, already compressed.
const (
	bundleMagic = "outpost-bundle 1\n"
	// MaxManifest bounds the manifest a box reads before the signature check.
	MaxManifest = 64 << 10
	// BundleFormat is the manifest format this package writes and reads.
	BundleFormat = 1
	// PayloadRootfs names the one payload kind there is: a slot image.
	PayloadRootfs = "rootfs.squashfs"
)

// Manifest describes a bundle's payload.
type Manifest struct {
	Format  int     `json:"format"`
	Arch    string  `json:"arch"` // GOARCH of the box: amd64, arm64
	Version string  `json:"version"`
	Created int64   `json:"created"` // Unix seconds (SOURCE_DATE_EPOCH of the build)
	Layout  string  `json:"layout"`  // DiskUUID of the layout the slot image fits
	Payload Payload `json:"payload"`
}

// Payload is the slot image in a bundle.
type Payload struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ErrBundle is matched (errors.Is) by every reason to refuse a bundle;
// anything else a reader returns is an I/O error.
var ErrBundle = errors.New("bundle refused")

type refusal struct{ msg string }

func (r *refusal) Error() string        { return r.msg }
func (r *refusal) Is(target error) bool { return target == ErrBundle }

// Reasons to refuse a bundle. Each matches ErrBundle.
var (
	ErrFormat    = &refusal{"not an Outpost bundle (or an unknown format)"}
	ErrSignature = &refusal{"signature does not verify with this box's bundle key"}
	ErrTruncated = &refusal{"truncated: the payload ends before the size its manifest states"}
	ErrDigest    = &refusal{"payload SHA-256 does not match its manifest"}
	ErrTrailing  = &refusal{"unexpected data after the payload"}
	ErrArch      = &refusal{"built for another architecture"}
	ErrTooLarge  = &refusal{"payload larger than a slot"}
	ErrLayout    = &refusal{"built for another disk layout"}
)

// HashPayload returns the size and SHA-256 (hex) of r's content.
func HashPayload(r io.Reader) (int64, string, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// WriteBundle writes m (whose Payload must describe payload) signed with
// key, then payload.
func WriteBundle(w io.Writer, m Manifest, payload io.Reader, key ed25519.PrivateKey) error {
	if m.Format == 0 {
		m.Format = BundleFormat
	}
	if m.Layout == "" {
		m.Layout = DiskUUID
	}
	if m.Payload.Name == "" {
		m.Payload.Name = PayloadRootfs
	}
	js, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("layout: manifest: %w", err)
	}
	if len(js) > MaxManifest {
		return fmt.Errorf("layout: manifest of %d bytes exceeds %d", len(js), MaxManifest)
	}
	var hdr bytes.Buffer
	hdr.WriteString(bundleMagic)
	binary.Write(&hdr, binary.BigEndian, uint32(len(js)))
	hdr.Write(js)
	hdr.Write(ed25519.Sign(key, append([]byte(bundleMagic), js...)))
	if _, err := w.Write(hdr.Bytes()); err != nil {
		return err
	}
	n, err := io.Copy(w, payload)
	if err != nil {
		return err
	}
	if n != m.Payload.Size {
		return fmt.Errorf("layout: payload has %d bytes, manifest says %d", n, m.Payload.Size)
	}
	return nil
}

// ReadManifest reads a bundle's header from r and returns its manifest,
// checking the signature with pub (nil: not checked, for tools that only
// show a bundle). On success r is positioned at the payload.
func ReadManifest(r io.Reader, pub ed25519.PublicKey) (*Manifest, error) {
	magic := make([]byte, len(bundleMagic))
	if _, err := io.ReadFull(r, magic); err != nil {
		return nil, headerErr(err)
	}
	if string(magic) != bundleMagic {
		return nil, ErrFormat
	}
	var n uint32
	if err := binary.Read(r, binary.BigEndian, &n); err != nil {
		return nil, headerErr(err)
	}
	if n == 0 || n > MaxManifest {
		return nil, ErrFormat
	}
	js := make([]byte, int(n)+ed25519.SignatureSize)
	if _, err := io.ReadFull(r, js); err != nil {
		return nil, headerErr(err)
	}
	js, sig := js[:n], js[n:]
	if pub != nil && !ed25519.Verify(pub, append([]byte(bundleMagic), js...), sig) {
		return nil, ErrSignature
	}
	var m Manifest
	if err := json.Unmarshal(js, &m); err != nil || m.Format != BundleFormat || m.Payload.Size <= 0 ||
		len(m.Payload.SHA256) != 2*sha256.Size || m.Payload.Name != PayloadRootfs {
		return nil, ErrFormat
	}
	return &m, nil
}

func headerErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return ErrTruncated
	}
	return err
}

// Check refuses a manifest that does not fit a box of arch with this
// layout.
func (m *Manifest) Check(arch string) error {
	switch {
	case m.Arch != arch:
		return fmt.Errorf("%w: bundle is %s, this box is %s", ErrArch, m.Arch, arch)
	case m.Layout != DiskUUID:
		return fmt.Errorf("%w: bundle layout %s, this box %s", ErrLayout, m.Layout, DiskUUID)
	case m.Payload.Size > SlotSize():
		return fmt.Errorf("%w: %d bytes, a slot has %d", ErrTooLarge, m.Payload.Size, SlotSize())
	}
	return nil
}

// PayloadReader returns the payload of a bundle whose header was read
// from r: exactly m.Payload.Size bytes, then an error instead of io.EOF
// if the payload was short (ErrTruncated), did not match its hash
// (ErrDigest) or was followed by more data (ErrTrailing). A caller must
// therefore read it to io.EOF before trusting any of it.
func (m *Manifest) PayloadReader(r io.Reader) io.Reader {
	return &payloadReader{r: bufio.NewReader(r), left: m.Payload.Size, want: m.Payload.SHA256, h: sha256.New()}
}

type payloadReader struct {
	r    *bufio.Reader
	left int64
	want string
	h    hash.Hash
	err  error
}

func (p *payloadReader) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	if p.left == 0 {
		p.err = p.finish()
		return 0, p.err
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	n, err := p.r.Read(b)
	p.h.Write(b[:n])
	p.left -= int64(n)
	switch {
	case err == io.EOF && p.left > 0:
		p.err = ErrTruncated
		return n, p.err
	case err != nil && err != io.EOF:
		p.err = err
		return n, err
	}
	return n, nil
}

func (p *payloadReader) finish() error {
	if hex.EncodeToString(p.h.Sum(nil)) != p.want {
		return ErrDigest
	}
	if _, err := p.r.ReadByte(); err == nil {
		return ErrTrailing
	} else if err != io.EOF {
		return err
	}
	return io.EOF
}

// GenerateKey makes a bundle signing key pair as PEM: the private key in
// PKCS #8, the public key in PKIX form (what images bake in).
func GenerateKey() (privPEM, pubPEM []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	p8, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	px, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: px}), nil
}

// ParsePrivateKey reads an ed25519 private key in PKCS #8 PEM.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, errors.New("layout: bundle key: no PEM PRIVATE KEY block")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("layout: bundle key: %w", err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("layout: bundle key is %T, want ed25519", k)
	}
	return ek, nil
}

// ParsePublicKey reads an ed25519 public key in PKIX PEM.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PUBLIC KEY" {
		return nil, errors.New("layout: bundle public key: no PEM PUBLIC KEY block")
	}
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("layout: bundle public key: %w", err)
	}
	ek, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("layout: bundle public key is %T, want ed25519", k)
	}
	return ek, nil
}
