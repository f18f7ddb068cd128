package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shredduck/shredduck/internal/testcert"
)

// peerSerial is the serial number of the certificate a new TLS
// connection to addr gets; pg: after PostgreSQL's SSLRequest.
func peerSerial(t *testing.T, addr string, pg bool) string {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if pg {
		req := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 8), 80877103)
		if _, err := nc.Write(req); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		if _, err := io.ReadFull(nc, b); err != nil || b[0] != 'S' {
			t.Fatalf("SSLRequest: %q %v", b, err)
		}
	}
	tc := tls.Client(nc, &tls.Config{InsecureSkipVerify: true})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	return tc.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func certSerial(t *testing.T, c *testcert.Cert) string {
	t.Helper()
	x, err := x509.ParseCertificate(c.TLS.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return x.SerialNumber.String()
}

// copyPair writes from's certificate and key to the files, modified at
// at (a renewal within the file system's time granularity looks the same
// otherwise).
func copyPair(t *testing.T, certFile, keyFile, fromCert, fromKey string, at time.Time) {
	t.Helper()
	for _, f := range [][2]string{{fromCert, certFile}, {fromKey, keyFile}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f[1], at, at); err != nil {
			t.Fatal(err)
		}
	}
}

// A renewed --tls-cert/--tls-key pair is served by OTLP/HTTP, OTLP/gRPC
// and --pg to new connections without a restart; a pair that does not
// load is logged and the one before kept.
func TestServeTLSReload(t *testing.T) {
	a, b, c := testcert.New(t), testcert.New(t), testcert.New(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	at := time.Now().Add(-time.Hour)
	copyPair(t, certFile, keyFile, a.CertFile, a.KeyFile, at)
	addrs, logs := startServe(t, map[string]string{"SHREDDUCK_TOKEN": "tok"}, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
		"--pg", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile)
	ports := []string{"http", "grpc", "pg"}
	// serving waits until every port serves tc's certificate.
	serving := func(what string, tc *testcert.Cert) {
		t.Helper()
		want := certSerial(t, tc)
		deadline := time.Now().Add(30 * time.Second)
		for _, port := range ports {
			for got := ""; got != want; time.Sleep(100 * time.Millisecond) {
				if got = peerSerial(t, addrs[port], port == "pg"); got != want && time.Now().After(deadline) {
					t.Fatalf("%s: --%s serves the certificate %s, want %s", what, port, got, want)
				}
			}
		}
	}
	serving("at start", a)
	copyPair(t, certFile, keyFile, b.CertFile, b.KeyFile, at.Add(time.Minute))
	serving("renewed", b)

	// C's certificate with B's key: logged (the files are looked at on a
	// handshake), and B stays.
	copyPair(t, certFile, keyFile, c.CertFile, b.KeyFile, at.Add(2*time.Minute))
	want := certSerial(t, b)
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(logs.String(), "cannot reload the TLS certificate"); time.Sleep(100 * time.Millisecond) {
		if got := peerSerial(t, addrs["pg"], true); got != want {
			t.Fatalf("a mismatched pair: --pg serves the certificate %s, want %s", got, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no warning of the mismatched pair:\n%s", logs.String())
		}
	}
	for _, port := range ports {
		if got := peerSerial(t, addrs[port], port == "pg"); got != want {
			t.Errorf("a mismatched pair: --%s serves the certificate %s, want %s", port, got, want)
		}
	}
}
