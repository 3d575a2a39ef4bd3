package bedrock

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"
	"time"

	"modelgate/translate"
)

// Credentials are AWS credentials for SigV4 signing.
type Credentials = translate.AWSCredentials

// signingService is Bedrock Runtime's SigV4 service name.
const signingService = "bedrock"

// Sign returns the headers that sign a request with AWS Signature Version 4:
// authorization, x-amz-date and, with temporary credentials,
// x-amz-security-token. path is the escaped request path (as sent); like
// AWS's signers for every service but S3, it is escaped once more for the
// canonical request. The signed headers are content-type, host and the
// x-amz-* headers this adds, and content-length, which the gateway sets to
// the body's length.
func Sign(c Credentials, region, method, host, path, contentType string, body []byte, now time.Time) []translate.Header {
	date := now.UTC().Format("20060102T150405Z")
	day := date[:8]
	headers := map[string]string{"content-length": strconv.Itoa(len(body)), "content-type": contentType, "host": host, "x-amz-date": date}
	if c.SessionToken != "" {
		headers["x-amz-security-token"] = c.SessionToken
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	var canonicalHeaders strings.Builder
	for _, k := range names {
		canonicalHeaders.WriteString(k + ":" + strings.TrimSpace(headers[k]) + "\n")
	}
	signed := strings.Join(names, ";")
	rawPath, query, _ := strings.Cut(path, "?")
	payload := sha256.Sum256(body)
	canonical := strings.Join([]string{method, escapePath(rawPath), canonicalQuery(query), canonicalHeaders.String(), signed,
		hex.EncodeToString(payload[:])}, "\n")
	scope := day + "/" + region + "/" + signingService + "/aws4_request"
	digest := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + date + "\n" + scope + "\n" + hex.EncodeToString(digest[:])
	key := hmacSHA256([]byte("AWS4"+c.SecretAccessKey), day)
	for _, part := range []string{region, signingService, "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	sig := hex.EncodeToString(hmacSHA256(key, toSign))
	out := []translate.Header{
		{Name: "authorization", Value: "AWS4-HMAC-SHA256 Credential=" + c.AccessKeyID + "/" + scope + ", SignedHeaders=" + signed + ", Signature=" + sig},
		{Name: "x-amz-date", Value: date},
	}
	if c.SessionToken != "" {
		out = append(out, translate.Header{Name: "x-amz-security-token", Value: c.SessionToken})
	}
	return out
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// escapePath URI-encodes every byte but unreserved characters and '/'.
func escapePath(p string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~/", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// canonicalQuery sorts the query's (already escaped) pairs.
func canonicalQuery(q string) string {
	if q == "" {
		return ""
	}
	pairs := strings.Split(q, "&")
	for i, p := range pairs {
		if !strings.Contains(p, "=") {
			pairs[i] = p + "="
		}
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}
