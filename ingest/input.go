package ingest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"
)

// Input is one thing to load: a file, or "-" for stdin.
type Input struct {
	Name string // as given; "-" is stdin
	Size int64  // on-disk size, 0 when unknown
}

// countingReader counts the bytes read through it into an atomic counter,
// for progress reporting.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// StatInputs resolves paths into inputs with their sizes. A directory
// stands for the regular files under it, in lexical order; files whose
// names start with "." are skipped there.
func StatInputs(paths []string) ([]Input, error) {
	in := make([]Input, 0, len(paths))
	for _, p := range paths {
		if p == "-" {
			in = append(in, Input{Name: p})
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			in = append(in, Input{Name: p, Size: fi.Size()})
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if strings.HasPrefix(d.Name(), ".") && path != p {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			in = append(in, Input{Name: path, Size: info.Size()})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return in, nil
}

// openInput opens an input and undoes gzip or zstd compression, detected
// from the magic bytes. read counts compressed bytes.
func openInput(in Input, read *atomic.Int64) (io.Reader, func() error, error) {
	var f io.ReadCloser = os.Stdin
	if in.Name != "-" {
		var err error
		if f, err = os.Open(in.Name); err != nil {
			return nil, nil, err
		}
	}
	br := bufio.NewReaderSize(countingReader{f, read}, 1<<20)
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("%s: bad gzip header: %w", in.Name, err)
		}
		return bufio.NewReaderSize(zr, 1<<20), f.Close, nil
	case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("%s: bad zstd header: %w", in.Name, err)
		}
		return bufio.NewReaderSize(zr, 1<<20), func() error { zr.Close(); return f.Close() }, nil
	}
	return br, f.Close, nil
}

// isProtoName reports whether a file name says binary protobuf.
func isProtoName(name string) bool {
	base := strings.ToLower(filepath.Base(name))
	for _, suf := range []string{".gz", ".zst", ".zstd"} {
		base = strings.TrimSuffix(base, suf)
	}
	return strings.HasSuffix(base, ".pb") || strings.HasSuffix(base, ".binpb") || strings.HasSuffix(base, ".proto")
}
