// Command healthcheck is the container health check of the modelgate image.
// The image is distroless: it has no shell, curl or wget for a compose
// healthcheck to run, so it carries this instead.
//
//	healthcheck [-timeout 2s] URL
//
// GETs URL (plain http, such as http://127.0.0.1:8081/readyz) and exits 0
// when the answer is 200, else 1 with the reason on stderr. Docker reserves
// exit code 2, so usage errors exit 1 too.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

func main() {
	timeout := flag.Duration("timeout", 2*time.Second, "how long to wait for the whole answer (below the healthcheck's timeout)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: healthcheck [-timeout 2s] http://HOST:PORT/PATH")
		flag.PrintDefaults()
	}
	flag.CommandLine.Init(os.Args[0], flag.ContinueOnError)
	if err := flag.CommandLine.Parse(os.Args[1:]); err != nil || flag.NArg() != 1 {
		if err == nil {
			flag.Usage()
		}
		os.Exit(1)
	}
	status, err := check(flag.Arg(0), *timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		os.Exit(1)
	}
	fmt.Println(status) // docker inspect shows it as the probe's output
}

// check GETs rawURL and returns the answer's status line when it is 200.
func check(rawURL string, timeout time.Duration) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" || u.Host == "" {
		return "", fmt.Errorf("%q: want http://HOST:PORT/PATH", rawURL)
	}
	client := &http.Client{
		Timeout: timeout,
		// The probe is the container's own port: never through a proxy
		// from the environment, and never to wherever a redirect points.
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	resp, err := client.Get(u.String())
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	return fmt.Sprintf("GET %s: %s", u, resp.Status), nil
}
