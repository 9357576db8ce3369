package graph

import (
	"encoding/base64"
	"testing"
)

// Vectors from rclone's tests of its QuickXorHash, which it checked
// against OneDrive (github.com/rclone/rclone,
// backend/onedrive/quickxorhash/quickxorhash_test.go): input and digest
// base64-encoded.
var quickXorVectors = []struct{ in, out string }{
	{``, "AAAAAAAAAAAAAAAAAAAAAAAAAAA="},
	{`Sg==`, "SgAAAAAAAAAAAAAAAQAAAAAAAAA="},
	{`tbQ=`, "taAFAAAAAAAAAAAAAgAAAAAAAAA="},
	{`0pZP`, "0rDEEwAAAAAAAAAAAwAAAAAAAAA="},
	{`/aNzzCFPS/A=`, "/RjFHJgRgicsAR4ACAAAAAAAAAA="},
	{`2fuxhBJXtpWFe8dOfdGeHw==`, "O9tHLAghgSvYohKFyMMxnNCHaHg="},
	{`T6LYJIfDh81JrAK309H2JMJTXis=`, "zBTHrspn3mEcohlJdIUAbjGNaNg="},
	{`NbYXsp5/K6mR+NmHwExjvWeWDJFnXTKWVlzYHoesp2E=`, "wjuAuWDiq04qDt1R8hHWDDcwVoQ="},
	{`Mb7EGva2rEE5fENDL85P+BsapHEEjv2/siVhKjvAQe02feExVOQSkfmuYzU/kTF1MaKjPmKF/w+cbvwfdWL8aQ==`, "n1anP5NfvD4XDYWIeRPW3ZkPv1Y="},
	{`w0LGhqU1WXFbdavqDE4kAjEzWLGGzmTNikzqnsiXHx2KRReKVTxkv27u3UcEz9+lbMvYl4xFf2Z4aE1xRBBNd1Ke5C0zToSaYw5o4B/7X99nKK2/XaUX1byLow2aju2XJl2OpKpJg+tSJ2fmjIJTkfuYUz574dFX6/VXxSxwGH/xQEAKS5TCsBK3CwnuG1p5SAsQq3gGVozDWyjEBcWDMdy8/AIFrj/y03Lfc/RNRCQTAfZbnf2QwV7sluw4fH3XJr07UoD0YqN+7XZzidtrwqMY26fpLZnyZjnBEt1FAZWO7RnKG5asg8xRk9YaDdedXdQSJAOy6bWEWlABj+tVAigBxavaluUH8LOj+yfCFldJjNLdi90fVHkUD/m4Mr5OtmupNMXPwuG3EQlqWUVpQoYpUYKLsk7a5Mvg6UFkiH596y5IbJEVCI1Kb3D1`, "e3+wo77iKcILiZegnzyUNcjCdoQ="},
}

func TestQuickXorHashVectors(t *testing.T) {
	for _, v := range quickXorVectors {
		in, err := base64.StdEncoding.DecodeString(v.in)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range []int{1, 3, 7, 64, 161, len(in) + 1} {
			h := NewQuickXorHash()
			for i := 0; i < len(in); i += block {
				h.Write(in[i:min(i+block, len(in))])
			}
			if got := base64.StdEncoding.EncodeToString(h.Sum(nil)); got != v.out {
				t.Errorf("%d bytes in blocks of %d: %s, want %s", len(in), block, got, v.out)
			}
		}
	}
	h := NewQuickXorHash()
	h.Write([]byte("x"))
	h.Reset()
	if h.Size() != 20 || base64.StdEncoding.EncodeToString(h.Sum(nil)) != quickXorVectors[0].out {
		t.Error("Reset or Size wrong")
	}
}
