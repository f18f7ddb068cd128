// Package tlsreload serves a TLS certificate from files that are replaced
// while the server runs (renewed by cert-manager, certbot, ...).
package tlsreload

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// DefaultInterval is how often the files are looked at, at most.
const DefaultInterval = 5 * time.Second

// Certificate is a certificate and key pair loaded from two PEM files,
// loaded again on a handshake when a file's modification time or size
// has changed since the last look. A new pair that does not load (a half
// written renewal, a key that does not match) is logged and the old one
// kept; it is tried again when the files change again.
type Certificate struct {
	certFile, keyFile string
	// Interval is how often the files are looked at, at most, and Log
	// where a pair that does not load is told; set them before the first
	// handshake.
	Interval time.Duration
	Log      *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   stamp     // of the files when cert, or the last failed pair, was read
	checked time.Time // the last look
}

// stamp tells a file's versions apart.
type stamp struct {
	certMod, keyMod   time.Time
	certSize, keySize int64
}

// New loads the pair, or returns why it cannot.
func New(certFile, keyFile string) (*Certificate, error) {
	c := &Certificate{certFile: certFile, keyFile: keyFile, Interval: DefaultInterval}
	st, err := c.stat()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	c.cert, c.stamp, c.checked = &cert, st, time.Now()
	return c, nil
}

// Config is a server configuration with the certificate.
func (c *Certificate) Config() *tls.Config {
	return &tls.Config{GetCertificate: c.GetCertificate, MinVersion: tls.VersionTLS12}
}

// GetCertificate is for tls.Config.GetCertificate.
func (c *Certificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); now.Sub(c.checked) >= c.Interval {
		c.checked = now
		c.reload()
	}
	return c.cert, nil
}

// reload loads the pair if the files changed; c.mu is held.
func (c *Certificate) reload() {
	st, err := c.stat()
	if err != nil {
		c.warn(err)
		return
	}
	if st == c.stamp {
		return
	}
	// Remembered also when the pair fails: it is logged once, not on
	// every look, and tried again once a file changes.
	c.stamp = st
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		c.warn(err)
		return
	}
	c.cert = &cert
	if c.Log != nil {
		c.Log.Info("TLS certificate reloaded", slog.String("cert", c.certFile), slog.String("key", c.keyFile))
	}
}

func (c *Certificate) warn(err error) {
	if c.Log != nil {
		c.Log.Warn("cannot reload the TLS certificate; the one loaded before is still served", slog.String("cert", c.certFile),
			slog.String("key", c.keyFile), slog.String("error", err.Error()))
	}
}

func (c *Certificate) stat() (stamp, error) {
	ci, err := os.Stat(c.certFile)
	if err != nil {
		return stamp{}, fmt.Errorf("certificate: %w", err)
	}
	ki, err := os.Stat(c.keyFile)
	if err != nil {
		return stamp{}, fmt.Errorf("key: %w", err)
	}
	return stamp{certMod: ci.ModTime(), keyMod: ki.ModTime(), certSize: ci.Size(), keySize: ki.Size()}, nil
}
