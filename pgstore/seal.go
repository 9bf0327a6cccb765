package pgstore

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/capsulegate/capsulegate/errs"
)

// Push configs hold webhook credentials (a bearer token, a basic-auth password), so
// their bytes are sealed before they reach the database: AES-256-GCM under a key derived
// from the app's store_key, with the row's capsule, task and config ids as associated
// data so that a sealed config copied onto another row does not open. A sealed value is
// sealVersion, the key's 4-byte id, the 12-byte nonce, then the ciphertext.

const sealVersion = 1

// sealer seals and opens push configs under one key.
type sealer struct {
	aead cipher.AEAD
	id   [4]byte
}

func newSealer(key string) *sealer {
	k := sha256.Sum256([]byte("capsulegate push configs v1\x00" + key))
	block, err := aes.NewCipher(k[:])
	if err != nil {
		panic(err) // a 32-byte key is always a valid AES key
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	s := &sealer{aead: aead}
	sum := sha256.Sum256(k[:])
	copy(s.id[:], sum[:])
	return s
}

func aad(capsule, taskID, id string) []byte {
	return []byte(capsule + "\x00" + taskID + "\x00" + id)
}

func (s *sealer) seal(capsule, taskID, id string, data []byte) []byte {
	out := make([]byte, 0, 1+4+12+len(data)+s.aead.Overhead())
	out = append(out, sealVersion)
	out = append(out, s.id[:]...)
	nonce := make([]byte, 12)
	_, _ = rand.Read(nonce) // crypto/rand never fails on a supported platform
	out = append(out, nonce...)
	return s.aead.Seal(out, nonce, data, aad(capsule, taskID, id))
}

// open opens a sealed push config of the row (capsule, taskID, id).
func (s *Store) open(capsule, taskID, id string, sealed []byte) ([]byte, error) {
	seal := s.seal.Load()
	if seal == nil {
		return nil, noKey()
	}
	if len(sealed) < 1+4+12 || sealed[0] != sealVersion {
		return nil, errs.New(CodeBadRecord, part, fmt.Sprintf("push config %s of task %s is not a sealed config of this release", id, taskID),
			"delete the config (the client registers it again), or restore the table from a backup").At(s.where, "")
	}
	if !bytes.Equal(sealed[1:5], seal.id[:]) {
		return nil, errs.New(CodeKey, part, fmt.Sprintf("push config %s of task %s was sealed with another store_key (key id %s; this one is %s)",
			id, taskID, hex.EncodeToString(sealed[1:5]), hex.EncodeToString(seal.id[:])),
			"configure the store_key the gateway wrote the configs with").At(s.where, "")
	}
	data, err := seal.aead.Open(nil, sealed[5:17], sealed[17:], aad(capsule, taskID, id))
	if err != nil {
		return nil, errs.New(CodeBadRecord, part, fmt.Sprintf("push config %s of task %s does not open: damaged, or moved from another row", id, taskID),
			"delete the config (the client registers it again), or restore the table from a backup").At(s.where, "")
	}
	return data, nil
}

// noKey is the refusal of a push config without a store key.
func noKey() error {
	return errs.New(CodeKey, part, "push configs need a store_key: they hold webhook credentials, kept encrypted in the database",
		"set store_key in the capsule app's options, such as store_key {env.CAPSULE_STORE_KEY}, to at least 32 random bytes (openssl rand -base64 32)")
}
