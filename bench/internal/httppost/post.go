// Package httppost sends the load generators' requests: one POST, and the
// delay a 503 or 429 asks for.
package httppost

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Post sends one request body to url with the given Content-Type (and
// Content-Encoding, when not empty) and returns its status and, for a
// 503 or 429, the delay its Retry-After asks for (1s if absent or
// unreadable).
func Post(ctx context.Context, client *http.Client, url, contentType, encoding string, body []byte) (int, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", contentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	retryAfter := time.Second
	if v := resp.Header.Get("Retry-After"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			retryAfter = time.Duration(n) * time.Second
		} else if t, err := http.ParseTime(v); err == nil {
			retryAfter = max(0, time.Until(t))
		}
	}
	return resp.StatusCode, retryAfter, nil
}
