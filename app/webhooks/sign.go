package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of a delivery (CONTRACT §5).
const (
	HeaderEvent     = "X-Service-Event"
	HeaderDelivery  = "X-Service-Delivery"
	HeaderAttempt   = "X-Service-Attempt"
	HeaderSignature = "X-Service-Signature"
	// Standard Webhooks (https://www.standardwebhooks.com).
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// ServiceSignature is the X-Service-Signature value of body under secret:
// "sha256=" and the lowercase hex HMAC-SHA-256 of the raw body, keyed with
// the secret string exactly as shown to the user.
func ServiceSignature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// StandardSignature is one Standard Webhooks signature, "v1,<base64>": the
// HMAC-SHA-256 of "<id>.<unix seconds>.<body>" keyed with the decoded secret.
func StandardSignature(secret, msgID string, at time.Time, body []byte) (string, error) {
	key, err := standardKey(secret)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msgID + "." + strconv.FormatInt(at.Unix(), 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}

// signHeaders sets the signature headers of one attempt. secrets holds the
// current secret first and, within 24 h of a rotation, the previous one.
// Each signature header then carries one signature per secret: the current
// one first. X-Service-Signature is repeated (one field line per secret;
// http.Header.Get yields the current one), webhook-signature lists them
// space-separated as Standard Webhooks specifies. msgID is the delivery id,
// the same on every retry so receivers can drop duplicates.
func signHeaders(h http.Header, secrets []string, msgID string, at time.Time, body []byte) error {
	var std []string
	for _, s := range secrets {
		h.Add(HeaderSignature, ServiceSignature(s, body))
		sig, err := StandardSignature(s, msgID, at, body)
		if err != nil {
			return err
		}
		std = append(std, sig)
	}
	h.Set(HeaderWebhookID, msgID)
	h.Set(HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10))
	h.Set(HeaderWebhookSignature, strings.Join(std, " "))
	return nil
}
