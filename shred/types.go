package shred

import "strings"

// Kind is the physical kind of a column or value.
type Kind uint8

// Kinds. Null..JSON, TimestampTZ and the List* kinds form the type lattice
// of dynamic (attribute and NDJSON) columns (Widen); Int32..Enum only
// appear in fixed core columns.
const (
	Null        Kind = iota // no value; never fixes a column's type
	Bool                    // BOOLEAN
	Int64                   // BIGINT
	Double                  // DOUBLE
	String                  // VARCHAR
	Blob                    // BLOB
	JSON                    // JSON (text)
	Int32                   // INTEGER
	Uint32                  // UINTEGER
	Uint64                  // UBIGINT
	TimestampNS             // TIMESTAMP_NS (nanoseconds since the Unix epoch)
	List                    // LIST(Elem)
	Struct                  // STRUCT(Fields...)
	Enum                    // ENUM(Values...), carried as text
	TimestampTZ             // TIMESTAMPTZ (microseconds since the Unix epoch, UTC)

	// Dynamic list kinds: a column of Type ListOf(elem) for a scalar elem.
	// ListNull holds lists whose elements are all NULL (or none): "NULL"[].
	ListNull
	ListBool
	ListInt64
	ListDouble
	ListString
	ListTimestampTZ
)

var kindSQL = [...]string{
	Null: "NULL", Bool: "BOOLEAN", Int64: "BIGINT", Double: "DOUBLE", String: "VARCHAR",
	Blob: "BLOB", JSON: "JSON", Int32: "INTEGER", Uint32: "UINTEGER", Uint64: "UBIGINT",
	TimestampNS: "TIMESTAMP_NS", TimestampTZ: "TIMESTAMPTZ",
	ListNull: `"NULL"[]`, ListBool: "BOOLEAN[]", ListInt64: "BIGINT[]", ListDouble: "DOUBLE[]",
	ListString: "VARCHAR[]", ListTimestampTZ: "TIMESTAMPTZ[]",
}

// dynamicKinds are the kinds of the dynamic lattice, Null excluded.
var dynamicKinds = [...]Kind{Bool, Int64, Double, String, Blob, JSON, TimestampTZ,
	ListNull, ListBool, ListInt64, ListDouble, ListString, ListTimestampTZ}

// IsList reports whether k is one of the dynamic list kinds.
func (k Kind) IsList() bool { return k >= ListNull && k <= ListTimestampTZ }

// listElem holds the element kind of each dynamic list kind, from ListNull.
var listElem = [...]Kind{Null, Bool, Int64, Double, String, TimestampTZ}

// Elem returns the element kind of a dynamic list kind (Null for
// ListNull), or Null for any other kind.
func (k Kind) Elem() Kind {
	if k.IsList() {
		return listElem[k-ListNull]
	}
	return Null
}

// ListKind returns the dynamic list kind whose elements are of kind elem,
// or Null if there is none.
func ListKind(elem Kind) Kind {
	for i, e := range listElem {
		if e == elem {
			return ListNull + Kind(i)
		}
	}
	return Null
}

// String returns the DuckDB name of a scalar kind.
func (k Kind) String() string {
	if int(k) < len(kindSQL) && kindSQL[k] != "" {
		return kindSQL[k]
	}
	switch k {
	case List:
		return "LIST"
	case Struct:
		return "STRUCT"
	case Enum:
		return "ENUM"
	}
	return "UNKNOWN"
}

// KindFromSQL parses the DuckDB type name of a dynamic column kind, as
// Kind.String writes it (the catalog's type column). It returns Null when
// the name is not one of the dynamic kinds.
func KindFromSQL(s string) Kind {
	for _, k := range dynamicKinds {
		if strings.EqualFold(kindSQL[k], s) {
			return k
		}
	}
	return Null
}

// Type is a column type: a scalar kind, a list of Elem, or a struct of Fields.
type Type struct {
	Kind   Kind
	Elem   *Type    // for List
	Fields []Field  // for Struct
	Values []string // for Enum
	// Map: a List of STRUCT(key, value) that DuckDB stores as
	// MAP(key type, value type); built and laid out as that list.
	Map bool
}

// Field is one member of a struct type.
type Field struct {
	Name string
	Type *Type
}

// Scalar types, shared.
var (
	TBool        = &Type{Kind: Bool}
	TInt64       = &Type{Kind: Int64}
	TDouble      = &Type{Kind: Double}
	TString      = &Type{Kind: String}
	TBlob        = &Type{Kind: Blob}
	TJSON        = &Type{Kind: JSON}
	TInt32       = &Type{Kind: Int32}
	TUint32      = &Type{Kind: Uint32}
	TUint64      = &Type{Kind: Uint64}
	TTimestampNS = &Type{Kind: TimestampNS}
	TTimestampTZ = &Type{Kind: TimestampTZ}
	tNull        = &Type{Kind: Null}
)

