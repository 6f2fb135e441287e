package sqlstore

import (
	"context"
	"time"

	"kici.dev/kici/internal/store"
)

var _ store.ClusterSettingsStore = (*Store)(nil)

// versionRow is the cluster_settings row that holds the settings version.
const versionRow = "_version"

// GetClusterSettings returns the overrides and the version.
func (s *Store) GetClusterSettings(ctx context.Context) (*store.ClusterSettings, error) {
	return readClusterSettings(ctx, s.conn)
}

func readClusterSettings(ctx context.Context, q conn) (*store.ClusterSettings, error) {
	rows, err := q.query(ctx, `SELECT name, value, updated_at FROM cluster_settings`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cs := &store.ClusterSettings{Values: map[string]int64{}}
	for rows.Next() {
		var name string
		var v, at int64 // updated_at is Unix milliseconds on both dialects
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
	err := s.tx(ctx, func(tx conn) error {
		// The version row is created, then locked (PostgreSQL; SQLite's
		// transaction holds the write lock), so concurrent patches serialise.
		t := now().UnixMilli()
		if _, err := tx.exec(ctx, `INSERT INTO cluster_settings (name, value, updated_at) VALUES (?, 0, ?) ON CONFLICT (name) DO NOTHING`, versionRow, t); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `SELECT 1 FROM cluster_settings WHERE name = ?`+s.d.forUpdate(), versionRow); err != nil {
			return err
		}
		cur, err := readClusterSettings(ctx, tx)
		if err != nil {
			return err
		}
		changed := false
		for name, v := range set {
			if old, ok := cur.Values[name]; ok && old == v {
				continue
			}
			changed = true
			if _, err := tx.exec(ctx, `INSERT INTO cluster_settings (name, value, updated_at) VALUES (?,?,?)
				ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, name, v, t); err != nil {
				return err
			}
		}
		for _, name := range reset {
			if _, ok := cur.Values[name]; !ok {
				continue
			}
			changed = true
			if _, err := tx.exec(ctx, `DELETE FROM cluster_settings WHERE name = ?`, name); err != nil {
				return err
			}
		}
		if changed {
			if _, err := tx.exec(ctx, `INSERT INTO cluster_settings (name, value, updated_at) VALUES (?,1,?)
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
