package serve

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"
)

// bearerAuth checks `Authorization: Bearer <token>` on every request it
// wraps. The token is compared in constant time (over SHA-256 digests, so
// that not even its length leaks) and never logged.
type bearerAuth struct {
	sum [sha256.Size]byte
}

func newBearerAuth(token string) *bearerAuth {
	return &bearerAuth{sum: sha256.Sum256([]byte(token))}
}

var errUnauthenticated = errors.New("missing or wrong bearer token (Authorization: Bearer <token>)")

// ok reports whether the request carries the token.
func (a *bearerAuth) ok(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(h[len(prefix):])))
	return subtle.ConstantTimeCompare(sum[:], a.sum[:]) == 1
}

// grpcErrors writes errors in the protocol of a gRPC, gRPC-Web or Connect
// request.
var grpcErrors = connect.NewErrorWriter()

// wrap refuses requests without the token: 401 with a Status body (code
// 16 UNAUTHENTICATED) and WWW-Authenticate: Bearer, or, for a gRPC call,
// the UNAUTHENTICATED status. onRefuse counts and logs a refusal.
func (a *bearerAuth) wrap(next http.Handler, grpcPaths map[string]bool, onRefuse func(r *http.Request, e *apiError)) http.Handler {
	if a == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.ok(r) {
			next.ServeHTTP(w, r)
			return
		}
		e := &apiError{status: http.StatusUnauthorized, code: codeUnauthenticated, reason: reasonUnauthenticate, msg: errUnauthenticated.Error()}
		onRefuse(r, e)
		if grpcPaths[r.URL.Path] && grpcErrors.IsSupported(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="shredduck"`)
			grpcErrors.Write(w, r, connect.NewError(connect.CodeUnauthenticated, errUnauthenticated))
			return
		}
		f, _ := requestFormat(r.Header.Get("Content-Type"))
		writeError(w, f, e)
	})
}
