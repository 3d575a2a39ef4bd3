package bedrock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The AWS SDK's signer is the oracle: both must produce the same
// Authorization header for the same request.
func TestSignMatchesAWSSDK(t *testing.T) {
	now := time.Date(2026, 11, 23, 6, 30, 0, 0, time.UTC)
	tests := []struct {
		name, path string
		creds      Credentials
	}{
		{"converse", "/model/us.amazon.nova-micro-v1%3A0/converse", Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}},
		{"stream with session token", "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream",
			Credentials{AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "secret", SessionToken: "token/with+chars="}},
		{"arn model id", "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123%3Ainference-profile%2Fus.x/converse", Credentials{AccessKeyID: "A", SecretAccessKey: "S"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(`{"messages":[{"role":"user","content":[{"text":"Hello!"}]}]}`)
			const host = "bedrock-runtime.us-east-1.amazonaws.com"
			got := Sign(tt.creds, "us-east-1", "POST", host, tt.path, "application/json", body, now)

			req, _ := http.NewRequest("POST", "https://"+host+tt.path, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			sum := sha256.Sum256(body)
			err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: tt.creds.AccessKeyID,
				SecretAccessKey: tt.creds.SecretAccessKey, SessionToken: tt.creds.SessionToken}, req, hex.EncodeToString(sum[:]), "bedrock", "us-east-1", now)
			if err != nil {
				t.Fatal(err)
			}
			if got[0].Value != req.Header.Get("Authorization") {
				t.Errorf("authorization\n got %s\nwant %s", got[0].Value, req.Header.Get("Authorization"))
			}
			if got[1].Value != req.Header.Get("X-Amz-Date") {
				t.Errorf("x-amz-date = %s, want %s", got[1].Value, req.Header.Get("X-Amz-Date"))
			}
			if tt.creds.SessionToken != "" && (len(got) != 3 || got[2].Value != req.Header.Get("X-Amz-Security-Token")) {
				t.Errorf("security token headers = %v", got)
			}
		})
	}
}

func TestRequestIsSignedWithoutAPIKey(t *testing.T) {
	c := newChat(t, `{"model":"m","messages":[{"role":"user","content":"Hello!"}]}`)
	c.target.APIKey = ""
	c.target.Host = "bedrock-runtime.eu-west-3.amazonaws.com"
	c.target.AWS = Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET"}
	up, err := c.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	want := Sign(c.target.AWS, "eu-west-3", "POST", c.target.Host, up.Path, "application/json", up.Body, c.now())
	if len(up.Headers) != 3 || up.Headers[1] != want[0] || up.Headers[2] != want[1] {
		t.Errorf("headers = %v, want content-type and %v", up.Headers, want)
	}
	if !bytes.Contains([]byte(up.Headers[1].Value), []byte("/eu-west-3/bedrock/aws4_request")) {
		t.Errorf("region not taken from the host: %s", up.Headers[1].Value)
	}
}