// listTypes are the shared Types of the dynamic list kinds.
var listTypes [len(listElem)]*Type

func init() {
	for i, e := range listElem {
		listTypes[i] = ListOf(ScalarType(e))
	}
}

// ScalarType returns the shared Type of a scalar kind or of a dynamic list
// kind (LIST of its element kind).
func ScalarType(k Kind) *Type {
	if k.IsList() {
		return listTypes[k-ListNull]
	}
	switch k {
	case Bool:
		return TBool
	case Int64:
		return TInt64
	case Double:
		return TDouble
	case String:
		return TString
	case Blob:
		return TBlob
	case JSON:
		return TJSON
	case Int32:
		return TInt32
	case Uint32:
		return TUint32
	case Uint64:
		return TUint64
	case TimestampNS:
		return TTimestampNS
	case TimestampTZ:
		return TTimestampTZ
	case Null:
		return tNull
	}
	return &Type{Kind: k}
}

// DynKind returns the dynamic kind of a column of type t: the dynamic list
// kind for a LIST of a scalar dynamic kind, otherwise t.Kind.
func (t *Type) DynKind() Kind {
	if t.Kind == List {
		if k := ListKind(t.Elem.Kind); k != Null {
			return k
		}
	}
	return t.Kind
}

// ListOf returns LIST(elem).
func ListOf(elem *Type) *Type { return &Type{Kind: List, Elem: elem} }

// MapOf returns MAP(key, value): a list of STRUCT(key, value) entries.
func MapOf(key, value *Type) *Type {
	return &Type{Kind: List, Map: true, Elem: StructOf(Field{Name: "key", Type: key}, Field{Name: "value", Type: value})}
}

// StructOf returns STRUCT(fields...).
func StructOf(fields ...Field) *Type { return &Type{Kind: Struct, Fields: fields} }

// EnumOf returns ENUM(values...): a fixed set of names stored as small
// integers, compared and printed as text.
func EnumOf(values ...string) *Type { return &Type{Kind: Enum, Values: values} }

// SQL renders the DuckDB type.
func (t *Type) SQL() string {
	switch t.Kind {
	case Enum:
		q := make([]string, len(t.Values))
		for i, v := range t.Values {
			q[i] = QuoteString(v)
		}
		return "ENUM(" + strings.Join(q, ", ") + ")"
	case List:
		if t.Map {
			return "MAP(" + t.Elem.Fields[0].Type.SQL() + ", " + t.Elem.Fields[1].Type.SQL() + ")"
		}
		return t.Elem.SQL() + "[]"
	case Null:
		return `"NULL"`
	case Struct:
		var sb strings.Builder
		sb.WriteString("STRUCT(")
		for i, f := range t.Fields {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(QuoteIdent(f.Name))
			sb.WriteByte(' ')
			sb.WriteString(f.Type.SQL())
		}
		sb.WriteByte(')')
		return sb.String()
	}
	return t.Kind.String()
}

// Widen returns the narrowest dynamic kind that holds values of both a and
// b. The kinds form a lattice (docs/SCHEMA.md, section 5.4):
//
//   - Null never fixes a type: Null with k is k;
//   - BIGINT and DOUBLE widen to DOUBLE (callers turn that into VARCHAR
//     when an integer beyond 2^53 is involved: WidenValues);
//   - a list of NULLs ("NULL"[]) with a list of T is a list of T; two lists
//     of different element kinds, and a list with JSON, widen to JSON;
//   - every other conflict widens to VARCHAR.
func Widen(a, b Kind) Kind {
	switch {
	case a == b:
		return a
	case a == Null:
		return b
	case b == Null:
		return a
	case (a == Int64 && b == Double) || (a == Double && b == Int64):
		return Double
	case a == ListNull && b.IsList():
		return b
	case b == ListNull && a.IsList():
		return a
	case (a.IsList() || a == JSON) && (b.IsList() || b == JSON):
		return JSON
	}
	return String
}

// MaxExactInt is the largest magnitude up to which every integer is a
// double: BIGINT widens to DOUBLE only when no value exceeds it.
const MaxExactInt = 1 << 53

// exactInt reports whether v converts to a double and back unchanged.
func exactInt(v int64) bool { return v >= -MaxExactInt && v <= MaxExactInt }

// QuoteIdent quotes s as a DuckDB identifier. Every identifier that comes
// from input goes through it: the result is always one identifier.
func QuoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// QuoteString quotes s as a SQL string literal.
func QuoteString(s string) string {
	return `'` + strings.ReplaceAll(s, `'`, `''`) + `'`
}
