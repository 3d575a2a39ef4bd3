package guards

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
)

func init() { routes = append(routes, route{"POST /v2/guard", lakera}) }

// lakeraRoles are the roles a Lakera Guard message may have.
var lakeraRoles = []string{"system", "user", "assistant", "tool", "developer"}

// lakeraRequest is the part of Lakera Guard's request read.
type lakeraRequest struct {
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

// lakera answers as Lakera Guard v2 (POST /v2/guard): flagged if a
// message's content matches Flagged, whatever the project, with the
// request's metadata. Any bearer key is accepted; none is refused with
// 401.
func lakera(w http.ResponseWriter, r *http.Request) {
	if bearerKey(r) == "" {
		reply(w, http.StatusUnauthorized, map[string]string{"message": "Unauthorized: a bearer API key is required"})
		return
	}
	var req lakeraRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		reply(w, http.StatusBadRequest, map[string]string{"message": "messages: a non-empty list of {role, content} is required"})
		return
	}
	flagged := false
	for _, m := range req.Messages {
		if !slices.Contains(lakeraRoles, m.Role) {
			reply(w, http.StatusBadRequest, map[string]string{"message": "messages: unknown role"})
			return
		}
		flagged = flagged || Flagged.MatchString(m.Content)
	}
	reply(w, http.StatusOK, map[string]any{"flagged": flagged, "metadata": map[string]string{"request_uuid": requestUUID()}})
}

// requestUUID is a random (version 4) UUID.
func requestUUID() string {
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
