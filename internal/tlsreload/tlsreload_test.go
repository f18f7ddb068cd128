package tlsreload

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shredduck/shredduck/internal/testcert"
)

// serial is the serial number of the certificate a new connection to
// addr gets.
func serial(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func leafSerial(t *testing.T, c *testcert.Cert) string {
	t.Helper()
	cert, err := x509.ParseCertificate(c.TLS.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return cert.SerialNumber.String()
}

// install writes a pair to the files, modified at at.
func install(t *testing.T, certFile, keyFile string, certPEM, keyPEM []byte, at time.Time) {
	t.Helper()
	for _, f := range []struct {
		name string
		data []byte
	}{{certFile, certPEM}, {keyFile, keyPEM}} {
		if err := os.WriteFile(f.name, f.data, 0o600); err != nil {
			t.Fatal(err)
		}
		// A renewal within the file system's time granularity looks the
		// same otherwise.
		if err := os.Chtimes(f.name, at, at); err != nil {
			t.Fatal(err)
		}
	}
}

func read(t *testing.T, c *testcert.Cert) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, err := os.ReadFile(c.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err = os.ReadFile(c.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A renewed pair is served to the next connection; a pair that does not
// load is logged and the one before kept, until the files change again.
func TestReload(t *testing.T) {
	a, b, c := testcert.New(t), testcert.New(t), testcert.New(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	aCert, aKey := read(t, a)
	bCert, bKey := read(t, b)
	cCert, cKey := read(t, c)
	at := time.Now().Add(-time.Hour)
	install(t, certFile, keyFile, aCert, aKey, at)

	cert, err := New(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	cert.Log = slog.New(slog.NewTextHandler(&logs, nil))
	cert.Interval = 10 * time.Millisecond
	l, err := tls.Listen("tcp", "127.0.0.1:0", cert.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				conn.(*tls.Conn).Handshake()
				conn.Close()
			}()
		}
	}()
	addr := l.Addr().String()
	// want waits for the interval to pass, then expects a new
	// connection to get the certificate of tc.
	want := func(what string, tc *testcert.Cert) {
		t.Helper()
		time.Sleep(2 * cert.Interval)
		if got := serial(t, addr); got != leafSerial(t, tc) {
			t.Errorf("%s: got the certificate %s, want %s", what, got, leafSerial(t, tc))
		}
	}
	want("at start", a)

	install(t, certFile, keyFile, bCert, bKey, at.Add(time.Minute))
	want("renewed", b)

	// C's certificate with A's key: the pair does not match.
	install(t, certFile, keyFile, cCert, aKey, at.Add(2*time.Minute))
	want("a mismatched pair", b)
	want("a mismatched pair, looked at again", b)
	if n := strings.Count(logs.String(), "cannot reload the TLS certificate"); n != 1 {
		t.Errorf("%d warnings of the mismatched pair:\n%s", n, logs.String())
	}
	install(t, certFile, keyFile, []byte("not PEM"), aKey, at.Add(3*time.Minute))
	want("a broken file", b)

	// The key follows: the pair loads.
	install(t, certFile, keyFile, cCert, cKey, at.Add(4*time.Minute))
	want("renewed again", c)

	// Gone for a moment (a rename in progress): the pair before stays.
	os.Remove(keyFile)
	want("a file removed", c)

	if _, err := New(certFile, keyFile); err == nil {
		t.Error("New loaded a pair without a key")
	}
}
