package ocitest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var client = &http.Client{Timeout: 10 * time.Second}

// pushBlob uploads data to repository repo in one POST and one PUT, as the distribution
// API allows, and returns its sha256 hex.
func pushBlob(t *testing.T, r *Registry, repo string, data []byte) string {
	t.Helper()
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	resp, err := client.Post("http://"+r.Addr+"/v2/"+repo+"/blobs/uploads/", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST upload: %s", resp.Status)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	loc = resp.Request.URL.ResolveReference(loc)
	q := loc.Query()
	q.Set("digest", "sha256:"+hexSum)
	loc.RawQuery = q.Encode()
	req, _ := http.NewRequest(http.MethodPut, loc.String(), bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT upload: %s", resp.Status)
	}
	return hexSum
}

func blobStatus(r *Registry, repo, hexSum string) (int, error) {
	resp, err := client.Head("http://" + r.Addr + "/v2/" + repo + "/blobs/sha256:" + hexSum)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestStartStopRestart proves the registry answers on Addr, keeps blobs where Storage
// says, refuses connections once stopped and serves the same blobs on the same address
// after Restart.
func TestStartStopRestart(t *testing.T) {
	r := Start(t)
	if !strings.HasPrefix(r.Addr, "127.0.0.1:") {
		t.Fatalf("Addr = %q, want 127.0.0.1:<port>", r.Addr)
	}
	if want := "oci+http://" + r.Addr + "/" + Prefix; r.URL() != want {
		t.Errorf("URL() = %q, want %q", r.URL(), want)
	}
	repo := Prefix + "/probe"
	sum := pushBlob(t, r, repo, []byte("hello registry"))
	data := filepath.Join(r.Storage, "docker", "registry", "v2", "blobs", "sha256", sum[:2], sum, "data")
	if b, err := os.ReadFile(data); err != nil || string(b) != "hello registry" {
		t.Fatalf("blob file %s: %q, %v", data, b, err)
	}

	addr := r.Addr
	r.Stop()
	if _, err := blobStatus(r, repo, sum); err == nil {
		t.Fatal("a stopped registry still answers")
	}
	r.Stop() // stopping twice does nothing

	r.Restart()
	if r.Addr != addr {
		t.Fatalf("Restart moved the registry from %s to %s", addr, r.Addr)
	}
	if code, err := blobStatus(r, repo, sum); err != nil || code != http.StatusOK {
		t.Fatalf("HEAD blob after Restart: %d, %v", code, err)
	}
}

// TestTwoRegistries proves registries started side by side get their own ports and
// storage.
func TestTwoRegistries(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.Addr == b.Addr || a.Storage == b.Storage {
		t.Fatalf("two registries share %s / %s", a.Addr, a.Storage)
	}
	sum := pushBlob(t, a, Prefix+"/x", []byte("only in a"))
	if code, err := blobStatus(b, Prefix+"/x", sum); err != nil || code != http.StatusNotFound {
		t.Fatalf("HEAD on the other registry: %d, %v; want 404", code, err)
	}
}
