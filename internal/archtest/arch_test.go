// Package archtest holds the import boundaries of docs/ARCHITECTURE.md:
// which of the module's packages each layer may use. A change that needs
// to cross one changes the document and this table together.
package archtest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/shredduck/shredduck"

// allowed lists, for each package (directory under the module), the
// module packages its non-test files may import; a prefix ending in "/"
// allows what is under it. Packages not listed (bench/..., tools/...)
// are not held.
var allowed = map[string][]string{
	"shred":                        {},
	"transforms/internal/jsonscan": {},
	"transforms/jsonsplit":         {"transforms/internal/jsonscan"},
	"transforms":                   {"shred", "transforms/internal/jsonscan"},
	"ingestlog":                    {},
	"source":                       {"shred", "transforms", "transforms/jsonsplit"},
	"source/kafka":                 {"ingest", "shred", "source", "transforms"},
	"source/logload":               {"ingest", "ingestlog", "shred", "source", "transforms"},
	"retention":                    {"ingest", "shred", "source", "transforms"},
	"ingest":                       {"shred", "transforms", "transforms/jsonsplit"},
	"internal/keyview":             {"ingest", "shred"},
	"serve/sqlpolicy":              {"ingest", "internal/keyview", "shred"},
	"serve/pgwire":                 {"serve/sqlpolicy", "shred"},
	"serve/jaegerapi":              {"serve/sqlpolicy", "shred"},
	"serve/queryhttp":              {"ingest", "serve/sqlpolicy"},
	"serve/internal/httpbody":      {},
	"serve":                        {"ingest", "ingestlog", "retention", "serve/internal/httpbody", "serve/queryhttp", "serve/sqlpolicy", "shred", "source", "source/kafka", "source/logload", "transforms", "transforms/jsonsplit"},
	"cmd/shredduck":                {"ingest", "internal/tlsreload", "serve", "serve/jaegerapi", "serve/pgwire", "serve/queryhttp", "serve/sqlpolicy", "shred"},
	"internal/tlsreload":           {},
	"internal/testcert":            {},
	"internal/duckdb15test":        {"internal/toolbin"},
	"internal/toolbin":             {},
	"internal/parquettest":         {"shred"},
	"internal/jaegertest":          {"internal/toolbin"},
	"internal/kafkatest":           {},
}

func TestImportBoundaries(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string]map[string]bool{} // package dir -> module imports
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		rel = filepath.ToSlash(rel)
		for _, is := range f.Imports {
			path, _ := strconv.Unquote(is.Path.Value)
			if own, ok := strings.CutPrefix(path, module+"/"); ok {
				if imports[rel] == nil {
					imports[rel] = map[string]bool{}
				}
				imports[rel][own] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for pkg, imps := range imports {
		rules, held := allowed[pkg]
		if !held {
			if !strings.HasPrefix(pkg, "bench") && !strings.HasPrefix(pkg, "tools") {
				t.Errorf("package %s is not in docs/ARCHITECTURE.md's boundaries (archtest.allowed)", pkg)
			}
			continue
		}
		var bad []string
		for imp := range imps {
			if !permitted(rules, imp) {
				bad = append(bad, imp)
			}
		}
		sort.Strings(bad)
		for _, imp := range bad {
			t.Errorf("%s imports %s, which its layer may not (docs/ARCHITECTURE.md)", pkg, imp)
		}
	}
	for pkg := range imports {
		if strings.HasPrefix(pkg, "bench") {
			continue
		}
		for imp := range imports[pkg] {
			if strings.HasPrefix(imp, "bench") || strings.HasPrefix(imp, "cmd") {
				t.Errorf("%s imports %s: nothing but the benchmarks uses bench/ or cmd/", pkg, imp)
			}
		}
	}
}

func permitted(rules []string, imp string) bool {
	for _, r := range rules {
		if imp == r || strings.HasSuffix(r, "/") && strings.HasPrefix(imp, r) {
			return true
		}
	}
	return false
}
