package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

const cloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

// googleTokens returns the access-token function of a vertex backend. With
// a service-account key (keyJSON) it mints tokens with the key's JWT
// bearer grant, at tokenURL when set instead of the key's token_uri;
// without one it uses Application Default Credentials: the file
// GOOGLE_APPLICATION_CREDENTIALS names, gcloud's, or the metadata server
// of GCE and GKE Workload Identity. Tokens are cached and refreshed five
// minutes before they expire; the function is safe for concurrent use.
func googleTokens(keyJSON []byte, tokenURL string) (func(context.Context) (string, error), error) {
	// The source outlives any one request: its token requests are bounded
	// by the client's timeout rather than by a request's context.
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Timeout: 10 * time.Second})
	var src oauth2.TokenSource
	if keyJSON != nil {
		conf, err := google.JWTConfigFromJSON(keyJSON, cloudPlatformScope)
		if err != nil {
			return nil, fmt.Errorf("reading the service account: %w", err)
		}
		if tokenURL != "" {
			conf.TokenURL = tokenURL
		}
		src = conf.TokenSource(ctx)
	} else {
		creds, err := google.FindDefaultCredentials(ctx, cloudPlatformScope)
		if err != nil {
			return nil, fmt.Errorf("no service account is configured and Application Default Credentials are not found: %w", err)
		}
		src = creds.TokenSource
	}
	src = oauth2.ReuseTokenSourceWithExpiry(nil, src, 5*time.Minute)
	return func(context.Context) (string, error) {
		tok, err := src.Token()
		if err != nil {
			var re *oauth2.RetrieveError
			if errors.As(err, &re) && re.Response != nil {
				return "", fmt.Errorf("the token endpoint answered %d", re.Response.StatusCode)
			}
			return "", err
		}
		return tok.AccessToken, nil
	}, nil
}
