package blobstore_test

import (
	"testing"

	"backstop/app/blobstore"
	"backstop/app/blobstore/backendtest"
)

func TestLocalConformance(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) blobstore.Backend {
		b, err := blobstore.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
