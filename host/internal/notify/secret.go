package notify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
)

// ReadSecret reads the secret that signs deliveries: the file's content,
// without the whitespace around it. A file others than its owner may
// read or write is refused, saying how to fix it.
func ReadSecret(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("webhook secret: %w", err)
	}
	if mode := info.Mode().Perm(); mode&0o077 != 0 {
		return nil, fmt.Errorf("webhook secret file %s is mode %04o: others than its owner may read or change it; chmod 600 %s", path, mode, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("webhook secret: %w", err)
	}
	secret := bytes.TrimSpace(b)
	if len(secret) == 0 {
		return nil, errors.New("webhook secret file " + path + " is empty")
	}
	return secret, nil
}

// SignatureHeader carries a delivery's signature: "sha256=" and the hex
// HMAC-SHA256 of the body, keyed by the secret.
const SignatureHeader = "X-Baton-Signature"

// IDHeader carries a delivery's id, the same on every try.
const IDHeader = "X-Baton-Delivery"

// Sign is the signature header's value for a body.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
