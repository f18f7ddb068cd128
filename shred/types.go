package shred

import "strings"

// Kind is the physical kind of a column or value.
type Kind uint8

// Kinds. The first group (Null..JSON) is the type lattice of dynamic
// (attribute) columns; the rest only appear in fixed core columns.
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
)

var kindSQL = [...]string{
	Null: "NULL", Bool: "BOOLEAN", Int64: "BIGINT", Double: "DOUBLE", String: "VARCHAR",
	Blob: "BLOB", JSON: "JSON", Int32: "INTEGER", Uint32: "UINTEGER", Uint64: "UBIGINT",
	TimestampNS: "TIMESTAMP_NS",
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

// KindFromSQL parses the DuckDB type name of a dynamic column kind.
// It returns Null when the name is not one of the dynamic kinds.
func KindFromSQL(s string) Kind {
	for k := Bool; k <= JSON; k++ {
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
)

// ScalarType returns the shared Type of a scalar kind.
func ScalarType(k Kind) *Type {
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
	}
	return &Type{Kind: k}
}

// ListOf returns LIST(elem).
func ListOf(elem *Type) *Type { return &Type{Kind: List, Elem: elem} }

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
		return t.Elem.SQL() + "[]"
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

// Widen returns the narrowest dynamic kind that holds values of both a and b:
// Null never fixes a type, BIGINT and DOUBLE widen to DOUBLE, and every other
// conflict widens to VARCHAR.
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
	}
	return String
}

// QuoteIdent quotes s as a DuckDB identifier. Every identifier that comes
// from input goes through it: the result is always one identifier.
func QuoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// QuoteString quotes s as a SQL string literal.
func QuoteString(s string) string {
	return `'` + strings.ReplaceAll(s, `'`, `''`) + `'`
}
