package masterkey

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestRingOpensOldAndResealsWithCurrent(t *testing.T) {
	oldHex := hex.EncodeToString(bytes.Repeat([]byte{1}, Size))
	newHex := hex.EncodeToString(bytes.Repeat([]byte{2}, Size))
	before, err := LoadRing("", env(map[string]string{"KICI_SECRET_KEY": oldHex}))
	if err != nil || before.Old != nil {
		t.Fatalf("%v %v", before, err)
	}
	sealed, _ := before.Seal([]byte("s3cret"), []byte("acme:release:k"))

	during, err := LoadRing("", env(map[string]string{"KICI_SECRET_KEY": newHex, "KICI_SECRET_KEY_OLD": oldHex}))
	if err != nil || during.Old == nil {
		t.Fatalf("%v %v", during, err)
	}
	if pt, err := during.Open(sealed, []byte("acme:release:k")); err != nil || string(pt) != "s3cret" {
		t.Fatalf("old value must open during rotation: %q %v", pt, err)
	}
	resealed, err := during.Reseal(sealed, []byte("acme:release:k"))
	if err != nil {
		t.Fatal(err)
	}
	after, _ := LoadRing("", env(map[string]string{"KICI_SECRET_KEY": newHex}))
	if pt, err := after.Open(resealed, []byte("acme:release:k")); err != nil || string(pt) != "s3cret" {
		t.Fatalf("resealed value must open with the new key alone: %q %v", pt, err)
	}
	if _, err := after.Open(sealed, []byte("acme:release:k")); !errors.Is(err, ErrOpen) {
		t.Fatalf("old ciphertext opened without the old key: %v", err)
	}
	if _, err := during.Open(sealed, []byte("acme:release:other")); !errors.Is(err, ErrOpen) {
		t.Fatalf("AAD not enforced: %v", err)
	}
	if _, err := LoadRing("", env(map[string]string{"KICI_SECRET_KEY": newHex, "KICI_SECRET_KEY_OLD": newHex})); err == nil || !strings.Contains(err.Error(), "same key") {
		t.Fatalf("identical old key accepted: %v", err)
	}
	if _, err := LoadRing("", env(map[string]string{"KICI_SECRET_KEY": newHex, "KICI_SECRET_KEY_OLD": "x"})); err == nil || !strings.Contains(err.Error(), "KICI_SECRET_KEY_OLD") {
		t.Fatalf("bad old key accepted: %v", err)
	}
}
