package secrets

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"kici.dev/kici/internal/secrets/masterkey"
	"kici.dev/kici/internal/store"
)

// SealedPrefix starts a webhook secret stored encrypted:
// "kici-sealed:" + base64(masterkey sealed value). A stored value without
// it is plaintext, as every secret was before encryption at rest.
const SealedPrefix = "kici-sealed:"

// sourceAAD binds a source's webhook_secret column to its source.
func sourceAAD(id string) []byte { return []byte("kici:source:" + id + ":webhook_secret") }

// sourceSecretAAD binds a source_secrets row's value to its id.
func sourceSecretAAD(id string) []byte { return []byte("kici:source_secret:" + id) }

func seal(ring *masterkey.Ring, plain string, aad []byte) (string, error) {
	if plain == "" {
		return "", nil
	}
	b, err := ring.Seal([]byte(plain), aad)
	if err != nil {
		return "", err
	}
	return SealedPrefix + base64.RawStdEncoding.EncodeToString(b), nil
}

// open returns the plaintext of a stored value: a sealed one opened with
// the ring (current key, else the old one), a plaintext one as it is.
func open(ring *masterkey.Ring, stored string, aad []byte) (string, error) {
	rest, ok := strings.CutPrefix(stored, SealedPrefix)
	if !ok {
		return stored, nil
	}
	b, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil {
		return "", fmt.Errorf("webhook secret: %w", masterkey.ErrOpen)
	}
	plain, err := ring.Open(b, aad)
	if err != nil {
		return "", fmt.Errorf("webhook secret: %w (is KICI_SECRET_KEY the key it was sealed with?)", err)
	}
	return string(plain), nil
}

// sealedSources is a store whose webhook secrets (sources.webhook_secret
// and source_secrets.secret) are encrypted at rest with the master key:
// sealed on write, opened on read, plaintext rows read as they are.
type sealedSources struct {
	store.Store
	ring *masterkey.Ring
}

// SealSources returns st with its sources' webhook secrets encrypted at
// rest under ring (like every other secret kici stores); callers see
// plaintext. Rows written before (plaintext) are read as they are until
// SealStoredSourceSecrets rewrites them.
func SealSources(st store.Store, ring *masterkey.Ring) store.Store {
	return &sealedSources{Store: st, ring: ring}
}

func (s *sealedSources) sealedSource(src *store.Source) (*store.Source, error) {
	c := *src
	var err error
	c.WebhookSecret, err = seal(s.ring, src.WebhookSecret, sourceAAD(src.ID))
	return &c, err
}

func (s *sealedSources) sealedSecrets(secs []*store.SourceSecret) ([]*store.SourceSecret, error) {
	out := make([]*store.SourceSecret, len(secs))
	for i, sec := range secs {
		c := *sec
		if c.ID == "" {
			return nil, errors.New("webhook secret without an id cannot be sealed")
		}
		var err error
		if c.Secret, err = seal(s.ring, sec.Secret, sourceSecretAAD(sec.ID)); err != nil {
			return nil, err
		}
		out[i] = &c
	}
	return out, nil
}

func (s *sealedSources) openSource(src *store.Source, err error) (*store.Source, error) {
	if err != nil {
		return nil, err
	}
	if src.WebhookSecret, err = open(s.ring, src.WebhookSecret, sourceAAD(src.ID)); err != nil {
		return nil, err
	}
	return src, nil
}

// CreateSource seals the webhook secret, then inserts.
func (s *sealedSources) CreateSource(ctx context.Context, src *store.Source) error {
	c, err := s.sealedSource(src)
	if err != nil {
		return err
	}
	err = s.Store.CreateSource(ctx, c)
	src.CreatedAt = c.CreatedAt
	return err
}

// CreateSourceWithSettings seals the source's and each secret's value.
func (s *sealedSources) CreateSourceWithSettings(ctx context.Context, src *store.Source, set *store.SourceSettings, secs []*store.SourceSecret) error {
	c, err := s.sealedSource(src)
	if err != nil {
		return err
	}
	for _, sec := range secs {
		sec.SourceID = src.ID
		if sec.ID == "" {
			sec.ID = newSecretID() // bound into the seal
		}
	}
	sealed, err := s.sealedSecrets(secs)
	if err != nil {
		return err
	}
	err = s.Store.CreateSourceWithSettings(ctx, c, set, sealed)
	src.CreatedAt = c.CreatedAt
	for i, sec := range secs {
		sec.CreatedAt = sealed[i].CreatedAt
	}
	return err
}

// GetSource opens the webhook secret.
func (s *sealedSources) GetSource(ctx context.Context, id string) (*store.Source, error) {
	return s.openSource(s.Store.GetSource(ctx, id))
}

// GetSourceByName opens the webhook secret.
func (s *sealedSources) GetSourceByName(ctx context.Context, orgID, name string) (*store.Source, error) {
	return s.openSource(s.Store.GetSourceByName(ctx, orgID, name))
}

