package shred

// Canonical timestamps: the only strings that become TIMESTAMPTZ values are
// those that read back exactly as they were written,
//
//	YYYY-MM-DDTHH:MM:SS[.f]Z
//
// RFC 3339 in UTC, year 1000-9999, with the fraction being the
// microseconds (at most 6 digits) without trailing zeros, and no fraction
// when they are zero. Every other string (an offset such as +02:00, a
// lower-case t or z, nanoseconds, "…00.500Z") stays VARCHAR, so that its
// text is kept. docs/SCHEMA.md, section 8.2.

const (
	usPerSecond = 1_000_000
	usPerDay    = 86_400 * usPerSecond
)

// ParseTimestamp parses a canonical timestamp into microseconds since the
// Unix epoch. ok is false for any other text.
func ParseTimestamp(s []byte) (us int64, ok bool) {
	if len(s) < 20 || len(s) > 27 || s[len(s)-1] != 'Z' ||
		s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return 0, false
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	hour, ok4 := digits(s[11:13])
	minute, ok5 := digits(s[14:16])
	sec, ok6 := digits(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || year < 1000 ||
		month < 1 || month > 12 || day < 1 || day > daysIn(year, month) ||
		hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	var frac int64
	switch n := len(s) - 20; {
	case n == 0:
	case n == 1 || s[19] != '.' || s[len(s)-2] == '0':
		return 0, false // "…SS.Z", no dot, or a trailing zero
	default:
		f, ok := digits(s[20 : len(s)-1])
		if !ok {
			return 0, false
		}
		for i := n - 1; i < 6; i++ {
			f *= 10
		}
		frac = f
	}
	days := daysFromCivil(year, month, day)
	return days*usPerDay + (hour*3600+minute*60+sec)*usPerSecond + frac, true
}

// AppendTimestamp appends the canonical text of a TIMESTAMPTZ value (the
// inverse of ParseTimestamp for years 1000-9999).
func AppendTimestamp(dst []byte, us int64) []byte {
	days := us / usPerDay
	rem := us % usPerDay
	if rem < 0 {
		rem += usPerDay
		days--
	}
	y, m, d := civilFromDays(days)
	secs := rem / usPerSecond
	frac := rem % usPerSecond
	dst = append4(dst, y)
	dst = append(dst, '-')
	dst = append2(dst, m)
	dst = append(dst, '-')
	dst = append2(dst, d)
	dst = append(dst, 'T')
	dst = append2(dst, secs/3600)
	dst = append(dst, ':')
	dst = append2(dst, secs/60%60)
	dst = append(dst, ':')
	dst = append2(dst, secs%60)
	if frac != 0 {
		var buf [6]byte
		for i := 5; i >= 0; i-- {
			buf[i] = byte('0' + frac%10)
			frac /= 10
		}
		n := 6
		for buf[n-1] == '0' {
			n--
		}
		dst = append(dst, '.')
		dst = append(dst, buf[:n]...)
	}
	return append(dst, 'Z')
}

func digits(b []byte) (int64, bool) {
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

func append2(dst []byte, v int64) []byte {
	return append(dst, byte('0'+v/10), byte('0'+v%10))
}

func append4(dst []byte, v int64) []byte {
	if v < 0 || v > 9999 { // outside what ParseTimestamp accepts
		return append(dst, "????"...)
	}
	return append(dst, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
}

func daysIn(year, month int64) int64 {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil and civilFromDays convert between proleptic Gregorian
// dates and days since 1970-01-01 (Howard Hinnant's algorithms).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400 // y >= 999 here, so no floor correction is needed
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

func civilFromDays(z int64) (y, m, d int64) {
	z += 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	m = mp + 3
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}
