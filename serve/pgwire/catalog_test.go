package pgwire

import "testing"

// Every type a column can be sent as has its name in the catalog, and
// every DuckDB type that has one its name in duckdb_columns().
func TestCatalogTypeNames(t *testing.T) {
	for dt, p := range scalarTypes {
		if duckdbTypeNames[dt] == "" {
			t.Errorf("DuckDB type %d has no duckdbTypeNames entry", dt)
		}
		if pgTypeNames[p.oid] == "" {
			t.Errorf("OID %d has no pgTypeNames entry", p.oid)
		}
	}
	for _, e := range listElements {
		if _, ok := arrayOIDs[scalarTypes[e].oid]; !ok {
			t.Errorf("list element %d is not sent as an array", e)
		}
	}
}