// ListSources opens every webhook secret.
func (s *sealedSources) ListSources(ctx context.Context, orgID string) ([]*store.Source, error) {
	list, err := s.Store.ListSources(ctx, orgID)
	if err != nil {
		return nil, err
	}
	for _, src := range list {
		if _, err := s.openSource(src, nil); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// AddSourceSecret seals the value (an id is assigned first: it is bound
// into the seal).
func (s *sealedSources) AddSourceSecret(ctx context.Context, sec *store.SourceSecret) error {
	if sec.ID == "" {
		sec.ID = newSecretID()
	}
	sealed, err := s.sealedSecrets([]*store.SourceSecret{sec})
	if err != nil {
		return err
	}
	err = s.Store.AddSourceSecret(ctx, sealed[0])
	sec.CreatedAt = sealed[0].CreatedAt
	return err
}

// ListSourceSecrets opens every value.
func (s *sealedSources) ListSourceSecrets(ctx context.Context, sourceID string, activeOnly bool) ([]*store.SourceSecret, error) {
	list, err := s.Store.ListSourceSecrets(ctx, sourceID, activeOnly)
	if err != nil {
		return nil, err
	}
	for _, sec := range list {
		if sec.Secret, err = open(s.ring, sec.Secret, sourceSecretAAD(sec.ID)); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// GetIngressSource opens the source's webhook secret and each of its
// secrets' values.
func (s *sealedSources) GetIngressSource(ctx context.Context, id string) (*store.IngressSource, error) {
	return s.openIngressSource(s.Store.GetIngressSource(ctx, id))
}

// GetIngressSourceByName opens the source's webhook secret and each of
// its secrets' values.
func (s *sealedSources) GetIngressSourceByName(ctx context.Context, orgID, name string) (*store.IngressSource, error) {
	return s.openIngressSource(s.Store.GetIngressSourceByName(ctx, orgID, name))
}

// openIngressSource opens what GetIngressSource read. The source's own
// secret failing to open fails the look-up, as GetSource does; a secret
// row failing to open is kept in SecretsErr, so that only a route that
// verifies with the secrets fails on it, as when they were read apart.
func (s *sealedSources) openIngressSource(is *store.IngressSource, err error) (*store.IngressSource, error) {
	if err != nil {
		return nil, err
	}
	if _, err := s.openSource(is.Source, nil); err != nil {
		return nil, err
	}
	if is.SecretsErr != nil {
		return is, nil
	}
	for _, sec := range is.Secrets {
		if sec.Secret, err = open(s.ring, sec.Secret, sourceSecretAAD(sec.ID)); err != nil {
			is.Secrets, is.SecretsErr = nil, err
			break
		}
	}
	return is, nil
}

// SealStoredSourceSecrets rewrites every webhook secret of st (the raw
// store, not SealSources' view) sealed with the ring's current key:
// plaintext rows from before encryption at rest, and sealed rows that
// only the old key opens (a rotation). Rows already sealed with the
// current key are left alone, so a restart rewrites nothing. After a
// rewrite the store's storage of those tables is scrubbed (when it can
// be: sqlstore's ScrubSourceSecrets) so the old plaintext leaves the
// database files. It returns
// how many rows it rewrote; an error (a sealed row no key opens) names
// the row, and the caller refuses to start.
func SealStoredSourceSecrets(ctx context.Context, st store.Store, ring *masterkey.Ring) (int, error) {
	srcs, err := st.ListSources(ctx, "")
	if err != nil {
		return 0, err
	}
	n := 0
	reseal := func(stored string, aad []byte, write func(string) error, what string) error {
		if stored == "" {
			return nil
		}
		if rest, ok := strings.CutPrefix(stored, SealedPrefix); ok {
			b, err := base64.RawStdEncoding.DecodeString(rest)
			if err == nil {
				if _, err = ring.Current.Open(b, aad); err == nil {
					return nil // sealed with the current key
				}
			}
		}
		plain, err := open(ring, stored, aad)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		sealed, err := seal(ring, plain, aad)
		if err != nil {
			return err
		}
		if err := write(sealed); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		n++
		return nil
	}
	for _, src := range srcs {
		if err := reseal(src.WebhookSecret, sourceAAD(src.ID), func(v string) error { return st.SetSourceWebhookSecret(ctx, src.ID, v) },
			"source "+src.ID); err != nil {
			return n, err
		}
		secs, err := st.ListSourceSecrets(ctx, src.ID, false)
		if err != nil {
			return n, err
		}
		for _, sec := range secs {
			if err := reseal(sec.Secret, sourceSecretAAD(sec.ID), func(v string) error { return st.SetSourceSecretValue(ctx, sec.ID, v) },
				"webhook secret "+sec.ID+" of source "+src.ID); err != nil {
				return n, err
			}
		}
	}
	if n > 0 {
		// The plaintext the rows held is unreferenced now but still in the
		// database files until their storage is rewritten.
		if sc, ok := st.(interface{ ScrubSourceSecrets(context.Context) error }); ok {
			if err := sc.ScrubSourceSecrets(ctx); err != nil {
				return n, fmt.Errorf("webhook secrets sealed, but the old plaintext may remain in the database files: %w", err)
			}
		}
	}
	return n, nil
}

// newSecretID is a webhook secret id, as the store would assign it.
func newSecretID() string { return uuid.NewString() }
