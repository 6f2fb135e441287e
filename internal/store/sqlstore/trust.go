package sqlstore

import (
	"context"
	"errors"

	"kici.dev/kici/internal/store"
)

var _ store.TrustStore = (*Store)(nil)

const trustPolicyCols = `org_id, fork_policy, approval_expiry_seconds, source, updated_at`

func scanTrustPolicy(r scanner) (*store.TrustPolicy, error) {
	var p store.TrustPolicy
	if err := r.Scan(&p.OrgID, &p.ForkPolicy, &p.ApprovalExpirySeconds, &p.Source, tcol(&p.UpdatedAt)); err != nil {
		return nil, mapErr(err)
	}
	return &p, nil
}

// GetTrustPolicy returns org's stored policy, or ErrNotFound.
func (s *Store) GetTrustPolicy(ctx context.Context, orgID string) (*store.TrustPolicy, error) {
	return scanTrustPolicy(s.queryRow(ctx, `SELECT `+trustPolicyCols+` FROM org_trust_policy WHERE org_id = ?`, orgID))
}

// UpdateTrustPolicyAudited read-merge-writes org's policy with its audit
// row, under the org's trust lock (which also covers an org with no stored
// row yet, where a row lock could not), so concurrent updates of one org
// serialise. An empty Source is stored as "local".
func (s *Store) UpdateTrustPolicyAudited(ctx context.Context, orgID string, def store.TrustPolicy,
	mutate func(p *store.TrustPolicy) error, audit *store.AccessLogEntry) (*store.TrustPolicy, error) {
	var out *store.TrustPolicy
	err := s.tx(ctx, func(tx conn) error {
		if err := tx.lock(ctx, lockClassTrust, orgID); err != nil {
			return err
		}
		p, err := scanTrustPolicy(tx.queryRow(ctx, `SELECT `+trustPolicyCols+` FROM org_trust_policy WHERE org_id = ?`, orgID))
		if errors.Is(err, store.ErrNotFound) {
			d := def
			p, err = &d, nil
		}
		if err != nil {
			return err
		}
		p.OrgID = orgID
		if err := mutate(p); err != nil {
			return err
		}
		p.OrgID = orgID
		if p.Source == "" {
			p.Source = "local"
		}
		p.UpdatedAt = now()
		if _, err := tx.exec(ctx, `INSERT INTO org_trust_policy (`+trustPolicyCols+`) VALUES (?,?,?,?,?)
			ON CONFLICT (org_id) DO UPDATE SET fork_policy = excluded.fork_policy,
			approval_expiry_seconds = excluded.approval_expiry_seconds, source = excluded.source, updated_at = excluded.updated_at`,
			p.OrgID, p.ForkPolicy, p.ApprovalExpirySeconds, p.Source, s.d.ts(p.UpdatedAt)); err != nil {
			return mapErr(err)
		}
		if err := insertAccessLog(ctx, tx, audit); err != nil {
			return mapErr(err)
		}
		out = p
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

const directoryCols = `org_id, user_id, provider, provider_user_id, provider_username, ci_trust, updated_at`

func scanDirectoryMember(r scanner) (*store.DirectoryMember, error) {
	var m store.DirectoryMember
	if err := r.Scan(&m.OrgID, &m.UserID, &m.Provider, &m.ProviderUserID, &m.ProviderUsername, &m.CITrust, tcol(&m.UpdatedAt)); err != nil {
		return nil, mapErr(err)
	}
	return &m, nil
}

// ListDirectoryMembers returns org's directory ordered by user id.
func (s *Store) ListDirectoryMembers(ctx context.Context, orgID string) ([]*store.DirectoryMember, error) {
	rows, err := s.query(ctx, `SELECT `+directoryCols+` FROM trust_directory WHERE org_id = ?
		ORDER BY user_id, provider, provider_user_id`, orgID)
	return collect(rows, err, scanDirectoryMember)
}

// PutDirectoryMemberAudited replaces the links of m's user and of m's
// (provider, provider user id) with m under the org's trust lock, and sets
// m.UpdatedAt.
func (s *Store) PutDirectoryMemberAudited(ctx context.Context, m *store.DirectoryMember, audit *store.AccessLogEntry) error {
	m.UpdatedAt = now()
	return mapErr(s.tx(ctx, func(tx conn) error {
		if err := tx.lock(ctx, lockClassTrust, m.OrgID); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `DELETE FROM trust_directory WHERE org_id = ?1
			AND (user_id = ?2 OR (provider = ?3 AND provider_user_id = ?4))`, m.OrgID, m.UserID, m.Provider, m.ProviderUserID); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `INSERT INTO trust_directory (`+directoryCols+`) VALUES (?,?,?,?,?,?,?)`,
			m.OrgID, m.UserID, m.Provider, m.ProviderUserID, m.ProviderUsername, m.CITrust, s.d.ts(m.UpdatedAt)); err != nil {
			return err
		}
		return insertAccessLog(ctx, tx, audit)
	}))
}

// DeleteDirectoryMemberAudited deletes every link of userID in org.
func (s *Store) DeleteDirectoryMemberAudited(ctx context.Context, orgID, userID string, audit *store.AccessLogEntry) (bool, error) {
	removed := false
	err := s.tx(ctx, func(tx conn) error {
		if err := tx.lock(ctx, lockClassTrust, orgID); err != nil {
			return err
		}
		res, err := tx.exec(ctx, `DELETE FROM trust_directory WHERE org_id = ? AND user_id = ?`, orgID, userID)
		if removed, err = changed(res, err); err != nil || !removed {
			return err
		}
		return insertAccessLog(ctx, tx, audit)
	})
	if err != nil {
		return false, mapErr(err)
	}
	return removed, nil
}

// FindDirectoryMember returns the member linked to (provider, providerUserID).
func (s *Store) FindDirectoryMember(ctx context.Context, orgID, provider, providerUserID string) (*store.DirectoryMember, error) {
	return scanDirectoryMember(s.queryRow(ctx, `SELECT `+directoryCols+` FROM trust_directory
		WHERE org_id = ? AND provider = ? AND provider_user_id = ?`, orgID, provider, providerUserID))
}
