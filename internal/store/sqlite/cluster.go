package sqlite

import (
	"context"
	"database/sql"
	"time"

	"kici.dev/kici/internal/store"
)

var _ store.ClusterSettingsStore = (*Store)(nil)

// versionRow is the cluster_settings row that holds the settings version.
const versionRow = "_version"

// GetClusterSettings returns the overrides and the version.
func (s *Store) GetClusterSettings(ctx context.Context) (*store.ClusterSettings, error) {
	return readClusterSettings(ctx, s.db)
}

type csQueryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

func readClusterSettings(ctx context.Context, q csQueryer) (*store.ClusterSettings, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, value, updated_at FROM cluster_settings`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cs := &store.ClusterSettings{Values: map[string]int64{}}
	for rows.Next() {
		var name string
		var v, at int64
		if err := rows.Scan(&name, &v, &at); err != nil {
			return nil, err
		}
		if name == versionRow {
			cs.Version = v
			cs.UpdatedAt = time.UnixMilli(at).UTC()
			continue
		}
		cs.Values[name] = v
	}
	return cs, rows.Err()
}

// PatchClusterSettings sets and resets knobs in one transaction.
func (s *Store) PatchClusterSettings(ctx context.Context, set map[string]int64, reset []string) (*store.ClusterSettings, error) {
	var out *store.ClusterSettings
	err := s.tx(ctx, func(tx *sql.Tx) error {
		cur, err := readClusterSettings(ctx, tx)
		if err != nil {
			return err
		}
		t := ms(now())
		changed := false
		for name, v := range set {
			if old, ok := cur.Values[name]; ok && old == v {
				continue
			}
			changed = true
			if _, err := tx.ExecContext(ctx, `INSERT INTO cluster_settings (name, value, updated_at) VALUES (?,?,?)
				ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, name, v, t); err != nil {
				return err
			}
		}
		for _, name := range reset {
			if _, ok := cur.Values[name]; !ok {
				continue
			}
			changed = true
			if _, err := tx.ExecContext(ctx, `DELETE FROM cluster_settings WHERE name = ?`, name); err != nil {
				return err
			}
		}
		if changed {
			if _, err := tx.ExecContext(ctx, `INSERT INTO cluster_settings (name, value, updated_at) VALUES (?,1,?)
				ON CONFLICT (name) DO UPDATE SET value = cluster_settings.value + 1, updated_at = excluded.updated_at`, versionRow, t); err != nil {
				return err
			}
		}
		out, err = readClusterSettings(ctx, tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
